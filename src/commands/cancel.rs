//! DQ.CANCEL queue id [id ...]
//!
//! Deletes messages in any state (delayed, ready, in flight), together with
//! any newer version waiting behind an in-flight one. Replies how many of
//! the ids existed. A cancelled message that held its GROUP hands the group
//! to the group's next due message.

use redis_module::{Context, RedisResult, RedisString};

use crate::commands::for_ids;
use crate::core::error::Result;
use crate::core::queue::Queue;
use crate::grammar::docs::{Arg, CommandDoc, KeyUse};
use crate::server::reply::{int, reply};

pub const DOC: CommandDoc = CommandDoc {
    name: "dq.cancel",
    summary: "Deletes messages in any state",
    complexity: "O(M log N) for M ids in a queue of N messages",
    arity: -3,
    key: Some(KeyUse::Delete),
    numkeys: false,
    args: &[Arg::key("queue"), Arg::string("id").multiple()],
};

pub fn command(ctx: &Context, args: &[RedisString]) -> RedisResult {
    reply(for_ids(ctx, args, "dq.cancel", "CANCEL", Queue::cancel).map(int))
}

/// Replays `CANCEL id...`: the ids the command named, acted on at the
/// master's `now`.
pub fn replay(queue: &mut Queue, now: u64, ids: &[&[u8]]) -> Result<()> {
    queue.cancel(now, ids);
    Ok(())
}
