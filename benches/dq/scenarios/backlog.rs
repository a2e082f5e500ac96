//! Scenario 7, backlog: the lifecycle on a queue holding a big backlog of
//! delayed messages against one holding a small one.

use dq_testkit::Server;

use super::lifecycle::dq_lifecycle;
use crate::harness::{add_delayed, best_of, busy, rate, BenchServer, Config, Scale};
use crate::report::{per_sec, Report};

pub fn backlog(cfg: &Config, s: &Scale, report: &mut Report) {
    let preload = |waiting: usize, report: &mut Report| {
        let server = Server::with_module(cfg);
        let took = add_delayed(&server, s, waiting);
        report.detail(format!(
            "backlog: preloaded {waiting} delayed messages in {:.1} s ({})",
            took.as_secs_f64(),
            per_sec(rate(waiting, took))
        ));
        server
    };
    let small = preload(s.backlog_small, report);
    let big = preload(s.backlog_big, report);
    let [big_rate, small_rate] = best_of(
        s.rounds,
        [&|| dq_lifecycle(&big, "q", s), &|| {
            dq_lifecycle(&small, "q", s)
        }],
    );
    let figure = format!(
        "lifecycle, {} vs {} waiting",
        s.backlog_big, s.backlog_small
    );
    report.versus("7 backlog", &figure, big_rate, small_rate, Some(0.8));
    report.detail(format!(
        "backlog: best of {} lifecycle rounds as in 2, on the queue that holds the waiting \
         messages; {}",
        s.rounds,
        busy(&[("big backlog", big_rate), ("small", small_rate)])
    ));
}
