//! Every RDB encoding of the queue type stays readable: a file saved by
//! the build of each older encoding is loaded by today's, and what it held
//! is there and goes on working. (The multi-key layout before the native
//! type is `upgrade.rs`'s.)

use std::path::PathBuf;

use dq_testkit::*;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

/// Encoding version 1 (before schedules), saved by `make-v1-rdb`.
#[test]
fn encoding_version_1_loads_and_saves_as_today() {
    let server = Server::start_from_rdb(&fixture("queues-v1.rdb"), &[]);
    let mut c = server.conn();
    let config = cmd(&mut c, "DQ.CONFIG orders");
    assert_eq!(int(&field(&config, "lease-ms")), 60_000);
    assert_eq!(int(&field(&config, "max-attempts")), 7);
    assert_eq!(text(&field(&config, "backoff")), "15s,3m");
    let get = |c: &mut redis::Connection, id: &str| cmd(c, &format!("DQ.GET orders {id}"));
    let inflight = get(&mut c, "inflight");
    assert_eq!(text(&field(&inflight, "state")), "inflight");
    assert_eq!(int(&field(&inflight, "attempt")), 1);
    assert_eq!(int(&field(&inflight, "replacement-pending")), 1);
    assert_eq!(int(&field(&inflight, "max-attempts")), 9);
    let dead = get(&mut c, "dead");
    assert_eq!(text(&field(&dead, "state")), "dead");
    assert_eq!(text(&field(&dead, "last-error")), "boom");
    assert_eq!(text(&field(&get(&mut c, "delayed"), "state")), "delayed");
    assert_eq!(int(&field(&get(&mut c, "ready"), "priority")), 5);
    assert_eq!(text(&field(&get(&mut c, "g2"), "waiting-for")), "g1");
    let stats = cmd(&mut c, "DQ.STATS orders");
    assert_eq!(
        [
            "delayed",
            "ready",
            "inflight",
            "dead",
            "added",
            "delivered",
            "nacked"
        ]
        .map(|f| int(&field(&stats, f))),
        [2, 2, 1, 1, 7, 2, 1]
    );
    assert_eq!(int(&field(&stats, "schedules")), 0);
    cmd(&mut c, "SELECT 2");
    assert_eq!(
        text(&field(&cmd(&mut c, "DQ.GET other solo"), "state")),
        "delayed"
    );
    cmd(&mut c, "SELECT 0");
    // It goes on working, and saves in today's encoding with a schedule.
    let popped = entries(&cmd(&mut c, "DQ.POP orders COUNT 5"));
    assert_eq!(popped.len(), 2, "ready and g1");
    cmd(
        &mut c,
        "DQ.SCHEDULE orders nightly x EVERY 1d START 4102444800000",
    );
    let before = digest(&mut c);
    cmd(&mut c, "DEBUG RELOAD");
    assert_eq!(digest(&mut c), before);
    assert_eq!(list(&cmd(&mut c, "DQ.SCHEDULES orders")).len(), 1);
}

/// Encoding version 2 (before outcomes), saved by `make-v2-rdb`: it loads
/// with nothing done and no retention, and goes on to keep results.
#[test]
fn encoding_version_2_loads_and_keeps_results_from_then_on() {
    let server = Server::start_from_rdb(&fixture("queues-v2.rdb"), &[]);
    let mut c = server.conn();
    let config = cmd(&mut c, "DQ.CONFIG orders");
    assert_eq!(int(&field(&config, "lease-ms")), 60_000);
    assert_eq!(int(&field(&config, "max-attempts")), 7);
    assert_eq!(text(&field(&config, "backoff")), "15s,3m");
    assert_eq!(text(&field(&config, "rate")), "100/1s");
    assert_eq!(int(&field(&config, "max-inflight")), 50);
    assert_eq!(int(&field(&config, "retain-ms")), 0);
    assert_eq!(field(&config, "retain-max"), Value::Nil);
    let get = |c: &mut redis::Connection, id: &str| cmd(c, &format!("DQ.GET orders {id}"));
    let inflight = get(&mut c, "inflight");
    assert_eq!(text(&field(&inflight, "state")), "inflight");
    assert_eq!(int(&field(&inflight, "replacement-pending")), 1);
    assert_eq!(text(&field(&inflight, "backoff")), "fixed:5s");
    assert_eq!(field(&inflight, "progress"), Value::Nil);
    assert_eq!(field(&inflight, "result"), Value::Nil);
    assert_eq!(text(&field(&get(&mut c, "dead"), "last-error")), "boom");
    assert_eq!(text(&field(&get(&mut c, "g2"), "waiting-for")), "g1");
    let stats = cmd(&mut c, "DQ.STATS orders");
    assert_eq!(
        ["delayed", "ready", "inflight", "dead", "done", "schedules"]
            .map(|f| int(&field(&stats, f))),
        [2, 2, 1, 1, 0, 1]
    );
    assert_eq!(int(&field(&cmd(&mut c, "DQ.STATS paused"), "paused")), 1);
    // It goes on working, and saves in today's encoding with a result.
    cmd(&mut c, "DQ.CONFIG orders SET RETAIN 1d");
    let popped = entries(&cmd(&mut c, "DQ.POP orders COUNT 5"));
    assert_eq!(popped.len(), 2, "ready and g1");
    assert_eq!(int(&cmd(&mut c, "DQ.DONE orders ready fine")), 1);
    let before = digest(&mut c);
    cmd(&mut c, "DEBUG RELOAD");
    assert_eq!(digest(&mut c), before);
    assert_eq!(
        list(&cmd(&mut c, "DQ.WAIT orders ready")),
        vec![
            Value::BulkString(b"done".to_vec()),
            Value::BulkString(b"fine".to_vec())
        ]
    );
}
