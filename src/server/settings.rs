//! The module settings `dq.lease-ms`, `dq.max-attempts`, `dq.backoff` and
//! `dq.retain-ms`:
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

use crate::core::backoff::Backoff;
use crate::core::policy::{Policy, Settings, DEFAULT_LEASE_MS, DEFAULT_MAX_ATTEMPTS};
use crate::core::queue::Queue;
use crate::grammar::settings::{LoadValues, LEASE_MS_RANGE, MAX_ATTEMPTS_RANGE, RETAIN_MS_RANGE};

pub static LEASE_MS: AtomicI64 = AtomicI64::new(DEFAULT_LEASE_MS as i64);
pub static MAX_ATTEMPTS: AtomicI64 = AtomicI64::new(DEFAULT_MAX_ATTEMPTS as i64);
pub static RETAIN_MS: AtomicI64 = AtomicI64::new(0);
pub static BACKOFF: BackoffSetting = BackoffSetting(Mutex::new(Backoff::DEFAULT));

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
    crate::server::guard::catch("config set dq.backoff", || apply_backoff(value, err))
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
    let (min, max) = RETAIN_MS_RANGE;
    register_i64_configuration(
        ctx,
        "retain-ms",
        &RETAIN_MS,
        start.retain_ms,
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

/// `dq.retain-ms` now: how long a done message is kept when neither it nor
/// its queue says (what ACK and DONE propagate, for a replica's to differ).
pub fn retain_ms() -> u64 {
    u64::try_from(RETAIN_MS.load(Ordering::Relaxed)).unwrap_or(0)
}

/// The lease a POP or TOUCH gives: its LEASE, else the queue's, else
/// `dq.lease-ms` (without resolving the rest of the policy).
pub fn lease_for(queue: &Queue, given: Option<u64>) -> u64 {
    given.or(queue.config().lease_ms).unwrap_or_else(lease_ms)
}

/// The lease, attempts and backoff in force for a queue now.
pub fn policy(queue: &Queue) -> Policy {
    queue.config().resolve(&current())
}

/// The module defaults in force now.
pub fn current() -> Settings {
    let lease = LEASE_MS.load(Ordering::Relaxed);
    let attempts = MAX_ATTEMPTS.load(Ordering::Relaxed);
    Settings {
        lease_ms: u64::try_from(lease).unwrap_or(DEFAULT_LEASE_MS),
        max_attempts: u32::try_from(attempts).unwrap_or(DEFAULT_MAX_ATTEMPTS),
        backoff: BACKOFF.current(),
        retain_ms: retain_ms(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_match_the_product_sheet() {
        let s = current();
        assert_eq!((s.lease_ms, s.max_attempts), (30_000, 16));
        assert_eq!(s.backoff.to_string(), "exp:1s:1h");
    }
}
