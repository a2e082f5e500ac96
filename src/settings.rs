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
pub const NAMES: [&str; 3] = ["lease-ms", "max-attempts", "backoff"];

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

/// Load arguments come in `name value` pairs naming a setting. The crate
/// applies them; this refuses what it would silently ignore: unknown names,
/// a missing value, or a backoff that does not parse.
pub fn check_load_args(args: &[&[u8]]) -> Result<()> {
    if args.len() % 2 != 0 {
        return Err(DqError::MissingValue("the last load argument"));
    }
    for pair in args.chunks(2) {
        let (name, value) = (pair[0], pair[1]);
        if !NAMES.iter().any(|n| n.as_bytes() == name) {
            return Err(DqError::UnknownOption(crate::error::printable(name)));
        }
        if name == b"backoff" {
            Backoff::parse(value)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn load_arguments_are_checked() {
        assert!(check_load_args(&[]).is_ok());
        assert!(check_load_args(&[b"lease-ms", b"5000", b"backoff", b"fixed:1s"]).is_ok());
        assert!(check_load_args(&[b"lease-ms"]).is_err());
        assert!(check_load_args(&[b"lease_ms", b"5"]).is_err());
        assert!(check_load_args(&[b"backoff", b"soon"]).is_err());
    }

    #[test]
    fn defaults_match_the_product_sheet() {
        let s = current();
        assert_eq!((s.lease_ms, s.max_attempts), (30_000, 16));
        assert_eq!(s.backoff.to_string(), "exp:1s:1h");
    }
}
