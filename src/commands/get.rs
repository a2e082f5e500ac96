//! DQ.GET queue id
//!
//! One message, or nil when the id is unknown. Replies a record (a map under
//! RESP3, a flat field/value array under RESP2) with these fields, always in
//! this order:
//!
//! | field | value |
//! |---|---|
//! | `id` | the id |
//! | `state` | `delayed`, `ready`, `inflight`, `dead` or `done` |
//! | `payload` | the payload |
//! | `priority` | integer |
//! | `attempt` | deliveries so far (0 before the first POP) |
//! | `due-at` | Unix ms at which it is or was due; nil once done |
//! | `lease-deadline` | Unix ms at which the lease ends; nil unless in flight |
//! | `added-at` | Unix ms of the ADD that wrote this version |
//! | `replacement-pending` | 1 when a newer version waits for this delivery to end, else 0 |
//! | `max-attempts` | deliveries allowed before it is dead (in force for this message) |
//! | `max-attempts-from` | `message`, `queue` or `module`: where that value comes from |
//! | `backoff` | the retry delays in force for this message |
//! | `backoff-from` | `message`, `queue` or `module` |
//! | `dead-reason` | `nack`, `lease-expired`, `expired` or `permanent` (NACK DEAD); nil unless dead |
//! | `died-at` | Unix ms of death; nil unless dead |
//! | `expires-at` | Unix ms by which it must be acknowledged (ADD's TTL), else nil |
//! | `group` | ADD's GROUP, else nil |
//! | `waiting-for` | the id holding its group while it is due but held back (state `delayed`), else nil |
//! | `attempts-left` | further deliveries allowed: max-attempts less the deliveries since the last ADD, replacement or REDRIVE |
//! | `last-error` | the ERROR text of its last NACK, else nil |
//! | `result` | what DQ.DONE kept; nil unless done by DONE |
//! | `finished-at` | Unix ms of the ACK or DONE that finished it; nil unless done |
//! | `retained-until` | Unix ms at which its retention runs out; nil unless done |
//! | `progress` | the last PROGRESS of its current (or, once done, last) delivery, else nil |

use redis_module::{Context, RedisString, RedisValue};

use crate::commands::bytes;
use crate::core::error::{DqError, Result};
use crate::core::queue::State;
use crate::grammar::args::check_id;
use crate::grammar::docs::{Arg, CommandDoc, KeyUse};
use crate::server::command::Command;
use crate::server::key::{open_read, read};
use crate::server::reply::{int, reply_record, word};
use crate::server::settings::policy;

pub const COMMAND: Command = Command {
    doc: CommandDoc {
        name: "dq.get",
        summary: "Returns one message: state, payload, times, attempts and policy",
        complexity: "O(1)",
        arity: 3,
        key: Some(KeyUse::Read),
        numkeys: false,
        args: &[Arg::key("queue"), Arg::string("id")],
    },
    flags: "readonly fast",
    acl: "",
    handler: get,
    grammar: |args| parse(args).map(drop),
    replay: None,
};

/// Parses `queue id`.
pub fn parse<'a>(args: &'a [&'a [u8]]) -> Result<(&'a [u8], &'a [u8])> {
    match args {
        [queue, id] => Ok((queue, check_id(id)?)),
        _ => Err(DqError::WrongArity("dq.get")),
    }
}

fn get(ctx: &Context, args: &[RedisString]) -> Result<RedisValue> {
    let argv = bytes(args);
    let (_, id) = parse(&argv[1..])?;
    let name = &args[1];
    let key = open_read(ctx, name);
    let Some(queue) = read(&key, name)? else {
        return Ok(RedisValue::Null);
    };
    let Some(m) = queue.get(id) else {
        return Ok(RedisValue::Null);
    };
    let policy = policy(queue);
    let (max_attempts, max_attempts_from) = policy.max_attempts_or(m.max_attempts());
    let (backoff, backoff_from) = policy.backoff_or(m.backoff());
    let backoff = backoff.to_string();
    let text = word;
    let waiting_for = match (m.group(), m.state) {
        (Some(group), State::Waiting) => queue.group_holder(group).map(|h| h.id()),
        _ => None,
    };
    let bulk =
        |v: Option<&[u8]>| v.map_or(RedisValue::Null, |b| RedisValue::StringBuffer(b.to_vec()));
    let death = m.death();
    Ok(reply_record(
        ctx,
        vec![
            ("id", RedisValue::StringBuffer(id.to_vec())),
            ("state", text(m.state.reported().name())),
            ("payload", RedisValue::StringBuffer(m.payload().to_vec())),
            ("priority", RedisValue::Integer(m.priority.into())),
            ("attempt", int(m.attempt.into())),
            (
                "due-at",
                match m.state {
                    State::Done => RedisValue::Null,
                    _ => int(m.due_at),
                },
            ),
            (
                "lease-deadline",
                match m.state {
                    State::Inflight => int(m.lease_deadline),
                    _ => RedisValue::Null,
                },
            ),
            ("added-at", int(m.added_at)),
            ("replacement-pending", int(m.replacement().is_some().into())),
            ("max-attempts", int(max_attempts.into())),
            ("max-attempts-from", text(max_attempts_from.name())),
            ("backoff", RedisValue::BulkString(backoff)),
            ("backoff-from", text(backoff_from.name())),
            (
                "dead-reason",
                death.map_or(RedisValue::Null, |d| text(d.reason.name())),
            ),
            ("died-at", death.map_or(RedisValue::Null, |d| int(d.at))),
            (
                "expires-at",
                m.expire_at()
                    .filter(|_| m.state != State::Done)
                    .map_or(RedisValue::Null, int),
            ),
            ("group", bulk(m.group())),
            ("waiting-for", bulk(waiting_for)),
            (
                "attempts-left",
                int(max_attempts.saturating_sub(m.attempts_used()).into()),
            ),
            ("last-error", bulk(m.last_error())),
            ("result", bulk(m.result())),
            ("finished-at", m.finished_at().map_or(RedisValue::Null, int)),
            (
                "retained-until",
                match m.state {
                    State::Done => int(m.due_at),
                    _ => RedisValue::Null,
                },
            ),
            ("progress", bulk(m.progress())),
        ],
    ))
}
