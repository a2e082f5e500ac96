//! Queue keys that reach a database without a DQ command are served too.

mod support;

use std::time::Duration;

use support::*;

fn queue_keys(c: &mut redis::Connection, queue: &str) -> Vec<String> {
    let Value::Array(keys) = cmd(c, &format!("KEYS dq:*:{queue}:*")) else {
        panic!()
    };
    keys.iter().map(text).collect()
}

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
    for key in queue_keys(&mut s, "q") {
        let Value::BulkString(dump) = cmd(&mut s, &format!("DUMP {key}")) else {
            panic!()
        };
        run(&mut t, &[b"RESTORE", key.as_bytes(), b"0", &dump]).unwrap();
    }
    assert!(wait_until(Duration::from_secs(5), || ready(&mut t, "q") == 2));
}

#[test]
fn moved_keys_are_served_in_their_new_database() {
    let server = Server::start();
    let mut c = server.conn();
    cmd(&mut c, "DQ.ADD q x DELAY 400");
    for key in queue_keys(&mut c, "q") {
        cmd(&mut c, &format!("MOVE {key} 4"));
    }
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
    // A tick moves at most 1024 messages: 50,000 due at once take dozens of
    // ticks, and a small queue due just after them must not wait for all.
    let server = Server::start();
    let mut c = server.conn();
    let due = now_ms() + 3000;
    let mut pipe = redis::pipe();
    for i in 0..50_000 {
        pipe.cmd("DQ.ADD")
            .arg("big")
            .arg(i)
            .arg("AT")
            .arg(due)
            .ignore();
    }
    let () = pipe.query(&mut c).unwrap();
    cmd(&mut c, &format!("DQ.ADD small x AT {}", due + 5));
    let delayed = int(&field(&cmd(&mut c, "DQ.STATS big"), "delayed"));
    assert_eq!(delayed, 50_000, "the backlog was due before it was loaded");
    assert!(wait_until(Duration::from_secs(20), || ready(
        &mut c, "small"
    ) == 1));
    let left = int(&field(&cmd(&mut c, "DQ.STATS big"), "delayed"));
    assert!(left > 0, "small was served only after the whole backlog");
}
