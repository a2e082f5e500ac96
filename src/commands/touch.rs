//! DQ.TOUCH queue id [LEASE ms] [ATTEMPT n] [PROGRESS value]
//!
//! Extends the lease of an in-flight message, for long jobs: the new
//! deadline is now + LEASE (default: the queue's lease, else
//! `dq.lease-ms`). PROGRESS records the delivery's progress (any bytes, at
//! most 64 KiB), which DQ.GET shows as `progress` until the next delivery
//! of the id starts (and, once done, the last one reported). ATTEMPT n extends only delivery `n`'s lease: when that
//! delivery is over (its lease ran out, or it was acknowledged or failed)
//! or has not happened, the reply is a `STALE` error naming the delivery
//! the message is at, and nothing changes. Reply: the new lease
//! deadline (integer, Unix ms), or nil when the id is not in flight
//! (without ATTEMPT).

use redis_module::{Context, RedisString, RedisValue};

use crate::commands::bytes;
use crate::core::error::{DqError, Result};
use crate::core::limits::MAX_PROGRESS_LEN;
use crate::core::queue::{check_delivery, Queue};
use crate::grammar::args::{
    is_keyword, lease_deadline, parse_attempt, parse_deadline, parse_lease, parse_queue_and_id,
};
use crate::grammar::docs::{Arg, CommandDoc, KeyUse};
use crate::server::clock::now_ms;
use crate::server::command::{Command, Replayed};
use crate::server::key::QueueKey;
use crate::server::replication::Apply;
use crate::server::reply::int;
use crate::server::settings;
use crate::server::settings::lease_for;

pub const COMMAND: Command = Command {
    doc: CommandDoc {
        name: "dq.touch",
        summary: "Extends the lease of an in-flight message",
        complexity: "O(log N) where N is the number of messages in the queue",
        arity: -3,
        key: Some(KeyUse::Update),
        numkeys: false,
        args: &[
            Arg::key("queue"),
            Arg::string("id"),
            Arg::duration("lease").token("LEASE").optional(),
            Arg::integer("attempt").token("ATTEMPT").optional(),
            Arg::string("progress").token("PROGRESS").optional(),
        ],
    },
    flags: "write fast",
    acl: "",
    handler: touch,
    grammar: |args| parse(args).map(drop),
    replay: Some(("TOUCH", replay)),
};

/// A parsed DQ.TOUCH.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Touch<'a> {
    pub queue: &'a [u8],
    pub id: &'a [u8],
    pub lease_ms: Option<u64>,
    pub attempt: Option<u32>,
    pub progress: Option<&'a [u8]>,
}

/// Parses `queue id [LEASE ms] [ATTEMPT n]`, options in any order, each once.
pub fn parse<'a>(args: &'a [&'a [u8]]) -> Result<Touch<'a>> {
    let (queue, id, mut o) = parse_queue_and_id("dq.touch", args)?;
    let mut touch = Touch {
        queue,
        id,
        lease_ms: None,
        attempt: None,
        progress: None,
    };
    while o.advance() {
        if let Some(value) = o.value("LEASE")? {
            touch.lease_ms = Some(parse_lease(value)?);
        } else if let Some(value) = o.value("ATTEMPT")? {
            touch.attempt = Some(parse_attempt(value)?);
        } else if let Some(value) = o.value("PROGRESS")? {
            if value.len() > MAX_PROGRESS_LEN {
                return Err(DqError::TooLong {
                    what: "PROGRESS",
                    max: MAX_PROGRESS_LEN,
                });
            }
            touch.progress = Some(value);
        } else {
            return Err(o.unknown());
        }
    }
    Ok(touch)
}

fn touch(ctx: &Context, args: &[RedisString]) -> Result<RedisValue> {
    let argv = bytes(args);
    let t = parse(&argv[1..])?;
    let mut key = QueueKey::open(ctx, &args[1])?;
    let Some(queue) = key.queue() else {
        check_delivery(t.id, None, t.attempt)?;
        return Ok(RedisValue::Null);
    };
    let now = now_ms();
    let deadline = lease_deadline(now, lease_for(queue, t.lease_ms));
    let due_before = queue.next_due();
    let Some(deadline) = queue.touch(t.id, deadline, t.attempt)? else {
        return Ok(RedisValue::Null);
    };
    if let Some(progress) = t.progress {
        queue.set_progress(now, t.id, progress);
    }
    // The lease's length, resolved: the replica's settings may differ.
    let mut apply = Apply::new(ctx, &args[1], now, settings::max_attempts(), "TOUCH");
    apply.arg(&args[2]).number(deadline);
    if let Some(progress) = t.progress {
        apply.bytes(b"PROGRESS").bytes(progress);
    }
    apply.send();
    key.announce(due_before);
    Ok(int(deadline))
}

/// Replays `TOUCH id lease-deadline [PROGRESS value]`.
pub fn replay(queue: &mut Queue, r: &Replayed<'_>) -> Result<()> {
    let (id, deadline, progress) = match r.args {
        [id, deadline] => (id, deadline, None),
        [id, deadline, keyword, value] if is_keyword(keyword, "PROGRESS") => {
            (id, deadline, Some(*value))
        }
        _ => {
            return Err(DqError::BadApply(
                "TOUCH needs id, deadline and maybe PROGRESS value".into(),
            ))
        }
    };
    let deadline = parse_deadline(deadline)?;
    if queue.touch(id, deadline, None)?.is_some() {
        if let Some(progress) = progress {
            queue.set_progress(r.now, id, progress);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grammar::args::leak_args;

    #[test]
    fn grammar() {
        let t = parse(leak_args(&["q", "m"])).unwrap();
        assert_eq!(
            (t.queue, t.id, t.lease_ms, t.attempt),
            (&b"q"[..], &b"m"[..], None, None)
        );
        let t = parse(leak_args(&["q", "m", "attempt", "2", "LEASE", "9"])).unwrap();
        assert_eq!((t.lease_ms, t.attempt), (Some(9), Some(2)));
        let err = |a: &[&str]| parse(leak_args(a)).unwrap_err().to_string();
        assert_eq!(
            err(&["q"]),
            "ERR wrong number of arguments for 'dq.touch' command"
        );
        assert_eq!(
            err(&["q", "m", "LEASE", "0"]),
            "ERR LEASE must be a positive duration: whole milliseconds such as 1500, or a whole number with a unit ms, s, m, h or d such as 30s, 5m or 7d"
        );
        assert_eq!(
            err(&["q", "m", "ATTEMPT", "1", "ATTEMPT", "1"]),
            "ERR ATTEMPT is given more than once"
        );
        assert_eq!(
            err(&["q", "m", "ATTEMPT", "x"]),
            "ERR ATTEMPT must be an integer from 1 to 4294967295"
        );
        assert_eq!(err(&["q", "m", "FOREVER"]), "ERR unknown option 'FOREVER'");
    }
}
