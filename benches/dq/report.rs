//! What a run reports: the rows of the results table (printed as they
//! come, kept for results.md), the notes on how each figure was made, the
//! formats of its numbers, and results.md itself with the machine and
//! server it ran on.

use std::fmt::Write as _;
use std::process::Command;
use std::thread;
use std::time::Duration;

use dq_testkit::Server;

use crate::harness::{server_version, BenchServer, Config, Run};

/// A target's text and whether the figure meets it.
type Target = Option<(&'static str, bool)>;

/// One row of the results table.
pub struct Row {
    pub scenario: &'static str,
    pub figure: String,
    pub value: String,
    pub baseline: String,
    pub ratio: String,
    pub target: String,
    pub met: Option<bool>,
}

/// What the scenarios found, in the order they found it.
#[derive(Default)]
pub struct Report {
    pub rows: Vec<Row>,
    pub details: Vec<String>,
    pub lateness_us: Vec<i64>,
    /// DQ.ADD's rate, measured by the add scenario: it times the burst's
    /// preload.
    pub add_rate: Option<f64>,
}

impl Report {
    pub fn push(&mut self, row: Row) {
        println!(
            "  {:<12} {:<46} {:>10} {:>10} {:>9}  {:<10} {}",
            row.scenario,
            row.figure,
            row.value,
            row.baseline,
            row.ratio,
            row.target,
            met_text(row.met)
        );
        self.rows.push(row);
    }

    /// A figure of dq's alone, perhaps against a target.
    pub fn figure(&mut self, scenario: &'static str, figure: &str, value: String, target: Target) {
        self.push(Row {
            scenario,
            figure: figure.into(),
            value,
            baseline: "—".into(),
            ratio: "—".into(),
            target: target.map_or("—", |t| t.0).into(),
            met: target.map(|t| t.1),
        });
    }

    /// Throughput of dq against a baseline, with a target on the ratio.
    pub fn versus(
        &mut self,
        scenario: &'static str,
        figure: &str,
        dq: Run,
        base: Run,
        min: Option<f64>,
    ) {
        let ratio = dq.rate / base.rate;
        self.push(Row {
            scenario,
            figure: figure.into(),
            value: per_sec(dq.rate),
            baseline: per_sec(base.rate),
            ratio: format!("{ratio:.2}×"),
            target: min.map_or("—".into(), |m| format!("≥ {m}×")),
            met: min.map(|m| ratio >= m),
        });
    }

    pub fn detail(&mut self, text: String) {
        println!("    · {text}");
        self.details.push(text);
    }
}

fn met_text(met: Option<bool>) -> &'static str {
    match met {
        Some(true) => "met",
        Some(false) => "NOT met",
        None => "",
    }
}

pub fn per_sec(r: f64) -> String {
    if r >= 1e6 {
        format!("{:.2}M/s", r / 1e6)
    } else {
        format!("{:.1}k/s", r / 1e3)
    }
}

pub fn ms(us: f64) -> String {
    format!("{:.2} ms", us / 1000.0)
}

pub fn percentile(sorted: &[i64], q: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * q).round() as usize] as f64
}

pub fn machine(cfg: &Config) -> Vec<(&'static str, String)> {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            let line = t.lines().find(|l| l.starts_with("model name"))?;
            Some(line.split_once(':')?.1.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = thread::available_parallelism().map_or(0, |n| n.get());
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let server = format!(
        "{} ({})",
        server_version(&mut Server::with_module(cfg).conn()),
        cfg.server
    );
    let run = |program: &str, args: &[&str]| {
        Command::new(program)
            .args(args)
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map_or("unknown".into(), |o| {
                String::from_utf8_lossy(&o.stdout).trim().to_string()
            })
    };
    let load: Vec<&str> = load.split(' ').take(3).collect();
    vec![
        ("date", run("date", &["-u", "+%Y-%m-%d %H:%M UTC"])),
        ("mode", if cfg.quick { "quick" } else { "full" }.into()),
        (
            "machine",
            format!("{cores} cores, {cpu}, Linux {}", kernel.trim()),
        ),
        ("load average at start", load.join(" ")),
        ("server", server),
        ("dq", run("git", &["describe", "--always", "--dirty"])),
    ]
}

pub fn markdown(header: &[(&str, String)], report: &Report, wall: Duration) -> String {
    let mut md = String::from("# dq benchmark\n\n");
    for (k, v) in header {
        let _ = writeln!(md, "- {k}: {v}");
    }
    let _ = writeln!(md, "- wall time: {:.0} s\n", wall.as_secs_f64());
    md.push_str("| scenario | figure | dq | baseline | ratio | target | met |\n");
    md.push_str("|---|---|--:|--:|--:|---|---|\n");
    for r in &report.rows {
        let met = match r.met {
            Some(true) => "yes",
            Some(false) => "**no**",
            None => "",
        };
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {} | {} | {met} |",
            r.scenario, r.figure, r.value, r.baseline, r.ratio, r.target
        );
    }
    md.push_str("\nHow each figure was made:\n\n");
    for d in &report.details {
        let _ = writeln!(md, "- {d}");
    }
    if !report.lateness_us.is_empty() {
        md.push_str("\n![lateness histogram](lateness.svg)\n");
    }
    md
}
