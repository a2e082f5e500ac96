//! The module's load-time arguments (`loadmodule libdq.so lease-ms 5000
//! backoff 15s,1m`): the start values of `dq.lease-ms`, `dq.max-attempts`,
//! `dq.backoff` and `dq.retain-ms`, with the bounds CONFIG SET enforces too.

use crate::core::backoff::Backoff;
use crate::core::error::{printable, DqError, Result};
use crate::core::limits::MAX_TIME_MS;
use crate::core::policy::{DEFAULT_LEASE_MS, DEFAULT_MAX_ATTEMPTS};
use crate::grammar::args::parse_in_range;

pub const LEASE_MS_RANGE: (i64, i64) = (1, MAX_TIME_MS as i64);
pub const MAX_ATTEMPTS_RANGE: (i64, i64) = (1, i32::MAX as i64);
pub const RETAIN_MS_RANGE: (i64, i64) = (0, MAX_TIME_MS as i64);

/// The start values of the settings, from load arguments
/// (`loadmodule libdq.so lease-ms 5000 backoff 15s,1m`) or the defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadValues {
    pub lease_ms: i64,
    pub max_attempts: i64,
    pub backoff: String,
    pub retain_ms: i64,
}

/// Reads load arguments: `name value` pairs naming a setting. Unknown
/// names, missing values and bad values are refused, so a typo stops the
/// module from loading instead of being ignored.
pub fn load_values(args: &[&[u8]]) -> Result<LoadValues> {
    let mut values = LoadValues {
        lease_ms: DEFAULT_LEASE_MS as i64,
        max_attempts: DEFAULT_MAX_ATTEMPTS as i64,
        backoff: Backoff::DEFAULT.to_string(),
        retain_ms: 0,
    };
    if !args.len().is_multiple_of(2) {
        return Err(DqError::MissingValue("the last load argument"));
    }
    for pair in args.chunks(2) {
        let (name, value) = (pair[0], pair[1]);
        match name {
            b"lease-ms" => {
                let (min, max) = LEASE_MS_RANGE;
                values.lease_ms = parse_in_range("lease-ms", LEASE_EXPECTED, value, min, max)?;
            }
            b"max-attempts" => {
                let (min, max) = MAX_ATTEMPTS_RANGE;
                values.max_attempts =
                    parse_in_range("max-attempts", ATTEMPTS_EXPECTED, value, min, max)?;
            }
            b"backoff" => values.backoff = Backoff::parse(value)?.to_string(),
            b"retain-ms" => {
                let (min, max) = RETAIN_MS_RANGE;
                values.retain_ms = parse_in_range("retain-ms", RETAIN_EXPECTED, value, min, max)?;
            }
            _ => return Err(DqError::UnknownOption(printable(name))),
        }
    }
    Ok(values)
}

const LEASE_EXPECTED: &str = "a positive integer number of milliseconds";
const ATTEMPTS_EXPECTED: &str = "an integer from 1 to 2147483647";
const RETAIN_EXPECTED: &str =
    "a non-negative integer number of milliseconds (0: done messages are not kept)";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn load_arguments_are_checked() {
        let v = load_values(&[]).unwrap();
        assert_eq!(
            (v.lease_ms, v.max_attempts, v.backoff.as_str()),
            (30_000, 16, "exp:1s:1h")
        );
        let v = load_values(&[b"lease-ms", b"5000", b"backoff", b"fixed:1000"]).unwrap();
        assert_eq!((v.lease_ms, v.backoff.as_str()), (5000, "fixed:1s"));
        assert!(load_values(&[b"lease-ms"]).is_err());
        assert!(load_values(&[b"lease_ms", b"5"]).is_err());
        assert!(load_values(&[b"lease-ms", b"0"]).is_err());
        assert!(load_values(&[b"max-attempts", b"x"]).is_err());
        assert!(load_values(&[b"backoff", b"soon"]).is_err());
    }
}
