//! DQ.NACK queue id [DELAY ms]
//!
//! The work failed. The next attempt is due after DELAY ms, or else after
//! the message's backoff for the attempt that failed (BACKOFF of the
//! message, else of the queue, else `dq.backoff`). When the failed attempt
//! was its last (MAXATTEMPTS), the message becomes dead with reason `nack`.
//! A newer version added while it was in flight takes its place instead.
//!
//! Reply: the message's new state as a simple string — `delayed`, `ready`
//! (DELAY 0) or `dead` — or nil when the id was not in flight.

use redis_module::{Context, RedisResult, RedisString, RedisValue};

use crate::args::{add_ms, parse_id_and_option, parse_ms};
use crate::commands::{bytes, reply};
use crate::docs::{Arg, CommandDoc, KeyUse};
use crate::error::Result;
use crate::keyed_queue as queue;
use crate::redis_store::RedisStore;
use crate::timer::now_ms;

pub const DOC: CommandDoc = CommandDoc {
    name: "dq.nack",
    summary: "Ends a delivery as failed: retries after a delay or the backoff, or dead-letters",
    complexity: "O(log N) where N is the number of messages in the queue",
    arity: -3,
    key: Some(KeyUse::Update),
    args: &[
        Arg::key("queue"),
        Arg::string("id"),
        Arg::integer("delay").token("DELAY").optional(),
    ],
};

const MS: &str = "a non-negative integer number of milliseconds";

/// Parses `queue id [DELAY ms]`.
pub fn parse<'a>(args: &'a [&'a [u8]]) -> Result<(&'a [u8], &'a [u8], Option<u64>)> {
    parse_id_and_option("dq.nack", args, "DELAY", |v| parse_ms("DELAY", MS, v))
}

pub fn command(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    let argv = bytes(&args);
    reply(nack(ctx, &argv[1..]))
}

fn nack(ctx: &Context, args: &[&[u8]]) -> Result<RedisValue> {
    let (name, id, delay) = parse(args)?;
    let now = now_ms();
    if let Some(delay) = delay {
        // Refused like DQ.ADD's DELAY, rather than capped.
        add_ms("DELAY", now, delay)?;
    }
    let mut store = RedisStore::open(ctx, name, true)?;
    let policy = store.policy();
    let outcome = queue::nack(&mut store, now, id, delay, &policy);
    store.finish();
    let Some(placed) = outcome? else {
        return Ok(RedisValue::Null);
    };
    Ok(RedisValue::SimpleStringStatic(placed.state.name()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::args::leak_args;

    #[test]
    fn grammar() {
        assert_eq!(
            parse(leak_args(&["q", "m"])).unwrap(),
            (&b"q"[..], &b"m"[..], None)
        );
        assert_eq!(
            parse(leak_args(&["q", "m", "delay", "5"])).unwrap().2,
            Some(5)
        );
        let err = |a: &[&str]| parse(leak_args(a)).unwrap_err().to_string();
        assert_eq!(
            err(&["q"]),
            "ERR wrong number of arguments for 'dq.nack' command"
        );
        assert_eq!(
            err(&["q", "m", "DELAY", "-1"]),
            format!("ERR DELAY must be {MS}")
        );
        assert_eq!(
            err(&["q", "m", "DELAY", "1", "DELAY", "2"]),
            "ERR DELAY is given more than once"
        );
        assert_eq!(err(&["q", "m", "LATER"]), "ERR unknown option 'LATER'");
        assert_eq!(err(&["q", ""]), "ERR id must not be empty");
    }
}
