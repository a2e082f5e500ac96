//! DQ.POP BLOCK: woken by ADD, by the timer and by lease expiry; times out
//! like BLPOP; never blocks inside MULTI.

use std::thread;
use std::time::{Duration, Instant};

use dq_testkit::*;

/// Starts a blocking POP on its own connection and returns its reply.
fn pop_in_background(server: &Server, line: &str) -> thread::JoinHandle<(Value, Duration)> {
    let mut c = server.conn();
    let line = line.to_string();
    thread::spawn(move || {
        let started = Instant::now();
        let reply = cmd(&mut c, &line);
        (reply, started.elapsed())
    })
}

#[test]
fn add_wakes_a_blocked_consumer() {
    let server = Server::start();
    let mut c = server.conn();
    let waiter = pop_in_background(&server, "DQ.POP q BLOCK 0");
    wait_blocked(&mut c, 1);
    cmd(&mut c, "DQ.ADD q wake-up ID w");
    let (reply, _) = waiter.join().unwrap();
    assert_eq!(entries(&reply), vec![("w".into(), "wake-up".into(), 1)]);
    assert_eq!(
        text(&field(&cmd(&mut c, "DQ.GET q w"), "state")),
        "inflight"
    );
}

#[test]
fn the_timer_wakes_a_blocked_consumer_when_a_message_falls_due() {
    let server = Server::start();
    let mut c = server.conn();
    let waiter = pop_in_background(&server, "DQ.POP q BLOCK 60000");
    wait_blocked(&mut c, 1);
    cmd(&mut c, "DQ.ADD q later ID l DELAY 300");
    let due_at = int(&field(&cmd(&mut c, "DQ.GET q l"), "due-at")) as u64;
    let (reply, _) = waiter.join().unwrap();
    let woke_at = now_ms();
    assert_eq!(entries(&reply)[0].0, "l");
    assert!(woke_at >= due_at);
}

#[test]
fn lease_expiry_wakes_a_blocked_consumer() {
    let server = Server::start();
    let mut c = server.conn();
    // The consumer must block before the lease ends, or it may just find
    // the message ready: then a fresh queue tries a longer lease.
    let reply = in_time(300, |ms| {
        let q = format!("q{ms}");
        cmd(&mut c, &format!("DQ.ADD {q} job ID j"));
        let before = now_ms();
        cmd(&mut c, &format!("DQ.POP {q} LEASE {ms}"));
        let block = ms + LONG.as_millis() as u64;
        let waiter = pop_in_background(&server, &format!("DQ.POP {q} BLOCK {block}"));
        assert!(wait_until(LONG, || blocked_clients(&mut c) == 1
            || waiter.is_finished()));
        let in_time = now_ms() < before + ms;
        let (reply, _) = waiter.join().unwrap();
        in_time.then_some(reply)
    });
    assert_eq!(entries(&reply), vec![("j".into(), "job".into(), 2)]);
}

#[test]
fn block_times_out_with_nil() {
    let server = Server::start();
    let waiter = pop_in_background(&server, "DQ.POP q BLOCK 200");
    let (reply, waited) = waiter.join().unwrap();
    assert_eq!(reply, Value::Nil);
    assert!(waited >= Duration::from_millis(200), "{waited:?}");
}

#[test]
fn one_message_wakes_one_of_two_consumers() {
    let server = Server::start();
    let mut c = server.conn();
    // The ADD must come while both still block: when it came after their
    // BLOCK may have run out, a fresh queue tries a longer BLOCK.
    let replies = in_time(1000, |ms| {
        let line = format!("DQ.POP q{ms} BLOCK {ms}");
        let before = now_ms();
        let first = pop_in_background(&server, &line);
        let second = pop_in_background(&server, &line);
        assert!(wait_until(LONG, || {
            blocked_clients(&mut c) == 2 || now_ms() >= before + ms
        }));
        cmd(&mut c, &format!("DQ.ADD q{ms} only-one"));
        let in_time = now_ms() < before + ms;
        let replies = [first.join().unwrap().0, second.join().unwrap().0];
        in_time.then_some(replies)
    });
    let delivered: usize = replies.iter().map(|r| entries(r).len()).sum();
    assert_eq!(delivered, 1, "{replies:?}");
}

#[test]
fn block_does_not_block_inside_multi() {
    let server = Server::start();
    let mut c = server.conn();
    let reply: Value = redis::pipe()
        .atomic()
        .cmd("DQ.POP")
        .arg("q")
        .arg("BLOCK")
        .arg("0")
        .query(&mut c)
        .unwrap();
    assert_eq!(reply, Value::Array(vec![Value::Nil]));
}

#[test]
fn block_does_not_block_inside_a_script() {
    let server = Server::start();
    let mut c = server.conn();
    let reply = cmd(
        &mut c,
        "EVAL return(redis.call('DQ.POP',KEYS[1],'BLOCK','0')) 1 q",
    );
    assert_eq!(reply, Value::Nil);
}

#[test]
fn count_applies_to_a_woken_consumer() {
    let server = Server::start();
    let mut c = server.conn();
    let waiter = pop_in_background(&server, "DQ.POP q BLOCK 60000 COUNT 10");
    wait_blocked(&mut c, 1);
    let mut pipe = redis::pipe();
    pipe.atomic();
    for i in 0..3 {
        pipe.cmd("DQ.ADD").arg("q").arg(format!("m{i}"));
    }
    let _: Value = pipe.query(&mut c).unwrap();
    let (reply, _) = waiter.join().unwrap();
    assert_eq!(entries(&reply).len(), 3);
}

/// CLIENT UNBLOCK ends a blocked POP with nil, as it ends BLPOP (the
/// libraries' Workers stop this way).
#[test]
fn client_unblock_ends_a_blocked_pop_with_nil() {
    let server = Server::start();
    let mut waiter = server.conn();
    let id = int(&cmd(&mut waiter, "CLIENT ID"));
    let blocked_pop = thread::spawn(move || cmd(&mut waiter, "DQ.POP q BLOCK 0"));
    let mut c = server.conn();
    wait_blocked(&mut c, 1);
    assert_eq!(int(&cmd(&mut c, &format!("CLIENT UNBLOCK {id}"))), 1);
    assert_eq!(blocked_pop.join().unwrap(), Value::Nil);
    // Nothing was taken, and the queue still serves.
    cmd(&mut c, "DQ.ADD q x ID m");
    assert_eq!(entries(&cmd(&mut c, "DQ.POP q"))[0].0, "m");
}

/// The timer is armed for the exact due time of the earliest timed work,
/// not polled: a due message becomes ready when that timer fires. (How
/// late it is then is a measurement, not a test: `make bench`, scenario 3.)
#[test]
fn the_timer_is_armed_for_the_earliest_due_time() {
    let server = Server::start();
    let mut c = server.conn();
    assert_eq!(info_field(&mut c, "dq_timer_armed_for"), 0, "idle");
    let at = now_ms() + 300_000;
    cmd(&mut c, &format!("DQ.ADD q x ID later AT {at}"));
    assert_eq!(info_field(&mut c, "dq_timer_armed_for"), at as i64);
    let sooner = at - 60_000;
    cmd(&mut c, &format!("DQ.ADD other x ID sooner AT {sooner}"));
    assert_eq!(info_field(&mut c, "dq_timer_armed_for"), sooner as i64);
    // A message due soon takes the timer; when it has fired, the timer is
    // armed for the earliest work left.
    let soon = now_ms() + 200;
    cmd(&mut c, &format!("DQ.ADD q x ID soon AT {soon}"));
    assert_eq!(info_field(&mut c, "dq_timer_armed_for"), soon as i64);
    assert!(wait_until(LONG, || {
        info_field(&mut c, "dq_timer_armed_for") == sooner as i64
    }));
    assert_eq!(
        text(&field(&cmd(&mut c, "DQ.GET q soon"), "state")),
        "ready"
    );
}

/// Work more than 10 minutes ahead is reached in hops of 10 minutes: on
/// Redis 7.0 a module timer armed over 35.8 minutes ahead, re-armed from
/// the timer's own tick, left the server spinning at 100% CPU until it
/// fired (its event loop's 32-bit arithmetic wrapped the period).
#[test]
fn the_timer_never_sleeps_longer_than_ten_minutes() {
    const HOP: u64 = 600_000;
    let server = Server::start();
    let mut c = server.conn();
    let far = now_ms() + 2 * 3_600_000;
    let before = now_ms();
    cmd(&mut c, &format!("DQ.ADD q x ID far AT {far}"));
    let after = now_ms();
    let armed = info_field(&mut c, "dq_timer_armed_for") as u64;
    assert!(
        (before + HOP..=after + HOP).contains(&armed),
        "armed for {armed}, added between {before} and {after}"
    );
    // Re-armed by the tick of a message due soon, the timer hops again.
    cmd(&mut c, &format!("DQ.ADD q x ID soon AT {}", now_ms() + 100));
    assert!(wait_until(LONG, || {
        text(&field(&cmd(&mut c, "DQ.GET q soon"), "state")) == "ready"
    }));
    let armed = info_field(&mut c, "dq_timer_armed_for") as u64;
    assert!(armed <= now_ms() + HOP, "armed for {armed}");
    assert_eq!(
        text(&field(&cmd(&mut c, "DQ.GET q far"), "state")),
        "delayed"
    );
}
