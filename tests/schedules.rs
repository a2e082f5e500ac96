//! Recurring schedules against real servers: runs made by the timer as
//! messages `name@T`, the options, bad input, and what persistence,
//! replication and a failover do to them.

use std::collections::BTreeSet;
use std::time::Duration;

use dq_testkit::*;

/// A command line whose words may be "double quoted" (a cron has spaces).
fn words(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = line.trim();
    while !rest.is_empty() {
        let (word, after) = match rest.strip_prefix('"') {
            Some(quoted) => quoted.split_once('"').unwrap_or((quoted, "")),
            None => rest.split_once(' ').unwrap_or((rest, "")),
        };
        out.push(word.to_string());
        rest = after.trim_start();
    }
    out
}

fn call(c: &mut redis::Connection, line: &str) -> Result<Value, String> {
    let words = words(line);
    let args: Vec<&[u8]> = words.iter().map(|w| w.as_bytes()).collect();
    run(c, &args)
}

fn ok(c: &mut redis::Connection, line: &str) -> Value {
    call(c, line).unwrap_or_else(|e| panic!("{line}: {e}"))
}

/// The run times of schedule `name` whose messages are in `queue`.
fn run_times(c: &mut redis::Connection, queue: &str, name: &str) -> BTreeSet<u64> {
    let mut times = BTreeSet::new();
    let mut cursor = "0".to_string();
    loop {
        let reply = cmd(c, &format!("DQ.SCAN {queue} {cursor} COUNT 1000"));
        let parts = list(&reply);
        cursor = text(&parts[0]);
        for entry in list(&parts[1]) {
            let id = text(&list(&entry)[0]);
            if let Some(at) = id.strip_prefix(&format!("{name}@")) {
                times.insert(at.parse().expect("a run id ends with its time"));
            }
        }
        if cursor == "0" {
            return times;
        }
    }
}

/// One schedule's record from DQ.SCHEDULES.
fn schedule(c: &mut redis::Connection, queue: &str, name: &str) -> Value {
    list(&cmd(c, &format!("DQ.SCHEDULES {queue}")))
        .into_iter()
        .find(|r| text(&field(r, "name")) == name)
        .unwrap_or_else(|| panic!("no schedule {name}"))
}

fn opt_int(v: &Value) -> Option<i64> {
    match v {
        Value::Nil => None,
        v => Some(int(v)),
    }
}

#[test]
fn every_run_adds_a_message_named_by_its_time() {
    let server = Server::start();
    let mut c = server.conn();
    let before = now_ms();
    let next = int(&ok(&mut c, "DQ.SCHEDULE jobs poll {\"feed\":1} EVERY 1s PRIORITY 3 MAXATTEMPTS 2 GROUP feeds TTL 600000",
    )) as u64;
    // START defaults to now: the first run is due at once.
    assert!((before..=now_ms()).contains(&next), "{next}");
    assert!(wait_until(LONG, || run_times(&mut c, "jobs", "poll").len() >= 2));
    let times = run_times(&mut c, "jobs", "poll");
    let first = *times.iter().next().unwrap();
    assert_eq!(first, next);
    assert!(times
        .iter()
        .zip(times.iter().skip(1))
        .all(|(a, b)| b - a == 1000));
    let run = cmd(&mut c, &format!("DQ.GET jobs poll@{first}"));
    assert_eq!(text(&field(&run, "payload")), "{\"feed\":1}");
    assert_eq!(int(&field(&run, "due-at")) as u64, first);
    assert_eq!(int(&field(&run, "priority")), 3);
    assert_eq!(text(&field(&run, "group")), "feeds");
    let s = schedule(&mut c, "jobs", "poll");
    assert_eq!(text(&field(&s, "spec")), "every 1s");
    assert_eq!(text(&field(&s, "tz")), "UTC");
    assert!(int(&field(&s, "runs")) >= 2);
    assert!(opt_int(&field(&s, "last-run")).is_some_and(|t| t as u64 >= first + 1000));
    assert!(int(&field(&s, "next-run")) > int(&field(&s, "last-run")));
    assert_eq!(int(&field(&s, "max-attempts")), 2);
    assert_eq!(int(&field(&s, "ttl")), 600_000);
    assert_eq!(text(&field(&s, "missed")), "one");
    assert_eq!(text(&field(&s, "overlap")), "allow");
    assert_eq!(field(&s, "limit"), Value::Nil);
    assert_eq!(int(&field(&cmd(&mut c, "DQ.STATS jobs"), "schedules")), 1);
    assert!(info_field(&mut c, "dq_schedule_runs") >= 2);
}

#[test]
fn cron_in_a_zone_limit_end_nx_and_unschedule() {
    let server = Server::start();
    let mut c = server.conn();
    let now = now_ms();
    let next = int(&ok(
        &mut c,
        "DQ.SCHEDULE q digest x CRON \"0 8 * * *\" TZ Europe/Berlin",
    )) as u64;
    // 08:00 in Berlin is at a whole hour in UTC, within a day.
    assert_eq!(next % 3_600_000, 0);
    assert!(next > now && next <= now + 86_400_000, "{next}");
    let s = schedule(&mut c, "q", "digest");
    assert_eq!(text(&field(&s, "spec")), "cron 0 8 * * *");
    assert_eq!(text(&field(&s, "tz")), "Europe/Berlin");
    // NX leaves it; a replacement answers its new next run.
    assert_eq!(ok(&mut c, "DQ.SCHEDULE q digest y EVERY 1h NX"), Value::Nil);
    assert_eq!(
        text(&field(&schedule(&mut c, "q", "digest"), "payload")),
        "x"
    );
    let start = now + 3_600_000;
    let replaced = int(&cmd(
        &mut c,
        &format!("DQ.SCHEDULE q digest y EVERY 1h START {start}"),
    ));
    assert_eq!(replaced as u64, start);
    // END before any run, or a LIMIT used up: no next run.
    assert_eq!(
        ok(
            &mut c,
            &format!("DQ.SCHEDULE q gone x EVERY 1m START 1000 END {}", now - 1)
        ),
        Value::Nil
    );
    ok(&mut c, "DQ.SCHEDULE q twice x EVERY 1s LIMIT 2");
    assert!(wait_until(LONG, || run_times(&mut c, "q", "twice").len() == 2));
    let s = schedule(&mut c, "q", "twice");
    assert_eq!(
        (int(&field(&s, "runs")), field(&s, "next-run")),
        (2, Value::Nil)
    );
    assert_eq!(int(&field(&s, "limit")), 2);
    // UNSCHEDULE counts what existed; the runs' messages stay.
    assert_eq!(
        int(&cmd(&mut c, "DQ.UNSCHEDULE q twice twice nope gone")),
        2
    );
    assert_eq!(run_times(&mut c, "q", "twice").len(), 2);
    assert_eq!(list(&cmd(&mut c, "DQ.SCHEDULES q")).len(), 1);
    assert_eq!(list(&cmd(&mut c, "DQ.SCHEDULES absent")).len(), 0);
}

#[test]
fn bad_input_gets_an_error_naming_the_argument_and_changes_nothing() {
    let server = Server::start();
    let mut c = server.conn();
    ok(&mut c, "DQ.SCHEDULE q keep x EVERY 1h START 9999999999999");
    let digest_before = digest(&mut c);
    for (line, expected) in [
        ("DQ.SCHEDULE q s x CRON \"* * * *\"", "ERR CRON must be"),
        ("DQ.SCHEDULE q s x CRON \"61 * * * *\"", "ERR CRON must be"),
        (
            "DQ.SCHEDULE q s x CRON \"* * * * *\" TZ Mars/Olympus",
            "ERR TZ must be",
        ),
        ("DQ.SCHEDULE q s x EVERY 999", "ERR EVERY must be"),
        (
            "DQ.SCHEDULE q s x EVERY 1m CRON \"* * * * *\"",
            "ERR EVERY and CRON cannot be used together",
        ),
        (
            "DQ.SCHEDULE q s x NX LIMIT 3",
            "ERR dq.schedule needs EVERY or CRON",
        ),
        ("DQ.SCHEDULE q s x", "ERR wrong number of arguments"),
        ("DQ.SCHEDULE q s x EVERY 1m LIMIT 0", "ERR LIMIT must be"),
        ("DQ.SCHEDULE q s x EVERY 1m LIMIT -1", "ERR LIMIT must be"),
        (
            "DQ.SCHEDULE q s x EVERY 1m START 10 END 9",
            "ERR START must not be after END",
        ),
        ("DQ.SCHEDULE q s x EVERY 1m TZ UTC", "ERR TZ needs CRON"),
        (
            "DQ.SCHEDULE q s x EVERY 1m MISSED SOME",
            "ERR MISSED must be",
        ),
        (
            "DQ.SCHEDULE q s x EVERY 1m OVERLAP NEVER",
            "ERR OVERLAP must be",
        ),
        ("DQ.SCHEDULE q s", "ERR wrong number of arguments"),
        ("DQ.SCHEDULE other s x EVERY 0s", "ERR EVERY must be"),
        ("DQ.UNSCHEDULE q", "ERR wrong number of arguments"),
        ("DQ.SCHEDULES", "ERR wrong number of arguments"),
    ] {
        let err = call(&mut c, line).expect_err(line);
        assert!(err.starts_with(expected), "{line}: {err}");
    }
    assert_eq!(digest(&mut c), digest_before);
    assert_eq!(int(&cmd(&mut c, "EXISTS other")), 0, "no queue was made");
    cmd(&mut c, "SET str x");
    assert!(cmd_err(&mut c, "DQ.SCHEDULE str s x EVERY 1m").starts_with("WRONGTYPE"));
    assert!(cmd_err(&mut c, "DQ.SCHEDULES str").starts_with("WRONGTYPE"));
}

#[test]
fn schedules_survive_reload_rewrite_copy_and_restore() {
    let mut server = Server::start_with(&["--appendonly", "yes", "--aof-use-rdb-preamble", "no"]);
    let mut c = server.conn();
    let far = now_ms() + 3_600_000;
    ok(
        &mut c,
        &format!(
            "DQ.SCHEDULE q a x CRON \"*/5 * * * *\" TZ Asia/Kolkata LIMIT 9 END {}",
            far * 2
        ),
    );
    ok(
        &mut c,
        &format!("DQ.SCHEDULE q b y EVERY 1d START {far} MISSED ALL OVERLAP SKIP BACKOFF fixed:1s"),
    );
    cmd(&mut c, "DQ.ADD q m");
    let before = digest(&mut c);
    let schedules = cmd(&mut c, "DQ.SCHEDULES q");
    cmd(&mut c, "DEBUG RELOAD");
    assert_eq!(digest(&mut c), before);
    assert_eq!(cmd(&mut c, "DQ.SCHEDULES q"), schedules);
    // AOF rewrite without the RDB preamble, then a restart from it.
    cmd(&mut c, "BGREWRITEAOF");
    assert!(wait_until(LONG, || {
        text(&cmd(&mut c, "INFO persistence")).contains("aof_rewrite_in_progress:0")
    }));
    server.restart();
    let mut c = server.conn();
    assert_eq!(digest(&mut c), before);
    // COPY and DUMP/RESTORE carry them.
    cmd(&mut c, "COPY q q2");
    assert_eq!(cmd(&mut c, "DQ.SCHEDULES q2"), schedules);
    let dump: Vec<u8> = redis::cmd("DUMP").arg("q").query(&mut c).unwrap();
    redis::cmd("RESTORE")
        .arg("q3")
        .arg(0)
        .arg(dump)
        .query::<()>(&mut c)
        .unwrap();
    assert_eq!(cmd(&mut c, "DQ.SCHEDULES q3"), schedules);
    // MEMORY USAGE counts them.
    cmd(&mut c, "DQ.ADD plain m");
    assert!(int(&cmd(&mut c, "MEMORY USAGE q")) > int(&cmd(&mut c, "MEMORY USAGE plain")) + 200);
}

#[test]
fn a_queue_restored_elsewhere_settles_its_missed_runs() {
    let server = Server::start();
    let mut c = server.conn();
    ok(&mut c, "DQ.SCHEDULE src s x EVERY 1s");
    let dump: Vec<u8> = redis::cmd("DUMP").arg("src").query(&mut c).unwrap();
    let dumped = now_ms();
    cmd(&mut c, "DEL src");
    // Restored elsewhere seconds later: the run times in between were
    // missed, and MISSED ONE (the default) makes the latest of them only.
    wait_until(Duration::from_secs(30), || now_ms() > dumped + 3_500);
    let other = Server::start();
    let mut o = other.conn();
    let restored_at = now_ms();
    redis::cmd("RESTORE")
        .arg("dst")
        .arg(0)
        .arg(dump)
        .query::<()>(&mut o)
        .unwrap();
    assert!(wait_until(LONG, || {
        run_times(&mut o, "dst", "s")
            .iter()
            .any(|&t| t > restored_at)
    }));
    let times = run_times(&mut o, "dst", "s");
    let missed: Vec<&u64> = times
        .iter()
        .filter(|&&t| t > dumped && t < restored_at)
        .collect();
    assert_eq!(
        missed.len(),
        1,
        "{times:?} (dumped {dumped}, restored {restored_at})"
    );
    assert!(*missed[0] + 1000 > restored_at, "the latest missed time");
}

#[test]
fn idle_stays_idle_with_thousands_of_schedules_hours_away() {
    let server = Server::start();
    let mut c = server.conn();
    let start = now_ms() + 3 * 3_600_000;
    let mut pipe = redis::pipe();
    for i in 0..10_000 {
        pipe.cmd("DQ.SCHEDULE")
            .arg(format!("q{}", i % 100))
            .arg(format!("s{i}"))
            .arg("x")
            .arg("EVERY")
            .arg("1h")
            .arg("START")
            .arg(start + i)
            .ignore();
    }
    pipe.query::<()>(&mut c).unwrap();
    assert_eq!(info_field(&mut c, "dq_timer_armed"), 1);
    let ticks = info_field(&mut c, "dq_timer_ticks");
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(
        info_field(&mut c, "dq_timer_ticks"),
        ticks,
        "woke up with nothing due"
    );
    assert_eq!(info_field(&mut c, "dq_schedule_runs"), 0);
}

/// The master makes runs; the replica follows exactly; the master dies and
/// the promoted replica goes on with no duplicate, and with the missed
/// runs MISSED asks for.
#[test]
fn a_promoted_replica_goes_on_running_schedules() {
    for missed in ["ALL", "SKIP"] {
        let master = Server::start();
        let replica = Server::start_replica_of(&master);
        let mut m = master.conn();
        let mut r = replica.conn();
        let start = now_ms();
        ok(
            &mut m,
            &format!("DQ.SCHEDULE q s x EVERY 1s START {start} MISSED {missed}"),
        );
        ok(&mut m, "DQ.SCHEDULE q gone x CRON \"0 0 1 1 *\"");
        assert!(wait_until(LONG, || run_times(&mut m, "q", "s").len() >= 2));
        assert_eq!(int(&cmd(&mut m, "DQ.UNSCHEDULE q gone")), 1);
        assert!(wait_until(LONG, || int(&cmd(&mut m, "WAIT 1 1000")) == 1));
        assert!(
            wait_until(LONG, || digest(&mut m) == digest(&mut r)),
            "{missed}"
        );
        drop(m);
        drop(master);
        let died = now_ms();
        // The replica never runs schedules itself.
        let on_replica = run_times(&mut r, "q", "s");
        wait_until(Duration::from_secs(30), || now_ms() > died + 3_500);
        assert_eq!(
            run_times(&mut r, "q", "s"),
            on_replica,
            "{missed}: a replica ran"
        );
        cmd(&mut r, "REPLICAOF NO ONE");
        let promoted = now_ms();
        assert!(wait_until(LONG, || {
            run_times(&mut r, "q", "s").iter().any(|&t| t > promoted)
        }));
        let times: Vec<u64> = run_times(&mut r, "q", "s").into_iter().collect();
        assert!(
            times.iter().all(|t| (t - start).is_multiple_of(1000)),
            "{missed}: {times:?}"
        );
        let gaps: Vec<u64> = times.windows(2).map(|w| w[1] - w[0]).collect();
        match missed {
            // Every time from the start on, none twice.
            "ALL" => assert!(gaps.iter().all(|&g| g == 1000), "{missed}: {times:?}"),
            // The times that passed with no master are not made.
            _ => assert!(gaps.iter().any(|&g| g >= 3000), "{missed}: {times:?}"),
        }
    }
}

#[test]
fn rename_and_migrate_carry_schedules_which_run_where_they_went() {
    let server = Server::start();
    let other = Server::start();
    let mut c = server.conn();
    let mut o = other.conn();
    ok(&mut c, "DQ.SCHEDULE q s x EVERY 1s");
    assert!(wait_until(LONG, || !run_times(&mut c, "q", "s").is_empty()));
    cmd(&mut c, "RENAME q renamed");
    let renamed_at = now_ms();
    assert_eq!(int(&cmd(&mut c, "EXISTS q")), 0);
    // The timer follows the new name: runs after the rename land there.
    assert!(wait_until(LONG, || {
        run_times(&mut c, "renamed", "s")
            .iter()
            .any(|&t| t > renamed_at)
    }));
    assert_eq!(
        int(&cmd(&mut c, "EXISTS q")),
        0,
        "a run went to the old name"
    );
    migrate(&mut c, "renamed", other.port);
    let migrated_at = now_ms();
    assert_eq!(int(&cmd(&mut c, "EXISTS renamed")), 0);
    assert_eq!(
        list(&cmd(&mut o, "DQ.SCHEDULES renamed")).len(),
        1,
        "the schedule travelled"
    );
    assert!(wait_until(LONG, || {
        run_times(&mut o, "renamed", "s")
            .iter()
            .any(|&t| t > migrated_at)
    }));
    // Nothing is left behind to run on the source.
    assert_eq!(int(&cmd(&mut c, "DBSIZE")), 0);
    assert_eq!(info_field(&mut c, "dq_timer_armed"), 0);
}
