//! DQ.ACK queue id [id ...]
//!
//! The work is done. Replies the number of ids that were in flight and are
//! now finished. A finished message is deleted, or, when its retention
//! (its own RETAIN, else the queue's, else `dq.retain-ms`) is set, kept as
//! `done` without a result (see DQ.DONE). An id that is not in flight —
//! unknown, already acked, or redelivered after its lease ended — counts 0
//! and is left as it is. A newer version added while the message was in
//! flight now takes its place, as attempt 1.

use redis_module::{Context, RedisString, RedisValue};

use crate::commands::bytes;
use crate::commands::done::{finished, Finish};
use crate::core::error::Result;
use crate::core::queue::Queue;
use crate::grammar::args::parse_queue_and_ids;
use crate::grammar::docs::{Arg, CommandDoc, KeyUse};
use crate::server::command::{Command, Replayed};
use crate::server::reply::int;

const NAME: &str = "dq.ack";

pub const COMMAND: Command = Command {
    doc: CommandDoc {
        name: NAME,
        summary: "Ends deliveries successfully: deletes the messages, or keeps them as done",
        complexity: "O(M log N) for M ids in a queue of N messages",
        arity: -3,
        key: Some(KeyUse::Delete),
        numkeys: false,
        args: &[Arg::key("queue"), Arg::string("id").multiple()],
    },
    flags: "write",
    acl: "",
    handler: ack,
    grammar: |args| parse_queue_and_ids(NAME, args).map(drop),
    replay: Some(("ACK", replay)),
};

fn ack(ctx: &Context, args: &[RedisString]) -> Result<RedisValue> {
    let argv = bytes(args);
    let (_, ids) = parse_queue_and_ids(NAME, &argv[1..])?;
    finished(ctx, args, Finish::Ack(ids)).map(int)
}

/// Replays `ACK id...`: finished at the master's `now`, with the master's
/// `dq.retain-ms` 0 (what ACK propagates as when it is; the AOF of a build
/// without retention, too).
pub fn replay(queue: &mut Queue, r: &Replayed<'_>) -> Result<()> {
    queue.ack(r.now, r.args, 0);
    Ok(())
}
