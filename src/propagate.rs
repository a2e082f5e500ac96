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

use std::cell::RefCell;

use redis_module::{raw, Context, RedisString};

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

thread_local! {
    // Main thread only, as every caller.
    static CACHE: RefCell<Cache> = RefCell::new(Cache::default());
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
        // The vector goes back for the next write.
        let argv = std::mem::take(&mut self.argv);
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
    fn digits() {
        for n in [0, 7, 10, 1234567890123, u64::MAX] {
            assert_eq!(itoa_buf(n).digits(), n.to_string().as_bytes());
        }
    }
}
