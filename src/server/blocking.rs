//! Parking a client on queue keys, as BLPOP parks one on lists (DQ.POP
//! BLOCK, DQ.MPOP BLOCK). The server calls back each time one of the keys
//! is signalled ready (a message became ready: ADD, the timer, an expired
//! lease, a NACK, a group handed on; or a limit let go: an ACK under
//! MAXINFLIGHT, RESUME, a pause or a rate window running out) and once when
//! the timeout runs out. While a client waits on a queue the registry
//! knows it, so the timer wakes for the moment its limits let go (and only
//! then: with nobody waiting, limits cost no wakeup).

use std::os::raw::{c_int, c_void};

use redis_module::{raw, Context, ContextFlags, RedisString, RedisValue};

use crate::core::error::{DqError, Result};
use crate::core::registry::QueueRef;
use crate::server::clock::now_ms;
use crate::server::guard;
use crate::server::key::{open_read, read};
use crate::server::keyspace::selected_db;
use crate::server::registry;
use crate::server::reply::{error, reply};
use crate::server::timer;

/// A waiter, with the queues it waits on (for the registry's count).
struct Parked<W> {
    waiter: W,
    queues: Vec<QueueRef>,
}

/// What a parked client waits to do.
pub trait Waiter: Sized + 'static {
    /// Names the wake-up, and the timeout, in the log if they panic.
    const POINT: &'static str;
    const TIMEOUT_POINT: &'static str;

    /// Tries again now: `Ok(None)` keeps the client waiting (another
    /// client took what woke it).
    fn try_now(&self, ctx: &Context) -> Result<Option<RedisValue>>;
}

/// Whether the calling client may be parked: not inside MULTI or a
/// script, and not where the server denies blocking (e.g. a replica's
/// replication stream); there a BLOCK that finds nothing replies nil.
pub fn may_block(ctx: &Context) -> bool {
    let no_blocking = ContextFlags::MULTI | ContextFlags::LUA | ContextFlags::DENY_BLOCKING;
    !ctx.get_flags().intersects(no_blocking)
}

/// Parks the client on `keys` for up to `timeout_ms` (0: for ever); the
/// server owns `waiter` until the client is unblocked.
pub fn block_on_keys<W: Waiter>(ctx: &Context, keys: &[&RedisString], timeout_ms: u64, waiter: W) {
    let db = selected_db(ctx);
    let queues: Vec<QueueRef> = keys.iter().map(|k| (db, k.as_slice().to_vec())).collect();
    let now = now_ms();
    for (queue, key) in queues.iter().zip(keys) {
        registry::count_waiter(queue.clone(), 1);
        // Held back by a pause with an end or a rate: the timer wakes for
        // the moment it lets go, and the wake signals the key.
        let handle = open_read(ctx, key);
        if let Ok(Some(at)) = read(&handle, key).map(|q| q.and_then(|q| q.reopens_at(now))) {
            timer::note_due(ctx, &queue.1, at);
        }
    }
    let waiter = Box::into_raw(Box::new(Parked { waiter, queues }));
    let mut keys: Vec<*mut raw::RedisModuleString> = keys.iter().map(|k| k.inner).collect();
    // SAFETY: called from the command's own context. Ownership of `waiter`
    // passes to the server, which hands it back to `free::<W>` exactly
    // once; the server copies the key names it keeps.
    unsafe {
        raw::RedisModule_BlockClientOnKeys.unwrap()(
            ctx.ctx,
            Some(on_ready::<W>),
            Some(on_timeout::<W>),
            Some(free::<W>),
            timeout_ms as i64,
            keys.as_mut_ptr(),
            keys.len() as c_int,
            waiter.cast::<c_void>(),
        );
    }
}

extern "C" fn on_ready<W: Waiter>(
    ctx: *mut raw::RedisModuleCtx,
    _argv: *mut *mut raw::RedisModuleString,
    _argc: c_int,
) -> c_int {
    let ctx = Context::new(ctx);
    // SAFETY: the private data given to BlockClientOnKeys by
    // `block_on_keys::<W>`, alive until `free::<W>` runs after the client
    // is unblocked.
    let parked = unsafe {
        &*(raw::RedisModule_GetBlockedClientPrivateData.unwrap()(ctx.ctx) as *const Parked<W>)
    };
    let waiter = &parked.waiter;
    let outcome = guard::catch(W::POINT, || waiter.try_now(&ctx)).unwrap_or(Err(DqError::Internal));
    match outcome {
        Ok(None) => raw::REDISMODULE_ERR as c_int,
        outcome => {
            ctx.reply(reply(outcome.map(|v| v.unwrap_or(RedisValue::Null))));
            raw::REDISMODULE_OK as c_int
        }
    }
}

extern "C" fn on_timeout<W: Waiter>(
    ctx: *mut raw::RedisModuleCtx,
    _argv: *mut *mut raw::RedisModuleString,
    _argc: c_int,
) -> c_int {
    let ctx = Context::new(ctx);
    if guard::catch(W::TIMEOUT_POINT, || ctx.reply(Ok(RedisValue::Null))).is_none() {
        // The client waits for an answer: give it one.
        ctx.reply(Err(error(DqError::Internal)));
    }
    raw::REDISMODULE_OK as c_int
}

extern "C" fn free<W: Waiter>(_ctx: *mut raw::RedisModuleCtx, waiter: *mut c_void) {
    if !waiter.is_null() {
        // SAFETY: made by Box::into_raw in `block_on_keys::<W>`; the server
        // frees it once.
        let parked = unsafe { Box::from_raw(waiter.cast::<Parked<W>>()) };
        for queue in parked.queues {
            registry::count_waiter(queue, -1);
        }
    }
}
