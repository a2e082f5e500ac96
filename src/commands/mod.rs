//! One file per command: its grammar (pure, unit-tested), the handler that
//! opens the queue's key, calls the queue, propagates and replies, and how
//! a replica replays what it propagated. Helpers shared by the handlers
//! live here; `apply.rs` is the replay entry point.

pub mod ack;
pub mod add;
pub mod apply;
pub mod cancel;
pub mod config;
pub mod get;
pub mod mpop;
pub mod nack;
pub mod pause;
pub mod peek;
pub mod pop;
pub mod purge;
pub mod queues;
pub mod redrive;
pub mod resume;
pub mod scan;
pub mod schedule;
pub mod schedules;
pub mod stats;
pub mod touch;
pub mod unschedule;

use redis_module::{Context, RedisString};

use crate::core::error::Result;
use crate::core::queue::Queue;
use crate::grammar::args::parse_queue_and_ids;
use crate::grammar::docs::CommandDoc;
use crate::server::clock::now_ms;
use crate::server::key::QueueKey;
use crate::server::replication::Apply;
use crate::server::settings;

/// Every command's COMMAND DOCS entry.
pub const DOCS: [CommandDoc; 21] = [
    add::DOC,
    pop::DOC,
    mpop::DOC,
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
    scan::DOC,
    schedule::DOC,
    unschedule::DOC,
    schedules::DOC,
    pause::DOC,
    resume::DOC,
    apply::DOC,
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

/// `queue id [id ...]` (ACK, CANCEL): `op` on the ids.
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
    use crate::grammar::docs::{Arg, Kind};

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

    #[test]
    fn every_command_doc_is_well_formed() {
        for doc in DOCS {
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
        let mut names: Vec<&str> = DOCS.iter().map(|d| d.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), DOCS.len());
    }

    /// The server enforces the declared arity before the handler runs: it
    /// must be exactly what the grammar allows.
    #[test]
    fn declared_arity_matches_the_argument_tree() {
        for doc in DOCS {
            assert_eq!(doc.arity, doc.implied_arity(), "{}", doc.name);
        }
    }

    #[test]
    fn every_command_has_acl_categories_and_only_once() {
        let mut names: Vec<&str> = crate::server::acl::CATEGORIES
            .iter()
            .map(|(n, _)| *n)
            .collect();
        let mut documented: Vec<&str> = DOCS.iter().map(|d| d.name).collect();
        names.sort_unstable();
        documented.sort_unstable();
        assert_eq!(names, documented);
    }
}
