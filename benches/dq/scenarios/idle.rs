//! Scenario 5, idle: what a million messages due in an hour cost while
//! they wait.

use std::thread;
use std::time::{Duration, Instant};

use dq_testkit::Server;

use crate::harness::{add_delayed, clock_ticks_per_sec, BenchServer, Config, Scale};
use crate::report::{Report, Row};

/// N messages due in an hour: timer wakeups and CPU, beside an empty server
/// measured over the same window.
pub fn idle(cfg: &Config, s: &Scale, report: &mut Report) {
    let n = s.idle_n;
    let empty = Server::with_module(cfg);
    let loaded = Server::with_module(cfg);
    add_delayed(&loaded, s, n);
    // Let the preload's aftermath (disconnects, incremental rehashing) pass.
    thread::sleep(Duration::from_secs(1));
    let ticks0 = loaded.info_u64("dq", "dq_timer_ticks");
    let cpu0 = (empty.cpu_secs(), loaded.cpu_secs());
    let start = Instant::now();
    thread::sleep(Duration::from_secs(s.idle_secs));
    let window = start.elapsed().as_secs_f64();
    let cpu1 = (empty.cpu_secs(), loaded.cpu_secs());
    let wakeups = (loaded.info_u64("dq", "dq_timer_ticks") - ticks0) as f64 / window;
    let cpu_empty = 100.0 * (cpu1.0 - cpu0.0) / window;
    let cpu_loaded = 100.0 * (cpu1.1 - cpu0.1) / window;
    let scenario = "5 idle";
    let figure = format!("timer wakeups/s, {n} due in 1 h");
    report.figure(
        scenario,
        &figure,
        format!("{wakeups:.2}/s"),
        Some(("≤ 1/s", wakeups <= 1.0)),
    );
    // /proc counts CPU in clock ticks: a tick or two per window is noise,
    // so "as an empty server" allows half a percent of a core.
    report.push(Row {
        scenario,
        figure: "server CPU, % of a core, vs an empty server".into(),
        value: format!("{cpu_loaded:.2}%"),
        baseline: format!("{cpu_empty:.2}%"),
        ratio: format!("{:+.2} pt", cpu_loaded - cpu_empty),
        target: "≤ +0.5 pt".into(),
        met: Some(cpu_loaded - cpu_empty <= 0.5),
    });
    report.detail(format!(
        "idle: {window:.1} s window, both servers side by side; CPU is the server process's \
         user+system time, resolution {:.2} pt",
        100.0 / clock_ticks_per_sec() / window
    ));
}
