//! DQ.SCAN queue cursor [STATE DELAYED|READY|INFLIGHT|DEAD|DONE] [COUNT n]
//!
//! Iterates a queue of any size, as SCAN iterates a keyspace. Cursor `0`
//! starts; the reply is `[next-cursor, entries]` and a next cursor of `0`
//! ends the iteration. Entries are PEEK's `[id, payload, attempt, time,
//! last-error]`.
//! Every message present for the whole iteration is returned (exactly
//! once, as it happens: a message keeps its place for life); one added or
//! removed meanwhile may or may not be. COUNT (default 10) bounds the
//! entries of one reply; a call looks at about ten times COUNT places, so
//! a reply may hold fewer entries, even none, with a cursor that is not 0.

use redis_module::{Context, RedisString, RedisValue};

use crate::commands::bytes;
use crate::commands::peek::entry;
use crate::core::error::{DqError, Result};
use crate::core::queue::State;
use crate::grammar::args::{parse_count, parse_in_range, parse_state, Options};
use crate::grammar::docs::{Arg, CommandDoc, KeyUse, STATE};
use crate::server::command::Command;
use crate::server::key::{open_read, read};
use crate::server::reply::cursor_page;

pub const COMMAND: Command = Command {
    doc: CommandDoc {
        name: "dq.scan",
        summary: "Iterates the messages of a queue, a page per call",
        complexity: "O(COUNT) per call, O(N) for a whole iteration",
        arity: -3,
        key: Some(KeyUse::Read),
        numkeys: false,
        args: &[
            Arg::key("queue"),
            Arg::integer("cursor"),
            STATE.token("STATE").optional(),
            Arg::integer("count").token("COUNT").optional(),
        ],
    },
    flags: "readonly",
    acl: "",
    handler: scan,
    grammar: |args| parse(args).map(drop),
    replay: None,
};

pub const DEFAULT_COUNT: usize = 10;

const CURSOR: &str = "a non-negative integer that DQ.SCAN replied (0 to start)";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScanArgs<'a> {
    pub queue: &'a [u8],
    pub cursor: u64,
    pub state: Option<State>,
    pub count: usize,
}

pub fn parse<'a>(args: &'a [&'a [u8]]) -> Result<ScanArgs<'a>> {
    let [queue, cursor, options @ ..] = args else {
        return Err(DqError::WrongArity("dq.scan"));
    };
    // Strict, as every number dq reads: no sign, no spaces.
    let cursor = parse_in_range("cursor", CURSOR, cursor, 0, i64::MAX)? as u64;
    let mut parsed = ScanArgs {
        queue,
        cursor,
        state: None,
        count: DEFAULT_COUNT,
    };
    let mut o = Options::new(options);
    while o.advance() {
        if let Some(value) = o.value("STATE")? {
            parsed.state = Some(parse_state(value)?);
        } else if let Some(value) = o.value("COUNT")? {
            parsed.count = parse_count(value)?;
        } else {
            return Err(o.unknown());
        }
    }
    Ok(parsed)
}

fn scan(ctx: &Context, args: &[RedisString]) -> Result<RedisValue> {
    let argv = bytes(args);
    let parsed = parse(&argv[1..])?;
    let key = open_read(ctx, &args[1]);
    let (next, entries) = match read(&key, &args[1])? {
        Some(queue) => {
            let (next, found) = queue.scan(parsed.cursor, parsed.state, parsed.count);
            (next, found.into_iter().map(entry).collect())
        }
        None => (0, Vec::new()),
    };
    Ok(cursor_page(next.to_string(), entries))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grammar::args::leak_args;

    #[test]
    fn grammar() {
        let a = parse(leak_args(&["q", "0"])).unwrap();
        assert_eq!((a.cursor, a.state, a.count), (0, None, 10));
        let a = parse(leak_args(&["q", "17", "state", "dead", "COUNT", "500"])).unwrap();
        assert_eq!((a.cursor, a.state, a.count), (17, Some(State::Dead), 500));
        let err = |a: &[&str]| parse(leak_args(a)).unwrap_err().to_string();
        assert_eq!(
            err(&["q"]),
            "ERR wrong number of arguments for 'dq.scan' command"
        );
        assert_eq!(
            err(&["q", "-1"]),
            "ERR cursor must be a non-negative integer that DQ.SCAN replied (0 to start)"
        );
        for strict in ["+5", " 5", "5.0"] {
            assert_eq!(err(&["q", strict]), format!("ERR cursor must be {CURSOR}"));
        }
        assert_eq!(
            err(&["q", "0", "STATE", "GONE"]),
            "ERR state must be one of DELAYED, READY, INFLIGHT, DEAD, DONE"
        );
        assert_eq!(
            err(&["q", "0", "COUNT", "0"]),
            "ERR COUNT must be an integer from 1 to 10000"
        );
        assert_eq!(err(&["q", "0", "STATE"]), "ERR STATE needs a value");
        assert_eq!(
            err(&["q", "0", "COUNT", "1", "COUNT", "2"]),
            "ERR COUNT is given more than once"
        );
        assert_eq!(err(&["q", "0", "MATCH", "x"]), "ERR unknown option 'MATCH'");
    }
}
