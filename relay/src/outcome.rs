//! What an HTTP answer means for the message.
//!
//! - 2xx: delivered, ACK — or, on a queue that keeps results (RETAIN),
//!   DQ.DONE with the answer as the result: `HTTP <status>`, a newline and
//!   the body's first [`RESULT_BYTES`] (see [`result`]).
//! - 408, 429, 5xx: the receiver may accept it later, NACK with the
//!   message's backoff — or with the delay its `Retry-After` asks for.
//! - any other 4xx: it never will (410 Gone, 404, 400, 401...), dead now.
//! - 3xx: redirects are not followed (a redirect could lead anywhere,
//!   around the allow-list), so the call cannot succeed: dead now.
//! - no answer (timeout, refused or reset connection, TLS failure): retry.
//!
//! Every failure keeps why, short, as the message's last error.

use std::time::{Duration, SystemTime};

use dq_client::Outcome;

/// How much of a failed answer's body the reason quotes.
pub const EXCERPT_BYTES: usize = 200;

/// How much of a successful answer's body its result keeps (1 KiB).
pub const RESULT_BYTES: usize = 1024;

/// The result of a delivered call, for a queue that keeps results:
/// `HTTP <status>`, and when the body is not empty a newline and its
/// first [`RESULT_BYTES`] bytes as received — cut before a character the
/// bound would split when they are UTF-8 text.
pub fn result(status: u16, body: &[u8]) -> Vec<u8> {
    let mut out = format!("HTTP {status}").into_bytes();
    if body.is_empty() {
        return out;
    }
    let mut kept = &body[..body.len().min(RESULT_BYTES)];
    if kept.len() < body.len() {
        if let Err(e) = std::str::from_utf8(kept) {
            // Only a character cut at the end: keep what comes before it.
            if e.error_len().is_none() {
                kept = &kept[..e.valid_up_to()];
            }
        }
    }
    out.push(b'\n');
    out.extend_from_slice(kept);
    out
}

/// The outcome of an HTTP answer with this status.
pub fn from_status(
    status: u16,
    retry_after: Option<&str>,
    body_excerpt: &str,
    now: SystemTime,
    max_retry_after: Duration,
) -> Outcome {
    if (200..300).contains(&status) {
        return Outcome::Ack;
    }
    let mut error = format!("HTTP {status}");
    if (300..400).contains(&status) {
        error.push_str(" (redirects are not followed)");
    }
    if !body_excerpt.is_empty() {
        error.push_str(": ");
        error.push_str(body_excerpt);
    }
    if status == 408 || status == 429 || status >= 500 {
        let delay = retry_after
            .and_then(|v| parse_retry_after(v, now))
            .map(|d| d.min(max_retry_after));
        Outcome::Nack { delay, error }
    } else {
        Outcome::Dead { error }
    }
}

/// `Retry-After`: delay-seconds or an HTTP date (RFC 9110, 10.2.3). A date
/// in the past means now; anything else unreadable is ignored (the
/// backoff applies).
pub fn parse_retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    let value = value.trim();
    if let Ok(secs) = value.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

/// The start of a body, fit for one line of a log or a reason: at most
/// `max` bytes, cut at a character boundary, control characters and
/// runs of white space made one space.
pub fn excerpt(body: &[u8], max: usize) -> String {
    let text = String::from_utf8_lossy(&body[..body.len().min(max)]);
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        let c = if c.is_control() || c.is_whitespace() {
            ' '
        } else {
            c
        };
        if c == ' ' && (out.is_empty() || out.ends_with(' ')) {
            continue;
        }
        out.push(c);
    }
    // A lossy cut may leave a trailing U+FFFD from a split character.
    while out.ends_with(' ') || (body.len() > max && out.ends_with('\u{FFFD}')) {
        out.pop();
    }
    out
}

/// Why a request got no answer: the error and its causes, one line, with
/// no URL (reqwest's error names the URL; the caller strips it first).
pub fn transport_error(e: &(dyn std::error::Error + 'static)) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut next = Some(e);
    while let Some(err) = next {
        let text = err.to_string();
        // Causes often repeat the text of the error that wraps them.
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        next = err.source();
    }
    excerpt(parts.join(": ").as_bytes(), 300)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAX: Duration = Duration::from_secs(6 * 3600);

    fn at(status: u16, retry_after: Option<&str>) -> Outcome {
        from_status(status, retry_after, "", SystemTime::UNIX_EPOCH, MAX)
    }

    #[test]
    fn the_status_decides() {
        assert_eq!(at(200, None), Outcome::Ack);
        assert_eq!(at(204, None), Outcome::Ack);
        for status in [408, 429, 500, 502, 503, 504] {
            assert!(
                matches!(at(status, None), Outcome::Nack { delay: None, .. }),
                "{status}"
            );
        }
        for status in [400, 401, 403, 404, 410, 422] {
            assert!(matches!(at(status, None), Outcome::Dead { .. }), "{status}");
        }
        assert_eq!(
            at(302, None),
            Outcome::Dead {
                error: "HTTP 302 (redirects are not followed)".into()
            }
        );
    }

    #[test]
    fn retry_after_sets_the_delay() {
        assert_eq!(
            at(429, Some("30")),
            Outcome::Nack {
                delay: Some(Duration::from_secs(30)),
                error: "HTTP 429".into()
            }
        );
        // An HTTP date: 60 s after the epoch here.
        assert!(matches!(
            at(503, Some("Thu, 01 Jan 1970 00:01:00 GMT")),
            Outcome::Nack { delay: Some(d), .. } if d == Duration::from_secs(60)
        ));
        // Unreadable: the backoff applies. Too long: capped.
        assert!(matches!(
            at(503, Some("soon")),
            Outcome::Nack { delay: None, .. }
        ));
        assert!(matches!(
            at(503, Some("99999999")),
            Outcome::Nack { delay: Some(d), .. } if d == MAX
        ));
        // Retry-After on a permanent failure changes nothing.
        assert!(matches!(at(410, Some("5")), Outcome::Dead { .. }));
    }

    #[test]
    fn dates_in_the_past_mean_now() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(120);
        assert_eq!(
            parse_retry_after("Thu, 01 Jan 1970 00:01:00 GMT", now),
            Some(Duration::ZERO)
        );
    }

    #[test]
    fn a_result_is_the_status_and_the_bodys_first_kilobyte() {
        assert_eq!(result(204, b""), b"HTTP 204");
        assert_eq!(result(200, b"{\"ok\":true}"), b"HTTP 200\n{\"ok\":true}");
        let long = vec![b'x'; 5000];
        assert_eq!(result(200, &long).len(), "HTTP 200\n".len() + RESULT_BYTES);
        // A character the bound would split is left out whole...
        let text = format!("{}é", "x".repeat(RESULT_BYTES - 1));
        let got = result(201, text.as_bytes());
        assert_eq!(&got[9..], "x".repeat(RESULT_BYTES - 1).as_bytes());
        // ...but bytes that are not text are kept as they came.
        let mut binary = vec![0xff; RESULT_BYTES - 1];
        binary.extend_from_slice("é".as_bytes());
        assert_eq!(result(200, &binary).len(), 9 + RESULT_BYTES);
    }

    #[test]
    fn reasons_quote_the_body_briefly() {
        let o = from_status(500, None, "boom", SystemTime::UNIX_EPOCH, MAX);
        assert_eq!(
            o,
            Outcome::Nack {
                delay: None,
                error: "HTTP 500: boom".into()
            }
        );
        assert_eq!(excerpt(b"  a\r\n\tb  ", 200), "a b");
        assert_eq!(excerpt("aé".as_bytes(), 2), "a");
        assert_eq!(excerpt(&[b'x'; 500], EXCERPT_BYTES).len(), EXCERPT_BYTES);
    }

    #[test]
    fn transport_errors_list_their_causes_once() {
        #[derive(Debug)]
        struct Outer(std::io::Error);
        impl std::fmt::Display for Outer {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("tcp connect error")
            }
        }
        impl std::error::Error for Outer {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                Some(&self.0)
            }
        }
        let e = Outer(std::io::Error::new(
            std::io::ErrorKind::ConnectionRefused,
            "Connection refused",
        ));
        assert_eq!(transport_error(&e), "tcp connect error: Connection refused");
    }
}
