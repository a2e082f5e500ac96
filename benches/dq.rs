//! `make bench`: dq against what clients do today with Lua and polling.
//!
//! Every scenario starts its own servers (redis-server with the module built
//! in release mode, or a plain one for the client-side designs) and measures
//! dq and its baseline side by side, with the same connections and pipeline
//! depth. On a shared machine absolute numbers drift from run to run; ratios
//! of runs made together hold, so throughput is measured in rounds that
//! alternate the variants, keeping each one's best round (load from other
//! processes only ever slows a run down).
//!
//! Environment: `DQ_MODULE` (default: the release build's libdq.so, under
//! CARGO_TARGET_DIR when set; see testkit/), `DQ_SERVER`
//! (default redis-server), `DQ_BENCH_QUICK=1` (small counts, under a
//! minute), `DQ_BENCH_OUT` (default target/bench), `DQ_BENCH_ONLY`
//! (comma-separated scenarios: add, lifecycle, lateness, burst, idle,
//! memory, queues, lines, schedules, flow, outcomes, events, groups, backlog, unlink). Writes
//! `results.md` and `lateness.svg` there. The `lines` scenario runs on each server line it
//! finds: `redis-server`, `DQ_VALKEY` (default valkey-server) and the
//! redis-server and valkey-server of `DQ_DEBIAN13` (default
//! target/debian13/dq, see `make debian13`).
//!
//! This file decides which scenarios run and in what order; `dq/` holds
//! the rest: `harness.rs` (configuration, servers, load clients, timing,
//! the PING probe), `clients.rs` (dq's and the seeds' client calls),
//! `report.rs` (the table and results.md), `svg.rs` (lateness.svg) and
//! `scenarios/`, one file per scenario.

// A bench target's root is read as a crate root: without `path`, its
// modules would be looked for in benches/ itself, beside the other
// targets.
#[path = "dq/clients.rs"]
mod clients;
#[path = "dq/harness.rs"]
mod harness;
#[path = "dq/report.rs"]
mod report;
#[path = "dq/scenarios/mod.rs"]
mod scenarios;
#[path = "dq/svg.rs"]
mod svg;

use std::path::PathBuf;
use std::time::Instant;

use dq_testkit::Build;

use harness::{Config, Scale};
use report::{machine, markdown, Report};
use scenarios::{
    add_throughput, backlog, burst, events, flow, groups, idle, lateness, lifecycle, many_queues,
    memory, outcomes, schedules, server_lines, unlink,
};
use svg::lateness_svg;

/// One numbered scenario of the issue: measures and adds its rows.
type Scenario = fn(&Config, &Scale, &mut Report);

fn main() {
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let env = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    let cfg = Config {
        quick: env("DQ_BENCH_QUICK").is_some_and(|v| v != "0"),
        server: dq_testkit::server_binary(),
        out: env("DQ_BENCH_OUT").map_or(manifest.join("target/bench"), PathBuf::from),
        only: env("DQ_BENCH_ONLY").map(|v| v.split(',').map(|s| s.trim().to_string()).collect()),
        valkey: env("DQ_VALKEY").unwrap_or_else(|| "valkey-server".into()),
        debian13: env("DQ_DEBIAN13").map_or(manifest.join("target/debian13/dq"), PathBuf::from),
    };
    // Fails now, not in the first scenario, when the release build is
    // missing (`make bench` builds it).
    dq_testkit::module_path(Build::Release);
    let s = Scale::new(cfg.quick);
    let wanted = |name: &str| {
        cfg.only
            .as_ref()
            .is_none_or(|o| o.iter().any(|x| x == name))
    };
    let wall = Instant::now();
    let header = machine(&cfg);
    for (k, v) in &header {
        println!("{k}: {v}");
    }
    let mut report = Report::default();
    let scenarios: [(&str, Scenario); 15] = [
        ("add", add_throughput),
        ("lifecycle", lifecycle),
        ("lateness", lateness),
        ("burst", burst),
        ("idle", idle),
        ("memory", memory),
        ("queues", many_queues),
        ("lines", server_lines),
        ("schedules", schedules),
        ("flow", flow),
        ("outcomes", outcomes),
        ("events", events),
        ("groups", groups),
        // Before the backlog: tearing down its 10M-message servers
        // disturbed the UNLINK pause measured right after them.
        ("unlink", unlink),
        ("backlog", backlog),
    ];
    for (name, run) in scenarios {
        if wanted(name) {
            run(&cfg, &s, &mut report);
        }
    }
    std::fs::create_dir_all(&cfg.out).expect("create the output directory");
    let md = markdown(&header, &report, wall.elapsed());
    std::fs::write(cfg.out.join("results.md"), &md).expect("write results.md");
    if !report.lateness_us.is_empty() {
        let svg = lateness_svg(&report.lateness_us, cfg.quick);
        std::fs::write(cfg.out.join("lateness.svg"), svg).expect("write lateness.svg");
    }
    println!("\n{md}\nwritten to {}", cfg.out.display());
}
