//! DQ.POP queue [COUNT n] [BLOCK ms] [LEASE ms]
//!
//! Takes up to n ready messages (default 1): highest priority first, then
//! earliest due, then first added. Each is leased for LEASE ms (default
//! 30000): it stays in the queue, invisible, until ACK or the lease ends.
//! Replies an array of `[id, payload, attempt]` entries, or nil when none.
//! BLOCK waits up to ms for a message (0 = forever), like BLPOP; inside
//! MULTI or a script it does not wait.

use redis_module::{Context, RedisString, RedisValue};

use crate::commands::bytes;
use crate::core::error::{DqError, Result};
use crate::core::queue::{Counter, Queue, Slot};
use crate::grammar::args::{
    is_keyword, lease_deadline, parse_count, parse_deadline, parse_duration_arg, parse_lease,
    Options,
};
use crate::grammar::docs::{Arg, CommandDoc, KeyUse};
use crate::grammar::packed::{pack_ids, unpack_ids};
use crate::server::blocking::{block_on_keys, may_block, Waiter};
use crate::server::clock::now_ms;
use crate::server::command::{Command, Replayed};
use crate::server::key::QueueKey;
use crate::server::replication::Apply;
use crate::server::reply::{put_array, put_bulk, put_integer};
use crate::server::settings;
use crate::server::settings::lease_for;

pub const COMMAND: Command = Command {
    doc: CommandDoc {
        name: "dq.pop",
        summary: "Takes ready messages, leasing each until ACK, NACK or lease expiry",
        complexity: "O(M log N) for M messages taken from a queue of N",
        arity: -2,
        key: Some(KeyUse::Take),
        numkeys: false,
        args: &[
            Arg::key("queue"),
            Arg::integer("count").token("COUNT").optional(),
            Arg::duration("timeout").token("BLOCK").optional(),
            Arg::duration("lease").token("LEASE").optional(),
        ],
    },
    flags: "write blocking",
    acl: "",
    handler: pop_or_block,
    grammar: |args| parse(args).map(drop),
    replay: Some(("CLAIM", replay)),
};

const NAME: &str = "dq.pop";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PopArgs<'a> {
    pub queue: &'a [u8],
    pub options: PopOptions,
}

/// COUNT, BLOCK and LEASE: DQ.POP's options, which DQ.MPOP shares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PopOptions {
    pub count: usize,
    pub block: Option<u64>,
    /// `None`: the queue's or the module's lease.
    pub lease_ms: Option<u64>,
}

pub fn parse<'a>(args: &'a [&'a [u8]]) -> Result<PopArgs<'a>> {
    let [queue, options @ ..] = args else {
        return Err(DqError::WrongArity(NAME));
    };
    Ok(PopArgs {
        queue,
        options: parse_options(options)?,
    })
}

/// Parses `[COUNT n] [BLOCK ms] [LEASE ms]`, in any order, each at most once.
pub fn parse_options(options: &[&[u8]]) -> Result<PopOptions> {
    let mut parsed = PopOptions {
        count: 1,
        block: None,
        lease_ms: None,
    };
    let mut o = Options::new(options);
    while o.advance() {
        if let Some(value) = o.value("COUNT")? {
            parsed.count = parse_count(value)?;
        } else if let Some(value) = o.value("BLOCK")? {
            parsed.block = Some(parse_duration_arg("BLOCK", value)?);
        } else if let Some(value) = o.value("LEASE")? {
            parsed.lease_ms = Some(parse_lease(value)?);
        } else {
            return Err(o.unknown());
        }
    }
    Ok(parsed)
}

fn pop_or_block(ctx: &Context, args: &[RedisString]) -> Result<RedisValue> {
    let argv = bytes(args);
    let PopArgs { queue, options } = parse(&argv[1..])?;
    let (count, lease_ms) = (options.count, options.lease_ms);
    if try_pop(ctx, &args[1], count, lease_ms, Attempt::Command, || {})? {
        return Ok(RedisValue::NoReply);
    }
    match options.block {
        Some(timeout) if may_block(ctx) => {
            let waiting = Waiting {
                queue: queue.to_vec(),
                count: options.count,
                lease_ms: options.lease_ms,
            };
            block_on_keys(ctx, &[&args[1]], timeout, waiting);
            Ok(RedisValue::NoReply)
        }
        _ => Ok(RedisValue::Null),
    }
}

/// Which try a POP is: the command itself, or a blocked client woken up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Attempt {
    Command,
    /// A woken client tries only when the limits let something through:
    /// its waiting is not a POP the limits held back again.
    Wake,
}

/// Pops from one queue now, as DQ.POP and DQ.MPOP do, and replies with
/// the entries taken, after what `head` writes (DQ.MPOP's queue name);
/// false when it delivered nothing, and then it replied nothing.
pub fn try_pop(
    ctx: &Context,
    name: &RedisString,
    count: usize,
    lease_ms: Option<u64>,
    attempt: Attempt,
    head: impl FnOnce(),
) -> Result<bool> {
    let mut key = QueueKey::open(ctx, name)?;
    let Some(queue) = key.queue() else {
        return Ok(false);
    };
    let now = now_ms();
    if attempt == Attempt::Wake && !queue.deliverable(now) {
        return Ok(false);
    }
    let deadline = lease_deadline(now, lease_for(queue, lease_ms));
    let due_before = queue.next_due();
    let throttles = queue.counters().get(Counter::Throttled);
    let popped = queue.pop_slots(now, count, deadline);
    let throttled = queue.counters().get(Counter::Throttled) > throttles;
    if popped.is_empty() && !throttled {
        return Ok(false);
    }
    // As XREADGROUP propagates XCLAIM: which ids, leased until when; and
    // whether the limits held this POP back (a counter). The ids go
    // packed in one argument (see `grammar::packed`).
    let mut apply = Apply::new(ctx, name, now, settings::max_attempts(), "CLAIM");
    if throttled {
        apply.bytes(b"THROTTLED");
    }
    let mut packed = Vec::new();
    pack_ids(
        popped.iter().map(|&slot| queue.leased_id(slot)),
        &mut packed,
    );
    apply
        .bytes(b"PACKED")
        .number(deadline)
        .bytes(&packed)
        .send();
    if !popped.is_empty() {
        head();
        reply_entries(ctx, queue, &popped);
    }
    key.announce(due_before);
    Ok(!popped.is_empty())
}

/// POP's reply, an array of `[id, payload, attempt]` entries, written to
/// the client straight from the records: a reply of COUNT 100 built as a
/// tree of values first cost two copies and a vector per entry, and a
/// walk over the tree.
fn reply_entries(ctx: &Context, queue: &Queue, popped: &[Slot]) {
    put_array(ctx, popped.len());
    for &slot in popped {
        let (id, payload, attempt) = queue.leased(slot);
        put_array(ctx, 3);
        put_bulk(ctx, id);
        put_bulk(ctx, payload);
        put_integer(ctx, attempt.into());
    }
}

/// Replays `CLAIM [THROTTLED] PACKED lease-deadline ids` (or what earlier
/// releases wrote, still in AOFs: `CLAIM [THROTTLED] lease-deadline
/// id...`): leases exactly those messages at the master's `now` (the
/// rate's log counts them then).
pub fn replay(queue: &mut Queue, r: &Replayed<'_>) -> Result<()> {
    let (now, args) = (r.now, r.args);
    let args = match args {
        [flag, rest @ ..] if is_keyword(flag, "THROTTLED") => {
            queue.count_throttle();
            rest
        }
        _ => args,
    };
    let (packed, args) = match args {
        [flag, rest @ ..] if is_keyword(flag, "PACKED") => (true, rest),
        _ => (false, args),
    };
    let [deadline, ids @ ..] = args else {
        return Err(DqError::BadApply("CLAIM needs a deadline".into()));
    };
    let deadline = parse_deadline(deadline)?;
    match (packed, ids) {
        (false, ids) => queue.claim_slots(now, ids, deadline),
        (true, [ids]) => queue.claim_slots(now, &unpack_ids(ids)?, deadline),
        (true, _) => return Err(DqError::BadApply("CLAIM PACKED takes one argument".into())),
    };
    Ok(())
}

/// What a blocked DQ.POP is waiting for.
struct Waiting {
    queue: Vec<u8>,
    count: usize,
    lease_ms: Option<u64>,
}

impl Waiter for Waiting {
    const POINT: &'static str = "pop wake";
    const TIMEOUT_POINT: &'static str = "pop timeout";

    fn try_now(&self, ctx: &Context) -> Result<Option<RedisValue>> {
        let name = RedisString::create_from_slice(ctx.ctx, &self.queue);
        let taken = try_pop(ctx, &name, self.count, self.lease_ms, Attempt::Wake, || {})?;
        Ok(taken.then_some(RedisValue::NoReply))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(args: &[&str]) -> Result<PopArgs<'static>> {
        parse(crate::grammar::args::leak_args(args))
    }

    #[test]
    fn defaults_and_options() {
        let a = p(&["q"]).unwrap();
        assert_eq!(
            (a.options.count, a.options.block, a.options.lease_ms),
            (1, None, None)
        );
        let a = p(&["q", "count", "100", "BLOCK", "0", "lease", "5"]).unwrap();
        assert_eq!(
            (a.options.count, a.options.block, a.options.lease_ms),
            (100, Some(0), Some(5))
        );
    }

    #[test]
    fn bad_input_names_the_problem() {
        let err = |args: &[&str]| p(args).unwrap_err().to_string();
        assert_eq!(
            err(&[]),
            "ERR wrong number of arguments for 'dq.pop' command"
        );
        assert_eq!(
            err(&["q", "COUNT", "0"]),
            "ERR COUNT must be an integer from 1 to 10000"
        );
        assert_eq!(
            err(&["q", "COUNT", "10001"]),
            "ERR COUNT must be an integer from 1 to 10000"
        );
        assert_eq!(
            err(&["q", "LEASE", "0"]),
            "ERR LEASE must be a positive duration: whole milliseconds such as 1500, or a whole number with a unit ms, s, m, h or d such as 30s, 5m or 7d"
        );
        assert_eq!(
            err(&["q", "BLOCK", "-1"]),
            "ERR BLOCK must be a duration: whole milliseconds such as 1500, or a whole number with a unit ms, s, m, h or d such as 30s, 5m or 7d"
        );
        assert_eq!(err(&["q", "BLOCK"]), "ERR BLOCK needs a value");
        assert_eq!(
            err(&["q", "COUNT", "1", "COUNT", "2"]),
            "ERR COUNT is given more than once"
        );
        assert_eq!(err(&["q", "NOWAIT"]), "ERR unknown option 'NOWAIT'");
    }
}
