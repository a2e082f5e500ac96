//! Queue keys that reach a database without a DQ command are served too.

use std::time::Duration;

use dq_testkit::*;

fn ready(c: &mut redis::Connection, queue: &str) -> i64 {
    int(&field(&cmd(c, &format!("DQ.STATS {queue}")), "ready"))
}

#[test]
fn restored_keys_are_served_by_the_timer() {
    // What slot migration does: DUMP on one node, RESTORE on another.
    let source = Server::start();
    let target = Server::start();
    let mut s = source.conn();
    let mut t = target.conn();
    cmd(&mut s, "DQ.ADD q x DELAY 600");
    cmd(&mut s, "DQ.ADD q y");
    cmd(&mut s, "DQ.POP q LEASE 600");
    let Value::BulkString(dump) = cmd(&mut s, "DUMP q") else {
        panic!()
    };
    run(&mut t, &[b"RESTORE", b"q", b"0", &dump]).unwrap();
    assert!(wait_until(LONG, || ready(&mut t, "q") == 2));
}

#[test]
fn moved_keys_are_served_in_their_new_database() {
    let server = Server::start();
    let mut c = server.conn();
    cmd(&mut c, "DQ.ADD q x DELAY 400");
    assert_eq!(int(&cmd(&mut c, "MOVE q 4")), 1);
    cmd(&mut c, "SELECT 4");
    assert!(wait_until(LONG, || ready(&mut c, "q") == 1));
}

#[test]
fn swapped_databases_are_served() {
    let server = Server::start();
    let mut c = server.conn();
    cmd(&mut c, "DQ.ADD q x DELAY 400");
    cmd(&mut c, "SWAPDB 0 6");
    cmd(&mut c, "SELECT 6");
    assert!(wait_until(LONG, || ready(&mut c, "q") == 1));
}

#[test]
fn a_big_backlog_does_not_starve_other_queues() {
    // More than three ticks' message budget due at once takes at least four
    // ticks (more where a tick's 2 ms end it sooner), and a small queue due
    // just after them must not wait for all: once a tick at a time after
    // `small` fell due has left work in `big`, `small` is served before
    // `big`'s next tick. The AOF holds each tick's work per queue, with the
    // tick's time, in the order of the ticks: that is what is checked, not
    // what a client happens to see between two ticks.
    let mut margin = 3_000;
    let mut factor = 1;
    loop {
        let server = Server::start_with(&["--appendonly", "yes"]);
        let mut c = server.conn();
        let n = factor * (3 * info_field(&mut c, "dq_tick_budget") + 1);
        let due = now_ms() + margin;
        add_due_at(&mut c, "big", n, due);
        let small_due = due + 5;
        cmd(&mut c, &format!("DQ.ADD small x AT {small_due}"));
        if now_ms() >= due {
            // The backlog fell due while it was loaded: again, with more time.
            assert!(margin < 300_000, "could not add {n} messages in 5 minutes");
            margin *= 4;
            continue;
        }
        assert!(wait_until(LONG + Duration::from_millis(margin), || {
            ready(&mut c, "small") == 1 && ready(&mut c, "big") == n
        }));
        let mut ticks = Vec::new();
        assert!(
            wait_until(LONG, || {
                ticks = aof_ticks(&server);
                let promoted =
                    |q: &str| -> i64 { ticks.iter().filter(|t| t.0 == q).map(|t| t.2).sum() };
                promoted("big") == n && promoted("small") == 1
            }),
            "the AOF does not hold the ticks: {ticks:?}"
        );
        let small = ticks.iter().position(|t| t.0 == "small").unwrap();
        let big: Vec<(usize, u64)> = (0..ticks.len())
            .filter(|&i| ticks[i].0 == "big")
            .map(|i| (i, ticks[i].1))
            .collect();
        // The first of big's ticks after small fell due that left work.
        let after = big.iter().position(|&(_, now)| now > small_due);
        if let Some(k) = after.filter(|&k| k + 1 < big.len()) {
            assert!(
                small < big[k + 1].0,
                "small, due at {small_due}, waited for big's ticks {:?}",
                &ticks[..=small]
            );
            return;
        }
        // The whole backlog moved before small fell due, on a machine that
        // fast: a bigger one.
        assert!(factor < 64, "{n} messages moved before {small_due}");
        factor *= 4;
    }
}

/// The timer's ticks in a server's AOF so far, in order: the queue, the
/// tick's time and the messages it promoted (`DQ.APPLY queue now
/// max-attempts TICK ttl-expired leases-expired promoted`).
fn aof_ticks(server: &Server) -> Vec<(String, u64, i64)> {
    let number = |b: &[u8]| std::str::from_utf8(b).unwrap().parse::<i64>().unwrap();
    aof_commands(server)
        .into_iter()
        .filter(|a| a.len() == 8 && a[0].eq_ignore_ascii_case(b"DQ.APPLY") && a[4] == b"TICK")
        .map(|a| {
            let queue = String::from_utf8_lossy(&a[1]).into_owned();
            (queue, number(&a[2]) as u64, number(&a[7]))
        })
        .collect()
}

/// The commands of a server's AOF so far, in the order it wrote them: the
/// incremental files of its multi-part AOF, oldest first.
fn aof_commands(server: &Server) -> Vec<Vec<Vec<u8>>> {
    let dir = server.dir.join("appendonlydir");
    let mut files: Vec<(u64, std::path::PathBuf)> = std::fs::read_dir(&dir)
        .map(|entries| {
            entries
                .filter_map(|e| {
                    let path = e.ok()?.path();
                    let name = path.file_name()?.to_str()?;
                    let seq = name.strip_suffix(".incr.aof")?.rsplit('.').next()?;
                    Some((seq.parse().ok()?, path))
                })
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    let mut commands = Vec::new();
    for (_, path) in files {
        parse_commands(&std::fs::read(path).unwrap_or_default(), &mut commands);
    }
    commands
}

/// The RESP arrays of bulk strings an AOF holds, up to one not yet wholly
/// written.
fn parse_commands(data: &[u8], out: &mut Vec<Vec<Vec<u8>>>) {
    let mut at = 0;
    // The number after a line's first byte, and the line consumed.
    let header = |at: &mut usize, kind: u8| -> Option<usize> {
        let end = *at + data[*at..].windows(2).position(|w| w == b"\r\n")?;
        let line = &data[*at..end];
        *at = end + 2;
        if line.first() != Some(&kind) {
            return None;
        }
        std::str::from_utf8(&line[1..]).ok()?.parse().ok()
    };
    while at < data.len() {
        if data[at] == b'#' {
            // An annotation line.
            match data[at..].iter().position(|&b| b == b'\n') {
                Some(end) => at += end + 1,
                None => return,
            }
            continue;
        }
        let Some(n) = header(&mut at, b'*') else {
            return;
        };
        let mut args = Vec::with_capacity(n);
        for _ in 0..n {
            let Some(len) = header(&mut at, b'$') else {
                return;
            };
            if at + len + 2 > data.len() {
                return;
            }
            args.push(data[at..at + len].to_vec());
            at += len + 2;
        }
        out.push(args);
    }
}

const STATES: [&str; 4] = ["delayed", "ready", "inflight", "dead"];

fn census(c: &mut redis::Connection) -> [i64; 4] {
    STATES.map(|s| info_field(c, &format!("dq_messages_{s}")))
}

/// INFO dq's messages per state, and the same summed by DQ.STATS over every
/// queue of every database: read in one MULTI, so that no timer tick (a
/// message falling due, a lease ending) comes between the two, however
/// long the reading takes.
fn census_and_recount(c: &mut redis::Connection) -> ([i64; 4], [i64; 4]) {
    let mut queues = Vec::new();
    for db in 0..16 {
        cmd(c, &format!("SELECT {db}"));
        queues.extend(list(&cmd(c, "DQ.QUEUES")).iter().map(|q| (db, text(q))));
    }
    let mut pipe = redis::pipe();
    pipe.atomic();
    // Touched first: a queue whose key expired goes now, not between the
    // two counts.
    for (db, q) in &queues {
        pipe.cmd("SELECT").arg(*db).ignore();
        pipe.cmd("EXISTS").arg(q).ignore();
    }
    pipe.cmd("INFO").arg("dq");
    for (db, q) in &queues {
        pipe.cmd("SELECT").arg(*db).ignore();
        pipe.cmd("DQ.STATS").arg(q);
    }
    pipe.cmd("SELECT").arg(0).ignore();
    let replies: Vec<Value> = pipe.query(c).unwrap();
    let info = text(&replies[0]);
    let census = STATES.map(|s| {
        info.lines()
            .find_map(|l| l.strip_prefix(&format!("dq_messages_{s}:")))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("no dq_messages_{s} in INFO dq:\n{info}"))
    });
    let mut recount = [0; 4];
    for stats in &replies[1..] {
        for (i, state) in STATES.iter().enumerate() {
            recount[i] += int(&field(stats, state));
        }
    }
    (census, recount)
}

/// FLUSHDB, FLUSHALL, DEL, UNLINK, RENAME, COPY and EXPIRE of queues
/// behind dq's back, in several databases: no crash, INFO dq agrees with the keys, no
/// timer work is left for queues that are gone, and an untouched queue is
/// served throughout.
#[test]
fn keyspace_commands_on_queue_keys_leave_dq_consistent() {
    let server = Server::start();
    let mut c = server.conn();
    let fill = |c: &mut redis::Connection, q: &str| {
        cmd(c, &format!("DQ.ADD {q} x DELAY 150"));
        cmd(c, &format!("DQ.ADD {q} x TTL 60000"));
        cmd(c, &format!("DQ.ADD {q} x GROUP g"));
        cmd(c, &format!("DQ.ADD {q} x GROUP g"));
        cmd(c, &format!("DQ.POP {q} LEASE 150"));
    };
    for db in [0, 1, 2] {
        cmd(&mut c, &format!("SELECT {db}"));
        for q in ["a", "b", "c", "d", "keep"] {
            fill(&mut c, q);
        }
    }
    cmd(&mut c, "SELECT 1");
    cmd(&mut c, "FLUSHDB");
    cmd(&mut c, "SELECT 0");
    cmd(&mut c, "DEL a");
    cmd(&mut c, "RENAME b renamed");
    cmd(&mut c, "PEXPIRE c 50");
    cmd(&mut c, "COPY d d2");
    cmd(&mut c, "UNLINK d");
    let (census_now, recount) = census_and_recount(&mut c);
    assert_eq!(census_now, recount);

    // The untouched queues are served; leases and due times pass.
    for db in [0, 2] {
        cmd(&mut c, &format!("SELECT {db}"));
        assert!(wait_until(LONG, || ready(&mut c, "keep") == 3));
    }
    cmd(&mut c, "SELECT 0");
    // The expired queue is gone once touched; then INFO agrees again.
    assert!(wait_until(LONG, || {
        cmd(&mut c, "DBSIZE");
        int(&cmd(&mut c, "EXISTS c")) == 0 && {
            let (census, recount) = census_and_recount(&mut c);
            census == recount
        }
    }));
    // Scheduled: exactly the queues left, each holding a TTL.
    let mut queues = 0;
    for db in 0..3 {
        cmd(&mut c, &format!("SELECT {db}"));
        let Value::Array(names) = cmd(&mut c, "DQ.QUEUES") else {
            panic!()
        };
        queues += names.len() as i64;
    }
    cmd(&mut c, "SELECT 0");
    assert_eq!(queues, 8, "renamed, d2, keep; a, b, c, d and keep in db 2");
    assert_eq!(info_field(&mut c, "dq_queues_scheduled"), queues);
    assert_eq!(info_field(&mut c, "dq_queues"), queues);
    cmd(&mut c, "FLUSHALL");
    assert_eq!(census(&mut c), [0; 4]);
    assert_eq!(info_field(&mut c, "dq_queues"), 0);
    // A queue created afresh is served as before.
    cmd(&mut c, "DQ.ADD keep x DELAY 100");
    assert!(wait_until(LONG, || ready(&mut c, "keep") == 1));
    assert!(wait_until(LONG, || info_field(
        &mut c,
        "dq_queues_scheduled"
    ) == 0));
    assert_eq!(text(&cmd(&mut c, "PING")), "PONG");
}

/// MOVE and COPY ... DB leave the caller in its own database. (Valkey 8.1
/// runs a module's keyspace-event handlers on the calling client and left
/// it in the destination database: valkey-io/valkey#4024.)
#[test]
fn move_and_copy_to_another_database_leave_the_caller_where_it_was() {
    let server = Server::start();
    let mut c = server.conn();
    let db = |c: &mut redis::Connection| {
        let info = text(&cmd(c, "CLIENT INFO"));
        info.split(' ')
            .find_map(|f| f.strip_prefix("db="))
            .map(str::to_string)
            .unwrap()
    };
    cmd(&mut c, "SELECT 2");
    cmd(&mut c, "SET s x");
    assert_eq!(int(&cmd(&mut c, "MOVE s 3")), 1);
    assert_eq!(db(&mut c), "2", "MOVE of a string");
    cmd(&mut c, "DQ.ADD q x ID m");
    assert_eq!(int(&cmd(&mut c, "COPY q q2 DB 5")), 1);
    assert_eq!(db(&mut c), "2", "COPY of a queue");
    assert_eq!(int(&cmd(&mut c, "MOVE q 4")), 1);
    assert_eq!(db(&mut c), "2", "MOVE of a queue");
    // Each arrived where it was sent.
    cmd(&mut c, "SELECT 4");
    assert_eq!(text(&field(&cmd(&mut c, "DQ.GET q m"), "state")), "ready");
    cmd(&mut c, "SELECT 5");
    assert_eq!(text(&field(&cmd(&mut c, "DQ.GET q2 m"), "state")), "ready");
}
