//! DQ.WAIT queue id [BLOCK ms]
//!
//! The message's outcome: `[state, value]` — `done` with its result (nil
//! after a plain ACK), `dead` with its last error (nil when none), or
//! `gone` with nil when the queue does not hold the id (never added,
//! cancelled, purged, or done and past its retention). While it has none
//! yet: nil at once, or with BLOCK wait up to ms (0 = forever), like BLPOP.
//! A waiter is answered the moment the outcome exists (DONE, ACK, a death
//! by NACK, lease expiry or TTL), with `gone` when the message or the
//! queue goes (CANCEL, PURGE, DEL, retention), and keeps waiting through a
//! replacement (it waits for the new version). Inside MULTI or a script it
//! does not wait.

use redis_module::{Context, RedisString, RedisValue};

use crate::commands::bytes;
use crate::core::error::{DqError, Result};
use crate::core::queue::{Outcome, Queue};
use crate::grammar::args::{check_id, parse_duration_arg, Options};
use crate::grammar::docs::{Arg, CommandDoc, KeyUse};
use crate::server::blocking::may_block;
use crate::server::command::Command;
use crate::server::key::{open_read, read};
use crate::server::reply::word;
use crate::server::watch::{self, Watch};

const NAME: &str = "dq.wait";

pub const COMMAND: Command = Command {
    doc: CommandDoc {
        name: NAME,
        summary: "Returns a message's outcome, waiting for it if asked",
        complexity: "O(1)",
        arity: -3,
        key: Some(KeyUse::Read),
        numkeys: false,
        args: &[
            Arg::key("queue"),
            Arg::string("id"),
            Arg::duration("timeout").token("BLOCK").optional(),
        ],
    },
    flags: "readonly blocking",
    acl: "",
    handler: wait,
    grammar: |args| parse(args).map(drop),
    replay: None,
};

/// Parses `queue id [BLOCK duration]`.
pub fn parse<'a>(args: &'a [&'a [u8]]) -> Result<(&'a [u8], &'a [u8], Option<u64>)> {
    let [queue, id, options @ ..] = args else {
        return Err(DqError::WrongArity(NAME));
    };
    let id = check_id(id)?;
    let mut block = None;
    let mut o = Options::new(options);
    while o.advance() {
        match o.value("BLOCK")? {
            Some(value) => block = Some(parse_duration_arg("BLOCK", value)?),
            None => return Err(o.unknown()),
        }
    }
    Ok((queue, id, block))
}

/// The reply for an outcome; `None` while there is none yet.
fn reply(outcome: Outcome<'_>) -> Option<RedisValue> {
    let (state, value) = match outcome {
        Outcome::Pending => return None,
        Outcome::Done(result) => ("done", result),
        Outcome::Dead(error) => ("dead", error),
        Outcome::Gone => ("gone", None),
    };
    let value = value.map_or(RedisValue::Null, |v| RedisValue::StringBuffer(v.to_vec()));
    Some(RedisValue::Array(vec![word(state), value]))
}

/// A client waiting for one message's outcome.
struct WaitFor {
    id: Vec<u8>,
}

impl Watch for WaitFor {
    fn answer(&self, queue: Option<&Queue>) -> Option<Result<RedisValue>> {
        reply(queue.map_or(Outcome::Gone, |q| q.outcome(&self.id))).map(Ok)
    }
}

fn wait(ctx: &Context, args: &[RedisString]) -> Result<RedisValue> {
    let argv = bytes(args);
    let (_, id, block) = parse(&argv[1..])?;
    let name = &args[1];
    let key = open_read(ctx, name);
    let outcome = read(&key, name)?.map_or(Outcome::Gone, |q| q.outcome(id));
    if let Some(answer) = reply(outcome) {
        return Ok(answer);
    }
    match block {
        Some(timeout) if may_block(ctx) => {
            watch::block(ctx, name, timeout, Box::new(WaitFor { id: id.to_vec() }));
            Ok(RedisValue::NoReply)
        }
        _ => Ok(RedisValue::Null),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grammar::args::leak_args;

    #[test]
    fn grammar() {
        assert_eq!(
            parse(leak_args(&["q", "m"])).unwrap(),
            (&b"q"[..], &b"m"[..], None)
        );
        assert_eq!(
            parse(leak_args(&["q", "m", "block", "5s"])).unwrap().2,
            Some(5_000)
        );
        let err = |a: &[&str]| parse(leak_args(a)).unwrap_err().to_string();
        assert_eq!(
            err(&["q"]),
            "ERR wrong number of arguments for 'dq.wait' command"
        );
        assert!(err(&["q", "m", "BLOCK", "-1"]).starts_with("ERR BLOCK must be a duration"));
        assert_eq!(err(&["q", "m", "BLOCK"]), "ERR BLOCK needs a value");
        assert_eq!(err(&["q", "m", "SOON"]), "ERR unknown option 'SOON'");
    }
}
