//! DQ.PAUSE queue [FOR ms]
//!
//! POP delivers nothing from the queue until DQ.RESUME, or until FOR ms
//! have passed: blocked POPs stay blocked, and are served the moment the
//! pause ends. ADD, the timer, leases and schedules go on. A queue that
//! does not exist is made (empty), so a pause can come before the
//! messages. Pausing again replaces the pause's end. Replies OK.

use redis_module::{Context, RedisString, RedisValue};

use crate::commands::bytes;
use crate::core::error::{DqError, Result};
use crate::core::queue::{Queue, FOREVER};
use crate::grammar::args::{add_ms, is_keyword, parse_positive_duration, unknown_option};
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
        ],
    },
    flags: "write fast",
    acl: "",
    handler: pause,
    grammar: |args| parse(args).map(drop),
    replay: Some(("PAUSE", replay)),
};

/// `queue [FOR ms]`: the pause's length, `None` for until DQ.RESUME.
pub fn parse<'a>(args: &'a [&'a [u8]]) -> Result<(&'a [u8], Option<u64>)> {
    match args {
        [queue] => Ok((queue, None)),
        [queue, keyword, length] if is_keyword(keyword, "FOR") => {
            Ok((queue, Some(parse_positive_duration("FOR", length)?)))
        }
        [_, keyword] if is_keyword(keyword, "FOR") => Err(DqError::MissingValue("FOR")),
        [_, other, ..] if !is_keyword(other, "FOR") => Err(unknown_option(other)),
        _ => Err(DqError::WrongArity("dq.pause")),
    }
}

/// When a pause of `length` from `now` ends.
fn until(now: u64, length: Option<u64>) -> Result<u64> {
    length.map_or(Ok(FOREVER), |ms| add_ms("FOR", now, ms))
}

fn pause(ctx: &Context, args: &[RedisString]) -> Result<RedisValue> {
    let argv = bytes(args);
    let (_, length) = parse(&argv[1..])?;
    let now = now_ms();
    let until = until(now, length)?;
    let mut key = QueueKey::open(ctx, &args[1])?;
    let queue = key.queue_or_create()?;
    let due_before = queue.next_due();
    queue.pause(now, until);
    // Replayed at the master's `now`, so FOR ends at the same time there.
    Apply::new(ctx, &args[1], now, settings::max_attempts(), "PAUSE")
        .args(&args[2..])
        .send();
    key.announce(due_before);
    Ok(RedisValue::SimpleStringStatic("OK"))
}

/// Replays `PAUSE [FOR ms]`.
pub fn replay(queue: &mut Queue, r: &Replayed<'_>) -> Result<()> {
    let words = r.with_name();
    let (now, args) = (r.now, &words[..]);
    let (_, length) = parse(args)?;
    queue.pause(now, until(now, length)?);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grammar::args::leak_args;

    #[test]
    fn grammar() {
        assert_eq!(parse(leak_args(&["q"])).unwrap().1, None);
        assert_eq!(
            parse(leak_args(&["q", "for", "5000"])).unwrap().1,
            Some(5000)
        );
        let err = |a: &[&str]| parse(leak_args(a)).unwrap_err().to_string();
        assert_eq!(
            err(&["q", "FOR", "-5"]),
            "ERR FOR must be a positive duration: whole milliseconds such as 1500, or a whole number with a unit ms, s, m, h or d such as 30s, 5m or 7d"
        );
        assert!(err(&["q", "FOR", "0"]).starts_with("ERR FOR must be"));
        assert_eq!(err(&["q", "FOR"]), "ERR FOR needs a value");
        assert_eq!(err(&["q", "UNTIL", "5"]), "ERR unknown option 'UNTIL'");
        assert!(err(&["q", "FOR", "5", "FOR", "6"]).contains("wrong number of arguments"));
    }
}
