//! How outcomes become replies: the one place a dq error turns into
//! error text, and the record shape (a map under RESP3, field/value pairs
//! under RESP2) of GET, STATS, CONFIG and QUEUES WITHSTATS.

use std::os::raw::c_long;

use redis_module::{raw, Context, RedisError, RedisResult, RedisValue};

use crate::core::error::{DqError, Result};

/// The one place a dq error becomes a reply. (redis-module's blanket
/// `From<impl Error>` would prefix a second "ERR", so handlers return
/// `Result<_, DqError>` and convert here.)
pub fn error(e: DqError) -> RedisError {
    RedisError::String(e.to_string())
}

/// Maps a handler's outcome to the reply.
pub fn reply(outcome: Result<RedisValue>) -> RedisResult {
    outcome.map_err(error)
}

/// A record's fields, in reply order.
pub type Fields = Vec<(&'static str, RedisValue)>;

/// A record-like reply: a map under RESP3, a flat field/value array under
/// RESP2 (RedisModule_ReplyWithMap does both), with fields in this order
/// and their names as bulk strings, as Redis' own records (XINFO, MEMORY
/// STATS, COMMAND DOCS) give them: a client that reads simple strings as
/// status objects (PHP's Predis) can key an array by them. Written to the
/// client at once: the handler then returns `RedisValue::NoReply`, which
/// this returns.
pub fn reply_record(ctx: &Context, fields: Fields) -> RedisValue {
    raw::reply_with_map(ctx.ctx, fields.len() as c_long);
    for (name, value) in fields {
        put_bulk(ctx, name.as_bytes());
        ctx.reply(Ok(value));
    }
    RedisValue::NoReply
}

/// The head of an array of `len` elements, written to the client at once:
/// a hot reply (POP's entries) streams its elements after it, with
/// [`put_bulk`] and [`put_integer`], instead of building a tree of values.
pub fn put_array(ctx: &Context, len: usize) {
    raw::reply_with_array(ctx.ctx, len as c_long);
}

/// A bulk string, written to the client at once (see [`put_array`]).
pub fn put_bulk(ctx: &Context, bytes: &[u8]) {
    raw::reply_with_string_buffer(ctx.ctx, bytes.as_ptr().cast(), bytes.len());
}

/// An integer, written to the client at once (see [`put_array`]).
pub fn put_integer(ctx: &Context, n: i64) {
    raw::reply_with_long_long(ctx.ctx, n);
}

/// A word inside a record (a state, a reason, where a setting comes
/// from): a bulk string, as the record's field names.
pub fn word(text: &'static str) -> RedisValue {
    RedisValue::StringBuffer(text.as_bytes().to_vec())
}

/// Records keyed by name (DQ.QUEUES WITHSTATS): a map of maps under RESP3,
/// name, record, name, record... under RESP2.
pub fn reply_records(ctx: &Context, records: Vec<(Vec<u8>, Fields)>) -> RedisValue {
    raw::reply_with_map(ctx.ctx, records.len() as c_long);
    for (name, fields) in records {
        put_bulk(ctx, &name);
        reply_record(ctx, fields);
    }
    RedisValue::NoReply
}

/// A list of records (DQ.SCHEDULES): an array of maps under RESP3, of
/// field/value arrays under RESP2.
pub fn reply_record_list(ctx: &Context, records: Vec<Fields>) -> RedisValue {
    raw::reply_with_array(ctx.ctx, records.len() as c_long);
    for fields in records {
        reply_record(ctx, fields);
    }
    RedisValue::NoReply
}

/// One step of a cursor iteration (DQ.SCAN, DQ.GROUPS): the next cursor,
/// as SCAN gives it (a bulk string, `0` at the end), and the entries.
pub fn cursor_page(next: String, entries: Vec<RedisValue>) -> RedisValue {
    RedisValue::Array(vec![
        RedisValue::BulkString(next),
        RedisValue::Array(entries),
    ])
}

pub fn int(v: u64) -> RedisValue {
    RedisValue::Integer(i64::try_from(v).unwrap_or(i64::MAX))
}
