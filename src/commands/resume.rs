//! DQ.RESUME queue
//!
//! Ends the queue's pause; blocked POPs are served at once. Replies 1 if
//! the queue was paused, else 0.

use redis_module::{Context, RedisResult, RedisString, RedisValue};

use crate::core::error::{DqError, Result};
use crate::core::queue::Queue;
use crate::grammar::docs::{Arg, CommandDoc, KeyUse};
use crate::server::clock::now_ms;
use crate::server::key::QueueKey;
use crate::server::replication::Apply;
use crate::server::reply::{int, reply};
use crate::server::settings;

pub const DOC: CommandDoc = CommandDoc {
    name: "dq.resume",
    summary: "Ends a queue's pause: POP delivers again",
    complexity: "O(1)",
    arity: 2,
    key: Some(KeyUse::Settings),
    numkeys: false,
    args: &[Arg::key("queue")],
};

pub fn command(ctx: &Context, args: &[RedisString]) -> RedisResult {
    reply(resume(ctx, args))
}

fn resume(ctx: &Context, args: &[RedisString]) -> Result<RedisValue> {
    let [_, name] = args else {
        return Err(DqError::WrongArity("dq.resume"));
    };
    let mut key = QueueKey::open(ctx, name)?;
    let Some(queue) = key.queue() else {
        return Ok(int(0));
    };
    let now = now_ms();
    let due_before = queue.next_due();
    let (was, changed) = queue.resume(now);
    if changed {
        Apply::new(ctx, name, now, settings::max_attempts(), "RESUME").send();
        key.announce(due_before);
    }
    Ok(int(was.into()))
}

/// Replays `RESUME`.
pub fn replay(queue: &mut Queue, now: u64) -> Result<()> {
    queue.resume(now);
    Ok(())
}
