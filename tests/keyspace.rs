//! Queue keys that reach a database without a DQ command are served too.

mod support;

use std::time::Duration;

use support::*;

fn ready(c: &mut redis::Connection, queue: &str) -> i64 {
    int(&field(&cmd(c, &format!("DQ.STATS {queue}")), "ready"))
}

#[test]
fn restored_keys_are_served_by_the_timer() {
    // What slot migration does: DUMP on one node, RESTORE on another.
    let source = Server::start();
    let target = Server::start();
    let mut s = source.conn();
    let mut t = target.conn();
    cmd(&mut s, "DQ.ADD q x DELAY 600");
    cmd(&mut s, "DQ.ADD q y");
    cmd(&mut s, "DQ.POP q LEASE 600");
    let Value::BulkString(dump) = cmd(&mut s, "DUMP q") else {
        panic!()
    };
    run(&mut t, &[b"RESTORE", b"q", b"0", &dump]).unwrap();
    assert!(wait_until(Duration::from_secs(5), || ready(&mut t, "q") == 2));
}

#[test]
fn moved_keys_are_served_in_their_new_database() {
    let server = Server::start();
    let mut c = server.conn();
    cmd(&mut c, "DQ.ADD q x DELAY 400");
    assert_eq!(int(&cmd(&mut c, "MOVE q 4")), 1);
    cmd(&mut c, "SELECT 4");
    assert!(wait_until(Duration::from_secs(5), || ready(&mut c, "q") == 1));
}

#[test]
fn swapped_databases_are_served() {
    let server = Server::start();
    let mut c = server.conn();
    cmd(&mut c, "DQ.ADD q x DELAY 400");
    cmd(&mut c, "SWAPDB 0 6");
    cmd(&mut c, "SELECT 6");
    assert!(wait_until(Duration::from_secs(5), || ready(&mut c, "q") == 1));
}

#[test]
fn a_big_backlog_does_not_starve_other_queues() {
    // A tick moves at most 16384 messages in at most 2 ms: 50,000 due at once
    // take many ticks, and a small queue due just after them must not wait
    // for all.
    let server = Server::start();
    let mut c = server.conn();
    let load = |c: &mut redis::Connection, queue: &str, n: u64, due: u64| {
        let mut pipe = redis::pipe();
        for i in 0..n {
            pipe.cmd("DQ.ADD")
                .arg(queue)
                .arg(i)
                .arg("AT")
                .arg(due)
                .ignore();
        }
        let () = pipe.query(c).unwrap();
    };
    // The backlog must be loaded before it falls due, however slow this
    // machine is right now: time a tenth of it first, and leave plenty.
    let probe = std::time::Instant::now();
    load(&mut c, "probe", 5_000, now_ms() + 3_600_000);
    let tenth = probe.elapsed().as_millis() as u64;
    cmd(&mut c, "DQ.PURGE probe");
    let due = now_ms() + (40 * tenth).max(3000);
    load(&mut c, "big", 50_000, due);
    cmd(&mut c, &format!("DQ.ADD small x AT {}", due + 5));
    let delayed = int(&field(&cmd(&mut c, "DQ.STATS big"), "delayed"));
    assert_eq!(delayed, 50_000, "the backlog was due before it was loaded");
    assert!(wait_until(Duration::from_secs(20), || ready(
        &mut c, "small"
    ) == 1));
    let left = int(&field(&cmd(&mut c, "DQ.STATS big"), "delayed"));
    assert!(left > 0, "small was served only after the whole backlog");
}

/// Messages per state across every queue of every database, by DQ.STATS:
/// what INFO dq must agree with.
fn recount(c: &mut redis::Connection) -> [i64; 4] {
    let mut sum = [0; 4];
    for db in 0..16 {
        cmd(c, &format!("SELECT {db}"));
        for q in match cmd(c, "DQ.QUEUES") {
            Value::Array(names) => names.iter().map(text).collect::<Vec<_>>(),
            other => panic!("{other:?}"),
        } {
            let stats = cmd(c, &format!("DQ.STATS {q}"));
            for (i, state) in ["delayed", "ready", "inflight", "dead"].iter().enumerate() {
                sum[i] += int(&field(&stats, state));
            }
        }
    }
    cmd(c, "SELECT 0");
    sum
}

fn census(c: &mut redis::Connection) -> [i64; 4] {
    ["delayed", "ready", "inflight", "dead"].map(|s| info_field(c, &format!("dq_messages_{s}")))
}

/// FLUSHDB, FLUSHALL, DEL, UNLINK, RENAME, COPY and EXPIRE of queues
/// behind dq's back, in several databases: no crash, INFO dq agrees with the keys, no
/// timer work is left for queues that are gone, and an untouched queue is
/// served throughout.
#[test]
fn keyspace_commands_on_queue_keys_leave_dq_consistent() {
    let server = Server::start();
    let mut c = server.conn();
    let fill = |c: &mut redis::Connection, q: &str| {
        cmd(c, &format!("DQ.ADD {q} x DELAY 150"));
        cmd(c, &format!("DQ.ADD {q} x TTL 60000"));
        cmd(c, &format!("DQ.ADD {q} x GROUP g"));
        cmd(c, &format!("DQ.ADD {q} x GROUP g"));
        cmd(c, &format!("DQ.POP {q} LEASE 150"));
    };
    for db in [0, 1, 2] {
        cmd(&mut c, &format!("SELECT {db}"));
        for q in ["a", "b", "c", "d", "keep"] {
            fill(&mut c, q);
        }
    }
    cmd(&mut c, "SELECT 1");
    cmd(&mut c, "FLUSHDB");
    cmd(&mut c, "SELECT 0");
    cmd(&mut c, "DEL a");
    cmd(&mut c, "RENAME b renamed");
    cmd(&mut c, "PEXPIRE c 50");
    cmd(&mut c, "COPY d d2");
    cmd(&mut c, "UNLINK d");
    assert_eq!(census(&mut c), recount(&mut c));

    // The untouched queues are served; leases and due times pass.
    for db in [0, 2] {
        cmd(&mut c, &format!("SELECT {db}"));
        assert!(wait_until(Duration::from_secs(5), || ready(&mut c, "keep") == 3));
    }
    cmd(&mut c, "SELECT 0");
    // The expired queue is gone once touched; then INFO agrees again.
    assert!(wait_until(Duration::from_secs(5), || {
        cmd(&mut c, "DBSIZE");
        int(&cmd(&mut c, "EXISTS c")) == 0 && census(&mut c) == recount(&mut c)
    }));
    // Scheduled: exactly the queues left, each holding a TTL.
    let mut queues = 0;
    for db in 0..3 {
        cmd(&mut c, &format!("SELECT {db}"));
        let Value::Array(names) = cmd(&mut c, "DQ.QUEUES") else {
            panic!()
        };
        queues += names.len() as i64;
    }
    cmd(&mut c, "SELECT 0");
    assert_eq!(queues, 8, "renamed, d2, keep; a, b, c, d and keep in db 2");
    assert_eq!(info_field(&mut c, "dq_queues_scheduled"), queues);
    assert_eq!(info_field(&mut c, "dq_queues"), queues);
    cmd(&mut c, "FLUSHALL");
    assert_eq!(census(&mut c), [0; 4]);
    assert_eq!(info_field(&mut c, "dq_queues"), 0);
    // A queue created afresh is served as before.
    cmd(&mut c, "DQ.ADD keep x DELAY 100");
    assert!(wait_until(Duration::from_secs(5), || ready(&mut c, "keep") == 1));
    assert!(wait_until(Duration::from_secs(5), || info_field(
        &mut c,
        "dq_queues_scheduled"
    ) == 0));
    assert_eq!(text(&cmd(&mut c, "PING")), "PONG");
}
