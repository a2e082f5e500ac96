//! The relay's benchmark (`make bench` runs it after the module's): HTTP
//! deliveries per second through the real dq-relay binary to a loopback
//! receiver that answers 200 at once, and the delay from a message's due
//! time to its arrival at the receiver. The server, the relay and the
//! receiver share this machine's cores, as in the issue's target
//! (≥ 5k deliveries/s on 2 cores).
//!
//! `DQ_BENCH_QUICK=1` runs smaller batches. Writes target/bench/relay.md.

use std::time::{Duration, Instant};

use dq_testkit::*;

/// The deliveries of the throughput run; quick: fewer.
fn burst_size(quick: bool) -> usize {
    if quick {
        10_000
    } else {
        50_000
    }
}

const PACED_RATE: u64 = 2_000; // messages falling due per second
fn paced_secs(quick: bool) -> u64 {
    if quick {
        3
    } else {
        10
    }
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split(' ').take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

/// Adds messages with a pipeline of 1000 commands per round trip.
fn add_all(con: &mut redis::Connection, messages: impl Iterator<Item = (String, Option<u64>)>) {
    let mut pipe = redis::pipe();
    let mut n = 0;
    for (payload, at) in messages {
        let c = pipe.cmd("DQ.ADD").arg("bench").arg(payload);
        if let Some(at) = at {
            c.arg("AT").arg(at);
        }
        c.ignore();
        n += 1;
        if n % 1000 == 0 {
            pipe.exec(con).expect("DQ.ADD pipeline");
            pipe = redis::pipe();
        }
    }
    if n % 1000 != 0 {
        pipe.exec(con).expect("DQ.ADD pipeline");
    }
}

fn main() {
    // `cargo bench` passes --bench; a test run (`cargo test --benches`)
    // passes nothing we need and should stay quick.
    let quick = std::env::var("DQ_BENCH_QUICK").is_ok_and(|v| !v.is_empty() && v != "0")
        || !std::env::args().any(|a| a == "--bench");
    let load_before = loadavg();
    let server = Server::builder().release().start();
    let receiver = Receiver::start(|_| Reply::status(200));
    let url = receiver.url("/hook");
    let args: Vec<String> = [
        "--redis",
        &server.url(),
        "--queue",
        "bench",
        "--allow-host",
        "127.0.0.1",
        // The receiver is on loopback, which the relay otherwise refuses.
        "--allow-net",
        "127.0.0.0/8",
        "--secret",
        "bench-secret",
        "--concurrency",
        "256",
        "--per-host",
        "256",
        "--log-level",
        "warn",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let mut con = server.conn();

    // 1. Throughput: a backlog already ready, drained by a relay started
    //    after it; timed from the first arrival to the last.
    let n = burst_size(quick);
    add_all(
        &mut con,
        (0..n).map(|i| (format!(r#"{{"url":"{url}","body":{{"n":{i}}}}}"#), None)),
    );
    // The relay under test, with none of its DQ_RELAY_* settings from the
    // environment of the run.
    let relay = Process::start(
        command_without_env(env!("CARGO_BIN_EXE_dq-relay"), "DQ_RELAY_").args(&args),
    );
    let requests = receiver.wait_for(n, Duration::from_secs(600));
    let first = requests.iter().map(|r| r.at_us).min().unwrap_or(0);
    let last = requests.iter().map(|r| r.at_us).max().unwrap_or(0);
    let per_sec = (n - 1) as f64 / ((last - first) as f64 / 1e6);
    assert!(
        wait_until(Duration::from_secs(60), || {
            redis::cmd("DQ.STATS")
                .arg("bench")
                .query::<Vec<redis::Value>>(&mut con)
                .map(|stats| {
                    stats
                        .chunks(2)
                        .any(|kv| text(&kv[0]) == "acked" && text(&kv[1]) == n.to_string())
                })
                .unwrap_or(false)
        }),
        "not every delivery was acknowledged"
    );

    // 2. Due time to arrival: messages falling due at a steady rate below
    //    the relay's capacity, each carrying its due time.
    let secs = paced_secs(quick);
    let m = (PACED_RATE * secs) as usize;
    let start = now_ms() + 2_000;
    add_all(
        &mut con,
        (0..m as u64).map(|i| {
            let due = start + i * 1000 / PACED_RATE;
            (
                format!(r#"{{"url":"{url}","body":{{"due":{due}}}}}"#),
                Some(due),
            )
        }),
    );
    let began = Instant::now();
    let all = receiver.wait_for(n + m, Duration::from_secs(secs + 600));
    let mut lateness: Vec<f64> = all[n..]
        .iter()
        .filter_map(|r| {
            let body: serde_json::Value = serde_json::from_slice(&r.body).ok()?;
            let due = body.get("due")?.as_u64()?;
            Some((r.at_us as f64 - due as f64 * 1000.0) / 1000.0)
        })
        .collect();
    lateness.sort_by(f64::total_cmp);
    let _ = began;
    drop(relay);
    let load_after = loadavg();

    let report = format!(
        "# dq-relay benchmark\n\n\
         {} deliveries through dq-relay (concurrency 256, signed requests) to a loopback \
         receiver answering 200 at once; server, relay and receiver on this machine's {} \
         cores. Load average before {load_before}, after {load_after}.\n\n\
         | measure | value |\n|---|---|\n\
         | deliveries/s (a ready backlog of {n}, first to last arrival) | {per_sec:.0} |\n\
         | due → arrival p50 ({m} messages due at {PACED_RATE}/s) | {:.2} ms |\n\
         | due → arrival p99 | {:.2} ms |\n\
         | due → arrival max | {:.2} ms |\n",
        if quick { "Quick run:" } else { "Full run:" },
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        percentile(&lateness, 50.0),
        percentile(&lateness, 99.0),
        lateness.last().copied().unwrap_or(f64::NAN),
    );
    println!("{report}");
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/bench");
    if std::fs::create_dir_all(&dir).is_ok() {
        let _ = std::fs::write(dir.join("relay.md"), &report);
    }
}
