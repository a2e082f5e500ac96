//! Retry delays: the BACKOFF grammar and its arithmetic.
//!
//! ```text
//! exp:BASE:MAX    BASE × 2^(attempt-1), capped at MAX
//! fixed:D         always D
//! D1,D2,...,Dn    D1 after the first failure, D2 after the second, ...;
//!                 Dn again for every later one
//! ```
//! A duration is a whole number with an optional unit `ms`, `s`, `m`, `h`
//! or `d`; a bare number is milliseconds.

use std::fmt;

use crate::core::error::{printable, DqError, Result};
use crate::core::limits::{MAX_STEPS, MAX_TIME_MS};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Backoff {
    Exponential { base: u64, max: u64 },
    Fixed(u64),
    Steps(Vec<u64>),
}

impl Backoff {
    pub const DEFAULT: Backoff = Backoff::Exponential {
        base: 1_000,
        max: 3_600_000,
    };

    pub fn parse(spec: &[u8]) -> Result<Backoff> {
        let bad = |why: &str| DqError::BadBackoff(format!("'{}': {why}", printable(spec)));
        let text = std::str::from_utf8(spec).map_err(|_| bad("not text"))?;
        if let Some(rest) = text.strip_prefix("exp:") {
            let (base, max) = rest
                .split_once(':')
                .ok_or_else(|| bad("exp needs BASE:MAX"))?;
            let base = parse_duration(base).ok_or_else(|| bad("BASE is not a duration"))?;
            let max = parse_duration(max).ok_or_else(|| bad("MAX is not a duration"))?;
            if base == 0 {
                return Err(bad("BASE must be more than 0"));
            }
            if max < base {
                return Err(bad("MAX must not be less than BASE"));
            }
            return Ok(Backoff::Exponential { base, max });
        }
        if let Some(delay) = text.strip_prefix("fixed:") {
            let delay = parse_duration(delay).ok_or_else(|| bad("DELAY is not a duration"))?;
            return Ok(Backoff::Fixed(delay));
        }
        let steps = text
            .split(',')
            .map(parse_duration)
            .collect::<Option<Vec<u64>>>()
            .ok_or_else(|| bad("a step is not a duration"))?;
        if steps.len() > MAX_STEPS {
            return Err(bad("more than 64 steps"));
        }
        Ok(Backoff::Steps(steps))
    }

    /// How long to wait after failed attempt number `attempt` (1 = the
    /// first delivery failed) before the next one.
    pub fn delay(&self, attempt: u32) -> u64 {
        let index = attempt.saturating_sub(1);
        match self {
            Backoff::Exponential { base, max } => 1u64
                .checked_shl(index)
                .and_then(|factor| base.checked_mul(factor))
                .map_or(*max, |d| d.min(*max)),
            Backoff::Fixed(delay) => *delay,
            Backoff::Steps(steps) => {
                let i = (index as usize).min(steps.len().saturating_sub(1));
                steps.get(i).copied().unwrap_or(0)
            }
        }
    }
}

/// The canonical spec, with the largest unit that states each time exactly.
impl fmt::Display for Backoff {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self {
            Backoff::Exponential { base, max } => {
                write!(f, "exp:{}:{}", Duration(*base), Duration(*max))
            }
            Backoff::Fixed(delay) => write!(f, "fixed:{}", Duration(*delay)),
            Backoff::Steps(steps) => {
                for (i, step) in steps.iter().enumerate() {
                    if i > 0 {
                        f.write_str(",")?;
                    }
                    write!(f, "{}", Duration(*step))?;
                }
                Ok(())
            }
        }
    }
}

const UNITS: [(&str, u64); 5] = [
    ("d", 86_400_000),
    ("h", 3_600_000),
    ("m", 60_000),
    ("s", 1_000),
    ("ms", 1),
];

/// `15s`, `3m`, `500ms`, `500` (ms). Whole numbers only.
pub fn parse_duration(text: &str) -> Option<u64> {
    let digits_end = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (digits, unit) = text.split_at(digits_end);
    if digits.is_empty() {
        return None;
    }
    let scale = match unit {
        "" => 1,
        _ => UNITS.iter().find(|(name, _)| *name == unit)?.1,
    };
    digits
        .parse::<u64>()
        .ok()?
        .checked_mul(scale)
        .filter(|&ms| ms <= MAX_TIME_MS)
}

/// A duration in its shortest exact form: `90s` is `90s`, `120000` is `2m`.
pub struct Duration(pub u64);

impl fmt::Display for Duration {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        let ms = self.0;
        let (name, scale) = UNITS
            .iter()
            .find(|(_, scale)| ms > 0 && ms.is_multiple_of(*scale))
            .copied()
            .unwrap_or(("ms", 1));
        write!(f, "{}{name}", ms / scale)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000;
    const M: u64 = 60 * S;
    const H: u64 = 60 * M;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("15s"), Some(15 * S));
        assert_eq!(parse_duration("3m"), Some(3 * M));
        assert_eq!(parse_duration("2h"), Some(2 * H));
        assert_eq!(parse_duration("1d"), Some(24 * H));
        assert_eq!(parse_duration("250ms"), Some(250));
        assert_eq!(parse_duration("250"), Some(250));
        assert_eq!(parse_duration("0"), Some(0));
        for bad in [
            "",
            "s",
            "1.5s",
            "-1s",
            "1 s",
            "1S",
            "1w",
            "1sec",
            "99999999999999999999",
        ] {
            assert_eq!(parse_duration(bad), None, "{bad}");
        }
        assert_eq!(parse_duration("104249991374d"), None, "past 2^53 ms");
    }

    #[test]
    fn exponential_doubles_from_base_and_caps() {
        let b = Backoff::parse(b"exp:1s:1h").unwrap();
        assert_eq!(b, Backoff::DEFAULT);
        let delays: Vec<u64> = (1..=14).map(|a| b.delay(a)).collect();
        assert_eq!(&delays[..4], &[S, 2 * S, 4 * S, 8 * S]);
        assert_eq!(b.delay(12), 2048 * S);
        assert_eq!(b.delay(13), H);
        assert_eq!(b.delay(u32::MAX), H, "no overflow");
        assert_eq!(b.delay(0), S);
    }

    #[test]
    fn fixed_and_steps() {
        assert_eq!(Backoff::parse(b"fixed:30s").unwrap().delay(7), 30 * S);
        let steps = Backoff::parse(b"15s,3m,10m,30m,1h,2h,6h,15h").unwrap();
        let expected = [
            15 * S,
            3 * M,
            10 * M,
            30 * M,
            H,
            2 * H,
            6 * H,
            15 * H,
            15 * H,
            15 * H,
        ];
        for (i, want) in expected.iter().enumerate() {
            assert_eq!(steps.delay(i as u32 + 1), *want, "attempt {}", i + 1);
        }
        assert_eq!(steps.delay(u32::MAX), 15 * H);
        assert_eq!(Backoff::parse(b"500").unwrap().delay(3), 500);
    }

    #[test]
    fn bad_specs_are_refused_with_the_reason() {
        for bad in [
            &b""[..],
            b"exp:",
            b"exp:1s",
            b"exp:0:1h",
            b"exp:1h:1s",
            b"exp:1s:1h:2h",
            b"fixed:",
            b"fixed:soon",
            b"15s,,3m",
            b"15s,3x",
            b"\xff",
            b"linear:1s",
        ] {
            let err = Backoff::parse(bad).unwrap_err().to_string();
            assert!(err.starts_with("ERR BACKOFF must be"), "{err}");
        }
        let many = vec!["1s"; MAX_STEPS + 1].join(",");
        assert!(Backoff::parse(many.as_bytes()).is_err());
    }

    #[test]
    fn display_is_canonical_and_parses_back() {
        for (spec, shown) in [
            ("exp:1000:3600000", "exp:1s:1h"),
            ("fixed:90s", "fixed:90s"),
            ("fixed:0", "fixed:0ms"),
            ("15s,180s,1500ms,1d", "15s,3m,1500ms,1d"),
        ] {
            let b = Backoff::parse(spec.as_bytes()).unwrap();
            assert_eq!(b.to_string(), shown);
            assert_eq!(Backoff::parse(shown.as_bytes()).unwrap(), b);
        }
    }
}
