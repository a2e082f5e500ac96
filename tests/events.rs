//! The event log against a real server: DQ.CONFIG SET EVENTS keeps a
//! queue's last events, DQ.EVENTS reads them after a seq, reports a gap,
//! and waits for the next one; the events and their seq live in the key,
//! so persistence, RENAME, COPY, DUMP/RESTORE and replicas keep them.

use dq_testkit::*;

/// The fields of an event a test sets up: `(type, id, attempt, detail)`.
type Kind = (String, Option<String>, Option<i64>, Option<String>);

/// One event as `(seq, at, type, id, attempt, detail)`.
type Ev = (
    i64,
    i64,
    String,
    Option<String>,
    Option<i64>,
    Option<String>,
);

fn opt_text(v: &Value) -> Option<String> {
    (*v != Value::Nil).then(|| text(v))
}

/// A DQ.EVENTS reply as `(last-seq, events)`.
fn parse(reply: &Value) -> (i64, Vec<Ev>) {
    let parts = list(reply);
    assert_eq!(parts.len(), 2, "{reply:?}");
    let events = list(&parts[1])
        .iter()
        .map(|e| {
            let f = list(e);
            assert_eq!(f.len(), 6, "{e:?}");
            (
                int(&f[0]),
                int(&f[1]),
                text(&f[2]),
                opt_text(&f[3]),
                (f[4] != Value::Nil).then(|| int(&f[4])),
                opt_text(&f[5]),
            )
        })
        .collect();
    (int(&parts[0]), events)
}

fn read(c: &mut redis::Connection, line: &str) -> (i64, Vec<Ev>) {
    parse(&cmd(c, line))
}

fn kinds(events: &[Ev]) -> Vec<Kind> {
    events
        .iter()
        .map(|(_, _, t, id, attempt, detail)| (t.clone(), id.clone(), *attempt, detail.clone()))
        .collect()
}

fn ev(t: &str, id: &str, attempt: Option<i64>, detail: Option<&str>) -> Kind {
    (
        t.to_string(),
        (!id.is_empty()).then(|| id.to_string()),
        attempt,
        detail.map(str::to_string),
    )
}

#[test]
fn each_change_writes_one_event_with_its_attempt_in_order() {
    let server = Server::start();
    let mut c = server.conn();
    cmd(&mut c, "DQ.CONFIG q SET EVENTS 100 RETAIN 1h");
    let before = now_ms() as i64;
    cmd(&mut c, "DQ.ADD q x ID a");
    cmd(&mut c, "DQ.ADD q x ID b DELAY 100");
    // b falls due on the timer: `ready`, which a message added ready at
    // once (a) does not get.
    assert!(wait_until(LONG, || text(&field(
        &cmd(&mut c, "DQ.GET q b"),
        "state"
    )) == "ready"));
    assert_eq!(entries(&cmd(&mut c, "DQ.POP q COUNT 2 LEASE 1h")).len(), 2);
    cmd(&mut c, "DQ.NACK q a DELAY 0 ERROR boom");
    cmd(&mut c, "DQ.TOUCH q b PROGRESS half");
    cmd(&mut c, "DQ.DONE q b result");
    cmd(&mut c, "DQ.POP q LEASE 1h");
    cmd(&mut c, "DQ.NACK q a DEAD ERROR fatal");
    cmd(&mut c, "DQ.REDRIVE q ID a");
    cmd(&mut c, "DQ.ADD q y ID a");
    cmd(&mut c, "DQ.CANCEL q a");
    cmd(&mut c, "DQ.PAUSE q");
    cmd(&mut c, "DQ.RESUME q");
    cmd(&mut c, "DQ.ADD q x ID c");
    cmd(&mut c, "DQ.PURGE q READY");
    let after = now_ms() as i64;
    let (last, events) = read(&mut c, "DQ.EVENTS q");
    assert_eq!(
        kinds(&events),
        vec![
            ev("added", "a", None, None),
            ev("added", "b", None, None),
            ev("ready", "b", None, None),
            ev("delivered", "a", Some(1), None),
            ev("delivered", "b", Some(1), None),
            ev("retry", "a", Some(1), Some("nack")),
            ev("progress", "b", Some(1), Some("half")),
            ev("done", "b", Some(1), None),
            ev("delivered", "a", Some(2), None),
            ev("dead", "a", Some(2), Some("permanent")),
            ev("redriven", "a", Some(2), None),
            ev("replaced", "a", Some(2), None),
            ev("cancelled", "a", Some(2), None),
            ev("paused", "", None, None),
            ev("resumed", "", None, None),
            ev("added", "c", None, None),
            ev("purged", "", None, Some("1")),
        ]
    );
    assert_eq!(last, events.len() as i64);
    for (i, (seq, at, ..)) in events.iter().enumerate() {
        assert_eq!(*seq, i as i64 + 1);
        assert!(
            *at >= before && *at <= after,
            "{at} not in {before}..{after}"
        );
    }
    // The timer's own changes: a lease running out is a retry.
    cmd(&mut c, "DQ.ADD q x ID l");
    cmd(&mut c, "DQ.POP q LEASE 50");
    assert!(wait_until(LONG, || {
        let (_, new) = read(&mut c, &format!("DQ.EVENTS q AFTER {last}"));
        kinds(&new).contains(&ev("retry", "l", Some(1), Some("lease-expired")))
    }));
}

#[test]
fn pop_count_100_is_100_delivered_events_in_pop_order() {
    let server = Server::start();
    let mut c = server.conn();
    cmd(&mut c, "DQ.CONFIG q SET EVENTS 1000");
    let mut pipe = redis::pipe();
    for i in 0..150 {
        pipe.cmd("DQ.ADD")
            .arg("q")
            .arg("x")
            .arg("ID")
            .arg(format!("m{i:03}"));
    }
    pipe.query::<()>(&mut c).unwrap();
    let (last, _) = read(&mut c, "DQ.EVENTS q COUNT 1");
    assert_eq!(last, 150);
    let popped = entries(&cmd(&mut c, "DQ.POP q COUNT 100"));
    assert_eq!(popped.len(), 100);
    let (last, events) = read(&mut c, "DQ.EVENTS q AFTER 150 COUNT 10000");
    assert_eq!(last, 250);
    let delivered: Vec<_> = popped
        .iter()
        .map(|(id, _, attempt)| ev("delivered", id, Some(*attempt), None))
        .collect();
    assert_eq!(kinds(&events), delivered);
    // COUNT bounds a read; the next one goes on from its last seq.
    let (_, first) = read(&mut c, "DQ.EVENTS q AFTER 150 COUNT 30");
    assert_eq!(first.len(), 30);
    let (_, next) = read(
        &mut c,
        &format!("DQ.EVENTS q AFTER {} COUNT 30", first[29].0),
    );
    assert_eq!(next[0].0, first[29].0 + 1);
}

#[test]
fn a_reader_after_a_trimmed_event_gets_gap_and_events_n_keeps_the_last_n() {
    let server = Server::start();
    let mut c = server.conn();
    cmd(&mut c, "DQ.CONFIG q SET EVENTS 5");
    for i in 0..10 {
        cmd(&mut c, &format!("DQ.ADD q x ID m{i}"));
    }
    let (last, events) = read(&mut c, "DQ.EVENTS q");
    assert_eq!(last, 10);
    assert_eq!(
        events.iter().map(|e| e.0).collect::<Vec<_>>(),
        vec![6, 7, 8, 9, 10]
    );
    assert_eq!(
        cmd_err(&mut c, "DQ.EVENTS q AFTER 4"),
        "GAP the oldest event kept is 6"
    );
    assert_eq!(
        cmd_err(&mut c, "DQ.EVENTS q AFTER 0"),
        "GAP the oldest event kept is 6"
    );
    assert_eq!(read(&mut c, "DQ.EVENTS q AFTER 5").1.len(), 5);
    assert_eq!(read(&mut c, "DQ.EVENTS q AFTER 10"), (10, vec![]));
    assert_eq!(read(&mut c, "DQ.EVENTS q AFTER 99"), (10, vec![]));
    // Lowering n trims at once; the numbering goes on.
    cmd(&mut c, "DQ.CONFIG q SET EVENTS 2");
    assert_eq!(
        cmd_err(&mut c, "DQ.EVENTS q AFTER 7"),
        "GAP the oldest event kept is 9"
    );
    assert_eq!(int(&field(&cmd(&mut c, "DQ.CONFIG q"), "events")), 2);
    // EVENTS 0 keeps none, but remembers the seq for a later EVENTS n.
    cmd(&mut c, "DQ.CONFIG q SET EVENTS 0");
    cmd(&mut c, "DQ.ADD q x ID unlogged");
    assert_eq!(read(&mut c, "DQ.EVENTS q"), (10, vec![]));
    cmd(&mut c, "DQ.CONFIG q SET EVENTS DEFAULT");
    cmd(&mut c, "DQ.CONFIG q SET EVENTS 3");
    cmd(&mut c, "DQ.ADD q x ID n");
    let (last, events) = read(&mut c, "DQ.EVENTS q");
    assert_eq!(last, 11);
    assert_eq!(kinds(&events), vec![ev("added", "n", None, None)]);
    // A queue that never kept events, or none at all: last-seq 0.
    cmd(&mut c, "DQ.ADD plain x");
    assert_eq!(read(&mut c, "DQ.EVENTS plain"), (0, vec![]));
    assert_eq!(read(&mut c, "DQ.EVENTS nothing AFTER 3"), (0, vec![]));
    assert_eq!(int(&field(&cmd(&mut c, "DQ.CONFIG plain"), "events")), 0);
}

#[test]
fn block_is_answered_the_moment_an_event_is_written_and_every_reader_gets_it() {
    let server = Server::start();
    let mut c = server.conn();
    cmd(&mut c, "DQ.CONFIG q SET EVENTS 100");
    cmd(&mut c, "DQ.ADD q x ID first");
    let r1 = server.in_background("DQ.EVENTS q AFTER 1 BLOCK 0");
    let r2 = server.in_background("DQ.EVENTS q AFTER 1 BLOCK 0");
    wait_blocked(&mut c, 2);
    cmd(&mut c, "DQ.ADD q x ID second");
    for r in [r1, r2] {
        let (last, events) = parse(&r.join().unwrap());
        assert_eq!(last, 2);
        assert_eq!(kinds(&events), vec![ev("added", "second", None, None)]);
    }
    // The timer's change wakes a reader too.
    cmd(&mut c, "DQ.ADD q x ID later DELAY 100");
    let r = server.in_background("DQ.EVENTS q AFTER 3 BLOCK 0");
    wait_blocked(&mut c, 1);
    let (_, events) = parse(&r.join().unwrap());
    assert_eq!(kinds(&events), vec![ev("ready", "later", None, None)]);
    // Without AFTER and with nothing kept, BLOCK waits for the next event.
    cmd(&mut c, "DQ.CONFIG fresh SET EVENTS 10");
    let r = server.in_background("DQ.EVENTS fresh BLOCK 0");
    wait_blocked(&mut c, 1);
    cmd(&mut c, "DQ.ADD fresh x ID new");
    assert_eq!(parse(&r.join().unwrap()).1[0].0, 1);
    // With events after AFTER already there, BLOCK does not wait.
    assert_eq!(read(&mut c, "DQ.EVENTS q AFTER 0 BLOCK 0").1.len(), 4);
    // A timeout is nil.
    let started = now_ms();
    assert_eq!(cmd(&mut c, "DQ.EVENTS q AFTER 4 BLOCK 100"), Value::Nil);
    assert!(now_ms() >= started + 100);
}

#[test]
fn a_blocked_reader_is_told_when_its_queue_goes_and_does_not_block_inside_multi() {
    let server = Server::start();
    let mut c = server.conn();
    cmd(&mut c, "DQ.CONFIG q SET EVENTS 100");
    cmd(&mut c, "DQ.ADD q x ID a");
    let r = server.in_background("DQ.EVENTS q AFTER 1 BLOCK 0");
    wait_blocked(&mut c, 1);
    cmd(&mut c, "DEL q");
    assert_eq!(parse(&r.join().unwrap()), (0, vec![]));
    // A reader at 0 of an absent queue waits for its first event.
    let r = server.in_background("DQ.EVENTS q AFTER 0 BLOCK 0");
    wait_blocked(&mut c, 1);
    cmd(&mut c, "DQ.CONFIG q SET EVENTS 10");
    cmd(&mut c, "DQ.ADD q x ID again");
    assert_eq!(
        kinds(&parse(&r.join().unwrap()).1),
        vec![ev("added", "again", None, None)]
    );
    let reply: Value = redis::pipe()
        .atomic()
        .cmd("DQ.EVENTS")
        .arg("q")
        .arg("AFTER")
        .arg("1")
        .arg("BLOCK")
        .arg("0")
        .query(&mut c)
        .unwrap();
    assert_eq!(
        reply,
        Value::Array(vec![Value::Array(vec![
            Value::Int(1),
            Value::Array(vec![])
        ])])
    );
    let mut w = server.conn();
    let id = int(&cmd(&mut w, "CLIENT ID"));
    let waiting = std::thread::spawn(move || cmd(&mut w, "DQ.EVENTS q AFTER 1 BLOCK 0"));
    wait_blocked(&mut c, 1);
    assert_eq!(int(&cmd(&mut c, &format!("CLIENT UNBLOCK {id}"))), 1);
    assert_eq!(waiting.join().unwrap(), Value::Nil);
}

/// Some activity of every kind the log records, with events on.
fn activity(c: &mut redis::Connection, q: &str) {
    cmd(c, &format!("DQ.CONFIG {q} SET EVENTS 1000 RETAIN 1h"));
    for i in 0..5 {
        cmd(c, &format!("DQ.ADD {q} x ID m{i}"));
    }
    cmd(c, &format!("DQ.POP {q} COUNT 3 LEASE 1h"));
    cmd(c, &format!("DQ.DONE {q} m0 r0"));
    cmd(c, &format!("DQ.NACK {q} m1 DEAD"));
    cmd(c, &format!("DQ.TOUCH {q} m2 PROGRESS p"));
}

#[test]
fn events_and_their_seq_survive_reload_aof_rename_copy_and_restore() {
    let mut server = Server::start_with(&["--appendonly", "yes", "--aof-use-rdb-preamble", "no"]);
    let mut c = server.conn();
    activity(&mut c, "q");
    let log = read(&mut c, "DQ.EVENTS q");
    assert_eq!(log.0, 11);
    let before = digest(&mut c);
    cmd(&mut c, "DEBUG RELOAD");
    assert_eq!(digest(&mut c), before);
    assert_eq!(read(&mut c, "DQ.EVENTS q"), log);
    cmd(&mut c, "BGREWRITEAOF");
    assert!(wait_until(LONG, || {
        let info = text(&cmd(&mut c, "INFO persistence"));
        info.contains("aof_rewrite_in_progress:0")
            && info.contains("aof_rewrite_scheduled:0")
            && info.contains("aof_last_bgrewrite_status:ok")
    }));
    // Events after the rewrite are replayed from the AOF's tail.
    cmd(&mut c, "DQ.ADD q x ID tail");
    let log = read(&mut c, "DQ.EVENTS q");
    let before = digest(&mut c);
    server.restart();
    let mut c = server.conn();
    assert_eq!(digest(&mut c), before, "AOF replay");
    assert_eq!(read(&mut c, "DQ.EVENTS q"), log);
    cmd(&mut c, "COPY q copied");
    let dump: Vec<u8> = redis::cmd("DUMP").arg("q").query(&mut c).unwrap();
    let () = redis::cmd("RESTORE")
        .arg("restored")
        .arg(0)
        .arg(dump)
        .query(&mut c)
        .unwrap();
    cmd(&mut c, "RENAME q renamed");
    for q in ["copied", "restored", "renamed"] {
        assert_eq!(read(&mut c, &format!("DQ.EVENTS {q}")), log, "{q}");
        // The seq goes on from where it was.
        cmd(&mut c, &format!("DQ.ADD {q} x ID next"));
        let (last, new) = read(&mut c, &format!("DQ.EVENTS {q} AFTER {}", log.0));
        assert_eq!(last, log.0 + 1, "{q}");
        assert_eq!(kinds(&new), vec![ev("added", "next", None, None)], "{q}");
    }
    // The log is counted by MEMORY USAGE: the same messages cost more
    // with their events kept.
    cmd(&mut c, "DQ.CONFIG logged SET EVENTS 1000");
    for q in ["logged", "plain"] {
        let mut pipe = redis::pipe();
        for i in 0..500 {
            pipe.cmd("DQ.ADD")
                .arg(q)
                .arg("x")
                .arg("ID")
                .arg(format!("m{i:03}"));
        }
        pipe.query::<()>(&mut c).unwrap();
    }
    let usage =
        |c: &mut redis::Connection, q: &str| int(&cmd(c, &format!("MEMORY USAGE {q} SAMPLES 0")));
    assert!(usage(&mut c, "logged") >= usage(&mut c, "plain") + 500 * 32);
}

#[test]
fn a_replica_holds_the_same_events_serves_readers_and_goes_on_when_promoted() {
    let master = Server::start_with(&["--repl-diskless-sync-delay", "0"]);
    let replica = Server::start_replica_of(&master);
    let mut m = master.conn();
    let mut r = replica.conn();
    activity(&mut m, "q");
    // m3's lease runs out on its only attempt: nothing comes of it later.
    cmd(&mut m, "DQ.CONFIG q SET MAXATTEMPTS 1");
    cmd(&mut m, "DQ.ADD q x ID soon DELAY 50");
    cmd(&mut m, "DQ.ADD q x ID short");
    cmd(&mut m, "DQ.POP q LEASE 50");
    // The timer's work (a promotion, a lease running out) reaches the
    // replica as the master's own events.
    assert!(wait_until(LONG, || {
        let (_, events) = read(&mut m, "DQ.EVENTS q");
        kinds(&events).contains(&ev("dead", "m3", Some(1), Some("lease-expired")))
            && kinds(&events).contains(&ev("ready", "soon", None, None))
    }));
    assert!(wait_until(LONG, || int(&cmd(&mut m, "WAIT 1 1000")) == 1));
    assert!(wait_until(LONG, || read(&mut r, "DQ.EVENTS q")
        == read(&mut m, "DQ.EVENTS q")));
    assert!(wait_until(LONG, || digest(&mut m) == digest(&mut r)));
    // A reader on the replica is woken by what the master replicates.
    let (last, _) = read(&mut r, "DQ.EVENTS q");
    let on_replica = replica.in_background(&format!("DQ.EVENTS q AFTER {last} BLOCK 0"));
    wait_blocked(&mut r, 1);
    cmd(&mut m, "DQ.CANCEL q m4");
    let (_, events) = parse(&on_replica.join().unwrap());
    assert_eq!(kinds(&events), vec![ev("cancelled", "m4", None, None)]);
    // Promoted, it goes on numbering, and its blocked reader is served.
    let on_replica = replica.in_background(&format!("DQ.EVENTS q AFTER {} BLOCK 0", last + 1));
    wait_blocked(&mut r, 1);
    cmd(&mut r, "REPLICAOF NO ONE");
    cmd(&mut r, "DQ.ADD q x ID after-failover");
    let (new_last, events) = parse(&on_replica.join().unwrap());
    assert_eq!(new_last, last + 2);
    assert_eq!(
        kinds(&events),
        vec![ev("added", "after-failover", None, None)]
    );
    drop(master);
}

#[test]
fn bad_input_names_the_argument_and_changes_nothing() {
    let server = Server::start();
    let mut c = server.conn();
    cmd(&mut c, "DQ.CONFIG q SET EVENTS 10");
    cmd(&mut c, "DQ.ADD q x ID a");
    let before = digest(&mut c);
    let events = "ERR EVENTS must be an integer from 0 to 100000000 (0 keeps none)";
    for bad in ["-1", "x", "1.5", "100000001"] {
        assert_eq!(
            cmd_err(&mut c, &format!("DQ.CONFIG q SET EVENTS {bad}")),
            events
        );
        assert_eq!(
            cmd_err(&mut c, &format!("DQ.CONFIG q SET RETAIN 1h EVENTS {bad}")),
            events
        );
    }
    let after = "ERR AFTER must be a seq: an integer from 0";
    assert_eq!(cmd_err(&mut c, "DQ.EVENTS q AFTER -1"), after);
    assert_eq!(cmd_err(&mut c, "DQ.EVENTS q AFTER x"), after);
    let count = "ERR COUNT must be an integer from 1 to 10000";
    assert_eq!(cmd_err(&mut c, "DQ.EVENTS q COUNT 0"), count);
    assert_eq!(cmd_err(&mut c, "DQ.EVENTS q COUNT 10001"), count);
    assert!(cmd_err(&mut c, "DQ.EVENTS q BLOCK -1").starts_with("ERR BLOCK must be a duration"));
    assert_eq!(
        cmd_err(&mut c, "DQ.EVENTS q FROM 1"),
        "ERR unknown option 'FROM'"
    );
    assert_eq!(
        cmd_err(&mut c, "DQ.EVENTS q AFTER 1 AFTER 2"),
        "ERR AFTER is given more than once"
    );
    assert_eq!(digest(&mut c), before);
    assert_eq!(int(&field(&cmd(&mut c, "DQ.CONFIG q"), "events")), 10);
    cmd(&mut c, "SET str x");
    assert!(cmd_err(&mut c, "DQ.EVENTS str").starts_with("WRONGTYPE"));
}
