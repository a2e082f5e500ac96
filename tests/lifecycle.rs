//! The core lifecycle against a real server: ADD → timer → POP → ACK.

use std::time::Duration;

use dq_testkit::*;

#[test]
fn add_then_pop_on_one_connection_gets_the_message() {
    let server = Server::start();
    let mut c = server.conn();
    let id = text(&cmd(&mut c, "DQ.ADD orders {\"order\":42}"));
    let got = entries(&cmd(&mut c, "DQ.POP orders"));
    assert_eq!(got, vec![(id, "{\"order\":42}".to_string(), 1)]);
    assert_eq!(cmd(&mut c, "DQ.POP orders"), Value::Nil);
}

#[test]
fn generated_ids_are_unique_and_given_ids_are_kept() {
    let server = Server::start();
    let mut c = server.conn();
    let mut ids = std::collections::HashSet::new();
    for _ in 0..200 {
        assert!(ids.insert(text(&cmd(&mut c, "DQ.ADD q x"))));
    }
    assert_eq!(text(&cmd(&mut c, "DQ.ADD q x ID order-42")), "order-42");
    assert_eq!(int(&field(&cmd(&mut c, "DQ.STATS q"), "ready")), 201);
}

#[test]
fn delayed_message_is_never_early_and_arrives_on_time() {
    let server = Server::start();
    let mut c = server.conn();
    // Seen delayed before it falls due: a look that came later proves
    // nothing, and a fresh queue gives the message more time.
    let (q, due_at) = in_time(400, |ms| {
        let q = format!("q{ms}");
        let before = now_ms();
        cmd(&mut c, &format!("DQ.ADD {q} late DELAY {ms} ID m"));
        let m = cmd(&mut c, &format!("DQ.GET {q} m"));
        if now_ms() >= before + ms {
            return None;
        }
        assert_eq!(text(&field(&m, "state")), "delayed");
        Some((q, int(&field(&m, "due-at")) as u64))
    });
    let mut delivered_at = None;
    let arrived = wait_until(LONG, || {
        let popped = entries(&cmd(&mut c, &format!("DQ.POP {q}")));
        if popped.is_empty() {
            return false;
        }
        delivered_at = Some(now_ms());
        true
    });
    assert!(arrived, "the timer never promoted the message");
    let delivered_at = delivered_at.unwrap();
    assert!(
        delivered_at >= due_at,
        "early by {} ms",
        due_at - delivered_at
    );
}

#[test]
fn at_in_the_past_is_ready_at_once_and_in_the_future_waits() {
    let server = Server::start();
    let mut c = server.conn();
    cmd(&mut c, "DQ.ADD q old AT 1000 ID old");
    let later = now_ms() + 3_600_000;
    cmd(&mut c, &format!("DQ.ADD q new AT {later} ID new"));
    let new = cmd(&mut c, "DQ.GET q new");
    assert_eq!(text(&field(&new, "state")), "delayed");
    assert_eq!(int(&field(&new, "due-at")) as u64, later);
    assert_eq!(entries(&cmd(&mut c, "DQ.POP q COUNT 10"))[0].0, "old");
    assert_eq!(cmd(&mut c, "DQ.POP q"), Value::Nil);
}

#[test]
fn pop_order_is_priority_then_due_then_insertion() {
    let server = Server::start();
    let mut c = server.conn();
    cmd(&mut c, "DQ.ADD q x ID second-at-2000 AT 2000");
    cmd(&mut c, "DQ.ADD q x ID first-at-1000 AT 1000");
    cmd(&mut c, "DQ.ADD q x ID zz-fifo-1 AT 3000");
    cmd(&mut c, "DQ.ADD q x ID aa-fifo-2 AT 3000");
    cmd(&mut c, "DQ.ADD q x ID urgent AT 5000 PRIORITY 10");
    cmd(&mut c, "DQ.ADD q x ID background AT 1 PRIORITY -5");
    let order: Vec<String> = entries(&cmd(&mut c, "DQ.POP q COUNT 100"))
        .into_iter()
        .map(|e| e.0)
        .collect();
    assert_eq!(
        order,
        [
            "urgent",
            "first-at-1000",
            "second-at-2000",
            "zz-fifo-1",
            "aa-fifo-2",
            "background"
        ]
    );
}

#[test]
fn count_limits_the_batch() {
    let server = Server::start();
    let mut c = server.conn();
    for i in 0..5 {
        cmd(&mut c, &format!("DQ.ADD q p{i}"));
    }
    assert_eq!(entries(&cmd(&mut c, "DQ.POP q COUNT 3")).len(), 3);
    assert_eq!(entries(&cmd(&mut c, "DQ.POP q COUNT 3")).len(), 2);
}

#[test]
fn nx_xx_and_replace() {
    let server = Server::start();
    let mut c = server.conn();
    assert_eq!(cmd(&mut c, "DQ.ADD q v0 ID m XX"), Value::Nil);
    assert_eq!(cmd(&mut c, "DQ.GET q m"), Value::Nil);
    assert_eq!(text(&cmd(&mut c, "DQ.ADD q v1 ID m NX DELAY 60000")), "m");
    assert_eq!(cmd(&mut c, "DQ.ADD q v2 ID m NX"), Value::Nil);
    assert_eq!(text(&field(&cmd(&mut c, "DQ.GET q m"), "payload")), "v1");
    // Replace: new payload, due time and priority.
    assert_eq!(text(&cmd(&mut c, "DQ.ADD q v3 ID m XX PRIORITY 4")), "m");
    let m = cmd(&mut c, "DQ.GET q m");
    assert_eq!(text(&field(&m, "payload")), "v3");
    assert_eq!(text(&field(&m, "state")), "ready");
    assert_eq!(int(&field(&m, "priority")), 4);
    cmd(&mut c, "DQ.ADD q v4 ID m DELAY 60000");
    let stats = cmd(&mut c, "DQ.STATS q");
    assert_eq!(
        (int(&field(&stats, "delayed")), int(&field(&stats, "ready"))),
        (1, 0)
    );
    assert_eq!(text(&field(&cmd(&mut c, "DQ.GET q m"), "payload")), "v4");
}

#[test]
fn replace_of_an_inflight_message_waits_for_its_delivery_to_end() {
    let server = Server::start();
    let mut c = server.conn();
    cmd(&mut c, "DQ.ADD q v1 ID m");
    cmd(&mut c, "DQ.POP q");
    cmd(&mut c, "DQ.ADD q v2 ID m");
    let m = cmd(&mut c, "DQ.GET q m");
    assert_eq!(text(&field(&m, "payload")), "v1");
    assert_eq!(int(&field(&m, "replacement-pending")), 1);
    assert_eq!(
        cmd(&mut c, "DQ.POP q"),
        Value::Nil,
        "never two deliveries at once"
    );
    assert_eq!(int(&cmd(&mut c, "DQ.ACK q m")), 1);
    // The id's deliveries go on numbering: (m, 2) names this one.
    assert_eq!(
        entries(&cmd(&mut c, "DQ.POP q")),
        vec![("m".into(), "v2".into(), 2)]
    );
    // Exactly once: acknowledged, the newer version is gone too.
    assert_eq!(int(&cmd(&mut c, "DQ.ACK q m")), 1);
    assert_eq!(cmd(&mut c, "DQ.POP q"), Value::Nil);
    assert_eq!(cmd(&mut c, "DQ.GET q m"), Value::Nil);
}

/// The cases of docs/semantics.md's "Replacing a message" table that the test
/// above does not cover.
#[test]
fn replace_cases_after_nack_lease_expiry_nx_and_death() {
    let server = Server::start();
    let mut c = server.conn();
    let payload = |c: &mut redis::Connection, id: &str| {
        text(&field(&cmd(c, &format!("DQ.GET q {id}")), "payload"))
    };
    // NACK: the newer version replaces the retry; the reply is its state.
    cmd(&mut c, "DQ.ADD q v1 ID n");
    cmd(&mut c, "DQ.POP q");
    cmd(&mut c, "DQ.ADD q v2 ID n DELAY 60000");
    cmd(&mut c, "DQ.ADD q v3 ID n"); // last write wins
    assert_eq!(text(&cmd(&mut c, "DQ.NACK q n DELAY 60000")), "ready");
    assert_eq!(
        entries(&cmd(&mut c, "DQ.POP q")),
        vec![("n".into(), "v3".into(), 2)]
    );
    cmd(&mut c, "DQ.ACK q n");
    // NX leaves an in-flight message and its delivery alone; a plain ADD
    // waits as its replacement. Both are seen while the lease holds (on a
    // queue of their own with a longer lease when the looks came late).
    let q = in_time(100, |ms| {
        let q = format!("x{ms}");
        cmd(&mut c, &format!("DQ.ADD {q} v1 ID x"));
        let before = now_ms();
        cmd(&mut c, &format!("DQ.POP {q} LEASE {ms}"));
        let nx = cmd(&mut c, &format!("DQ.ADD {q} v2 ID x NX"));
        let untouched = cmd(&mut c, &format!("DQ.GET {q} x"));
        cmd(&mut c, &format!("DQ.ADD {q} v2 ID x"));
        let pending = cmd(&mut c, &format!("DQ.GET {q} x"));
        if now_ms() >= before + ms {
            return None;
        }
        assert_eq!(nx, Value::Nil);
        assert_eq!(text(&field(&untouched, "state")), "inflight");
        assert_eq!(text(&field(&untouched, "payload")), "v1");
        assert_eq!(int(&field(&untouched, "replacement-pending")), 0);
        assert_eq!(int(&field(&pending, "replacement-pending")), 1);
        Some(q)
    });
    // Lease expiry: the newer version takes the place, as the id's next
    // delivery.
    assert!(wait_until(LONG, || {
        text(&field(&cmd(&mut c, &format!("DQ.GET {q} x")), "payload")) == "v2"
    }));
    assert_eq!(
        entries(&cmd(&mut c, &format!("DQ.POP {q}"))),
        vec![("x".into(), "v2".into(), 2)]
    );
    // A dead message replaced is live again with a fresh attempt budget;
    // its delivery numbering goes on.
    cmd(&mut c, "DQ.ADD q v1 ID d MAXATTEMPTS 1");
    cmd(&mut c, "DQ.POP q");
    assert_eq!(text(&cmd(&mut c, "DQ.NACK q d")), "dead");
    cmd(&mut c, "DQ.ADD q v2 ID d MAXATTEMPTS 1");
    let d = cmd(&mut c, "DQ.GET q d");
    assert_eq!(text(&field(&d, "state")), "ready");
    assert_eq!(
        (int(&field(&d, "attempt")), payload(&mut c, "d")),
        (1, "v2".into())
    );
    cmd(&mut c, "DQ.POP q");
    assert_eq!(
        text(&cmd(&mut c, "DQ.NACK q d DELAY 0")),
        "dead",
        "MAXATTEMPTS 1 counts from the replacement"
    );
}

#[test]
fn lease_expiry_redelivers_with_attempt_two() {
    let server = Server::start();
    let mut c = server.conn();
    // In flight and invisible while the lease holds: looks that came after
    // it ended prove nothing, and a fresh queue gets a longer lease.
    let (q, deadline) = in_time(200, |ms| {
        let q = format!("q{ms}");
        cmd(&mut c, &format!("DQ.ADD {q} job ID j"));
        let before = now_ms();
        let first = entries(&cmd(&mut c, &format!("DQ.POP {q} LEASE {ms}")));
        let m = cmd(&mut c, &format!("DQ.GET {q} j"));
        let hidden = cmd(&mut c, &format!("DQ.POP {q}"));
        if now_ms() >= before + ms {
            return None;
        }
        assert_eq!(first, vec![("j".into(), "job".into(), 1)]);
        assert_eq!(text(&field(&m, "state")), "inflight");
        assert_eq!(hidden, Value::Nil);
        Some((q, int(&field(&m, "lease-deadline")) as u64))
    });
    let mut again = Vec::new();
    assert!(wait_until(LONG, || {
        again = entries(&cmd(&mut c, &format!("DQ.POP {q}")));
        !again.is_empty()
    }));
    assert!(now_ms() >= deadline);
    assert_eq!(again, vec![("j".into(), "job".into(), 2)]);
    assert_eq!(
        int(&field(
            &cmd(&mut c, &format!("DQ.STATS {q}")),
            "lease-expired"
        )),
        1
    );
}

#[test]
fn ack_deletes_inflight_messages_only() {
    let server = Server::start();
    let mut c = server.conn();
    cmd(&mut c, "DQ.ADD q a ID a");
    cmd(&mut c, "DQ.ADD q b ID b");
    cmd(&mut c, "DQ.ADD q c ID c DELAY 60000");
    cmd(&mut c, "DQ.POP q");
    assert_eq!(int(&cmd(&mut c, "DQ.ACK q a a b c unknown")), 1);
    assert_eq!(cmd(&mut c, "DQ.GET q a"), Value::Nil);
    assert_eq!(int(&cmd(&mut c, "DQ.ACK q a")), 0);
    let stats = cmd(&mut c, "DQ.STATS q");
    assert_eq!(int(&field(&stats, "ready")), 1);
    assert_eq!(int(&field(&stats, "delayed")), 1);
    assert_eq!(int(&field(&stats, "inflight")), 0);
    assert_eq!(int(&field(&stats, "acked")), 1);
}

#[test]
fn cancel_works_in_every_state() {
    let server = Server::start();
    let mut c = server.conn();
    cmd(&mut c, "DQ.ADD q x ID inflight");
    cmd(&mut c, "DQ.POP q");
    cmd(&mut c, "DQ.ADD q x ID delayed DELAY 60000");
    cmd(&mut c, "DQ.ADD q x ID ready");
    assert_eq!(
        int(&cmd(&mut c, "DQ.CANCEL q delayed ready inflight nope")),
        3
    );
    for id in ["delayed", "ready", "inflight"] {
        assert_eq!(cmd(&mut c, &format!("DQ.GET q {id}")), Value::Nil);
    }
    let stats = cmd(&mut c, "DQ.STATS q");
    for state in ["delayed", "ready", "inflight"] {
        assert_eq!(int(&field(&stats, state)), 0, "{state}");
    }
    assert_eq!(int(&cmd(&mut c, "DQ.ACK q inflight")), 0);
    // The queue stays, empty, with its lifetime counters.
    let Value::Array(keys) = cmd(&mut c, "KEYS *") else {
        panic!("KEYS")
    };
    assert_eq!(keys.iter().map(text).collect::<Vec<_>>(), ["q"]);
    assert_eq!(int(&field(&cmd(&mut c, "DQ.STATS q"), "cancelled")), 3);
}

#[test]
fn get_and_stats_reply_shapes_under_resp2_and_resp3() {
    let server = Server::start();
    let mut c = server.conn();
    cmd(&mut c, "DQ.ADD q hello ID m PRIORITY 3 DELAY 60000");
    assert_eq!(
        field_names(&cmd(&mut c, "DQ.GET q m")),
        [
            "id",
            "state",
            "payload",
            "priority",
            "attempt",
            "due-at",
            "lease-deadline",
            "added-at",
            "replacement-pending",
            "max-attempts",
            "max-attempts-from",
            "backoff",
            "backoff-from",
            "dead-reason",
            "died-at",
            "expires-at",
            "group",
            "waiting-for",
            "attempts-left",
            "last-error",
            "result",
            "finished-at",
            "retained-until",
            "progress"
        ]
    );
    assert!(matches!(cmd(&mut c, "DQ.GET q m"), Value::Array(_)));
    let mut c3 = server.conn_resp3();
    let get = cmd(&mut c3, "DQ.GET q m");
    assert!(matches!(get, Value::Map(_)), "{get:?}");
    assert_eq!(field(&get, "lease-deadline"), Value::Nil);
    assert_eq!(int(&field(&get, "attempt")), 0);
    assert!(matches!(cmd(&mut c3, "DQ.STATS q"), Value::Map(_)));
    let after_counters = [
        "oldest-ready-age-ms",
        "next-due-at",
        "schedules",
        "groups",
        "paused",
        "paused-until",
        "rate",
        "max-inflight",
    ];
    assert_eq!(
        field_names(&cmd(&mut c, "DQ.STATS q")),
        [&STATS_COUNTERS[..], &after_counters].concat()
    );
    assert_eq!(cmd(&mut c, "DQ.GET q unknown"), Value::Nil);
    assert_eq!(int(&field(&cmd(&mut c, "DQ.STATS nothing"), "ready")), 0);
}

#[test]
fn binary_payloads_and_ids_round_trip() {
    let server = Server::start();
    let mut c = server.conn();
    let payload: Vec<u8> = (0..=255u8).chain([0, b'\r', b'\n']).collect();
    let id = b"id with spaces\r\n\x00";
    run(&mut c, &[b"DQ.ADD", b"q", &payload, b"ID", id]).unwrap();
    let popped = run(&mut c, &[b"DQ.POP", b"q"]).unwrap();
    let Value::Array(entries) = popped else {
        panic!()
    };
    let Value::Array(entry) = &entries[0] else {
        panic!()
    };
    assert_eq!(entry[0], Value::BulkString(id.to_vec()));
    assert_eq!(entry[1], Value::BulkString(payload));
}

#[test]
fn queues_in_other_databases_are_served_by_the_timer() {
    let server = Server::start();
    let mut c = server.conn();
    cmd(&mut c, "SELECT 3");
    cmd(&mut c, "DQ.ADD q in-db-3 DELAY 100");
    cmd(&mut c, "SELECT 0");
    cmd(&mut c, "DQ.ADD q in-db-0 DELAY 100");
    cmd(&mut c, "SELECT 3");
    assert!(wait_until(LONG, || {
        int(&field(&cmd(&mut c, "DQ.STATS q"), "ready")) == 1
    }));
    assert_eq!(entries(&cmd(&mut c, "DQ.POP q"))[0].1, "in-db-3");
    cmd(&mut c, "SELECT 0");
    assert!(wait_until(LONG, || {
        int(&field(&cmd(&mut c, "DQ.STATS q"), "ready")) == 1
    }));
}

#[test]
fn timer_serves_every_queue_after_a_restart() {
    let mut server = Server::start_with(&["--appendonly", "yes", "--appendfsync", "always"]);
    let mut c = server.conn();
    cmd(&mut c, "DQ.ADD a x DELAY 700");
    cmd(&mut c, "SELECT 5");
    cmd(&mut c, "DQ.ADD b y DELAY 700");
    cmd(&mut c, "DQ.ADD b leased");
    cmd(&mut c, "DQ.POP b LEASE 700");
    server.restart();
    let mut c = server.conn();
    // Nothing touches the queues: only the timer can make them ready.
    let ready = |c: &mut redis::Connection, db: u8, q: &str, n: i64| {
        cmd(c, &format!("SELECT {db}"));
        int(&field(&cmd(c, &format!("DQ.STATS {q}")), "ready")) == n
    };
    assert!(wait_until(LONG, || ready(&mut c, 0, "a", 1)));
    assert!(wait_until(LONG, || ready(&mut c, 5, "b", 2)));
}

#[test]
fn debug_reload_keeps_queues_served() {
    let server = Server::start();
    let mut c = server.conn();
    cmd(&mut c, "DQ.ADD q x DELAY 500");
    cmd(&mut c, "DEBUG RELOAD");
    assert!(wait_until(LONG, || {
        int(&field(&cmd(&mut c, "DQ.STATS q"), "ready")) == 1
    }));
}

#[test]
fn more_messages_than_one_tick_moves_all_become_ready() {
    // More than a tick's message budget (INFO dq tick_budget), all due at
    // once: whatever the machine's speed, one tick cannot move them all and
    // the work goes on. They must all be added before they fall due: a
    // machine too slow for that tries again on a fresh server with more time.
    let (_server, mut c, n) = in_time(500, |ms| {
        let server = Server::start();
        let mut c = server.conn();
        let budget = info_field(&mut c, "dq_tick_budget");
        let n = budget + budget / 4;
        let at = now_ms() + ms;
        add_due_at(&mut c, "q", n, at);
        (now_ms() < at).then_some((server, c, n))
    });
    assert!(wait_until(LONG, || {
        int(&field(&cmd(&mut c, "DQ.STATS q"), "ready")) == n
    }));
    // Added in order and due at the same time: FIFO decides, so POP returns
    // them in ADD order.
    let mut payloads: Vec<i64> = Vec::new();
    while (payloads.len() as i64) < n {
        let popped = entries(&cmd(&mut c, "DQ.POP q COUNT 10000"));
        assert!(!popped.is_empty(), "{} of {n} popped", payloads.len());
        payloads.extend(popped.iter().map(|e| e.1.parse::<i64>().unwrap()));
    }
    assert_eq!(payloads, (0..n).collect::<Vec<i64>>());
}

#[test]
fn the_timer_sleeps_while_nothing_is_due_and_fires_once_per_due_time() {
    // The timer is seen armed before the message falls due: a look that
    // came later proves nothing, and a fresh server gives it more time.
    let (_server, mut c) = in_time(200, |ms| {
        let server = Server::start();
        let mut c = server.conn();
        assert_eq!(info_field(&mut c, "dq_timer_armed"), 0);
        cmd(&mut c, "DQ.ADD q ready-now");
        assert_eq!(info_field(&mut c, "dq_timer_armed"), 0, "nothing timed yet");
        let before = now_ms();
        cmd(&mut c, &format!("DQ.ADD q later DELAY {ms}"));
        let armed = info_field(&mut c, "dq_timer_armed");
        if now_ms() >= before + ms {
            return None;
        }
        assert_eq!(armed, 1);
        Some((server, c))
    });
    assert!(wait_until(LONG, || {
        int(&field(&cmd(&mut c, "DQ.STATS q"), "ready")) == 2
    }));
    // One tick at the due time, then no timer at all: no polling.
    assert_eq!(info_field(&mut c, "dq_timer_ticks"), 1);
    assert_eq!(info_field(&mut c, "dq_timer_armed"), 0);
    assert_eq!(info_field(&mut c, "dq_queues_scheduled"), 0);
}

#[test]
fn a_burst_bigger_than_a_tick_goes_on_in_the_next_turns_without_the_timer() {
    // All must be added before they fall due: a machine too slow for that
    // tries again on a fresh server with more time, rather than failing.
    let mut margin = 3_000;
    let (_server, mut c, n, budget) = loop {
        let server = Server::start();
        let mut c = server.conn();
        // More than three ticks' message budget: however fast the machine,
        // at least four ticks move them (a slow one takes more, as a tick
        // is also bounded by time).
        let budget = info_field(&mut c, "dq_tick_budget");
        let n = 3 * budget + 1;
        let at = now_ms() + margin;
        add_due_at(&mut c, "q", n, at);
        if now_ms() < at {
            break (server, c, n, budget);
        }
        assert!(margin < 300_000, "could not add {n} messages in 5 minutes");
        margin *= 4;
    };
    assert!(wait_until(
        Duration::from_millis(60_000 + margin),
        || info_field(&mut c, "dq_promoted") == n
    ));
    let ticks = info_field(&mut c, "dq_timer_ticks");
    let continued = info_field(&mut c, "dq_ticks_continued");
    assert!(ticks > n / budget, "{ticks} ticks moved {n} messages");
    // Only the first tick waited for the timer.
    assert_eq!(continued, ticks - 1);
    assert_eq!(info_field(&mut c, "dq_timer_armed"), 0);
}

#[test]
fn info_dq_fields_move_as_messages_flow() {
    // The counts are read before the delays and leases end: reads that
    // came later prove nothing, and a fresh server gives them more time.
    let (_server, mut c) = in_time(1000, |ms| {
        let server = Server::start();
        let mut c = server.conn();
        let before = now_ms();
        cmd(&mut c, &format!("DQ.ADD a x DELAY {ms}"));
        cmd(&mut c, &format!("DQ.ADD a x DELAY {ms}"));
        cmd(&mut c, "DQ.ADD b x ID leased");
        cmd(&mut c, "DQ.ADD b x MAXATTEMPTS 1 ID doomed");
        let queues = info_field(&mut c, "dq_queues");
        let delayed = info_field(&mut c, "dq_messages_delayed");
        let ready = info_field(&mut c, "dq_messages_ready");
        cmd(&mut c, &format!("DQ.POP b COUNT 2 LEASE {ms}"));
        let inflight = info_field(&mut c, "dq_messages_inflight");
        if now_ms() >= before + ms {
            return None;
        }
        assert_eq!((queues, delayed, ready, inflight), (2, 2, 2, 2));
        Some((server, c))
    });
    assert!(wait_until(LONG, || {
        info_field(&mut c, "dq_promoted") == 2 && info_field(&mut c, "dq_leases_expired") == 2
    }));
    assert_eq!(info_field(&mut c, "dq_messages_ready"), 3);
    assert_eq!(info_field(&mut c, "dq_messages_dead"), 1);
    assert!(info_field(&mut c, "dq_longest_tick_us") > 0);
    cmd(&mut c, "DQ.ADD c x TTL 50");
    assert!(wait_until(LONG, || info_field(&mut c, "dq_ttl_expired") == 1));
    // A queue deleted behind dq's back is no longer counted.
    assert_eq!(int(&cmd(&mut c, "DEL a")), 1);
    assert_eq!(info_field(&mut c, "dq_queues"), 2);
    assert_eq!(info_field(&mut c, "dq_messages_ready"), 1);
    cmd(&mut c, "FLUSHALL");
    assert_eq!(info_field(&mut c, "dq_queues"), 0);
    assert_eq!(info_field(&mut c, "dq_messages_dead"), 0);
}

/// CANCEL or PURGE of an in-flight id whose newer version waits behind it
/// removes both versions.
#[test]
fn cancel_or_purge_of_an_inflight_id_removes_its_pending_replacement_too() {
    let server = Server::start();
    let mut c = server.conn();
    for how in ["DQ.CANCEL q m", "DQ.PURGE q INFLIGHT", "DQ.PURGE q"] {
        cmd(&mut c, "DQ.ADD q v1 ID m");
        assert_eq!(entries(&cmd(&mut c, "DQ.POP q"))[0].1, "v1");
        cmd(&mut c, "DQ.ADD q v2 ID m");
        assert_eq!(
            int(&field(&cmd(&mut c, "DQ.GET q m"), "replacement-pending")),
            1
        );
        assert_eq!(int(&cmd(&mut c, how)), 1, "{how}");
        assert_eq!(cmd(&mut c, "DQ.GET q m"), Value::Nil, "{how}");
        // The consumer's late ACK finds nothing, and nothing comes back.
        assert_eq!(int(&cmd(&mut c, "DQ.ACK q m")), 0, "{how}");
        assert_eq!(cmd(&mut c, "DQ.POP q"), Value::Nil, "{how}");
    }
}
