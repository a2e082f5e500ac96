//! The module must not leak, crash or stall on what it reads back.

mod support;

use std::time::Duration;

use support::*;

fn used_memory(c: &mut redis::Connection) -> i64 {
    let info = text(&cmd(c, "INFO memory"));
    info.lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("used_memory in INFO")
}

#[test]
fn reading_and_moving_messages_does_not_leak_memory() {
    let server = Server::start();
    let mut c = server.conn();
    let payload = "x".repeat(10_000);
    cmd(&mut c, &format!("DQ.ADD q {payload} ID big"));
    // Warm up allocator caches before measuring.
    for _ in 0..100 {
        cmd(&mut c, "DQ.GET q big");
    }
    let before = used_memory(&mut c);
    for _ in 0..2000 {
        cmd(&mut c, "DQ.GET q big");
    }
    for _ in 0..500 {
        cmd(&mut c, &format!("DQ.ADD q {payload} ID m"));
        let popped = entries(&cmd(&mut c, "DQ.POP q COUNT 2"));
        let ids: Vec<&str> = popped.iter().map(|e| e.0.as_str()).collect();
        cmd(&mut c, &format!("DQ.ACK q {}", ids.join(" ")));
        cmd(&mut c, &format!("DQ.ADD q {payload} ID big"));
    }
    let grown = used_memory(&mut c) - before;
    // A leaked copy per read would be ~20 MB for the GETs alone.
    assert!(grown < 1_000_000, "used_memory grew by {grown} bytes");
}

#[test]
fn an_unreadable_message_is_reported_set_aside_and_cancellable() {
    let server = Server::start();
    let mut c = server.conn();
    cmd(&mut c, "DQ.ADD q x ID bad");
    cmd(&mut c, "DQ.ADD q y ID good");
    let Value::Array(keys) = cmd(&mut c, "KEYS dq:*:q:msgs") else {
        panic!()
    };
    let msgs = text(&keys[0]);
    cmd(&mut c, &format!("HSET {msgs} bad garbage"));
    let err = cmd_err(&mut c, "DQ.GET q bad");
    assert!(err.starts_with("ERR message 'bad' is corrupt"), "{err}");
    // The queue keeps moving: POP delivers the good one.
    assert_eq!(entries(&cmd(&mut c, "DQ.POP q COUNT 10"))[0].0, "good");
    assert!(server.log().contains("set aside unreadable message 'bad'"));
    assert_eq!(int(&cmd(&mut c, "DQ.CANCEL q bad")), 1);
    assert_eq!(cmd(&mut c, "DQ.GET q bad"), Value::Nil);
}

#[test]
fn an_unreadable_delayed_message_does_not_stop_the_timer() {
    let server = Server::start();
    let mut c = server.conn();
    cmd(&mut c, "DQ.ADD q x ID bad DELAY 100");
    cmd(&mut c, "DQ.ADD q y ID good DELAY 150");
    let Value::Array(keys) = cmd(&mut c, "KEYS dq:*:q:msgs") else {
        panic!()
    };
    cmd(&mut c, &format!("HSET {} bad garbage", text(&keys[0])));
    assert!(wait_until(Duration::from_secs(5), || {
        !entries(&cmd(&mut c, "DQ.POP q")).is_empty()
    }));
    assert_eq!(int(&field(&cmd(&mut c, "DQ.STATS q"), "delayed")), 0);
}

#[test]
fn a_hand_written_huge_score_does_not_crash_the_server() {
    let server = Server::start();
    let mut c = server.conn();
    cmd(&mut c, "DQ.ADD q x ID m");
    let Value::Array(keys) = cmd(&mut c, "KEYS dq:*:q:msgs") else {
        panic!()
    };
    let inflight = text(&keys[0]).replace(":msgs", ":inflight");
    cmd(&mut c, &format!("ZADD {inflight} 1e300 ghost"));
    cmd(&mut c, "DQ.ADD q y DELAY 10");
    assert_eq!(text(&cmd(&mut c, "PING")), "PONG");
    assert!(wait_until(Duration::from_secs(5), || {
        int(&field(&cmd(&mut c, "DQ.STATS q"), "ready")) == 2
    }));
}

#[test]
fn a_command_that_changes_nothing_does_not_break_watch() {
    let server = Server::start();
    let mut c = server.conn();
    let mut other = server.conn();
    cmd(&mut c, "DQ.ADD q x ID m DELAY 60000");
    let Value::Array(keys) = cmd(&mut c, "KEYS dq:*:q:delayed") else {
        panic!()
    };
    let delayed = text(&keys[0]);
    cmd(&mut c, &format!("WATCH {delayed}"));
    cmd(&mut other, "DQ.POP q"); // nothing ready: no write
    cmd(&mut other, "DQ.ACK q m"); // not in flight: no write
    cmd(&mut other, "DQ.PURGE q DEAD"); // nothing dead: no write
    cmd(&mut c, "MULTI");
    cmd(&mut c, "PING");
    assert_ne!(cmd(&mut c, "EXEC"), Value::Nil, "EXEC aborted");
    // A real change does invalidate it.
    cmd(&mut c, &format!("WATCH {delayed}"));
    cmd(&mut other, "DQ.CANCEL q m");
    cmd(&mut c, "MULTI");
    cmd(&mut c, "PING");
    assert_eq!(cmd(&mut c, "EXEC"), Value::Nil);
}

#[test]
fn config_get_of_the_backoff_setting_does_not_leak() {
    let server = Server::start();
    let mut c = server.conn();
    cmd(&mut c, "CONFIG SET dq.backoff 15s,3m,10m,30m,1h,2h,6h,15h");
    for _ in 0..200 {
        cmd(&mut c, "CONFIG GET dq.backoff");
    }
    let before = used_memory(&mut c);
    let mut pipe = redis::pipe();
    for _ in 0..20_000 {
        pipe.cmd("CONFIG").arg("GET").arg("dq.backoff").ignore();
    }
    let () = pipe.query(&mut c).unwrap();
    let grown = used_memory(&mut c) - before;
    // A leaked string per GET would be well over 1 MB here.
    assert!(grown < 300_000, "used_memory grew by {grown} bytes");
    let Value::Array(got) = cmd(&mut c, "CONFIG GET dq.backoff") else {
        panic!()
    };
    assert_eq!(text(&got[1]), "15s,3m,10m,30m,1h,2h,6h,15h");
}

#[test]
fn names_holding_printf_directives_are_logged_as_text() {
    // The crate's logging passes the message as a printf format: an id
    // such as this one in a log line crashed the server.
    let server = Server::start();
    let mut c = server.conn();
    let id = "%s%s%s%s%s%s%s%s%s%s%s%s%s%s%n%n";
    run(&mut c, &[b"DQ.ADD", b"q", b"x", b"ID", id.as_bytes()]).unwrap();
    run(
        &mut c,
        &[b"HSET", b"dq:{q}:q:msgs", id.as_bytes(), b"garbage"],
    )
    .unwrap();
    assert_eq!(cmd(&mut c, "DQ.POP q"), Value::Nil);
    assert_eq!(text(&cmd(&mut c, "PING")), "PONG");
    assert!(server
        .log()
        .contains(&format!("set aside unreadable message '{id}'")));
}
