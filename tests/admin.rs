//! PEEK, PURGE, QUEUES, STATS and CONFIG: looking at and managing queues.

use dq_testkit::*;

/// A queue with two messages in each state: delayed, ready, inflight, dead.
fn every_state(c: &mut redis::Connection, q: &str) {
    for id in ["dead1", "dead2"] {
        cmd(c, &format!("DQ.ADD {q} {id}-body ID {id} MAXATTEMPTS 1"));
        cmd(c, &format!("DQ.POP {q}"));
        cmd(c, &format!("DQ.NACK {q} {id}"));
    }
    cmd(c, &format!("DQ.ADD {q} i1-body ID inflight1"));
    cmd(c, &format!("DQ.ADD {q} i2-body ID inflight2"));
    cmd(c, &format!("DQ.POP {q} COUNT 2"));
    cmd(c, &format!("DQ.ADD {q} r1-body ID ready1"));
    cmd(c, &format!("DQ.ADD {q} r2-body ID ready2"));
    cmd(c, &format!("DQ.ADD {q} d2-body ID delayed2 DELAY 7200000"));
    cmd(c, &format!("DQ.ADD {q} d1-body ID delayed1 DELAY 3600000"));
}

fn peek_ids(c: &mut redis::Connection, line: &str) -> Vec<String> {
    let Value::Array(items) = cmd(c, line) else {
        panic!("{line}")
    };
    items
        .iter()
        .map(|e| match e {
            Value::Array(f) if f.len() == 5 => text(&f[0]),
            other => panic!("not a PEEK entry: {other:?}"),
        })
        .collect()
}

#[test]
fn peek_shows_each_state_in_order_without_taking() {
    let server = Server::start();
    let mut c = server.conn();
    every_state(&mut c, "q");
    assert_eq!(
        peek_ids(&mut c, "DQ.PEEK q DELAYED"),
        ["delayed1", "delayed2"]
    );
    assert_eq!(peek_ids(&mut c, "DQ.PEEK q ready"), ["ready1", "ready2"]);
    assert_eq!(peek_ids(&mut c, "DQ.PEEK q INFLIGHT COUNT 1").len(), 1);
    assert_eq!(peek_ids(&mut c, "DQ.PEEK q DEAD"), ["dead1", "dead2"]);
    // Entry: id, payload, attempt, the state's time.
    let Value::Array(items) = cmd(&mut c, "DQ.PEEK q DEAD COUNT 1") else {
        panic!()
    };
    let Value::Array(entry) = &items[0] else {
        panic!()
    };
    assert_eq!(text(&entry[1]), "dead1-body");
    assert_eq!(int(&entry[2]), 1);
    let died_at = int(&field(&cmd(&mut c, "DQ.GET q dead1"), "died-at"));
    assert_eq!(int(&entry[3]), died_at);
    let Value::Array(items) = cmd(&mut c, "DQ.PEEK q DELAYED") else {
        panic!()
    };
    let Value::Array(entry) = &items[0] else {
        panic!()
    };
    assert_eq!(
        int(&entry[3]),
        int(&field(&cmd(&mut c, "DQ.GET q delayed1"), "due-at"))
    );
    assert_eq!(cmd(&mut c, "DQ.PEEK empty READY"), Value::Array(vec![]));
    assert_eq!(
        int(&field(&cmd(&mut c, "DQ.STATS q"), "ready")),
        2,
        "nothing taken"
    );
}

#[test]
fn purge_each_state_then_the_whole_queue() {
    let server = Server::start();
    let mut c = server.conn();
    every_state(&mut c, "q");
    let counts = |c: &mut redis::Connection| {
        let s = cmd(c, "DQ.STATS q");
        ["delayed", "ready", "inflight", "dead"].map(|f| int(&field(&s, f)))
    };
    assert_eq!(counts(&mut c), [2, 2, 2, 2]);
    assert_eq!(int(&cmd(&mut c, "DQ.PURGE q DEAD")), 2);
    assert_eq!(counts(&mut c), [2, 2, 2, 0]);
    assert_eq!(cmd(&mut c, "DQ.GET q dead1"), Value::Nil);
    assert_eq!(int(&cmd(&mut c, "DQ.PURGE q inflight")), 2);
    assert_eq!(int(&cmd(&mut c, "DQ.ACK q inflight1")), 0);
    assert_eq!(int(&cmd(&mut c, "DQ.PURGE q READY")), 2);
    assert_eq!(counts(&mut c), [2, 0, 0, 0]);
    assert_eq!(int(&cmd(&mut c, "DQ.PURGE q DEAD")), 0);
    cmd(&mut c, "DQ.CONFIG q SET MAXATTEMPTS 4");
    cmd(&mut c, "DQ.ADD q x ID extra");
    assert_eq!(int(&cmd(&mut c, "DQ.PURGE q")), 3);
    assert_eq!(counts(&mut c), [0, 0, 0, 0]);
    // Counters and settings stay.
    let stats = cmd(&mut c, "DQ.STATS q");
    assert_eq!(int(&field(&stats, "purged")), 9);
    assert_eq!(int(&field(&stats, "added")), 9);
    assert_eq!(
        text(&field(&cmd(&mut c, "DQ.CONFIG q"), "max-attempts-from")),
        "queue"
    );
    // DQ.SCAN finds nothing left.
    assert_eq!(
        cmd(&mut c, "DQ.SCAN q 0 COUNT 100"),
        Value::Array(vec![Value::BulkString(b"0".to_vec()), Value::Array(vec![])])
    );
}

#[test]
fn queues_lists_every_queue_of_the_database() {
    let server = Server::start();
    let mut c = server.conn();
    assert_eq!(cmd(&mut c, "DQ.QUEUES"), Value::Array(vec![]));
    for q in ["orders", "{tag}name", "}{", "a:b:c"] {
        cmd(&mut c, &format!("DQ.ADD {q} x"));
    }
    cmd(&mut c, "DQ.CONFIG only-config SET LEASE 5");
    cmd(&mut c, "SET orders-not-a-queue 1");
    let Value::Array(names) = cmd(&mut c, "DQ.QUEUES") else {
        panic!()
    };
    let names: Vec<String> = names.iter().map(text).collect();
    assert_eq!(names, ["a:b:c", "only-config", "orders", "{tag}name", "}{"]);
    cmd(&mut c, "SELECT 1");
    assert_eq!(cmd(&mut c, "DQ.QUEUES"), Value::Array(vec![]));
    assert!(cmd_err(&mut c, "DQ.QUEUES extra").contains("unknown option 'extra'"));
}

#[test]
fn queues_match_a_pattern_and_carry_their_stats() {
    let server = Server::start();
    let mut c = server.conn();
    for q in ["tenant-1", "tenant-2", "tenant-10", "other"] {
        cmd(&mut c, &format!("DQ.ADD {q} x"));
    }
    cmd(&mut c, "DQ.ADD tenant-2 y DELAY 60000");
    cmd(&mut c, "DQ.ADD tenant-2 z ID doomed");
    cmd(&mut c, "DQ.POP tenant-2 COUNT 5");
    cmd(&mut c, "DQ.NACK tenant-2 doomed DEAD");
    let names = |v: Value| -> Vec<String> { list(&v).iter().map(text).collect() };
    assert_eq!(
        names(cmd(&mut c, "DQ.QUEUES MATCH tenant-?")),
        ["tenant-1", "tenant-2"]
    );
    assert_eq!(
        names(cmd(&mut c, "DQ.QUEUES MATCH tenant-[12]*")),
        ["tenant-1", "tenant-10", "tenant-2"]
    );
    assert!(list(&cmd(&mut c, "DQ.QUEUES MATCH nothing*")).is_empty());
    // RESP2: name, record, name, record; each record is DQ.STATS's.
    let flat = list(&cmd(&mut c, "DQ.QUEUES MATCH tenant-* WITHSTATS"));
    assert_eq!(flat.len(), 6);
    assert_eq!(text(&flat[2]), "tenant-10");
    assert_eq!(text(&flat[4]), "tenant-2");
    // The same as DQ.STATS, but for the two fields that move with the
    // clock (the oldest ready message's age and the next due time).
    let steady = |v: &Value| -> Vec<(String, Value)> {
        record(v)
            .into_iter()
            .filter(|(f, _)| f != "oldest-ready-age-ms" && f != "next-due-at")
            .collect()
    };
    for pair in flat.chunks(2) {
        let one = cmd(&mut c, &format!("DQ.STATS {}", text(&pair[0])));
        assert_eq!(steady(&pair[1]), steady(&one), "{}", text(&pair[0]));
    }
    let tenant2 = &flat[5];
    assert_eq!(int(&field(tenant2, "delayed")), 1);
    assert_eq!(int(&field(tenant2, "dead")), 1);
    // RESP3: a map of name to map.
    let mut c3 = server.conn_resp3();
    let Value::Map(pairs) = cmd(&mut c3, "DQ.QUEUES MATCH other WITHSTATS") else {
        panic!("not a map under RESP3")
    };
    assert_eq!(pairs.len(), 1);
    assert_eq!(text(&pairs[0].0), "other");
    let Value::Map(fields) = &pairs[0].1 else {
        panic!("a queue's stats are a map under RESP3")
    };
    assert!(fields
        .iter()
        .any(|(k, v)| text(k) == "ready" && int(v) == 1));
    // A queue deleted behind dq's back is not listed.
    cmd(&mut c, "DEL other");
    assert!(!names(cmd(&mut c, "DQ.QUEUES")).contains(&"other".to_string()));
}

#[test]
fn stats_report_the_oldest_ready_age_and_the_next_due_time() {
    let server = Server::start();
    let mut c = server.conn();
    let stats = cmd(&mut c, "DQ.STATS q");
    assert_eq!(field(&stats, "oldest-ready-age-ms"), Value::Nil);
    assert_eq!(field(&stats, "next-due-at"), Value::Nil);
    // Added already due (even long ago): it waits from its ADD, so its age
    // is at most the time since just before the ADD.
    let before = now_ms();
    cmd(&mut c, "DQ.ADD q x AT 1 PRIORITY 1");
    let age = int(&field(&cmd(&mut c, "DQ.STATS q"), "oldest-ready-age-ms"));
    let since = (now_ms() - before) as i64;
    assert!(
        (0..=since).contains(&age),
        "{age} ms old, added {since} ms ago"
    );
    let added = now_ms();
    cmd(&mut c, "DQ.ADD q x PRIORITY 5");
    assert!(wait_until(LONG, || {
        int(&field(&cmd(&mut c, "DQ.STATS q"), "oldest-ready-age-ms")) >= 200
    }));
    cmd(&mut c, "DQ.ADD q x DELAY 600000");
    let next = int(&field(&cmd(&mut c, "DQ.STATS q"), "next-due-at")) as u64;
    assert!(next >= added + 600_000);
}

#[test]
fn a_replica_serves_reads_refuses_writes_and_matches_the_master() {
    let master = Server::start_with(&["--repl-diskless-sync-delay", "0"]);
    let port = master.port.to_string();
    let replica = Server::start_with(&["--replicaof", "127.0.0.1", &port]);
    let mut m = master.conn();
    let mut r = replica.conn();
    // The queue's lease, which the POPs in every_state take: long enough
    // that inflight1 and inflight2 are still in flight for the NACK and
    // TOUCH below, however slow the machine.
    cmd(&mut m, "DQ.CONFIG q SET LEASE 4321000");
    every_state(&mut m, "q");
    cmd(&mut m, "WAIT 1 5000");
    assert!(dq_testkit::wait_until(LONG, || {
        digest(&mut m) == digest(&mut r)
    }));
    assert_eq!(peek_ids(&mut r, "DQ.PEEK q DEAD"), ["dead1", "dead2"]);
    // The replica counts what replication brings, for INFO.
    let info = text(&cmd(&mut r, "INFO dq"));
    assert!(info.contains("dq_messages_dead:2\r\n"), "{info}");
    assert!(info.contains("dq_queues:1\r\n"), "{info}");
    assert_eq!(int(&field(&cmd(&mut r, "DQ.STATS q"), "dead")), 2);
    for line in [
        "DQ.CONFIG q",
        "DQ.CONFIG q SET LEASE 1",
        "DQ.NACK q inflight1",
        "DQ.REDRIVE q",
        "DQ.PURGE q",
        "DQ.TOUCH q inflight1",
    ] {
        assert!(cmd_err(&mut r, line).starts_with("READONLY"), "{line}");
    }
    // Every new write path replicates as its effects.
    assert_eq!(text(&cmd(&mut m, "DQ.NACK q inflight1 DELAY 0")), "ready");
    assert!(matches!(
        cmd(&mut m, "DQ.TOUCH q inflight2 LEASE 60000"),
        Value::Int(_)
    ));
    cmd(&mut m, "DQ.REDRIVE q COUNT 1");
    cmd(&mut m, "DQ.PURGE q DELAYED");
    cmd(&mut m, "DQ.CONFIG q SET BACKOFF 1s,2s LEASE DEFAULT");
    cmd(&mut m, "DQ.ADD q x ID short-lived TTL 50");
    assert!(dq_testkit::wait_until(LONG, || {
        text(&field(&cmd(&mut m, "DQ.GET q short-lived"), "state")) == "dead"
    }));
    cmd(&mut m, "WAIT 1 5000");
    assert!(dq_testkit::wait_until(LONG, || {
        digest(&mut m) == digest(&mut r)
    }));
}
