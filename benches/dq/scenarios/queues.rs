//! Scenario 9, many queues: what a small queue costs in memory, and how
//! late ten thousand queues' messages become ready.

use std::thread;
use std::time::{Duration, Instant};

use dq_testkit::{now_ms, Server};
use redis::Pipeline;

use super::ready::{ready_lateness, tenant, ReadyLateness, READY_CHANNEL};
use crate::harness::{drive, info_u64, payload, BenchServer, Config, Scale, HOUR_MS};
use crate::report::{ms, percentile, Report, Row};

/// Queue `i`'s message's id: the same for dq and for the client-side
/// design.
fn msg_id(i: usize) -> String {
    format!("msg-{i:010}")
}

/// Thousands of small queues: what one costs in memory, and how late their
/// messages become ready when they all fall due within one second.
pub fn many_queues(cfg: &Config, s: &Scale, report: &mut Report) {
    queue_memory(cfg, s, report);
    queue_lateness(cfg, s, report);
}

/// used_memory once the server has let go of everything but its data: the
/// loading clients are gone (their buffers freed) and the main dictionary
/// has finished the rehash the loading started (serverCron does 1 ms of it
/// every 100 ms).
fn settled_memory(server: &Server) -> u64 {
    let mut con = server.conn();
    let deadline = Instant::now() + Duration::from_secs(5);
    while info_u64(&mut con, "clients", "connected_clients") > 1 && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(10));
    }
    thread::sleep(Duration::from_millis(300));
    info_u64(&mut con, "memory", "used_memory")
}

fn memory_usage(server: &Server, key: &str) -> u64 {
    redis::cmd("MEMORY")
        .arg("USAGE")
        .arg(key)
        .query(&mut server.conn())
        .expect("MEMORY USAGE")
}

fn queue_memory(cfg: &Config, s: &Scale, report: &mut Report) {
    let n = s.queues_n;
    let per_queue = |server: &Server, add: &(dyn Fn(&mut Pipeline, usize) + Sync)| {
        let before = settled_memory(server);
        drive(server.conns(s.conns), n, add);
        (settled_memory(server) - before) as f64 / n as f64
    };
    let with_module = Server::with_module(cfg);
    let dq = per_queue(&with_module, &|p, i| {
        p.cmd("DQ.ADD")
            .arg(tenant(i))
            .arg(payload(i))
            .arg("ID")
            .arg(msg_id(i));
        p.arg("DELAY").arg(HOUR_MS);
    });
    let queues = with_module.info_u64("dq", "dq_queues");
    assert_eq!(queues, n as u64, "queues: INFO dq counts {queues} queues");
    let dq_usage = memory_usage(&with_module, &tenant(0));
    drop(with_module);
    let plain = Server::plain(cfg);
    let due = now_ms() + HOUR_MS;
    let bare = per_queue(&plain, &|p, i| {
        let topic = tenant(i);
        p.cmd("ZADD")
            .arg(format!("{topic}:delayed"))
            .arg(due)
            .arg(msg_id(i));
        p.cmd("HSET")
            .arg(format!("{topic}:payloads"))
            .arg(msg_id(i))
            .arg(payload(i));
    });
    let bare_usage = memory_usage(&plain, &format!("{}:delayed", tenant(0)))
        + memory_usage(&plain, &format!("{}:payloads", tenant(0)));
    drop(plain);
    report.push(Row {
        scenario: "9 queues",
        figure: format!("bytes/queue holding one 64-byte message, {n} queues"),
        value: format!("{dq:.0} B"),
        baseline: format!("{bare:.0} B"),
        ratio: format!("{:.2}×", dq / bare),
        target: "≤ 3× (goal ≤ 1×)".into(),
        met: Some(dq / bare <= 3.0),
    });
    let off = |usage: u64, measured: f64| 100.0 * (usage as f64 - measured) / measured;
    report.detail(format!(
        "queues, memory: used_memory delta / N on fresh servers, each read once the loading \
         clients had gone and the main dictionary's rehash was over; {n} queues named like \
         `{}`, each holding one message (id like `{}`, 64-byte payload, DELAY 1 h); baseline \
         per topic, on a server without the module: one ZSET `<topic>:delayed` (id by due \
         time) and one HASH `<topic>:payloads` (id → payload), the same names and ids; \
         MEMORY USAGE of one queue: {dq_usage} B against {dq:.0} B measured per queue \
         ({:+.1}%); of one topic's ZSET + HASH: {bare_usage} B against {bare:.0} B \
         ({:+.1}%); the measured figures include each key's share of the main dictionary, \
         which MEMORY USAGE leaves out",
        tenant(0),
        msg_id(0),
        off(dq_usage, dq),
        off(bare_usage, bare),
    ));
}

/// N queues with one message each, due spread evenly over one second a
/// few seconds ahead; a subscriber to the `dq.ready` keyevent channel
/// times each queue's event against that queue's due time. No consumer can
/// block on 10,000 queues at once: the notification is how one learns
/// which queue to POP, so its arrival is when a consumer could have the
/// message.
fn queue_lateness(cfg: &Config, s: &Scale, report: &mut Report) {
    let n = s.queues_n;
    let ReadyLateness {
        mut samples,
        realtime: all_realtime,
        rounds,
    } = ready_lateness(cfg, s, n, &|server, due_of| {
        drive(server.conns(s.conns), n, |p, i| {
            p.cmd("DQ.ADD")
                .arg(tenant(i))
                .arg(payload(i))
                .arg("ID")
                .arg(msg_id(i))
                .arg("AT")
                .arg(due_of(i));
        })
    });
    samples.sort_unstable();
    let p = |q: f64| percentile(&samples, q);
    let scenario = "9 queues";
    report.figure(
        scenario,
        &format!("lateness p50, {n} queues due within one second"),
        ms(p(0.5)),
        None,
    );
    report.figure(
        scenario,
        "lateness p99",
        ms(p(0.99)),
        Some(("≤ 5 ms (goal ≤ 1 ms)", p(0.99) <= 5000.0)),
    );
    report.figure(scenario, "lateness max", ms(p(1.0)), None);
    report.detail(format!(
        "queues, lateness: {n} queues of one message each (added with AT), due {} a \
         millisecond across one second a few seconds ahead, on {} fresh server(s); with \
         notify-keyspace-events `Eg`, one client SUBSCRIBEd to `{READY_CHANNEL}` (each event \
         names its queue) takes the arrival time of each queue's event − that queue's due \
         time: when a consumer told by the event could POP it, like scenario 3's delivery − \
         due; no other client sends the server anything from the subscription to the last \
         event (the benchmark waits on the subscriber, not on INFO), as for consumers that \
         wait for the events; the subscriber ran as {}; no baseline: the seeds' broker would have to poll \
         {n} ZSETs; per server: {}",
        n / 1000,
        s.queue_rounds,
        if all_realtime {
            "a real-time thread, so that it measures the server and not its own wait for a core"
        } else {
            "an ordinary thread: real-time priority was refused, so client-side scheduling delays count too"
        },
        rounds.join("; ")
    ));
}
