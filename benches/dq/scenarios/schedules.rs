//! Scenario 11, schedules: how late runs are, runs per second, and no
//! wakeups for schedules hours away.

use std::thread;
use std::time::{Duration, Instant};

use dq_testkit::{now_ms, Server};

use super::ready::{ready_lateness, tenant};
use crate::harness::{drive, info_u64, now_us, payload, BenchServer, Config, Scale, GIVE_UP};
use crate::report::{ms, percentile, Report};

/// Recurring schedules: how late their runs are when 10,000 fall due in
/// the same second, how many runs a second the server makes when many fall
/// due at once, and that thousands of schedules hours away cost no wakeup.
pub fn schedules(cfg: &Config, s: &Scale, report: &mut Report) {
    let scenario = "11 schedules";
    let n = s.queues_n;
    let late = ready_lateness(cfg, s, n, &|server, due_of| {
        drive(server.conns(s.conns), n, |p, i| {
            p.cmd("DQ.SCHEDULE")
                .arg(tenant(i))
                .arg("s")
                .arg(payload(i))
                .arg("EVERY")
                .arg("1h")
                .arg("START")
                .arg(due_of(i));
        })
    });
    let mut samples = late.samples;
    samples.sort_unstable();
    let p = |q: f64| percentile(&samples, q);
    report.figure(
        scenario,
        &format!("run lateness p99, {n} schedules due within one second"),
        ms(p(0.99)),
        Some(("≤ 5 ms", p(0.99) <= 5000.0)),
    );
    report.figure(
        scenario,
        "run lateness max",
        ms(p(1.0)),
        Some(("≤ 20 ms", p(1.0) <= 20_000.0)),
    );
    report.detail(format!(
        "schedules, lateness: {n} queues with one schedule each (EVERY 1h, START spread over \
         one second a few seconds ahead), measured as scenario 9 measures messages: the \
         arrival of each queue's dq.ready event (its run's message is ready at once) − the \
         run time; subscriber as {}; per server: {}",
        if late.realtime {
            "a real-time thread"
        } else {
            "an ordinary thread"
        },
        late.rounds.join("; ")
    ));

    // Runs a second: many schedules due at the same instant.
    let burst = s.schedule_burst;
    let server = Server::with_module(cfg);
    let mut lead_ms = 2000;
    let (at, took) = loop {
        let at = now_ms() + lead_ms;
        let took = drive(server.conns(s.conns), burst, |p, i| {
            p.cmd("DQ.SCHEDULE")
                .arg(format!("burst-{}", i % 100))
                .arg(format!("s{i}"))
                .arg("x")
                .arg("EVERY")
                .arg("1d")
                .arg("START")
                .arg(at);
        });
        if now_ms() + 500 < at {
            break (at, took);
        }
        let _: () = redis::cmd("FLUSHALL")
            .query(&mut server.conn())
            .expect("FLUSHALL");
        lead_ms = 2 * lead_ms + 2 * took.as_millis() as u64;
    };
    let mut con = server.conn();
    let runs_before = server.info_u64("dq", "dq_schedule_runs");
    while now_ms() < at {
        thread::sleep(Duration::from_millis(1));
    }
    let give_up = Instant::now() + GIVE_UP;
    let done_at = loop {
        let made = info_u64(&mut con, "dq", "dq_schedule_runs") - runs_before;
        if made >= burst as u64 || Instant::now() > give_up {
            break now_us();
        }
        thread::sleep(Duration::from_millis(2));
    };
    let made = info_u64(&mut con, "dq", "dq_schedule_runs") - runs_before;
    assert_eq!(made, burst as u64, "schedules: not every run was made");
    let secs = (done_at as f64 / 1e6 - at as f64 / 1e3).max(1e-3);
    let per_sec = burst as f64 / secs;
    report.figure(
        scenario,
        &format!("runs made per second, {burst} due at once"),
        format!("{:.0}k/s", per_sec / 1000.0),
        Some(("≥ 100k/s", per_sec >= 100_000.0)),
    );
    report.detail(format!(
        "schedules, runs/s: {burst} schedules in 100 queues (preloaded in {:.2} s), all due \
         at the same millisecond; from that time until INFO dq's schedule_runs (polled every \
         2 ms) counted them all: {secs:.3} s, {} timer ticks, the longest {} µs",
        took.as_secs_f64(),
        info_u64(&mut con, "dq", "dq_timer_ticks"),
        info_u64(&mut con, "dq", "dq_longest_tick_us")
    ));
    drop(con);
    drop(server);

    // Idle: schedules hours away wake nothing.
    let server = Server::with_module(cfg);
    drive(server.conns(s.conns), n, |p, i| {
        p.cmd("DQ.SCHEDULE")
            .arg(format!("idle-{}", i % 100))
            .arg(format!("s{i}"))
            .arg("x")
            .arg("CRON")
            .arg("0 3 * * *")
            .arg("START")
            .arg(now_ms() + 3 * 3_600_000);
    });
    thread::sleep(Duration::from_secs(1));
    let ticks0 = server.info_u64("dq", "dq_timer_ticks");
    let start = Instant::now();
    thread::sleep(Duration::from_secs(s.idle_secs));
    let wakeups =
        (server.info_u64("dq", "dq_timer_ticks") - ticks0) as f64 / start.elapsed().as_secs_f64();
    report.figure(
        scenario,
        &format!("timer wakeups/s, {n} schedules hours away"),
        format!("{wakeups:.2}/s"),
        Some(("0/s", wakeups == 0.0)),
    );
}
