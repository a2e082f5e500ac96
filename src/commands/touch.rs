//! DQ.TOUCH queue id [LEASE ms]
//!
//! Extends the lease of an in-flight message, for long jobs: the new
//! deadline is now + LEASE (default: the queue's lease, else
//! `dq.lease-ms`). Reply: the new lease deadline (integer, Unix ms), or nil
//! when the id is not in flight.

use redis_module::{Context, RedisResult, RedisString, RedisValue};

use crate::args::{lease_deadline, parse_id_and_option, parse_lease};
use crate::commands::{bytes, int, reply};
use crate::docs::{Arg, CommandDoc, KeyUse};
use crate::error::Result;
use crate::keyed_queue as queue;
use crate::redis_store::RedisStore;
use crate::timer::now_ms;

pub const DOC: CommandDoc = CommandDoc {
    name: "dq.touch",
    summary: "Extends the lease of an in-flight message",
    complexity: "O(log N) where N is the number of messages in the queue",
    arity: -3,
    key: Some(KeyUse::Update),
    args: &[
        Arg::key("queue"),
        Arg::string("id"),
        Arg::integer("lease").token("LEASE").optional(),
    ],
};

/// Parses `queue id [LEASE ms]`.
pub fn parse<'a>(args: &'a [&'a [u8]]) -> Result<(&'a [u8], &'a [u8], Option<u64>)> {
    parse_id_and_option("dq.touch", args, "LEASE", parse_lease)
}

pub fn command(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    let argv = bytes(&args);
    reply(touch(ctx, &argv[1..]))
}

fn touch(ctx: &Context, args: &[&[u8]]) -> Result<RedisValue> {
    let (name, id, lease) = parse(args)?;
    let now = now_ms();
    let mut store = RedisStore::open(ctx, name, true)?;
    let lease = lease.unwrap_or_else(|| store.policy().lease_ms.0);
    let deadline = lease_deadline(now, lease);
    let touched = queue::touch(&mut store, id, deadline);
    store.finish();
    Ok(touched?.map_or(RedisValue::Null, int))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::args::leak_args;

    #[test]
    fn grammar() {
        assert_eq!(
            parse(leak_args(&["q", "m", "LEASE", "9"])).unwrap().2,
            Some(9)
        );
        let err = |a: &[&str]| parse(leak_args(a)).unwrap_err().to_string();
        assert_eq!(
            err(&["q"]),
            "ERR wrong number of arguments for 'dq.touch' command"
        );
        assert_eq!(
            err(&["q", "m", "LEASE", "0"]),
            "ERR LEASE must be a positive integer number of milliseconds"
        );
        assert_eq!(err(&["q", "m", "FOREVER"]), "ERR unknown option 'FOREVER'");
    }
}
