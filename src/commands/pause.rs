//! DQ.PAUSE queue [FOR ms] [GROUP g]
//!
//! POP delivers nothing from the queue until DQ.RESUME, or until FOR ms
//! have passed: blocked POPs stay blocked, and are served the moment the
//! pause ends. ADD, the timer, leases and schedules go on. A queue that
//! does not exist is made (empty), so a pause can come before the
//! messages. Pausing again replaces the pause's end. Replies OK.
//!
//! With GROUP: only that group's messages are held back (its ready ones
//! go back to waiting, keeping their places; those in flight finish as
//! usual); the rest of the queue goes on. The group is kept while paused,
//! even with no message.

use redis_module::{Context, RedisString, RedisValue};

use crate::commands::bytes;
use crate::core::error::{DqError, Result};
use crate::core::queue::{Queue, FOREVER};
use crate::grammar::args::{add_ms, check_name, parse_positive_duration, Options};
use crate::grammar::docs::{Arg, CommandDoc, KeyUse};
use crate::server::clock::now_ms;
use crate::server::command::{Command, Replayed};
use crate::server::key::QueueKey;
use crate::server::replication::Apply;
use crate::server::settings;

pub const COMMAND: Command = Command {
    doc: CommandDoc {
        name: "dq.pause",
        summary: "Stops POP delivering from a queue, until DQ.RESUME or for a time",
        complexity: "O(1)",
        arity: -2,
        key: Some(KeyUse::Settings),
        numkeys: false,
        args: &[
            Arg::key("queue"),
            Arg::duration("duration").token("FOR").optional(),
            Arg::string("group").token("GROUP").optional(),
        ],
    },
    flags: "write fast",
    acl: "",
    handler: pause,
    grammar: |args| parse(args).map(drop),
    replay: Some(("PAUSE", replay)),
};

/// What DQ.PAUSE asks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pause<'a> {
    /// The pause's length, `None` for until DQ.RESUME.
    pub length: Option<u64>,
    /// Only this group.
    pub group: Option<&'a [u8]>,
}

/// `queue [FOR ms] [GROUP g]`.
pub fn parse<'a>(args: &'a [&'a [u8]]) -> Result<(&'a [u8], Pause<'a>)> {
    let [queue, rest @ ..] = args else {
        return Err(DqError::WrongArity("dq.pause"));
    };
    let mut pause = Pause {
        length: None,
        group: None,
    };
    let mut o = Options::new(rest);
    while o.advance() {
        if let Some(v) = o.value("FOR")? {
            pause.length = Some(parse_positive_duration("FOR", v)?);
        } else if let Some(v) = o.value("GROUP")? {
            pause.group = Some(check_name("GROUP", v)?);
        } else {
            return Err(o.unknown());
        }
    }
    Ok((queue, pause))
}

/// When a pause of `length` from `now` ends.
fn until(now: u64, length: Option<u64>) -> Result<u64> {
    length.map_or(Ok(FOREVER), |ms| add_ms("FOR", now, ms))
}

fn pause(ctx: &Context, args: &[RedisString]) -> Result<RedisValue> {
    let argv = bytes(args);
    let (_, pause) = parse(&argv[1..])?;
    let now = now_ms();
    let until = until(now, pause.length)?;
    let mut key = QueueKey::open(ctx, &args[1])?;
    let queue = key.queue_or_create()?;
    let due_before = queue.next_due();
    match pause.group {
        Some(group) => queue.pause_group(now, group, until),
        None => queue.pause(now, until),
    }
    // Replayed at the master's `now`, so FOR ends at the same time there.
    Apply::new(ctx, &args[1], now, settings::max_attempts(), "PAUSE")
        .args(&args[2..])
        .send();
    key.announce(due_before);
    Ok(RedisValue::SimpleStringStatic("OK"))
}

/// Replays `PAUSE [FOR ms] [GROUP g]`.
pub fn replay(queue: &mut Queue, r: &Replayed<'_>) -> Result<()> {
    let words = r.with_name();
    let (now, args) = (r.now, &words[..]);
    let (_, pause) = parse(args)?;
    let until = until(now, pause.length)?;
    match pause.group {
        Some(group) => queue.pause_group(now, group, until),
        None => queue.pause(now, until),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grammar::args::leak_args;

    #[test]
    fn grammar() {
        assert_eq!(parse(leak_args(&["q"])).unwrap().1.length, None);
        assert_eq!(
            parse(leak_args(&["q", "for", "5000"])).unwrap().1.length,
            Some(5000)
        );
        assert_eq!(
            parse(leak_args(&["q", "GROUP", "t-1", "FOR", "5s"]))
                .unwrap()
                .1,
            Pause {
                length: Some(5000),
                group: Some(&b"t-1"[..])
            }
        );
        let err = |a: &[&str]| parse(leak_args(a)).unwrap_err().to_string();
        assert_eq!(err(&["q", "GROUP"]), "ERR GROUP needs a value");
        assert_eq!(err(&["q", "GROUP", ""]), "ERR GROUP must not be empty");
        assert_eq!(
            err(&["q", "FOR", "-5"]),
            "ERR FOR must be a positive duration: whole milliseconds such as 1500, or a whole number with a unit ms, s, m, h or d such as 30s, 5m or 7d"
        );
        assert!(err(&["q", "FOR", "0"]).starts_with("ERR FOR must be"));
        assert_eq!(err(&["q", "FOR"]), "ERR FOR needs a value");
        assert_eq!(err(&["q", "UNTIL", "5"]), "ERR unknown option 'UNTIL'");
        assert_eq!(
            err(&["q", "FOR", "5", "FOR", "6"]),
            "ERR FOR is given more than once"
        );
    }
}
