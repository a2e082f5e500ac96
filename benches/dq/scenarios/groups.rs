//! Scenario 15, groups (issue 36): what groups cost and how exact they
//! are. POP+ACK under ORDER FAIR against ORDER PRIORITY over the same
//! grouped messages; GROUPRATE's busiest window, from the server's own
//! delivery times; the share one huge group takes beside 99 small ones
//! under ORDER FAIR; the bytes of a grouped message; DQ.GROUPS' server time
//! per call over 100,000 groups.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::thread;
use std::time::{Duration, Instant};

use dq_testkit::Server;
use redis::{Connection, Value};

use super::flow::command_calls;
use crate::clients::{pop_entries, Finish};
use crate::harness::{
    best_of, busy, drive, info, payload, timed, BenchServer, Config, Scale, GIVE_UP,
};
use crate::report::{Report, Row};

const SCENARIO: &str = "15 groups";

pub fn groups(cfg: &Config, s: &Scale, report: &mut Report) {
    fair_throughput(cfg, s, report);
    group_rate(cfg, s, report);
    fairness(cfg, s, report);
    memory_and_listing(cfg, s, report);
}

fn config(c: &mut Connection, pairs: &[&str]) {
    let _: () = redis::cmd("DQ.CONFIG")
        .arg("q")
        .arg("SET")
        .arg(pairs)
        .query(c)
        .expect("DQ.CONFIG SET");
}

/// Adds `n` ready messages to `q`, message `i` in the group `group(i)`.
fn preload(server: &Server, s: &Scale, n: usize, group: impl Fn(usize) -> String + Sync) {
    drive(server.conns(s.conns), n, |p, i| {
        p.cmd("DQ.ADD")
            .arg("q")
            .arg(payload(i))
            .arg("ID")
            .arg(format!("m{i}"))
            .arg("GROUP")
            .arg(group(i));
    });
}

/// POP COUNT 100 and one ACK per batch, by the consumers, until all `n`
/// are acknowledged.
fn drain(server: &Server, s: &Scale, n: usize) -> crate::harness::Run {
    let acked = AtomicUsize::new(0);
    let consumers = server.conns(s.consumers);
    timed(server, n, || {
        let start = Instant::now();
        thread::scope(|sc| {
            for mut con in consumers {
                let acked = &acked;
                sc.spawn(move || {
                    while acked.load(Relaxed) < n && start.elapsed() < GIVE_UP {
                        let reply: Value = redis::cmd("DQ.POP")
                            .arg(&["q", "COUNT", "100"])
                            .query(&mut con)
                            .expect("DQ.POP");
                        let ids: Vec<_> = pop_entries(reply).into_iter().map(|e| e.0).collect();
                        if !ids.is_empty() {
                            acked.fetch_add(Finish::Ack.run(&mut con, "q", &ids), Relaxed);
                        }
                    }
                });
            }
        });
        start.elapsed()
    })
}

/// POP+ACK over 1,000 groups, ORDER FAIR against ORDER PRIORITY (the same
/// messages, GROUPLIMIT high enough that every one is ready).
fn fair_throughput(cfg: &Config, s: &Scale, report: &mut Report) {
    let n = s.life_n;
    let run = |order: &'static str| {
        move || {
            let server = Server::with_module(cfg);
            config(
                &mut server.conn(),
                &["GROUPLIMIT", "1000000", "ORDER", order],
            );
            preload(&server, s, n, |i| format!("g{}", i % 1000));
            drain(&server, s, n)
        }
    };
    let (fair, priority) = (run("FAIR"), run("PRIORITY"));
    let [fair, priority] = best_of(s.rounds, [&fair, &priority]);
    report.versus(
        SCENARIO,
        "POP+ACK, ORDER FAIR vs PRIORITY, 1000 groups",
        fair,
        priority,
        Some(0.9),
    );
    // The server's CPU per message: the PRIORITY side often leaves the
    // server idle part of the time, so its rate measures the clients too.
    let per_message = |run: crate::harness::Run| 1e6 * run.busy / run.rate;
    report.detail(format!(
        "groups fair: {n} ready messages in 1,000 groups (GROUPLIMIT 1000000), added by {} \
         producers in interleaved batches, drained by {} consumers with DQ.POP COUNT 100 and \
         one DQ.ACK per batch, best of {} rounds; {}; server CPU per message: FAIR {:.2} µs, \
         PRIORITY {:.2} µs",
        s.conns,
        s.consumers,
        s.rounds,
        busy(&[("FAIR", fair), ("PRIORITY", priority)]),
        per_message(fair),
        per_message(priority),
    ));
}

/// One `delivered` event: its time and id.
fn deliveries(c: &mut Connection) -> Vec<(u64, Vec<u8>)> {
    let mut after = 0u64;
    let mut found = Vec::new();
    loop {
        let reply: Value = redis::cmd("DQ.EVENTS")
            .arg("q")
            .arg("AFTER")
            .arg(after)
            .arg("COUNT")
            .arg(10_000)
            .query(c)
            .expect("DQ.EVENTS");
        let Value::Array(mut parts) = reply else {
            panic!("DQ.EVENTS: {reply:?}");
        };
        let Some(Value::Array(events)) = parts.pop() else {
            panic!("DQ.EVENTS: no events array");
        };
        if events.is_empty() {
            return found;
        }
        for event in events {
            let Value::Array(fields) = event else {
                panic!("an event: {event:?}");
            };
            let int = |v: &Value| match v {
                Value::Int(n) => *n as u64,
                other => panic!("an event field: {other:?}"),
            };
            let text = |v: &Value| match v {
                Value::BulkString(b) => b.clone(),
                Value::SimpleString(s) => s.clone().into_bytes(),
                other => panic!("an event field: {other:?}"),
            };
            after = int(&fields[0]);
            if text(&fields[2]) == b"delivered" {
                found.push((int(&fields[1]), text(&fields[3])));
            }
        }
    }
}

/// GROUPRATE 10/1s on 100 groups, 8 consumers popping as fast as they
/// can: the busiest 1 s window of any group, from the server's own
/// delivery times (the event log's `delivered` events).
fn group_rate(cfg: &Config, s: &Scale, report: &mut Report) {
    let (groups, per_group, limit, window_ms) = (100, 60, 10, 1_000u64);
    let run_for = Duration::from_secs(if s.burst_n > 200_000 { 4 } else { 2 });
    let server = Server::with_module(cfg);
    let mut c = server.conn();
    config(
        &mut c,
        &[
            "GROUPLIMIT",
            "100",
            "GROUPRATE",
            "10/1s",
            "EVENTS",
            "100000",
        ],
    );
    drive(server.conns(s.conns), groups * per_group, |p, i| {
        p.cmd("DQ.ADD")
            .arg("q")
            .arg(payload(i))
            .arg("ID")
            .arg(format!("g{}-{i}", i % groups))
            .arg("GROUP")
            .arg(format!("g{}", i % groups));
    });
    let start = Instant::now();
    thread::scope(|sc| {
        for mut con in server.conns(8) {
            sc.spawn(move || {
                while start.elapsed() < run_for {
                    let reply: Value = redis::cmd("DQ.POP")
                        .arg(&["q", "COUNT", "10", "BLOCK", "50"])
                        .query(&mut con)
                        .expect("DQ.POP");
                    let ids: Vec<_> = pop_entries(reply).into_iter().map(|e| e.0).collect();
                    if !ids.is_empty() {
                        Finish::Ack.run(&mut con, "q", &ids);
                    }
                }
            });
        }
    });
    let mut by_group: HashMap<Vec<u8>, Vec<u64>> = HashMap::new();
    let all = deliveries(&mut c);
    for (at, id) in &all {
        let group = id.split(|&b| b == b'-').next().unwrap_or_default().to_vec();
        by_group.entry(group).or_default().push(*at);
    }
    let busiest = by_group
        .values()
        .map(|times| {
            // Times come in seq order, which is time order.
            let mut most = 0;
            let mut first = 0;
            for last in 0..times.len() {
                while times[first] + window_ms <= times[last] {
                    first += 1;
                }
                most = most.max(last - first + 1);
            }
            most
        })
        .max()
        .unwrap_or(0);
    assert!(!all.is_empty(), "groups rate: nothing was delivered");
    report.figure(
        SCENARIO,
        "GROUPRATE 10/1s, 100 groups, 8 consumers: busiest 1 s window of a group",
        busiest.to_string(),
        Some(("≤ 10", busiest <= limit)),
    );
    report.detail(format!(
        "groups rate: {} deliveries in {:.1} s over {} groups ({} per group on average), \
         times from the server's delivered events",
        all.len(),
        run_for.as_secs_f64(),
        by_group.len(),
        all.len() / by_group.len().max(1)
    ));
}

/// ORDER FAIR with one group of 100,000 ready messages beside 99 groups of
/// 100: the big group's share of the first 9,900 deliveries.
fn fairness(cfg: &Config, s: &Scale, report: &mut Report) {
    let (big, small_groups, small) = (100_000, 99, 100);
    let server = Server::with_module(cfg);
    let mut c = server.conn();
    config(&mut c, &["GROUPLIMIT", "1000000", "ORDER", "FAIR"]);
    preload(&server, s, big, |_| "big".to_string());
    drive(server.conns(s.conns), small_groups * small, |p, i| {
        p.cmd("DQ.ADD")
            .arg("q")
            .arg(payload(i))
            .arg("ID")
            .arg(format!("s{i}"))
            .arg("GROUP")
            .arg(format!("small-{}", i % small_groups));
    });
    let first = small_groups * small;
    let mut taken = 0;
    let mut from_big = 0;
    while taken < first {
        let reply: Value = redis::cmd("DQ.POP")
            .arg(&["q", "COUNT", "100"])
            .query(&mut c)
            .expect("DQ.POP");
        let entries = pop_entries(reply);
        assert!(!entries.is_empty(), "groups fairness: POP ran dry");
        for (id, _) in entries.iter().take(first - taken) {
            from_big += usize::from(id.starts_with(b"m"));
        }
        taken += entries.len().min(first - taken);
    }
    let share = 100.0 * from_big as f64 / first as f64;
    report.figure(
        SCENARIO,
        "ORDER FAIR: big group's share of the first 9900 deliveries (1 of 100 groups)",
        format!("{share:.2}%"),
        Some(("≤ 1.1%", share <= 1.1)),
    );
    report.detail(format!(
        "groups fairness: {big} ready messages in one group, {small} in each of \
         {small_groups} others, ORDER FAIR, POP COUNT 100 until {first} were taken: {from_big} \
         from the big group"
    ));
}

/// Server time per call of a command, µs (INFO commandstats).
fn usec_per_call(con: &mut Connection, command: &str) -> f64 {
    let stats = info(con, "commandstats");
    let line = stats
        .get(&format!("cmdstat_{command}"))
        .unwrap_or_else(|| panic!("no commandstats for {command}"));
    line.split(',')
        .find_map(|kv| kv.strip_prefix("usec_per_call="))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no usec_per_call= in {line}"))
}

/// Bytes per message, 100,000 groups of one ready message against the same
/// messages without a group; then DQ.GROUPS COUNT 100 over those groups.
fn memory_and_listing(cfg: &Config, s: &Scale, report: &mut Report) {
    let n = 100_000;
    let bytes = |grouped: bool| {
        let server = Server::with_module(cfg);
        let before = server.info_u64("memory", "used_memory");
        drive(server.conns(s.conns), n, |p, i| {
            p.cmd("DQ.ADD")
                .arg("q")
                .arg(payload(i))
                .arg("ID")
                .arg(format!("msg-{i:010}"));
            if grouped {
                p.arg("GROUP").arg(format!("tenant-{i:06}"));
            }
        });
        let per = (server.info_u64("memory", "used_memory") - before) as f64 / n as f64;
        (per, server)
    };
    let (plain, _) = bytes(false);
    let (grouped, server) = bytes(true);
    let ratio = grouped / plain;
    report.push(Row {
        scenario: SCENARIO,
        figure: format!("bytes/message, {n} groups of one vs ungrouped"),
        value: format!("{grouped:.0} B"),
        baseline: format!("{plain:.0} B"),
        ratio: format!("{ratio:.2}×"),
        target: "≤ 1.3×".into(),
        met: Some(ratio <= 1.3),
    });
    let mut c = server.conn();
    let mut cursor = "0".to_string();
    let mut seen = 0;
    loop {
        let reply: Value = redis::cmd("DQ.GROUPS")
            .arg("q")
            .arg(&cursor)
            .arg("COUNT")
            .arg(100)
            .query(&mut c)
            .expect("DQ.GROUPS");
        let Value::Array(mut parts) = reply else {
            panic!("DQ.GROUPS: {reply:?}");
        };
        if let Some(Value::Array(page)) = parts.pop() {
            seen += page.len();
        }
        cursor = match parts.pop() {
            Some(Value::BulkString(b)) => String::from_utf8(b).expect("a cursor"),
            other => panic!("DQ.GROUPS cursor: {other:?}"),
        };
        if cursor == "0" {
            break;
        }
    }
    assert_eq!(seen, n, "DQ.GROUPS returned every group once");
    let calls = command_calls(&mut c, "dq.groups");
    let per_call = usec_per_call(&mut c, "dq.groups");
    report.figure(
        SCENARIO,
        "DQ.GROUPS COUNT 100 over 100000 groups: server time per call",
        format!("{:.3} ms", per_call / 1e3),
        Some(("≤ 1 ms", per_call <= 1e3)),
    );
    report.detail(format!(
        "groups memory and listing: used_memory per message, {n} ready messages with 64-byte \
         payloads, each in a group of its own against none; then {calls} DQ.GROUPS calls \
         iterated all {n} groups, {per_call:.1} µs each (INFO commandstats)"
    ));
}
