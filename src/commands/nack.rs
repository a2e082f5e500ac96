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

use crate::args::{add_ms, is_keyword, parse_id_and_option, parse_ms};
use crate::commands::{bytes, policy, reply};
use crate::docs::{Arg, CommandDoc, KeyUse};
use crate::error::{DqError, Result};
use crate::policy::Policy;
use crate::propagate::Apply;
use crate::qkey::QueueKey;
use crate::queue::{NackAction, Queue, State};
use crate::settings;
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

pub fn command(ctx: &Context, args: &[RedisString]) -> RedisResult {
    reply(nack(ctx, args))
}

fn nack(ctx: &Context, args: &[RedisString]) -> Result<RedisValue> {
    let argv = bytes(args);
    let (_, id, delay) = parse(&argv[1..])?;
    let now = now_ms();
    if let Some(delay) = delay {
        // Refused like DQ.ADD's DELAY, rather than capped.
        add_ms("DELAY", now, delay)?;
    }
    let mut key = QueueKey::open(ctx, &args[1])?;
    let Some(queue) = key.queue() else {
        return Ok(RedisValue::Null);
    };
    let policy = policy(queue);
    let due_before = queue.next_due();
    let action = NackAction::Retry(delay);
    let Some(placed) = queue.nack(now, id, action, None, None, &policy)? else {
        return Ok(RedisValue::Null);
    };
    // The delay the backoff chose travels as a value; with the master's
    // dq.max-attempts, the replica makes the same retry-or-die decision.
    let delay = match placed.state {
        State::Dead => 0,
        _ => placed.due_at.saturating_sub(now),
    };
    Apply::new(ctx, &args[1], now, settings::max_attempts(), "NACK")
        .arg(&args[2])
        .bytes(b"DELAY")
        .number(delay)
        .send();
    key.announce(due_before);
    Ok(RedisValue::SimpleStringStatic(
        placed.state.reported().name(),
    ))
}

/// Replays `NACK id (DELAY ms | DEAD) [ERROR text]`.
pub fn replay(queue: &mut Queue, now: u64, policy: &Policy, args: &[&[u8]]) -> Result<()> {
    let bad = || DqError::BadApply("NACK needs id, then DELAY ms or DEAD".into());
    let (id, action, rest) = match args {
        [id, dead, rest @ ..] if is_keyword(dead, "DEAD") => (*id, NackAction::Dead, rest),
        [id, delay, ms, rest @ ..] if is_keyword(delay, "DELAY") => {
            let ms = parse_ms("DELAY", MS, ms)?;
            (*id, NackAction::Retry(Some(ms)), rest)
        }
        _ => return Err(bad()),
    };
    let error = match rest {
        [] => None,
        [keyword, text] if is_keyword(keyword, "ERROR") => Some(*text),
        _ => return Err(bad()),
    };
    queue.nack(now, id, action, None, error, policy)?;
    Ok(())
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
