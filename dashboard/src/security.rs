//! Who may look (bearer token or basic auth) and which POSTs are the
//! dashboard's own (CSRF).

use base64::Engine;
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

/// Equal without an early exit, so a guess's timing says nothing.
pub fn same(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The credentials the dashboard asks for. Either one opens every page,
/// /metrics and /healthz; with neither, nothing is asked.
#[derive(Clone, Default)]
pub struct Auth {
    token: Option<String>,
    /// `user:password`, base64, as an `Authorization: Basic` header holds it.
    basic: Option<String>,
}

impl Auth {
    pub fn new(token: Option<String>, basic: Option<&str>) -> Result<Auth, String> {
        if token.as_deref() == Some("") {
            return Err("--token must not be empty".into());
        }
        let basic = match basic {
            None => None,
            Some(spec) => {
                let Some((user, password)) = spec.split_once(':') else {
                    return Err("--basic-auth must be USER:PASSWORD".into());
                };
                if user.is_empty() || password.is_empty() {
                    return Err("--basic-auth needs a user and a password (USER:PASSWORD)".into());
                }
                Some(base64::engine::general_purpose::STANDARD.encode(spec))
            }
        };
        Ok(Auth { token, basic })
    }

    pub fn required(&self) -> bool {
        self.token.is_some() || self.basic.is_some()
    }

    pub fn uses_basic(&self) -> bool {
        self.basic.is_some()
    }

    /// Whether an `Authorization` header value lets the request in.
    pub fn allows(&self, authorization: Option<&[u8]>) -> bool {
        if !self.required() {
            return true;
        }
        let Some(value) = authorization.and_then(|v| std::str::from_utf8(v).ok()) else {
            return false;
        };
        let Some((scheme, credentials)) = value.trim().split_once(' ') else {
            return false;
        };
        let credentials = credentials.trim().as_bytes();
        let expected = if scheme.eq_ignore_ascii_case("bearer") {
            &self.token
        } else if scheme.eq_ignore_ascii_case("basic") {
            &self.basic
        } else {
            return false;
        };
        expected
            .as_deref()
            .is_some_and(|e| same(e.as_bytes(), credentials))
    }
}

type HmacSha256 = Hmac<Sha256>;

/// CSRF tokens, double-submit style: each browser gets a random cookie
/// (`dq_csrf`), and each form carries HMAC-SHA256(secret, cookie) under a
/// secret drawn at start. Another site can make a browser send the cookie
/// but cannot read a page to learn the token, nor forge it without the
/// secret. A restart changes the secret: forms opened before it are
/// refused (reload the page).
#[derive(Clone)]
pub struct Csrf {
    secret: [u8; 32],
}

pub const COOKIE: &str = "dq_csrf";

impl Csrf {
    pub fn new() -> Result<Csrf, String> {
        let mut secret = [0u8; 32];
        getrandom::fill(&mut secret)
            .map_err(|e| format!("no randomness for the CSRF secret: {e}"))?;
        Ok(Csrf { secret })
    }

    #[cfg(test)]
    pub fn with_secret(secret: [u8; 32]) -> Csrf {
        Csrf { secret }
    }

    /// A new cookie value: 16 random bytes in hex.
    pub fn new_cookie() -> String {
        let mut raw = [0u8; 16];
        // Without randomness the cookie is still bound to the secret; a
        // fixed value only loses the per-browser part.
        let _ = getrandom::fill(&mut raw);
        hex(&raw)
    }

    /// Whether a cookie value looks like one this dashboard sets.
    pub fn valid_cookie(value: &str) -> bool {
        value.len() == 32 && value.bytes().all(|b| b.is_ascii_hexdigit())
    }

    pub fn token(&self, cookie: &str) -> String {
        hex(&self.mac(cookie))
    }

    fn mac(&self, cookie: &str) -> Vec<u8> {
        // An HMAC key of any length is accepted.
        let mut mac = match HmacSha256::new_from_slice(&self.secret) {
            Ok(m) => m,
            Err(_) => return Vec::new(),
        };
        mac.update(b"dq-dashboard csrf\0");
        mac.update(cookie.as_bytes());
        mac.finalize().into_bytes().to_vec()
    }

    /// Whether `token` (from the form) belongs to `cookie` (from the request).
    pub fn check(&self, cookie: Option<&str>, token: Option<&[u8]>) -> bool {
        let (Some(cookie), Some(token)) = (cookie, token) else {
            return false;
        };
        if !Csrf::valid_cookie(cookie) || token.is_empty() {
            return false;
        }
        same(self.token(cookie).as_bytes(), token)
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A cookie's value from a `Cookie` header.
pub fn cookie<'a>(header: Option<&'a str>, name: &str) -> Option<&'a str> {
    header?
        .split(';')
        .filter_map(|c| c.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v)
}

/// A POST's Origin (or, without one, its Referer) must be this host: the
/// second line behind the token. Requests that send neither pass (older
/// clients, curl); the token still has to match.
pub fn same_origin(host: Option<&str>, origin: Option<&str>, referer: Option<&str>) -> bool {
    let Some(host) = host else {
        return origin.is_none() && referer.is_none();
    };
    let matches = |url: &str| {
        let rest = url
            .strip_prefix("http://")
            .or_else(|| url.strip_prefix("https://"));
        rest.is_some_and(|r| {
            let authority = r.split(['/', '?', '#']).next().unwrap_or("");
            authority.eq_ignore_ascii_case(host)
        })
    };
    match (origin, referer) {
        // Some browsers send `Origin: null` from privacy-sensitive contexts.
        (Some(o), _) => matches(o),
        (None, Some(r)) => matches(r),
        (None, None) => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_auth_configured_lets_everyone_in() {
        let a = Auth::new(None, None).unwrap();
        assert!(!a.required());
        assert!(a.allows(None));
    }

    #[test]
    fn bearer_token() {
        let a = Auth::new(Some("s3cret".into()), None).unwrap();
        assert!(a.allows(Some(b"Bearer s3cret")));
        assert!(a.allows(Some(b"bearer  s3cret ")));
        assert!(!a.allows(Some(b"Bearer s3cre")));
        assert!(!a.allows(Some(b"Bearer")));
        assert!(!a.allows(Some(b"Basic czNjcmV0")));
        assert!(!a.allows(None));
        assert!(!a.allows(Some(b"Bearer \xff")));
        assert!(Auth::new(Some(String::new()), None).is_err());
    }

    #[test]
    fn basic_auth() {
        let a = Auth::new(None, Some("admin:pa:ss")).unwrap();
        // base64("admin:pa:ss")
        assert!(a.allows(Some(b"Basic YWRtaW46cGE6c3M=")));
        assert!(!a.allows(Some(b"Basic YWRtaW46cGE6c3M")));
        assert!(!a.allows(Some(b"Bearer admin:pa:ss")));
        assert!(Auth::new(None, Some("admin")).is_err());
        assert!(Auth::new(None, Some(":pw")).is_err());
        assert!(Auth::new(None, Some("user:")).is_err());
        let both = Auth::new(Some("t".into()), Some("u:p")).unwrap();
        assert!(both.allows(Some(b"Bearer t")));
        assert!(both.allows(Some(b"Basic dTpw")));
    }

    #[test]
    fn csrf_token_is_bound_to_cookie_and_secret() {
        let csrf = Csrf::with_secret([7; 32]);
        let cookie = "0123456789abcdef0123456789abcdef";
        let token = csrf.token(cookie);
        assert!(csrf.check(Some(cookie), Some(token.as_bytes())));
        let other = "ffffffffffffffffffffffffffffffff";
        assert!(!csrf.check(Some(other), Some(token.as_bytes())));
        assert!(!csrf.check(None, Some(token.as_bytes())));
        assert!(!csrf.check(Some(cookie), None));
        assert!(!csrf.check(Some(cookie), Some(b"")));
        assert!(!Csrf::with_secret([8; 32]).check(Some(cookie), Some(token.as_bytes())));
        assert!(!csrf.check(Some("short"), Some(csrf.token("short").as_bytes())));
        assert!(Csrf::valid_cookie(&Csrf::new_cookie()));
    }

    #[test]
    fn cookies_and_origins() {
        assert_eq!(cookie(Some("a=1; dq_csrf=xyz; b=2"), COOKIE), Some("xyz"));
        assert_eq!(cookie(Some("a=1"), COOKIE), None);
        assert_eq!(cookie(None, COOKIE), None);
        let host = Some("127.0.0.1:7070");
        assert!(same_origin(host, Some("http://127.0.0.1:7070"), None));
        assert!(same_origin(host, None, Some("http://127.0.0.1:7070/q/x")));
        assert!(same_origin(host, None, None));
        assert!(!same_origin(host, Some("http://evil.example"), None));
        assert!(!same_origin(host, Some("null"), None));
        assert!(!same_origin(
            host,
            None,
            Some("http://127.0.0.1:7070.evil/")
        ));
        assert!(!same_origin(None, Some("http://x"), None));
    }
}
