//! DQ.PEEK queue DELAYED|READY|INFLIGHT|DEAD|DONE [COUNT n]
//!
//! Looks at up to n messages (default 10, at most 10000) of one state
//! without taking them, in the order they will leave that state: delayed by
//! due time (first those already due but held back by their GROUP, by
//! group), ready in POP order, in flight by lease deadline, dead by time
//! of death. Reply: an array of entries `[id, payload, attempt, time,
//! last-error]` where time is the due time, the lease deadline or the time
//! of death (Unix ms) and last-error the ERROR text of its last NACK (nil
//! when none); empty when there are none.

use redis_module::{Context, RedisString, RedisValue};

use crate::commands::bytes;
use crate::core::error::{DqError, Result};
use crate::core::queue::{Record, State};
use crate::grammar::args::{parse_count, parse_state, Options};
use crate::grammar::docs::{Arg, CommandDoc, KeyUse, STATE};
use crate::server::command::Command;
use crate::server::key::{open_read, read};
use crate::server::reply::int;

pub const COMMAND: Command = Command {
    doc: CommandDoc {
        name: "dq.peek",
        summary: "Returns messages of one state without taking them",
        complexity: "O(log N + M) for M messages returned from a queue of N; READY under ORDER \
                     FAIR, O(M + S) for S groups emptied since their last turn",
        arity: -3,
        key: Some(KeyUse::Read),
        numkeys: false,
        args: &[
            Arg::key("queue"),
            STATE,
            Arg::integer("count").token("COUNT").optional(),
        ],
    },
    flags: "readonly",
    acl: "",
    handler: peek,
    grammar: |args| parse(args).map(drop),
    replay: None,
};

pub const DEFAULT_COUNT: usize = 10;

/// Parses `queue STATE [COUNT n]`.
pub fn parse<'a>(args: &'a [&'a [u8]]) -> Result<(&'a [u8], State, usize)> {
    let [queue, state, options @ ..] = args else {
        return Err(DqError::WrongArity("dq.peek"));
    };
    let state = parse_state(state)?;
    let mut count = DEFAULT_COUNT;
    let mut o = Options::new(options);
    while o.advance() {
        match o.value("COUNT")? {
            Some(value) => count = parse_count(value)?,
            None => return Err(o.unknown()),
        }
    }
    Ok((queue, state, count))
}

fn peek(ctx: &Context, args: &[RedisString]) -> Result<RedisValue> {
    let argv = bytes(args);
    let (_, state, count) = parse(&argv[1..])?;
    let key = open_read(ctx, &args[1]);
    let Some(queue) = read(&key, &args[1])? else {
        return Ok(RedisValue::Array(Vec::new()));
    };
    Ok(RedisValue::Array(
        queue.peek(state, count).into_iter().map(entry).collect(),
    ))
}

/// `[id, payload, attempt, time, last-error]`: the time that matters in
/// its state — the lease deadline in flight, the time of death when dead,
/// when it finished once done, else the due time. (DQ.SCAN's entries too.)
pub fn entry(m: &Record) -> RedisValue {
    let time = match m.state {
        State::Inflight => m.lease_deadline,
        State::Dead => m.death().map_or(m.due_at, |d| d.at),
        State::Done => m.finished_at().unwrap_or(m.due_at),
        State::Delayed | State::Waiting | State::Ready => m.due_at,
    };
    RedisValue::Array(vec![
        RedisValue::StringBuffer(m.id().to_vec()),
        RedisValue::StringBuffer(m.payload().to_vec()),
        int(m.attempt.into()),
        int(time),
        m.last_error()
            .map_or(RedisValue::Null, |e| RedisValue::StringBuffer(e.to_vec())),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grammar::args::leak_args;

    #[test]
    fn grammar() {
        assert_eq!(
            parse(leak_args(&["q", "dead"])).unwrap(),
            (&b"q"[..], State::Dead, 10)
        );
        assert_eq!(
            parse(leak_args(&["q", "READY", "COUNT", "3"])).unwrap().2,
            3
        );
        let err = |a: &[&str]| parse(leak_args(a)).unwrap_err().to_string();
        assert_eq!(
            err(&["q"]),
            "ERR wrong number of arguments for 'dq.peek' command"
        );
        assert_eq!(
            err(&["q", "GONE"]),
            "ERR state must be one of DELAYED, READY, INFLIGHT, DEAD, DONE"
        );
        assert_eq!(
            err(&["q", "READY", "COUNT", "0"]),
            "ERR COUNT must be an integer from 1 to 10000"
        );
    }
}
