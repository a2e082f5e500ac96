//! The module settings `dq.lease-ms`, `dq.max-attempts` and `dq.backoff`:
//! given as load arguments (`loadmodule libdq.so lease-ms 5000`), read and
//! changed with CONFIG GET / CONFIG SET. Redis checks the numeric bounds;
//! the backoff is checked here, so a bad value is refused, never stored.

use std::cell::RefCell;
use std::ffi::CString;
use std::os::raw::{c_char, c_int, c_void};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Mutex;

use redis_module::configuration::{register_i64_configuration, ConfigurationFlags};
use redis_module::{raw, Context, RedisString};

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

    fn replace(&self, backoff: Backoff) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = backoff;
    }
}

thread_local! {
    // What CONFIG GET dq.backoff is given. Redis copies the string and does
    // not free it, so the module keeps owning it (the crate's string
    // setting hands over a new string on every GET, which leaks).
    static BACKOFF_TEXT: RefCell<Option<RedisString>> = const { RefCell::new(None) };
}

extern "C" fn get_backoff(
    _name: *const c_char,
    _privdata: *mut c_void,
) -> *mut raw::RedisModuleString {
    BACKOFF_TEXT.with(|text| {
        text.borrow_mut()
            .get_or_insert_with(|| RedisString::create(None, BACKOFF.current().to_string()))
            .inner
    })
}

extern "C" fn set_backoff(
    _name: *const c_char,
    value: *mut raw::RedisModuleString,
    _privdata: *mut c_void,
    err: *mut *mut raw::RedisModuleString,
) -> c_int {
    crate::guard::catch("config set dq.backoff", || apply_backoff(value, err))
        .unwrap_or(raw::REDISMODULE_ERR as c_int)
}

fn apply_backoff(
    value: *mut raw::RedisModuleString,
    err: *mut *mut raw::RedisModuleString,
) -> c_int {
    match Backoff::parse(RedisString::string_as_slice(value)) {
        Ok(backoff) => {
            BACKOFF.replace(backoff);
            BACKOFF_TEXT.with(|text| *text.borrow_mut() = None);
            raw::REDISMODULE_OK as c_int
        }
        Err(e) => {
            // Redis puts "ERR CONFIG SET failed ..." in front of this text
            // and frees the string.
            let text = e.to_string();
            let text = text.strip_prefix("ERR ").unwrap_or(&text);
            // SAFETY: `err` is Redis' out-parameter for this call; a string
            // made without a context is owned by whoever frees it: Redis.
            unsafe {
                *err = raw::RedisModule_CreateString.unwrap()(
                    std::ptr::null_mut(),
                    text.as_ptr().cast::<c_char>(),
                    text.len(),
                );
            }
            raw::REDISMODULE_ERR as c_int
        }
    }
}

/// Registers the three settings, starting from `start`, and applies what
/// the configuration file says of them.
pub fn register(ctx: &Context, start: &LoadValues) -> Result<(), String> {
    let (min, max) = LEASE_MS_RANGE;
    let flags = || ConfigurationFlags::DEFAULT;
    register_i64_configuration(
        ctx,
        "lease-ms",
        &LEASE_MS,
        start.lease_ms,
        min,
        max,
        flags(),
        None,
    );
    let (min, max) = MAX_ATTEMPTS_RANGE;
    register_i64_configuration(
        ctx,
        "max-attempts",
        &MAX_ATTEMPTS,
        start.max_attempts,
        min,
        max,
        flags(),
        None,
    );
    let default = CString::new(start.backoff.as_str()).map_err(|e| e.to_string())?;
    // SAFETY: OnLoad; Redis copies the name and the default.
    let registered = unsafe {
        raw::RedisModule_RegisterStringConfig.unwrap()(
            ctx.ctx,
            c"backoff".as_ptr(),
            default.as_ptr(),
            raw::REDISMODULE_CONFIG_DEFAULT,
            Some(get_backoff),
            Some(set_backoff),
            None,
            std::ptr::null_mut(),
        )
    };
    if registered != raw::REDISMODULE_OK as c_int {
        return Err("could not register dq.backoff".into());
    }
    // SAFETY: OnLoad, after registering every setting, as the API asks.
    let loaded = unsafe { raw::RedisModule_LoadConfigs.unwrap()(ctx.ctx) };
    if loaded != raw::REDISMODULE_OK as c_int {
        return Err("a dq.* setting in the configuration file has a bad value".into());
    }
    Ok(())
}

/// `dq.lease-ms` now.
pub fn lease_ms() -> u64 {
    u64::try_from(LEASE_MS.load(Ordering::Relaxed)).unwrap_or(DEFAULT_LEASE_MS)
}

/// `dq.max-attempts` now: what a replay of NACK or of a tick decides by.
pub fn max_attempts() -> u32 {
    u32::try_from(MAX_ATTEMPTS.load(Ordering::Relaxed)).unwrap_or(DEFAULT_MAX_ATTEMPTS)
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
