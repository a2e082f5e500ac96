//! DQ.RESUME queue
//!
//! Ends the queue's pause; blocked POPs are served at once. Replies 1 if
//! the queue was paused, else 0.

use redis_module::{Context, RedisString, RedisValue};

use crate::commands::bytes;
use crate::core::error::Result;
use crate::core::queue::Queue;
use crate::grammar::args::parse_queue;
use crate::grammar::docs::{Arg, CommandDoc, KeyUse};
use crate::server::clock::now_ms;
use crate::server::command::{Command, Replayed};
use crate::server::key::QueueKey;
use crate::server::replication::Apply;
use crate::server::reply::int;
use crate::server::settings;

pub const COMMAND: Command = Command {
    doc: CommandDoc {
        name: "dq.resume",
        summary: "Ends a queue's pause: POP delivers again",
        complexity: "O(1)",
        arity: 2,
        key: Some(KeyUse::Settings),
        numkeys: false,
        args: &[Arg::key("queue")],
    },
    flags: "write fast",
    acl: "",
    handler: resume,
    grammar: |args| parse(args).map(drop),
    replay: Some(("RESUME", replay)),
};

pub fn parse<'a>(args: &'a [&'a [u8]]) -> Result<&'a [u8]> {
    parse_queue("dq.resume", args)
}

fn resume(ctx: &Context, args: &[RedisString]) -> Result<RedisValue> {
    parse(&bytes(args)[1..])?;
    let name = &args[1];
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
pub fn replay(queue: &mut Queue, r: &Replayed<'_>) -> Result<()> {
    queue.resume(r.now);
    Ok(())
}
