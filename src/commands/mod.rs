//! One file per command: its grammar (pure, unit-tested), the handler that
//! opens the queue's key, calls the queue, propagates and replies, and how
//! a replica replays what it propagated. Helpers shared by the handlers
//! live here; `apply.rs` is the replay entry point.

pub mod ack;
pub mod add;
pub mod apply;
pub mod cancel;
pub mod config;
pub mod get;
pub mod nack;
pub mod peek;
pub mod pop;
pub mod purge;
pub mod queues;
pub mod redrive;
pub mod scan;
pub mod stats;
pub mod touch;

use redis_module::{raw, Context, RedisResult, RedisString, RedisValue};

use crate::args::parse_queue_and_ids;
use crate::docs::CommandDoc;
use crate::error::Result;
use crate::policy::Policy;
use crate::propagate::Apply;
use crate::qkey::QueueKey;
use crate::queue::Queue;
use crate::settings;
use crate::timer::now_ms;

/// Every command's COMMAND DOCS entry.
pub const DOCS: [CommandDoc; 15] = [
    add::DOC,
    pop::DOC,
    ack::DOC,
    cancel::DOC,
    nack::DOC,
    touch::DOC,
    redrive::DOC,
    purge::DOC,
    get::DOC,
    peek::DOC,
    stats::DOC,
    config::DOC,
    queues::DOC,
    scan::DOC,
    apply::DOC,
];

/// The raw bytes of every argument.
pub fn bytes(args: &[RedisString]) -> Vec<&[u8]> {
    args.iter().map(RedisString::as_slice).collect()
}

/// Maps a handler's outcome to the reply, the one place errors become text.
pub fn reply(outcome: Result<RedisValue>) -> RedisResult {
    outcome.map_err(|e| e.into_redis())
}

/// A record-like reply: a map under RESP3, a flat field/value array under
/// RESP2 (RedisModule_ReplyWithMap does both), with fields in this order.
pub fn reply_record(ctx: &Context, fields: Vec<(&'static str, RedisValue)>) -> RedisValue {
    raw::reply_with_map(ctx.ctx, fields.len() as std::os::raw::c_long);
    for (name, value) in fields {
        ctx.reply(Ok(RedisValue::SimpleStringStatic(name)));
        ctx.reply(Ok(value));
    }
    RedisValue::NoReply
}

pub fn int(v: u64) -> RedisValue {
    RedisValue::Integer(i64::try_from(v).unwrap_or(i64::MAX))
}

/// A write on an existing queue that replies a count and replays from its
/// own arguments (ACK, CANCEL, REDRIVE, PURGE): `op` runs at `now`; when it
/// counted anything, `VERB args...` propagates and the change is announced.
/// An absent queue counts 0 and is not created.
pub fn counted_write(
    ctx: &Context,
    args: &[RedisString],
    verb: &'static str,
    op: impl FnOnce(&mut Queue, u64) -> u64,
) -> Result<u64> {
    let mut key = QueueKey::open(ctx, &args[1])?;
    let Some(queue) = key.queue() else {
        return Ok(0);
    };
    let now = now_ms();
    let due_before = queue.next_due();
    let done = op(queue, now);
    if done > 0 {
        Apply::new(ctx, &args[1], now, settings::max_attempts(), verb)
            .args(&args[2..])
            .send();
        key.announce(due_before);
    }
    Ok(done)
}

/// `queue id [id ...]` (ACK, CANCEL): `op` on the ids.
pub fn for_ids(
    ctx: &Context,
    args: &[RedisString],
    command: &'static str,
    verb: &'static str,
    op: fn(&mut Queue, u64, &[&[u8]]) -> u64,
) -> Result<u64> {
    let argv = bytes(args);
    let (_, ids) = parse_queue_and_ids(command, &argv[1..])?;
    counted_write(ctx, args, verb, |queue, now| op(queue, now, ids))
}

/// The lease a POP or TOUCH gives: its LEASE, else the queue's, else
/// `dq.lease-ms` (without resolving the rest of the policy).
pub fn lease_for(queue: &Queue, given: Option<u64>) -> u64 {
    given
        .or(queue.config().lease_ms)
        .unwrap_or_else(settings::lease_ms)
}

/// The lease, attempts and backoff in force for a queue now.
pub fn policy(queue: &Queue) -> Policy {
    queue.config().resolve(&settings::current())
}
