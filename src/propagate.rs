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

use redis_module::{raw, Context, RedisString};

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
        verb: &str,
    ) -> Apply<'a> {
        let mut apply = Apply {
            ctx,
            owned: Vec::with_capacity(8),
            argv: Vec::with_capacity(16),
        };
        apply.arg(queue);
        apply.number(now);
        apply.number(max_attempts.into());
        apply.bytes(verb.as_bytes());
        apply
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
