//! The allow-list: the only URLs the relay calls.
//!
//! Without it, anyone who can DQ.ADD to an envelope queue could make the
//! relay call any address it can reach — an internal admin port, a cloud
//! metadata endpoint. So a URL is called only if it matches a prefix
//! (`--allow https://hooks.example.com/v1/`) or a host pattern
//! (`--allow-host '*.example.com'`). Matching is on the parsed URL, never
//! on text: `https://hooks.example.com.evil.test/` does not match the
//! prefix `https://hooks.example.com/`, and dot segments are resolved
//! before the path is compared.

use reqwest::Url;

#[derive(Clone, Debug, Default)]
pub struct AllowList {
    prefixes: Vec<Prefix>,
    hosts: Vec<HostPattern>,
}

#[derive(Clone, Debug)]
struct Prefix {
    scheme: String,
    host: String,
    port: Option<u16>,
    /// Ends with `/`: a prefix `/hooks` allows `/hooks` and `/hooks/...`,
    /// not `/hooksmith`.
    path: String,
}

#[derive(Clone, Debug)]
enum HostPattern {
    Exact(String),
    /// `*.example.com`: any name ending in `.example.com`.
    Subdomains(String),
    Any,
}

/// Whether the relay may call URLs of this scheme at all.
pub fn is_http(url: &Url) -> bool {
    matches!(url.scheme(), "http" | "https")
}

impl AllowList {
    pub fn is_empty(&self) -> bool {
        self.prefixes.is_empty() && self.hosts.is_empty()
    }

    /// Adds a URL prefix: an http or https URL with a host, and no
    /// credentials, query or fragment.
    pub fn add_prefix(&mut self, prefix: &str) -> Result<(), String> {
        let url = Url::parse(prefix).map_err(|e| format!("--allow {prefix}: {e}"))?;
        if !is_http(&url) {
            return Err(format!(
                "--allow {prefix}: the scheme must be http or https"
            ));
        }
        let Some(host) = url.host_str() else {
            return Err(format!("--allow {prefix}: no host"));
        };
        if !url.username().is_empty() || url.password().is_some() {
            return Err(format!(
                "--allow {prefix}: credentials do not belong in a prefix"
            ));
        }
        if url.query().is_some() || url.fragment().is_some() {
            return Err(format!(
                "--allow {prefix}: a prefix has no query or fragment"
            ));
        }
        let mut path = url.path().to_string();
        if !path.ends_with('/') {
            path.push('/');
        }
        self.prefixes.push(Prefix {
            scheme: url.scheme().to_string(),
            host: host.to_string(),
            port: url.port_or_known_default(),
            path,
        });
        Ok(())
    }

    /// Adds a host pattern: `example.com` (that host), `*.example.com`
    /// (its subdomains) or `*` (any host), over http and https, any port.
    pub fn add_host(&mut self, pattern: &str) -> Result<(), String> {
        let pattern = pattern.trim().to_ascii_lowercase();
        let bad = |why: &str| Err(format!("--allow-host {pattern}: {why}"));
        if pattern == "*" {
            self.hosts.push(HostPattern::Any);
            return Ok(());
        }
        let (subdomains, name) = match pattern.strip_prefix("*.") {
            Some(rest) => (true, rest),
            None => (false, pattern.as_str()),
        };
        if name.is_empty() || name.contains('*') {
            return bad("use a host name, *.name or *");
        }
        if name.contains(['/', '@', '?', '#']) {
            return bad("a host pattern is a host name, not a URL (see --allow for URL prefixes)");
        }
        // Compare as the URL parser writes hosts (lower case, punycode).
        let parsed = Url::parse(&format!("http://{name}/"))
            .ok()
            .and_then(|u| u.host_str().map(str::to_string));
        let Some(host) = parsed else {
            return bad("not a valid host name");
        };
        self.hosts.push(if subdomains {
            HostPattern::Subdomains(format!(".{host}"))
        } else {
            HostPattern::Exact(host)
        });
        Ok(())
    }

    pub fn allows(&self, url: &Url) -> bool {
        if !is_http(url) {
            return false;
        }
        let Some(host) = url.host_str() else {
            return false;
        };
        let host_ok = self.hosts.iter().any(|p| match p {
            HostPattern::Any => true,
            HostPattern::Exact(h) => h == host,
            HostPattern::Subdomains(suffix) => host.ends_with(suffix.as_str()),
        });
        host_ok
            || self.prefixes.iter().any(|p| {
                p.scheme == url.scheme()
                    && p.host == host
                    && p.port == url.port_or_known_default()
                    && (url.path() == &p.path[..p.path.len() - 1]
                        || url.path().starts_with(p.path.as_str()))
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(prefixes: &[&str], hosts: &[&str]) -> AllowList {
        let mut l = AllowList::default();
        for p in prefixes {
            l.add_prefix(p).unwrap();
        }
        for h in hosts {
            l.add_host(h).unwrap();
        }
        l
    }

    fn allows(l: &AllowList, url: &str) -> bool {
        l.allows(&Url::parse(url).unwrap())
    }

    #[test]
    fn prefixes_match_parsed_urls_not_text() {
        let l = list(&["https://hooks.example.com/v1"], &[]);
        assert!(allows(&l, "https://hooks.example.com/v1"));
        assert!(allows(&l, "https://hooks.example.com/v1/orders?x=1"));
        assert!(allows(&l, "https://HOOKS.example.com:443/v1/a"));
        assert!(!allows(&l, "https://hooks.example.com/v1x"));
        assert!(!allows(&l, "https://hooks.example.com/v1/../admin"));
        assert!(!allows(&l, "https://hooks.example.com/v1/%2e%2e/admin"));
        assert!(!allows(&l, "https://hooks.example.com.evil.test/v1/"));
        assert!(!allows(&l, "https://hooks.example.com@evil.test/v1/"));
        assert!(!allows(&l, "http://hooks.example.com/v1/"));
        assert!(!allows(&l, "https://hooks.example.com:8443/v1/"));
        assert!(!allows(&l, "https://other.example.com/v1/"));
    }

    #[test]
    fn host_patterns() {
        let l = list(&[], &["*.example.com", "api.test"]);
        assert!(allows(&l, "https://a.example.com/x"));
        assert!(allows(&l, "http://a.b.example.com:8080/x"));
        assert!(!allows(&l, "https://example.com/"));
        assert!(!allows(&l, "https://evilexample.com/"));
        assert!(allows(&l, "https://API.test/"));
        assert!(!allows(&l, "https://sub.api.test/"));
        assert!(!allows(&l, "ftp://a.example.com/"));
        assert!(allows(&list(&[], &["*"]), "http://127.0.0.1:9/"));
        assert!(!allows(&list(&[], &["*"]), "file:///etc/passwd"));
    }

    #[test]
    fn bad_entries_are_refused() {
        let mut l = AllowList::default();
        assert!(l.add_prefix("hooks.example.com").is_err());
        assert!(l.add_prefix("ftp://hooks.example.com/").is_err());
        assert!(l.add_prefix("https://u:p@hooks.example.com/").is_err());
        assert!(l.add_prefix("https://hooks.example.com/?q").is_err());
        assert!(l.add_host("https://x.example.com/").is_err());
        assert!(l.add_host("a.*.example.com").is_err());
        assert!(l.add_host("*.").is_err());
        assert!(l.is_empty());
    }
}
