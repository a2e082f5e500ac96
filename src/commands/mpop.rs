//! DQ.MPOP numkeys queue [queue ...] [COUNT n] [BLOCK ms] [LEASE ms]
//!
//! DQ.POP over several queues in strict order: takes up to n messages
//! from the first queue, in argument order, that can deliver now (it has
//! ready messages, is not paused, and its RATE and MAXINFLIGHT allow);
//! queues that cannot are passed over. Replies `[queue, entries]` (an
//! array under RESP2 and RESP3 alike; entries as DQ.POP's), or nil. BLOCK
//! waits on all the queues at once, as BLMPOP does, and serves the client
//! from the first, in its order, that can deliver when it is woken. In a
//! cluster every queue must be in one hash slot (CROSSSLOT otherwise):
//! give them a common `{tag}`.

use redis_module::{Context, RedisString, RedisValue};

use crate::commands::bytes;
use crate::commands::pop::{parse_options, try_pop, Attempt, PopOptions};
use crate::core::error::{DqError, Result};
use crate::grammar::args::parse_in_range;
use crate::grammar::docs::{Arg, CommandDoc, KeyUse};
use crate::server::blocking::{block_on_keys, may_block, Waiter};
use crate::server::command::Command;
use crate::server::reply::{put_array, put_bulk};

pub const COMMAND: Command = Command {
    doc: CommandDoc {
        name: "dq.mpop",
        summary: "Takes ready messages from the first of several queues that can deliver",
        complexity: "O(K + M log N) for K queues and M messages taken from a queue of N",
        arity: -3,
        key: Some(KeyUse::Take),
        numkeys: true,
        args: &[
            Arg::integer("numkeys"),
            Arg::key("queue").multiple(),
            Arg::integer("count").token("COUNT").optional(),
            Arg::duration("timeout").token("BLOCK").optional(),
            Arg::duration("lease").token("LEASE").optional(),
        ],
    },
    flags: "write blocking getkeys-api",
    acl: "",
    handler: command,
    grammar: |args| parse(args).map(drop),
    replay: None,
};

const NAME: &str = "dq.mpop";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MpopArgs<'a> {
    pub queues: &'a [&'a [u8]],
    pub options: PopOptions,
}

/// Parses the arguments after the command name.
pub fn parse<'a>(args: &'a [&'a [u8]]) -> Result<MpopArgs<'a>> {
    let [numkeys, rest @ ..] = args else {
        return Err(DqError::WrongArity(NAME));
    };
    let n = parse_in_range("numkeys", "a positive integer", numkeys, 1, i64::MAX)? as u64;
    if n > rest.len() as u64 {
        return Err(DqError::BadValue {
            option: "numkeys",
            expected: "at most the number of queues given",
        });
    }
    let (queues, options) = rest.split_at(n as usize);
    Ok(MpopArgs {
        queues,
        options: parse_options(options)?,
    })
}

pub fn command(ctx: &Context, args: &[RedisString]) -> Result<RedisValue> {
    if ctx.is_keys_position_request() {
        // Where the queues are, for cluster routing (CROSSSLOT), ACL key
        // patterns and COMMAND GETKEYS: after numkeys.
        let argv = bytes(args);
        if let Ok(parsed) = parse(&argv[1..]) {
            for i in 0..parsed.queues.len() {
                ctx.key_at_pos(2 + i as i32);
            }
        }
        return Ok(RedisValue::NoReply);
    }
    mpop(ctx, args)
}

/// The first queue, in order, that delivers now: `[queue, entries]`.
fn first_delivering(
    ctx: &Context,
    names: &[&RedisString],
    count: usize,
    lease_ms: Option<u64>,
) -> Result<Option<RedisValue>> {
    for name in names {
        // A queue that cannot deliver is passed over, not counted as a POP
        // its limits held back.
        let head = || {
            put_array(ctx, 2);
            put_bulk(ctx, name.as_slice());
        };
        if try_pop(ctx, name, count, lease_ms, Attempt::Wake, head)? {
            return Ok(Some(RedisValue::NoReply));
        }
    }
    Ok(None)
}

fn mpop(ctx: &Context, args: &[RedisString]) -> Result<RedisValue> {
    let argv = bytes(args);
    let MpopArgs { queues, options } = parse(&argv[1..])?;
    let names: Vec<&RedisString> = args[2..2 + queues.len()].iter().collect();
    if let Some(reply) = first_delivering(ctx, &names, options.count, options.lease_ms)? {
        return Ok(reply);
    }
    match options.block {
        Some(timeout) if may_block(ctx) => {
            let waiting = Waiting {
                queues: queues.iter().map(|q| q.to_vec()).collect(),
                count: options.count,
                lease_ms: options.lease_ms,
            };
            block_on_keys(ctx, &names, timeout, waiting);
            Ok(RedisValue::NoReply)
        }
        _ => Ok(RedisValue::Null),
    }
}

/// What a blocked DQ.MPOP is waiting for.
struct Waiting {
    queues: Vec<Vec<u8>>,
    count: usize,
    lease_ms: Option<u64>,
}

impl Waiter for Waiting {
    const POINT: &'static str = "mpop wake";
    const TIMEOUT_POINT: &'static str = "mpop timeout";

    fn try_now(&self, ctx: &Context) -> Result<Option<RedisValue>> {
        let names: Vec<RedisString> = self
            .queues
            .iter()
            .map(|q| RedisString::create_from_slice(ctx.ctx, q))
            .collect();
        let names: Vec<&RedisString> = names.iter().collect();
        first_delivering(ctx, &names, self.count, self.lease_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grammar::args::leak_args;

    fn p(args: &[&str]) -> Result<MpopArgs<'static>> {
        parse(leak_args(args))
    }

    #[test]
    fn grammar() {
        let a = p(&["2", "a", "b", "COUNT", "5", "BLOCK", "100", "LEASE", "9000"]).unwrap();
        assert_eq!(a.queues, [&b"a"[..], &b"b"[..]]);
        assert_eq!(
            (a.options.count, a.options.block, a.options.lease_ms),
            (5, Some(100), Some(9000))
        );
        // A queue named like an option is a queue when numkeys says so.
        let a = p(&["2", "COUNT", "BLOCK"]).unwrap();
        assert_eq!(a.queues, [&b"COUNT"[..], &b"BLOCK"[..]]);
        let err = |a: &[&str]| p(a).unwrap_err().to_string();
        assert_eq!(err(&["0", "a"]), "ERR numkeys must be a positive integer");
        assert_eq!(err(&["-1", "a"]), "ERR numkeys must be a positive integer");
        assert_eq!(
            err(&["3", "a", "b"]),
            "ERR numkeys must be at most the number of queues given"
        );
        assert_eq!(err(&["1", "a", "NOW"]), "ERR unknown option 'NOW'");
        assert_eq!(
            err(&["1", "a", "COUNT", "0"]),
            "ERR COUNT must be an integer from 1 to 10000"
        );
    }
}
