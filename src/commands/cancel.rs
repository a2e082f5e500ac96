//! DQ.CANCEL queue id [id ...]
//!
//! Deletes messages in any state (delayed, ready, in flight), together with
//! any newer version waiting behind an in-flight one. Replies how many of
//! the ids existed. A cancelled message that held its GROUP hands the group
//! to the group's next due message.

use crate::commands::ids_command;
use crate::core::queue::Queue;
use crate::grammar::docs::{Arg, CommandDoc, KeyUse};
use crate::server::command::Command;

pub const COMMAND: Command = ids_command!(
    Queue::cancel,
    "CANCEL",
    CommandDoc {
        name: "dq.cancel",
        summary: "Deletes messages in any state",
        complexity: "O(M log N) for M ids in a queue of N messages",
        arity: -3,
        key: Some(KeyUse::Delete),
        numkeys: false,
        args: &[Arg::key("queue"), Arg::string("id").multiple()],
    }
);
