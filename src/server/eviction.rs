//! The loss guard: under `maxmemory` with an `allkeys-*` policy the server
//! may evict any key, and a queue is one key, so a whole queue could vanish
//! without an ACK. DQ.ADD is refused there, naming the policy. `noeviction`
//! and `volatile-*` are safe: a queue key has no TTL unless a user sets one.

use std::cell::RefCell;
use std::time::{Duration, Instant};

use redis_module::{Context, ContextFlags, RedisValue};

use crate::core::error::{DqError, Result};

/// How long a policy read from the server is trusted: `CONFIG SET
/// maxmemory-policy` is seen within this time.
const FRESH: Duration = Duration::from_millis(100);

thread_local! {
    // Main thread only.
    static POLICY: RefCell<Option<(Instant, String)>> = const { RefCell::new(None) };
}

/// Whether a policy may evict keys without a TTL.
pub fn evicts_any_key(policy: &str) -> bool {
    policy.starts_with("allkeys-")
}

/// Refuses a write that adds messages when the server may evict the queue.
pub fn check(ctx: &Context) -> Result<()> {
    // The server sets this flag only with maxmemory and a policy other
    // than noeviction: the common case costs no lookup.
    if !ctx.get_flags().contains(ContextFlags::EVICTED) {
        return Ok(());
    }
    let policy = POLICY.with(|p| {
        let mut p = p.borrow_mut();
        match &*p {
            Some((read_at, policy)) if read_at.elapsed() < FRESH => policy.clone(),
            _ => {
                let policy = read_policy(ctx);
                *p = Some((Instant::now(), policy.clone()));
                policy
            }
        }
    });
    if evicts_any_key(&policy) {
        return Err(DqError::EvictionPolicy(policy));
    }
    Ok(())
}

fn read_policy(ctx: &Context) -> String {
    let reply = ctx.call("CONFIG", &["GET", "maxmemory-policy"]);
    let text = |v: &RedisValue| match v {
        RedisValue::SimpleString(s) | RedisValue::BulkString(s) => Some(s.clone()),
        RedisValue::BulkRedisString(s) => s.try_as_str().ok().map(str::to_owned),
        RedisValue::StringBuffer(b) => String::from_utf8(b.clone()).ok(),
        _ => None,
    };
    match reply {
        Ok(RedisValue::Array(items)) => items.get(1).and_then(text),
        Ok(RedisValue::Map(map)) => map.into_values().next().as_ref().and_then(text),
        _ => None,
    }
    .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_allkeys_policies_may_evict_a_queue() {
        for p in ["allkeys-lru", "allkeys-lfu", "allkeys-random"] {
            assert!(evicts_any_key(p), "{p}");
        }
        for p in [
            "noeviction",
            "volatile-lru",
            "volatile-lfu",
            "volatile-random",
            "volatile-ttl",
        ] {
            assert!(!evicts_any_key(p), "{p}");
        }
    }
}
