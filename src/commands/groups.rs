//! DQ.GROUPS queue cursor [MATCH pattern] [COUNT n]
//!
//! Iterates the queue's groups, as SCAN iterates a keyspace: cursor `0`
//! starts, and the reply is `[next-cursor, [[group, waiting, ready,
//! inflight, paused-until], ...]]`, a next cursor of `0` ending the
//! iteration. `waiting`: the group's due messages held back (by
//! GROUPLIMIT, GROUPRATE or its pause); `paused-until`: nil when not
//! paused, -1 when paused until DQ.RESUME, else the pause's end (Unix ms).
//!
//! Groups are visited in name order and a cursor names where the next
//! call goes on (it is opaque: hex digits), so every group present for the
//! whole iteration is returned exactly once; one made or gone meanwhile
//! may or may not be. COUNT (default 10, at most 10000) bounds the groups
//! looked at; MATCH (glob-style, as SCAN MATCH) keeps those whose name
//! matches, so a reply may hold fewer, even none, with a cursor that is
//! not 0. A group exists while it has a message waiting, ready, in flight
//! or delayed for a retry, or a pause (or, under GROUPRATE, deliveries its
//! window still counts). An absent queue replies `["0", []]`.

use redis_module::{Context, RedisString, RedisValue};

use crate::commands::bytes;
use crate::core::error::{DqError, Result};
use crate::core::queue::{GroupInfo, FOREVER};
use crate::grammar::args::{parse_count, Options};
use crate::grammar::docs::{Arg, CommandDoc, KeyUse};
use crate::grammar::glob;
use crate::server::command::Command;
use crate::server::key::{open_read, read};
use crate::server::reply::{cursor_page, int};

pub const COMMAND: Command = Command {
    doc: CommandDoc {
        name: "dq.groups",
        summary: "Iterates the groups of a queue, with their counts and pauses, a page per call",
        complexity: "O(COUNT + log G) per call for G groups, O(G) for a whole iteration",
        arity: -3,
        key: Some(KeyUse::Read),
        numkeys: false,
        args: &[
            Arg::key("queue"),
            Arg::string("cursor"),
            Arg::string("pattern").token("MATCH").optional(),
            Arg::integer("count").token("COUNT").optional(),
        ],
    },
    flags: "readonly",
    acl: "",
    handler: groups,
    grammar: |args| parse(args).map(drop),
    replay: None,
};

pub const DEFAULT_COUNT: usize = 10;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupsArgs<'a> {
    pub queue: &'a [u8],
    /// The group name to go on from (empty: from the start).
    pub from: Vec<u8>,
    pub pattern: Option<&'a [u8]>,
    pub count: usize,
}

pub fn parse<'a>(args: &'a [&'a [u8]]) -> Result<GroupsArgs<'a>> {
    let [queue, cursor, options @ ..] = args else {
        return Err(DqError::WrongArity("dq.groups"));
    };
    let mut parsed = GroupsArgs {
        queue,
        from: decode_cursor(cursor)?,
        pattern: None,
        count: DEFAULT_COUNT,
    };
    let mut o = Options::new(options);
    while o.advance() {
        if let Some(value) = o.value("MATCH")? {
            parsed.pattern = Some(value);
        } else if let Some(value) = o.value("COUNT")? {
            parsed.count = parse_count(value)?;
        } else {
            return Err(o.unknown());
        }
    }
    Ok(parsed)
}

/// `0`, or the hex digits of a group name a reply gave.
fn decode_cursor(cursor: &[u8]) -> Result<Vec<u8>> {
    let bad = || DqError::BadValue {
        option: "cursor",
        expected: "0 or a cursor DQ.GROUPS replied",
    };
    if cursor == b"0" {
        return Ok(Vec::new());
    }
    if cursor.is_empty() || !cursor.len().is_multiple_of(2) {
        return Err(bad());
    }
    cursor
        .chunks(2)
        .map(|pair| {
            std::str::from_utf8(pair)
                .ok()
                .filter(|p| p.bytes().all(|b| b.is_ascii_hexdigit()))
                .and_then(|p| u8::from_str_radix(p, 16).ok())
                .ok_or_else(bad)
        })
        .collect()
}

fn encode_cursor(name: &[u8]) -> String {
    name.iter().map(|b| format!("{b:02x}")).collect()
}

/// `[group, waiting, ready, inflight, paused-until]`; a pause whose time
/// has passed at `now` is no pause.
fn entry(info: &GroupInfo<'_>, now: u64) -> RedisValue {
    let paused = match info.paused_until.filter(|&until| until > now) {
        None => RedisValue::Null,
        Some(FOREVER) => RedisValue::Integer(-1),
        Some(until) => int(until),
    };
    RedisValue::Array(vec![
        RedisValue::StringBuffer(info.name.to_vec()),
        int(info.waiting),
        int(info.ready),
        int(info.inflight),
        paused,
    ])
}

fn groups(ctx: &Context, args: &[RedisString]) -> Result<RedisValue> {
    let argv = bytes(args);
    let parsed = parse(&argv[1..])?;
    let key = open_read(ctx, &args[1]);
    let now = crate::server::clock::now_ms();
    let (next, entries) = match read(&key, &args[1])? {
        Some(queue) => {
            let keep = |name: &[u8]| parsed.pattern.is_none_or(|p| glob::matches(p, name));
            let (found, next) = queue.groups_from(&parsed.from, parsed.count, keep);
            let entries = found.iter().map(|g| entry(g, now)).collect();
            (next.map_or_else(|| "0".to_string(), encode_cursor), entries)
        }
        None => ("0".to_string(), Vec::new()),
    };
    Ok(cursor_page(next, entries))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grammar::args::leak_args;

    #[test]
    fn grammar() {
        let a = parse(leak_args(&["q", "0"])).unwrap();
        assert_eq!((a.from.len(), a.pattern, a.count), (0, None, 10));
        let a = parse(leak_args(&["q", "742d31", "match", "t-*", "COUNT", "100"])).unwrap();
        assert_eq!(a.from, b"t-1");
        assert_eq!((a.pattern, a.count), (Some(&b"t-*"[..]), 100));
        assert_eq!(encode_cursor(b"t-1"), "742d31");
        let err = |a: &[&str]| parse(leak_args(a)).unwrap_err().to_string();
        assert_eq!(
            err(&["q"]),
            "ERR wrong number of arguments for 'dq.groups' command"
        );
        for bad in ["xyz", "7", "-1", "", "0x"] {
            assert_eq!(
                err(&["q", bad]),
                "ERR cursor must be 0 or a cursor DQ.GROUPS replied",
                "{bad}"
            );
        }
        assert!(err(&["q", "0", "COUNT", "0"]).starts_with("ERR COUNT must be"));
        assert!(err(&["q", "0", "COUNT", "x"]).starts_with("ERR COUNT must be"));
        assert_eq!(err(&["q", "0", "COUNT"]), "ERR COUNT needs a value");
        assert_eq!(err(&["q", "0", "LIMIT", "3"]), "ERR unknown option 'LIMIT'");
    }
}
