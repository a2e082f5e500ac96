//! Scenario 8, unlink: how long dropping a big queue holds the main
//! thread.

use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::thread;
use std::time::{Duration, Instant};

use dq_testkit::{now_ms, Server};

use crate::harness::{
    add_delayed, drive, payload, ping_probe, BenchServer, Config, Scale, HOUR_MS,
};
use crate::report::{ms, Report, Row};

/// UNLINK (and, for contrast, DEL) of a queue of N messages: how long the
/// command holds the main thread, seen by the caller and by a PING probe
/// on another connection.
pub fn unlink(cfg: &Config, s: &Scale, report: &mut Report) {
    let n = s.burst_n;
    // The pause: the larger of the command's round trip and the longest
    // round trip of a PING probe on another connection meanwhile.
    let drop_key = |server: Server, key: &str, command: &str| {
        let mut con = server.conn();
        let mut probe = server.conn();
        let stop = AtomicBool::new(false);
        thread::scope(|sc| {
            let pinger = ping_probe(sc, &mut probe, &stop);
            thread::sleep(Duration::from_millis(50));
            let t = Instant::now();
            let removed: i64 = redis::cmd(command).arg(key).query(&mut con).expect(command);
            let took_us = t.elapsed().as_micros() as f64;
            assert_eq!(removed, 1, "{command} {key}");
            thread::sleep(Duration::from_millis(100));
            stop.store(true, Relaxed);
            let (round_trips, _) = pinger.join().expect("the PING probe");
            let probe_us = round_trips.into_iter().max().unwrap_or(0) as f64;
            (took_us.max(probe_us), took_us, probe_us)
        })
    };
    let queue = |command: &str| {
        let server = Server::with_module(cfg);
        add_delayed(&server, s, n);
        drop_key(server, "q", command)
    };
    let zset = || {
        let server = Server::plain(cfg);
        let due = now_ms() + HOUR_MS;
        drive(server.conns(s.conns), n, |p, i| {
            p.cmd("ZADD").arg("z").arg(due).arg(payload(i));
        });
        drop_key(server, "z", "UNLINK")
    };
    let (_, unlink, unlink_probe) = queue("UNLINK");
    let (_, zset_unlink, zset_probe) = zset();
    let (del, ..) = queue("DEL");
    let scenario = "8 unlink";
    let mut versus = |figure: String, dq: f64, base: f64, target: Option<f64>| {
        report.push(Row {
            scenario,
            figure,
            value: ms(dq),
            baseline: ms(base),
            ratio: format!("{:.2}×", dq / base),
            target: target.map_or("—".into(), |t| format!("≤ {} ms", t / 1000.0)),
            met: target.map(|t| dq <= t),
        })
    };
    versus(
        format!("UNLINK of {n} messages, its round trip, vs a ZSET's"),
        unlink,
        zset_unlink,
        Some(1000.0),
    );
    versus(
        "longest PING round trip meanwhile, vs a ZSET's".into(),
        unlink_probe,
        zset_probe,
        None,
    );
    report.figure(
        scenario,
        &format!("DEL of {n} messages (frees in the command)"),
        ms(del),
        None,
    );
    report.detail(format!(
        "unlink: the main thread's pause is UNLINK's round trip: the queue's free effort is \
         its message count, so the server frees it on its lazy-free thread; a PING probe on \
         another connection ran from 50 ms before to 100 ms after the UNLINK: its longest \
         round trip is the lazy-free thread competing for this machine's two cores, the same \
         for a ZSET; baseline: a ZSET of {n} 64-byte members on a server without the module"
    ));
}
