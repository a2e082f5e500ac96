//! Keyspace notifications on the queue name, one per kind of transition
//! per command or timer tick, in the generic class (`notify-keyspace-events`
//! with `g`, e.g. `KEA` or `Kg`).

use std::collections::HashSet;
use std::time::{Duration, Instant};

use dq_testkit::*;

/// Events seen on `__keyspace@0__:<queue>` until `wanted` are all seen or
/// the deadline passes.
fn watch(
    server: &Server,
    queue: &str,
    wanted: &[&str],
    act: impl FnOnce(&mut redis::Connection),
) -> HashSet<String> {
    let mut listener = server.conn();
    let mut pubsub = listener.as_pubsub();
    pubsub
        .psubscribe(format!("__keyspace@0__:{queue}"))
        .unwrap();
    pubsub
        .set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    let mut c = server.conn();
    act(&mut c);
    let mut seen = HashSet::new();
    let deadline = Instant::now() + LONG;
    while Instant::now() < deadline && !wanted.iter().all(|w| seen.contains(*w)) {
        if let Ok(msg) = pubsub.get_message() {
            seen.insert(msg.get_payload::<String>().unwrap());
        }
    }
    seen
}

#[test]
fn every_transition_is_announced_on_the_queue_name() {
    let server = Server::start_with(&["--notify-keyspace-events", "KEA"]);
    let wanted = [
        "dq.add",
        "dq.ready",
        "dq.pop",
        "dq.ack",
        "dq.nack",
        "dq.touch",
        "dq.lease-expired",
        "dq.dead",
        "dq.redrive",
        "dq.cancel",
        "dq.purge",
    ];
    let seen = watch(&server, "orders", &wanted, |c| {
        cmd(c, "DQ.ADD orders a ID a MAXATTEMPTS 1");
        cmd(c, "DQ.POP orders");
        cmd(c, "DQ.TOUCH orders a");
        cmd(c, "DQ.NACK orders a"); // out of attempts: dead
        cmd(c, "DQ.REDRIVE orders");
        cmd(c, "DQ.POP orders");
        cmd(c, "DQ.ACK orders a");
        cmd(c, "DQ.ADD orders b ID b");
        cmd(c, "DQ.POP orders LEASE 50"); // the timer expires it
        cmd(c, "DQ.ADD orders c ID c DELAY 60000");
        cmd(c, "DQ.CANCEL orders c");
        cmd(c, "DQ.ADD orders d DELAY 60000");
        cmd(c, "DQ.PURGE orders DELAYED");
    });
    for event in wanted {
        assert!(seen.contains(event), "{event} not seen in {seen:?}");
    }
}

#[test]
fn the_timer_announces_messages_it_makes_ready() {
    let server = Server::start_with(&["--notify-keyspace-events", "Kg"]);
    let seen = watch(&server, "later", &["dq.ready"], |c| {
        cmd(c, "DQ.ADD later x DELAY 100");
    });
    assert!(seen.contains("dq.ready"), "{seen:?}");
}

#[test]
fn nothing_is_announced_when_notifications_are_off() {
    let server = Server::start();
    // A message published after the commands arrives after anything they
    // announced: once it is seen, nothing else is coming.
    let seen = watch(&server, "q", &["sentinel"], |c| {
        cmd(c, "DQ.ADD q x");
        cmd(c, "DQ.POP q");
        cmd(c, "PUBLISH __keyspace@0__:q sentinel");
    });
    assert_eq!(seen, HashSet::from(["sentinel".to_string()]));
}

/// Every event in order, one per kind of transition per command, repeats
/// included: commands that involve no timer, then a sentinel published
/// after them (it arrives after anything they announced).
#[test]
fn each_command_announces_once_in_order() {
    let server = Server::start_with(&["--notify-keyspace-events", "Kg"]);
    let mut listener = server.conn();
    let mut pubsub = listener.as_pubsub();
    pubsub.psubscribe("__keyspace@0__:seq").unwrap();
    pubsub
        .set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    let mut c = server.conn();
    for line in [
        "DQ.ADD seq a ID a",
        "DQ.ADD seq b ID b",
        "DQ.POP seq COUNT 2",
        "DQ.ACK seq a",
        "DQ.PAUSE seq",
        "DQ.PAUSE seq FOR 60000",
        "DQ.RESUME seq",
        "DQ.RESUME seq", // not paused: nothing to announce
        "DQ.SCHEDULE seq s x EVERY 1h START 4102444800000",
        "DQ.SCHEDULE seq s x EVERY 2h START 4102444800000",
        "DQ.UNSCHEDULE seq s",
        "DQ.UNSCHEDULE seq s", // gone already
        "DQ.ACK seq nope",     // not in flight: nothing
        "PUBLISH __keyspace@0__:seq sentinel",
    ] {
        cmd(&mut c, line);
    }
    let mut seen = Vec::new();
    let deadline = Instant::now() + LONG;
    while Instant::now() < deadline && seen.last().is_none_or(|l| l != "sentinel") {
        if let Ok(msg) = pubsub.get_message() {
            seen.push(msg.get_payload::<String>().unwrap());
        }
    }
    assert_eq!(
        seen,
        [
            // Added due: added, and ready at once.
            "dq.add",
            "dq.ready",
            "dq.add",
            "dq.ready",
            "dq.pop",
            "dq.ack",
            "dq.pause",
            "dq.pause",
            "dq.resume",
            "dq.schedule",
            "dq.schedule",
            "dq.unschedule",
            "sentinel"
        ]
    );
}
