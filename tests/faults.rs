//! No panic crosses into Redis: each entry point catches it, logs it and
//! answers what it can; a queue a panic left half-changed is refused, not
//! served. Faults are injected with the debug build's `DQ_FAULT` switch
//! (src/server/guard.rs), which names entry points that panic on entry and
//! points in the middle of a change (src/core/fault.rs).

use dq_testkit::*;

fn logged(server: &Server, point: &str) -> bool {
    wait_until(LONG, || {
        server
            .log()
            .contains(&format!("dq: internal error in {point}"))
    })
}

#[test]
fn a_panicking_command_answers_an_error_and_changes_nothing() {
    let server = Server::start_with_faults("dq.add");
    let mut c = server.conn();
    let err = cmd_err(&mut c, "DQ.ADD q x");
    assert!(err.starts_with("ERR dq internal error"), "{err}");
    assert!(logged(&server, "dq.add"));
    assert_eq!(text(&cmd(&mut c, "PING")), "PONG");
    assert_eq!(int(&field(&cmd(&mut c, "DQ.STATS q"), "added")), 0);
}

#[test]
fn a_panicking_tick_or_queue_leaves_the_server_and_other_work_running() {
    for point in ["timer", "serve"] {
        let server = Server::start_with_faults(point);
        let mut c = server.conn();
        cmd(&mut c, "DQ.ADD q x DELAY 10");
        assert!(logged(&server, point), "{point}");
        assert_eq!(text(&cmd(&mut c, "PING")), "PONG");
        // Commands still work; the message waits, unharmed.
        cmd(&mut c, "DQ.ADD q y");
        assert_eq!(entries(&cmd(&mut c, "DQ.POP q"))[0].1, "y");
        assert_eq!(int(&field(&cmd(&mut c, "DQ.STATS q"), "delayed")), 1);
    }
}

#[test]
fn a_panic_while_waking_or_timing_out_a_blocked_pop_answers_the_client() {
    let server = Server::start_with_faults("pop wake,pop timeout");
    let mut waiter = server.conn();
    let err = run(&mut waiter, &[b"DQ.POP", b"q", b"BLOCK", b"50"]).unwrap_err();
    assert!(err.contains("dq internal error"), "{err}");
    assert!(logged(&server, "pop timeout"));

    let url = server.url();
    let blocked = std::thread::spawn(move || {
        let mut c = redis::Client::open(url).unwrap().get_connection().unwrap();
        run(&mut c, &[b"DQ.POP", b"q", b"BLOCK", b"60000"])
    });
    let mut c = server.conn();
    assert!(wait_until(LONG, || {
        let clients = text(&cmd(&mut c, "INFO clients"));
        clients.contains("blocked_clients:1")
    }));
    cmd(&mut c, "DQ.ADD q x ID m");
    let err = blocked.join().unwrap().unwrap_err();
    assert!(err.contains("dq internal error"), "{err}");
    assert!(logged(&server, "pop wake"));
    // The message was not taken.
    assert_eq!(entries(&cmd(&mut c, "DQ.POP q"))[0].0, "m");
}

#[test]
fn panics_in_event_and_info_callbacks_are_logged_not_fatal() {
    let server = Server::start_with_faults("key event,info");
    let mut c = server.conn();
    cmd(&mut c, "SET k v");
    cmd(&mut c, "EXPIRE k 100"); // a keyspace event the module listens to
    assert!(logged(&server, "key event"));
    let info = text(&cmd(&mut c, "INFO dq"));
    assert!(!info.contains("dq_queues"), "{info}");
    assert!(logged(&server, "info"));
    cmd(&mut c, "DQ.ADD q x");
    assert_eq!(entries(&cmd(&mut c, "DQ.POP q"))[0].1, "x");
}

/// std's default panic hook captures a backtrace when the server's
/// environment has `RUST_BACKTRACE`, and on Valkey 8.1 that capture
/// crashed the server in the middle of a panic dq would have caught. dq's
/// own hook makes the environment irrelevant; it also tells where the
/// panic was.
#[test]
fn a_panic_is_caught_whatever_rust_backtrace_says() {
    for backtrace in ["1", "full"] {
        let server = Server::start_with_faults_env("dq.add,info", &[("RUST_BACKTRACE", backtrace)]);
        let mut c = server.conn();
        for _ in 0..2 {
            let err = cmd_err(&mut c, "DQ.ADD q x");
            assert!(
                err.starts_with("ERR dq internal error"),
                "{backtrace}: {err}"
            );
        }
        let info = text(&cmd(&mut c, "INFO dq"));
        assert!(!info.contains("dq_queues"), "{info}");
        assert_eq!(text(&cmd(&mut c, "PING")), "PONG", "{backtrace}");
        assert!(logged(&server, "dq.add"), "{backtrace}");
        assert!(logged(&server, "info"), "{backtrace}");
        let log = server.log();
        assert!(
            log.contains("fault injected by DQ_FAULT (at src/core/fault.rs:"),
            "{backtrace}: the log does not say where:\n{log}"
        );
    }
}

fn damaged(c: &mut redis::Connection, line: &str) -> bool {
    cmd_err(c, line).starts_with("DAMAGED queue 'q' was left inconsistent by an internal error")
}

/// A panic between storing a message and indexing it (`add:record`) or
/// between unindexing one and removing it (`ack:batch`) leaves the queue
/// failing its own check: every command on it answers DAMAGED, naming it,
/// and changes nothing; the timer leaves it; other queues and the server
/// go on. DUMP and RESTORE rebuild it from its records.
#[test]
fn a_queue_left_half_changed_by_a_panic_is_refused_until_rebuilt() {
    // With add:record armed no ADD can succeed: the other queue gets its
    // message from a RESTORE.
    let source = Server::start();
    let mut s = source.conn();
    cmd(&mut s, "DQ.ADD other y DELAY 20");
    let Value::BulkString(other) = cmd(&mut s, "DUMP other") else {
        panic!("DUMP other");
    };
    for (point, entry, setup, write, whole) in [
        ("add:record", "dq.add", "", "DQ.ADD q x ID m", 1),
        ("ack:batch", "dq.ack", "DQ.ADD q x ID m", "DQ.ACK q m", 1),
    ] {
        let server = Server::start_with_faults(point);
        let mut c = server.conn();
        if !setup.is_empty() {
            cmd(&mut c, setup);
            assert_eq!(entries(&cmd(&mut c, "DQ.POP q"))[0].0, "m", "{point}");
        }
        run(&mut c, &[b"RESTORE", b"other", b"0", &other]).unwrap();
        let err = cmd_err(&mut c, write);
        assert!(err.starts_with("ERR dq internal error"), "{point}: {err}");
        assert!(logged(&server, entry), "{point}");
        assert!(
            wait_until(LONG, || server
                .log()
                .contains("queue 'q' failed its check after that internal error")),
            "{point}"
        );
        for line in [
            "DQ.STATS q",
            "DQ.GET q m",
            "DQ.POP q",
            "DQ.ADD q z",
            "DQ.PEEK q READY",
        ] {
            assert!(damaged(&mut c, line), "{point}: {line}");
        }
        assert_eq!(text(&cmd(&mut c, "PING")), "PONG");
        // Other queues are served, the timer included.
        assert!(wait_until(LONG, || int(&field(
            &cmd(&mut c, "DQ.STATS other"),
            "ready"
        )) == 1));
        // The records are whole: a DUMP and RESTORE rebuilds the indexes.
        let Value::BulkString(dump) = cmd(&mut c, "DUMP q") else {
            panic!("{point}: DUMP");
        };
        run(&mut c, &[b"RESTORE", b"q", b"0", &dump, b"REPLACE"]).unwrap();
        let stats = cmd(&mut c, "DQ.STATS q");
        let count: i64 = ["delayed", "ready", "inflight", "dead"]
            .iter()
            .map(|f| int(&field(&stats, f)))
            .sum();
        assert_eq!(count, whole, "{point}");
        // DEL is the other way out.
        cmd(&mut c, "DEL q");
        assert_eq!(
            int(&field(&cmd(&mut c, "DQ.STATS q"), "ready")),
            0,
            "{point}"
        );
    }
}

/// A panic between two whole steps (`pop:batch`: after the first of three
/// leases; `tick:promote`: after the first promotion) leaves a queue that
/// passes its check: it is served on, and nothing is lost. Replicas got
/// none of the interrupted change, so the queue's whole value is
/// propagated: a replica agrees.
#[test]
fn a_queue_a_panic_left_consistent_is_served_on() {
    let server = Server::start_with_faults("pop:batch");
    let replica = Server::start_replica_of(&server);
    let mut c = server.conn();
    let mut r = replica.conn();
    for id in ["a", "b", "c"] {
        cmd(&mut c, &format!("DQ.ADD q x ID {id}"));
    }
    let err = cmd_err(&mut c, "DQ.POP q COUNT 3 LEASE 100");
    assert!(err.starts_with("ERR dq internal error"), "{err}");
    let stats = cmd(&mut c, "DQ.STATS q");
    assert_eq!(int(&field(&stats, "inflight")), 1);
    assert_eq!(int(&field(&stats, "ready")), 2);
    // Replicas got none of the interrupted POP: the whole queue follows.
    assert!(wait_until(LONG, || digest(&mut c) == digest(&mut r)));
    assert_eq!(int(&field(&cmd(&mut r, "DQ.STATS q"), "inflight")), 1);
    // The lease nobody heard of runs out, and its message is ready again.
    assert!(wait_until(LONG, || {
        int(&field(&cmd(&mut c, "DQ.STATS q"), "ready")) == 3
    }));

    let server = Server::start_with_faults("tick:promote");
    let mut c = server.conn();
    for id in ["a", "b", "c"] {
        cmd(&mut c, &format!("DQ.ADD q x ID {id} DELAY 10"));
    }
    assert!(logged(&server, "serve"));
    assert!(wait_until(LONG, || {
        int(&field(&cmd(&mut c, "DQ.STATS q"), "ready")) >= 1
    }));
    let stats = cmd(&mut c, "DQ.STATS q");
    assert_eq!(
        int(&field(&stats, "ready")) + int(&field(&stats, "delayed")),
        3
    );
    let taken = entries(&cmd(&mut c, "DQ.POP q"));
    assert_eq!(taken.len(), 1);
    assert_eq!(int(&cmd(&mut c, &format!("DQ.ACK q {}", taken[0].0))), 1);
}
