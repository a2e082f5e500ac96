//! The module settings `dq.lease-ms`, `dq.max-attempts` and `dq.backoff`:
//! given as load arguments (`loadmodule libdq.so lease-ms 5000`), read and
//! changed with CONFIG GET / CONFIG SET. Redis checks the numeric bounds;
//! the backoff is checked here, so a bad value is refused, never stored.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Mutex;

use redis_module::configuration::{ConfigurationContext, ConfigurationValue};
use redis_module::{RedisError, RedisString};

use crate::args::MAX_TIME_MS;
use crate::backoff::Backoff;
use crate::error::{DqError, Result};
use crate::policy::{Settings, DEFAULT_LEASE_MS, DEFAULT_MAX_ATTEMPTS};

pub static LEASE_MS: AtomicI64 = AtomicI64::new(DEFAULT_LEASE_MS as i64);
pub static MAX_ATTEMPTS: AtomicI64 = AtomicI64::new(DEFAULT_MAX_ATTEMPTS as i64);
pub static BACKOFF: BackoffSetting = BackoffSetting(Mutex::new(Backoff::DEFAULT));

pub const LEASE_MS_RANGE: (i64, i64) = (1, MAX_TIME_MS as i64);
pub const MAX_ATTEMPTS_RANGE: (i64, i64) = (1, i32::MAX as i64);

pub struct BackoffSetting(Mutex<Backoff>);

impl BackoffSetting {
    fn current(&self) -> Backoff {
        // Only the main thread touches it; a poisoned lock still holds a
        // valid value.
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

impl ConfigurationValue<RedisString> for BackoffSetting {
    fn get(&self, _ctx: &ConfigurationContext) -> RedisString {
        RedisString::create(None, self.current().to_string())
    }

    fn set(&self, _ctx: &ConfigurationContext, value: RedisString) -> Result<(), RedisError> {
        let backoff = Backoff::parse(value.as_slice()).map_err(|e| {
            // Redis puts its own "ERR CONFIG SET failed ..." in front.
            let text = e.to_string();
            RedisError::String(text.strip_prefix("ERR ").unwrap_or(&text).to_string())
        })?;
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = backoff;
        Ok(())
    }
}

/// The module defaults in force now.
pub fn current() -> Settings {
    let lease = LEASE_MS.load(Ordering::Relaxed);
    let attempts = MAX_ATTEMPTS.load(Ordering::Relaxed);
    Settings {
        lease_ms: u64::try_from(lease).unwrap_or(DEFAULT_LEASE_MS),
        max_attempts: u32::try_from(attempts).unwrap_or(DEFAULT_MAX_ATTEMPTS),
        backoff: BACKOFF.current(),
    }
}

/// The start values of the settings, from load arguments
/// (`loadmodule libdq.so lease-ms 5000 backoff 15s,1m`) or the defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadValues {
    pub lease_ms: i64,
    pub max_attempts: i64,
    pub backoff: String,
}

/// Reads load arguments: `name value` pairs naming a setting. Unknown
/// names, missing values and bad values are refused, so a typo stops the
/// module from loading instead of being ignored.
pub fn load_values(args: &[&[u8]]) -> Result<LoadValues> {
    let mut values = LoadValues {
        lease_ms: DEFAULT_LEASE_MS as i64,
        max_attempts: DEFAULT_MAX_ATTEMPTS as i64,
        backoff: Backoff::DEFAULT.to_string(),
    };
    if !args.len().is_multiple_of(2) {
        return Err(DqError::MissingValue("the last load argument"));
    }
    for pair in args.chunks(2) {
        let (name, value) = (pair[0], pair[1]);
        match name {
            b"lease-ms" => {
                let (min, max) = LEASE_MS_RANGE;
                values.lease_ms =
                    crate::args::parse_in_range("lease-ms", LEASE_EXPECTED, value, min, max)?;
            }
            b"max-attempts" => {
                let (min, max) = MAX_ATTEMPTS_RANGE;
                values.max_attempts = crate::args::parse_in_range(
                    "max-attempts",
                    ATTEMPTS_EXPECTED,
                    value,
                    min,
                    max,
                )?;
            }
            b"backoff" => values.backoff = Backoff::parse(value)?.to_string(),
            _ => return Err(DqError::UnknownOption(crate::error::printable(name))),
        }
    }
    Ok(values)
}

const LEASE_EXPECTED: &str = "a positive integer number of milliseconds";
const ATTEMPTS_EXPECTED: &str = "an integer from 1 to 2147483647";

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

    #[test]
    fn defaults_match_the_product_sheet() {
        let s = current();
        assert_eq!((s.lease_ms, s.max_attempts), (30_000, 16));
        assert_eq!(s.backoff.to_string(), "exp:1s:1h");
    }
}
