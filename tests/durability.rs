//! What survives a crash or a restart: with `appendfsync always` every ADD
//! that got a reply, and no ACK undone; with RDB what the last SAVE held.
//! Either way the timer serves every queue again with no client action.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use dq_testkit::*;

#[derive(Default)]
struct Ledger {
    /// ADDs that got a reply: id -> due time (Unix ms).
    added: Vec<(String, u64)>,
    acked: HashSet<String>,
    /// An ACK cut off by the kill: it may or may not have been applied.
    maybe_acked: Option<String>,
}

#[test]
fn kill_9_with_appendfsync_always_loses_no_acknowledged_write() {
    let mut server = Server::start_with(&["--appendonly", "yes", "--appendfsync", "always"]);
    let url = server.url();
    let ledger = Arc::new(Mutex::new(Ledger::default()));
    let stop = Arc::new(AtomicBool::new(false));
    let producer = {
        let (url, ledger, stop) = (url.clone(), ledger.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut c = redis::Client::open(url).unwrap().get_connection().unwrap();
            for n in 0.. {
                if stop.load(Ordering::SeqCst) {
                    break;
                }
                let delay = [0, 0, 300, 1500][n % 4];
                let due = now_ms() + delay;
                let line = format!("DQ.ADD q p{n} ID m{n} DELAY {delay}");
                let args: Vec<&[u8]> = line.split(' ').map(str::as_bytes).collect();
                match run(&mut c, &args) {
                    Ok(_) => ledger.lock().unwrap().added.push((format!("m{n}"), due)),
                    Err(_) => break, // the server is gone
                }
            }
        })
    };
    let consumer = {
        let (ledger, stop) = (ledger.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut c = redis::Client::open(url).unwrap().get_connection().unwrap();
            let mut turn = 0;
            while !stop.load(Ordering::SeqCst) {
                let Ok(v) = run(
                    &mut c,
                    &[b"DQ.POP", b"q", b"COUNT", b"10", b"LEASE", b"500"],
                ) else {
                    break;
                };
                for (id, _, _) in entries(&v) {
                    turn += 1;
                    if turn % 3 == 0 {
                        continue; // this consumer "dies" with the message leased
                    }
                    match run(&mut c, &[b"DQ.ACK", b"q", id.as_bytes()]) {
                        Ok(Value::Int(1)) => {
                            ledger.lock().unwrap().acked.insert(id);
                        }
                        Ok(_) => {}
                        Err(_) => {
                            ledger.lock().unwrap().maybe_acked = Some(id);
                            return;
                        }
                    }
                }
            }
        })
    };
    assert!(wait_until(LONG, || {
        let l = ledger.lock().unwrap();
        l.added.len() > 500 && l.acked.len() > 100
    }));
    server.restart(); // SIGKILL, then start on the same files
    stop.store(true, Ordering::SeqCst);
    producer.join().unwrap();
    consumer.join().unwrap();
    let ledger = ledger.lock().unwrap();

    let mut c = server.conn();
    let mut open: HashSet<String> = HashSet::new();
    for (id, _) in &ledger.added {
        if ledger.maybe_acked.as_ref() == Some(id) {
            continue;
        }
        let found = cmd(&mut c, &format!("DQ.GET q {id}")) != Value::Nil;
        if ledger.acked.contains(id) {
            assert!(!found, "{id} was acked and came back");
        } else {
            assert!(found, "{id} got a reply to its ADD and is gone");
            open.insert(id.clone());
        }
    }
    // Every open message is delivered — delayed ones not before their due
    // time, leased ones when their lease ends — and nothing acked is.
    let due: std::collections::HashMap<&str, u64> = ledger
        .added
        .iter()
        .map(|(id, at)| (id.as_str(), *at))
        .collect();
    assert!(
        wait_until(LONG, || {
            for (id, _, _) in entries(&cmd(&mut c, "DQ.POP q COUNT 100 LEASE 60000")) {
                assert!(
                    !ledger.acked.contains(&id),
                    "{id} was acked and delivered again"
                );
                // (An ADD cut off before its reply may be there too.)
                if let Some(at) = due.get(id.as_str()) {
                    assert!(now_ms() >= *at, "{id} delivered early");
                }
                cmd(&mut c, &format!("DQ.ACK q {id}"));
                open.remove(&id);
            }
            open.is_empty()
        }),
        "{} messages never delivered after the restart",
        open.len()
    );
}

#[test]
fn rdb_save_then_restart_keeps_queues_served() {
    let mut server = Server::start();
    let mut c = server.conn();
    // `leased` is the only message when the POP runs, however slow the
    // machine: the delayed one is added after it.
    cmd(&mut c, "DQ.ADD q x ID leased");
    cmd(&mut c, "DQ.POP q LEASE 500");
    cmd(&mut c, "DQ.ADD q x ID delayed DELAY 3000");
    cmd(&mut c, "DQ.ADD q x ID grouped GROUP g");
    cmd(&mut c, "DQ.ADD q x ID waiting GROUP g");
    cmd(&mut c, "SAVE");
    cmd(&mut c, "DQ.ADD q x ID unsaved"); // after the snapshot: gone
    server.restart();
    let mut c = server.conn();
    assert_eq!(cmd(&mut c, "DQ.GET q unsaved"), Value::Nil);
    let mut seen = Vec::new();
    assert!(
        wait_until(LONG, || {
            for (id, _, attempt) in entries(&cmd(&mut c, "DQ.POP q COUNT 10 LEASE 60000")) {
                cmd(&mut c, &format!("DQ.ACK q {id}"));
                seen.push((id, attempt));
            }
            seen.len() == 4
        }),
        "{seen:?}"
    );
    seen.sort();
    assert_eq!(
        seen,
        [
            ("delayed".into(), 1),
            ("grouped".into(), 1),
            ("leased".into(), 2),
            ("waiting".into(), 1)
        ]
    );
}

/// An AOF an earlier release wrote, with POP's ids one argument each
/// (`CLAIM deadline id...`; POP now writes `CLAIM PACKED deadline ids`),
/// still replays: the messages it leased are in flight after a restart.
#[test]
fn an_aof_with_pop_ids_one_per_argument_still_replays() {
    let mut server = Server::start_with(&["--appendonly", "yes", "--appendfsync", "always"]);
    let mut c = server.conn();
    for id in ["m1", "m2", "m3"] {
        cmd(&mut c, &format!("DQ.ADD q p ID {id}"));
    }
    server.crash();
    let dir = server.dir.join("appendonlydir");
    let incr = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.to_string_lossy().ends_with(".incr.aof"))
        .max()
        .expect("an incremental AOF");
    let now = now_ms().to_string();
    let deadline = (now_ms() + 3_600_000).to_string();
    let old = ["DQ.APPLY", "q", &now, "16", "CLAIM", &deadline, "m1", "m3"];
    let mut resp = format!("*{}\r\n", old.len());
    for arg in old {
        resp.push_str(&format!("${}\r\n{arg}\r\n", arg.len()));
    }
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(&incr)
        .unwrap();
    std::io::Write::write_all(&mut file, resp.as_bytes()).unwrap();
    drop(file);
    server.start_again();
    let mut c = server.conn();
    let state = |c: &mut redis::Connection, id: &str| {
        text(&field(&cmd(c, &format!("DQ.GET q {id}")), "state"))
    };
    assert_eq!(state(&mut c, "m1"), "inflight");
    assert_eq!(state(&mut c, "m2"), "ready");
    assert_eq!(state(&mut c, "m3"), "inflight");
    let m1 = cmd(&mut c, "DQ.GET q m1");
    assert_eq!(field(&m1, "attempt"), Value::Int(1));
    // And what POP writes now: its ids packed in one argument.
    assert_eq!(entries(&cmd(&mut c, "DQ.POP q")).len(), 1);
    let written: Vec<u8> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.to_string_lossy().ends_with(".incr.aof"))
        .flat_map(|p| std::fs::read(p).unwrap())
        .collect();
    let packed = b"$5\r\nCLAIM\r\n$6\r\nPACKED\r\n";
    assert!(written.windows(packed.len()).any(|w| w == packed));
}
