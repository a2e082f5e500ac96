//! The dashboard at scale (`make bench` runs it): a server holding 10,000
//! queues of one message each, read by the real dq-dashboard binary; the
//! size and time of the queue list page (a few views) and of `/metrics`,
//! the commands each request sends (INFO commandstats before and after),
//! how long the sampler's read takes and the dashboard's memory once every
//! queue's history is full.
//!
//! Environment: `DQ_MODULE` and `DQ_SERVER` (as the module's tests: the
//! workspace's test kit, testkit/), `DQ_BENCH_QUICK=1` (fewer rounds), `DQ_BENCH_QUEUES`
//! (default 10000), `DQ_DASHBOARD_BIN` (another dq-dashboard binary, e.g.
//! an older build to compare with; this one's by default). Writes
//! target/bench/dashboard.md.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::time::{Duration, Instant};

use dq_testkit::{server_binary, wait_until, Process, Server};

/// A dq-dashboard child process, killed when dropped.
struct Dashboard {
    process: Process,
    addr: String,
}

impl Dashboard {
    fn start(args: &[&str]) -> Dashboard {
        let bin = std::env::var("DQ_DASHBOARD_BIN")
            .unwrap_or_else(|_| env!("CARGO_BIN_EXE_dq-dashboard").to_string());
        let mut process = Process::start(
            Command::new(&bin)
                .args(["--listen", "127.0.0.1:0", "--log-format", "json"])
                .args(args),
        );
        // The log names the address (port 0 picks one).
        let address = |process: &Process| {
            process.lines().iter().find_map(|line| {
                let at = line.find("\"message\":\"dashboard at http://")?;
                let rest = &line[at + "\"message\":\"dashboard at http://".len()..];
                Some(rest.split('/').next().unwrap_or_default().to_string())
            })
        };
        let mut addr = None;
        wait_until(Duration::from_secs(60), || {
            addr = address(&process);
            addr.is_some() || process.wait_exit(Duration::ZERO).is_some()
        });
        let addr =
            addr.unwrap_or_else(|| panic!("{bin} did not start; its log:\n{}", process.log()));
        Dashboard { process, addr }
    }

    fn rss_kb(&self) -> u64 {
        std::fs::read_to_string(format!("/proc/{}/status", self.process.pid()))
            .ok()
            .and_then(|s| {
                s.lines()
                    .find(|l| l.starts_with("VmRSS:"))
                    .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
            })
            .unwrap_or(0)
    }

    /// One GET on a fresh connection: (status, body bytes, time).
    fn get(&self, path: &str) -> (u16, usize, Duration) {
        let started = Instant::now();
        let mut s = TcpStream::connect(&self.addr).expect("connect to the dashboard");
        write!(
            s,
            "GET {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
            self.addr
        )
        .expect("send a request");
        let mut reply = Vec::new();
        s.read_to_end(&mut reply).expect("read the answer");
        let took = started.elapsed();
        let head_end = reply
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .map_or(reply.len(), |p| p + 4);
        let status = std::str::from_utf8(&reply[..head_end.min(12)])
            .ok()
            .and_then(|l| l.split(' ').nth(1)?.parse().ok())
            .unwrap_or(0);
        (status, reply.len() - head_end, took)
    }
}

/// `INFO commandstats` of a command (`dq.queues`, `dq.stats`): its calls
/// and the server's time in it, in microseconds.
fn cmdstat(con: &mut redis::Connection, command: &str) -> (u64, u64) {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(con)
        .expect("INFO commandstats");
    let key = format!("cmdstat_{command}:");
    let Some(fields) = info.lines().find_map(|l| l.strip_prefix(&key)) else {
        return (0, 0);
    };
    let field = |name: &str| -> u64 {
        fields
            .split(',')
            .find_map(|f| f.strip_prefix(name)?.strip_prefix('='))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    (field("calls"), field("usec"))
}

fn calls(con: &mut redis::Connection, command: &str) -> u64 {
    cmdstat(con, command).0
}

/// An `INFO stats` counter.
fn stat(con: &mut redis::Connection, name: &str) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("stats")
        .query(con)
        .expect("INFO stats");
    let key = format!("{name}:");
    info.lines()
        .find_map(|l| l.trim_end().strip_prefix(&key)?.parse().ok())
        .unwrap_or(0)
}

/// Waits until the dashboard's first sample is done: no dq command for a
/// while.
fn quiet(con: &mut redis::Connection) {
    let mut last = (u64::MAX, u64::MAX);
    for _ in 0..600 {
        let now = (calls(con, "dq.queues"), calls(con, "dq.stats"));
        if now == last && now.0 + now.1 > 0 {
            return;
        }
        last = now;
        std::thread::sleep(Duration::from_millis(300));
    }
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split(' ').take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

fn size(bytes: usize) -> String {
    if bytes >= 1_000_000 {
        format!("{:.1} MB", bytes as f64 / 1e6)
    } else {
        format!("{:.0} KB", bytes as f64 / 1e3)
    }
}

fn ms(d: Duration) -> String {
    let ms = d.as_secs_f64() * 1000.0;
    if ms < 10.0 {
        format!("{ms:.1} ms")
    } else {
        format!("{ms:.0} ms")
    }
}

fn main() {
    let quick = std::env::var("DQ_BENCH_QUICK").is_ok_and(|v| !v.is_empty() && v != "0")
        || !std::env::args().any(|a| a == "--bench");
    let queues: usize = std::env::var("DQ_BENCH_QUEUES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    let rounds = if quick { 5 } else { 20 };
    let load_before = loadavg();

    let server = Server::builder().release().start();
    let mut con = server.conn();
    let mut pipe = redis::pipe();
    for i in 0..queues {
        pipe.cmd("DQ.ADD")
            .arg(format!("queue-{i:05}"))
            .arg(r#"{"n":1}"#)
            .ignore();
        if i % 1000 == 999 {
            pipe.exec(&mut con).expect("DQ.ADD pipeline");
            pipe = redis::pipe();
        }
    }
    if !queues.is_multiple_of(1000) {
        pipe.exec(&mut con).expect("DQ.ADD pipeline");
    }

    // 1. Requests, with the sampler held off after its first read, so
    //    that each request's commands can be counted exactly.
    let url = server.url();
    let d = Dashboard::start(&[
        "--redis",
        &url,
        "--sample-interval",
        "1h",
        "--history",
        "2h",
    ]);
    quiet(&mut con);
    let views: [(&str, String); 5] = [
        ("queue list, first page (default: 50 by name)", "/".into()),
        (
            "queue list, sorted by dead, page 100",
            "/?sort=dead&page=100".into(),
        ),
        (
            "queue list, name filter (`queue-012`: 100 match)",
            "/?q=queue-012".into(),
        ),
        (
            "`/metrics` (totals, 250 queues' own series)",
            "/metrics".into(),
        ),
        (
            "`/metrics?queue=queue-0000*` (totals, 10 queues)",
            "/metrics?queue=queue-0000*".into(),
        ),
    ];
    let mut table = String::from(
        "| request | status | size | min | median | max | DQ.QUEUES / DQ.STATS per request |\n\
         |---|---|---|---|---|---|---|\n",
    );
    for (what, path) in &views {
        let before = (calls(&mut con, "dq.queues"), calls(&mut con, "dq.stats"));
        let mut times = Vec::new();
        let mut status = 0;
        let mut bytes = 0;
        for _ in 0..rounds {
            let (s, b, t) = d.get(path);
            status = s;
            bytes = b;
            times.push(t);
        }
        let after = (calls(&mut con, "dq.queues"), calls(&mut con, "dq.stats"));
        times.sort();
        let per = |a: u64, b: u64| (b - a) as f64 / rounds as f64;
        table.push_str(&format!(
            "| {what} | {status} | {} | {} | {} | {} | {} / {} |\n",
            size(bytes),
            ms(times[0]),
            ms(times[times.len() / 2]),
            ms(times[times.len() - 1]),
            per(before.0, after.0),
            per(before.1, after.1),
        ));
    }
    drop(d);

    // 2. What one read of every queue costs: the server's time in one
    //    DQ.QUEUES WITHSTATS (its main thread, where the timer runs too),
    //    the reply's size, and the round trip with redis-rs' parsing.
    let (calls_before, usec_before) = cmdstat(&mut con, "dq.queues");
    let out_before = stat(&mut con, "total_net_output_bytes");
    let mut reads = Vec::new();
    for _ in 0..rounds {
        let started = Instant::now();
        let v: redis::Value = redis::cmd("DQ.QUEUES")
            .arg("WITHSTATS")
            .query(&mut con)
            .expect("DQ.QUEUES WITHSTATS");
        reads.push(started.elapsed());
        drop(v);
    }
    reads.sort();
    let (calls_after, usec_after) = cmdstat(&mut con, "dq.queues");
    let out_after = stat(&mut con, "total_net_output_bytes");
    let n = (calls_after - calls_before).max(1);
    let server_us = (usec_after - usec_before) / n;
    let reply_bytes = (out_after - out_before) as usize / n as usize;

    // 3. The history's memory: samples every 100 ms over a 6 s window
    //    fill every queue's ring (62 points, as a 10-minute window keeps)
    //    within seconds.
    let d = Dashboard::start(&[
        "--redis",
        &url,
        "--sample-interval",
        "100ms",
        "--history",
        "6s",
    ]);
    let rss_start = d.rss_kb();
    std::thread::sleep(Duration::from_secs(if quick { 10 } else { 20 }));
    let rss_full = d.rss_kb();
    drop(d);
    let load_after = loadavg();

    let report = format!(
        "# dq-dashboard at scale\n\n\
         {} {queues} queues of one message each on one server ({}), read by dq-dashboard \
         (release build) on this machine's {} cores; {rounds} requests of each kind, one \
         connection each, timed from connect to the last byte. Load average before \
         {load_before}, after {load_after}.\n\n\
         {table}\n\
         | reading every queue (what each list page, scrape and sample sends per server) | value |\n|---|---|\n\
         | server time per DQ.QUEUES WITHSTATS (INFO commandstats) | {:.1} ms |\n\
         | its reply | {} |\n\
         | round trip and parsing (redis-rs), median of {rounds} | {} |\n\
         | dq-dashboard memory just started / with every queue's history full (62 points each) | {:.0} MB / {:.0} MB |\n",
        if quick { "Quick run:" } else { "Full run:" },
        server_binary(),
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        server_us as f64 / 1000.0,
        size(reply_bytes),
        ms(reads[reads.len() / 2]),
        rss_start as f64 / 1024.0,
        rss_full as f64 / 1024.0,
    );
    println!("{report}");
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/bench");
    if std::fs::create_dir_all(&dir).is_ok() {
        let _ = std::fs::write(dir.join("dashboard.md"), &report);
    }
}
