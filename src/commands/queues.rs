//! DQ.QUEUES
//!
//! The queues this node holds in the selected database: every key of the
//! dq queue type, sorted by bytes (`SCAN 0 TYPE dq--queue` pages the same
//! names). It walks the keyspace, O(N) in the keys of the database, like
//! KEYS: meant for operators, not for a hot path.

use std::collections::BTreeSet;

use redis_module::{Context, RedisResult, RedisString, RedisValue};

use crate::commands::reply;
use crate::docs::CommandDoc;
use crate::error::DqError;
use crate::qkey::scan_queues;

pub const DOC: CommandDoc = CommandDoc {
    name: "dq.queues",
    summary: "Lists the queues held in the selected database",
    complexity: "O(N) where N is the number of keys in the database",
    arity: 1,
    key: None,
    args: &[],
};

pub fn command(ctx: &Context, args: &[RedisString]) -> RedisResult {
    if args.len() != 1 {
        return reply(Err(DqError::WrongArity("dq.queues")));
    }
    let mut names = BTreeSet::new();
    scan_queues(ctx, |name, queue| {
        if queue.is_some() {
            names.insert(name.to_vec());
        }
    });
    Ok(RedisValue::Array(
        names.into_iter().map(RedisValue::StringBuffer).collect(),
    ))
}
