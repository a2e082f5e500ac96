//! What replicas and the AOF receive for a write: ONE deterministic
//! command, `DQ.APPLY queue now max-attempts VERB args...`.
//!
//! `now` is the master's clock when the write ran, so every time a command
//! derives from it (a DELAY, a TTL, a lease, when a message became ready)
//! comes out the same on a replica whose clock differs; `max-attempts` is
//! the master's `dq.max-attempts`, the one module setting a replay decides
//! by (a retry's delay and a lease's length travel as values). The verb
//! and its arguments are the command's own grammar, with generated ids
//! made explicit, or the outcome the master chose: POP travels as CLAIM of
//! the ids it leased (as XREADGROUP travels as XCLAIM), a NACK as the delay
//! it chose, a timer tick as how much of each kind of work it did.
//! `commands/apply.rs` replays them.
//!
//! Each command builds its verb and reads it back in its own file
//! (`commands/add.rs` has ADD, `commands/pop.rs` CLAIM, ...); the timer's
//! TICK is built and read back here, beside the builder they all use.

use std::cell::{Cell, RefCell};
use std::os::raw::c_int;

use redis_module::{raw, Context, ModuleOptions, RedisString, RedisValue};

use crate::core::error::{DqError, Result};
use crate::core::queue::{codec, Queue, Runs, TickWork};
use crate::grammar::args::parse_in_range;
use crate::server::clock::now_ms;
use crate::server::settings;

/// Valkey 8.1's `VALKEYMODULE_OPTIONS_SKIP_COMMAND_VALIDATION`: Replicate
/// and EmitAOF skip looking up the command by name (about 1.5k
/// instructions a call). dq only ever propagates its own DQ.APPLY,
/// registered at load, so the lookup can only succeed.
const SKIP_COMMAND_VALIDATION: c_int = 1 << 4;

/// The module options dq sets: keys are signalled as modified only when
/// really written; a short or bad read while loading a queue is an error
/// dq handles (RESTORE answers it), not the end of the server; and, where
/// the server offers it, propagation without the command lookup. One call:
/// each replaces the options set before. Returns whether the lookup is
/// skipped.
pub fn set_module_options(ctx: &Context) -> bool {
    let mut options =
        (ModuleOptions::NO_IMPLICIT_SIGNAL_MODIFIED | ModuleOptions::HANDLE_IO_ERRORS).bits();
    let skip = server_skips_command_validation(ctx);
    if skip {
        options |= SKIP_COMMAND_VALIDATION;
    }
    // SAFETY: OnLoad, with the module's own context.
    unsafe { raw::RedisModule_SetModuleOptions.unwrap()(ctx.ctx, options) };
    SKIPS_LOOKUP.with(|s| s.set(skip));
    skip
}

/// Whether this server is Valkey 8.1 or later, where the option exists.
/// (Redis gives no such option as of 8.0, and the bit may mean something
/// else to a later Redis: it is only set where it is known.)
fn server_skips_command_validation(ctx: &Context) -> bool {
    let Ok(RedisValue::SimpleString(info) | RedisValue::BulkString(info)) =
        ctx.call("INFO", &["server"])
    else {
        return false;
    };
    valkey_at_least(&info, (8, 1))
}

/// Whether INFO's `valkey_version` is at least `least`.
fn valkey_at_least(info: &str, least: (u32, u32)) -> bool {
    info.lines()
        .find_map(|l| l.strip_prefix("valkey_version:"))
        .and_then(|v| {
            let mut parts = v.trim().split('.').map(|p| p.parse::<u32>().ok());
            Some((parts.next()??, parts.next()??))
        })
        .is_some_and(|version| version >= least)
}

/// Whether propagation skips the command lookup (INFO dq says).
pub fn skips_lookup() -> bool {
    SKIPS_LOOKUP.with(Cell::get)
}

/// Strings every DQ.APPLY repeats, made once: the verbs, the current
/// `dq.max-attempts` and the current millisecond (a pipeline of writes
/// shares it). The server takes its own reference to each string it
/// propagates and never changes a string it shares.
#[derive(Default)]
struct Cache {
    verbs: Vec<(&'static str, RedisString)>,
    max_attempts: Option<(u32, RedisString)>,
    now: Option<(u64, RedisString)>,
    /// The argument vector, reused.
    argv: Vec<*mut raw::RedisModuleString>,
}

/// Arguments the cached vector keeps room for between writes.
const KEPT_ARGS: usize = 256;

thread_local! {
    // Main thread only, as every caller.
    static CACHE: RefCell<Cache> = RefCell::new(Cache::default());
    static SKIPS_LOOKUP: Cell<bool> = const { Cell::new(false) };
}

/// A string made without a context: it lives as long as the cache.
fn unmanaged(bytes: &[u8]) -> RedisString {
    RedisString::create_from_slice(std::ptr::null_mut(), bytes)
}

fn cached<K: PartialEq + Copy>(
    slot: &mut Option<(K, RedisString)>,
    key: K,
    make: impl FnOnce() -> Vec<u8>,
) -> *mut raw::RedisModuleString {
    match slot {
        Some((k, s)) if *k == key => s.inner,
        _ => {
            let s = unmanaged(&make());
            let inner = s.inner;
            *slot = Some((key, s));
            inner
        }
    }
}

/// One DQ.APPLY being built. Arguments the client sent are passed on
/// without copying.
pub struct Apply<'a> {
    ctx: &'a Context,
    /// Strings made here, kept alive until sent.
    owned: Vec<RedisString>,
    argv: Vec<*mut raw::RedisModuleString>,
}

/// `TICK ttl-expired leases-expired promoted [GROUPS n group...] [RUNS
/// name next skipped n at...]...`: what one timer tick (or a master's
/// takeover) did to one queue, phase by phase: how many TTLs, leases and
/// promotions, the groups it looked at again (a pause's end, GROUPRATE's
/// window), then for
/// each schedule the run times it made, the runs it skipped and its next
/// run time (`-` for none). Replayed as exactly that much work at the
/// master's `now`, it makes the same changes (see `Queue::replay_tick`).
pub fn tick(ctx: &Context, queue: &RedisString, now: u64, work: &TickWork) {
    let mut apply = Apply::new(ctx, queue, now, settings::max_attempts(), "TICK");
    apply
        .number(work.ttl_expired as u64)
        .number(work.leases_expired as u64)
        .number(work.promoted as u64);
    // A part of its own, so that a TICK written before groups had wake-ups
    // still reads.
    if !work.groups_woken.is_empty() {
        apply
            .bytes(b"GROUPS")
            .number(work.groups_woken.len() as u64);
        for name in &work.groups_woken {
            apply.bytes(name);
        }
    }
    for runs in &work.runs {
        apply.bytes(b"RUNS").bytes(&runs.name);
        match runs.next {
            Some(at) => apply.number(at),
            None => apply.bytes(b"-"),
        };
        apply.number(runs.skipped).number(runs.made.len() as u64);
        for &at in &runs.made {
            apply.number(at);
        }
    }
    apply.send();
}

/// TICK's arguments, read back.
pub fn parse_tick(args: &[&[u8]]) -> Result<TickWork> {
    let bad = |why: &str| DqError::BadApply(format!("TICK {why}"));
    let [ttl, leases, promoted, rest @ ..] = args else {
        return Err(bad("needs three counts"));
    };
    let mut rest = rest;
    let count = |v: &[u8]| parse_in_range("count", "a count", v, 0, i64::MAX).map(|n| n as u64);
    let mut work = TickWork {
        ttl_expired: count(ttl)? as usize,
        leases_expired: count(leases)? as usize,
        promoted: count(promoted)? as usize,
        groups_woken: Vec::new(),
        runs: Vec::new(),
    };
    if let [tag, n, more @ ..] = rest {
        if tag.eq_ignore_ascii_case(b"GROUPS") {
            let n = count(n)? as usize;
            if more.len() < n {
                return Err(bad("lists fewer groups than it says"));
            }
            work.groups_woken = more[..n].iter().map(|&g| g.into()).collect();
            rest = &more[n..];
        }
    }
    while let [tag, name, next, skipped, n, more @ ..] = rest {
        let (tag, name, next): (&[u8], &[u8], &[u8]) = (tag, name, next);
        if !tag.eq_ignore_ascii_case(b"RUNS") {
            return Err(bad("has an unknown part"));
        }
        let n = count(n)? as usize;
        if more.len() < n {
            return Err(bad("lists fewer run times than it says"));
        }
        let made = more[..n]
            .iter()
            .map(|t| count(t))
            .collect::<Result<Vec<u64>>>()?;
        work.runs.push(Runs {
            name: name.to_vec(),
            made,
            skipped: count(skipped)?,
            next: match next {
                b"-" => None,
                at => Some(count(at)?),
            },
        });
        rest = &more[n..];
    }
    if !rest.is_empty() {
        return Err(bad("ends with an incomplete part"));
    }
    Ok(work)
}

/// The queue's whole value, as the AOF rewrite writes it (`LOAD header
/// chunks...`): what replicas and the AOF are sent when a panic stopped a
/// change that they may have been sent only part of, or none.
pub fn load(ctx: &Context, name: &RedisString, queue: &Queue) {
    let mut apply = Apply::new(ctx, name, now_ms(), settings::max_attempts(), "LOAD");
    apply.bytes(&codec::header(queue));
    codec::record_chunks(queue, |chunk| {
        apply.bytes(chunk);
    });
    apply.send();
}

/// `DEL key`, propagated as it is: the importer of the multi-key layout
/// deletes the old keys it converted.
pub fn delete(ctx: &Context, key: &[u8]) {
    // SAFETY: main thread, live context; "b" takes (pointer, length) of a
    // buffer that outlives the call.
    unsafe {
        raw::RedisModule_Replicate.unwrap()(
            ctx.ctx,
            c"DEL".as_ptr(),
            c"b".as_ptr(),
            key.as_ptr(),
            key.len(),
        );
    }
}

impl<'a> Apply<'a> {
    pub fn new(
        ctx: &'a Context,
        queue: &'a RedisString,
        now: u64,
        max_attempts: u32,
        verb: &'static str,
    ) -> Apply<'a> {
        let mut argv = CACHE.with(|c| std::mem::take(&mut c.borrow_mut().argv));
        argv.clear();
        argv.push(queue.inner);
        CACHE.with(|c| {
            let mut c = c.borrow_mut();
            argv.push(cached(&mut c.now, now, || now.to_string().into_bytes()));
            argv.push(cached(&mut c.max_attempts, max_attempts, || {
                max_attempts.to_string().into_bytes()
            }));
            let verb_string = match c.verbs.iter().find(|(v, _)| *v == verb) {
                Some((_, s)) => s.inner,
                None => {
                    let s = unmanaged(verb.as_bytes());
                    let inner = s.inner;
                    c.verbs.push((verb, s));
                    inner
                }
            };
            argv.push(verb_string);
        });
        Apply {
            ctx,
            owned: Vec::new(),
            argv,
        }
    }

    /// An argument the client sent.
    pub fn arg(&mut self, s: &'a RedisString) -> &mut Self {
        self.argv.push(s.inner);
        self
    }

    pub fn args(&mut self, args: &'a [RedisString]) -> &mut Self {
        self.argv.extend(args.iter().map(|s| s.inner));
        self
    }

    pub fn bytes(&mut self, b: &[u8]) -> &mut Self {
        let s = RedisString::create_from_slice(self.ctx.ctx, b);
        self.argv.push(s.inner);
        self.owned.push(s);
        self
    }

    pub fn number(&mut self, n: u64) -> &mut Self {
        let mut buf = itoa_buf(n);
        let digits = buf.digits();
        let s = RedisString::create_from_slice(self.ctx.ctx, digits);
        self.argv.push(s.inner);
        self.owned.push(s);
        self
    }

    pub fn send(&mut self) {
        // SAFETY: main thread, live context; "v" takes (array, length) of
        // strings that stay alive for the call (the server takes its own
        // references).
        unsafe {
            raw::RedisModule_Replicate.unwrap()(
                self.ctx.ctx,
                c"DQ.APPLY".as_ptr(),
                c"v".as_ptr(),
                self.argv.as_mut_ptr(),
                self.argv.len(),
            );
        }
    }
}

impl Drop for Apply<'_> {
    fn drop(&mut self) {
        // The vector goes back for the next write, but not the room a
        // POP or ACK of thousands of ids needed once: that would stay
        // allocated for the life of the server.
        let mut argv = std::mem::take(&mut self.argv);
        if argv.capacity() > KEPT_ARGS {
            argv = Vec::new();
        }
        CACHE.with(|c| c.borrow_mut().argv = argv);
    }
}

/// Decimal digits of a u64 without a heap allocation.
struct Digits {
    buf: [u8; 20],
    start: usize,
}

impl Digits {
    fn digits(&mut self) -> &[u8] {
        &self.buf[self.start..]
    }
}

fn itoa_buf(mut n: u64) -> Digits {
    let mut d = Digits {
        buf: [0; 20],
        start: 20,
    };
    loop {
        d.start -= 1;
        d.buf[d.start] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            return d;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tick_counts_read_back() {
        let work = parse_tick(&[b"1", b"2", b"3"]).unwrap();
        assert_eq!(
            (work.ttl_expired, work.leases_expired, work.promoted),
            (1, 2, 3)
        );
        assert!(parse_tick(&[b"1", b"2"]).is_err());
        assert!(parse_tick(&[b"1", b"-2", b"3"]).is_err());
    }

    #[test]
    fn only_valkey_8_1_and_later_skip_the_lookup() {
        let info = |v: &str| format!("# Server\r\nredis_version:7.2.4\r\n{v}\r\nos:Linux\r\n");
        assert!(valkey_at_least(&info("valkey_version:8.1.1"), (8, 1)));
        assert!(valkey_at_least(&info("valkey_version:9.0.0"), (8, 1)));
        assert!(!valkey_at_least(&info("valkey_version:8.0.1"), (8, 1)));
        assert!(!valkey_at_least(&info("server_name:redis"), (8, 1)));
        assert!(!valkey_at_least(&info("valkey_version:x.y"), (8, 1)));
    }

    #[test]
    fn digits() {
        for n in [0, 7, 10, 1234567890123, u64::MAX] {
            assert_eq!(itoa_buf(n).digits(), n.to_string().as_bytes());
        }
    }
}
