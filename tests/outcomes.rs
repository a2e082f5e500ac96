//! Job outcomes against a real server: DQ.DONE and ACK under RETAIN keep a
//! finished message in the state `done`; DQ.WAIT returns an outcome or
//! waits for it; TOUCH PROGRESS; retention runs out on the master's timer;
//! NX over a held id; replicas, persistence and promotion agree.

use std::thread;

use dq_testkit::*;

fn bulk(s: &str) -> Value {
    Value::BulkString(s.as_bytes().to_vec())
}

fn outcome(state: &str, value: Option<&str>) -> Value {
    Value::Array(vec![bulk(state), value.map_or(Value::Nil, bulk)])
}

fn state(c: &mut redis::Connection, q: &str, id: &str) -> String {
    text(&field(&cmd(c, &format!("DQ.GET {q} {id}")), "state"))
}

/// Starts a WAIT for `id` and returns once it blocks.
fn waiter(
    server: &Server,
    c: &mut redis::Connection,
    q: &str,
    id: &str,
) -> thread::JoinHandle<Value> {
    let w = server.in_background(&format!("DQ.WAIT {q} {id} BLOCK 0"));
    wait_blocked(c, 1);
    w
}

/// Adds `id` to `q` and takes it, so that it is in flight.
fn in_flight(c: &mut redis::Connection, q: &str, id: &str) {
    cmd(c, &format!("DQ.ADD {q} work-{id} ID {id}"));
    let popped = entries(&cmd(c, &format!("DQ.POP {q} LEASE 1h")));
    assert_eq!(popped[0].0, id);
}

#[test]
fn done_keeps_the_result_which_get_peek_scan_stats_and_wait_show() {
    let server = Server::start();
    let mut c = server.conn();
    cmd(&mut c, "DQ.CONFIG q SET RETAIN 1h");
    in_flight(&mut c, "q", "a");
    in_flight(&mut c, "q", "b");
    let before = now_ms();
    assert_eq!(
        int(&cmd(&mut c, "DQ.DONE q a result-a b result-b nope x")),
        2
    );
    let a = cmd(&mut c, "DQ.GET q a");
    assert_eq!(text(&field(&a, "state")), "done");
    assert_eq!(text(&field(&a, "result")), "result-a");
    assert_eq!(text(&field(&a, "payload")), "work-a");
    assert_eq!(int(&field(&a, "attempt")), 1);
    let finished = int(&field(&a, "finished-at")) as u64;
    assert!(finished >= before && finished <= now_ms());
    assert_eq!(
        int(&field(&a, "retained-until")) as u64,
        finished + 3_600_000
    );
    assert_eq!(field(&a, "due-at"), Value::Nil);
    assert_eq!(field(&a, "lease-deadline"), Value::Nil);
    assert_eq!(
        cmd(&mut c, "DQ.WAIT q a"),
        outcome("done", Some("result-a"))
    );
    assert_eq!(
        cmd(&mut c, "DQ.WAIT q b BLOCK 0"),
        outcome("done", Some("result-b"))
    );
    let stats = cmd(&mut c, "DQ.STATS q");
    assert_eq!(int(&field(&stats, "done")), 2);
    assert_eq!(int(&field(&stats, "acked")), 2);
    assert_eq!(int(&field(&stats, "inflight")), 0);
    // PEEK DONE lists them in the order they will leave.
    let peeked = list(&cmd(&mut c, "DQ.PEEK q DONE COUNT 10"));
    let ids: Vec<String> = peeked.iter().map(|e| text(&list(e)[0])).collect();
    assert_eq!(ids, ["a", "b"]);
    assert_eq!(
        list(&peeked[0])[3],
        Value::Int(finished as i64),
        "its time: finished-at"
    );
    let scanned = list(&cmd(&mut c, "DQ.SCAN q 0 STATE DONE COUNT 100"));
    assert_eq!(list(&scanned[1]).len(), 2);
    // A done message is neither delivered nor redriven.
    assert_eq!(cmd(&mut c, "DQ.POP q"), Value::Nil);
    assert_eq!(int(&cmd(&mut c, "DQ.REDRIVE q ID a")), 0);
    // DONE and ACK of a done message find nothing in flight.
    assert_eq!(int(&cmd(&mut c, "DQ.DONE q a other")), 0);
    assert_eq!(int(&cmd(&mut c, "DQ.ACK q a")), 0);
    assert_eq!(
        cmd(&mut c, "DQ.WAIT q a"),
        outcome("done", Some("result-a"))
    );
}

#[test]
fn without_retain_ack_and_done_forget_the_message_as_in_round_3() {
    let server = Server::start();
    let mut c = server.conn();
    in_flight(&mut c, "q", "a");
    in_flight(&mut c, "q", "b");
    assert_eq!(int(&cmd(&mut c, "DQ.ACK q a")), 1);
    assert_eq!(int(&cmd(&mut c, "DQ.DONE q b kept-nowhere")), 1);
    assert_eq!(cmd(&mut c, "DQ.GET q a"), Value::Nil);
    assert_eq!(cmd(&mut c, "DQ.GET q b"), Value::Nil);
    assert_eq!(cmd(&mut c, "DQ.WAIT q a"), outcome("gone", None));
    assert_eq!(int(&field(&cmd(&mut c, "DQ.STATS q"), "done")), 0);
    // The emptied queue stays, with its counters, as before.
    assert_eq!(int(&field(&cmd(&mut c, "DQ.STATS q"), "acked")), 2);
}

#[test]
fn ack_under_retain_keeps_the_message_done_without_a_result() {
    let server = Server::start();
    let mut c = server.conn();
    cmd(&mut c, "DQ.CONFIG q SET RETAIN 1m");
    in_flight(&mut c, "q", "a");
    assert_eq!(int(&cmd(&mut c, "DQ.ACK q a")), 1);
    assert_eq!(state(&mut c, "q", "a"), "done");
    assert_eq!(field(&cmd(&mut c, "DQ.GET q a"), "result"), Value::Nil);
    assert_eq!(cmd(&mut c, "DQ.WAIT q a"), outcome("done", None));
}

#[test]
fn a_message_retain_overrides_the_queue_and_the_module_setting() {
    let server = Server::try_start(&[], &["retain-ms", "60000"]).unwrap();
    let mut c = server.conn();
    assert_eq!(
        int(&field(&cmd(&mut c, "DQ.CONFIG q"), "retain-ms")),
        60_000,
        "the module's default"
    );
    assert_eq!(
        text(&field(&cmd(&mut c, "DQ.CONFIG q"), "retain-ms-from")),
        "module"
    );
    cmd(&mut c, "DQ.ADD q x ID own RETAIN 2h");
    cmd(&mut c, "DQ.ADD q x ID module");
    cmd(&mut c, "DQ.ADD q x ID none RETAIN 0");
    assert_eq!(entries(&cmd(&mut c, "DQ.POP q COUNT 3")).len(), 3);
    let finished = now_ms();
    assert_eq!(int(&cmd(&mut c, "DQ.ACK q own module none")), 3);
    let until = |c: &mut redis::Connection, id: &str| {
        let g = cmd(c, &format!("DQ.GET q {id}"));
        int(&field(&g, "retained-until")) as u64 - int(&field(&g, "finished-at")) as u64
    };
    assert_eq!(until(&mut c, "own"), 7_200_000);
    assert_eq!(until(&mut c, "module"), 60_000);
    assert_eq!(
        cmd(&mut c, "DQ.GET q none"),
        Value::Nil,
        "RETAIN 0 keeps nothing"
    );
    // The queue's own setting overrides the module's for the next ones.
    cmd(&mut c, "DQ.CONFIG q SET RETAIN 5m");
    assert_eq!(
        text(&field(&cmd(&mut c, "DQ.CONFIG q"), "retain-ms-from")),
        "queue"
    );
    in_flight(&mut c, "q", "queue");
    cmd(&mut c, "DQ.DONE q queue r");
    assert_eq!(until(&mut c, "queue"), 300_000);
    assert!(int(&field(&cmd(&mut c, "DQ.GET q queue"), "finished-at")) as u64 >= finished);
}

#[test]
fn retention_runs_out_on_the_timer_and_then_the_id_is_gone() {
    let server = Server::start();
    let mut c = server.conn();
    cmd(&mut c, "DQ.CONFIG q SET RETAIN 200ms");
    in_flight(&mut c, "q", "a");
    cmd(&mut c, "DQ.DONE q a r");
    let until = int(&field(&cmd(&mut c, "DQ.GET q a"), "retained-until")) as u64;
    assert!(
        wait_until(LONG, || cmd(&mut c, "DQ.GET q a") == Value::Nil),
        "retention never ran out"
    );
    assert!(now_ms() >= until, "dropped before its time");
    assert_eq!(cmd(&mut c, "DQ.WAIT q a"), outcome("gone", None));
    let stats = cmd(&mut c, "DQ.STATS q");
    assert_eq!(int(&field(&stats, "dropped")), 1);
    assert_eq!(int(&field(&stats, "done")), 0);
}

#[test]
fn retainmax_drops_the_earliest_finished_first() {
    let server = Server::start();
    let mut c = server.conn();
    cmd(&mut c, "DQ.CONFIG q SET RETAIN 1h RETAINMAX 2");
    for id in ["a", "b", "c"] {
        in_flight(&mut c, "q", id);
        cmd(&mut c, &format!("DQ.DONE q {id} r-{id}"));
    }
    assert_eq!(cmd(&mut c, "DQ.GET q a"), Value::Nil);
    assert_eq!(state(&mut c, "q", "b"), "done");
    assert_eq!(state(&mut c, "q", "c"), "done");
    let stats = cmd(&mut c, "DQ.STATS q");
    assert_eq!(int(&field(&stats, "done")), 2);
    assert_eq!(int(&field(&stats, "dropped")), 1);
    // Lowering the cap trims at once.
    cmd(&mut c, "DQ.CONFIG q SET RETAINMAX 1");
    assert_eq!(cmd(&mut c, "DQ.GET q b"), Value::Nil);
    assert_eq!(int(&field(&cmd(&mut c, "DQ.CONFIG q"), "retain-max")), 1);
}

#[test]
fn nx_refuses_a_done_id_while_it_is_retained_and_a_plain_add_starts_a_new_version() {
    let server = Server::start();
    let mut c = server.conn();
    cmd(&mut c, "DQ.CONFIG q SET RETAIN 1h");
    in_flight(&mut c, "q", "pay-42");
    cmd(&mut c, "DQ.DONE q pay-42 charged");
    // At most once per id within RETAIN.
    assert_eq!(cmd(&mut c, "DQ.ADD q again ID pay-42 NX"), Value::Nil);
    assert_eq!(
        text(&field(&cmd(&mut c, "DQ.GET q pay-42"), "payload")),
        "work-pay-42"
    );
    // Without NX: a new version, fresh budget, numbering goes on, the old
    // result dropped.
    assert_eq!(text(&cmd(&mut c, "DQ.ADD q v2 ID pay-42")), "pay-42");
    let g = cmd(&mut c, "DQ.GET q pay-42");
    assert_eq!(text(&field(&g, "state")), "ready");
    assert_eq!(field(&g, "result"), Value::Nil);
    assert_eq!(field(&g, "finished-at"), Value::Nil);
    let popped = entries(&cmd(&mut c, "DQ.POP q"));
    assert_eq!(popped, vec![("pay-42".into(), "v2".into(), 2)]);
    assert_eq!(
        int(&field(&cmd(&mut c, "DQ.GET q pay-42"), "attempts-left")),
        15,
        "a fresh budget of 16"
    );
    // XX finds the done id too.
    cmd(&mut c, "DQ.DONE q pay-42 twice");
    assert_eq!(text(&cmd(&mut c, "DQ.ADD q v3 ID pay-42 XX")), "pay-42");
    assert_eq!(state(&mut c, "q", "pay-42"), "ready");
}

#[test]
fn cancel_and_purge_delete_done_messages() {
    let server = Server::start();
    let mut c = server.conn();
    cmd(&mut c, "DQ.CONFIG q SET RETAIN 1h");
    for id in ["a", "b", "c"] {
        in_flight(&mut c, "q", id);
        cmd(&mut c, &format!("DQ.DONE q {id} r"));
    }
    cmd(&mut c, "DQ.ADD q x ID ready");
    assert_eq!(int(&cmd(&mut c, "DQ.CANCEL q a")), 1);
    assert_eq!(cmd(&mut c, "DQ.WAIT q a"), outcome("gone", None));
    assert_eq!(int(&cmd(&mut c, "DQ.PURGE q DONE")), 2);
    assert_eq!(int(&field(&cmd(&mut c, "DQ.STATS q"), "done")), 0);
    assert_eq!(state(&mut c, "q", "ready"), "ready");
}

#[test]
fn wait_without_block_is_nil_while_pending_and_with_block_times_out_with_nil() {
    let server = Server::start();
    let mut c = server.conn();
    cmd(&mut c, "DQ.ADD q x ID a");
    assert_eq!(cmd(&mut c, "DQ.WAIT q a"), Value::Nil);
    let started = now_ms();
    assert_eq!(cmd(&mut c, "DQ.WAIT q a BLOCK 150"), Value::Nil);
    assert!(now_ms() >= started + 150);
    // An absent queue, or an id it does not hold: gone at once, even with BLOCK.
    assert_eq!(
        cmd(&mut c, "DQ.WAIT nothing a BLOCK 0"),
        outcome("gone", None)
    );
    assert_eq!(
        cmd(&mut c, "DQ.WAIT q other BLOCK 0"),
        outcome("gone", None)
    );
    cmd(&mut c, "SET str x");
    assert!(cmd_err(&mut c, "DQ.WAIT str a").starts_with("WRONGTYPE"));
}

#[test]
fn wait_is_woken_by_done_and_by_ack() {
    let server = Server::start();
    let mut c = server.conn();
    cmd(&mut c, "DQ.CONFIG q SET RETAIN 1h");
    in_flight(&mut c, "q", "a");
    let w = waiter(&server, &mut c, "q", "a");
    cmd(&mut c, "DQ.DONE q a the-result");
    assert_eq!(w.join().unwrap(), outcome("done", Some("the-result")));
    in_flight(&mut c, "q", "b");
    let w = waiter(&server, &mut c, "q", "b");
    cmd(&mut c, "DQ.ACK q b");
    assert_eq!(w.join().unwrap(), outcome("done", None));
}

#[test]
fn wait_without_retain_still_gets_the_result_of_the_done_it_saw() {
    let server = Server::start();
    let mut c = server.conn();
    in_flight(&mut c, "q", "a");
    let w = waiter(&server, &mut c, "q", "a");
    cmd(&mut c, "DQ.DONE q a handed-over");
    assert_eq!(
        w.join().unwrap(),
        outcome("gone", None),
        "nothing is kept without RETAIN: the waiter is told the id is gone"
    );
}

#[test]
fn wait_is_woken_by_each_death() {
    let server = Server::start();
    let mut c = server.conn();
    // NACK DEAD with an error.
    in_flight(&mut c, "q", "nacked");
    let w = waiter(&server, &mut c, "q", "nacked");
    cmd(&mut c, "DQ.NACK q nacked DEAD ERROR 410-gone");
    assert_eq!(w.join().unwrap(), outcome("dead", Some("410-gone")));
    // The lease running out on the last attempt.
    cmd(&mut c, "DQ.ADD q x ID leased MAXATTEMPTS 1");
    cmd(&mut c, "DQ.POP q LEASE 300");
    let w = server.in_background("DQ.WAIT q leased BLOCK 0");
    let got = w.join().unwrap();
    assert_eq!(got, outcome("dead", None));
    assert_eq!(
        text(&field(&cmd(&mut c, "DQ.GET q leased"), "dead-reason")),
        "lease-expired"
    );
    // TTL.
    cmd(&mut c, "DQ.ADD q x ID ttl TTL 300 DELAY 1h");
    let w = server.in_background("DQ.WAIT q ttl BLOCK 0");
    assert_eq!(w.join().unwrap(), outcome("dead", None));
    assert_eq!(
        text(&field(&cmd(&mut c, "DQ.GET q ttl"), "dead-reason")),
        "expired"
    );
}

#[test]
fn wait_is_told_gone_when_the_message_or_its_queue_goes() {
    let server = Server::start();
    let mut c = server.conn();
    let mut gone_by = |setup: &[&str], act: &str| {
        cmd(&mut c, "FLUSHALL");
        for line in setup {
            cmd(&mut c, line);
        }
        let w = waiter(&server, &mut c, "q", "a");
        cmd(&mut c, act);
        assert_eq!(w.join().unwrap(), outcome("gone", None), "{act}");
    };
    let add = ["DQ.ADD q x ID a DELAY 1h", "DQ.ADD q y ID keep DELAY 1h"];
    gone_by(&add, "DQ.CANCEL q a");
    gone_by(&add, "DQ.PURGE q DELAYED");
    gone_by(&add, "DEL q");
    gone_by(&add, "UNLINK q");
    gone_by(&add, "RENAME q elsewhere");
    gone_by(&add, "MOVE q 3");
    gone_by(&add, "FLUSHDB");
    gone_by(&add, "FLUSHALL");
    gone_by(&add, "SET q replaced-by-a-string");
    gone_by(&add, "PEXPIRE q 1");
    gone_by(&add, "SWAPDB 0 1");
}

#[test]
fn a_replacement_keeps_the_waiter_waiting_for_the_new_version() {
    let server = Server::start();
    let mut c = server.conn();
    cmd(&mut c, "DQ.CONFIG q SET RETAIN 1h");
    in_flight(&mut c, "q", "a");
    let w = waiter(&server, &mut c, "q", "a");
    // A retry is no outcome.
    cmd(&mut c, "DQ.NACK q a DELAY 0");
    assert_eq!(entries(&cmd(&mut c, "DQ.POP q LEASE 1h"))[0].2, 2);
    wait_blocked(&mut c, 1);
    // Nor is a newer version while the delivery is in flight: the ACK
    // makes the replacement ready.
    cmd(&mut c, "DQ.ADD q v2 ID a");
    cmd(&mut c, "DQ.ACK q a");
    assert_eq!(state(&mut c, "q", "a"), "ready");
    wait_blocked(&mut c, 1);
    assert!(!w.is_finished());
    let popped = entries(&cmd(&mut c, "DQ.POP q"));
    assert_eq!(popped[0].1, "v2");
    cmd(&mut c, "DQ.DONE q a second");
    assert_eq!(w.join().unwrap(), outcome("done", Some("second")));
}

#[test]
fn a_waiter_is_woken_once_among_many_and_each_gets_its_own_answer() {
    let server = Server::start();
    let mut c = server.conn();
    cmd(&mut c, "DQ.CONFIG q SET RETAIN 1h");
    in_flight(&mut c, "q", "a");
    in_flight(&mut c, "q", "b");
    let wa1 = server.in_background("DQ.WAIT q a BLOCK 0");
    let wa2 = server.in_background("DQ.WAIT q a BLOCK 0");
    let wb = server.in_background("DQ.WAIT q b BLOCK 0");
    wait_blocked(&mut c, 3);
    cmd(&mut c, "DQ.DONE q a ra");
    assert_eq!(wa1.join().unwrap(), outcome("done", Some("ra")));
    assert_eq!(wa2.join().unwrap(), outcome("done", Some("ra")));
    wait_blocked(&mut c, 1);
    cmd(&mut c, "DQ.NACK q b DEAD");
    assert_eq!(wb.join().unwrap(), outcome("dead", None));
}

#[test]
fn wait_does_not_block_inside_multi_or_a_script_and_client_unblock_ends_it() {
    let server = Server::start();
    let mut c = server.conn();
    cmd(&mut c, "DQ.ADD q x ID a");
    let reply: Value = redis::pipe()
        .atomic()
        .cmd("DQ.WAIT")
        .arg("q")
        .arg("a")
        .arg("BLOCK")
        .arg("0")
        .query(&mut c)
        .unwrap();
    assert_eq!(reply, Value::Array(vec![Value::Nil]));
    assert_eq!(
        cmd(
            &mut c,
            "EVAL return(redis.call('DQ.WAIT',KEYS[1],'a','BLOCK','0')) 1 q"
        ),
        Value::Nil
    );
    let mut w = server.conn();
    let id = int(&cmd(&mut w, "CLIENT ID"));
    let waiting = thread::spawn(move || cmd(&mut w, "DQ.WAIT q a BLOCK 0"));
    wait_blocked(&mut c, 1);
    assert_eq!(int(&cmd(&mut c, &format!("CLIENT UNBLOCK {id}"))), 1);
    assert_eq!(waiting.join().unwrap(), Value::Nil);
    wait_blocked(&mut c, 0);
}

#[test]
fn progress_is_shown_until_the_next_delivery_and_kept_when_done() {
    let server = Server::start();
    let mut c = server.conn();
    cmd(&mut c, "DQ.CONFIG q SET RETAIN 1h");
    in_flight(&mut c, "q", "a");
    assert_eq!(field(&cmd(&mut c, "DQ.GET q a"), "progress"), Value::Nil);
    assert!(matches!(
        cmd(&mut c, "DQ.TOUCH q a PROGRESS 10%"),
        Value::Int(_)
    ));
    assert_eq!(text(&field(&cmd(&mut c, "DQ.GET q a"), "progress")), "10%");
    // Fenced by the attempt; a TOUCH still, it renews the lease.
    let deadline = int(&field(&cmd(&mut c, "DQ.GET q a"), "lease-deadline"));
    assert!(cmd_err(&mut c, "DQ.TOUCH q a PROGRESS 20% ATTEMPT 2").starts_with("STALE"));
    assert!(matches!(
        cmd(&mut c, "DQ.TOUCH q a ATTEMPT 1 PROGRESS 50%"),
        Value::Int(_)
    ));
    let g = cmd(&mut c, "DQ.GET q a");
    assert_eq!(text(&field(&g, "progress")), "50%");
    assert!(int(&field(&g, "lease-deadline")) >= deadline);
    // A retry clears it at the next delivery.
    cmd(&mut c, "DQ.NACK q a DELAY 0");
    assert_eq!(text(&field(&cmd(&mut c, "DQ.GET q a"), "progress")), "50%");
    cmd(&mut c, "DQ.POP q");
    assert_eq!(field(&cmd(&mut c, "DQ.GET q a"), "progress"), Value::Nil);
    cmd(&mut c, "DQ.TOUCH q a PROGRESS 99%");
    cmd(&mut c, "DQ.DONE q a ok");
    assert_eq!(text(&field(&cmd(&mut c, "DQ.GET q a"), "progress")), "99%");
    // Only a message in flight takes progress.
    cmd(&mut c, "DQ.ADD q x ID ready");
    assert_eq!(cmd(&mut c, "DQ.TOUCH q ready PROGRESS 1%"), Value::Nil);
    assert_eq!(
        field(&cmd(&mut c, "DQ.GET q ready"), "progress"),
        Value::Nil
    );
}

#[test]
fn a_result_and_progress_take_any_bytes_up_to_their_limits() {
    let server = Server::start();
    let mut c = server.conn();
    cmd(&mut c, "DQ.CONFIG q SET RETAIN 1h");
    in_flight(&mut c, "q", "a");
    let binary: Vec<u8> = (0..=255).collect();
    let at_limit = vec![b'p'; 65_536];
    let reply = run(&mut c, &[b"DQ.TOUCH", b"q", b"a", b"PROGRESS", &at_limit]);
    assert!(matches!(reply, Ok(Value::Int(_))), "{reply:?}");
    let over = vec![b'p'; 65_537];
    assert_eq!(
        run(&mut c, &[b"DQ.TOUCH", b"q", b"a", b"PROGRESS", &over]).unwrap_err(),
        "ERR PROGRESS is longer than 65536 bytes"
    );
    assert_eq!(
        run(&mut c, &[b"DQ.DONE", b"q", b"a", &binary]).unwrap(),
        Value::Int(1)
    );
    assert_eq!(
        run(&mut c, &[b"DQ.WAIT", b"q", b"a"]).unwrap(),
        Value::Array(vec![bulk("done"), Value::BulkString(binary)])
    );
    // An empty result is a result, not nil.
    in_flight(&mut c, "q", "e");
    assert_eq!(
        run(&mut c, &[b"DQ.DONE", b"q", b"e", b""]).unwrap(),
        Value::Int(1)
    );
    assert_eq!(cmd(&mut c, "DQ.WAIT q e"), outcome("done", Some("")));
}

#[test]
fn bad_input_to_the_outcome_commands_names_the_argument_and_changes_nothing() {
    let server = Server::start();
    let mut c = server.conn();
    cmd(&mut c, "DQ.CONFIG q SET RETAIN 1h");
    in_flight(&mut c, "q", "a");
    let before = digest(&mut c);
    for (line, error) in [
        (
            "DQ.DONE q",
            "ERR wrong number of arguments for 'dq.done' command",
        ),
        (
            "DQ.DONE q a",
            "ERR wrong number of arguments for 'dq.done' command",
        ),
        (
            "DQ.DONE q a r b",
            "ERR id needs a result (DQ.DONE takes id result pairs)",
        ),
        ("DQ.CONFIG q SET RETAIN -1", "ERR RETAIN must be a duration"),
        ("DQ.CONFIG q SET RETAIN 5q", "ERR RETAIN must be a duration"),
        (
            "DQ.CONFIG q SET RETAINMAX x",
            "ERR RETAINMAX must be an integer",
        ),
        (
            "DQ.CONFIG q SET RETAINMAX -1",
            "ERR RETAINMAX must be an integer",
        ),
        ("DQ.ADD q x RETAIN 1.5s", "ERR RETAIN must be a duration"),
        ("DQ.ADD q x RETAIN", "ERR RETAIN needs a value"),
        ("DQ.TOUCH q a PROGRESS", "ERR PROGRESS needs a value"),
        ("DQ.WAIT q a BLOCK -1", "ERR BLOCK must be a duration"),
        ("DQ.WAIT q a BLOCK", "ERR BLOCK needs a value"),
        ("DQ.WAIT q a SOON", "ERR unknown option 'SOON'"),
        (
            "DQ.WAIT q",
            "ERR wrong number of arguments for 'dq.wait' command",
        ),
    ] {
        let got = cmd_err(&mut c, line);
        assert!(got.starts_with(error), "{line}: {got}");
    }
    assert_eq!(digest(&mut c), before);
    assert_eq!(state(&mut c, "q", "a"), "inflight");
}

#[test]
fn done_messages_survive_reload_aof_rewrite_copy_and_restore() {
    let mut server = Server::start_with(&["--appendonly", "yes", "--aof-use-rdb-preamble", "no"]);
    let mut c = server.conn();
    cmd(&mut c, "DQ.CONFIG q SET RETAIN 1h RETAINMAX 10");
    in_flight(&mut c, "q", "a");
    cmd(&mut c, "DQ.TOUCH q a PROGRESS 3/4");
    cmd(&mut c, "DQ.DONE q a result");
    in_flight(&mut c, "q", "b");
    cmd(&mut c, "DQ.ACK q b");
    in_flight(&mut c, "q", "c");
    cmd(&mut c, "DQ.TOUCH q c PROGRESS 1/4");
    let before = digest(&mut c);
    let got = |c: &mut redis::Connection, q: &str| {
        ["a", "b", "c"].map(|id| cmd(c, &format!("DQ.GET {q} {id}")))
    };
    let records = got(&mut c, "q");
    cmd(&mut c, "DEBUG RELOAD");
    assert_eq!(digest(&mut c), before);
    assert_eq!(got(&mut c, "q"), records);
    cmd(&mut c, "BGREWRITEAOF");
    assert!(wait_until(LONG, || {
        let info = text(&cmd(&mut c, "INFO persistence"));
        info.contains("aof_rewrite_in_progress:0")
            && info.contains("aof_rewrite_scheduled:0")
            && info.contains("aof_last_bgrewrite_status:ok")
    }));
    server.restart();
    let mut c = server.conn();
    assert_eq!(
        digest(&mut c),
        before,
        "AOF rewrite without the RDB preamble"
    );
    assert_eq!(got(&mut c, "q"), records);
    cmd(&mut c, "COPY q copied");
    let dump: Vec<u8> = redis::cmd("DUMP").arg("q").query(&mut c).unwrap();
    let () = redis::cmd("RESTORE")
        .arg("restored")
        .arg(0)
        .arg(dump)
        .query(&mut c)
        .unwrap();
    for q in ["copied", "restored"] {
        let copy = got(&mut c, q);
        assert_eq!(copy, records, "{q}");
        assert_eq!(
            cmd(&mut c, &format!("DQ.WAIT {q} a")),
            outcome("done", Some("result"))
        );
    }
    // A kept result is counted by MEMORY USAGE.
    let small = int(&cmd(&mut c, "MEMORY USAGE q SAMPLES 0"));
    cmd(&mut c, "DQ.POP q");
    in_flight(&mut c, "q", "big");
    cmd(&mut c, &format!("DQ.DONE q big {}", "r".repeat(10_000)));
    assert!(int(&cmd(&mut c, "MEMORY USAGE q SAMPLES 0")) >= small + 10_000);
}

#[test]
fn a_replica_agrees_serves_wait_and_keeps_its_waiters_when_promoted() {
    let master = Server::start_with(&["--repl-diskless-sync-delay", "0"]);
    let replica = Server::start_replica_of(&master);
    let mut m = master.conn();
    let mut r = replica.conn();
    // The replica differs in its module default: what it applies is what
    // the master decided.
    cmd(&mut r, "CONFIG SET dq.retain-ms 999999");
    cmd(&mut m, "DQ.CONFIG q SET RETAINMAX 3");
    cmd(&mut m, "DQ.ADD q x ID retained RETAIN 1h");
    cmd(&mut m, "DQ.ADD q x ID short RETAIN 300");
    cmd(&mut m, "DQ.ADD q x ID forgotten");
    cmd(&mut m, "DQ.ADD q x ID pending");
    cmd(&mut m, "DQ.ADD q x ID promoted RETAIN 1h");
    assert_eq!(entries(&cmd(&mut m, "DQ.POP q COUNT 5 LEASE 1h")).len(), 5);
    cmd(&mut m, "DQ.TOUCH q pending PROGRESS half");
    let replicated = |m: &mut redis::Connection| {
        assert!(wait_until(LONG, || int(&cmd(m, "WAIT 1 1000")) == 1));
    };
    replicated(&mut m);
    // A waiter on the replica is woken by what the master replicates.
    let on_replica = replica.in_background("DQ.WAIT q retained BLOCK 0");
    wait_blocked(&mut r, 1);
    cmd(
        &mut m,
        "DQ.DONE q retained from-master short soon forgotten never",
    );
    assert_eq!(
        on_replica.join().unwrap(),
        outcome("done", Some("from-master"))
    );
    assert_eq!(cmd(&mut r, "DQ.GET q forgotten"), Value::Nil);
    assert_eq!(
        text(&field(&cmd(&mut r, "DQ.GET q pending"), "progress")),
        "half"
    );
    // Retention runs out on the master's timer and reaches the replica.
    assert!(wait_until(LONG, || cmd(&mut r, "DQ.GET q short") == Value::Nil));
    replicated(&mut m);
    assert!(
        wait_until(LONG, || digest(&mut m) == digest(&mut r)),
        "replica digest differs from the master's"
    );
    // A waiter on the replica survives its promotion.
    let on_replica = replica.in_background("DQ.WAIT q promoted BLOCK 0");
    wait_blocked(&mut r, 1);
    cmd(&mut r, "REPLICAOF NO ONE");
    assert_eq!(int(&cmd(&mut r, "DQ.DONE q promoted after-failover")), 1);
    assert_eq!(
        on_replica.join().unwrap(),
        outcome("done", Some("after-failover"))
    );
    drop(master);
}

#[test]
fn a_done_message_passes_its_group_on() {
    let server = Server::start();
    let mut c = server.conn();
    cmd(&mut c, "DQ.CONFIG q SET RETAIN 1h");
    cmd(&mut c, "DQ.ADD q x ID g1 GROUP g");
    cmd(&mut c, "DQ.ADD q x ID g2 GROUP g");
    assert_eq!(entries(&cmd(&mut c, "DQ.POP q COUNT 2")).len(), 1);
    cmd(&mut c, "DQ.DONE q g1 ok");
    assert_eq!(state(&mut c, "q", "g2"), "ready");
    assert_eq!(entries(&cmd(&mut c, "DQ.POP q"))[0].0, "g2");
}
