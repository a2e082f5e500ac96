//! NACK, backoff, attempts and dead letters.

use dq_testkit::*;

const S: i64 = 1_000;
const M: i64 = 60 * S;
const H: i64 = 60 * M;

/// Delivers message `id` as attempt `attempt` (failing the earlier ones
/// with NACK DELAY 0), NACKs it without DELAY and checks that the next
/// attempt is due `want` ms after the NACK, read from DQ.GET.
fn check_backoff(c: &mut redis::Connection, q: &str, id: &str, attempt: i64, want: i64) {
    for _ in 1..attempt {
        assert_eq!(entries(&cmd(c, &format!("DQ.POP {q}"))).len(), 1);
        assert_eq!(text(&cmd(c, &format!("DQ.NACK {q} {id} DELAY 0"))), "ready");
    }
    let popped = entries(&cmd(c, &format!("DQ.POP {q}")));
    assert_eq!(popped[0].2, attempt);
    let before = now_ms() as i64;
    assert_eq!(text(&cmd(c, &format!("DQ.NACK {q} {id}"))), "delayed");
    let after = now_ms() as i64;
    let due = int(&field(&cmd(c, &format!("DQ.GET {q} {id}")), "due-at"));
    // The server's now lies between `before` and `after`, so the delay it
    // chose lies between these two, however long the NACK took.
    let (low, high) = (due - after, due - before);
    assert!(
        (low..=high).contains(&want),
        "attempt {attempt}: due {low}..={high} ms after the NACK, not {want}"
    );
}

#[test]
fn the_step_list_gives_each_step_then_repeats_the_last() {
    let server = Server::start();
    let mut c = server.conn();
    let steps = [
        15 * S,
        3 * M,
        10 * M,
        30 * M,
        H,
        2 * H,
        6 * H,
        15 * H,
        15 * H,
        15 * H,
    ];
    for (i, want) in steps.iter().enumerate() {
        let attempt = i as i64 + 1;
        let id = format!("webhook-{attempt}");
        cmd(
            &mut c,
            &format!("DQ.ADD hooks x ID {id} BACKOFF 15s,3m,10m,30m,1h,2h,6h,15h"),
        );
        check_backoff(&mut c, "hooks", &id, attempt, *want);
    }
}

#[test]
fn exponential_and_fixed_backoff() {
    let server = Server::start();
    let mut c = server.conn();
    for (attempt, want) in [(1, S), (2, 2 * S), (3, 4 * S), (4, 8 * S)] {
        let id = format!("e{attempt}");
        cmd(&mut c, &format!("DQ.ADD q x ID {id}")); // module default exp:1s:1h
        check_backoff(&mut c, "q", &id, attempt, want);
    }
    cmd(&mut c, "DQ.ADD q x ID capped BACKOFF exp:1s:3s");
    check_backoff(&mut c, "q", "capped", 5, 3 * S);
    cmd(&mut c, "DQ.ADD q x ID fixed BACKOFF fixed:90s");
    check_backoff(&mut c, "q", "fixed", 3, 90 * S);
}

#[test]
fn nack_with_delay_and_its_replies() {
    let server = Server::start();
    let mut c = server.conn();
    cmd(&mut c, "DQ.ADD q x ID m");
    assert_eq!(cmd(&mut c, "DQ.NACK q m"), Value::Nil, "not in flight yet");
    cmd(&mut c, "DQ.POP q");
    let before = now_ms() as i64;
    assert_eq!(text(&cmd(&mut c, "DQ.NACK q m DELAY 120000")), "delayed");
    let after = now_ms() as i64;
    let due = int(&field(&cmd(&mut c, "DQ.GET q m"), "due-at"));
    // 120 s after the server's now, which lies between before and after.
    assert!(
        (before + 120_000..=after + 120_000).contains(&due),
        "due {due}, NACK sent at {before}, answered at {after}"
    );
    assert_eq!(cmd(&mut c, "DQ.NACK q m"), Value::Nil);
    assert_eq!(cmd(&mut c, "DQ.NACK q unknown"), Value::Nil);
    let stats = cmd(&mut c, "DQ.STATS q");
    assert_eq!(int(&field(&stats, "nacked")), 1);
    assert_eq!(int(&field(&stats, "retried")), 1);
    assert_eq!(int(&field(&stats, "next-due-at")), due);
}

#[test]
fn a_nacked_message_comes_back_when_its_delay_ends() {
    let server = Server::start();
    let mut c = server.conn();
    // Not delivered while its DELAY runs: a POP that came after the delay
    // ended proves nothing, and a fresh queue tries a longer one.
    let q = in_time(200, |ms| {
        let q = format!("q{ms}");
        cmd(&mut c, &format!("DQ.ADD {q} x ID m"));
        cmd(&mut c, &format!("DQ.POP {q}"));
        let before = now_ms();
        cmd(&mut c, &format!("DQ.NACK {q} m DELAY {ms}"));
        let early = cmd(&mut c, &format!("DQ.POP {q}"));
        if now_ms() >= before + ms {
            return None;
        }
        assert_eq!(early, Value::Nil);
        Some(q)
    });
    let mut got = Vec::new();
    assert!(wait_until(LONG, || {
        got = entries(&cmd(&mut c, &format!("DQ.POP {q}")));
        !got.is_empty()
    }));
    assert_eq!(got[0].2, 2);
}

#[test]
fn attempts_used_up_by_nack_make_the_message_dead() {
    let server = Server::start();
    let mut c = server.conn();
    cmd(&mut c, "DQ.ADD q x ID m MAXATTEMPTS 2");
    cmd(&mut c, "DQ.POP q");
    assert_eq!(text(&cmd(&mut c, "DQ.NACK q m DELAY 0")), "ready");
    cmd(&mut c, "DQ.POP q");
    let before = now_ms() as i64;
    assert_eq!(text(&cmd(&mut c, "DQ.NACK q m")), "dead");
    let m = cmd(&mut c, "DQ.GET q m");
    assert_eq!(text(&field(&m, "state")), "dead");
    assert_eq!(text(&field(&m, "dead-reason")), "nack");
    assert!(int(&field(&m, "died-at")) >= before);
    assert_eq!(
        cmd(&mut c, "DQ.POP q"),
        Value::Nil,
        "dead letters are not delivered"
    );
    let stats = cmd(&mut c, "DQ.STATS q");
    assert_eq!(
        (
            int(&field(&stats, "dead")),
            int(&field(&stats, "dead-lettered"))
        ),
        (1, 1)
    );
}

#[test]
fn attempts_used_up_by_lease_expiry_make_the_message_dead() {
    let server = Server::start();
    let mut c = server.conn();
    cmd(&mut c, "DQ.ADD q x ID m MAXATTEMPTS 2");
    cmd(&mut c, "DQ.POP q LEASE 50");
    assert!(wait_until(LONG, || {
        !entries(&cmd(&mut c, "DQ.POP q LEASE 50")).is_empty()
    }));
    assert!(wait_until(LONG, || {
        text(&field(&cmd(&mut c, "DQ.GET q m"), "state")) == "dead"
    }));
    let m = cmd(&mut c, "DQ.GET q m");
    assert_eq!(text(&field(&m, "dead-reason")), "lease-expired");
    assert_eq!(int(&field(&m, "attempt")), 2);
    assert_eq!(int(&field(&cmd(&mut c, "DQ.STATS q"), "lease-expired")), 2);
}

#[test]
fn redrive_by_count_and_by_id() {
    let server = Server::start();
    let mut c = server.conn();
    for id in ["a", "b", "c", "d"] {
        cmd(&mut c, &format!("DQ.ADD q x ID {id} MAXATTEMPTS 1"));
        cmd(&mut c, "DQ.POP q");
        assert_eq!(text(&cmd(&mut c, &format!("DQ.NACK q {id}"))), "dead");
    }
    assert_eq!(int(&cmd(&mut c, "DQ.REDRIVE q COUNT 2")), 2);
    assert_eq!(text(&field(&cmd(&mut c, "DQ.GET q a"), "state")), "ready");
    assert_eq!(text(&field(&cmd(&mut c, "DQ.GET q c"), "state")), "dead");
    assert_eq!(int(&cmd(&mut c, "DQ.REDRIVE q ID d unknown a")), 1);
    assert_eq!(text(&field(&cmd(&mut c, "DQ.GET q c"), "state")), "dead");
    let popped = entries(&cmd(&mut c, "DQ.POP q COUNT 10"));
    let mut ids: Vec<&str> = popped.iter().map(|e| e.0.as_str()).collect();
    ids.sort();
    assert_eq!(ids, ["a", "b", "d"]);
    // The numbering goes on (delivery 2 of each), with a fresh budget:
    // MAXATTEMPTS 1 allows one more delivery after the REDRIVE.
    assert!(popped.iter().all(|e| e.2 == 2), "{popped:?}");
    assert_eq!(text(&cmd(&mut c, "DQ.NACK q a")), "dead");
    assert_eq!(int(&cmd(&mut c, "DQ.REDRIVE q")), 2);
    assert_eq!(int(&cmd(&mut c, "DQ.REDRIVE q")), 0);
    assert_eq!(int(&field(&cmd(&mut c, "DQ.STATS q"), "redriven")), 5);
}

#[test]
fn touch_keeps_a_message_invisible_past_its_first_deadline() {
    let server = Server::start();
    let mut c = server.conn();
    // The TOUCH must come within the first lease, and the looks past the
    // first deadline within the second: when either came late, a fresh
    // queue tries longer leases.
    let q = in_time(200, |ms| {
        let q = format!("q{ms}");
        let longer = 25 * ms;
        cmd(&mut c, &format!("DQ.ADD {q} x ID m"));
        let before = now_ms();
        cmd(&mut c, &format!("DQ.POP {q} LEASE {ms}"));
        let first = int(&field(
            &cmd(&mut c, &format!("DQ.GET {q} m")),
            "lease-deadline",
        )) as u64;
        let touched = cmd(&mut c, &format!("DQ.TOUCH {q} m LEASE {longer}"));
        if now_ms() >= before + ms {
            return None;
        }
        let extended = int(&touched) as u64;
        assert!(extended >= first + longer - ms);
        assert_eq!(
            int(&field(
                &cmd(&mut c, &format!("DQ.GET {q} m")),
                "lease-deadline"
            )) as u64,
            extended
        );
        assert!(wait_until(LONG, || now_ms() > first));
        let hidden = cmd(&mut c, &format!("DQ.POP {q}"));
        let state = text(&field(&cmd(&mut c, &format!("DQ.GET {q} m")), "state"));
        if now_ms() >= extended {
            return None;
        }
        assert_eq!(hidden, Value::Nil);
        assert_eq!(state, "inflight");
        Some(q)
    });
    assert_eq!(cmd(&mut c, &format!("DQ.TOUCH {q} nope")), Value::Nil);
    cmd(&mut c, &format!("DQ.ADD {q} y ID r"));
    assert_eq!(
        cmd(&mut c, &format!("DQ.TOUCH {q} r")),
        Value::Nil,
        "ready, not in flight"
    );
}

#[test]
fn defaults_resolve_message_then_queue_then_module() {
    let server = Server::start();
    let mut c = server.conn();
    cmd(&mut c, "CONFIG SET dq.max-attempts 5");
    cmd(&mut c, "CONFIG SET dq.backoff fixed:1m");
    cmd(&mut c, "CONFIG SET dq.lease-ms 7000");
    cmd(&mut c, "DQ.ADD q x ID plain");
    cmd(&mut c, "DQ.ADD q x ID own MAXATTEMPTS 1 BACKOFF 2s");
    let show = |c: &mut redis::Connection, id: &str| {
        let m = cmd(c, &format!("DQ.GET q {id}"));
        (
            int(&field(&m, "max-attempts")),
            text(&field(&m, "max-attempts-from")),
            text(&field(&m, "backoff")),
            text(&field(&m, "backoff-from")),
        )
    };
    assert_eq!(
        show(&mut c, "plain"),
        (5, "module".into(), "fixed:1m".into(), "module".into())
    );
    cmd(
        &mut c,
        "DQ.CONFIG q SET MAXATTEMPTS 3 BACKOFF 10s LEASE 9000",
    );
    assert_eq!(
        show(&mut c, "plain"),
        (3, "queue".into(), "10s".into(), "queue".into())
    );
    assert_eq!(
        show(&mut c, "own"),
        (1, "message".into(), "2s".into(), "message".into())
    );
    let config = cmd(&mut c, "DQ.CONFIG q");
    assert_eq!(int(&field(&config, "lease-ms")), 9000);
    assert_eq!(text(&field(&config, "lease-ms-from")), "queue");
    // The queue's lease applies to POP without LEASE.
    let before = now_ms() as i64;
    cmd(&mut c, "DQ.POP q");
    let after = now_ms() as i64;
    let deadline = int(&field(&cmd(&mut c, "DQ.GET q plain"), "lease-deadline"));
    // 9 s after the server's now, which lies between before and after.
    assert!(
        (before + 9000..=after + 9000).contains(&deadline),
        "lease deadline {deadline}, POP sent at {before}, answered at {after}"
    );
    // DEFAULT gives the module value back.
    cmd(&mut c, "DQ.CONFIG q SET MAXATTEMPTS DEFAULT LEASE default");
    let config = cmd(&mut c, "DQ.CONFIG q");
    assert_eq!(int(&field(&config, "max-attempts")), 5);
    assert_eq!(text(&field(&config, "max-attempts-from")), "module");
    assert_eq!(int(&field(&config, "lease-ms")), 7000);
    assert_eq!(text(&field(&config, "backoff-from")), "queue");
    // The other queue only sees the module settings.
    let other = cmd(&mut c, "DQ.CONFIG other");
    assert_eq!(text(&field(&other, "backoff")), "fixed:1m");
}

#[test]
fn bad_module_settings_are_refused_and_keep_their_value() {
    let server = Server::start();
    let mut c = server.conn();
    for (line, setting, kept) in [
        ("CONFIG SET dq.backoff soon", "dq.backoff", "exp:1s:1h"),
        ("CONFIG SET dq.backoff exp:1h:1s", "dq.backoff", "exp:1s:1h"),
        ("CONFIG SET dq.lease-ms 0", "dq.lease-ms", "30000"),
        ("CONFIG SET dq.lease-ms -5", "dq.lease-ms", "30000"),
        ("CONFIG SET dq.max-attempts 0", "dq.max-attempts", "16"),
        ("CONFIG SET dq.max-attempts many", "dq.max-attempts", "16"),
    ] {
        let err = cmd_err(&mut c, line);
        assert!(err.contains(setting), "{line}: {err}");
        let Value::Array(got) = cmd(&mut c, &format!("CONFIG GET {setting}")) else {
            panic!()
        };
        assert_eq!(text(&got[1]), kept, "{line}");
    }
    let err = cmd_err(&mut c, "CONFIG SET dq.backoff soon");
    assert!(err.contains("BACKOFF must be exp:BASE:MAX"), "{err}");
}

#[test]
fn load_arguments_set_the_settings_and_bad_ones_stop_the_load() {
    let server = Server::try_start(&[], &["lease-ms", "1234", "backoff", "15s,1m"]).unwrap();
    let mut c = server.conn();
    let Value::Array(got) = cmd(&mut c, "CONFIG GET dq.lease-ms") else {
        panic!()
    };
    assert_eq!(text(&got[1]), "1234");
    let Value::Array(got) = cmd(&mut c, "CONFIG GET dq.backoff") else {
        panic!()
    };
    assert_eq!(text(&got[1]), "15s,1m");
    for bad in [
        &["lease_ms", "5"][..],
        &["backoff", "soon"],
        &["max-attempts", "0"],
        &["lease-ms"],
    ] {
        let log = match Server::try_start(&[], bad) {
            Ok(_) => panic!("{bad:?} loaded"),
            Err(log) => log,
        };
        assert!(log.contains("dq: "), "{bad:?}: {log}");
    }
}

#[test]
fn the_longest_lease_lasts_until_the_latest_storable_time() {
    let server = Server::start();
    let mut c = server.conn();
    cmd(&mut c, "CONFIG SET dq.lease-ms 9007199254740991");
    cmd(&mut c, "DQ.ADD q x ID m");
    assert_eq!(entries(&cmd(&mut c, "DQ.POP q")).len(), 1);
    let deadline = int(&field(&cmd(&mut c, "DQ.GET q m"), "lease-deadline"));
    assert_eq!(deadline, (1i64 << 53) - 1);
    assert_eq!(
        int(&cmd(&mut c, "DQ.TOUCH q m LEASE 9007199254740991")),
        deadline
    );
}
