//! DQ.DONE queue id result [id result ...]
//!
//! As DQ.ACK, and keeps each message's result: a finished message whose
//! retention (its own RETAIN, else the queue's, else `dq.retain-ms`) is set
//! stays as `done` with its result until the retention runs out (DQ.GET,
//! PEEK, SCAN and WAIT show it); without retention it is deleted as ACK
//! deletes it, result and all. Replies how many of the ids were in flight
//! and are now finished. Unfenced, like ACK.

use redis_module::{Context, RedisString, RedisValue};

use crate::commands::bytes;
use crate::core::error::{DqError, Result};
use crate::core::limits::MAX_RESULT_LEN;
use crate::core::queue::Queue;
use crate::grammar::args::{check_id, parse_duration_arg};
use crate::grammar::docs::{Arg, CommandDoc, KeyUse};
use crate::server::clock::now_ms;
use crate::server::command::{Command, Replayed};
use crate::server::key::QueueKey;
use crate::server::replication::Apply;
use crate::server::reply::int;
use crate::server::settings;

const NAME: &str = "dq.done";

pub const COMMAND: Command = Command {
    doc: CommandDoc {
        name: NAME,
        summary: "Ends deliveries successfully, keeping each message's result while it is retained",
        complexity: "O(M log N) for M ids in a queue of N messages",
        arity: -4,
        key: Some(KeyUse::Delete),
        numkeys: false,
        args: &[
            Arg::key("queue"),
            Arg::block("outcome", &[Arg::string("id"), Arg::string("result")]).multiple(),
        ],
    },
    flags: "write",
    acl: "",
    handler: done,
    grammar: |args| parse(args).map(drop),
    replay: Some(("DONE", replay)),
};

/// Each id with its result.
type Results<'a> = Vec<(&'a [u8], &'a [u8])>;

/// Parses `queue id result [id result ...]`.
pub fn parse<'a>(args: &'a [&'a [u8]]) -> Result<(&'a [u8], Results<'a>)> {
    let [queue, pairs @ ..] = args else {
        return Err(DqError::WrongArity(NAME));
    };
    if pairs.is_empty() {
        return Err(DqError::WrongArity(NAME));
    }
    let mut results = Vec::with_capacity(pairs.len() / 2);
    for pair in pairs.chunks(2) {
        let id = check_id(pair[0])?;
        let [_, result] = pair else {
            return Err(DqError::Requires(
                "id",
                "a result (DQ.DONE takes id result pairs)",
            ));
        };
        if result.len() > MAX_RESULT_LEN {
            return Err(DqError::TooLong {
                what: "result",
                max: MAX_RESULT_LEN,
            });
        }
        results.push((id, *result));
    }
    Ok((queue, results))
}

fn done(ctx: &Context, args: &[RedisString]) -> Result<RedisValue> {
    let argv = bytes(args);
    let (_, results) = parse(&argv[1..])?;
    finished(ctx, args, Finish::Done(&results)).map(int)
}

/// Which command finishes deliveries, and what it names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Finish<'a> {
    /// ACK's ids.
    Ack(&'a [&'a [u8]]),
    /// DONE's ids, each with its result.
    Done(&'a [(&'a [u8], &'a [u8])]),
}

/// Finishes the in-flight deliveries `how` names now, with
/// the module's retention as the fallback, and propagates what a replica
/// must do the same: `ACK id...` when `dq.retain-ms` is 0 (the round-3
/// form), else `DONE retain-ms n id result ... id ...`, whose first `n` ids
/// have a result (DQ.DONE's pairs; ACK's ids have none), so the master's
/// `dq.retain-ms` decides there too. Either way the command's own argument
/// strings are sent, not copies.
pub fn finished(ctx: &Context, args: &[RedisString], how: Finish<'_>) -> Result<u64> {
    let mut key = QueueKey::open(ctx, &args[1])?;
    let Some(queue) = key.queue() else {
        return Ok(0);
    };
    let now = now_ms();
    let retain = settings::retain_ms();
    let due_before = queue.next_due();
    let count = match how {
        Finish::Ack(ids) => queue.ack(now, ids, retain),
        Finish::Done(results) => queue.done(now, results, retain),
    };
    if count == 0 {
        return Ok(0);
    }
    if matches!(how, Finish::Ack(_)) && retain == 0 {
        Apply::new(ctx, &args[1], now, settings::max_attempts(), "ACK")
            .args(&args[2..])
            .send();
    } else {
        let with_results = match how {
            Finish::Ack(_) => 0,
            Finish::Done(results) => results.len() as u64,
        };
        Apply::new(ctx, &args[1], now, settings::max_attempts(), "DONE")
            .number(retain)
            .number(with_results)
            .args(&args[2..])
            .send();
    }
    key.announce(due_before);
    Ok(count)
}

/// Replays `DONE retain-ms n id result ... id ...` (see [`finished`]).
pub fn replay(queue: &mut Queue, r: &Replayed<'_>) -> Result<()> {
    let bad = || DqError::BadApply("DONE needs retain-ms, a count, then ids and results".into());
    let [retain, n, rest @ ..] = r.args else {
        return Err(bad());
    };
    let retain = parse_duration_arg("retain-ms", retain)?;
    let n = std::str::from_utf8(n)
        .ok()
        .and_then(|n| n.parse::<usize>().ok())
        .filter(|&n| n.checked_mul(2).is_some_and(|pairs| pairs <= rest.len()))
        .ok_or_else(bad)?;
    let (pairs, ids) = rest.split_at(2 * n);
    if rest.is_empty() {
        return Err(bad());
    }
    let mut items = Vec::with_capacity(n + ids.len());
    for pair in pairs.chunks(2) {
        items.push((check_id(pair[0])?, Some(pair[1])));
    }
    for id in ids {
        items.push((check_id(id)?, None));
    }
    queue.finish(r.now, items.into_iter(), retain);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grammar::args::leak_args;

    #[test]
    fn grammar() {
        let (q, pairs) = parse(leak_args(&["q", "a", "ok", "b", ""])).unwrap();
        assert_eq!(q, b"q");
        assert_eq!(pairs, vec![(&b"a"[..], &b"ok"[..]), (&b"b"[..], &b""[..])]);
        let err = |a: &[&str]| parse(leak_args(a)).unwrap_err().to_string();
        assert_eq!(
            err(&["q"]),
            "ERR wrong number of arguments for 'dq.done' command"
        );
        assert_eq!(
            err(&["q", "a", "ok", "b"]),
            "ERR id needs a result (DQ.DONE takes id result pairs)"
        );
        assert_eq!(err(&["q", "", "ok"]), "ERR id must not be empty");
    }
}
