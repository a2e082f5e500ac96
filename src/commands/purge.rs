//! DQ.PURGE queue [DELAYED|READY|INFLIGHT|DEAD|DONE]
//!
//! Deletes every message of the queue, or of one state. The queue's
//! settings (DQ.CONFIG) and lifetime counters stay. In-flight messages
//! purged while a consumer works on them are gone: its ACK counts 0.
//! Reply: how many messages were deleted. O(N) in the messages deleted.

use redis_module::{Context, RedisString, RedisValue};

use crate::commands::{bytes, counted_write};
use crate::core::error::{DqError, Result};
use crate::core::queue::{Queue, State};
use crate::grammar::args::parse_state;
use crate::grammar::docs::{Arg, CommandDoc, KeyUse, STATE};
use crate::server::command::{Command, Replayed};
use crate::server::reply::int;

pub const COMMAND: Command = Command {
    doc: CommandDoc {
        name: "dq.purge",
        summary: "Deletes every message of a queue, or of one state",
        complexity: "O(M log N) for M messages deleted from one state; O(N) for the whole queue",
        arity: -2,
        key: Some(KeyUse::Delete),
        numkeys: false,
        args: &[Arg::key("queue"), STATE.optional()],
    },
    flags: "write",
    acl: "",
    handler: purge,
    grammar: |args| parse(args).map(drop),
    replay: Some(("PURGE", replay)),
};

pub fn parse<'a>(args: &'a [&'a [u8]]) -> Result<(&'a [u8], Option<State>)> {
    match args {
        [queue] => Ok((queue, None)),
        [queue, state] => Ok((queue, Some(parse_state(state)?))),
        _ => Err(DqError::WrongArity("dq.purge")),
    }
}

fn purge(ctx: &Context, args: &[RedisString]) -> Result<RedisValue> {
    let argv = bytes(args);
    let (_, state) = parse(&argv[1..])?;
    counted_write(ctx, args, "PURGE", |queue, now| queue.purge(now, state)).map(int)
}

/// Replays `PURGE [state]`.
pub fn replay(queue: &mut Queue, r: &Replayed<'_>) -> Result<()> {
    let words = r.with_name();
    let (now, args) = (r.now, &words[..]);
    let (_, state) = parse(args)?;
    queue.purge(now, state);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grammar::args::leak_args;

    #[test]
    fn grammar() {
        assert_eq!(parse(leak_args(&["q"])).unwrap().1, None);
        assert_eq!(
            parse(leak_args(&["q", "inflight"])).unwrap().1,
            Some(State::Inflight)
        );
        let err = |a: &[&str]| parse(leak_args(a)).unwrap_err().to_string();
        assert_eq!(
            err(&[]),
            "ERR wrong number of arguments for 'dq.purge' command"
        );
        assert_eq!(
            err(&["q", "READY", "DEAD"]),
            "ERR wrong number of arguments for 'dq.purge' command"
        );
        assert_eq!(
            err(&["q", "ALL"]),
            "ERR state must be one of DELAYED, READY, INFLIGHT, DEAD, DONE"
        );
    }
}
