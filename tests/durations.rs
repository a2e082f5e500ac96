//! Every duration argument takes one grammar: bare milliseconds, as every
//! release took, or a whole number with a unit `ms`, `s`, `m`, `h` or `d`
//! (docs/commands.md, "Arguments, replies and errors").

use dq_testkit::*;

/// `at` is `expected` ms after `from`, give or take what the round trip
/// and the server's clock reading cost.
fn after(at: i64, from: u64, expected: u64) -> bool {
    let at = at as u64;
    at >= from + expected && at <= now_ms() + expected
}

#[test]
fn every_duration_argument_takes_a_unit() {
    let server = Server::start();
    let mut c = server.conn();

    let before = now_ms();
    cmd(&mut c, "DQ.ADD q x ID later DELAY 2h TTL 7d");
    let due = int(&field(&cmd(&mut c, "DQ.GET q later"), "due-at"));
    assert!(after(due, before, 2 * 3_600_000), "{due}");
    let expires = int(&field(&cmd(&mut c, "DQ.GET q later"), "expires-at"));
    assert!(after(expires, before, 7 * 86_400_000), "{expires}");

    cmd(&mut c, "DQ.ADD q x ID now");
    let before = now_ms();
    let taken = entries(&cmd(&mut c, "DQ.POP q LEASE 90s BLOCK 1s"));
    assert_eq!(taken[0].0, "now");
    let deadline = int(&field(&cmd(&mut c, "DQ.GET q now"), "lease-deadline"));
    assert!(after(deadline, before, 90_000), "{deadline}");

    let before = now_ms();
    let touched = int(&cmd(&mut c, "DQ.TOUCH q now LEASE 5m ATTEMPT 1"));
    assert!(after(touched, before, 300_000), "{touched}");

    let before = now_ms();
    assert_eq!(text(&cmd(&mut c, "DQ.NACK q now DELAY 250ms")), "delayed");
    let due = int(&field(&cmd(&mut c, "DQ.GET q now"), "due-at"));
    assert!(after(due, before, 250), "{due}");

    let before = now_ms();
    cmd(&mut c, "DQ.PAUSE q FOR 1m");
    let until = int(&field(&cmd(&mut c, "DQ.STATS q"), "paused-until"));
    assert!(after(until, before, 60_000), "{until}");

    cmd(&mut c, "DQ.CONFIG q SET LEASE 45s RATE 10/1s");
    let config = cmd(&mut c, "DQ.CONFIG q");
    assert_eq!(int(&field(&config, "lease-ms")), 45_000);

    // A BLOCK with a unit waits, and gives up.
    let before = now_ms();
    assert_eq!(cmd(&mut c, "DQ.POP empty BLOCK 100ms"), Value::Nil);
    assert!(now_ms() >= before + 100);

    // Bare milliseconds still mean what they meant.
    cmd(&mut c, "DQ.ADD q x ID bare DELAY 1500");
    let before = now_ms();
    let due = int(&field(&cmd(&mut c, "DQ.GET q bare"), "due-at"));
    assert!(due as u64 <= before + 1500 && due as u64 + 1500 >= before);
}

#[test]
fn a_bad_duration_names_the_argument_and_shows_the_grammar() {
    let server = Server::start();
    let mut c = server.conn();
    let before = digest(&mut c);
    let grammar = "whole milliseconds such as 1500, or a whole number with a unit ms, s, \
                   m, h or d such as 30s, 5m or 7d";
    for (line, what) in [
        ("DQ.ADD q x DELAY 1.5s", "DELAY must be a duration"),
        ("DQ.ADD q x DELAY 5S", "DELAY must be a duration"),
        ("DQ.ADD q x TTL 0s", "TTL must be a positive duration"),
        ("DQ.POP q LEASE 0", "LEASE must be a positive duration"),
        ("DQ.POP q BLOCK -1s", "BLOCK must be a duration"),
        ("DQ.PAUSE q FOR 1w", "FOR must be a positive duration"),
        (
            "DQ.CONFIG q SET LEASE 2sec",
            "LEASE must be a positive duration",
        ),
        (
            "DQ.SCHEDULE q s x EVERY 500ms",
            "EVERY must be a duration of at least 1s",
        ),
    ] {
        let err = cmd_err(&mut c, line);
        assert_eq!(err, format!("ERR {what}: {grammar}"), "{line}");
    }
    assert_eq!(
        digest(&mut c),
        before,
        "a refused command changed something"
    );
}
