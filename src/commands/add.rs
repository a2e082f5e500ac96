//! DQ.ADD queue payload [DELAY ms | AT unix-ms] [ID id] [NX | XX] [PRIORITY p]
//!        [MAXATTEMPTS n] [BACKOFF spec] [GROUP g] [TTL ms]
//!
//! Schedules a message and replies its id (bulk string). Without ID the
//! server makes one (`<unix-ms>-<seq>`). An existing id is replaced: payload,
//! due time and priority, as a new message (attempts start again). NX leaves
//! an existing message untouched and XX touches only an existing one; both
//! reply nil when they did nothing. A message due now or in the past is
//! ready before the reply is sent. MAXATTEMPTS and BACKOFF set this
//! message's retry policy over the queue's and the module's. TTL: a message
//! not acknowledged within TTL ms of this ADD becomes dead with reason
//! `expired`, whatever its state. GROUP: at most one message of group `g`
//! is ready or in flight at a time, in due order (see `queue/mod.rs`).

use redis_module::{Context, RedisString, RedisValue};

use crate::commands::bytes;
use crate::core::error::{DqError, Result};
use crate::core::queue::{AddMode, AddRequest, Queue};
use crate::grammar::args::{
    add_ms, check_id, parse_duration_arg, parse_ms, MessageOptions, Options,
};
use crate::grammar::docs::{Arg, CommandDoc, KeyUse};
use crate::server::clock::now_ms;
use crate::server::command::{Command, Replayed};
use crate::server::key::QueueKey;
use crate::server::replication::Apply;
use crate::server::settings;

pub const COMMAND: Command = Command {
    doc: CommandDoc {
        name: "dq.add",
        summary: "Schedules a message, or replaces the message with the same id",
        complexity: "O(log N) where N is the number of messages in the queue",
        arity: -3,
        key: Some(KeyUse::Insert),
        numkeys: false,
        args: &[
            Arg::key("queue"),
            Arg::string("payload"),
            Arg::one_of(
                "when",
                &[
                    Arg::duration("delay").token("DELAY"),
                    Arg::unix_time("at").token("AT"),
                ],
            )
            .optional(),
            Arg::string("id").token("ID").optional(),
            Arg::one_of(
                "condition",
                &[Arg::pure_token("nx", "NX"), Arg::pure_token("xx", "XX")],
            )
            .optional(),
            Arg::integer("priority").token("PRIORITY").optional(),
            Arg::integer("maxattempts").token("MAXATTEMPTS").optional(),
            Arg::string("backoff").token("BACKOFF").optional(),
            Arg::string("group").token("GROUP").optional(),
            Arg::duration("ttl").token("TTL").optional(),
            Arg::duration("retain").token("RETAIN").optional(),
        ],
    },
    flags: "write deny-oom fast",
    acl: "",
    handler: add,
    grammar: |args| parse(args).map(drop),
    replay: Some(("ADD", replay)),
};

const NAME: &str = "dq.add";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum When {
    Now,
    Delay(u64),
    At(u64),
}

impl When {
    pub fn due_at(self, now: u64) -> Result<u64> {
        match self {
            When::Now => Ok(now),
            When::Delay(ms) => add_ms("DELAY", now, ms),
            When::At(at) => Ok(at),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AddArgs<'a> {
    pub queue: &'a [u8],
    pub payload: &'a [u8],
    pub when: When,
    pub id: Option<&'a [u8]>,
    pub mode: AddMode,
    pub options: MessageOptions<'a>,
    /// RETAIN: how long it is kept once done (ADD only, not schedules).
    pub retain_ms: Option<u64>,
}

/// DELAY's or AT's value: they exclude each other.
fn when_value<'a>(o: &mut Options<'a>, when: When, keyword: &'static str) -> Result<&'a [u8]> {
    if when != When::Now {
        return Err(DqError::ConflictingOptions("DELAY", "AT"));
    }
    o.value_after(keyword)
}

/// NX or XX: they exclude each other.
fn mode_of(mode: AddMode, given: AddMode) -> Result<AddMode> {
    if mode != AddMode::Upsert {
        return Err(DqError::ConflictingOptions("NX", "XX"));
    }
    Ok(given)
}

/// Parses the arguments after the command name.
pub fn parse<'a>(args: &'a [&'a [u8]]) -> Result<AddArgs<'a>> {
    let [queue, payload, options @ ..] = args else {
        return Err(DqError::WrongArity(NAME));
    };
    let mut parsed = AddArgs {
        queue,
        payload,
        when: When::Now,
        id: None,
        mode: AddMode::Upsert,
        options: MessageOptions::default(),
        retain_ms: None,
    };
    let mut o = Options::new(options);
    while o.advance() {
        if o.flag("DELAY")? {
            let value = when_value(&mut o, parsed.when, "DELAY")?;
            parsed.when = When::Delay(parse_duration_arg("DELAY", value)?);
        } else if o.flag("AT")? {
            let value = when_value(&mut o, parsed.when, "AT")?;
            parsed.when = When::At(parse_ms("AT", UNIX_MS, value)?);
        } else if o.flag("NX")? {
            parsed.mode = mode_of(parsed.mode, AddMode::OnlyNew)?;
        } else if o.flag("XX")? {
            parsed.mode = mode_of(parsed.mode, AddMode::OnlyExisting)?;
        } else if let Some(id) = o.value("ID")? {
            parsed.id = Some(check_id(id)?);
        } else if let Some(retain) = o.value("RETAIN")? {
            parsed.retain_ms = Some(parse_duration_arg("RETAIN", retain)?);
        } else if !parsed.options.read(&mut o)? {
            return Err(o.unknown());
        }
    }
    if parsed.mode == AddMode::OnlyExisting && parsed.id.is_none() {
        return Err(DqError::Requires("XX", "ID"));
    }
    Ok(parsed)
}

const UNIX_MS: &str = "a non-negative integer Unix time in milliseconds";

impl AddArgs<'_> {
    fn request(&self, now: u64) -> Result<AddRequest<'_>> {
        Ok(AddRequest {
            id: self.id,
            payload: self.payload,
            due_at: self.when.due_at(now)?,
            priority: self.options.priority,
            mode: self.mode,
            max_attempts: self.options.max_attempts,
            backoff: self.options.backoff.clone(),
            expire_at: self
                .options
                .ttl_ms
                .map(|ttl| add_ms("TTL", now, ttl))
                .transpose()?,
            group: self.options.group,
            retain_ms: self.retain_ms,
        })
    }
}

fn add(ctx: &Context, args: &[RedisString]) -> Result<RedisValue> {
    let argv = bytes(args);
    let parsed = parse(&argv[1..])?;
    crate::server::eviction::check(ctx)?;
    let now = now_ms();
    let request = parsed.request(now)?;
    let mut key = QueueKey::open(ctx, &args[1])?;
    if parsed.mode == AddMode::OnlyExisting && key.queue().is_none() {
        // Nothing to replace: no queue is created either.
        return Ok(RedisValue::Null);
    }
    let queue = key.queue_or_create()?;
    let due_before = queue.next_due();
    let Some(id) = queue.add(now, &request) else {
        return Ok(RedisValue::Null);
    };
    // Replayed with the master's clock; a generated id travels as ID.
    let mut apply = Apply::new(ctx, &args[1], now, settings::max_attempts(), "ADD");
    apply.args(&args[2..]);
    if parsed.id.is_none() {
        apply.bytes(b"ID").bytes(&id);
    }
    apply.send();
    key.announce(due_before);
    Ok(RedisValue::StringBuffer(id))
}

/// Replays `DQ.APPLY queue now max-attempts ADD payload [options]`.
pub fn replay(queue: &mut Queue, r: &Replayed<'_>) -> Result<()> {
    let words = r.with_name();
    let (now, args) = (r.now, &words[..]);
    let parsed = parse(args)?;
    queue.add(now, &parsed.request(now)?);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(args: &[&str]) -> Result<AddArgs<'static>> {
        parse(crate::grammar::args::leak_args(args))
    }

    #[test]
    fn minimal_and_full() {
        let a = p(&["q", "body"]).unwrap();
        assert_eq!(
            (a.queue, a.payload, a.when),
            (&b"q"[..], &b"body"[..], When::Now)
        );
        assert_eq!(
            (a.id, a.mode, a.options.priority),
            (None, AddMode::Upsert, 0)
        );
        let a = p(&[
            "q", "b", "delay", "1500", "ID", "o-42", "nx", "PRIORITY", "-3",
        ])
        .unwrap();
        assert_eq!(a.when, When::Delay(1500));
        assert_eq!(a.id, Some(&b"o-42"[..]));
        assert_eq!((a.mode, a.options.priority), (AddMode::OnlyNew, -3));
        assert_eq!(p(&["q", "b", "AT", "17"]).unwrap().when, When::At(17));
        assert_eq!(
            p(&["q", "b", "XX", "ID", "x"]).unwrap().mode,
            AddMode::OnlyExisting
        );
        let a = p(&[
            "q",
            "b",
            "MAXATTEMPTS",
            "3",
            "backoff",
            "15s,3m",
            "ttl",
            "60000",
            "GROUP",
            "customer-7",
        ])
        .unwrap();
        assert_eq!(
            (a.options.max_attempts, a.options.ttl_ms),
            (Some(3), Some(60_000))
        );
        assert_eq!(a.options.group, Some(&b"customer-7"[..]));
        assert_eq!(a.options.backoff.unwrap().to_string(), "15s,3m");
    }

    #[test]
    fn bad_input_names_the_problem() {
        let err = |args: &[&str]| p(args).unwrap_err().to_string();
        assert_eq!(
            err(&["q"]),
            "ERR wrong number of arguments for 'dq.add' command"
        );
        assert_eq!(
            err(&["q", "b", "DELAY", "-1"]),
            "ERR DELAY must be a duration: whole milliseconds such as 1500, or a whole number with a unit ms, s, m, h or d such as 30s, 5m or 7d"
        );
        assert_eq!(err(&["q", "b", "DELAY"]), "ERR DELAY needs a value");
        assert_eq!(
            err(&["q", "b", "DELAY", "1", "AT", "2"]),
            "ERR DELAY and AT cannot be used together"
        );
        assert_eq!(
            err(&["q", "b", "AT", "1", "DELAY", "2"]),
            "ERR DELAY and AT cannot be used together"
        );
        assert_eq!(
            err(&["q", "b", "NX", "XX"]),
            "ERR NX and XX cannot be used together"
        );
        assert_eq!(
            err(&["q", "b", "NX", "nx"]),
            "ERR NX is given more than once"
        );
        assert_eq!(err(&["q", "b", "ID", ""]), "ERR id must not be empty");
        assert_eq!(err(&["q", "b", "BOGUS"]), "ERR unknown option 'BOGUS'");
        assert_eq!(
            err(&["q", "b", "PRIORITY", "2147483648"]),
            "ERR PRIORITY must be an integer from -2147483648 to 2147483647"
        );
        assert_eq!(err(&["q", "b", "XX"]), "ERR XX needs ID");
        assert_eq!(
            err(&["q", "b", "MAXATTEMPTS", "0"]),
            "ERR MAXATTEMPTS must be an integer from 1 to 2147483647"
        );
        assert!(err(&["q", "b", "BACKOFF", "exp:0:1s"]).starts_with("ERR BACKOFF must be"));
        assert_eq!(
            err(&["q", "b", "TTL", "0"]),
            "ERR TTL must be a positive duration: whole milliseconds such as 1500, or a whole number with a unit ms, s, m, h or d such as 30s, 5m or 7d"
        );
        assert_eq!(
            err(&["q", "b", "TTL", "5", "TTL", "6"]),
            "ERR TTL is given more than once"
        );
        assert_eq!(err(&["q", "b", "GROUP", ""]), "ERR GROUP must not be empty");
        assert_eq!(err(&["q", "b", "GROUP"]), "ERR GROUP needs a value");
        assert_eq!(
            err(&["q", "b", "GROUP", &"g".repeat(1025)]),
            "ERR GROUP is longer than 1024 bytes"
        );
    }

    #[test]
    fn due_time_is_checked_for_overflow() {
        assert_eq!(When::Delay(5).due_at(10), Ok(15));
        assert_eq!(When::At(3).due_at(10), Ok(3));
        assert!(When::Delay(crate::core::limits::MAX_TIME_MS)
            .due_at(10)
            .is_err());
    }
}
