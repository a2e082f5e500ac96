//! Scenario 10, server lines: scenario 1's first figure on each server
//! line found.

use dq_testkit::{now_ms, Server};

use super::add::{dq_add_run, zadd_run};
use crate::harness::{
    best_of, busy, info_u64, server_version, BenchServer, Config, Scale, BATCH, HOUR_MS,
};
use crate::report::{Report, Row};

/// Whether `program` can be started: a path that exists, or a name found
/// on PATH.
pub fn installed(program: &str) -> bool {
    if program.contains('/') {
        return std::path::Path::new(program).is_file();
    }
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(program).is_file()))
}

/// Scenario 1's first figure, DQ.ADD DELAY 1h against raw ZADD, on each
/// server line the tests run on, each against its own ZADD.
pub fn server_lines(cfg: &Config, s: &Scale, report: &mut Report) {
    let d13 = |name: &str| cfg.debian13.join(name).to_string_lossy().into_owned();
    let lines = [
        ("Redis 7.0", "redis-server".to_string()),
        ("Valkey 8.0", cfg.valkey.clone()),
        ("Redis 8.0", d13("redis-server")),
        ("Valkey 8.1", d13("valkey-server")),
    ];
    let scenario = "10 lines";
    let mut measured = Vec::new();
    for (line, program) in lines {
        if !installed(&program) {
            report.push(Row {
                scenario,
                figure: format!("DQ.ADD DELAY 1h vs raw ZADD, {line}"),
                value: "—".into(),
                baseline: "—".into(),
                ratio: "—".into(),
                target: format!("skipped: no {program}"),
                met: None,
            });
            continue;
        }
        let cfg = Config {
            quick: cfg.quick,
            server: program.clone(),
            out: cfg.out.clone(),
            only: None,
            valkey: cfg.valkey.clone(),
            debian13: cfg.debian13.clone(),
        };
        let (version, skips) = {
            let server = Server::with_module(&cfg);
            let mut con = server.conn();
            let skips = info_u64(&mut con, "dq", "dq_replicate_skips_lookup");
            (server_version(&mut con), skips)
        };
        let due = now_ms() + HOUR_MS;
        let [dq, zadd] = best_of(
            s.rounds,
            [&|| dq_add_run(&cfg, s, Some(HOUR_MS)), &|| {
                zadd_run(Server::plain(&cfg), s, due)
            }],
        );
        let figure = format!("DQ.ADD DELAY 1h vs raw ZADD, {version}, skips lookup {skips}");
        report.versus(scenario, &figure, dq, zadd, Some(1.0));
        measured.push(format!(
            "{line} ({program}): {}",
            busy(&[("DQ.ADD DELAY", dq), ("ZADD", zadd)])
        ));
    }
    report.detail(format!(
        "lines: as the first figure of 1 (best of {} rounds of {} messages, {} connections, \
         pipelines of {BATCH}), on each server line, against raw ZADD on a server of the same \
         line without the module; `skips lookup` is INFO dq's dq_replicate_skips_lookup (1: \
         propagation skips the per-call command lookup, Valkey ≥ 8.1); a line whose binary \
         is absent is skipped; {}",
        s.rounds,
        s.add_n,
        s.conns,
        measured.join("; ")
    ));
}
