//! What the scenarios say to servers beyond loading them: dq's POP, MPOP
//! and ACK and their replies, and the seeds' client-side design (a ZSET,
//! a take-due Lua script, a broker polling it every millisecond) that the
//! add and lifecycle scenarios measure dq against.

use std::thread;
use std::time::{Duration, Instant};

use dq_testkit::now_ms;
use redis::{Connection, Value};

use crate::harness::{BATCH, GIVE_UP};

/// The seeds' broker script: move up to ARGV[2] members due by ARGV[1]
/// from the ZSET to the LIST.
pub const TAKE_DUE: &str = r"
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, ARGV[2])
if #due > 0 then
  redis.call('ZREM', KEYS[1], unpack(due))
  redis.call('RPUSH', KEYS[2], unpack(due))
end
return #due";

/// What a POP took: (id, payload) pairs.
pub type Entries = Vec<(Vec<u8>, Vec<u8>)>;

/// `DQ.POP queue COUNT 100 BLOCK 100`.
pub fn dq_pop(con: &mut Connection, queue: &str) -> Entries {
    let reply: Value = redis::cmd("DQ.POP")
        .arg(queue)
        .arg("COUNT")
        .arg(BATCH)
        .arg("BLOCK")
        .arg(100)
        .query(con)
        .expect("DQ.POP");
    pop_entries(reply)
}

/// `DQ.MPOP n queue... COUNT 100 BLOCK 100`: the queue taken from (an
/// index into `queues`) and what it took.
pub fn dq_mpop(con: &mut Connection, queues: &[&str]) -> Option<(usize, Entries)> {
    let reply: Value = redis::cmd("DQ.MPOP")
        .arg(queues.len())
        .arg(queues)
        .arg("COUNT")
        .arg(BATCH)
        .arg("BLOCK")
        .arg(100)
        .query(con)
        .expect("DQ.MPOP");
    let Value::Array(pair) = reply else {
        return None; // nil: nothing was ready
    };
    match <[Value; 2]>::try_from(pair) {
        Ok([Value::BulkString(name), entries]) => {
            let at = queues
                .iter()
                .position(|q| q.as_bytes() == name)
                .expect("MPOP names one of its queues");
            Some((at, pop_entries(entries)))
        }
        other => panic!("not an MPOP reply: {other:?}"),
    }
}

/// DQ.POP's reply; nil is none.
pub fn pop_entries(reply: Value) -> Entries {
    let Value::Array(items) = reply else {
        return Vec::new();
    };
    let entry = |e: Value| match e {
        Value::Array(f) => match <[Value; 3]>::try_from(f) {
            Ok([Value::BulkString(id), Value::BulkString(p), _]) => (id, p),
            other => panic!("not a POP entry: {other:?}"),
        },
        other => panic!("not a POP entry: {other:?}"),
    };
    items.into_iter().map(entry).collect()
}

pub fn dq_ack(con: &mut Connection, queue: &str, ids: &[Vec<u8>]) -> usize {
    redis::cmd("DQ.ACK")
        .arg(queue)
        .arg(ids)
        .query(con)
        .expect("DQ.ACK")
}

/// How a consumer ends what it took.
#[derive(Clone, Copy)]
pub enum Finish {
    /// `DQ.ACK queue id...`
    Ack,
    /// `DQ.DONE queue id result ...`, each with this result.
    Done(&'static [u8]),
}

impl Finish {
    /// Ends the deliveries `ids` of `queue` in one command; how many were
    /// in flight.
    pub fn run(self, con: &mut Connection, queue: &str, ids: &[Vec<u8>]) -> usize {
        match self {
            Finish::Ack => dq_ack(con, queue, ids),
            Finish::Done(result) => {
                let mut cmd = redis::cmd("DQ.DONE");
                cmd.arg(queue);
                for id in ids {
                    cmd.arg(id).arg(result);
                }
                cmd.query(con).expect("DQ.DONE")
            }
        }
    }
}

/// The seeds' broker: runs TAKE_DUE every millisecond (at once again after
/// a full batch) until it has moved `n` members.
pub fn broker(con: &mut Connection, sha: &str, n: usize) {
    let give_up = Instant::now() + GIVE_UP;
    let mut moved = 0;
    while moved < n && Instant::now() < give_up {
        let batch: usize = redis::cmd("EVALSHA")
            .arg(sha)
            .arg(2)
            .arg("delayed")
            .arg("ready")
            .arg(now_ms())
            .arg(1000)
            .query(con)
            .expect("the take-due script");
        moved += batch;
        if batch < 1000 {
            thread::sleep(Duration::from_millis(1));
        }
    }
}
