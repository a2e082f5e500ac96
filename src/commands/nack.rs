//! DQ.NACK queue id [DELAY ms | DEAD] [ATTEMPT n] [ERROR text]
//!
//! The work failed. The next attempt is due after DELAY ms, or else after
//! the message's backoff for the attempt that failed (BACKOFF of the
//! message, else of the queue, else `dq.backoff`). When the failed attempt
//! was its last (MAXATTEMPTS), the message becomes dead with reason `nack`.
//! DEAD declares the failure permanent: the message is dead now, with
//! reason `permanent`. ERROR keeps `text` as the message's last error
//! (DQ.GET, PEEK and SCAN show it). A newer version added while it was in
//! flight takes its place instead.
//!
//! ATTEMPT n fences a consumer whose lease ran out: unless the message is
//! in flight in delivery `n` (POP's attempt), the reply is a `STALE` error
//! and nothing changes.
//!
//! Reply: the message's new state as a simple string — `delayed`, `ready`
//! (DELAY 0) or `dead` — or nil when the id was not in flight (without
//! ATTEMPT).

use redis_module::{Context, RedisString, RedisValue};

use crate::commands::bytes;
use crate::core::error::{DqError, Result};
use crate::core::queue::{check_delivery, NackAction, Queue, State};
use crate::grammar::args::{
    add_ms, check_error, is_keyword, parse_attempt, parse_duration_arg, parse_queue_and_id,
};
use crate::grammar::docs::{Arg, CommandDoc, KeyUse};
use crate::server::clock::now_ms;
use crate::server::command::{Command, Replayed};
use crate::server::key::QueueKey;
use crate::server::replication::Apply;
use crate::server::settings;
use crate::server::settings::policy;

pub const COMMAND: Command = Command {
    doc: CommandDoc {
        name: "dq.nack",
        summary: "Ends a delivery as failed: retries after a delay or the backoff, or dead-letters",
        complexity: "O(log N) where N is the number of messages in the queue",
        arity: -3,
        key: Some(KeyUse::Update),
        numkeys: false,
        args: &[
            Arg::key("queue"),
            Arg::string("id"),
            Arg::one_of(
                "outcome",
                &[
                    Arg::duration("delay").token("DELAY"),
                    Arg::pure_token("dead", "DEAD"),
                ],
            )
            .optional(),
            Arg::integer("attempt").token("ATTEMPT").optional(),
            Arg::string("error").token("ERROR").optional(),
        ],
    },
    flags: "write fast",
    acl: "",
    handler: nack,
    grammar: |args| parse(args).map(drop),
    replay: Some(("NACK", replay)),
};

/// A parsed DQ.NACK.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Nack<'a> {
    pub queue: &'a [u8],
    pub id: &'a [u8],
    pub action: NackAction,
    pub attempt: Option<u32>,
    pub error: Option<&'a [u8]>,
}

/// Parses `queue id [DELAY ms | DEAD] [ATTEMPT n] [ERROR text]`, options
/// in any order, each once.
pub fn parse<'a>(args: &'a [&'a [u8]]) -> Result<Nack<'a>> {
    let (queue, id, mut o) = parse_queue_and_id("dq.nack", args)?;
    let mut nack = Nack {
        queue,
        id,
        action: NackAction::Retry(None),
        attempt: None,
        error: None,
    };
    while o.advance() {
        if o.flag("DELAY")? {
            if nack.action == NackAction::Dead {
                return Err(DqError::ConflictingOptions("DELAY", "DEAD"));
            }
            let value = o.value_after("DELAY")?;
            nack.action = NackAction::Retry(Some(parse_duration_arg("DELAY", value)?));
        } else if o.flag("DEAD")? {
            if nack.action != NackAction::Retry(None) {
                return Err(DqError::ConflictingOptions("DELAY", "DEAD"));
            }
            nack.action = NackAction::Dead;
        } else if let Some(value) = o.value("ATTEMPT")? {
            nack.attempt = Some(parse_attempt(value)?);
        } else if let Some(value) = o.value("ERROR")? {
            nack.error = Some(check_error(value)?);
        } else {
            return Err(o.unknown());
        }
    }
    Ok(nack)
}

fn nack(ctx: &Context, args: &[RedisString]) -> Result<RedisValue> {
    let argv = bytes(args);
    let n = parse(&argv[1..])?;
    let now = now_ms();
    if let NackAction::Retry(Some(delay)) = n.action {
        // Refused like DQ.ADD's DELAY, rather than capped.
        add_ms("DELAY", now, delay)?;
    }
    let mut key = QueueKey::open(ctx, &args[1])?;
    let Some(queue) = key.queue() else {
        check_delivery(n.id, None, n.attempt)?;
        return Ok(RedisValue::Null);
    };
    let policy = policy(queue);
    let due_before = queue.next_due();
    let Some(placed) = queue.nack(now, n.id, n.action, n.attempt, n.error, &policy)? else {
        return Ok(RedisValue::Null);
    };
    let mut apply = Apply::new(ctx, &args[1], now, settings::max_attempts(), "NACK");
    apply.arg(&args[2]);
    match n.action {
        NackAction::Dead => apply.bytes(b"DEAD"),
        // The delay the backoff chose travels as a value; with the
        // master's dq.max-attempts, the replica makes the same
        // retry-or-die decision.
        NackAction::Retry(_) => apply.bytes(b"DELAY").number(match placed.state {
            State::Dead => 0,
            _ => placed.due_at.saturating_sub(now),
        }),
    };
    if let Some(error) = n.error {
        apply.bytes(b"ERROR").bytes(error);
    }
    apply.send();
    key.announce(due_before);
    Ok(RedisValue::SimpleStringStatic(
        placed.state.reported().name(),
    ))
}

/// Replays `NACK id (DELAY ms | DEAD) [ERROR text]`.
pub fn replay(queue: &mut Queue, r: &Replayed<'_>) -> Result<()> {
    let (now, policy, args) = (r.now, r.policy(queue), r.args);
    let bad = || DqError::BadApply("NACK needs id, then DELAY ms or DEAD".into());
    let (id, action, rest) = match args {
        [id, dead, rest @ ..] if is_keyword(dead, "DEAD") => (*id, NackAction::Dead, rest),
        [id, delay, ms, rest @ ..] if is_keyword(delay, "DELAY") => {
            let ms = parse_duration_arg("DELAY", ms)?;
            (*id, NackAction::Retry(Some(ms)), rest)
        }
        _ => return Err(bad()),
    };
    let error = match rest {
        [] => None,
        [keyword, text] if is_keyword(keyword, "ERROR") => Some(*text),
        _ => return Err(bad()),
    };
    queue.nack(now, id, action, None, error, &policy)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grammar::args::leak_args;

    #[test]
    fn grammar() {
        let n = parse(leak_args(&["q", "m"])).unwrap();
        assert_eq!((n.queue, n.id), (&b"q"[..], &b"m"[..]));
        assert_eq!(
            (n.action, n.attempt, n.error),
            (NackAction::Retry(None), None, None)
        );
        let n = parse(leak_args(&["q", "m", "delay", "5", "ATTEMPT", "3"])).unwrap();
        assert_eq!((n.action, n.attempt), (NackAction::Retry(Some(5)), Some(3)));
        let n = parse(leak_args(&["q", "m", "ERROR", "boom", "dead"])).unwrap();
        assert_eq!((n.action, n.error), (NackAction::Dead, Some(&b"boom"[..])));
        let err = |a: &[&str]| parse(leak_args(a)).unwrap_err().to_string();
        assert_eq!(
            err(&["q"]),
            "ERR wrong number of arguments for 'dq.nack' command"
        );
        assert_eq!(
            err(&["q", "m", "DELAY", "-1"]),
            "ERR DELAY must be a duration: whole milliseconds such as 1500, or a whole number \
             with a unit ms, s, m, h or d such as 30s, 5m or 7d"
        );
        assert_eq!(
            err(&["q", "m", "DELAY", "1", "DELAY", "2"]),
            "ERR DELAY is given more than once"
        );
        assert_eq!(
            err(&["q", "m", "DELAY", "1", "DEAD"]),
            "ERR DELAY and DEAD cannot be used together"
        );
        assert_eq!(
            err(&["q", "m", "DEAD", "DELAY", "1"]),
            "ERR DELAY and DEAD cannot be used together"
        );
        assert_eq!(
            err(&["q", "m", "DEAD", "DEAD"]),
            "ERR DEAD is given more than once"
        );
        assert_eq!(
            err(&["q", "m", "ATTEMPT", "0"]),
            "ERR ATTEMPT must be an integer from 1 to 4294967295"
        );
        assert_eq!(
            err(&["q", "m", "ATTEMPT", "4294967296"]),
            "ERR ATTEMPT must be an integer from 1 to 4294967295"
        );
        assert_eq!(err(&["q", "m", "ATTEMPT"]), "ERR ATTEMPT needs a value");
        assert_eq!(err(&["q", "m", "ERROR", ""]), "ERR ERROR must not be empty");
        let long = "x".repeat(crate::core::limits::MAX_ERROR_LEN + 1);
        assert_eq!(
            err(&["q", "m", "ERROR", &long]),
            "ERR ERROR is longer than 4096 bytes"
        );
        assert_eq!(err(&["q", "m", "LATER"]), "ERR unknown option 'LATER'");
        assert_eq!(err(&["q", ""]), "ERR id must not be empty");
    }
}
