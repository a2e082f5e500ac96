//! TTL: a message not acknowledged within TTL of its ADD is dead with
//! reason `expired`, never silently dropped.

use dq_testkit::*;

fn state(c: &mut redis::Connection, q: &str, id: &str) -> String {
    text(&field(&cmd(c, &format!("DQ.GET {q} {id}")), "state"))
}

#[test]
fn a_never_popped_message_dies_when_its_ttl_ends() {
    let server = Server::start();
    let mut c = server.conn();
    let before = now_ms() as i64;
    cmd(&mut c, "DQ.ADD q x ID waiting DELAY 60000 TTL 200");
    let after = now_ms() as i64;
    let expires = int(&field(&cmd(&mut c, "DQ.GET q waiting"), "expires-at"));
    // 200 ms after the server's now, which lies between before and after.
    assert!((before + 200..=after + 200).contains(&expires));
    assert!(wait_until(LONG, || state(&mut c, "q", "waiting") == "dead"));
    let m = cmd(&mut c, "DQ.GET q waiting");
    assert_eq!(text(&field(&m, "dead-reason")), "expired");
    assert!(int(&field(&m, "died-at")) >= expires);
    let stats = cmd(&mut c, "DQ.STATS q");
    assert_eq!(
        (
            int(&field(&stats, "expired")),
            int(&field(&stats, "delayed"))
        ),
        (1, 0)
    );
}

#[test]
fn a_popped_but_unacked_message_dies_when_its_ttl_ends() {
    let server = Server::start();
    let mut c = server.conn();
    // Popped before its TTL ends: a POP that came later proves nothing, and
    // a fresh queue tries a longer TTL.
    let q = in_time(200, |ms| {
        let q = format!("q{ms}");
        let before = now_ms();
        cmd(&mut c, &format!("DQ.ADD {q} x ID busy TTL {ms}"));
        let popped = entries(&cmd(&mut c, &format!("DQ.POP {q} LEASE 600000")));
        if now_ms() >= before + ms {
            return None;
        }
        assert_eq!(popped.len(), 1);
        Some(q)
    });
    assert!(wait_until(LONG, || state(&mut c, &q, "busy") == "dead"));
    assert_eq!(
        text(&field(
            &cmd(&mut c, &format!("DQ.GET {q} busy")),
            "dead-reason"
        )),
        "expired"
    );
    assert_eq!(
        int(&cmd(&mut c, &format!("DQ.ACK {q} busy"))),
        0,
        "too late"
    );
    assert_eq!(
        int(&field(&cmd(&mut c, &format!("DQ.STATS {q}")), "inflight")),
        0
    );
}

#[test]
fn a_message_acked_in_time_is_simply_gone() {
    let server = Server::start();
    let mut c = server.conn();
    // Acknowledged before its TTL ends: an ACK that came later proves
    // nothing, and a fresh queue tries a longer TTL.
    let q = in_time(300, |ms| {
        let q = format!("q{ms}");
        let before = now_ms();
        cmd(&mut c, &format!("DQ.ADD {q} x ID quick TTL {ms}"));
        cmd(
            &mut c,
            &format!("DQ.ADD {q} y ID marker DELAY {}", ms + ms / 3),
        );
        cmd(&mut c, &format!("DQ.POP {q}"));
        let acked = int(&cmd(&mut c, &format!("DQ.ACK {q} quick")));
        if now_ms() >= before + ms {
            return None;
        }
        assert_eq!(acked, 1);
        Some(q)
    });
    // The marker falls due after the TTL would have ended: by then nothing died.
    assert!(wait_until(LONG, || state(&mut c, &q, "marker") == "ready"));
    let stats = cmd(&mut c, &format!("DQ.STATS {q}"));
    assert_eq!(
        (int(&field(&stats, "dead")), int(&field(&stats, "expired"))),
        (0, 0)
    );
    assert_eq!(cmd(&mut c, &format!("DQ.GET {q} quick")), Value::Nil);
}

#[test]
fn ttl_is_checked() {
    let server = Server::start();
    let mut c = server.conn();
    let before = digest(&mut c);
    for (line, expected) in [
        (
            "DQ.ADD q x TTL 0",
            "ERR TTL must be a positive duration: whole milliseconds such as 1500, or a whole number with a unit ms, s, m, h or d such as 30s, 5m or 7d",
        ),
        (
            "DQ.ADD q x TTL -1",
            "ERR TTL must be a positive duration: whole milliseconds such as 1500, or a whole number with a unit ms, s, m, h or d such as 30s, 5m or 7d",
        ),
        ("DQ.ADD q x TTL", "ERR TTL needs a value"),
        ("DQ.ADD q x TTL 1 TTL 2", "ERR TTL is given more than once"),
        (
            "DQ.ADD q x TTL 9007199254740991",
            "ERR TTL would be later than the latest time dq can store (2^53-1 ms)",
        ),
    ] {
        assert_eq!(cmd_err(&mut c, line), expected);
        assert_eq!(digest(&mut c), before);
    }
}

/// A redriven message has no TTL any more (docs/commands.md, DQ.ADD's
/// TTL): it got its fresh attempts from an operator, not from its ADD.
#[test]
fn a_redriven_message_loses_its_ttl() {
    let server = Server::start();
    let mut c = server.conn();
    cmd(&mut c, "DQ.ADD q x ID m TTL 100");
    assert!(wait_until(LONG, || state(&mut c, "q", "m") == "dead"));
    assert_eq!(int(&cmd(&mut c, "DQ.REDRIVE q ID m")), 1);
    let m = cmd(&mut c, "DQ.GET q m");
    assert_eq!(text(&field(&m, "state")), "ready");
    assert_eq!(field(&m, "expires-at"), Value::Nil);
}
