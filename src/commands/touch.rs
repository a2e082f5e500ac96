//! DQ.TOUCH queue id [LEASE ms]
//!
//! Extends the lease of an in-flight message, for long jobs: the new
//! deadline is now + LEASE (default: the queue's lease, else
//! `dq.lease-ms`). Reply: the new lease deadline (integer, Unix ms), or nil
//! when the id is not in flight.

use redis_module::{Context, RedisResult, RedisString, RedisValue};

use crate::args::{lease_deadline, parse_id_and_option, parse_lease, parse_ms};
use crate::commands::{bytes, int, reply};
use crate::docs::{Arg, CommandDoc, KeyUse};
use crate::error::{DqError, Result};
use crate::propagate::Apply;
use crate::qkey::QueueKey;
use crate::queue::Queue;
use crate::settings;
use crate::timer::now_ms;

pub const DOC: CommandDoc = CommandDoc {
    name: "dq.touch",
    summary: "Extends the lease of an in-flight message",
    complexity: "O(log N) where N is the number of messages in the queue",
    arity: -3,
    key: Some(KeyUse::Update),
    args: &[
        Arg::key("queue"),
        Arg::string("id"),
        Arg::integer("lease").token("LEASE").optional(),
    ],
};

/// Parses `queue id [LEASE ms]`.
pub fn parse<'a>(args: &'a [&'a [u8]]) -> Result<(&'a [u8], &'a [u8], Option<u64>)> {
    parse_id_and_option("dq.touch", args, "LEASE", parse_lease)
}

pub fn command(ctx: &Context, args: &[RedisString]) -> RedisResult {
    reply(touch(ctx, args))
}

fn touch(ctx: &Context, args: &[RedisString]) -> Result<RedisValue> {
    let argv = bytes(args);
    let (_, id, lease) = parse(&argv[1..])?;
    let mut key = QueueKey::open(ctx, &args[1])?;
    let Some(queue) = key.queue() else {
        return Ok(RedisValue::Null);
    };
    let now = now_ms();
    let lease = lease
        .or(queue.config().lease_ms)
        .unwrap_or_else(settings::lease_ms);
    let deadline = lease_deadline(now, lease);
    let due_before = queue.next_due();
    let Some(deadline) = queue.touch(id, deadline, None)? else {
        return Ok(RedisValue::Null);
    };
    // The lease's length, resolved: the replica's settings may differ.
    Apply::new(ctx, &args[1], now, settings::max_attempts(), "TOUCH")
        .arg(&args[2])
        .number(deadline)
        .send();
    key.announce(due_before);
    Ok(int(deadline))
}

/// Replays `TOUCH id lease-deadline`.
pub fn replay(queue: &mut Queue, args: &[&[u8]]) -> Result<()> {
    let [id, deadline] = args else {
        return Err(DqError::BadApply("TOUCH needs id and deadline".into()));
    };
    let deadline = parse_ms("deadline", "a time", deadline)?;
    queue.touch(id, deadline, None)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::args::leak_args;

    #[test]
    fn grammar() {
        assert_eq!(
            parse(leak_args(&["q", "m", "LEASE", "9"])).unwrap().2,
            Some(9)
        );
        let err = |a: &[&str]| parse(leak_args(a)).unwrap_err().to_string();
        assert_eq!(
            err(&["q"]),
            "ERR wrong number of arguments for 'dq.touch' command"
        );
        assert_eq!(
            err(&["q", "m", "LEASE", "0"]),
            "ERR LEASE must be a positive integer number of milliseconds"
        );
        assert_eq!(err(&["q", "m", "FOREVER"]), "ERR unknown option 'FOREVER'");
    }
}
