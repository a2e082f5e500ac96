//! Scenario 12, flow control: RATE and MAXINFLIGHT, DQ.MPOP, DQ.RESUME.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::Mutex;
use std::thread;
use std::time::{Duration, Instant};

use dq_testkit::Server;
use redis::{Connection, Value};

use super::lifecycle::{dq_lifecycle, dq_lifecycle_over};
use crate::clients::pop_entries;
use crate::harness::{
    best_of, busy, drive, info, payload, BenchServer, Config, Scale, BATCH, GIVE_UP,
};
use crate::report::{ms, percentile, Report};

/// Flow control: what a limit the load never reaches costs, how exact
/// RATE is under many consumers, DQ.MPOP over several queues against
/// DQ.POP over one, and how soon DQ.RESUME reaches a blocked consumer.
pub fn flow(cfg: &Config, s: &Scale, report: &mut Report) {
    let scenario = "12 flow";
    let limited = |option: &'static str, value: &'static str| {
        move || {
            let server = Server::with_module(cfg);
            let _: () = redis::cmd("DQ.CONFIG")
                .arg(&["q", "SET", option, value])
                .query(&mut server.conn())
                .expect("DQ.CONFIG SET");
            let run = dq_lifecycle(&server, "q", s);
            let throttled = queue_stat(&mut server.conn(), "q", "throttled");
            assert_eq!(throttled, 0, "flow: {option} {value} held the load back");
            run
        }
    };
    let [plain, rate, inflight] = best_of(
        s.rounds,
        [
            &|| dq_lifecycle(&Server::with_module(cfg), "q", s),
            &limited("RATE", "1000000/1s"),
            &limited("MAXINFLIGHT", "1000000"),
        ],
    );
    report.versus(
        scenario,
        "POP+ACK, RATE 1000000/1s above the load / none",
        rate,
        plain,
        Some(0.95),
    );
    report.versus(
        scenario,
        "POP+ACK, MAXINFLIGHT 1000000 above the load / none",
        inflight,
        plain,
        None,
    );
    report.detail(format!(
        "flow, limits above the load: scenario 2's lifecycle (best of {} rounds of {} \
         messages, alternating) on a queue with no limit, with RATE 1000000/1s and with \
         MAXINFLIGHT 1000000; no POP was throttled; {}",
        s.rounds,
        s.life_n,
        busy(&[("none", plain), ("RATE", rate), ("MAXINFLIGHT", inflight)])
    ));

    rate_exactness(cfg, s, report);

    let queues: Vec<String> = (0..8).map(|i| format!("q{i}")).collect();
    let queues: Vec<&str> = queues.iter().map(String::as_str).collect();
    // Messages per POP or MPOP call, of each variant's last round.
    let per_call = Mutex::new([0.0f64; 2]);
    let counted = |variant: usize, queues: &[&str]| {
        let server = Server::with_module(cfg);
        let run = dq_lifecycle_over(&server, queues, s);
        let command = if variant == 0 { "dq.pop" } else { "dq.mpop" };
        let calls = command_calls(&mut server.conn(), command);
        per_call.lock().expect("per_call")[variant] = s.life_n as f64 / calls.max(1) as f64;
        run
    };
    let [pop, mpop] = best_of(s.rounds, [&|| counted(0, &["q"]), &|| counted(1, &queues)]);
    let [pop_batch, mpop_batch] = *per_call.lock().expect("per_call");
    report.versus(
        scenario,
        "ADD→MPOP→ACK over 8 queues / ADD→POP→ACK over 1",
        mpop,
        pop,
        Some(0.8),
    );
    report.detail(format!(
        "flow, MPOP: scenario 2's lifecycle with the messages spread over 8 queues (message \
         i to queue i mod 8) and consumers taking with DQ.MPOP 8 q0 … q7 COUNT {BATCH} BLOCK \
         100, then DQ.ACK on the queue the reply names; baseline: the same on one queue with \
         DQ.POP; best of {} rounds; messages per call (the last round): MPOP {mpop_batch:.1}, \
         POP {pop_batch:.1} (an MPOP takes from one queue only, so with the load spread its \
         batches are smaller); {}",
        s.rounds,
        busy(&[("MPOP", mpop), ("POP", pop)])
    ));

    resume_latency(cfg, s, report);
}

/// How many times `command` was called (INFO commandstats).
pub fn command_calls(con: &mut Connection, command: &str) -> u64 {
    let stats = info(con, "commandstats");
    let line = stats
        .get(&format!("cmdstat_{command}"))
        .unwrap_or_else(|| panic!("no commandstats for {command}"));
    line.split(',')
        .find_map(|kv| kv.strip_prefix("calls="))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no calls= in {line}"))
}

/// DQ.STATS queue's integer `field`.
pub fn queue_stat(con: &mut Connection, queue: &str, field: &str) -> u64 {
    let stats: HashMap<String, Value> = redis::cmd("DQ.STATS")
        .arg(queue)
        .query(con)
        .expect("DQ.STATS");
    match stats.get(field) {
        Some(Value::Int(n)) => *n as u64,
        other => panic!("DQ.STATS {field}: {other:?}"),
    }
}

/// RATE 1000/1s with 8 consumers popping as fast as they can: the server's
/// own delivery times (each lease deadline − the fixed LEASE) give the
/// busiest 1 s window and the sustained rate.
pub fn rate_exactness(cfg: &Config, s: &Scale, report: &mut Report) {
    const N: u64 = 1000;
    const WINDOW_MS: i64 = 1000;
    const LEASE_MS: i64 = 3_600_000;
    let total = s.rate_n;
    let server = Server::with_module(cfg);
    drive(server.conns(s.conns), total, |p, i| {
        p.cmd("DQ.ADD").arg("q").arg(payload(i));
    });
    let _: () = redis::cmd("DQ.CONFIG")
        .arg(&["q", "SET", "RATE", "1000/1s"])
        .query(&mut server.conn())
        .expect("DQ.CONFIG SET RATE");
    let taken = AtomicUsize::new(0);
    let start = Instant::now();
    thread::scope(|sc| {
        for mut con in server.conns(8) {
            let taken = &taken;
            sc.spawn(move || {
                while taken.load(Relaxed) < total && start.elapsed() < GIVE_UP {
                    let reply: Value = redis::cmd("DQ.POP")
                        .arg("q")
                        .arg("COUNT")
                        .arg(BATCH)
                        .arg("BLOCK")
                        .arg(100)
                        .arg("LEASE")
                        .arg(LEASE_MS)
                        .query(&mut con)
                        .expect("DQ.POP");
                    taken.fetch_add(pop_entries(reply).len(), Relaxed);
                }
            });
        }
    });
    let mut con = server.conn();
    let mut times = Vec::with_capacity(total);
    let mut cursor = "0".to_string();
    loop {
        let (next, entries): (String, Vec<Value>) = redis::cmd("DQ.SCAN")
            .arg("q")
            .arg(&cursor)
            .arg(&["STATE", "INFLIGHT", "COUNT", "10000"])
            .query(&mut con)
            .expect("DQ.SCAN");
        for entry in entries {
            let Value::Array(fields) = entry else {
                panic!("not a SCAN entry: {entry:?}")
            };
            let Some(Value::Int(deadline)) = fields.get(3) else {
                panic!("no lease deadline: {fields:?}")
            };
            times.push(deadline - LEASE_MS);
        }
        if next == "0" {
            break;
        }
        cursor = next;
    }
    assert_eq!(times.len(), total, "rate: not every message was delivered");
    times.sort_unstable();
    // The busiest window [t, t + 1 s), t at each delivery time.
    let mut worst = 0;
    let mut end = 0;
    for (i, &t) in times.iter().enumerate() {
        while end < times.len() && times[end] < t + WINDOW_MS {
            end += 1;
        }
        worst = worst.max(end - i);
    }
    let first_window = times.partition_point(|&t| t < times[0] + WINDOW_MS);
    let span_s = (times[times.len() - 1] - times[0]) as f64 / 1e3;
    let sustained = (total - first_window) as f64 / span_s.max(1e-3);
    let scenario = "12 flow";
    report.figure(
        scenario,
        "RATE 1000/1s, 8 consumers: deliveries in the busiest 1 s",
        worst.to_string(),
        Some(("≤ 1000", worst as u64 <= N)),
    );
    report.figure(
        scenario,
        "RATE 1000/1s, 8 consumers: sustained deliveries",
        format!("{sustained:.0}/s"),
        Some(("≥ 950/s", sustained >= 950.0)),
    );
    report.detail(format!(
        "flow, RATE: {total} ready messages, RATE 1000/1s, 8 consumers each looping DQ.POP \
         COUNT {BATCH} BLOCK 100 LEASE {LEASE_MS}; delivery times are the server's (each \
         in-flight message's lease deadline − LEASE, from DQ.SCAN); busiest window over every \
         [t, t + 1 s) starting at a delivery; sustained = the deliveries after the first \
         window ÷ the time from the first delivery to the last ({span_s:.2} s); POPs \
         throttled: {}",
        queue_stat(&mut con, "q", "throttled")
    ));
}

/// A consumer blocked on a paused queue holding a ready message: the time
/// from sending DQ.RESUME to the consumer's reply.
pub fn resume_latency(cfg: &Config, s: &Scale, report: &mut Report) {
    let server = Server::with_module(cfg);
    let mut con = server.conn();
    let mut consumer = server.conn();
    let (tx, rx) = std::sync::mpsc::channel::<Instant>();
    let mut samples = Vec::with_capacity(s.resume_n);
    thread::scope(|sc| {
        sc.spawn(move || loop {
            let reply: Value = redis::cmd("DQ.POP")
                .arg(&["q", "BLOCK", "0"])
                .query(&mut consumer)
                .expect("DQ.POP");
            let got = Instant::now();
            let entries = pop_entries(reply);
            if entries.iter().any(|(_, p)| p.as_slice() == b"stop") {
                break;
            }
            if tx.send(got).is_err() {
                break;
            }
        });
        for _ in 0..s.resume_n {
            let _: () = redis::cmd("DQ.PAUSE")
                .arg("q")
                .query(&mut con)
                .expect("PAUSE");
            let _: String = redis::cmd("DQ.ADD")
                .arg(&["q", "x"])
                .query(&mut con)
                .expect("ADD");
            // The consumer must be blocked before the RESUME is sent.
            let give_up = Instant::now() + GIVE_UP;
            while info(&mut con, "clients")
                .get("blocked_clients")
                .is_none_or(|b| b != "1")
            {
                assert!(
                    Instant::now() < give_up,
                    "resume: the consumer never blocked"
                );
                thread::sleep(Duration::from_micros(200));
            }
            let sent = Instant::now();
            let _: i64 = redis::cmd("DQ.RESUME")
                .arg("q")
                .query(&mut con)
                .expect("RESUME");
            let got = rx.recv_timeout(GIVE_UP).expect("the consumer's delivery");
            samples.push(got.saturating_duration_since(sent).as_micros() as i64);
        }
        let _: String = redis::cmd("DQ.ADD")
            .arg(&["q", "stop"])
            .query(&mut con)
            .expect("ADD");
    });
    samples.sort_unstable();
    let p = |q: f64| percentile(&samples, q);
    let scenario = "12 flow";
    report.figure(
        scenario,
        "blocked consumer on a paused queue: RESUME → delivery p99",
        ms(p(0.99)),
        Some(("≤ 2 ms", p(0.99) <= 2000.0)),
    );
    report.detail(format!(
        "flow, RESUME: {} times, DQ.PAUSE q, DQ.ADD q, wait for the consumer's DQ.POP q BLOCK \
         0 to be blocked (INFO clients), then the time from sending DQ.RESUME q to the \
         consumer's reply on its own connection and thread: p50 {}, p99 {}, max {}",
        s.resume_n,
        ms(p(0.5)),
        ms(p(0.99)),
        ms(p(1.0))
    ));
}
