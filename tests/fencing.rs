//! Deliveries and attempts: ATTEMPT fences NACK and TOUCH to one delivery;
//! NACK DEAD and ERROR; the attempts a message has left.

use dq_testkit::*;
use redis::Value;

fn state(c: &mut redis::Connection, q: &str, id: &str) -> String {
    text(&field(&cmd(c, &format!("DQ.GET {q} {id}")), "state"))
}

/// Pops `id` with a short lease, waits for the lease to run out and pops
/// it again: returns the second delivery's attempt, the first's being one
/// less.
fn second_delivery(c: &mut redis::Connection, q: &str, id: &str) -> i64 {
    let first = entries(&cmd(c, &format!("DQ.POP {q} LEASE 50")));
    assert_eq!(first[0].0, id);
    assert!(wait_until(LONG, || state(c, q, id) == "ready"));
    let second = entries(&cmd(c, &format!("DQ.POP {q} LEASE 60000")));
    assert_eq!(second[0].0, id);
    assert_eq!(second[0].2, first[0].2 + 1);
    second[0].2
}

#[test]
fn a_consumer_whose_lease_ran_out_cannot_fail_or_extend_the_next_delivery() {
    let server = Server::start();
    let mut c = server.conn();
    cmd(&mut c, "DQ.ADD q job ID j");
    let attempt = second_delivery(&mut c, "q", "j");
    assert_eq!(attempt, 2);
    let deadline = field(&cmd(&mut c, "DQ.GET q j"), "lease-deadline");
    let before = digest(&mut c);

    // The first consumer, late: both refused, nothing changes.
    for line in [
        "DQ.NACK q j ATTEMPT 1",
        "DQ.NACK q j DEAD ATTEMPT 1 ERROR late",
        "DQ.TOUCH q j LEASE 999999 ATTEMPT 1",
        "DQ.NACK q j ATTEMPT 3",
    ] {
        let err = cmd_err(&mut c, line);
        assert!(err.starts_with("STALE delivery "), "{line}: {err}");
        assert!(err.contains("'j'"), "{err}");
    }
    assert_eq!(
        cmd_err(&mut c, "DQ.TOUCH q j ATTEMPT 1"),
        "STALE delivery 1 of message 'j' is over: the message is at delivery 2 (inflight)"
    );
    assert_eq!(
        cmd_err(&mut c, "DQ.NACK q j ATTEMPT 9"),
        "STALE delivery 9 of message 'j' has not happened: the message is at delivery 2 (inflight)"
    );
    assert_eq!(digest(&mut c), before);
    assert_eq!(state(&mut c, "q", "j"), "inflight");
    assert_eq!(
        field(&cmd(&mut c, "DQ.GET q j"), "lease-deadline"),
        deadline
    );

    // The current holder's calls go through.
    let extended = int(&cmd(&mut c, "DQ.TOUCH q j LEASE 120000 ATTEMPT 2"));
    assert!(extended > int(&deadline));
    assert_eq!(text(&cmd(&mut c, "DQ.NACK q j DELAY 0 ATTEMPT 2")), "ready");
    // Delivery 2 is over now: its own late retry is refused too.
    assert!(cmd_err(&mut c, "DQ.NACK q j ATTEMPT 2").starts_with("STALE"));
}

#[test]
fn without_attempt_nack_and_touch_act_on_whatever_delivery_is_current() {
    let server = Server::start();
    let mut c = server.conn();
    cmd(&mut c, "DQ.ADD q job ID j");
    second_delivery(&mut c, "q", "j");
    // The unfenced late NACK of delivery 1 fails delivery 2: the hazard
    // ATTEMPT exists for.
    assert_eq!(text(&cmd(&mut c, "DQ.NACK q j DELAY 0")), "ready");
    // Not in flight: nil without ATTEMPT, STALE with it.
    assert_eq!(cmd(&mut c, "DQ.NACK q j"), Value::Nil);
    assert_eq!(cmd(&mut c, "DQ.TOUCH q j"), Value::Nil);
    assert!(cmd_err(&mut c, "DQ.TOUCH q j ATTEMPT 2").starts_with("STALE"));
    // An unknown id, and a queue that does not exist.
    assert_eq!(cmd(&mut c, "DQ.NACK q nobody"), Value::Nil);
    assert!(cmd_err(&mut c, "DQ.NACK q nobody ATTEMPT 1").starts_with("STALE"));
    assert!(cmd_err(&mut c, "DQ.TOUCH none j ATTEMPT 1").starts_with("STALE"));
    assert_eq!(cmd(&mut c, "EXISTS none"), Value::Int(0));
}

#[test]
fn ack_stays_unfenced() {
    let server = Server::start();
    let mut c = server.conn();
    cmd(&mut c, "DQ.ADD q job ID j");
    second_delivery(&mut c, "q", "j");
    // A late ACK is proof the work was done.
    assert_eq!(int(&cmd(&mut c, "DQ.ACK q j")), 1);
    assert_eq!(cmd(&mut c, "DQ.GET q j"), Value::Nil);
}

#[test]
fn nack_dead_dead_letters_now_with_the_error_kept() {
    let server = Server::start();
    let mut c = server.conn();
    cmd(&mut c, "DQ.ADD q job ID j MAXATTEMPTS 10");
    cmd(&mut c, "DQ.ADD q job ID k");
    assert_eq!(entries(&cmd(&mut c, "DQ.POP q COUNT 2")).len(), 2);
    let reply = run(
        &mut c,
        &[
            b"DQ.NACK",
            b"q",
            b"j",
            b"ERROR",
            b"410 Gone: no such hook",
            b"DEAD",
            b"ATTEMPT",
            b"1",
        ],
    )
    .unwrap();
    assert_eq!(text(&reply), "dead");
    let got = cmd(&mut c, "DQ.GET q j");
    assert_eq!(text(&field(&got, "dead-reason")), "permanent");
    assert_eq!(text(&field(&got, "last-error")), "410 Gone: no such hook");
    assert_eq!(int(&field(&got, "attempts-left")), 9);
    let stats = cmd(&mut c, "DQ.STATS q");
    assert_eq!(int(&field(&stats, "dead")), 1);
    assert_eq!(int(&field(&stats, "dead-lettered")), 1);

    // PEEK and SCAN show the last error as the entry's fifth element.
    let Value::Array(peeked) = cmd(&mut c, "DQ.PEEK q DEAD") else {
        panic!()
    };
    let Value::Array(entry) = &peeked[0] else {
        panic!()
    };
    assert_eq!(text(&entry[0]), "j");
    assert_eq!(text(&entry[4]), "410 Gone: no such hook");
    let Value::Array(page) = cmd(&mut c, "DQ.SCAN q 0 STATE INFLIGHT") else {
        panic!()
    };
    let Value::Array(found) = &page[1] else {
        panic!()
    };
    let Value::Array(entry) = &found[0] else {
        panic!()
    };
    assert_eq!((text(&entry[0]), &entry[4]), ("k".into(), &Value::Nil));

    // A retry keeps the latest error; REDRIVE brings a permanent failure back.
    cmd(&mut c, "DQ.NACK q k DELAY 60000 ERROR timeout");
    assert_eq!(
        text(&field(&cmd(&mut c, "DQ.GET q k"), "last-error")),
        "timeout"
    );
    assert_eq!(int(&cmd(&mut c, "DQ.REDRIVE q ID j")), 1);
    assert_eq!(state(&mut c, "q", "j"), "ready");
}

#[test]
fn attempts_left_counts_from_the_last_add_replacement_or_redrive() {
    let server = Server::start();
    let mut c = server.conn();
    let left = |c: &mut redis::Connection| int(&field(&cmd(c, "DQ.GET q j"), "attempts-left"));
    let attempt = |c: &mut redis::Connection| int(&field(&cmd(c, "DQ.GET q j"), "attempt"));
    cmd(&mut c, "DQ.ADD q v1 ID j MAXATTEMPTS 2");
    assert_eq!((attempt(&mut c), left(&mut c)), (0, 2));
    cmd(&mut c, "DQ.POP q");
    assert_eq!((attempt(&mut c), left(&mut c)), (1, 1));
    cmd(&mut c, "DQ.NACK q j DELAY 0 ATTEMPT 1");
    cmd(&mut c, "DQ.POP q");
    assert_eq!(text(&cmd(&mut c, "DQ.NACK q j ATTEMPT 2")), "dead");
    assert_eq!((attempt(&mut c), left(&mut c)), (2, 0));
    // REDRIVE: a fresh budget, the numbering goes on.
    cmd(&mut c, "DQ.REDRIVE q ID j");
    assert_eq!((attempt(&mut c), left(&mut c)), (2, 2));
    let popped = entries(&cmd(&mut c, "DQ.POP q"));
    assert_eq!(popped[0].2, 3);
    // A replacement while in flight takes effect when delivery 3 ends, and
    // counts from there.
    cmd(&mut c, "DQ.ADD q v2 ID j MAXATTEMPTS 5");
    assert_eq!((attempt(&mut c), left(&mut c)), (3, 1));
    cmd(&mut c, "DQ.NACK q j ATTEMPT 3");
    assert_eq!(text(&field(&cmd(&mut c, "DQ.GET q j"), "payload")), "v2");
    assert_eq!((attempt(&mut c), left(&mut c)), (3, 5));
    let popped = entries(&cmd(&mut c, "DQ.POP q"));
    assert_eq!((popped[0].1.as_str(), popped[0].2), ("v2", 4));
    assert!(cmd_err(&mut c, "DQ.NACK q j ATTEMPT 3").starts_with("STALE"));
}
