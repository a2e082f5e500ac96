//! Pure helpers of the pages: bytes in URLs, payloads shown safely, times.
//!
//! Nothing here writes HTML: maud escapes every string these functions
//! return when a page interpolates it.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use dq_client::State;
use percent_encoding::{percent_decode, percent_encode, AsciiSet, NON_ALPHANUMERIC};

/// Everything but the unreserved characters of RFC 3986 is encoded, so a
/// queue name or id of any bytes (`/`, `?`, `#`, `%`, NUL, invalid UTF-8)
/// makes one path segment or query value.
const SEGMENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// `bytes` as one percent-encoded URL path segment or query value.
pub fn url_part(bytes: &[u8]) -> String {
    percent_encode(bytes, SEGMENT).to_string()
}

/// A percent-encoded segment back to its bytes (`%ZZ` stays as it is).
pub fn decode_part(part: &str) -> Vec<u8> {
    percent_decode(part.as_bytes()).collect()
}

/// An `application/x-www-form-urlencoded` body or query string, as byte
/// pairs (`+` is a space). A field without `=` has an empty value.
pub fn parse_form(body: &[u8]) -> Vec<(String, Vec<u8>)> {
    body.split(|&b| b == b'&')
        .filter(|f| !f.is_empty())
        .map(|field| {
            let (k, v) = match field.iter().position(|&b| b == b'=') {
                Some(at) => (&field[..at], &field[at + 1..]),
                None => (field, &b""[..]),
            };
            let plus = |s: &[u8]| -> Vec<u8> {
                let s: Vec<u8> = s
                    .iter()
                    .map(|&b| if b == b'+' { b' ' } else { b })
                    .collect();
                percent_decode(&s).collect()
            };
            (String::from_utf8_lossy(&plus(k)).into_owned(), plus(v))
        })
        .collect()
}

/// The first value of `name` in a parsed form.
pub fn form_value<'a>(form: &'a [(String, Vec<u8>)], name: &str) -> Option<&'a [u8]> {
    form.iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_slice())
}

/// Bytes as text for a page: valid UTF-8 as it is, anything else lossily
/// (U+FFFD for each bad sequence). Escaping is the template's job.
pub fn lossy(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A short name for a list or a title: control characters shown as `\xNN`,
/// invalid UTF-8 as `\xNN`, cut at `max` characters with `…`.
pub fn label(bytes: &[u8], max: usize) -> String {
    let mut out = String::new();
    let mut shown = 0;
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            if shown >= max {
                out.push('…');
                return out;
            }
            if c.is_control() {
                out.push_str(&format!("\\x{:02x}", c as u32));
            } else {
                out.push(c);
            }
            shown += 1;
        }
        for b in chunk.invalid() {
            if shown >= max {
                out.push('…');
                return out;
            }
            out.push_str(&format!("\\x{b:02x}"));
            shown += 1;
        }
    }
    if bytes.is_empty() {
        out.push_str("(empty)");
    }
    out
}

/// How a payload is shown.
#[derive(Debug, PartialEq, Eq)]
pub enum Payload {
    Empty,
    /// A JSON object or array, re-indented (key order and numbers kept).
    Json(String),
    /// UTF-8 text without control characters other than tab and newlines.
    Text(String),
    /// Anything else: a hex dump and the lossy text.
    Binary {
        hex: String,
        text: String,
    },
}

/// The most of a payload a page shows.
pub const PAYLOAD_SHOWN: usize = 256 * 1024;

pub fn payload(bytes: &[u8]) -> Payload {
    if bytes.is_empty() {
        return Payload::Empty;
    }
    let bytes = &bytes[..bytes.len().min(PAYLOAD_SHOWN)];
    if let Ok(text) = std::str::from_utf8(bytes) {
        let trimmed = text.trim_start();
        if (trimmed.starts_with('{') || trimmed.starts_with('['))
            && serde_json::from_str::<serde_json::Value>(text).is_ok()
        {
            return Payload::Json(pretty_json(text));
        }
        if !text
            .chars()
            .any(|c| c.is_control() && !matches!(c, '\n' | '\r' | '\t'))
        {
            return Payload::Text(text.to_string());
        }
    }
    Payload::Binary {
        hex: hex_dump(bytes),
        text: lossy(bytes),
    }
}

/// Re-indents valid JSON by two spaces, keeping its text otherwise as it
/// is (serde_json's Value would sort keys and reformat numbers).
pub fn pretty_json(json: &str) -> String {
    let chars: Vec<char> = json.chars().collect();
    let mut out = String::with_capacity(json.len() * 2);
    let mut depth = 0usize;
    let mut i = 0;
    let newline = |out: &mut String, depth: usize| {
        out.push('\n');
        for _ in 0..depth {
            out.push_str("  ");
        }
    };
    while i < chars.len() {
        let c = chars[i];
        match c {
            '"' => {
                out.push(c);
                i += 1;
                while i < chars.len() {
                    let s = chars[i];
                    out.push(s);
                    i += 1;
                    if s == '\\' {
                        if let Some(&n) = chars.get(i) {
                            out.push(n);
                            i += 1;
                        }
                    } else if s == '"' {
                        break;
                    }
                }
                continue;
            }
            '{' | '[' => {
                out.push(c);
                let close = if c == '{' { '}' } else { ']' };
                let mut j = i + 1;
                while j < chars.len() && chars[j].is_whitespace() {
                    j += 1;
                }
                if chars.get(j) == Some(&close) {
                    out.push(close);
                    i = j + 1;
                    continue;
                }
                depth += 1;
                newline(&mut out, depth);
            }
            '}' | ']' => {
                depth = depth.saturating_sub(1);
                newline(&mut out, depth);
                out.push(c);
            }
            ',' => {
                out.push(c);
                newline(&mut out, depth);
            }
            ':' => out.push_str(": "),
            c if c.is_whitespace() => {}
            c => out.push(c),
        }
        i += 1;
    }
    out
}

/// `xxd`-style: offset, 16 bytes in hex, the printable ASCII of them.
pub fn hex_dump(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 4 + 16);
    for (n, line) in bytes.chunks(16).enumerate() {
        out.push_str(&format!("{:08x} ", n * 16));
        for i in 0..16 {
            match line.get(i) {
                Some(b) => out.push_str(&format!(" {b:02x}")),
                None => out.push_str("   "),
            }
        }
        out.push_str("  ");
        for &b in line {
            out.push(if (0x20..0x7f).contains(&b) {
                char::from(b)
            } else {
                '.'
            });
        }
        out.push('\n');
    }
    out
}

pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// A Unix-ms time as `2026-11-23 23:16:05 UTC`.
pub fn time(ms: u64) -> String {
    let t = UNIX_EPOCH + Duration::from_millis(ms);
    let s = humantime::format_rfc3339_seconds(t).to_string();
    s.replacen('T', " ", 1).replace('Z', " UTC")
}

/// `in 5s`, `3m 2s ago`, `now`, relative to `now`.
pub fn relative(ms: u64, now: u64) -> String {
    if ms.abs_diff(now) < 1000 {
        return "now".to_string();
    }
    if ms > now {
        format!("in {}", age(ms - now))
    } else {
        format!("{} ago", age(now - ms))
    }
}

/// A message's time as what it means in `state`: `due in 5m` (delayed,
/// or ready since `due 3m ago`), `lease ends in 20s` (in flight; `lease
/// ended 2s ago` when the timer has not reclaimed it yet), `died 3m ago`,
/// `finished 1m ago` (done).
/// A bare `now` said none of that, and showed a ready and a dead message
/// alike.
pub fn when(state: State, ms: u64, now: u64) -> String {
    let rel = relative(ms, now);
    match state {
        State::Delayed | State::Ready => format!("due {rel}"),
        State::Inflight if ms < now && rel != "now" => format!("lease ended {rel}"),
        State::Inflight => format!("lease ends {rel}"),
        State::Dead if rel == "now" => "died just now".to_string(),
        State::Dead => format!("died {rel}"),
        State::Done if rel == "now" => "finished just now".to_string(),
        State::Done => format!("finished {rel}"),
    }
}

/// [`when`]'s time itself, for a tooltip: `due at 2026-11-23 23:16:05 UTC`.
pub fn when_at(state: State, ms: u64) -> String {
    let what = match state {
        State::Delayed | State::Ready => "due at",
        State::Inflight => "lease ends at",
        State::Dead => "died at",
        State::Done => "finished at",
    };
    format!("{what} {}", time(ms))
}

/// A duration in ms, short and rounded: `850ms`, `12s`, `3m 2s`, `5h 1m`, `2d 3h`.
pub fn age(ms: u64) -> String {
    let s = ms / 1000;
    match s {
        0 => format!("{ms}ms"),
        1..=59 => format!("{s}s"),
        60..=3599 => format!("{}m {}s", s / 60, s % 60),
        3600..=86399 => format!("{}h {}m", s / 3600, s % 3600 / 60),
        _ => format!("{}d {}h", s / 86400, s % 86400 / 3600),
    }
}

/// A rate for a table: `0`, `0.5`, `12`, `1.2k`.
pub fn rate(per_s: f64) -> String {
    if per_s <= 0.0 {
        "0".to_string()
    } else if per_s < 10.0 {
        format!("{per_s:.1}")
    } else if per_s < 10_000.0 {
        format!("{per_s:.0}")
    } else {
        format!("{:.1}k", per_s / 1000.0)
    }
}

/// 1234567 as `1,234,567`.
pub fn count(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn any_bytes_round_trip_through_a_url_segment() {
        let odd = b"a/b?c#d%e f+\x00\xff<script>";
        let enc = url_part(odd);
        assert!(enc
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-._~%".contains(&b)));
        assert_eq!(decode_part(&enc), odd);
        assert_eq!(url_part(b"orders-1.v2~x_y"), "orders-1.v2~x_y");
        assert_eq!(url_part(b""), "");
    }

    #[test]
    fn forms_decode_to_bytes() {
        let f = parse_form(b"op=redrive&id=a%2Fb%FF&msg=hello+world&flag&=x");
        assert_eq!(form_value(&f, "op"), Some(&b"redrive"[..]));
        assert_eq!(form_value(&f, "id"), Some(&b"a/b\xff"[..]));
        assert_eq!(form_value(&f, "msg"), Some(&b"hello world"[..]));
        assert_eq!(form_value(&f, "flag"), Some(&b""[..]));
        assert_eq!(form_value(&f, "missing"), None);
    }

    #[test]
    fn payloads_json_text_and_binary() {
        assert_eq!(payload(b""), Payload::Empty);
        assert_eq!(
            payload(br#"{"b":1,"a":[1, 2.50],"e":{},"s":"x,\"{y"}"#),
            Payload::Json(
                "{\n  \"b\": 1,\n  \"a\": [\n    1,\n    2.50\n  ],\n  \"e\": {},\n  \"s\": \"x,\\\"{y\"\n}"
                    .to_string()
            )
        );
        assert_eq!(
            payload(b"<script>window.__pwned=1</script>"),
            Payload::Text("<script>window.__pwned=1</script>".to_string())
        );
        // Not valid JSON: text.
        assert_eq!(payload(b"{nope"), Payload::Text("{nope".to_string()));
        match payload(b"\x00\x01ab\xff") {
            Payload::Binary { hex, text } => {
                assert!(hex.starts_with("00000000  00 01 61 62 ff"));
                assert!(hex.trim_end().ends_with("..ab."));
                assert_eq!(text, "\u{0}\u{1}ab\u{fffd}");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn labels_show_control_and_invalid_bytes() {
        assert_eq!(label(b"orders", 10), "orders");
        assert_eq!(label(b"a\nb\xff", 10), "a\\x0ab\\xff");
        assert_eq!(label(b"abcdef", 3), "abc…");
        assert_eq!(label(b"", 3), "(empty)");
    }

    #[test]
    fn times_and_numbers() {
        assert_eq!(time(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(relative(10_000, 5_000), "in 5s");
        assert_eq!(relative(5_000, 200_000), "3m 15s ago");
        assert_eq!(relative(5_000, 5_500), "now");
        assert_eq!(age(500), "500ms");
        assert_eq!(age(90_000_000), "1d 1h");
        assert_eq!(rate(0.0), "0");
        assert_eq!(rate(2.25), "2.2");
        assert_eq!(rate(250.0), "250");
        assert_eq!(count(1234567), "1,234,567");
        assert_eq!(count(12), "12");
    }

    #[test]
    fn a_time_says_what_it_is_in_each_state() {
        let now = 1_000_000;
        assert_eq!(when(State::Delayed, now + 300_000, now), "due in 5m 0s");
        assert_eq!(when(State::Ready, now - 180_000, now), "due 3m 0s ago");
        assert_eq!(when(State::Ready, now, now), "due now");
        assert_eq!(
            when(State::Inflight, now + 20_000, now),
            "lease ends in 20s"
        );
        assert_eq!(
            when(State::Inflight, now - 2_000, now),
            "lease ended 2s ago"
        );
        assert_eq!(when(State::Inflight, now - 500, now), "lease ends now");
        assert_eq!(when(State::Dead, now - 180_000, now), "died 3m 0s ago");
        assert_eq!(when(State::Dead, now, now), "died just now");
        assert_eq!(when_at(State::Dead, 0), "died at 1970-01-01 00:00:00 UTC");
        assert_eq!(
            when_at(State::Inflight, 0),
            "lease ends at 1970-01-01 00:00:00 UTC"
        );
        assert_eq!(when_at(State::Ready, 0), "due at 1970-01-01 00:00:00 UTC");
    }
}
