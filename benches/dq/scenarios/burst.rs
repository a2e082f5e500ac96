//! Scenario 4, burst: many messages due at one instant, how soon all are
//! ready and how long clients wait meanwhile.

use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::thread;
use std::time::{Duration, Instant};

use dq_testkit::{now_ms, Server};
use redis::Connection;

use crate::harness::{
    drive, info, info_u64, now_us, payload, ping_probe, rate, BenchServer, Config, Scale, GIVE_UP,
};
use crate::report::{ms, per_sec, percentile, Report};

/// N messages due at one instant: how fast they become ready, and the
/// longest PING round trip meanwhile on another connection.
pub fn burst(cfg: &Config, s: &Scale, report: &mut Report) {
    burst_on(cfg, s, report, "4 burst", |_| {});
}

/// The burst, on a queue `setup` configures first, reported under
/// `scenario` (scenario 4 holds the time until all are ready to a target;
/// the others report it). Returns the server, every message ready.
pub fn burst_on(
    cfg: &Config,
    s: &Scale,
    report: &mut Report,
    scenario: &'static str,
    setup: impl Fn(&mut Connection),
) -> Server {
    let n = s.burst_n;
    let add_rate = report.add_rate.unwrap_or(100e3);
    // They fall due once the preload is surely over; if it overran, again
    // on a fresh server with more room.
    let mut expect_ms = 1000.0 * n as f64 / add_rate;
    let (server, due, took) = loop {
        let server = Server::with_module(cfg);
        setup(&mut server.conn());
        let due = now_ms() + 1000 + (2.0 * expect_ms) as u64;
        let took = drive(server.conns(s.conns), n, |p, i| {
            p.cmd("DQ.ADD").arg("q").arg(payload(i)).arg("AT").arg(due);
        });
        if now_ms() + 200 < due {
            break (server, due, took);
        }
        expect_ms = took.as_millis() as f64;
    };
    let mut con = server.conn();
    let ticks_before = info_u64(&mut con, "dq", "dq_timer_ticks");
    while now_ms() + 100 < due {
        thread::sleep(Duration::from_millis(10));
    }
    let stop = AtomicBool::new(false);
    let mut probe = server.conn();
    let ((mut pings_us, realtime), ready_us) = thread::scope(|sc| {
        let pinger = ping_probe(sc, &mut probe, &stop);
        while now_ms() < due {
            thread::sleep(Duration::from_micros(200));
        }
        let give_up = Instant::now() + GIVE_UP;
        while info_u64(&mut con, "dq", "dq_messages_ready") < n as u64 && Instant::now() < give_up {
            thread::sleep(Duration::from_millis(1));
        }
        let ready_us = now_us() - due * 1000;
        stop.store(true, Relaxed);
        (pinger.join().expect("the PING probe"), ready_us as f64)
    });
    let dq = info(&mut con, "dq");
    let field = |name: &str| dq[name].parse::<u64>().expect("a numeric INFO dq field");
    assert_eq!(
        field("dq_messages_ready"),
        n as u64,
        "burst: not every message became ready"
    );
    let promote_rate = n as f64 / (ready_us / 1e6);
    let longest_tick = field("dq_longest_tick_us") as f64;
    pings_us.sort_unstable();
    let longest_ping_us = percentile(&pings_us, 1.0);
    let ticks = field("dq_timer_ticks") - ticks_before;
    let figure = format!("all {n} ready, after their due time");
    let target = (scenario == "4 burst").then_some(("≤ 250 ms", ready_us <= 250e3));
    report.figure(scenario, &figure, ms(ready_us), target);
    let figure = format!("promotion rate, {n} due at once");
    report.figure(scenario, &figure, per_sec(promote_rate), None);
    let figure = "longest PING round trip meanwhile";
    report.figure(
        scenario,
        figure,
        ms(longest_ping_us),
        Some(("≤ 5 ms", longest_ping_us <= 5000.0)),
    );
    let figure = "longest timer tick (INFO dq)";
    report.figure(
        scenario,
        figure,
        ms(longest_tick),
        Some(("≤ 5 ms", longest_tick <= 5000.0)),
    );
    report.detail(format!(
        "{scenario}: preloaded {n} with AT in {:.1} s ({}); all ready {:.0} ms after their due time \
         (INFO dq polled every 1 ms), in {ticks} timer ticks, {:.2} ms apart on average; a PING \
         probe ran back to back on its own connection ({}) from 100 ms before the due time: \
         {} round trips, p50 {}, p99 {}, {} over 5 ms",
        took.as_secs_f64(),
        per_sec(rate(n, took)),
        ready_us / 1000.0,
        ready_us / 1000.0 / ticks.max(1) as f64,
        if realtime {
            "a real-time thread, so that it measures the server and not its own wait for a core"
        } else {
            "an ordinary thread: real-time priority was refused, so client-side scheduling delays count too"
        },
        pings_us.len(),
        ms(percentile(&pings_us, 0.5)),
        ms(percentile(&pings_us, 0.99)),
        pings_us.iter().filter(|&&us| us > 5000).count()
    ));
    server
}
