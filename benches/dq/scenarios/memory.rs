//! Scenario 6, memory: bytes per delayed message against a ZSET + HASH.

use dq_testkit::{now_ms, Server};
use redis::Pipeline;

use crate::harness::{drive, payload, BenchServer, Config, Scale, HOUR_MS};
use crate::report::{Report, Row};

pub fn memory(cfg: &Config, s: &Scale, report: &mut Report) {
    let n = s.mem_n;
    let id = |i: usize| format!("msg-{i:010}");
    let per_message = |server: Server, add: &(dyn Fn(&mut Pipeline, usize) + Sync)| {
        let before = server.info_u64("memory", "used_memory");
        drive(server.conns(s.conns), n, add);
        (server.info_u64("memory", "used_memory") - before) as f64 / n as f64
    };
    let dq = per_message(Server::with_module(cfg), &|p, i| {
        p.cmd("DQ.ADD")
            .arg("q")
            .arg(payload(i))
            .arg("ID")
            .arg(id(i));
        p.arg("DELAY").arg(HOUR_MS);
    });
    let due = now_ms() + HOUR_MS;
    let bare = per_message(Server::plain(cfg), &|p, i| {
        p.cmd("ZADD").arg("delayed").arg(due).arg(id(i));
        p.cmd("HSET").arg("payloads").arg(id(i)).arg(payload(i));
    });
    report.push(Row {
        scenario: "6 memory",
        figure: format!("bytes/message, 64-byte payload, {n} delayed"),
        value: format!("{dq:.0} B"),
        baseline: format!("{bare:.0} B"),
        ratio: format!("{:.2}×", dq / bare),
        target: "≤ 0.8×".into(),
        met: Some(dq / bare <= 0.8),
    });
    report.detail(format!(
        "memory: used_memory delta / N on fresh servers; baseline: one ZSET (id by due time) \
         and one HASH (id → payload) on a server without the module; ids of {} bytes",
        id(0).len()
    ));
}
