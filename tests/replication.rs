//! Time-dependent writes reach a replica as their effects: after the same
//! workload a replica holds exactly the master's data.

use dq_testkit::*;

/// Waits until the replica has acknowledged the master's writes so far.
/// WAIT is asked again until it says so: one WAIT's timeout may be too short
/// for a loaded machine.
fn acked_by_replica(m: &mut redis::Connection) {
    assert!(
        wait_until(LONG, || int(&cmd(m, "WAIT 1 1000")) == 1),
        "the replica never acknowledged"
    );
}

#[test]
fn a_replica_ends_with_the_masters_exact_state() {
    // No delay before the first full sync: the default waits 5 s for more replicas.
    let master = Server::start_with(&["--repl-diskless-sync-delay", "0"]);
    let port = master.port.to_string();
    let replica = Server::start_with(&["--replicaof", "127.0.0.1", &port]);
    let mut r = replica.conn();
    assert!(wait_until(LONG, || {
        text(&cmd(&mut r, "INFO replication")).contains("master_link_status:up")
    }));

    let mut m = master.conn();
    cmd(&mut m, "DQ.ADD q a ID a");
    cmd(&mut m, "DQ.ADD q b ID b DELAY 150"); // promoted by the timer
    cmd(&mut m, "DQ.ADD q c ID c");
    cmd(&mut m, "DQ.ADD q d ID d PRIORITY 2");
    cmd(&mut m, "DQ.ADD q e"); // generated id
    cmd(&mut m, "DQ.POP q COUNT 2 LEASE 100"); // d and a: leases expire on the master's timer
    cmd(&mut m, "DQ.CANCEL q c");
    cmd(&mut m, "SELECT 2");
    cmd(&mut m, "DQ.ADD q other-db DELAY 50");
    cmd(&mut m, "SELECT 0");
    assert!(wait_until(LONG, || {
        let s = cmd(&mut m, "DQ.STATS q");
        int(&field(&s, "lease-expired")) == 2 && int(&field(&s, "delayed")) == 0
    }));
    let popped = entries(&cmd(&mut m, "DQ.POP q COUNT 10"));
    assert_eq!(popped.len(), 4);
    cmd(&mut m, &format!("DQ.ACK q {}", popped[0].0));
    // Groups: a lease that runs out keeps the group; ACK hands it on.
    cmd(&mut m, "DQ.ADD gq x ID g1 GROUP g");
    cmd(&mut m, "DQ.ADD gq x ID g2 GROUP g");
    cmd(&mut m, "DQ.ADD gq x ID g3 GROUP g");
    cmd(&mut m, "DQ.POP gq LEASE 50");
    assert!(wait_until(LONG, || {
        int(&field(&cmd(&mut m, "DQ.STATS gq"), "lease-expired")) == 1
    }));
    assert_eq!(entries(&cmd(&mut m, "DQ.POP gq COUNT 9"))[0].0, "g1");
    cmd(&mut m, "DQ.ACK gq g1");

    acked_by_replica(&mut m);
    assert!(
        wait_until(LONG, || digest(&mut m) == digest(&mut r)),
        "replica digest differs from the master's"
    );

    // The replica serves reads and refuses writes.
    assert_eq!(int(&field(&cmd(&mut r, "DQ.STATS q"), "inflight")), 3);
    assert!(cmd_err(&mut r, "DQ.ADD q x").starts_with("READONLY"));
    assert!(cmd_err(&mut r, "DQ.POP q").starts_with("READONLY"));
}

/// Every write path, including the timer's (promotion, lease expiry, TTL)
/// and groups, leaves the replica byte-for-byte equal to the master; the
/// replica answers the read commands.
#[test]
fn every_write_path_reaches_the_replica() {
    // The POP, NACK and TOUCH below must come before the TTL and the leases
    // of `ms` end: when they came later they did not do what is checked,
    // and fresh servers try again with longer ones.
    let (_master, _replica, mut m, mut r) = in_time(100, |ms| {
        let master = Server::start_with(&["--repl-diskless-sync-delay", "0"]);
        let replica = Server::start_replica_of(&master);
        let mut m = master.conn();
        let r = replica.conn();
        let before = now_ms();
        for line in [
            "DQ.CONFIG q SET MAXATTEMPTS 2 BACKOFF fixed:50".to_string(),
            "DQ.ADD q x ID nacked".into(),
            "DQ.ADD q x ID touched".into(),
            "DQ.ADD q x ID cancelled DELAY 60000".into(),
            format!("DQ.ADD q x ID expires TTL {ms}"),
            "DQ.ADD q x ID g1 GROUP g".into(),
            "DQ.ADD q x ID g2 GROUP g".into(),
            format!("DQ.ADD q x ID promoted DELAY {ms}"),
            "DQ.ADD purged x ID p1".into(),
            "DQ.ADD purged x ID p2 DELAY 60000".into(),
        ] {
            cmd(&mut m, &line);
        }
        let popped = entries(&cmd(&mut m, &format!("DQ.POP q COUNT 4 LEASE {ms}")));
        let nacked = cmd(&mut m, "DQ.NACK q nacked");
        let touched = cmd(&mut m, "DQ.TOUCH q touched LEASE 60000");
        cmd(&mut m, "DQ.CANCEL q cancelled");
        cmd(&mut m, "DQ.PURGE purged READY");
        if now_ms() >= before + ms {
            return None;
        }
        // nacked, touched, expires and g1, in ADD order.
        let ids: Vec<&str> = popped.iter().map(|e| e.0.as_str()).collect();
        assert_eq!(ids, ["nacked", "touched", "expires", "g1"]);
        assert_eq!(text(&nacked), "delayed");
        assert!(matches!(touched, Value::Int(_)), "{touched:?}");
        Some((master, replica, m, r))
    });
    // g1's lease ends and it comes back; nacked is retried after 50 ms.
    assert!(wait_until(LONG, || {
        let s = cmd(&mut m, "DQ.STATS q");
        int(&field(&s, "lease-expired")) == 1
            && int(&field(&s, "expired")) == 1
            && int(&field(&s, "delayed")) == 1 // g2, waiting for g1
    }));
    // nacked dies on its second attempt, and is redriven.
    let popped = entries(&cmd(&mut m, "DQ.POP q COUNT 10 LEASE 60000"));
    assert!(
        popped.iter().any(|e| e.0 == "nacked" && e.2 == 2),
        "{popped:?}"
    );
    assert_eq!(text(&cmd(&mut m, "DQ.NACK q nacked")), "dead");
    assert_eq!(int(&cmd(&mut m, "DQ.REDRIVE q ID nacked expires")), 2);
    cmd(&mut m, "DQ.ACK q g1");
    // Fenced NACK and TOUCH, DEAD and ERROR.
    cmd(&mut m, "DQ.ADD fq x ID doomed");
    cmd(&mut m, "DQ.ADD fq x ID flaky");
    assert_eq!(entries(&cmd(&mut m, "DQ.POP fq COUNT 2")).len(), 2);
    cmd(&mut m, "DQ.TOUCH fq flaky LEASE 90000 ATTEMPT 1");
    assert_eq!(
        text(&cmd(&mut m, "DQ.NACK fq doomed DEAD ATTEMPT 1 ERROR 410")),
        "dead"
    );
    assert_eq!(
        text(&cmd(&mut m, "DQ.NACK fq flaky ERROR timeout ATTEMPT 1")),
        "delayed"
    );

    acked_by_replica(&mut m);
    assert!(
        wait_until(LONG, || digest(&mut m) == digest(&mut r)),
        "replica digest differs from the master's"
    );
    assert_eq!(
        text(&field(&cmd(&mut r, "DQ.GET q g2"), "state")),
        "ready",
        "g1's ACK handed the group to g2"
    );
    let doomed = cmd(&mut r, "DQ.GET fq doomed");
    assert_eq!(text(&field(&doomed, "dead-reason")), "permanent");
    assert_eq!(text(&field(&doomed, "last-error")), "410");
    assert_eq!(
        text(&field(&cmd(&mut r, "DQ.GET fq flaky"), "last-error")),
        "timeout"
    );
    // The same record, but for the age, which the clock moves between the
    // two calls.
    let stats = |c: &mut redis::Connection| {
        let mut s = record(&cmd(c, "DQ.STATS q"));
        let age = s
            .iter()
            .position(|(k, _)| k == "oldest-ready-age-ms")
            .unwrap();
        assert!(matches!(s.remove(age).1, Value::Int(_)));
        s
    };
    assert_eq!(stats(&mut r), stats(&mut m));
    assert_eq!(
        cmd(&mut r, "DQ.PEEK q READY"),
        cmd(&mut m, "DQ.PEEK q READY")
    );
    assert_eq!(
        info_field(&mut r, "dq_timer_armed"),
        0,
        "a replica never runs the timer"
    );
}

/// REPLICAOF NO ONE starts the promoted replica's timer, which delivers on
/// time what the old master scheduled; the demoted master stops its own.
#[test]
fn failover_moves_the_timer_to_the_new_master() {
    // The promotion must come before `later` falls due and `leased`'s lease
    // ends, or the old master's timer served them: then fresh servers try
    // again with more time.
    let (_master, replica, mut m, mut r, due) = in_time(800, |ms| {
        let master = Server::start_with(&["--repl-diskless-sync-delay", "0"]);
        let replica = Server::start_replica_of(&master);
        let mut m = master.conn();
        let mut r = replica.conn();
        let before = now_ms();
        cmd(&mut m, &format!("DQ.ADD q x ID later DELAY {ms}"));
        cmd(&mut m, "DQ.ADD q x ID leased");
        cmd(&mut m, &format!("DQ.POP q LEASE {ms}"));
        // Far in the future: keeps the timer armed on whichever node is master.
        cmd(&mut m, "DQ.ADD q x ID far DELAY 3600000");
        acked_by_replica(&mut m);
        assert_eq!(info_field(&mut m, "dq_timer_armed"), 1);
        assert_eq!(info_field(&mut r, "dq_timer_armed"), 0);
        let due = int(&field(&cmd(&mut r, "DQ.GET q later"), "due-at")) as u64;
        cmd(&mut r, "REPLICAOF NO ONE");
        if now_ms() >= before + ms {
            return None;
        }
        Some((master, replica, m, r, due))
    });
    assert_eq!(
        info_field(&mut r, "dq_timer_armed"),
        1,
        "promoted: it serves the queue"
    );
    let port = replica.port.to_string();
    cmd(&mut m, &format!("REPLICAOF 127.0.0.1 {port}"));
    assert!(wait_until(LONG, || {
        text(&cmd(&mut m, "INFO replication")).contains("master_link_status:up")
    }));
    assert_eq!(
        info_field(&mut m, "dq_timer_armed"),
        0,
        "the demoted master stops its timer"
    );
    assert_eq!(info_field(&mut r, "dq_timer_armed"), 1);
    let mut got = Vec::new();
    assert!(wait_until(LONG, || {
        got.extend(entries(&cmd(&mut r, "DQ.POP q COUNT 10")));
        got.len() == 2
    }));
    assert!(now_ms() >= due, "never early");
    got.sort();
    assert_eq!(got[0].0, "later");
    assert_eq!((got[1].0.as_str(), got[1].2), ("leased", 2));
    acked_by_replica(&mut r);
    assert!(wait_until(LONG, || digest(&mut m) == digest(&mut r)));
}

#[test]
fn propagation_skips_the_command_lookup_where_the_server_offers_it() {
    let master = Server::start();
    let mut m = master.conn();
    let info = text(&cmd(&mut m, "INFO server"));
    // Valkey 8.1 added the module option; Redis has none as of 8.0.
    let valkey = info
        .lines()
        .find_map(|l| l.strip_prefix("valkey_version:"))
        .map(|v| {
            let mut parts = v.trim().split('.').map(|p| p.parse::<u32>().unwrap_or(0));
            (parts.next().unwrap_or(0), parts.next().unwrap_or(0))
        });
    let expected = i64::from(valkey.is_some_and(|v| v >= (8, 1)));
    assert_eq!(info_field(&mut m, "dq_replicate_skips_lookup"), expected);
    // Either way, what a write propagates still reaches a replica.
    let replica = Server::start_replica_of(&master);
    let mut r = replica.conn();
    cmd(&mut m, "DQ.ADD q x ID a DELAY 60000");
    acked_by_replica(&mut m);
    assert_eq!(text(&field(&cmd(&mut r, "DQ.GET q a"), "state")), "delayed");
    assert_eq!(digest(&mut m), digest(&mut r));
}
