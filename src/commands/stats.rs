//! DQ.STATS queue
//!
//! Counts per state and lifetime counters, as a record (a map under RESP3,
//! a flat field/value array under RESP2): `delayed`, `ready`, `inflight`,
//! then `added`, `delivered`, `acked`, `lease-expired`, `cancelled`.
//! An unknown queue has all zeros.

use redis_module::{Context, RedisResult, RedisString, RedisValue};

use crate::commands::{bytes, int, reply, reply_record};
use crate::error::{DqError, Result};
use crate::queue;
use crate::redis_store::RedisStore;

pub fn command(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    let argv = bytes(&args);
    reply(stats(ctx, &argv[1..]))
}

fn stats(ctx: &Context, args: &[&[u8]]) -> Result<RedisValue> {
    let [name] = args else {
        return Err(DqError::WrongArity("dq.stats"));
    };
    let mut store = RedisStore::open(ctx, name, false)?;
    let stats = queue::stats(&mut store)?;
    let mut fields = vec![
        ("delayed", int(stats.delayed)),
        ("ready", int(stats.ready)),
        ("inflight", int(stats.inflight)),
    ];
    fields.extend(stats.counters.iter().map(|(c, v)| (c.name(), int(*v))));
    Ok(reply_record(ctx, fields))
}
