//! DQ.STATS queue
//!
//! Counts per state and lifetime counters, as a record (a map under RESP3,
//! a flat field/value array under RESP2), fields in this order:
//! `delayed`, `ready`, `inflight`, `dead`, `done` (messages now); the
//! lifetime counters `added`, `delivered`, `acked`, `nacked`, `retried`,
//! `lease-expired`, `dead-lettered`, `expired`, `redriven`, `cancelled`,
//! `purged`, `throttled`, `dropped`;
//! `oldest-ready-age-ms` (how long the earliest-due ready message has been
//! due, counted from its ADD if it was added already due; nil when none is
//! ready) and `next-due-at` (Unix ms of the
//! earliest delayed message, nil when none); `schedules`, `groups` (how
//! many groups exist now: with a message waiting, ready, in flight or
//! delayed for a retry, or a pause); then the flow-control fields. An
//! unknown queue has zeros.

use redis_module::{Context, RedisString, RedisValue};

use crate::commands::bytes;
use crate::core::error::Result;
use crate::core::queue::{Queue, Stats, FOREVER};
use crate::grammar::args::parse_queue;
use crate::grammar::docs::{Arg, CommandDoc, KeyUse};
use crate::server::clock::now_ms;
use crate::server::command::Command;
use crate::server::key::{open_read, read};
use crate::server::reply::{int, reply_record};

pub const COMMAND: Command = Command {
    doc: CommandDoc {
        name: "dq.stats",
        summary: "Returns counts per state and the lifetime counters of a queue",
        complexity: "O(P) for P distinct priorities among ready messages; under ORDER FAIR, \
                     O(G*P) for G groups in the turn",
        arity: 2,
        key: Some(KeyUse::Read),
        numkeys: false,
        args: &[Arg::key("queue")],
    },
    flags: "readonly fast",
    acl: "",
    handler: stats,
    grammar: |args| parse(args).map(drop),
    replay: None,
};

pub fn parse<'a>(args: &'a [&'a [u8]]) -> Result<&'a [u8]> {
    parse_queue("dq.stats", args)
}

fn stats(ctx: &Context, args: &[RedisString]) -> Result<RedisValue> {
    parse(&bytes(args)[1..])?;
    let name = &args[1];
    let key = open_read(ctx, name);
    // An absent queue is an empty one: all zeros.
    let stats = read(&key, name)?.map(Queue::stats).unwrap_or_default();
    Ok(reply_record(ctx, fields(&stats, now_ms())))
}

/// The reply's fields, in their documented order (DQ.QUEUES WITHSTATS
/// gives the same record per queue).
pub fn fields(stats: &Stats, now: u64) -> Vec<(&'static str, RedisValue)> {
    let mut fields = vec![
        ("delayed", int(stats.delayed)),
        ("ready", int(stats.ready)),
        ("inflight", int(stats.inflight)),
        ("dead", int(stats.dead)),
        ("done", int(stats.done)),
    ];
    fields.extend(stats.counters.iter().map(|(c, v)| (c.name(), int(v))));
    let age = stats
        .oldest_ready_since
        .map(|since| now.saturating_sub(since));
    fields.push(("oldest-ready-age-ms", age.map_or(RedisValue::Null, int)));
    fields.push((
        "next-due-at",
        stats.next_due_at.map_or(RedisValue::Null, int),
    ));
    fields.push(("schedules", int(stats.schedules)));
    fields.push(("groups", int(stats.groups)));
    let paused = stats.paused_until.is_some_and(|until| now < until);
    let until = stats.paused_until.filter(|&u| paused && u != FOREVER);
    fields.extend([
        ("paused", int(paused.into())),
        ("paused-until", until.map_or(RedisValue::Null, int)),
        (
            "rate",
            stats
                .rate
                .map_or(RedisValue::Null, |r| RedisValue::BulkString(r.to_string())),
        ),
        (
            "max-inflight",
            stats
                .max_inflight
                .map_or(RedisValue::Null, |n| int(n.into())),
        ),
    ]);
    fields
}
