//! DQ.CONFIG queue [SET field value [field value ...]]
//!
//! A queue's own defaults over the module settings. Fields: `LEASE` (ms),
//! `MAXATTEMPTS`, `BACKOFF` (spec); the value `DEFAULT` removes the queue's
//! own value so the module setting applies again. A message's own
//! MAXATTEMPTS / BACKOFF (DQ.ADD) still win over both. And the queue's
//! flow control: `RATE n/duration` (at most n deliveries in any window of
//! that length) and `MAXINFLIGHT n` (at most n messages in flight at once);
//! `0` or `DEFAULT` removes either. And what it keeps of finished
//! messages: `RETAIN duration` (how long a message finished by ACK or DONE
//! stays as `done`; `0` keeps none; `DEFAULT` follows `dq.retain-ms`) and
//! `RETAINMAX n` (at most n done messages, the earliest finished dropped
//! first; `0` or `DEFAULT`: no cap; lowering it drops the excess at once).
//! And its event log: `EVENTS n` (keep the last n events, DQ.EVENTS; `0`
//! or `DEFAULT`: none; lowering it drops the oldest at once). And its
//! groups: `GROUPLIMIT n` (at most n messages of each group ready or in
//! flight at once, 1 to 1000000; `DEFAULT`: 1), `GROUPRATE n/duration`
//! (each group at most n deliveries in any window of that length; `0` or
//! `DEFAULT` removes it) and `ORDER PRIORITY|FAIR` (`DEFAULT`: PRIORITY;
//! FAIR serves the groups in turn, see `core/queue/groups.rs`).
//!
//! Without SET: a record of the values in force and where each comes from:
//! `lease-ms`, `lease-ms-from`, `max-attempts`, `max-attempts-from`,
//! `backoff`, `backoff-from`, `retain-ms`, `retain-ms-from`, `retain-max`
//! (nil when none), `events` (0 when none), `group-limit`, `group-rate`
//! (`10/1s`, nil when none), `order` (`priority` or `fair`), with `-from`
//! being `queue` or `module`; then
//! `rate` (`100/1s`, nil when none), `max-inflight` (nil when none),
//! `paused` (0 or 1), `paused-until` (Unix ms; nil when not paused or
//! paused until DQ.RESUME) and `throttled` (POPs the limits held back).
//! With SET: `OK`, after checking every pair (one bad pair changes nothing).
//! It is a write command: on a replica Redis answers READONLY. It is
//! propagated with the master's clock (`CONFIG field value...`): the
//! messages a lower RETAINMAX drops are written in the event log with it.

use redis_module::{Context, RedisString, RedisValue};

use crate::commands::bytes;
use crate::core::backoff::Backoff;
use crate::core::error::{DqError, Result};
use crate::core::flow::Rate;
use crate::core::limits::{MAX_EVENTS, MAX_GROUP_LIMIT, MAX_RETAIN_MAX};
use crate::core::policy::{QueueConfig, BACKOFF_FIELD, LEASE_FIELD, MAX_ATTEMPTS_FIELD};
use crate::core::queue::Queue;
use crate::grammar::args::{
    is_keyword, parse_duration_arg, parse_in_range, parse_lease, parse_max_attempts,
    unknown_option, Seen,
};
use crate::grammar::docs::{Arg, CommandDoc, KeyUse};
use crate::server::clock::now_ms;
use crate::server::command::{Command, Replayed};
use crate::server::key::{open_read, read, QueueKey};
use crate::server::replication::Apply;
use crate::server::reply::Fields;
use crate::server::reply::{int, reply_record, word};
use crate::server::settings;

pub const COMMAND: Command = Command {
    doc: CommandDoc {
        name: "dq.config",
        summary: "Reads or sets a queue's settings: LEASE, MAXATTEMPTS, BACKOFF, RATE, MAXINFLIGHT, RETAIN, RETAINMAX, EVENTS, GROUPLIMIT, GROUPRATE, ORDER",
        complexity: "O(1)",
        arity: -2,
        key: Some(KeyUse::Settings),
        numkeys: false,
        args: &[
            Arg::key("queue"),
            Arg::block(
                "set",
                &[Arg::block(
                    "setting",
                    &[
                        Arg::one_of(
                            "field",
                            &[
                                Arg::pure_token("lease", "LEASE"),
                                Arg::pure_token("maxattempts", "MAXATTEMPTS"),
                                Arg::pure_token("backoff", "BACKOFF"),
                                Arg::pure_token("rate", "RATE"),
                                Arg::pure_token("maxinflight", "MAXINFLIGHT"),
                                Arg::pure_token("retain", "RETAIN"),
                                Arg::pure_token("retainmax", "RETAINMAX"),
                                Arg::pure_token("events", "EVENTS"),
                                Arg::pure_token("grouplimit", "GROUPLIMIT"),
                                Arg::pure_token("grouprate", "GROUPRATE"),
                                Arg::pure_token("order", "ORDER"),
                            ],
                        ),
                        Arg::string("value"),
                    ],
                )
                .multiple()],
            )
            .token("SET")
            .optional(),
        ],
    },
    flags: "write",
    acl: "",
    handler: config,
    grammar: |args| parse(args).map(drop),
    replay: Some(("CONFIG", replay)),
};

/// One `field value` pair of SET; `None` means DEFAULT.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    Lease(Option<u64>),
    MaxAttempts(Option<u32>),
    Backoff(Option<Backoff>),
    Rate(Option<Rate>),
    MaxInflight(Option<u32>),
    Retain(Option<u64>),
    RetainMax(Option<u64>),
    Events(Option<u64>),
    GroupLimit(Option<u32>),
    GroupRate(Option<Rate>),
    Fair(bool),
}

impl Change {
    pub fn apply(self, config: &mut QueueConfig) {
        match self {
            Change::Lease(v) => config.lease_ms = v,
            Change::MaxAttempts(v) => config.max_attempts = v,
            Change::Backoff(v) => config.backoff = v,
            Change::Rate(v) => config.rate = v,
            Change::MaxInflight(v) => config.max_inflight = v,
            Change::Retain(v) => config.retain_ms = v,
            Change::RetainMax(v) => config.retain_max = v,
            Change::Events(v) => config.events = v,
            Change::GroupLimit(v) => config.group_limit = v,
            Change::GroupRate(v) => config.group_rate = v,
            Change::Fair(v) => config.fair = v,
        }
    }
}

/// Parses the arguments; an empty change list means "show".
pub fn parse<'a>(args: &'a [&'a [u8]]) -> Result<(&'a [u8], Vec<Change>)> {
    let [queue, rest @ ..] = args else {
        return Err(DqError::WrongArity("dq.config"));
    };
    let pairs = match rest {
        [] => return Ok((queue, Vec::new())),
        [set, pairs @ ..] if is_keyword(set, "SET") => pairs,
        [other, ..] => return Err(unknown_option(other)),
    };
    if pairs.is_empty() || !pairs.len().is_multiple_of(2) {
        return Err(DqError::WrongArity("dq.config"));
    }
    let mut seen = Seen::default();
    let mut changes = Vec::new();
    for pair in pairs.chunks(2) {
        let (field, value) = (pair[0], pair[1]);
        let default = is_keyword(value, "DEFAULT");
        let change = if is_keyword(field, "LEASE") {
            seen.mark("LEASE")?;
            Change::Lease(if default {
                None
            } else {
                Some(parse_lease(value)?)
            })
        } else if is_keyword(field, "MAXATTEMPTS") {
            seen.mark("MAXATTEMPTS")?;
            Change::MaxAttempts(if default {
                None
            } else {
                Some(parse_max_attempts(value)?)
            })
        } else if is_keyword(field, "BACKOFF") {
            seen.mark("BACKOFF")?;
            Change::Backoff(if default {
                None
            } else {
                Some(Backoff::parse(value)?)
            })
        } else if is_keyword(field, "RATE") {
            seen.mark("RATE")?;
            Change::Rate(if default { None } else { Rate::parse(value)? })
        } else if is_keyword(field, "MAXINFLIGHT") {
            seen.mark("MAXINFLIGHT")?;
            let n = if default {
                0
            } else {
                parse_in_range(
                    "MAXINFLIGHT",
                    "an integer from 0 to 4294967295 (0 removes the limit)",
                    value,
                    0,
                    u32::MAX.into(),
                )?
            };
            Change::MaxInflight((n > 0).then_some(n as u32))
        } else if is_keyword(field, "RETAIN") {
            seen.mark("RETAIN")?;
            Change::Retain(if default {
                None
            } else {
                Some(parse_duration_arg("RETAIN", value)?)
            })
        } else if is_keyword(field, "RETAINMAX") {
            seen.mark("RETAINMAX")?;
            let n = if default {
                0
            } else {
                parse_in_range(
                    "RETAINMAX",
                    "an integer from 0 to 9007199254740991 (0 removes the cap)",
                    value,
                    0,
                    MAX_RETAIN_MAX as i64,
                )? as u64
            };
            Change::RetainMax((n > 0).then_some(n))
        } else if is_keyword(field, "EVENTS") {
            seen.mark("EVENTS")?;
            let n = if default {
                0
            } else {
                parse_in_range(
                    "EVENTS",
                    "an integer from 0 to 100000000 (0 keeps none)",
                    value,
                    0,
                    MAX_EVENTS as i64,
                )? as u64
            };
            Change::Events((n > 0).then_some(n))
        } else if is_keyword(field, "GROUPLIMIT") {
            seen.mark("GROUPLIMIT")?;
            Change::GroupLimit(if default {
                None
            } else {
                Some(parse_in_range(
                    "GROUPLIMIT",
                    "an integer from 1 to 1000000",
                    value,
                    1,
                    MAX_GROUP_LIMIT as i64,
                )? as u32)
            })
        } else if is_keyword(field, "GROUPRATE") {
            seen.mark("GROUPRATE")?;
            Change::GroupRate(if default {
                None
            } else {
                Rate::parse_for("GROUPRATE", value)?
            })
        } else if is_keyword(field, "ORDER") {
            seen.mark("ORDER")?;
            Change::Fair(if default || is_keyword(value, "PRIORITY") {
                false
            } else if is_keyword(value, "FAIR") {
                true
            } else {
                return Err(DqError::BadValue {
                    option: "ORDER",
                    expected: "PRIORITY or FAIR",
                });
            })
        } else {
            return Err(DqError::UnknownField(crate::core::error::printable(field)));
        };
        changes.push(change);
    }
    Ok((queue, changes))
}

fn config(ctx: &Context, args: &[RedisString]) -> Result<RedisValue> {
    let argv = bytes(args);
    let (_, changes) = parse(&argv[1..])?;
    if changes.is_empty() {
        let key = open_read(ctx, &args[1]);
        let queue = read(&key, &args[1])?;
        let queue_config = queue.map(|q| q.config().clone()).unwrap_or_default();
        let p = queue_config.resolve(&settings::current());
        let mut fields = vec![
            (LEASE_FIELD, int(p.lease_ms.0)),
            ("lease-ms-from", word(p.lease_ms.1.name())),
            (MAX_ATTEMPTS_FIELD, int(p.max_attempts.0.into())),
            ("max-attempts-from", word(p.max_attempts.1.name())),
            (
                BACKOFF_FIELD,
                RedisValue::BulkString(p.backoff.0.to_string()),
            ),
            ("backoff-from", word(p.backoff.1.name())),
            ("retain-ms", int(p.retain_ms.0)),
            ("retain-ms-from", word(p.retain_ms.1.name())),
            (
                "retain-max",
                queue_config.retain_max.map_or(RedisValue::Null, int),
            ),
            ("events", int(queue_config.events.unwrap_or(0))),
            ("group-limit", int(queue_config.group_limit().into())),
            (
                "group-rate",
                queue_config
                    .group_rate
                    .map_or(RedisValue::Null, |r| RedisValue::BulkString(r.to_string())),
            ),
            (
                "order",
                word(if queue_config.fair {
                    "fair"
                } else {
                    "priority"
                }),
            ),
        ];
        fields.extend(flow_fields(queue, now_ms()));
        return Ok(reply_record(ctx, fields));
    }
    let mut key = QueueKey::open(ctx, &args[1])?;
    let queue = key.queue_or_create()?;
    let now = now_ms();
    let due_before = queue.next_due();
    set(queue, now, changes);
    Apply::new(ctx, &args[1], now, settings::max_attempts(), "CONFIG")
        .args(&args[2..])
        .send();
    key.announce(due_before);
    key.changed();
    Ok(RedisValue::SimpleStringStatic("OK"))
}

fn set(queue: &mut Queue, now: u64, changes: Vec<Change>) {
    let mut config = queue.config().clone();
    for change in changes {
        change.apply(&mut config);
    }
    queue.set_config(now, config);
}

/// Replays `CONFIG SET field value...` at the master's clock.
pub fn replay(queue: &mut Queue, r: &Replayed<'_>) -> Result<()> {
    let words = r.with_name();
    let (_, changes) = parse(&words)?;
    set(queue, r.now, changes);
    Ok(())
}

/// The flow-control fields DQ.CONFIG and DQ.STATS both show: `rate`,
/// `max-inflight`, `paused`, `paused-until`, `throttled`.
pub fn flow_fields(queue: Option<&Queue>, now: u64) -> Fields {
    let config = queue.map(|q| q.config().clone()).unwrap_or_default();
    let (paused, until) = queue.map_or((false, None), |q| q.pause_state(now));
    let throttled = queue.map_or(0, |q| {
        q.counters().get(crate::core::queue::Counter::Throttled)
    });
    vec![
        (
            "rate",
            config
                .rate
                .map_or(RedisValue::Null, |r| RedisValue::BulkString(r.to_string())),
        ),
        (
            "max-inflight",
            config
                .max_inflight
                .map_or(RedisValue::Null, |n| int(n.into())),
        ),
        ("paused", int(paused.into())),
        ("paused-until", until.map_or(RedisValue::Null, int)),
        ("throttled", int(throttled)),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grammar::args::leak_args;

    #[test]
    fn grammar() {
        assert_eq!(parse(leak_args(&["q"])).unwrap().1, vec![]);
        let (_, changes) = parse(leak_args(&[
            "q",
            "set",
            "lease",
            "5000",
            "MAXATTEMPTS",
            "default",
            "BACKOFF",
            "fixed:1s",
        ]))
        .unwrap();
        assert_eq!(
            changes,
            vec![
                Change::Lease(Some(5000)),
                Change::MaxAttempts(None),
                Change::Backoff(Some(Backoff::Fixed(1000)))
            ]
        );
        let err = |a: &[&str]| parse(leak_args(a)).unwrap_err().to_string();
        assert_eq!(
            err(&[]),
            "ERR wrong number of arguments for 'dq.config' command"
        );
        assert_eq!(
            err(&["q", "SET"]),
            "ERR wrong number of arguments for 'dq.config' command"
        );
        assert_eq!(
            err(&["q", "SET", "LEASE"]),
            "ERR wrong number of arguments for 'dq.config' command"
        );
        assert_eq!(err(&["q", "GET"]), "ERR unknown option 'GET'");
        assert_eq!(
            err(&["q", "SET", "COLOR", "red"]),
            "ERR unknown field 'COLOR': use LEASE, MAXATTEMPTS, BACKOFF, RATE, MAXINFLIGHT, RETAIN, RETAINMAX, EVENTS, GROUPLIMIT, GROUPRATE or ORDER"
        );
        assert_eq!(
            err(&["q", "SET", "LEASE", "0"]),
            "ERR LEASE must be a positive duration: whole milliseconds such as 1500, or a whole number with a unit ms, s, m, h or d such as 30s, 5m or 7d"
        );
        assert_eq!(
            err(&["q", "SET", "LEASE", "1", "lease", "2"]),
            "ERR LEASE is given more than once"
        );
        assert!(err(&["q", "SET", "BACKOFF", "never"]).starts_with("ERR BACKOFF must be"));
        assert_eq!(
            err(&["q", "SET", "MAXATTEMPTS", "-1"]),
            "ERR MAXATTEMPTS must be an integer from 1 to 2147483647"
        );
    }
}
