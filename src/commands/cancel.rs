//! DQ.CANCEL queue id [id ...]
//!
//! Deletes messages in any state (delayed, ready, in flight, dead, done),
//! together with any newer version waiting behind an in-flight one. Replies
//! how many of the ids existed. A cancelled message that held its GROUP
//! hands the group to the group's next due message.

use redis_module::{Context, RedisString, RedisValue};

use crate::commands::for_ids;
use crate::core::error::Result;
use crate::core::queue::Queue;
use crate::grammar::args::parse_queue_and_ids;
use crate::grammar::docs::{Arg, CommandDoc, KeyUse};
use crate::server::command::{Command, Replayed};
use crate::server::reply::int;

const NAME: &str = "dq.cancel";

pub const COMMAND: Command = Command {
    doc: CommandDoc {
        name: NAME,
        summary: "Deletes messages in any state",
        complexity: "O(M log N) for M ids in a queue of N messages",
        arity: -3,
        key: Some(KeyUse::Delete),
        numkeys: false,
        args: &[Arg::key("queue"), Arg::string("id").multiple()],
    },
    flags: "write",
    acl: "",
    handler: cancel,
    grammar: |args| parse_queue_and_ids(NAME, args).map(drop),
    replay: Some(("CANCEL", replay)),
};

fn cancel(ctx: &Context, args: &[RedisString]) -> Result<RedisValue> {
    for_ids(ctx, args, NAME, "CANCEL", Queue::cancel).map(int)
}

/// Replays `CANCEL id...`.
pub fn replay(queue: &mut Queue, r: &Replayed<'_>) -> Result<()> {
    queue.cancel(r.now, r.args);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grammar::args::leak_args;

    #[test]
    fn grammar() {
        let argv = leak_args(&["q", "a", "b"]);
        assert_eq!(parse_queue_and_ids(NAME, argv).unwrap().1.len(), 2);
        assert_eq!(
            parse_queue_and_ids(NAME, leak_args(&["q"]))
                .unwrap_err()
                .to_string(),
            "ERR wrong number of arguments for 'dq.cancel' command"
        );
    }
}
