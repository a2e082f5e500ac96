//! DQ.ACK queue id [id ...]
//!
//! The work is done: deletes those messages. Replies the number of ids that
//! were in flight (and are now gone). An id that is not in flight — unknown,
//! already acked, or redelivered after its lease ended — counts 0 and is
//! left as it is. A newer version added while the message was in flight
//! now takes its place, as attempt 1.

use redis_module::{Context, RedisResult, RedisString, RedisValue};

use crate::args::parse_queue_and_ids;
use crate::commands::{bytes, int, reply};
use crate::docs::{Arg, CommandDoc, KeyUse};
use crate::error::Result;
use crate::keyed_queue as queue;
use crate::redis_store::RedisStore;
use crate::timer::now_ms;

pub const DOC: CommandDoc = CommandDoc {
    name: "dq.ack",
    summary: "Ends deliveries successfully: deletes the messages",
    complexity: "O(M log N) for M ids in a queue of N messages",
    arity: -3,
    key: Some(KeyUse::Delete),
    args: &[Arg::key("queue"), Arg::string("id").multiple()],
};

pub fn command(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    let argv = bytes(&args);
    reply(ack(ctx, &argv[1..]))
}

fn ack(ctx: &Context, args: &[&[u8]]) -> Result<RedisValue> {
    let (name, ids) = parse_queue_and_ids("dq.ack", args)?;
    let now = now_ms();
    let mut store = RedisStore::open(ctx, name, true)?;
    let acked = queue::ack(&mut store, now, ids);
    store.finish();
    Ok(int(acked?))
}
