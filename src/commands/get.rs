//! DQ.GET queue id
//!
//! One message, or nil when the id is unknown. Replies a record (a map under
//! RESP3, a flat field/value array under RESP2) with these fields, always in
//! this order:
//!
//! | field | value |
//! |---|---|
//! | `id` | the id |
//! | `state` | `delayed`, `ready`, `inflight` or `dead` |
//! | `payload` | the payload |
//! | `priority` | integer |
//! | `attempt` | deliveries so far (0 before the first POP) |
//! | `due-at` | Unix ms at which it is or was due |
//! | `lease-deadline` | Unix ms at which the lease ends; nil unless in flight |
//! | `added-at` | Unix ms of the ADD that wrote this version |
//! | `replacement-pending` | 1 when a newer version waits for this delivery to end, else 0 |
//! | `max-attempts` | deliveries allowed before it is dead (in force for this message) |
//! | `max-attempts-from` | `message`, `queue` or `module`: where that value comes from |
//! | `backoff` | the retry delays in force for this message |
//! | `backoff-from` | `message`, `queue` or `module` |
//! | `dead-reason` | `nack`, `lease-expired` or `expired`; nil unless dead |
//! | `died-at` | Unix ms of death; nil unless dead |
//! | `expires-at` | Unix ms by which it must be acknowledged (ADD's TTL), else nil |
//! | `group` | ADD's GROUP, else nil |
//! | `waiting-for` | the id holding its group while it is due but held back (state `delayed`), else nil |

use redis_module::{Context, RedisResult, RedisString, RedisValue};

use crate::args::check_id;
use crate::commands::{bytes, int, reply, reply_record};
use crate::docs::{Arg, CommandDoc, KeyUse};
use crate::error::{DqError, Result};
use crate::keyed_queue as queue;
use crate::message::State;
use crate::redis_store::RedisStore;
use crate::store::Store;

pub const DOC: CommandDoc = CommandDoc {
    name: "dq.get",
    summary: "Returns one message: state, payload, times, attempts and policy",
    complexity: "O(1)",
    arity: 3,
    key: Some(KeyUse::Read),
    args: &[Arg::key("queue"), Arg::string("id")],
};

pub fn command(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    let argv = bytes(&args);
    reply(get(ctx, &argv[1..]))
}

fn get(ctx: &Context, args: &[&[u8]]) -> Result<RedisValue> {
    let [name, id] = args else {
        return Err(DqError::WrongArity("dq.get"));
    };
    let id = check_id(id)?;
    let mut store = RedisStore::open(ctx, name, false)?;
    let Some(m) = queue::get(&mut store, id)? else {
        return Ok(RedisValue::Null);
    };
    let policy = store.policy();
    let (max_attempts, max_attempts_from) = policy.max_attempts_for(&m);
    let (backoff, backoff_from) = policy.backoff_for(&m);
    let backoff = backoff.to_string();
    let text = |s: &'static str| RedisValue::SimpleStringStatic(s);
    let waiting_for = match (&m.group, m.state) {
        (Some(group), State::Waiting) => store.group_holder(group)?,
        _ => None,
    };
    let bulk = |v: Option<Vec<u8>>| v.map_or(RedisValue::Null, RedisValue::StringBuffer);
    Ok(reply_record(
        ctx,
        vec![
            ("id", RedisValue::StringBuffer(id.to_vec())),
            ("state", RedisValue::SimpleStringStatic(m.state.name())),
            ("payload", RedisValue::StringBuffer(m.payload)),
            ("priority", RedisValue::Integer(m.priority.into())),
            ("attempt", int(m.attempt.into())),
            ("due-at", int(m.due_at)),
            (
                "lease-deadline",
                m.lease_deadline.map_or(RedisValue::Null, int),
            ),
            ("added-at", int(m.added_at)),
            ("replacement-pending", int(m.replacement.is_some().into())),
            ("max-attempts", int(max_attempts.into())),
            ("max-attempts-from", text(max_attempts_from.name())),
            ("backoff", RedisValue::BulkString(backoff)),
            ("backoff-from", text(backoff_from.name())),
            (
                "dead-reason",
                m.death.map_or(RedisValue::Null, |d| text(d.reason.name())),
            ),
            ("died-at", m.death.map_or(RedisValue::Null, |d| int(d.at))),
            ("expires-at", m.expire_at.map_or(RedisValue::Null, int)),
            ("group", bulk(m.group)),
            ("waiting-for", bulk(waiting_for)),
        ],
    ))
}
