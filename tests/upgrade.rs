//! A server holding queues in the multi-key layout (ZSET and HASH keys per
//! queue) converts them into one key each when the module finds them: the
//! fixture `tests/fixtures/multi-key.rdb` was saved by the last build of the multi-key layout
//! (see `tests/fixtures/make-multi-key-rdb`), and the values checked here are
//! what that build's DQ.GET, DQ.STATS and DQ.CONFIG answered for it.

use std::path::PathBuf;

use dq_testkit::*;

fn fixture() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/multi-key.rdb")
}

fn get(c: &mut redis::Connection, q: &str, id: &str) -> Vec<(String, String)> {
    record(&cmd(c, &format!("DQ.GET {q} {id}")))
        .into_iter()
        .map(|(k, v)| {
            let v = match v {
                Value::Nil => String::new(),
                Value::Int(n) => n.to_string(),
                other => text(&other),
            };
            (k, v)
        })
        .collect()
}

fn has(fields: &[(String, String)], want: &[(&str, &str)]) {
    for (name, value) in want {
        let got = fields
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str());
        assert_eq!(got, Some(*value), "{name} in {fields:?}");
    }
}

/// Every message, state, attempt, lease, group, TTL, death, pending
/// replacement, counter and setting of the fixture, as the multi-key build showed them.
fn check_converted(c: &mut redis::Connection) {
    let mut keys: Vec<String> = match cmd(c, "KEYS *") {
        Value::Array(k) => k.iter().map(text).collect(),
        other => panic!("{other:?}"),
    };
    keys.sort();
    assert_eq!(keys, ["orders", "plain"], "the old keys are gone");
    assert_eq!(text(&cmd(c, "TYPE orders")), "dq--queue");
    assert_eq!(text(&cmd(c, "GET plain")), "untouched");
    let q = "orders";
    has(
        &get(c, q, "inflight"),
        &[
            ("state", "inflight"),
            ("payload", "leased"),
            ("attempt", "1"),
            ("due-at", "1795461586091"),
            ("lease-deadline", "3795461586098"),
            ("added-at", "1795461586091"),
            ("replacement-pending", "1"),
            ("max-attempts", "9"),
            ("max-attempts-from", "message"),
        ],
    );
    has(
        &get(c, q, "retried"),
        &[
            ("state", "delayed"),
            ("attempt", "1"),
            ("due-at", "3795461586127"),
            ("max-attempts", "7"),
            ("max-attempts-from", "queue"),
            ("backoff", "15s,3m"),
            ("backoff-from", "message"),
        ],
    );
    has(
        &get(c, q, "dead"),
        &[
            ("state", "dead"),
            ("attempt", "1"),
            ("dead-reason", "nack"),
            ("died-at", "1795461586149"),
            ("max-attempts", "1"),
        ],
    );
    has(
        &get(c, q, "delayed"),
        &[
            ("state", "delayed"),
            ("due-at", "4102444800000"),
            ("attempt", "0"),
        ],
    );
    has(
        &get(c, q, "ready"),
        &[
            ("state", "ready"),
            ("priority", "5"),
            ("expires-at", "3795461586163"),
        ],
    );
    has(
        &get(c, q, "g1"),
        &[("state", "ready"), ("group", "g"), ("waiting-for", "")],
    );
    has(
        &get(c, q, "g2"),
        &[("state", "delayed"), ("group", "g"), ("waiting-for", "g1")],
    );
    let stats = cmd(c, "DQ.STATS orders");
    for (name, value) in [
        ("delayed", 3),
        ("ready", 2),
        ("inflight", 1),
        ("dead", 1),
        ("added", 8),
        ("delivered", 3),
        ("acked", 0),
        ("nacked", 2),
        ("retried", 1),
        ("dead-lettered", 1),
    ] {
        assert_eq!(int(&field(&stats, name)), value, "{name}");
    }
    let config = cmd(c, "DQ.CONFIG orders");
    assert_eq!(int(&field(&config, "lease-ms")), 60000);
    assert_eq!(int(&field(&config, "max-attempts")), 7);
    cmd(c, "SELECT 3");
    has(
        &get(c, "{tag}other", "solo"),
        &[("state", "delayed"), ("due-at", "4102444800000")],
    );
    assert_eq!(int(&cmd(c, "DBSIZE")), 1);
    cmd(c, "SELECT 0");
}

#[test]
fn multi_key_queues_are_converted_when_loaded_and_keep_working() {
    let server = Server::start_from_rdb(&fixture(), &[]);
    let mut c = server.conn();
    check_converted(&mut c);
    let log = server.log();
    assert!(
        log.contains("converted multi-key queue 'orders' (db 0) into one key: 7 messages"),
        "{log}"
    );
    assert!(log.contains("converted multi-key queue '{tag}other' (db 3) into one key: 1 messages"));
    assert_eq!(info_field(&mut c, "dq_queues"), 2);
    // The converted queue works: priority order, the group, and the
    // pending replacement taking over after ACK as the id's next delivery.
    let popped = entries(&cmd(&mut c, "DQ.POP orders COUNT 10"));
    let ids: Vec<&str> = popped.iter().map(|e| e.0.as_str()).collect();
    assert_eq!(ids, ["ready", "g1"]);
    assert_eq!(int(&cmd(&mut c, "DQ.ACK orders inflight g1")), 2);
    let popped = entries(&cmd(&mut c, "DQ.POP orders COUNT 10"));
    assert_eq!(
        popped,
        [
            ("inflight".to_string(), "newer".to_string(), 2),
            ("g2".to_string(), "two".to_string(), 1)
        ]
    );
    // Saved and loaded again: nothing left to convert, nothing changes.
    let before = digest(&mut c);
    cmd(&mut c, "DEBUG RELOAD");
    assert_eq!(digest(&mut c), before);
    assert_eq!(server.log().matches("converted multi-key").count(), 2);
}

/// A replica holding multi-key keys converts them when promoted, and the
/// conversion reaches its AOF: replayed, the AOF (the multi-key keys its
/// rewrite wrote, then the propagated DEL and DQ.APPLY LOAD) gives the
/// converted state.
#[test]
fn a_promoted_replica_converts_and_propagates_the_conversion() {
    // A replica of a master that is not there keeps what it loaded.
    let nowhere = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
        .to_string();
    let server = Server::start_from_rdb(
        &fixture(),
        &[
            "--replicaof",
            "127.0.0.1",
            &nowhere,
            "--repl-diskless-sync-delay",
            "0",
        ],
    );
    let mut c = server.conn();
    assert_eq!(
        text(&cmd(&mut c, "TYPE orders")),
        "none",
        "not converted on a replica"
    );
    cmd(&mut c, "CONFIG SET appendonly yes");
    assert!(wait_until(LONG, || {
        let info = text(&cmd(&mut c, "INFO persistence"));
        info.contains("aof_rewrite_in_progress:0") && info.contains("aof_rewrite_scheduled:0")
    }));
    cmd(&mut c, "REPLICAOF NO ONE");
    check_converted(&mut c);
    let converted = digest(&mut c);
    assert_eq!(server.log().matches("converted multi-key").count(), 2);
    // The AOF holds the multi-key keys, then the conversion: replayed, it
    // leaves nothing to convert again.
    cmd(&mut c, "DEBUG LOADAOF");
    assert_eq!(digest(&mut c), converted);
    assert_eq!(
        server.log().matches("converted multi-key").count(),
        2,
        "the replayed AOF converted again: the conversion did not reach it"
    );
}
