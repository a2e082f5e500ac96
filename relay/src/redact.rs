//! URLs as logs and dead-letter reasons may show them.
//!
//! A message's URL can carry credentials (`https://user:pass@host/`) or
//! tokens in its query string; neither may reach a log line or a reason
//! that anyone with DQ.GET can read. What is shown is scheme, host, port
//! and path.

use reqwest::Url;

/// `scheme://host[:port]/path`: no user, password, query or fragment.
pub fn url(url: &Url) -> String {
    let mut shown = format!("{}://{}", url.scheme(), url.host_str().unwrap_or(""));
    if let Some(port) = url.port() {
        shown.push(':');
        shown.push_str(&port.to_string());
    }
    shown.push_str(url.path());
    shown
}

/// A printable header value: bytes outside visible ASCII, and `%`, as
/// `%XX`. Ids and queue names are any bytes; header values may not be.
pub fn header_text(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    for &b in bytes {
        if (0x21..=0x7e).contains(&b) && b != b'%' {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_query_and_fragment_are_dropped() {
        let u =
            Url::parse("https://user:pa55@hooks.example.com:8443/a/b?token=s3cret#frag").unwrap();
        assert_eq!(url(&u), "https://hooks.example.com:8443/a/b");
        let u = Url::parse("http://[::1]/x?y").unwrap();
        assert_eq!(url(&u), "http://[::1]/x");
        let u = Url::parse("https://h.example.com:443/").unwrap();
        assert_eq!(url(&u), "https://h.example.com/");
    }

    #[test]
    fn header_text_escapes_what_a_header_cannot_carry() {
        assert_eq!(header_text(b"order-42"), "order-42");
        assert_eq!(header_text(b"a b%\n\xff"), "a%20b%25%0A%FF");
    }
}
