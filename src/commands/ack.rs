//! DQ.ACK queue id [id ...]
//!
//! The work is done: deletes those messages. Replies the number of ids that
//! were in flight (and are now gone). An id that is not in flight — unknown,
//! already acked, or redelivered after its lease ended — counts 0 and is
//! left as it is. A newer version added while the message was in flight
//! now takes its place, as attempt 1.

use crate::commands::ids_command;
use crate::core::queue::Queue;
use crate::grammar::docs::{Arg, CommandDoc, KeyUse};
use crate::server::command::Command;

pub const COMMAND: Command = ids_command!(
    Queue::ack,
    "ACK",
    CommandDoc {
        name: "dq.ack",
        summary: "Ends deliveries successfully: deletes the messages",
        complexity: "O(M log N) for M ids in a queue of N messages",
        arity: -3,
        key: Some(KeyUse::Delete),
        numkeys: false,
        args: &[Arg::key("queue"), Arg::string("id").multiple()],
    }
);
