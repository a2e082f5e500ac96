//! DQ.RESUME queue [GROUP g]
//!
//! Ends the queue's pause; blocked POPs are served at once. Replies 1 if
//! the queue was paused, else 0. With GROUP: ends that group's pause only
//! (DQ.PAUSE ... GROUP), and replies whether the group was paused.

use redis_module::{Context, RedisString, RedisValue};

use crate::commands::bytes;
use crate::core::error::{DqError, Result};
use crate::core::queue::Queue;
use crate::grammar::args::{check_name, Options};
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
        arity: -2,
        key: Some(KeyUse::Settings),
        numkeys: false,
        args: &[
            Arg::key("queue"),
            Arg::string("group").token("GROUP").optional(),
        ],
    },
    flags: "write fast",
    acl: "",
    handler: resume,
    grammar: |args| parse(args).map(drop),
    replay: Some(("RESUME", replay)),
};

/// `queue [GROUP g]`.
pub fn parse<'a>(args: &'a [&'a [u8]]) -> Result<(&'a [u8], Option<&'a [u8]>)> {
    let [queue, rest @ ..] = args else {
        return Err(DqError::WrongArity("dq.resume"));
    };
    let mut group = None;
    let mut o = Options::new(rest);
    while o.advance() {
        if let Some(v) = o.value("GROUP")? {
            group = Some(check_name("GROUP", v)?);
        } else {
            return Err(o.unknown());
        }
    }
    Ok((queue, group))
}

/// Ends the queue's pause or a group's: whether it was paused, and
/// whether anything changed.
fn resume_in(queue: &mut Queue, now: u64, group: Option<&[u8]>) -> (bool, bool) {
    match group {
        Some(group) => queue.resume_group(now, group),
        None => queue.resume(now),
    }
}

fn resume(ctx: &Context, args: &[RedisString]) -> Result<RedisValue> {
    let argv = bytes(args);
    let (_, group) = parse(&argv[1..])?;
    let name = &args[1];
    let mut key = QueueKey::open(ctx, name)?;
    let Some(queue) = key.queue() else {
        return Ok(int(0));
    };
    let now = now_ms();
    let due_before = queue.next_due();
    let (was, changed) = resume_in(queue, now, group);
    if changed {
        Apply::new(ctx, name, now, settings::max_attempts(), "RESUME")
            .args(&args[2..])
            .send();
        key.announce(due_before);
    }
    Ok(int(was.into()))
}

/// Replays `RESUME [GROUP g]`.
pub fn replay(queue: &mut Queue, r: &Replayed<'_>) -> Result<()> {
    let words = r.with_name();
    let (_, group) = parse(&words)?;
    resume_in(queue, r.now, group);
    Ok(())
}
