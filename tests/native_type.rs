//! A queue is one key of the module's own type, `dq--queue`: every Redis
//! mechanism acts on the whole queue with its usual meaning, and the value
//! survives every way the server saves, loads, copies and sends it.

use std::collections::HashSet;

use dq_testkit::*;

/// A queue with a message in every state, a group line, a TTL, a pending
/// replacement, its own settings and counters.
fn fill(c: &mut redis::Connection, q: &str) {
    for line in [
        "DQ.CONFIG {} SET MAXATTEMPTS 5 BACKOFF 1s,1m RETAIN 1h RETAINMAX 100",
        "DQ.ADD {} x ID done",
        "DQ.POP {}",
        "DQ.TOUCH {} done PROGRESS half",
        "DQ.DONE {} done its-result",
        "DQ.ADD {} x ID acked RETAIN 2h",
        "DQ.POP {}",
        "DQ.ACK {} acked",
        "DQ.ADD {} x ID dead MAXATTEMPTS 1",
        "DQ.POP {}",
        "DQ.NACK {} dead",
        "DQ.ADD {} x ID inflight",
        "DQ.POP {} LEASE 3600000",
        "DQ.ADD {} newer ID inflight PRIORITY 4",
        "DQ.ADD {} x ID g1 GROUP g",
        "DQ.ADD {} x ID g2 GROUP g",
        "DQ.ADD {} x ID ready PRIORITY -2 TTL 3600000",
        "DQ.ADD {} x ID delayed DELAY 3600000",
    ] {
        cmd(c, &line.replace("{}", q));
    }
}

fn value_digest(c: &mut redis::Connection, key: &str) -> String {
    match cmd(c, &format!("DEBUG DIGEST-VALUE {key}")) {
        Value::Array(d) => text(&d[0]),
        other => panic!("{other:?}"),
    }
}

fn names(v: &Value) -> Vec<String> {
    match v {
        Value::Array(items) => items.iter().map(text).collect(),
        other => panic!("{other:?}"),
    }
}

#[test]
fn the_queue_is_one_key_that_type_scan_and_object_know() {
    let server = Server::start();
    let mut c = server.conn();
    fill(&mut c, "orders");
    cmd(&mut c, "SET unrelated 1");
    assert_eq!(names(&cmd(&mut c, "KEYS *o*")), ["orders"]);
    assert_eq!(text(&cmd(&mut c, "TYPE orders")), "dq--queue");
    let Value::Array(page) = cmd(&mut c, "SCAN 0 TYPE dq--queue COUNT 100") else {
        panic!()
    };
    assert_eq!(names(&page[1]), ["orders"]);
    assert!(matches!(
        cmd(&mut c, "OBJECT IDLETIME orders"),
        Value::Int(_)
    ));
    assert!(matches!(
        cmd(&mut c, "OBJECT REFCOUNT orders"),
        Value::Int(_)
    ));
    // EXPIRE acts on the whole queue (seen with an hour to go, so that the
    // look comes before the end however slow the machine), and the queue is
    // gone when it ends.
    assert_eq!(int(&cmd(&mut c, "PEXPIRE orders 3600000")), 1);
    assert!((1..=3_600_000).contains(&int(&cmd(&mut c, "PTTL orders"))));
    assert_eq!(int(&cmd(&mut c, "PEXPIRE orders 100")), 1);
    assert!(wait_until(LONG, || {
        int(&cmd(&mut c, "EXISTS orders")) == 0
    }));
    assert_eq!(int(&field(&cmd(&mut c, "DQ.STATS orders"), "ready")), 0);
    assert_eq!(info_field(&mut c, "dq_queues"), 0);
}

#[test]
fn copy_rename_move_del_and_unlink_act_on_the_whole_queue() {
    let server = Server::start();
    let mut c = server.conn();
    fill(&mut c, "a");
    let digest = value_digest(&mut c, "a");
    assert_eq!(int(&cmd(&mut c, "COPY a b")), 1);
    assert_eq!(value_digest(&mut c, "b"), digest);
    // A copy is independent: taking from it leaves the original alone.
    assert_eq!(entries(&cmd(&mut c, "DQ.POP b COUNT 10")).len(), 2);
    assert_eq!(value_digest(&mut c, "a"), digest);
    cmd(&mut c, "RENAME a renamed");
    assert_eq!(int(&cmd(&mut c, "EXISTS a")), 0);
    assert_eq!(value_digest(&mut c, "renamed"), digest);
    assert_eq!(int(&cmd(&mut c, "MOVE renamed 3")), 1);
    cmd(&mut c, "SELECT 3");
    assert_eq!(value_digest(&mut c, "renamed"), digest);
    assert_eq!(
        text(&field(&cmd(&mut c, "DQ.GET renamed g2"), "waiting-for")),
        "g1"
    );
    assert_eq!(int(&cmd(&mut c, "DEL renamed")), 1);
    assert_eq!(cmd(&mut c, "DQ.GET renamed g2"), Value::Nil);
    cmd(&mut c, "SELECT 0");
    assert_eq!(int(&cmd(&mut c, "UNLINK b")), 1);
    assert_eq!(info_field(&mut c, "dq_queues"), 0);
    assert_eq!(int(&cmd(&mut c, "DBSIZE")), 0);
}

#[test]
fn dump_restore_and_migrate_carry_the_whole_queue() {
    let source = Server::start();
    let target = Server::start();
    let mut s = source.conn();
    let mut t = target.conn();
    fill(&mut s, "q");
    let digest = value_digest(&mut s, "q");
    let Value::BulkString(dump) = cmd(&mut s, "DUMP q") else {
        panic!("DUMP")
    };
    run(&mut s, &[b"RESTORE", b"again", b"0", &dump]).unwrap();
    assert_eq!(value_digest(&mut s, "again"), digest);
    migrate(&mut s, "q", target.port);
    assert_eq!(int(&cmd(&mut s, "EXISTS q")), 0);
    assert_eq!(value_digest(&mut t, "q"), digest);
    assert_eq!(
        cmd(&mut t, "DQ.CONFIG q"),
        cmd(&mut s, "DQ.CONFIG again"),
        "settings travel with the queue"
    );
}

/// DEBUG RELOAD (RDB save and load), and AOF rewrites with and without the
/// RDB preamble followed by a reload of the AOF, all reach the same value.
#[test]
fn reloads_and_aof_rewrites_keep_every_queue_exactly() {
    let server = Server::start_with(&["--appendonly", "yes"]);
    let mut c = server.conn();
    fill(&mut c, "q");
    cmd(&mut c, "DQ.CONFIG settings-only SET LEASE 5000");
    cmd(&mut c, "SELECT 5");
    fill(&mut c, "other-db");
    cmd(&mut c, "SELECT 0");
    let before = digest(&mut c);
    cmd(&mut c, "DEBUG RELOAD");
    assert_eq!(digest(&mut c), before, "DEBUG RELOAD");
    for preamble in ["no", "yes"] {
        cmd(
            &mut c,
            &format!("CONFIG SET aof-use-rdb-preamble {preamble}"),
        );
        cmd(&mut c, "BGREWRITEAOF");
        assert!(wait_until(LONG, || {
            let info = text(&cmd(&mut c, "INFO persistence"));
            info.contains("aof_rewrite_in_progress:0")
                && info.contains("aof_rewrite_scheduled:0")
                && info.contains("aof_last_bgrewrite_status:ok")
        }));
        cmd(&mut c, "DEBUG LOADAOF");
        assert_eq!(digest(&mut c), before, "AOF rewrite, preamble {preamble}");
    }
    // And the reloaded queue still works.
    assert_eq!(entries(&cmd(&mut c, "DQ.POP q COUNT 10")).len(), 2);
}

#[test]
fn memory_usage_is_within_a_tenth_of_the_memory_used() {
    let server = Server::start();
    let mut c = server.conn();
    cmd(&mut c, "DQ.ADD q seed");
    let before = used_memory(&mut c);
    let payload = "p".repeat(64);
    let mut pipe = redis::pipe();
    for n in 0..100_000 {
        pipe.cmd("DQ.ADD")
            .arg("q")
            .arg(&payload)
            .arg("ID")
            .arg(format!("order-{n}"))
            .arg("DELAY")
            .arg(3_600_000 + n)
            .ignore();
    }
    let () = pipe.query(&mut c).unwrap();
    let grown = used_memory(&mut c) - before;
    let usage = int(&cmd(&mut c, "MEMORY USAGE q SAMPLES 0"));
    let ratio = usage as f64 / grown as f64;
    assert!(
        (0.9..=1.1).contains(&ratio),
        "MEMORY USAGE {usage} for {grown} bytes used ({ratio:.3})"
    );
}

#[test]
fn dq_scan_returns_every_message_present_throughout_while_others_churn() {
    let server = Server::start();
    let mut c = server.conn();
    let mut pipe = redis::pipe();
    for n in 0..100_000 {
        let delay = if n % 3 == 0 { "0" } else { "3600000" };
        pipe.cmd("DQ.ADD")
            .arg("q")
            .arg("x")
            .arg("ID")
            .arg(format!("stay-{n}"))
            .arg("DELAY")
            .arg(delay)
            .ignore();
    }
    let () = pipe.query(&mut c).unwrap();
    let mut seen: HashSet<String> = HashSet::new();
    let mut ready_seen = 0;
    let mut cursor = "0".to_string();
    let mut calls = 0;
    loop {
        let Value::Array(reply) = cmd(&mut c, &format!("DQ.SCAN q {cursor} COUNT 1000")) else {
            panic!()
        };
        cursor = text(&reply[0]);
        for (id, _, _) in entries_with_time(&reply[1]) {
            if id.starts_with("stay-") {
                seen.insert(id);
            }
        }
        // Churn between calls: messages come and go.
        for k in 0..50 {
            let id = format!("churn-{calls}-{k}");
            cmd(&mut c, &format!("DQ.ADD q x ID {id}"));
            if k % 2 == 0 {
                cmd(&mut c, &format!("DQ.CANCEL q {id}"));
            }
        }
        calls += 1;
        if cursor == "0" {
            break;
        }
    }
    assert_eq!(seen.len(), 100_000);
    assert!(calls >= 100, "{calls} calls");
    // STATE keeps to one state.
    let mut cursor = "0".to_string();
    loop {
        let Value::Array(reply) = cmd(
            &mut c,
            &format!("DQ.SCAN q {cursor} STATE READY COUNT 5000"),
        ) else {
            panic!()
        };
        cursor = text(&reply[0]);
        for (id, _, _) in entries_with_time(&reply[1]) {
            let state = text(&field(&cmd(&mut c, &format!("DQ.GET q {id}")), "state"));
            assert_eq!(state, "ready", "{id}");
            ready_seen += id.starts_with("stay-") as usize;
        }
        if cursor == "0" {
            break;
        }
    }
    assert_eq!(ready_seen, 33_334);
    assert_eq!(
        cmd(&mut c, "DQ.SCAN missing 0"),
        Value::Array(vec![Value::BulkString(b"0".to_vec()), Value::Array(vec![])])
    );
}

/// PEEK's and SCAN's entries: `[id, payload, attempt, time]`.
fn entries_with_time(v: &Value) -> Vec<(String, String, i64)> {
    match v {
        Value::Array(items) => items
            .iter()
            .map(|e| match e {
                Value::Array(f) => (text(&f[0]), text(&f[1]), int(&f[2])),
                other => panic!("{other:?}"),
            })
            .collect(),
        other => panic!("{other:?}"),
    }
}

#[test]
fn add_is_refused_where_the_server_may_evict_a_whole_queue() {
    let server = Server::start();
    let mut c = server.conn();
    for n in 0..3 {
        cmd(&mut c, &format!("DQ.ADD q x ID kept-{n}"));
    }
    cmd(&mut c, "CONFIG SET maxmemory 1gb");
    for policy in ["allkeys-lru", "allkeys-lfu", "allkeys-random"] {
        cmd(&mut c, &format!("CONFIG SET maxmemory-policy {policy}"));
        let before = digest(&mut c);
        // The policy is re-read at most every 100 ms.
        let mut err = String::new();
        assert!(wait_until(LONG, || {
            err = run(&mut c, &[b"DQ.ADD", b"q", b"x"])
                .err()
                .unwrap_or_default();
            err.contains(policy)
        }));
        assert!(err.contains("may evict a whole queue"), "{err}");
        assert_eq!(digest(&mut c), before, "{policy}");
        // What frees or reads still works.
        let popped = entries(&cmd(&mut c, "DQ.POP q"));
        assert_eq!(int(&cmd(&mut c, &format!("DQ.ACK q {}", popped[0].0))), 1);
    }
    for policy in ["volatile-lru", "volatile-ttl", "noeviction"] {
        cmd(&mut c, &format!("CONFIG SET maxmemory-policy {policy}"));
        assert!(wait_until(LONG, || {
            run(&mut c, &[b"DQ.ADD", b"q", b"x"]).is_ok()
        }));
    }
}

/// Writes that change nothing create no key: an absent queue stays absent.
#[test]
fn commands_on_an_absent_queue_create_nothing() {
    let server = Server::start();
    let mut c = server.conn();
    for line in [
        "DQ.ADD q x XX ID a",
        "DQ.POP q",
        "DQ.POP q BLOCK 1",
        "DQ.ACK q a",
        "DQ.NACK q a",
        "DQ.TOUCH q a",
        "DQ.CANCEL q a",
        "DQ.REDRIVE q",
        "DQ.PURGE q",
        "DQ.PURGE q DEAD",
        "DQ.GET q a",
        "DQ.PEEK q READY",
        "DQ.SCAN q 0",
        "DQ.STATS q",
        "DQ.CONFIG q",
    ] {
        cmd(&mut c, line);
        assert_eq!(int(&cmd(&mut c, "EXISTS q")), 0, "{line}");
    }
    assert_eq!(info_field(&mut c, "dq_queues"), 0);
    // What does create it: ADD, and CONFIG SET (a queue of settings only).
    cmd(&mut c, "DQ.CONFIG q SET LEASE 5000");
    assert_eq!(text(&cmd(&mut c, "TYPE q")), "dq--queue");
}

#[test]
fn dq_apply_is_for_replication_and_the_aof_only() {
    let server = Server::start();
    let mut c = server.conn();
    let before = digest(&mut c);
    let err = cmd_err(&mut c, "DQ.APPLY q 1700000000000 16 ADD x ID forged");
    assert!(err.contains("replication and the AOF"), "{err}");
    assert_eq!(digest(&mut c), before);
    assert_eq!(int(&cmd(&mut c, "EXISTS q")), 0);
}
