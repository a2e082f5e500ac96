//! DQ.PURGE queue [DELAYED|READY|INFLIGHT|DEAD]
//!
//! Deletes every message of the queue, or of one state. The queue's
//! settings (DQ.CONFIG) and lifetime counters stay. In-flight messages
//! purged while a consumer works on them are gone: its ACK counts 0.
//! Reply: how many messages were deleted. O(N) in the messages deleted.

use redis_module::{Context, RedisResult, RedisString, RedisValue};

use crate::args::parse_state;
use crate::commands::{bytes, int, reply};
use crate::docs::{Arg, CommandDoc, KeyUse, STATE};
use crate::error::{DqError, Result};
use crate::keyed_queue as queue;
use crate::message::State;
use crate::redis_store::RedisStore;
use crate::timer::now_ms;

pub const DOC: CommandDoc = CommandDoc {
    name: "dq.purge",
    summary: "Deletes every message of a queue, or of one state",
    complexity: "O(M log N) for M messages deleted; O(1) per key for the whole queue",
    arity: -2,
    key: Some(KeyUse::Delete),
    args: &[Arg::key("queue"), STATE.optional()],
};

pub fn parse<'a>(args: &'a [&'a [u8]]) -> Result<(&'a [u8], Option<State>)> {
    match args {
        [queue] => Ok((queue, None)),
        [queue, state] => Ok((queue, Some(parse_state(state)?))),
        _ => Err(DqError::WrongArity("dq.purge")),
    }
}

pub fn command(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    let argv = bytes(&args);
    reply(purge(ctx, &argv[1..]))
}

fn purge(ctx: &Context, args: &[&[u8]]) -> Result<RedisValue> {
    let (name, state) = parse(args)?;
    let mut store = RedisStore::open(ctx, name, true)?;
    let purged = queue::purge(&mut store, now_ms(), state);
    store.finish();
    Ok(int(purged?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::args::leak_args;

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
            "ERR state must be one of DELAYED, READY, INFLIGHT, DEAD"
        );
    }
}
