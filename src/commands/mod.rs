//! One file per command: its grammar (pure, unit-tested), then the handler
//! that wires it to the queue's keys. Helpers shared by the handlers live here.

pub mod ack;
pub mod add;
pub mod cancel;
pub mod config;
pub mod get;
pub mod nack;
pub mod peek;
pub mod pop;
pub mod purge;
pub mod queues;
pub mod redrive;
pub mod stats;
pub mod touch;

use redis_module::{raw, Context, RedisResult, RedisString, RedisValue};

use crate::docs::CommandDoc;
use crate::error::Result;

/// Every command's COMMAND DOCS entry.
pub const DOCS: [CommandDoc; 13] = [
    add::DOC,
    pop::DOC,
    ack::DOC,
    cancel::DOC,
    nack::DOC,
    touch::DOC,
    redrive::DOC,
    purge::DOC,
    get::DOC,
    peek::DOC,
    stats::DOC,
    config::DOC,
    queues::DOC,
];

/// The raw bytes of every argument.
pub fn bytes(args: &[RedisString]) -> Vec<&[u8]> {
    args.iter().map(RedisString::as_slice).collect()
}

/// Maps a handler's outcome to the reply, the one place errors become text.
pub fn reply(outcome: Result<RedisValue>) -> RedisResult {
    outcome.map_err(|e| e.into_redis())
}

/// A record-like reply: a map under RESP3, a flat field/value array under
/// RESP2 (RedisModule_ReplyWithMap does both), with fields in this order.
pub fn reply_record(ctx: &Context, fields: Vec<(&'static str, RedisValue)>) -> RedisValue {
    raw::reply_with_map(ctx.ctx, fields.len() as std::os::raw::c_long);
    for (name, value) in fields {
        ctx.reply(Ok(RedisValue::SimpleStringStatic(name)));
        ctx.reply(Ok(value));
    }
    RedisValue::NoReply
}

pub fn int(v: u64) -> RedisValue {
    RedisValue::Integer(i64::try_from(v).unwrap_or(i64::MAX))
}
