//! Scenario 13, outcomes (issue 34): what keeping results costs. DONE
//! under RETAIN against a plain ACK; the bytes of a done message against a
//! delayed one; a million retentions running out at once; how soon DQ.WAIT
//! hears of a DONE.

use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use dq_testkit::{now_ms, Server};
use redis::{Connection, Value};

use super::lifecycle::dq_lifecycle_with;
use crate::clients::{pop_entries, Finish};
use crate::harness::{
    best_of, busy, drive, info_u64, payload, ping_probe, BenchServer, Config, Scale, BATCH,
    GIVE_UP, HOUR_MS,
};
use crate::report::{ms, percentile, Report, Row};

/// The 16-byte result every DONE of the benchmark keeps.
const RESULT: &[u8] = b"{\"status\":\"ok\"}!";

pub fn outcomes(cfg: &Config, s: &Scale, report: &mut Report) {
    throughput(cfg, s, report);
    memory(cfg, s, report);
    drops(cfg, s, report);
    wait_latency(cfg, s, report);
}

/// ADD→POP→DONE with RETAIN 1h and a 16-byte result, against ADD→POP→ACK
/// with no retention: the same load, rounds alternating.
fn throughput(cfg: &Config, s: &Scale, report: &mut Report) {
    let done = || {
        let server = Server::with_module(cfg);
        let _: () = redis::cmd("DQ.CONFIG")
            .arg(&["q", "SET", "RETAIN", "1h"])
            .query(&mut server.conn())
            .expect("DQ.CONFIG SET RETAIN");
        dq_lifecycle_with(&server, &["q"], s, Finish::Done(RESULT))
    };
    let ack = || dq_lifecycle_with(&Server::with_module(cfg), &["q"], s, Finish::Ack);
    let [done, ack] = best_of(s.rounds, [&done, &ack]);
    let figure = "ADD→POP→DONE (RETAIN 1h) vs ADD→POP→ACK";
    report.versus("13 outcomes", figure, done, ack, Some(0.85));
    report.detail(format!(
        "outcomes: the lifecycle's load (best of {} rounds of {} messages), each batch of \
         {BATCH} ended by one DQ.DONE with a {}-byte result each, kept for an hour, against \
         one DQ.ACK on a queue with no retention; {}",
        s.rounds,
        s.life_n,
        RESULT.len(),
        busy(&[("DONE", done), ("ACK", ack)])
    ));
}

/// Bytes per message: done (64-byte payload, 16-byte result, kept an hour)
/// against delayed, `used_memory` deltas on fresh servers.
fn memory(cfg: &Config, s: &Scale, report: &mut Report) {
    let n = s.mem_n;
    let id = |i: usize| format!("msg-{i:010}");
    let delayed = {
        let server = Server::with_module(cfg);
        let before = server.info_u64("memory", "used_memory");
        drive(server.conns(s.conns), n, |p, i| {
            p.cmd("DQ.ADD")
                .arg("q")
                .arg(payload(i))
                .arg("ID")
                .arg(id(i));
            p.arg("DELAY").arg(HOUR_MS);
        });
        (server.info_u64("memory", "used_memory") - before) as f64 / n as f64
    };
    let done = {
        let server = Server::with_module(cfg);
        let mut c = server.conn();
        let _: () = redis::cmd("DQ.CONFIG")
            .arg(&["q", "SET", "RETAIN", "1h"])
            .query(&mut c)
            .expect("DQ.CONFIG SET RETAIN");
        // The queue's settings and first allocations before the baseline.
        let before = server.info_u64("memory", "used_memory");
        drive(server.conns(s.conns), n, |p, i| {
            p.cmd("DQ.ADD")
                .arg("q")
                .arg(payload(i))
                .arg("ID")
                .arg(id(i));
        });
        finish_all(&mut c, n);
        assert_eq!(
            info_u64(&mut c, "dq", "dq_messages_done"),
            n as u64,
            "every message kept as done"
        );
        (server.info_u64("memory", "used_memory") - before) as f64 / n as f64
    };
    let ratio = done / delayed;
    report.push(Row {
        scenario: "13 outcomes",
        figure: format!("bytes/message done (16-byte result) vs delayed, {n}"),
        value: format!("{done:.0} B"),
        baseline: format!("{delayed:.0} B"),
        ratio: format!("{ratio:.2}×"),
        target: "≤ 1.3×".into(),
        met: Some(ratio <= 1.3),
    });
}

/// A million done messages whose retention runs out at once: the longest
/// tick and the longest PING round trip while the timer drops them.
fn drops(cfg: &Config, s: &Scale, report: &mut Report) {
    let n = s.burst_n;
    let server = Server::with_module(cfg);
    let mut c = server.conn();
    // Long enough that none runs out before the last is finished; then a
    // DEBUG SLEEP lets them all fall due together, as a server that was
    // stopped (or a replica promoted) finds them.
    let retain_ms: u64 = if s.burst_n > 200_000 { 60_000 } else { 20_000 };
    let _: () = redis::cmd("DQ.CONFIG")
        .arg("q")
        .arg("SET")
        .arg("RETAIN")
        .arg(retain_ms)
        .query(&mut c)
        .expect("DQ.CONFIG SET RETAIN");
    let first = now_ms();
    drive(server.conns(s.conns), n, |p, i| {
        p.cmd("DQ.ADD").arg("q").arg(payload(i));
    });
    finish_all(&mut c, n);
    let last = now_ms();
    assert!(
        last < first + retain_ms,
        "outcomes drops: finishing took longer than the retention"
    );
    let ticks_before = info_u64(&mut c, "dq", "dq_timer_ticks");
    let longest_before = info_u64(&mut c, "dq", "dq_longest_tick_us");
    let sleep_s = (last + retain_ms + 100 - now_ms()) as f64 / 1000.0;
    let _: () = redis::cmd("DEBUG")
        .arg("SLEEP")
        .arg(format!("{sleep_s:.3}"))
        .query(&mut c)
        .expect("DEBUG SLEEP");
    let stop = AtomicBool::new(false);
    let mut probe = server.conn();
    let started = Instant::now();
    let ((mut pings_us, realtime), took) = thread::scope(|sc| {
        let pinger = ping_probe(sc, &mut probe, &stop);
        while info_u64(&mut c, "dq", "dq_messages_done") > 0 && started.elapsed() < GIVE_UP {
            thread::sleep(Duration::from_millis(1));
        }
        let took = started.elapsed();
        stop.store(true, Relaxed);
        (pinger.join().expect("the PING probe"), took)
    });
    assert_eq!(
        info_u64(&mut c, "dq", "dq_messages_done"),
        0,
        "outcomes drops: not every done message was dropped"
    );
    let longest_tick = info_u64(&mut c, "dq", "dq_longest_tick_us") as f64;
    let ticks = info_u64(&mut c, "dq", "dq_timer_ticks") - ticks_before;
    pings_us.sort_unstable();
    let longest_ping = percentile(&pings_us, 1.0);
    let scenario = "13 outcomes";
    let figure = format!("longest tick, {n} retentions out at once");
    report.figure(
        scenario,
        &figure,
        ms(longest_tick),
        Some(("≤ 5 ms", longest_tick <= 5e3)),
    );
    report.figure(
        scenario,
        "longest PING round trip meanwhile",
        ms(longest_ping),
        Some(("≤ 5 ms", longest_ping <= 5e3)),
    );
    report.detail(format!(
        "outcomes drops: {n} done messages (RETAIN {retain_ms} ms) all past their retention \
         after a DEBUG SLEEP; the timer dropped them in {ticks} ticks over {:.0} ms; the \
         longest tick before was {} µs; {} PINGs{}",
        took.as_secs_f64() * 1e3,
        longest_before,
        pings_us.len(),
        if realtime {
            " from a real-time thread"
        } else {
            ""
        }
    ));
}

/// How soon a client blocked in DQ.WAIT hears of a DONE: from DONE's reply
/// to WAIT's reply, each time on an idle server.
fn wait_latency(cfg: &Config, s: &Scale, report: &mut Report) {
    let rounds = if s.burst_n > 200_000 { 5_000 } else { 1_000 };
    let server = Server::with_module(cfg);
    let _: () = redis::cmd("DQ.CONFIG")
        .arg(&["q", "SET", "RETAIN", "1h"])
        .query(&mut server.conn())
        .expect("DQ.CONFIG SET RETAIN");
    let latencies_us = wake_latency(
        &server,
        rounds,
        |c, round| {
            let id = format!("w{round}");
            let _: Value = redis::cmd("DQ.ADD")
                .arg(&["q", "x", "ID", &id])
                .query(c)
                .expect("DQ.ADD");
            let _: Value = redis::cmd("DQ.POP").arg("q").query(c).expect("DQ.POP");
            let mut wait = redis::cmd("DQ.WAIT");
            wait.arg(&["q", &id, "BLOCK", "0"]);
            wait
        },
        |c, round| {
            let _: usize = redis::cmd("DQ.DONE")
                .arg("q")
                .arg(format!("w{round}"))
                .arg(RESULT)
                .query(c)
                .expect("DQ.DONE");
        },
    );
    let p50 = percentile(&latencies_us, 0.5);
    let p99 = percentile(&latencies_us, 0.99);
    let scenario = "13 outcomes";
    report.figure(
        scenario,
        "DQ.WAIT woken by DONE, p99 after DONE's reply",
        ms(p99.max(0.0)),
        Some(("≤ 1 ms", p99 <= 1e3)),
    );
    report.detail(format!(
        "outcomes wait: {rounds} rounds of one waiter blocked in DQ.WAIT, then DONE of its \
         message on another connection; WAIT's reply came {p50:.0} µs (p50) and {p99:.0} µs \
         (p99) after DONE's (negative: before it; both are written in the same turn of the \
         server's event loop), {:.0} µs at most",
        percentile(&latencies_us, 1.0)
    ));
}

/// How soon a blocked client hears of a write, `rounds` times on an idle
/// server: `prepare(c, round)` sets the round up and gives the blocking
/// command, which a thread sends on its own connection; once it blocks,
/// `trigger(c, round)` writes. Returns the µs from the trigger's reply to
/// the blocked command's in each round (negative: it came first), sorted.
pub fn wake_latency(
    server: &Server,
    rounds: usize,
    prepare: impl Fn(&mut Connection, usize) -> redis::Cmd,
    trigger: impl Fn(&mut Connection, usize),
) -> Vec<i64> {
    let mut c = server.conn();
    let (ask, asked) = mpsc::channel::<redis::Cmd>();
    let (tell, told) = mpsc::channel::<Instant>();
    let mut blocked = server.conn();
    let mut latencies_us = Vec::with_capacity(rounds);
    thread::scope(|sc| {
        sc.spawn(move || {
            for command in asked {
                let reply: Value = command.query(&mut blocked).expect("the blocking command");
                let at = Instant::now();
                assert!(matches!(reply, Value::Array(_)), "{reply:?}");
                tell.send(at).expect("the main thread listens");
            }
        });
        for round in 0..rounds {
            ask.send(prepare(&mut c, round))
                .expect("the blocked thread listens");
            wait_blocked(&mut c);
            trigger(&mut c, round);
            let triggered_at = Instant::now();
            let woke_at = told.recv().expect("the blocked command answers");
            // Negative when the blocked reply was read first: both replies
            // are written in the same turn of the server's event loop.
            let after = match woke_at.checked_duration_since(triggered_at) {
                Some(d) => d.as_micros() as i64,
                None => -(triggered_at.duration_since(woke_at).as_micros() as i64),
            };
            latencies_us.push(after);
        }
        drop(ask);
    });
    latencies_us.sort_unstable();
    latencies_us
}

/// Takes the `n` messages of queue `q` and finishes each with DONE and the
/// result, 10000 at a time.
fn finish_all(c: &mut Connection, n: usize) {
    let mut finished = 0;
    while finished < n {
        let popped: Value = redis::cmd("DQ.POP")
            .arg(&["q", "COUNT", "10000", "LEASE", "1h"])
            .query(c)
            .expect("DQ.POP");
        let ids: Vec<Vec<u8>> = pop_entries(popped).into_iter().map(|e| e.0).collect();
        assert!(
            !ids.is_empty(),
            "outcomes: only {finished} of {n} delivered"
        );
        finished += Finish::Done(RESULT).run(c, "q", &ids);
    }
}

/// Waits until one client is blocked (the waiter).
fn wait_blocked(c: &mut Connection) {
    let give_up = Instant::now() + GIVE_UP;
    while info_u64(c, "clients", "blocked_clients") != 1 {
        assert!(Instant::now() < give_up, "the waiter never blocked");
        thread::yield_now();
    }
}
