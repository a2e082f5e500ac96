//! DQ.APPLY queue now max-attempts VERB args...
//!
//! How a replica and the AOF replay a write (see `server/replication.rs`,
//! which builds it): `now` is the master's clock at the write, `max-attempts`
//! its `dq.max-attempts`. Only the master's replication stream and the
//! AOF may send it; a client gets an error. The verbs, each replayed by
//! its command's file:
//!
//! | verb | from | arguments |
//! |---|---|---|
//! | `ADD` | DQ.ADD | DQ.ADD's, after the queue, with a generated id as `ID` |
//! | `CLAIM` | DQ.POP, DQ.MPOP | `THROTTLED` when its limits held it back, `PACKED`, the lease deadline, then the ids leased packed in one argument (`grammar::packed`; earlier releases wrote them one per argument, without `PACKED`) |
//! | `ACK`, `CANCEL` | DQ.ACK, DQ.CANCEL | the ids |
//! | `NACK` | DQ.NACK | id, `DELAY ms` or `DEAD`, optional `ERROR text` |
//! | `TOUCH` | DQ.TOUCH | id, lease deadline |
//! | `REDRIVE`, `PURGE` | DQ.REDRIVE, DQ.PURGE | theirs |
//! | `SCHEDULE`, `UNSCHEDULE` | DQ.SCHEDULE, DQ.UNSCHEDULE | theirs, after the queue |
//! | `PAUSE`, `RESUME` | DQ.PAUSE, DQ.RESUME | theirs (`FOR ms` counts from the master's `now`) |
//! | `TICK` | the timer, a master's takeover | TTLs expired, leases expired, messages promoted, the groups woken (`GROUPS n group...`, when any), then each schedule's runs (`RUNS name next skipped n at...`) |
//! | `LOAD` | AOF rewrite | the encoded value: header, then record chunks |
//!
//! Replayed, the write is propagated again as it is, so a replica's own
//! AOF and its replicas get it too.

use redis_module::{Context, ContextFlags, RedisString, RedisValue};

use crate::commands::{bytes, ALL};
use crate::core::error::{DqError, Result};
use crate::core::limits::MAX_TIME_MS;
use crate::core::queue::{codec, Queue};
use crate::grammar::args::{is_keyword, parse_in_range};
use crate::grammar::docs::{Arg, CommandDoc, KeyUse};
use crate::server::command::{replay_of, Command, Replayed};
use crate::server::key::QueueKey;
use crate::server::replication;

pub const COMMAND: Command = Command {
    doc: CommandDoc {
        name: "dq.apply",
        summary: "Replays a write on a replica or from the AOF (not for clients)",
        complexity: "That of the write it replays",
        arity: -5,
        key: Some(KeyUse::Update),
        numkeys: false,
        args: &[
            Arg::key("queue"),
            Arg::integer("now"),
            Arg::integer("max-attempts"),
            Arg::string("verb"),
            Arg::string("arg").optional().multiple(),
        ],
    },
    flags: "write",
    acl: "admin dangerous",
    handler: apply,
    grammar: |args| parse(args).map(drop),
    replay: None,
};

/// A parsed `DQ.APPLY`.
#[derive(Debug, Clone, Copy)]
pub struct Apply<'a> {
    pub verb: &'a [u8],
    pub replayed: Replayed<'a>,
}

/// Parses `queue now max-attempts VERB args...`.
pub fn parse<'a>(args: &'a [&'a [u8]]) -> Result<Apply<'a>> {
    let [name, now, max_attempts, verb, rest @ ..] = args else {
        return Err(DqError::WrongArity("dq.apply"));
    };
    let now = parse_in_range("now", "a Unix time in ms", now, 0, MAX_TIME_MS as i64)? as u64;
    let max_attempts = parse_in_range(
        "max-attempts",
        "a positive integer",
        max_attempts,
        1,
        i32::MAX.into(),
    )? as u32;
    Ok(Apply {
        verb,
        replayed: Replayed {
            now,
            max_attempts,
            name,
            args: rest,
        },
    })
}

fn apply(ctx: &Context, args: &[RedisString]) -> Result<RedisValue> {
    if !ctx
        .get_flags()
        .intersects(ContextFlags::REPLICATED | ContextFlags::LOADING)
    {
        return Err(DqError::NotForClients);
    }
    let argv = bytes(args);
    let Apply { verb, replayed } = parse(&argv[1..])?;
    let mut key = QueueKey::open(ctx, &args[1])?;
    if is_keyword(verb, "LOAD") {
        let [header, chunks @ ..] = replayed.args else {
            return Err(DqError::BadApply("LOAD needs a header".into()));
        };
        let queue = codec::load(header, chunks.iter().copied())
            .map_err(|e| DqError::BadApply(e.to_string()))?;
        key.replace(queue)?;
        key.changed();
        ctx.replicate_verbatim();
        return Ok(RedisValue::SimpleStringStatic("OK"));
    }
    let queue = key.queue_or_create()?;
    let due_before = queue.next_due();
    replay(queue, verb, &replayed)?;
    key.announce(due_before);
    ctx.replicate_verbatim();
    Ok(RedisValue::SimpleStringStatic("OK"))
}

/// Replays one verb on `queue`: a command's (`commands::ALL` says whose),
/// or the timer's `TICK`. Pure: the fuzz target runs it.
pub fn replay(queue: &mut Queue, verb: &[u8], r: &Replayed<'_>) -> Result<()> {
    if is_keyword(verb, "TICK") {
        let work = replication::parse_tick(r.args)?;
        let policy = r.policy(queue);
        queue.replay_tick(r.now, &work, &policy);
        return Ok(());
    }
    let Some(replay) = replay_of(ALL, verb) else {
        return Err(DqError::BadApply(format!(
            "unknown verb '{}'",
            crate::core::error::printable(verb)
        )));
    };
    replay(queue, r)
}
