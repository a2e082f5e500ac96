//! One file per command: its grammar (pure, unit-tested), the handler that
//! opens the queue's key, calls the queue, propagates and replies, and how
//! a replica replays what it propagated. Helpers shared by the handlers
//! live here; `apply.rs` is the replay entry point.

pub mod ack;
pub mod add;
pub mod apply;
pub mod cancel;
pub mod config;
pub mod done;
pub mod events;
pub mod get;
pub mod groups;
pub mod mpop;
pub mod nack;
pub mod pause;
pub mod peek;
pub mod pop;
pub mod purge;
pub mod queues;
pub mod redrive;
#[cfg(test)]
mod reference;
pub mod resume;
pub mod scan;
pub mod schedule;
pub mod schedules;
pub mod stats;
pub mod touch;
pub mod unschedule;
pub mod wait;

use redis_module::{Context, RedisString};

use crate::core::error::Result;
use crate::core::queue::Queue;
use crate::grammar::args::parse_queue_and_ids;
use crate::server::clock::now_ms;
use crate::server::command::Command;
use crate::server::key::QueueKey;
use crate::server::replication::Apply;
use crate::server::settings;

/// Every command. A new command is its own file and one line here, at the
/// end (docs/development.md, "Adding a command").
pub const ALL: &[&Command] = &[
    &add::COMMAND,
    &pop::COMMAND,
    &mpop::COMMAND,
    &ack::COMMAND,
    &cancel::COMMAND,
    &nack::COMMAND,
    &touch::COMMAND,
    &redrive::COMMAND,
    &purge::COMMAND,
    &get::COMMAND,
    &peek::COMMAND,
    &stats::COMMAND,
    &config::COMMAND,
    &queues::COMMAND,
    &scan::COMMAND,
    &schedule::COMMAND,
    &unschedule::COMMAND,
    &schedules::COMMAND,
    &pause::COMMAND,
    &resume::COMMAND,
    &apply::COMMAND,
    // Round 4. New commands go last: the `args` fuzz target's seeds name a
    // command by its place in this list.
    &done::COMMAND,
    &wait::COMMAND,
    &events::COMMAND,
    &groups::COMMAND,
];

/// The raw bytes of every argument.
pub fn bytes(args: &[RedisString]) -> Vec<&[u8]> {
    args.iter().map(RedisString::as_slice).collect()
}

/// A write on an existing queue that replies a count and replays from its
/// own arguments (ACK, CANCEL, REDRIVE, PURGE): `op` runs at `now`; when it
/// counted anything, `VERB args...` propagates and the change is announced.
/// An absent queue counts 0 and is not created.
pub fn counted_write(
    ctx: &Context,
    args: &[RedisString],
    verb: &'static str,
    op: impl FnOnce(&mut Queue, u64) -> u64,
) -> Result<u64> {
    let mut key = QueueKey::open(ctx, &args[1])?;
    let Some(queue) = key.queue() else {
        return Ok(0);
    };
    let now = now_ms();
    let due_before = queue.next_due();
    let done = op(queue, now);
    if done > 0 {
        Apply::new(ctx, &args[1], now, settings::max_attempts(), verb)
            .args(&args[2..])
            .send();
        key.announce(due_before);
    }
    Ok(done)
}

/// `queue id [id ...]` (CANCEL): `op` on the ids.
pub fn for_ids(
    ctx: &Context,
    args: &[RedisString],
    command: &'static str,
    verb: &'static str,
    op: fn(&mut Queue, u64, &[&[u8]]) -> u64,
) -> Result<u64> {
    let argv = bytes(args);
    let (_, ids) = parse_queue_and_ids(command, &argv[1..])?;
    counted_write(ctx, args, verb, |queue, now| op(queue, now, ids))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grammar::docs::{Arg, CommandDoc, Kind};
    use crate::server::acl;

    fn check_arg(command: &str, arg: &Arg) {
        assert!(
            !arg.name.is_empty() && arg.name == arg.name.to_lowercase(),
            "{command}: {arg:?}"
        );
        if let Some(token) = arg.token {
            assert_eq!(token, token.to_uppercase(), "{command}: {arg:?}");
        }
        match arg.kind {
            Kind::PureToken => assert!(arg.token.is_some(), "{command}: {arg:?}"),
            Kind::OneOf => assert!(arg.subargs.len() >= 2, "{command}: {arg:?}"),
            Kind::Block => assert!(!arg.subargs.is_empty(), "{command}: {arg:?}"),
            _ => assert!(arg.subargs.is_empty(), "{command}: {arg:?}"),
        }
        let mut names: Vec<&str> = arg.subargs.iter().map(|a| a.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), arg.subargs.len(), "{command}: names repeat");
        for sub in arg.subargs {
            assert_ne!(sub.kind, Kind::Key, "{command}: the key is first, alone");
            check_arg(command, sub);
        }
    }

    fn docs() -> impl Iterator<Item = &'static CommandDoc> {
        ALL.iter().map(|c| &c.doc)
    }

    #[test]
    fn every_command_doc_is_well_formed() {
        for doc in docs() {
            assert!(doc.name.starts_with("dq."), "{}", doc.name);
            assert!(!doc.summary.is_empty() && !doc.complexity.is_empty());
            let keys: Vec<&Arg> = doc.args.iter().filter(|a| a.kind == Kind::Key).collect();
            // The key is the first argument, or (numkeys) the second, after
            // the count of keys.
            let key_at = usize::from(doc.numkeys);
            match doc.key {
                Some(_) => {
                    assert_eq!(keys.len(), 1, "{}", doc.name);
                    assert_eq!(doc.args[key_at].kind, Kind::Key, "{}", doc.name);
                    assert_eq!(doc.args[key_at].multiple, doc.numkeys, "{}", doc.name);
                }
                None => assert!(keys.is_empty(), "{}", doc.name),
            }
            let mut names: Vec<&str> = doc.args.iter().map(|a| a.name).collect();
            names.sort_unstable();
            names.dedup();
            assert_eq!(names.len(), doc.args.len(), "{}: names repeat", doc.name);
            for arg in doc.args {
                check_arg(doc.name, arg);
            }
        }
        let mut names: Vec<&str> = docs().map(|d| d.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), ALL.len());
    }

    /// The server enforces the declared arity before the handler runs: it
    /// must be exactly what the grammar allows.
    #[test]
    fn declared_arity_matches_the_argument_tree() {
        for doc in docs() {
            assert_eq!(doc.arity, doc.implied_arity(), "{}", doc.name);
        }
    }

    /// Flags the server knows for module commands (module.c,
    /// commandFlagsFromString), and how a command's flags fit its key.
    #[test]
    fn flags_are_known_and_fit_the_declaration() {
        const KNOWN: [&str; 8] = [
            "write",
            "readonly",
            "deny-oom",
            "fast",
            "blocking",
            "getkeys-api",
            "admin",
            "no-cluster",
        ];
        for command in ALL {
            let flags: Vec<&str> = command.flags.split(' ').collect();
            for f in &flags {
                assert!(KNOWN.contains(f), "{}: flag {f}", command.doc.name);
            }
            let has = |f: &str| flags.contains(&f);
            assert!(has("write") != has("readonly"), "{}", command.doc.name);
            // Keys counted by an argument are found by the command itself.
            assert_eq!(
                has("getkeys-api"),
                command.doc.numkeys,
                "{}",
                command.doc.name
            );
            // Only writes propagate.
            if command.replay.is_some() {
                assert!(has("write"), "{}", command.doc.name);
            }
        }
    }

    /// The categories every command had when they were a table of their
    /// own: deriving them from the flags changed none.
    #[test]
    fn acl_categories_are_derived_from_the_flags_as_before() {
        let expected = [
            ("dq.add", "write fast"),
            ("dq.pop", "write slow blocking"),
            ("dq.mpop", "write slow blocking"),
            ("dq.ack", "write slow"),
            ("dq.cancel", "write slow"),
            ("dq.nack", "write fast"),
            ("dq.touch", "write fast"),
            ("dq.redrive", "write slow"),
            ("dq.purge", "write slow"),
            ("dq.get", "read fast"),
            ("dq.peek", "read slow"),
            ("dq.stats", "read fast"),
            ("dq.config", "write slow"),
            ("dq.queues", "read slow dangerous"),
            ("dq.scan", "read slow"),
            ("dq.schedule", "write slow"),
            ("dq.unschedule", "write slow"),
            ("dq.schedules", "read slow"),
            ("dq.pause", "write fast"),
            ("dq.resume", "write fast"),
            ("dq.apply", "write slow admin dangerous"),
        ];
        for (name, categories) in expected {
            let command = ALL.iter().find(|c| c.doc.name == name);
            assert_eq!(
                command.map(|c| acl::standard(c)).as_deref(),
                Some(categories),
                "{name}"
            );
        }
    }

    /// The categories a server knows of itself (Redis 7.0 to 8.0, Valkey).
    const STANDARD: [&str; 21] = [
        "keyspace",
        "read",
        "write",
        "set",
        "sortedset",
        "list",
        "hash",
        "string",
        "bitmap",
        "hyperloglog",
        "geo",
        "stream",
        "pubsub",
        "admin",
        "fast",
        "slow",
        "blocking",
        "dangerous",
        "connection",
        "transaction",
        "scripting",
    ];

    #[test]
    fn categories_are_standard_and_each_command_is_fast_or_slow_read_or_write() {
        for command in ALL {
            let name = command.doc.name;
            let categories = acl::standard(command);
            let words: Vec<&str> = categories.split(' ').collect();
            for w in &words {
                assert!(STANDARD.contains(w), "{name}: unknown category {w}");
            }
            let has = |c: &str| words.contains(&c);
            assert!(has("fast") != has("slow"), "{name}: fast xor slow");
            assert!(has("read") != has("write"), "{name}: read xor write");
            let mut unique = words.clone();
            unique.sort_unstable();
            unique.dedup();
            assert_eq!(unique.len(), words.len(), "{name}: a category twice");
        }
    }

    #[test]
    fn apply_is_never_granted_by_read() {
        let apply = ALL.iter().find(|c| c.doc.name == "dq.apply");
        let categories = apply.map(|c| acl::standard(c)).unwrap_or_default();
        let words: Vec<&str> = categories.split(' ').collect();
        assert!(!words.contains(&"read"));
        assert!(words.contains(&"admin") && words.contains(&"dangerous"));
    }

    /// Each verb a replica may be sent names one replay.
    #[test]
    fn replay_verbs_are_unique() {
        let mut verbs: Vec<&str> = ALL.iter().filter_map(|c| c.replay.map(|r| r.0)).collect();
        let n = verbs.len();
        verbs.sort_unstable();
        verbs.dedup();
        assert_eq!(verbs.len(), n);
        assert!(!verbs.contains(&"TICK") && !verbs.contains(&"LOAD"));
    }
}
