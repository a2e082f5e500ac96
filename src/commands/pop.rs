//! DQ.POP queue [COUNT n] [BLOCK ms] [LEASE ms]
//!
//! Takes up to n ready messages (default 1): highest priority first, then
//! earliest due, then first added. Each is leased for LEASE ms (default
//! 30000): it stays in the queue, invisible, until ACK or the lease ends.
//! Replies an array of `[id, payload, attempt]` entries, or nil when none.
//! BLOCK waits up to ms for a message (0 = forever), like BLPOP; inside
//! MULTI or a script it does not wait.

use std::os::raw::{c_int, c_void};

use redis_module::{raw, Context, ContextFlags, RedisResult, RedisString, RedisValue};

use crate::args::{
    is_keyword, lease_deadline, parse_count, parse_lease, parse_ms, unknown_option, ArgCursor, Seen,
};
use crate::commands::{bytes, int, lease_for, reply};
use crate::docs::{Arg, CommandDoc, KeyUse};
use crate::error::{DqError, Result};
use crate::guard;
use crate::propagate::Apply;
use crate::qkey::QueueKey;
use crate::queue::Queue;
use crate::settings;
use crate::timer::now_ms;

pub const DOC: CommandDoc = CommandDoc {
    name: "dq.pop",
    summary: "Takes ready messages, leasing each until ACK, NACK or lease expiry",
    complexity: "O(M log N) for M messages taken from a queue of N",
    arity: -2,
    key: Some(KeyUse::Take),
    args: &[
        Arg::key("queue"),
        Arg::integer("count").token("COUNT").optional(),
        Arg::integer("timeout").token("BLOCK").optional(),
        Arg::integer("lease").token("LEASE").optional(),
    ],
};

const NAME: &str = "dq.pop";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PopArgs<'a> {
    pub queue: &'a [u8],
    pub count: usize,
    pub block: Option<u64>,
    /// `None`: the queue's or the module's lease.
    pub lease_ms: Option<u64>,
}

pub fn parse<'a>(args: &'a [&'a [u8]]) -> Result<PopArgs<'a>> {
    let [queue, options @ ..] = args else {
        return Err(DqError::WrongArity(NAME));
    };
    let mut parsed = PopArgs {
        queue,
        count: 1,
        block: None,
        lease_ms: None,
    };
    let mut seen = Seen::default();
    let mut cursor = ArgCursor::new(options);
    while let Some(arg) = cursor.next_arg() {
        if is_keyword(arg, "COUNT") {
            seen.mark("COUNT")?;
            parsed.count = parse_count(cursor.value_of("COUNT")?)?;
        } else if is_keyword(arg, "BLOCK") {
            seen.mark("BLOCK")?;
            parsed.block = Some(parse_ms("BLOCK", MS, cursor.value_of("BLOCK")?)?);
        } else if is_keyword(arg, "LEASE") {
            seen.mark("LEASE")?;
            parsed.lease_ms = Some(parse_lease(cursor.value_of("LEASE")?)?);
        } else {
            return Err(unknown_option(arg));
        }
    }
    Ok(parsed)
}

const MS: &str = "a non-negative integer number of milliseconds";

pub fn command(ctx: &Context, args: &[RedisString]) -> RedisResult {
    reply(pop_or_block(ctx, args))
}

fn pop_or_block(ctx: &Context, args: &[RedisString]) -> Result<RedisValue> {
    let argv = bytes(args);
    let parsed = parse(&argv[1..])?;
    if let Some(entries) = try_pop(ctx, &args[1], parsed.count, parsed.lease_ms)? {
        return Ok(entries);
    }
    let no_blocking = ContextFlags::MULTI | ContextFlags::LUA | ContextFlags::DENY_BLOCKING;
    match parsed.block {
        Some(timeout) if !ctx.get_flags().intersects(no_blocking) => {
            block(ctx, &args[1], &parsed, timeout);
            Ok(RedisValue::NoReply)
        }
        _ => Ok(RedisValue::Null),
    }
}

/// Pops now; `None` when nothing is ready.
fn try_pop(
    ctx: &Context,
    name: &RedisString,
    count: usize,
    lease_ms: Option<u64>,
) -> Result<Option<RedisValue>> {
    let mut key = QueueKey::open(ctx, name)?;
    let Some(queue) = key.queue() else {
        return Ok(None);
    };
    let now = now_ms();
    let deadline = lease_deadline(now, lease_for(queue, lease_ms));
    let due_before = queue.next_due();
    let popped = queue.pop(count, deadline);
    if popped.is_empty() {
        return Ok(None);
    }
    // As XREADGROUP propagates XCLAIM: which ids, leased until when.
    let mut apply = Apply::new(ctx, name, now, settings::max_attempts(), "CLAIM");
    apply.number(deadline);
    for delivery in &popped {
        apply.bytes(&delivery.id);
    }
    apply.send();
    key.announce(due_before);
    let entries = popped
        .into_iter()
        .map(|d| {
            RedisValue::Array(vec![
                RedisValue::StringBuffer(d.id),
                RedisValue::StringBuffer(d.payload),
                int(d.attempt.into()),
            ])
        })
        .collect();
    Ok(Some(RedisValue::Array(entries)))
}

/// Replays `CLAIM lease-deadline id...`: leases exactly those messages.
pub fn replay(queue: &mut Queue, args: &[&[u8]]) -> Result<()> {
    let [deadline, ids @ ..] = args else {
        return Err(DqError::BadApply("CLAIM needs a deadline".into()));
    };
    let deadline = parse_ms("deadline", MS, deadline)?;
    queue.claim(ids, deadline);
    Ok(())
}

/// What a blocked DQ.POP is waiting for.
struct Waiting {
    queue: Vec<u8>,
    count: usize,
    lease_ms: Option<u64>,
}

/// Parks the client on the queue's key. Redis calls `on_ready` each time
/// the key is signalled (a message became ready: ADD, the timer, an
/// expired lease, a NACK, a group handed on) and `on_timeout` when BLOCK
/// runs out.
fn block(ctx: &Context, name: &RedisString, parsed: &PopArgs, timeout_ms: u64) {
    let waiting = Box::into_raw(Box::new(Waiting {
        queue: parsed.queue.to_vec(),
        count: parsed.count,
        lease_ms: parsed.lease_ms,
    }));
    let mut keys = [name.inner];
    // SAFETY: called from the command's own context. Ownership of `waiting`
    // passes to Redis, which hands it back to `free_waiting` exactly once.
    // Redis copies the key names it keeps.
    unsafe {
        raw::RedisModule_BlockClientOnKeys.unwrap()(
            ctx.ctx,
            Some(on_ready),
            Some(on_timeout),
            Some(free_waiting),
            timeout_ms as i64,
            keys.as_mut_ptr(),
            1,
            waiting.cast::<c_void>(),
        );
    }
}

extern "C" fn on_ready(
    ctx: *mut raw::RedisModuleCtx,
    _argv: *mut *mut raw::RedisModuleString,
    _argc: c_int,
) -> c_int {
    let ctx = Context::new(ctx);
    // SAFETY: this is the private data given to BlockClientOnKeys, alive
    // until `free_waiting` runs after the client is unblocked.
    let waiting = unsafe {
        &*(raw::RedisModule_GetBlockedClientPrivateData.unwrap()(ctx.ctx) as *const Waiting)
    };
    let outcome = guard::catch("pop wake", || {
        let name = RedisString::create_from_slice(ctx.ctx, &waiting.queue);
        try_pop(&ctx, &name, waiting.count, waiting.lease_ms)
    })
    .unwrap_or(Err(DqError::Internal));
    match outcome {
        // Someone else took it first: keep waiting.
        Ok(None) => raw::REDISMODULE_ERR as c_int,
        outcome => {
            ctx.reply(reply(outcome.map(|v| v.unwrap_or(RedisValue::Null))));
            raw::REDISMODULE_OK as c_int
        }
    }
}

extern "C" fn on_timeout(
    ctx: *mut raw::RedisModuleCtx,
    _argv: *mut *mut raw::RedisModuleString,
    _argc: c_int,
) -> c_int {
    let ctx = Context::new(ctx);
    if guard::catch("pop timeout", || ctx.reply(Ok(RedisValue::Null))).is_none() {
        // The client waits for an answer: give it one.
        ctx.reply(Err(DqError::Internal.into_redis()));
    }
    raw::REDISMODULE_OK as c_int
}

extern "C" fn free_waiting(_ctx: *mut raw::RedisModuleCtx, waiting: *mut c_void) {
    if !waiting.is_null() {
        // SAFETY: created by Box::into_raw in `block`; Redis frees it once.
        drop(unsafe { Box::from_raw(waiting.cast::<Waiting>()) });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(args: &[&str]) -> Result<PopArgs<'static>> {
        parse(crate::args::leak_args(args))
    }

    #[test]
    fn defaults_and_options() {
        let a = p(&["q"]).unwrap();
        assert_eq!((a.count, a.block, a.lease_ms), (1, None, None));
        let a = p(&["q", "count", "100", "BLOCK", "0", "lease", "5"]).unwrap();
        assert_eq!((a.count, a.block, a.lease_ms), (100, Some(0), Some(5)));
    }

    #[test]
    fn bad_input_names_the_problem() {
        let err = |args: &[&str]| p(args).unwrap_err().to_string();
        assert_eq!(
            err(&[]),
            "ERR wrong number of arguments for 'dq.pop' command"
        );
        assert_eq!(
            err(&["q", "COUNT", "0"]),
            "ERR COUNT must be an integer from 1 to 10000"
        );
        assert_eq!(
            err(&["q", "COUNT", "10001"]),
            "ERR COUNT must be an integer from 1 to 10000"
        );
        assert_eq!(
            err(&["q", "LEASE", "0"]),
            "ERR LEASE must be a positive integer number of milliseconds"
        );
        assert_eq!(
            err(&["q", "BLOCK", "-1"]),
            "ERR BLOCK must be a non-negative integer number of milliseconds"
        );
        assert_eq!(err(&["q", "BLOCK"]), "ERR BLOCK needs a value");
        assert_eq!(
            err(&["q", "COUNT", "1", "COUNT", "2"]),
            "ERR COUNT is given more than once"
        );
        assert_eq!(err(&["q", "NOWAIT"]), "ERR unknown option 'NOWAIT'");
    }
}
