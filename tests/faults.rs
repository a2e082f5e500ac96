//! No panic crosses into Redis: each entry point catches it, logs it and
//! answers what it can. Faults are injected with the debug build's
//! `DQ_FAULT` switch (src/server/guard.rs), which names entry points that panic.

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
            log.contains("fault injected by DQ_FAULT (at src/server/guard.rs:"),
            "{backtrace}: the log does not say where:\n{log}"
        );
    }
}
