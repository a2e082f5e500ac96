//! DQ.QUEUES [MATCH pattern] [WITHSTATS]
//!
//! The queues this node holds in the selected database, sorted by bytes.
//! MATCH keeps the names that match a glob-style pattern, as SCAN MATCH
//! does. WITHSTATS adds each queue's DQ.STATS record: a map of name to
//! record under RESP3, a flat `[name, record, name, record, ...]` array
//! under RESP2 (as CONFIG GET pairs names and values), so a dashboard or
//! a metrics scrape reads every queue of a node in one call.
//!
//! The names come from the module's own list of the queues it holds (kept
//! by every write, load and key event), not from a walk of the keyspace:
//! O(Q log Q) in the node's queues, whatever else the database holds.

use redis_module::{Context, RedisString, RedisValue};

use crate::commands::{bytes, stats};
use crate::core::error::{DqError, Result};
use crate::grammar::args::Options;
use crate::grammar::docs::{Arg, CommandDoc};
use crate::grammar::glob;
use crate::server::clock::now_ms;
use crate::server::command::Command;
use crate::server::key::{open_read, read};
use crate::server::keyspace::selected_db;
use crate::server::registry;
use crate::server::reply::reply_records;

pub const COMMAND: Command = Command {
    doc: CommandDoc {
        name: "dq.queues",
        summary: "Lists the queues held in the selected database, with their stats on request",
        complexity: "O(Q log Q) for Q queues in the database",
        arity: -1,
        key: None,
        numkeys: false,
        args: &[
            Arg::string("pattern").token("MATCH").optional(),
            Arg::pure_token("withstats", "WITHSTATS").optional(),
        ],
    },
    flags: "readonly",
    acl: "dangerous",
    handler: queues,
    grammar: |args| parse(args).map(drop),
    replay: None,
};

/// What DQ.QUEUES was asked.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Listing<'a> {
    pub pattern: Option<&'a [u8]>,
    pub with_stats: bool,
}

/// Parses `[MATCH pattern] [WITHSTATS]` (the arguments after the name).
pub fn parse<'a>(args: &'a [&'a [u8]]) -> Result<Listing<'a>> {
    let mut listing = Listing::default();
    let mut o = Options::new(args);
    while o.advance() {
        if let Some(pattern) = o.value("MATCH")? {
            listing.pattern = Some(pattern);
        } else if o.flag("WITHSTATS")? {
            listing.with_stats = true;
        } else {
            return Err(o.unknown());
        }
    }
    Ok(listing)
}

fn queues(ctx: &Context, args: &[RedisString]) -> Result<RedisValue> {
    let argv = bytes(args);
    let listing = parse(argv.get(1..).ok_or(DqError::WrongArity("dq.queues"))?)?;
    let db = selected_db(ctx);
    let mut names = registry::with(|r| r.names(db));
    if let Some(pattern) = listing.pattern {
        names.retain(|name| glob::matches(pattern, name));
    }
    names.sort_unstable();
    let now = now_ms();
    // Each name is checked against its key: one that went since the list
    // last heard of it is left out.
    let mut found = Vec::with_capacity(names.len());
    for name in names {
        let key_name = RedisString::create_from_slice(ctx.ctx, &name);
        let key = open_read(ctx, &key_name);
        if let Ok(Some(queue)) = read(&key, &key_name) {
            let stats = listing.with_stats.then(|| queue.stats());
            found.push((name, stats));
        }
    }
    if !listing.with_stats {
        return Ok(RedisValue::Array(
            found
                .into_iter()
                .map(|(name, _)| RedisValue::StringBuffer(name))
                .collect(),
        ));
    }
    let records = found
        .into_iter()
        .map(|(name, queue_stats)| (name, stats::fields(&queue_stats.unwrap_or_default(), now)))
        .collect();
    Ok(reply_records(ctx, records))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grammar() {
        assert_eq!(parse(&[]).unwrap(), Listing::default());
        let args: [&[u8]; 3] = [b"match", b"t-*", b"WithStats"];
        assert_eq!(
            parse(&args).unwrap(),
            Listing {
                pattern: Some(b"t-*"),
                with_stats: true
            }
        );
        assert!(parse(&[b"MATCH"]).is_err());
        assert!(parse(&[b"WITHSTATS", b"WITHSTATS"]).is_err());
        assert!(parse(&[b"MATCH", b"a", b"MATCH", b"b"]).is_err());
        assert!(parse(&[b"COUNT"]).is_err());
    }
}
