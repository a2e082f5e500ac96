//! DQ.ACK queue id [id ...]
//!
//! The work is done: deletes those messages. Replies the number of ids that
//! were in flight (and are now gone). An id that is not in flight — unknown,
//! already acked, or redelivered after its lease ended — counts 0 and is
//! left as it is. A newer version added while the message was in flight
//! now takes its place, as attempt 1.

use redis_module::{Context, RedisResult, RedisString};

use crate::commands::for_ids;
use crate::core::error::Result;
use crate::core::queue::Queue;
use crate::grammar::docs::{Arg, CommandDoc, KeyUse};
use crate::server::reply::{int, reply};

pub const DOC: CommandDoc = CommandDoc {
    name: "dq.ack",
    summary: "Ends deliveries successfully: deletes the messages",
    complexity: "O(M log N) for M ids in a queue of N messages",
    arity: -3,
    key: Some(KeyUse::Delete),
    numkeys: false,
    args: &[Arg::key("queue"), Arg::string("id").multiple()],
};

pub fn command(ctx: &Context, args: &[RedisString]) -> RedisResult {
    reply(for_ids(ctx, args, "dq.ack", "ACK", Queue::ack).map(int))
}

/// Replays `ACK id...`: the ids the command named, acted on at the
/// master's `now`.
pub fn replay(queue: &mut Queue, now: u64, ids: &[&[u8]]) -> Result<()> {
    queue.ack(now, ids);
    Ok(())
}
