//! DQ.CANCEL queue id [id ...]
//!
//! Deletes messages in any state (delayed, ready, in flight), together with
//! any newer version waiting behind an in-flight one. Replies how many of
//! the ids existed. A cancelled message that held its GROUP hands the group
//! to the group's next due message.

use redis_module::{Context, RedisResult, RedisString, RedisValue};

use crate::args::parse_queue_and_ids;
use crate::commands::{bytes, int, reply};
use crate::docs::{Arg, CommandDoc, KeyUse};
use crate::error::Result;
use crate::keyed_queue as queue;
use crate::redis_store::RedisStore;
use crate::timer::now_ms;

pub const DOC: CommandDoc = CommandDoc {
    name: "dq.cancel",
    summary: "Deletes messages in any state",
    complexity: "O(M log N) for M ids in a queue of N messages",
    arity: -3,
    key: Some(KeyUse::Delete),
    args: &[Arg::key("queue"), Arg::string("id").multiple()],
};

pub fn command(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    let argv = bytes(&args);
    reply(cancel(ctx, &argv[1..]))
}

fn cancel(ctx: &Context, args: &[&[u8]]) -> Result<RedisValue> {
    let (name, ids) = parse_queue_and_ids("dq.cancel", args)?;
    let mut store = RedisStore::open(ctx, name, true)?;
    let cancelled = queue::cancel(&mut store, now_ms(), ids);
    store.finish();
    Ok(int(cancelled?))
}
