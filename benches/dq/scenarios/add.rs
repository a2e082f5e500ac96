//! Scenario 1, add throughput: DQ.ADD against raw ZADD, Redisson's Lua
//! add and the seeds' ZADD + take-due broker, each on a fresh server.

use std::thread;
use std::time::Instant;

use dq_testkit::{now_ms, Server};

use crate::clients::{broker, TAKE_DUE};
use crate::harness::{
    best_of, busy, drive, payload, timed, BenchServer, Config, Run, Scale, BATCH, HOUR_MS,
};
use crate::report::Report;

/// Redisson's RDelayedQueue offer, as the issue quotes it.
const LUA_ADD: &str = r"
redis.call('ZADD', KEYS[1], ARGV[1], ARGV[2])
redis.call('RPUSH', KEYS[2], ARGV[2])
local first = redis.call('ZRANGE', KEYS[1], 0, 0)
if first[1] == ARGV[2] then redis.call('PUBLISH', KEYS[3], ARGV[1]) end
return 1";

/// DQ.ADD of `s.add_n` messages to one queue on a fresh server with the
/// module, after `delay` ms (None: ready at once).
pub fn dq_add_run(cfg: &Config, s: &Scale, delay: Option<u64>) -> Run {
    let n = s.add_n;
    let server = Server::with_module(cfg);
    let conns = server.conns(s.conns);
    timed(&server, n, || {
        drive(conns, n, |p, i| {
            p.cmd("DQ.ADD").arg("q").arg(payload(i));
            if let Some(d) = delay {
                p.arg("DELAY").arg(d);
            }
        })
    })
}

/// Raw ZADD of `s.add_n` payloads scored `due` to one ZSET on `server`.
pub fn zadd_run(server: Server, s: &Scale, due: u64) -> Run {
    let n = s.add_n;
    let conns = server.conns(s.conns);
    timed(&server, n, || {
        drive(conns, n, |p, i| {
            p.cmd("ZADD").arg("delayed").arg(due).arg(payload(i));
        })
    })
}

/// Add throughput: the same connections and pipeline depth for each way of
/// scheduling a message, each run on a fresh server.
pub fn add_throughput(cfg: &Config, s: &Scale, report: &mut Report) {
    let n = s.add_n;
    let due = now_ms() + HOUR_MS;
    let dq_add = |delay: Option<u64>| dq_add_run(cfg, s, delay);
    let zadd = |server: Server| zadd_run(server, s, due);
    let lua = || {
        let server = Server::plain(cfg);
        let sha = server.load_script(LUA_ADD);
        let conns = server.conns(s.conns);
        timed(&server, n, || {
            drive(conns, n, |p, i| {
                let keys = ["timeout", "queue", "channel"];
                p.cmd("EVALSHA").arg(&sha).arg(3).arg(&keys);
                p.arg(due).arg(payload(i));
            })
        })
    };
    // The seeds' way to a ready message: ZADD due now, and the broker's
    // take-due script moving it to the LIST.
    let seeds = || {
        let server = Server::plain(cfg);
        let sha = server.load_script(TAKE_DUE);
        let (mut broker_con, conns) = (server.conn(), server.conns(s.conns));
        timed(&server, n, || {
            let start = Instant::now();
            thread::scope(|sc| {
                sc.spawn(|| broker(&mut broker_con, &sha, n));
                drive(conns, n, |p, i| {
                    p.cmd("ZADD").arg("delayed").arg(now_ms()).arg(payload(i));
                });
            });
            start.elapsed()
        })
    };
    let [dq_delayed, zadd_plain, zadd_dq, lua, dq_ready, seeds] = best_of(
        s.rounds,
        [
            &|| dq_add(Some(HOUR_MS)),
            &|| zadd(Server::plain(cfg)),
            &|| zadd(Server::with_module(cfg)),
            &lua,
            &|| dq_add(None),
            &seeds,
        ],
    );
    let scenario = "1 add";
    let figure = "DQ.ADD DELAY 1h vs raw ZADD";
    report.versus(scenario, figure, dq_delayed, zadd_plain, Some(1.0));
    let figure = "DQ.ADD DELAY 1h vs Redisson Lua add";
    report.versus(scenario, figure, dq_delayed, lua, Some(2.5));
    let figure = "DQ.ADD, ready at once, vs ZADD + take-due Lua";
    report.versus(scenario, figure, dq_ready, seeds, None);
    let figure = "raw ZADD with dq loaded vs without";
    report.versus(scenario, figure, zadd_dq, zadd_plain, None);
    report.detail(format!(
        "add: best of {} rounds of {n} messages per variant, {} connections, pipelines of \
         {BATCH}, 64-byte payloads; baselines on a server without the module; ZADD + take-due \
         counts until the broker has moved every message to the LIST; {}",
        s.rounds,
        s.conns,
        busy(&[
            ("DQ.ADD DELAY", dq_delayed),
            ("DQ.ADD", dq_ready),
            ("ZADD", zadd_plain),
            ("ZADD with dq", zadd_dq),
            ("Lua add", lua),
            ("ZADD + take-due", seeds)
        ])
    ));
    report.add_rate = Some(dq_delayed.rate);
}
