//! What a message asks the relay to send.
//!
//! On an envelope queue the payload is a JSON object:
//!
//! ```json
//! {"url": "https://hooks.example.com/orders", "method": "POST",
//!  "headers": {"Authorization": "Bearer ..."}, "body": {"order": 42},
//!  "timeout": 5000}
//! ```
//!
//! On a queue configured with a fixed URL the payload is the body of a
//! POST to that URL. A payload that cannot be sent is a permanent failure:
//! its error names what is wrong, never a header value (it may be a
//! credential) and never the URL's credentials or query.

use std::time::Duration;

use reqwest::header::{HeaderName, HeaderValue, CONTENT_TYPE};
use reqwest::{Method, Url};
use serde_json::Value;

use crate::allow::is_http;

/// One HTTP call, before the relay adds its own headers.
#[derive(Debug)]
pub struct HttpCall {
    pub url: Url,
    pub method: Method,
    pub headers: Vec<(HeaderName, HeaderValue)>,
    pub body: Vec<u8>,
    /// The message's own timeout, if it gave one.
    pub timeout: Option<Duration>,
}

/// Headers a message may not set: those that frame the request (the relay
/// and the HTTP library own them), `Host` (it would let a message reach
/// another virtual host behind an allowed address) and the relay's own
/// `X-DQ-*` (a message must not forge its signature or id).
fn reserved(name: &HeaderName) -> bool {
    matches!(
        name.as_str(),
        "host"
            | "content-length"
            | "transfer-encoding"
            | "connection"
            | "keep-alive"
            | "upgrade"
            | "te"
            | "trailer"
            | "expect"
    ) || name.as_str().starts_with("proxy-")
        || name.as_str().starts_with("x-dq-")
}

fn json_error(e: &serde_json::Error) -> String {
    // serde_json's syntax errors name a position, not the text, so they
    // cannot leak a credential from the payload.
    format!(
        "the payload is not a JSON object (line {}, column {})",
        e.line(),
        e.column()
    )
}

/// A timeout given as milliseconds (`5000`) or a duration (`"5s"`).
fn parse_timeout(v: &Value) -> Result<Duration, String> {
    let d = match v {
        Value::Number(n) => n.as_u64().map(Duration::from_millis),
        Value::String(s) => humantime::parse_duration(s).ok(),
        _ => None,
    };
    match d {
        Some(d) if !d.is_zero() => Ok(d),
        _ => Err(
            "timeout must be a positive number of milliseconds or a duration such as \"10s\""
                .into(),
        ),
    }
}

/// Reads an envelope; `Err` says why it can never be sent.
pub fn parse_envelope(payload: &[u8]) -> Result<HttpCall, String> {
    let value: Value = serde_json::from_slice(payload).map_err(|e| json_error(&e))?;
    let Value::Object(mut fields) = value else {
        return Err("the payload is not a JSON object".into());
    };
    let url = match fields.remove("url") {
        Some(Value::String(s)) => s,
        Some(_) => return Err("url must be a string".into()),
        None => return Err("the payload has no url".into()),
    };
    // The text is not echoed: it may hold credentials.
    let url = Url::parse(&url).map_err(|e| format!("url is not a valid URL ({e})"))?;
    if !is_http(&url) || url.host_str().is_none() {
        return Err("url must be an http or https URL with a host".into());
    }
    let method = match fields.remove("method") {
        None | Some(Value::Null) => Method::POST,
        Some(Value::String(m)) => Method::from_bytes(m.to_ascii_uppercase().as_bytes())
            .map_err(|_| "method is not a valid HTTP method".to_string())?,
        Some(_) => return Err("method must be a string".into()),
    };
    let mut headers = Vec::new();
    match fields.remove("headers") {
        None | Some(Value::Null) => {}
        Some(Value::Object(map)) => {
            for (name, value) in map {
                let header = HeaderName::from_bytes(name.as_bytes())
                    .map_err(|_| format!("header name {name:?} is not valid"))?;
                if reserved(&header) {
                    return Err(format!(
                        "header {name:?} is set by the relay, not by a message"
                    ));
                }
                let Value::String(value) = value else {
                    return Err(format!("header {name:?} must have a string value"));
                };
                let value = HeaderValue::from_str(&value)
                    .map_err(|_| format!("header {name:?} has a value that is not valid"))?;
                headers.push((header, value));
            }
        }
        Some(_) => return Err("headers must be an object of strings".into()),
    }
    let has_type = headers.iter().any(|(n, _)| n == CONTENT_TYPE);
    let (body, default_type) = match fields.remove("body") {
        None | Some(Value::Null) => (Vec::new(), None),
        Some(Value::String(s)) => (s.into_bytes(), Some("text/plain; charset=utf-8")),
        Some(json) => (
            serde_json::to_vec(&json).map_err(|e| json_error(&e))?,
            Some("application/json"),
        ),
    };
    if let (false, Some(t)) = (has_type, default_type) {
        headers.push((CONTENT_TYPE, HeaderValue::from_static(t)));
    }
    let timeout = match fields.remove("timeout") {
        None | Some(Value::Null) => None,
        Some(v) => Some(parse_timeout(&v)?),
    };
    Ok(HttpCall {
        url,
        method,
        headers,
        body,
        timeout,
    })
}

/// A fixed-URL queue's call: POST the payload as it is. It is JSON to
/// most webhook receivers, so it says so when it parses as JSON.
pub fn fixed(url: &Url, payload: Vec<u8>) -> HttpCall {
    let content_type = if serde_json::from_slice::<serde::de::IgnoredAny>(&payload).is_ok() {
        "application/json"
    } else {
        "application/octet-stream"
    };
    HttpCall {
        url: url.clone(),
        method: Method::POST,
        headers: vec![(CONTENT_TYPE, HeaderValue::from_static(content_type))],
        body: payload,
        timeout: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header<'a>(call: &'a HttpCall, name: &str) -> Option<&'a str> {
        call.headers
            .iter()
            .find(|(n, _)| n.as_str() == name)
            .and_then(|(_, v)| v.to_str().ok())
    }

    #[test]
    fn a_full_envelope() {
        let call = parse_envelope(
            br#"{"url":"https://h.example.com/a?b=1","method":"put",
                "headers":{"Authorization":"Bearer t","X-Order":"42"},
                "body":{"order":42},"timeout":"2s","event":"ignored"}"#,
        )
        .unwrap();
        assert_eq!(call.url.as_str(), "https://h.example.com/a?b=1");
        assert_eq!(call.method, Method::PUT);
        assert_eq!(call.body, br#"{"order":42}"#);
        assert_eq!(header(&call, "authorization"), Some("Bearer t"));
        assert_eq!(header(&call, "content-type"), Some("application/json"));
        assert_eq!(call.timeout, Some(Duration::from_secs(2)));
    }

    #[test]
    fn defaults_and_string_bodies() {
        let call = parse_envelope(br#"{"url":"http://h/"}"#).unwrap();
        assert_eq!(call.method, Method::POST);
        assert!(call.body.is_empty());
        assert_eq!(header(&call, "content-type"), None);
        assert_eq!(call.timeout, None);
        let call = parse_envelope(
            br#"{"url":"http://h/","body":"a=1","headers":{"Content-Type":"application/x-www-form-urlencoded"},"timeout":1500}"#,
        )
        .unwrap();
        assert_eq!(call.body, b"a=1");
        assert_eq!(
            header(&call, "content-type"),
            Some("application/x-www-form-urlencoded")
        );
        assert_eq!(call.timeout, Some(Duration::from_millis(1500)));
        let call = parse_envelope(br#"{"url":"http://h/","body":"hi"}"#).unwrap();
        assert_eq!(
            header(&call, "content-type"),
            Some("text/plain; charset=utf-8")
        );
    }

    #[test]
    fn bad_envelopes_say_why_without_echoing_secrets() {
        for (payload, why) in [
            (&b"not json"[..], "not a JSON object (line 1, column 2)"),
            (b"[1]", "not a JSON object"),
            (b"{}", "has no url"),
            (b"{\"url\":5}", "url must be a string"),
            (b"{\"url\":\"https://u:secret@\"}", "not a valid URL"),
            (b"{\"url\":\"file:///etc/passwd\"}", "http or https"),
            (b"{\"url\":\"http://h/\",\"method\":\"A B\"}", "method"),
            (
                b"{\"url\":\"http://h/\",\"headers\":\"Bearer secret\"}",
                "object of strings",
            ),
            (
                b"{\"url\":\"http://h/\",\"headers\":{\"Host\":\"x\"}}",
                "set by the relay",
            ),
            (
                b"{\"url\":\"http://h/\",\"headers\":{\"X-DQ-Signature\":\"x\"}}",
                "set by the relay",
            ),
            (
                b"{\"url\":\"http://h/\",\"headers\":{\"A\":\"secret\\n\"}}",
                "value that is not valid",
            ),
            (
                b"{\"url\":\"http://h/\",\"headers\":{\"A\":1}}",
                "string value",
            ),
            (b"{\"url\":\"http://h/\",\"timeout\":0}", "timeout"),
            (b"{\"url\":\"http://h/\",\"timeout\":\"soon\"}", "timeout"),
        ] {
            let e = parse_envelope(payload).unwrap_err();
            assert!(e.contains(why), "{e:?} should say {why:?}");
            assert!(!e.contains("secret"), "{e:?} echoes a secret");
        }
    }

    #[test]
    fn fixed_url_bodies() {
        let url = Url::parse("http://h/x").unwrap();
        let call = fixed(&url, br#"{"a":1}"#.to_vec());
        assert_eq!(header(&call, "content-type"), Some("application/json"));
        assert_eq!(call.method, Method::POST);
        let call = fixed(&url, b"\xff raw".to_vec());
        assert_eq!(
            header(&call, "content-type"),
            Some("application/octet-stream")
        );
        assert_eq!(call.body, b"\xff raw");
    }
}
