//! Scenario 14, events (issue 35): what the event log costs. The
//! lifecycle with EVENTS 10000 against none; the bytes of a kept event; how
//! soon a blocked DQ.EVENTS reader hears of an ADD; a million promotions
//! written as a million `ready` events.

use dq_testkit::Server;
use redis::{Connection, Value};

use super::burst::burst_on;
use super::lifecycle::dq_lifecycle_with;
use super::outcomes::wake_latency;
use crate::clients::Finish;
use crate::harness::{best_of, busy, drive, payload, BenchServer, Config, Scale};
use crate::report::{ms, percentile, Report, Row};

const SCENARIO: &str = "14 events";

pub fn events(cfg: &Config, s: &Scale, report: &mut Report) {
    throughput(cfg, s, report);
    memory(cfg, s, report);
    reader_latency(cfg, s, report);
    promotions(cfg, s, report);
}

fn keep_events(c: &mut Connection, queue: &str, n: usize) {
    let _: () = redis::cmd("DQ.CONFIG")
        .arg(queue)
        .arg("SET")
        .arg("EVENTS")
        .arg(n)
        .query(c)
        .expect("DQ.CONFIG SET EVENTS");
}

/// `last-seq` of a DQ.EVENTS reply.
fn last_seq(c: &mut Connection, queue: &str) -> u64 {
    let reply: Value = redis::cmd("DQ.EVENTS")
        .arg(queue)
        .arg("COUNT")
        .arg(1)
        .query(c)
        .expect("DQ.EVENTS");
    match reply {
        Value::Array(parts) => match parts.first() {
            Some(Value::Int(n)) => *n as u64,
            other => panic!("DQ.EVENTS last-seq: {other:?}"),
        },
        other => panic!("DQ.EVENTS: {other:?}"),
    }
}

/// ADD→POP→ACK with EVENTS 10000 against EVENTS unset, rounds alternating.
fn throughput(cfg: &Config, s: &Scale, report: &mut Report) {
    let logged = || {
        let server = Server::with_module(cfg);
        keep_events(&mut server.conn(), "q", 10_000);
        let run = dq_lifecycle_with(&server, &["q"], s, Finish::Ack);
        // ADD, delivered and done for each message, at least.
        assert!(last_seq(&mut server.conn(), "q") >= 3 * s.life_n as u64);
        run
    };
    let plain = || dq_lifecycle_with(&Server::with_module(cfg), &["q"], s, Finish::Ack);
    let [logged, plain] = best_of(s.rounds, [&logged, &plain]);
    report.versus(
        SCENARIO,
        "ADD→POP→ACK, EVENTS 10000 vs unset",
        logged,
        plain,
        Some(0.85),
    );
    report.detail(format!(
        "events: the lifecycle's load (best of {} rounds of {} messages) on a queue keeping \
         its last 10000 events against one keeping none; {}",
        s.rounds,
        s.life_n,
        busy(&[("EVENTS 10000", logged), ("unset", plain)])
    ));
}

/// Bytes per kept event: the same ADDs (16-byte ids) on a queue keeping
/// their `added` events and on one keeping none, `used_memory` deltas on
/// fresh servers.
fn memory(cfg: &Config, s: &Scale, report: &mut Report) {
    let n = s.mem_n;
    let used = |events: bool| {
        let server = Server::with_module(cfg);
        if events {
            keep_events(&mut server.conn(), "q", n);
        } else {
            // The same first allocations (the queue's settings) before
            // the baseline.
            let _: () = redis::cmd("DQ.CONFIG")
                .arg(&["q", "SET", "MAXATTEMPTS", "5"])
                .query(&mut server.conn())
                .expect("DQ.CONFIG");
        }
        let before = server.info_u64("memory", "used_memory");
        drive(server.conns(s.conns), n, |p, i| {
            p.cmd("DQ.ADD")
                .arg("q")
                .arg(payload(i))
                .arg("ID")
                .arg(format!("msg-{i:012}"));
        });
        if events {
            assert_eq!(last_seq(&mut server.conn(), "q"), n as u64);
        }
        server.info_u64("memory", "used_memory") - before
    };
    let (logged, plain) = (used(true), used(false));
    let per_event = logged.saturating_sub(plain) as f64 / n as f64;
    report.push(Row {
        scenario: SCENARIO,
        figure: format!("bytes per kept event (16-byte id, no detail), {n}"),
        value: format!("{per_event:.0} B"),
        baseline: format!("{:.0} B/message without", plain as f64 / n as f64),
        ratio: String::new(),
        target: "≤ 80 B".into(),
        met: Some(per_event <= 80.0),
    });
}

/// How soon a reader blocked in DQ.EVENTS hears of an ADD: from ADD's
/// reply to the reader's, each time on an idle server.
fn reader_latency(cfg: &Config, s: &Scale, report: &mut Report) {
    let rounds = if s.burst_n > 200_000 { 5_000 } else { 1_000 };
    let server = Server::with_module(cfg);
    keep_events(&mut server.conn(), "q", 10_000);
    let latencies_us = wake_latency(
        &server,
        rounds,
        |c, _| {
            let mut read = redis::cmd("DQ.EVENTS");
            read.arg("q")
                .arg("AFTER")
                .arg(last_seq(c, "q"))
                .arg("BLOCK")
                .arg(0);
            read
        },
        |c, round| {
            let _: Value = redis::cmd("DQ.ADD")
                .arg("q")
                .arg("x")
                .arg("ID")
                .arg(format!("e{round}"))
                .query(c)
                .expect("DQ.ADD");
        },
    );
    let p50 = percentile(&latencies_us, 0.5);
    let p99 = percentile(&latencies_us, 0.99);
    report.figure(
        SCENARIO,
        "DQ.EVENTS BLOCK woken by ADD, p99 after ADD's reply",
        ms(p99.max(0.0)),
        Some(("≤ 1 ms", p99 <= 1e3)),
    );
    report.detail(format!(
        "events reader: {rounds} rounds of one reader blocked in DQ.EVENTS AFTER the last seq, \
         then an ADD on another connection; the reader's reply came {p50:.0} µs (p50) and \
         {p99:.0} µs (p99) after ADD's (negative: before it), {:.0} µs at most",
        percentile(&latencies_us, 1.0)
    ));
}

/// The burst of scenario 4 on a queue keeping as many events as it has
/// messages: each promotion writes its `ready` event inside the tick.
fn promotions(cfg: &Config, s: &Scale, report: &mut Report) {
    let n = s.burst_n;
    let server = burst_on(cfg, s, report, SCENARIO, |c| keep_events(c, "q", n));
    assert_eq!(
        last_seq(&mut server.conn(), "q"),
        2 * n as u64,
        "an added and a ready event per message"
    );
}
