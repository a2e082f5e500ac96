//! DQ.SCHEDULES queue
//!
//! Every schedule of the queue, by name: an array of records (maps under
//! RESP3, field/value arrays under RESP2) with the fields `name`, `spec`
//! (`every 5m` or `cron 0 8 * * *`), `tz`, `next-run`, `last-run`,
//! `runs`, `skipped`, `limit`, `start`, `end`, `missed`, `overlap`, then
//! what each run adds: `payload`, `priority`, `max-attempts`, `backoff`,
//! `group`, `ttl`. Times are Unix ms; a value the schedule does not have
//! is nil. An absent queue has none: an empty array.

use redis_module::{Context, RedisString, RedisValue};

use crate::commands::bytes;
use crate::core::error::Result;
use crate::core::schedule::Schedule;
use crate::grammar::args::parse_queue;
use crate::grammar::docs::{Arg, CommandDoc, KeyUse};
use crate::server::command::Command;
use crate::server::key::{open_read, read};
use crate::server::reply::{int, reply_record_list, Fields};

pub const COMMAND: Command = Command {
    doc: CommandDoc {
        name: "dq.schedules",
        summary: "Lists a queue's recurring schedules and where each stands",
        complexity: "O(S) for S schedules",
        arity: 2,
        key: Some(KeyUse::Read),
        numkeys: false,
        args: &[Arg::key("queue")],
    },
    flags: "readonly",
    acl: "",
    handler: schedules,
    grammar: |args| parse(args).map(drop),
    replay: None,
};

pub fn parse<'a>(args: &'a [&'a [u8]]) -> Result<&'a [u8]> {
    parse_queue("dq.schedules", args)
}

fn schedules(ctx: &Context, args: &[RedisString]) -> Result<RedisValue> {
    parse(&bytes(args)[1..])?;
    let name = &args[1];
    let key = open_read(ctx, name);
    let Some(queue) = read(&key, name)? else {
        return Ok(RedisValue::Array(Vec::new()));
    };
    let records = queue.schedules().map(|(n, s)| fields(n, s)).collect();
    Ok(reply_record_list(ctx, records))
}

fn opt(v: Option<u64>) -> RedisValue {
    v.map_or(RedisValue::Null, int)
}

fn text(s: &str) -> RedisValue {
    RedisValue::BulkString(s.to_owned())
}

/// One schedule's record, in the documented order.
pub fn fields(name: &[u8], s: &Schedule) -> Fields {
    let t = &s.template;
    vec![
        ("name", RedisValue::StringBuffer(name.to_vec())),
        ("spec", text(&s.spec.describe())),
        ("tz", text(s.spec.tz_name())),
        ("next-run", opt(s.next_run)),
        ("last-run", opt(s.last_run)),
        ("runs", int(s.runs)),
        ("skipped", int(s.skipped)),
        ("limit", opt(s.limit)),
        ("start", int(s.start)),
        ("end", opt(s.end)),
        ("missed", text(s.missed.name())),
        ("overlap", text(s.overlap.name())),
        ("payload", RedisValue::StringBuffer(t.payload.to_vec())),
        ("priority", RedisValue::Integer(t.priority.into())),
        ("max-attempts", opt(t.max_attempts.map(u64::from))),
        (
            "backoff",
            t.backoff
                .as_ref()
                .map_or(RedisValue::Null, |b| text(&b.to_string())),
        ),
        (
            "group",
            t.group
                .as_ref()
                .map_or(RedisValue::Null, |g| RedisValue::StringBuffer(g.to_vec())),
        ),
        ("ttl", opt(t.ttl_ms)),
    ]
}
