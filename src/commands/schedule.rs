//! DQ.SCHEDULE queue name payload (EVERY duration | CRON expr) [TZ zone]
//!             [START unix-ms] [END unix-ms] [LIMIT n] [MISSED SKIP|ONE|ALL]
//!             [OVERLAP ALLOW|SKIP] [NX] [PRIORITY p] [MAXATTEMPTS n]
//!             [BACKOFF spec] [GROUP g] [TTL ms]
//!
//! Creates or replaces the queue's schedule `name`; replies its next run
//! time (Unix ms), or nil when it has none left (END passed, LIMIT
//! reached) or when NX left an existing schedule untouched. A run at time
//! T adds the message `name@T`, due at T, with the payload and the message
//! options (see `core/queue/schedules.rs`). EVERY runs at START + k ×
//! EVERY, START defaulting to now; CRON at the local times its five fields
//! match in TZ (UTC by default; see `core/schedule.rs` for daylight saving).
//! A replaced schedule keeps its run counts and last run.

use redis_module::{Context, RedisString, RedisValue};

use crate::commands::bytes;
use crate::core::error::{DqError, Result};
use crate::core::limits::{MAX_SCHEDULE_NAME_LEN, MAX_TIME_MS};
use crate::core::queue::Queue;
use crate::core::schedule::{Missed, Overlap, Schedule, Spec, Template};
use crate::grammar::args::{
    check_length, is_keyword, parse_in_range, parse_ms, MessageOptions, Options,
};
use crate::grammar::docs::{Arg, CommandDoc, KeyUse};
use crate::server::clock::now_ms;
use crate::server::command::{Command, Replayed};
use crate::server::key::QueueKey;
use crate::server::replication::Apply;
use crate::server::reply::int;
use crate::server::settings;

pub const COMMAND: Command = Command {
    doc: CommandDoc {
        name: "dq.schedule",
        summary: "Creates or replaces a recurring schedule whose runs add messages",
        complexity: "O(log S + log N) for S schedules and N messages in the queue",
        arity: -6,
        key: Some(KeyUse::Insert),
        numkeys: false,
        args: &[
            Arg::key("queue"),
            Arg::string("name"),
            Arg::string("payload"),
            Arg::one_of(
                "spec",
                &[
                    Arg::string("every").token("EVERY"),
                    Arg::string("cron").token("CRON"),
                ],
            ),
            Arg::string("tz").token("TZ").optional(),
            Arg::unix_time("start").token("START").optional(),
            Arg::unix_time("end").token("END").optional(),
            Arg::integer("limit").token("LIMIT").optional(),
            Arg::one_of(
                "missed",
                &[
                    Arg::pure_token("skip", "SKIP"),
                    Arg::pure_token("one", "ONE"),
                    Arg::pure_token("all", "ALL"),
                ],
            )
            .token("MISSED")
            .optional(),
            Arg::one_of(
                "overlap",
                &[
                    Arg::pure_token("allow", "ALLOW"),
                    Arg::pure_token("skip", "SKIP"),
                ],
            )
            .token("OVERLAP")
            .optional(),
            Arg::pure_token("nx", "NX").optional(),
            Arg::integer("priority").token("PRIORITY").optional(),
            Arg::integer("maxattempts").token("MAXATTEMPTS").optional(),
            Arg::string("backoff").token("BACKOFF").optional(),
            Arg::string("group").token("GROUP").optional(),
            Arg::duration("ttl").token("TTL").optional(),
        ],
    },
    flags: "write deny-oom",
    acl: "",
    handler: schedule,
    grammar: |args| parse(args).map(drop),
    replay: Some(("SCHEDULE", replay)),
};

const NAME: &str = "dq.schedule";
const UNIX_MS: &str = "a non-negative integer Unix time in milliseconds";

/// What DQ.SCHEDULE asks, as parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScheduleArgs<'a> {
    pub queue: &'a [u8],
    pub name: &'a [u8],
    pub payload: &'a [u8],
    pub spec: Spec,
    pub start: Option<u64>,
    pub end: Option<u64>,
    pub limit: Option<u64>,
    pub missed: Missed,
    pub overlap: Overlap,
    pub only_new: bool,
    pub options: MessageOptions<'a>,
}

/// A schedule name: a message id's rules, short enough for `name@T`.
pub fn check_schedule_name(name: &[u8]) -> Result<&[u8]> {
    // One bound: a 5000-byte name was told "longer than 1024 bytes" when
    // the limit is 1007.
    check_length("name", name, MAX_SCHEDULE_NAME_LEN)
}

pub fn parse<'a>(args: &'a [&'a [u8]]) -> Result<ScheduleArgs<'a>> {
    let [queue, name, payload, options @ ..] = args else {
        return Err(DqError::WrongArity(NAME));
    };
    let name = check_schedule_name(name)?;
    let mut every = None;
    let mut cron = None;
    let mut tz = None;
    let mut parsed = ScheduleArgs {
        queue,
        name,
        payload,
        spec: Spec::Every(1000),
        start: None,
        end: None,
        limit: None,
        missed: Missed::One,
        overlap: Overlap::Allow,
        only_new: false,
        options: MessageOptions::default(),
    };
    let mut o = Options::new(options);
    while o.advance() {
        if let Some(value) = o.value("EVERY")? {
            every = Some(value);
        } else if let Some(value) = o.value("CRON")? {
            cron = Some(value);
        } else if let Some(value) = o.value("TZ")? {
            tz = Some(value);
        } else if let Some(value) = o.value("START")? {
            parsed.start = Some(parse_ms("START", UNIX_MS, value)?);
        } else if let Some(value) = o.value("END")? {
            parsed.end = Some(parse_ms("END", UNIX_MS, value)?);
        } else if let Some(value) = o.value("LIMIT")? {
            let n = parse_in_range("LIMIT", "a positive integer", value, 1, MAX_TIME_MS as i64)?;
            parsed.limit = Some(n as u64);
        } else if let Some(value) = o.value("MISSED")? {
            parsed.missed = Missed::ALL
                .into_iter()
                .find(|m| is_keyword(value, m.name()))
                .ok_or(DqError::BadValue {
                    option: "MISSED",
                    expected: "SKIP, ONE or ALL",
                })?;
        } else if let Some(value) = o.value("OVERLAP")? {
            parsed.overlap = Overlap::ALL
                .into_iter()
                .find(|v| is_keyword(value, v.name()))
                .ok_or(DqError::BadValue {
                    option: "OVERLAP",
                    expected: "ALLOW or SKIP",
                })?;
        } else if o.flag("NX")? {
            parsed.only_new = true;
        } else if !parsed.options.read(&mut o)? {
            return Err(o.unknown());
        }
    }
    parsed.spec = match (every, cron) {
        (Some(_), Some(_)) => return Err(DqError::ConflictingOptions("EVERY", "CRON")),
        (None, None) => return Err(DqError::Requires(NAME, "EVERY or CRON")),
        (Some(_), None) if tz.is_some() => return Err(DqError::Requires("TZ", "CRON")),
        (Some(every), None) => Spec::every(every)?,
        (None, Some(cron)) => Spec::cron(cron, tz)?,
    };
    if let (Some(start), Some(end)) = (parsed.start, parsed.end) {
        if start > end {
            return Err(DqError::OutOfOrder {
                earlier: "START",
                later: "END",
            });
        }
    }
    Ok(parsed)
}

impl ScheduleArgs<'_> {
    /// The schedule, made at `now` (START's default).
    pub fn schedule(&self, now: u64) -> Schedule {
        let o = &self.options;
        Schedule {
            spec: self.spec.clone(),
            start: self.start.unwrap_or(now),
            end: self.end,
            limit: self.limit,
            missed: self.missed,
            overlap: self.overlap,
            template: Template {
                payload: self.payload.into(),
                priority: o.priority,
                max_attempts: o.max_attempts,
                backoff: o.backoff.clone(),
                group: o.group.map(Into::into),
                ttl_ms: o.ttl_ms,
            },
            next_run: None,
            last_run: None,
            runs: 0,
            skipped: 0,
        }
    }
}

fn schedule(ctx: &Context, args: &[RedisString]) -> Result<RedisValue> {
    let argv = bytes(args);
    let parsed = parse(&argv[1..])?;
    crate::server::eviction::check(ctx)?;
    let now = now_ms();
    let mut key = QueueKey::open(ctx, &args[1])?;
    let queue = key.queue_or_create()?;
    let due_before = queue.next_due();
    let Some(next) = queue.put_schedule(now, parsed.name, parsed.schedule(now), parsed.only_new)
    else {
        return Ok(RedisValue::Null);
    };
    // Replayed at the master's `now`, which is START's default there too.
    Apply::new(ctx, &args[1], now, settings::max_attempts(), "SCHEDULE")
        .args(&args[2..])
        .send();
    key.announce(due_before);
    Ok(next.map_or(RedisValue::Null, int))
}

/// Replays `SCHEDULE name payload options...`.
pub fn replay(queue: &mut Queue, r: &Replayed<'_>) -> Result<()> {
    let words = r.with_name();
    let (now, args) = (r.now, &words[..]);
    let parsed = parse(args)?;
    queue.put_schedule(now, parsed.name, parsed.schedule(now), parsed.only_new);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(args: &[&str]) -> Result<ScheduleArgs<'static>> {
        parse(crate::grammar::args::leak_args(args))
    }

    fn err(args: &[&str]) -> String {
        p(args).unwrap_err().to_string()
    }

    #[test]
    fn grammar() {
        let a = p(&[
            "q",
            "digest",
            "{}",
            "CRON",
            "0 8 * * *",
            "TZ",
            "Europe/Berlin",
        ])
        .unwrap();
        assert_eq!(a.spec.describe(), "cron 0 8 * * *");
        assert_eq!(a.spec.tz_name(), "Europe/Berlin");
        assert_eq!(
            (a.missed, a.overlap, a.only_new),
            (Missed::One, Overlap::Allow, false)
        );
        let a = p(&[
            "q",
            "poll",
            "x",
            "every",
            "5m",
            "START",
            "1000",
            "END",
            "9000",
            "LIMIT",
            "3",
            "MISSED",
            "all",
            "OVERLAP",
            "skip",
            "NX",
            "PRIORITY",
            "-2",
            "MAXATTEMPTS",
            "4",
            "BACKOFF",
            "fixed:1s",
            "GROUP",
            "g",
            "TTL",
            "60000",
        ])
        .unwrap();
        assert_eq!(a.spec, Spec::Every(300_000));
        assert_eq!((a.start, a.end, a.limit), (Some(1000), Some(9000), Some(3)));
        assert_eq!(
            (a.missed, a.overlap, a.only_new),
            (Missed::All, Overlap::Skip, true)
        );
        let s = a.schedule(5);
        assert_eq!(s.template.priority, -2);
        assert_eq!(s.template.ttl_ms, Some(60_000));
        assert_eq!(
            p(&["q", "n", "x", "EVERY", "1s"])
                .unwrap()
                .schedule(77)
                .start,
            77
        );
    }

    #[test]
    fn bad_input_names_the_argument() {
        let every_cron = err(&["q", "n", "x", "EVERY", "1m", "CRON", "* * * * *"]);
        assert_eq!(every_cron, "ERR EVERY and CRON cannot be used together");
        assert_eq!(err(&["q", "n", "x"]), "ERR dq.schedule needs EVERY or CRON");
        assert_eq!(
            err(&["q", "n", "x", "EVERY", "1m", "TZ", "UTC"]),
            "ERR TZ needs CRON"
        );
        assert!(err(&["q", "n", "x", "EVERY", "500ms"]).starts_with("ERR EVERY must be"));
        assert!(err(&["q", "n", "x", "CRON", "* * * *"]).starts_with("ERR CRON must be"));
        assert!(err(&["q", "n", "x", "CRON", "61 * * * *"]).starts_with("ERR CRON must be"));
        assert!(
            err(&["q", "n", "x", "CRON", "* * * * *", "TZ", "Nowhere/Land"])
                .starts_with("ERR TZ must be")
        );
        assert!(err(&["q", "n", "x", "EVERY", "1m", "LIMIT", "0"]).starts_with("ERR LIMIT must be"));
        assert!(
            err(&["q", "n", "x", "EVERY", "1m", "LIMIT", "-1"]).starts_with("ERR LIMIT must be")
        );
        assert_eq!(
            err(&["q", "n", "x", "EVERY", "1m", "START", "10", "END", "9"]),
            "ERR START must not be after END"
        );
        assert!(err(&["q", "n", "x", "EVERY", "1m", "MISSED", "SOME"])
            .starts_with("ERR MISSED must be"));
        assert!(err(&["q", "n", "x", "EVERY", "1m", "OVERLAP", "NO"])
            .starts_with("ERR OVERLAP must be"));
        assert_eq!(
            err(&["q", "n", "x", "EVERY", "1m", "EVERY", "2m"]),
            "ERR EVERY is given more than once"
        );
        assert_eq!(
            err(&["q", "n", "x", "EVERY", "1m", "BOGUS"]),
            "ERR unknown option 'BOGUS'"
        );
        assert_eq!(
            err(&["q", "", "x", "EVERY", "1m"]),
            "ERR name must not be empty"
        );
        let long = "n".repeat(MAX_SCHEDULE_NAME_LEN + 1);
        assert!(err(&["q", &long, "x", "EVERY", "1m"]).starts_with("ERR name is longer"));
        assert_eq!(
            err(&["q", "n"]),
            "ERR wrong number of arguments for 'dq.schedule' command"
        );
    }
}
