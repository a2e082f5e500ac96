//! Flow control against real servers: DQ.PAUSE and DQ.RESUME, RATE and
//! MAXINFLIGHT, DQ.MPOP, and what replication, persistence and a
//! failover keep of them.

use std::time::{Duration, Instant};

use dq_testkit::*;

fn add(c: &mut redis::Connection, queue: &str, n: usize) {
    let mut pipe = redis::pipe();
    for i in 0..n {
        pipe.cmd("DQ.ADD")
            .arg(queue)
            .arg("x")
            .arg("ID")
            .arg(format!("m{i}"))
            .ignore();
    }
    pipe.query::<()>(c).unwrap();
}

fn stat(c: &mut redis::Connection, queue: &str, name: &str) -> Value {
    field(&cmd(c, &format!("DQ.STATS {queue}")), name)
}

#[test]
fn pause_stops_pop_and_resume_serves_blocked_consumers() {
    let server = Server::start();
    let mut c = server.conn();
    assert_eq!(cmd(&mut c, "DQ.PAUSE q"), Value::Okay);
    add(&mut c, "q", 3);
    assert_eq!(cmd(&mut c, "DQ.POP q COUNT 3"), Value::Nil);
    assert_eq!(int(&stat(&mut c, "q", "paused")), 1);
    assert_eq!(stat(&mut c, "q", "paused-until"), Value::Nil);
    assert_eq!(int(&stat(&mut c, "q", "throttled")), 1);
    // ADD and the timer go on: a delayed message still becomes ready.
    cmd(&mut c, "DQ.ADD q late DELAY 50 ID late");
    assert!(wait_until(LONG, || int(&stat(&mut c, "q", "ready")) == 4));
    let waiter = server.in_background("DQ.POP q COUNT 10 BLOCK 0");
    wait_blocked(&mut c, 1);
    assert_eq!(int(&cmd(&mut c, "DQ.RESUME q")), 1);
    assert_eq!(entries(&waiter.join().unwrap()).len(), 4);
    assert_eq!(int(&cmd(&mut c, "DQ.RESUME q")), 0);
    assert_eq!(int(&cmd(&mut c, "DQ.RESUME absent")), 0);
    assert_eq!(int(&stat(&mut c, "q", "paused")), 0);
}

#[test]
fn a_pause_for_a_time_ends_by_itself_and_wakes_its_waiters() {
    let server = Server::start();
    let mut c = server.conn();
    add(&mut c, "q", 1);
    let before = now_ms();
    cmd(&mut c, "DQ.PAUSE q FOR 400");
    let until = int(&stat(&mut c, "q", "paused-until")) as u64;
    assert!((before + 400..=now_ms() + 400).contains(&until));
    let waiter = server.in_background("DQ.POP q BLOCK 0");
    // Nobody else talks to the server: the timer wakes for the pause's end.
    let got = entries(&waiter.join().unwrap());
    assert_eq!(got.len(), 1);
    assert!(now_ms() >= until);
    assert_eq!(int(&stat(&mut c, "q", "paused")), 0);
}

#[test]
fn rate_delivers_what_the_window_allows_and_wakes_waiters_when_it_moves_on() {
    let server = Server::start();
    let mut c = server.conn();
    assert_eq!(cmd(&mut c, "DQ.CONFIG q SET RATE 3/2s"), Value::Okay);
    add(&mut c, "q", 10);
    let first = Instant::now();
    assert_eq!(entries(&cmd(&mut c, "DQ.POP q COUNT 10")).len(), 3);
    assert_eq!(cmd(&mut c, "DQ.POP q COUNT 10"), Value::Nil);
    assert_eq!(int(&stat(&mut c, "q", "ready")), 7, "the rest stays ready");
    assert_eq!(int(&stat(&mut c, "q", "throttled")), 2);
    assert_eq!(text(&stat(&mut c, "q", "rate")), "3/2s");
    // A blocked POP is served when the window moves on, by the timer.
    let waiter = server.in_background("DQ.POP q COUNT 10 BLOCK 0");
    let got = entries(&waiter.join().unwrap());
    assert_eq!(got.len(), 3);
    assert!(first.elapsed() >= Duration::from_millis(1900));
    // RATE 0 removes it.
    cmd(&mut c, "DQ.CONFIG q SET RATE 0");
    assert_eq!(entries(&cmd(&mut c, "DQ.POP q COUNT 10")).len(), 4);
    assert_eq!(field(&cmd(&mut c, "DQ.CONFIG q"), "rate"), Value::Nil);
}

#[test]
fn maxinflight_caps_leases_and_an_ack_lets_a_waiter_through() {
    let server = Server::start();
    let mut c = server.conn();
    cmd(&mut c, "DQ.CONFIG q SET MAXINFLIGHT 2");
    add(&mut c, "q", 5);
    let taken = entries(&cmd(&mut c, "DQ.POP q COUNT 5"));
    assert_eq!(taken.len(), 2);
    assert_eq!(cmd(&mut c, "DQ.POP q"), Value::Nil);
    let waiter = server.in_background("DQ.POP q COUNT 5 BLOCK 0");
    wait_blocked(&mut c, 1);
    cmd(&mut c, &format!("DQ.ACK q {}", taken[0].0));
    assert_eq!(entries(&waiter.join().unwrap()).len(), 1);
    assert_eq!(int(&stat(&mut c, "q", "inflight")), 2);
    assert_eq!(int(&field(&cmd(&mut c, "DQ.CONFIG q"), "max-inflight")), 2);
    // A NACK frees a slot too.
    let waiter = server.in_background("DQ.POP q BLOCK 0");
    wait_blocked(&mut c, 1);
    cmd(&mut c, &format!("DQ.NACK q {} DELAY 600000", taken[1].0));
    assert_eq!(entries(&waiter.join().unwrap()).len(), 1);
    cmd(&mut c, "DQ.CONFIG q SET MAXINFLIGHT 0");
    assert_eq!(entries(&cmd(&mut c, "DQ.POP q COUNT 5")).len(), 1);
}

#[test]
fn mpop_takes_from_the_first_queue_that_can_deliver() {
    let server = Server::start();
    let mut c = server.conn();
    add(&mut c, "{j}b", 2);
    add(&mut c, "{j}c", 2);
    cmd(&mut c, "DQ.PAUSE {j}b");
    // {j}a has nothing, {j}b is paused: {j}c delivers.
    let reply = list(&cmd(&mut c, "DQ.MPOP 3 {j}a {j}b {j}c COUNT 5"));
    assert_eq!(text(&reply[0]), "{j}c");
    assert_eq!(entries(&reply[1]).len(), 2);
    cmd(&mut c, "DQ.RESUME {j}b");
    let reply = list(&cmd(&mut c, "DQ.MPOP 3 {j}a {j}b {j}c"));
    assert_eq!(text(&reply[0]), "{j}b");
    assert_eq!(entries(&reply[1]).len(), 1);
    // Under RESP3 the reply is the same two-element array.
    let mut c3 = server.conn_resp3();
    let reply = cmd(&mut c3, "DQ.MPOP 2 {j}a {j}b");
    assert!(
        matches!(&reply, Value::Array(items) if items.len() == 2),
        "{reply:?}"
    );
    assert_eq!(cmd(&mut c, "DQ.MPOP 3 {j}a {j}b {j}c"), Value::Nil);
    // BLOCK waits on every queue at once.
    let waiter = server.in_background("DQ.MPOP 2 {j}a {j}c BLOCK 0");
    wait_blocked(&mut c, 1);
    cmd(&mut c, "DQ.ADD {j}c late ID late");
    let reply = list(&waiter.join().unwrap());
    assert_eq!(text(&reply[0]), "{j}c");
    assert_eq!(entries(&reply[1])[0].0, "late");
    assert_eq!(
        cmd(&mut c, "DQ.MPOP 2 {j}a {j}b BLOCK 100"),
        Value::Nil,
        "timed out"
    );
    let keys = list(&cmd(&mut c, "COMMAND GETKEYS DQ.MPOP 2 x y COUNT 3"));
    assert_eq!(keys.iter().map(text).collect::<Vec<_>>(), ["x", "y"]);
}

#[test]
fn bad_input_gets_an_error_naming_the_argument_and_changes_nothing() {
    let server = Server::start();
    let mut c = server.conn();
    add(&mut c, "q", 1);
    let before = digest(&mut c);
    for (line, expected) in [
        ("DQ.CONFIG q SET RATE 5/0s", "ERR RATE must be"),
        ("DQ.CONFIG q SET RATE abc", "ERR RATE must be"),
        ("DQ.CONFIG q SET RATE 5", "ERR RATE must be"),
        ("DQ.CONFIG q SET MAXINFLIGHT -1", "ERR MAXINFLIGHT must be"),
        ("DQ.CONFIG q SET MAXINFLIGHT x", "ERR MAXINFLIGHT must be"),
        ("DQ.CONFIG q SET LEASE 5 RATE nope", "ERR RATE must be"),
        ("DQ.PAUSE q FOR -5", "ERR FOR must be"),
        ("DQ.PAUSE q FOR", "ERR FOR needs a value"),
        ("DQ.PAUSE q UNTIL 5", "ERR unknown option 'UNTIL'"),
        ("DQ.RESUME q extra", "ERR unknown option 'extra'"),
        ("DQ.RESUME q GROUP", "ERR GROUP needs a value"),
        ("DQ.PAUSE q GROUP", "ERR GROUP needs a value"),
        ("DQ.MPOP 0 q", "ERR numkeys must be a positive integer"),
        (
            "DQ.MPOP 3 q r",
            "ERR numkeys must be at most the number of queues given",
        ),
        ("DQ.MPOP x q", "ERR numkeys must be"),
        ("DQ.MPOP 1 q COUNT 0", "ERR COUNT must be"),
    ] {
        let err = cmd_err(&mut c, line);
        assert!(err.starts_with(expected), "{line}: {err}");
    }
    assert_eq!(digest(&mut c), before);
}

#[test]
fn a_cluster_refuses_mpop_across_slots() {
    let cluster = Cluster::start(3);
    let mut c = cluster.client();
    let err = redis::cmd("DQ.MPOP")
        .arg(2)
        .arg("a")
        .arg("b")
        .query::<Value>(&mut c)
        .unwrap_err();
    assert!(
        err.to_string().to_uppercase().contains("CROSSSLOT"),
        "{err}"
    );
    redis::cmd("DQ.ADD")
        .arg("{t}b")
        .arg("x")
        .query::<String>(&mut c)
        .unwrap();
    let reply: Value = redis::cmd("DQ.MPOP")
        .arg(2)
        .arg("{t}a")
        .arg("{t}b")
        .query(&mut c)
        .unwrap();
    assert_eq!(text(&list(&reply)[0]), "{t}b");
}

#[test]
fn limits_and_their_state_replicate_persist_and_survive_a_failover() {
    // Every write reaches the AOF before its reply: the restart below is
    // a kill.
    let mut master = Server::start_with(&["--appendonly", "yes", "--appendfsync", "always"]);
    let replica = Server::start_replica_of(&master);
    let mut m = master.conn();
    let mut r = replica.conn();
    cmd(&mut m, "DQ.CONFIG q SET RATE 4/1h MAXINFLIGHT 3");
    add(&mut m, "q", 10);
    assert_eq!(entries(&cmd(&mut m, "DQ.POP q COUNT 2")).len(), 2);
    // MAXINFLIGHT holds these back (3 leases at most).
    assert_eq!(entries(&cmd(&mut m, "DQ.POP q COUNT 5")).len(), 1);
    assert_eq!(cmd(&mut m, "DQ.POP q COUNT 5"), Value::Nil);
    cmd(&mut m, "DQ.PAUSE p FOR 3600000");
    cmd(&mut m, "DQ.PAUSE forever");
    cmd(&mut m, "DQ.RESUME forever");
    cmd(&mut m, "DQ.PAUSE forever");
    assert!(wait_until(LONG, || int(&cmd(&mut m, "WAIT 1 1000")) == 1));
    assert!(wait_until(LONG, || digest(&mut m) == digest(&mut r)));
    assert_eq!(int(&stat(&mut r, "q", "throttled")), 2);
    assert_eq!(int(&stat(&mut r, "q", "inflight")), 3);
    // A restart from the AOF keeps it all.
    let digest_before = digest(&mut m);
    drop(r);
    drop(replica);
    master.restart();
    let mut m = master.conn();
    assert_eq!(digest(&mut m), digest_before);
    // The window still holds: 3 of the hour's 4 deliveries were made.
    cmd(&mut m, "DQ.CONFIG q SET MAXINFLIGHT 0");
    assert_eq!(entries(&cmd(&mut m, "DQ.POP q COUNT 5")).len(), 1);
    assert_eq!(cmd(&mut m, "DQ.POP q COUNT 5"), Value::Nil);
    // A promoted replica keeps the pause.
    let replica = Server::start_replica_of(&master);
    let mut r = replica.conn();
    assert!(wait_until(LONG, || digest(&mut m) == digest(&mut r)));
    drop(m);
    drop(master);
    cmd(&mut r, "REPLICAOF NO ONE");
    add(&mut r, "forever", 1);
    assert_eq!(cmd(&mut r, "DQ.POP forever"), Value::Nil);
    assert_eq!(int(&stat(&mut r, "forever", "paused")), 1);
    assert_eq!(int(&stat(&mut r, "p", "paused")), 1);
}

#[test]
fn limits_with_nobody_waiting_cost_no_wakeup() {
    let server = Server::start();
    let mut c = server.conn();
    // A queue at its RATE, one at its MAXINFLIGHT and one paused for an
    // hour, each with ready messages, and no consumer waiting.
    cmd(&mut c, "DQ.CONFIG rated SET RATE 1/1h");
    add(&mut c, "rated", 3);
    assert_eq!(entries(&cmd(&mut c, "DQ.POP rated COUNT 3")).len(), 1);
    cmd(&mut c, "DQ.CONFIG capped SET MAXINFLIGHT 1");
    add(&mut c, "capped", 3);
    assert_eq!(
        entries(&cmd(&mut c, "DQ.POP capped COUNT 3 LEASE 3600000")).len(),
        1
    );
    cmd(&mut c, "DQ.PAUSE paused FOR 3600000");
    add(&mut c, "paused", 3);
    assert_eq!(cmd(&mut c, "DQ.POP paused"), Value::Nil);
    // Non-blocking POPs that the limits held back arm nothing either.
    assert_eq!(cmd(&mut c, "DQ.POP rated"), Value::Nil);
    assert_eq!(cmd(&mut c, "DQ.POP capped"), Value::Nil);
    let ticks = info_field(&mut c, "dq_timer_ticks");
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(
        info_field(&mut c, "dq_timer_ticks"),
        ticks,
        "woke up with nobody waiting"
    );
    // (A waiting consumer is woken when the window moves on: see
    // rate_delivers_what_the_window_allows_and_wakes_waiters_when_it_moves_on.)
}

/// DQ.MPOP passes over a queue its RATE or MAXINFLIGHT holds back, takes
/// from the next, and does not count the passed-over queue as throttled.
#[test]
fn mpop_passes_over_a_queue_held_back_by_its_limits_without_counting_it() {
    let server = Server::start();
    let mut c = server.conn();
    for (queue, limit) in [("{m}rate", "RATE 1/1h"), ("{m}cap", "MAXINFLIGHT 1")] {
        cmd(&mut c, &format!("DQ.CONFIG {queue} SET {limit}"));
        cmd(&mut c, &format!("DQ.ADD {queue} x ID first"));
        cmd(&mut c, &format!("DQ.ADD {queue} x ID second"));
        // The first delivery uses up the limit.
        assert_eq!(
            entries(&cmd(&mut c, &format!("DQ.POP {queue}")))[0].0,
            "first"
        );
        cmd(&mut c, &format!("DQ.ADD {{m}}next y ID after-{queue}"));
        let reply = list(&cmd(&mut c, &format!("DQ.MPOP 2 {queue} {{m}}next")));
        assert_eq!(text(&reply[0]), "{m}next", "{queue}");
        assert_eq!(entries(&reply[1])[0].0, format!("after-{queue}"));
        assert_eq!(int(&stat(&mut c, queue, "throttled")), 0, "{queue}");
        // A POP on it is held back, and that is counted.
        assert_eq!(cmd(&mut c, &format!("DQ.POP {queue}")), Value::Nil);
        assert_eq!(int(&stat(&mut c, queue, "throttled")), 1, "{queue}");
    }
}
