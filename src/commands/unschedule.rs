//! DQ.UNSCHEDULE queue name [name ...]
//!
//! Removes schedules; replies how many existed. The messages their runs
//! already made stay in the queue. A name given twice counts once.

use redis_module::{Context, RedisString, RedisValue};

use crate::commands::schedule::check_schedule_name;
use crate::commands::{bytes, counted_write};
use crate::core::error::{DqError, Result};
use crate::core::queue::Queue;
use crate::grammar::docs::{Arg, CommandDoc, KeyUse};
use crate::server::command::{Command, Replayed};
use crate::server::reply::int;

pub const COMMAND: Command = Command {
    doc: CommandDoc {
        name: "dq.unschedule",
        summary: "Removes recurring schedules; the messages they made stay",
        complexity: "O(M log S) for M names among S schedules",
        arity: -3,
        key: Some(KeyUse::Update),
        numkeys: false,
        args: &[Arg::key("queue"), Arg::string("name").multiple()],
    },
    flags: "write",
    acl: "",
    handler: unschedule,
    grammar: |args| parse(args).map(drop),
    replay: Some(("UNSCHEDULE", replay)),
};

/// `queue name [name ...]`.
pub fn parse<'a>(args: &'a [&'a [u8]]) -> Result<&'a [&'a [u8]]> {
    let [_, names @ ..] = args else {
        return Err(DqError::WrongArity("dq.unschedule"));
    };
    if names.is_empty() {
        return Err(DqError::WrongArity("dq.unschedule"));
    }
    for name in names {
        check_schedule_name(name)?;
    }
    Ok(names)
}

fn unschedule(ctx: &Context, args: &[RedisString]) -> Result<RedisValue> {
    let argv = bytes(args);
    let names = parse(&argv[1..])?;
    counted_write(ctx, args, "UNSCHEDULE", |queue, _| queue.unschedule(names)).map(int)
}

/// Replays `UNSCHEDULE name...`.
pub fn replay(queue: &mut Queue, r: &Replayed<'_>) -> Result<()> {
    queue.unschedule(r.args);
    Ok(())
}
