//! Group limits: GROUPLIMIT (how many messages of a group may be out at
//! once), GROUPRATE (how many deliveries a group may have in a window),
//! ORDER PRIORITY|FAIR, DQ.PAUSE / DQ.RESUME ... GROUP, DQ.GROUPS and
//! DQ.STATS `groups`; what DEBUG RELOAD and a replica keep of them.

use std::collections::{BTreeMap, HashMap};

use dq_testkit::*;

fn popped_ids(v: &Value) -> Vec<String> {
    entries(v).into_iter().map(|e| e.0).collect()
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

fn state(c: &mut redis::Connection, q: &str, id: &str) -> String {
    text(&field(&cmd(c, &format!("DQ.GET {q} {id}")), "state"))
}

fn stat(c: &mut redis::Connection, q: &str, name: &str) -> Value {
    field(&cmd(c, &format!("DQ.STATS {q}")), name)
}

fn conf(c: &mut redis::Connection, q: &str, name: &str) -> Value {
    field(&cmd(c, &format!("DQ.CONFIG {q}")), name)
}

/// DQ.STATS without `oldest-ready-age-ms`, which the clock moves.
fn stats_without_age(c: &mut redis::Connection, q: &str) -> Vec<(String, Value)> {
    record(&cmd(c, &format!("DQ.STATS {q}")))
        .into_iter()
        .filter(|(k, _)| k != "oldest-ready-age-ms")
        .collect()
}

/// Adds `n` messages with ids `{prefix}{i}` (i from 0) to group `group`
/// (`None`: ungrouped), in one pipeline, in order.
fn add_group(c: &mut redis::Connection, q: &str, prefix: &str, n: usize, group: Option<&str>) {
    let mut pipe = redis::pipe();
    for i in 0..n {
        let p = pipe
            .cmd("DQ.ADD")
            .arg(q)
            .arg("x")
            .arg("ID")
            .arg(format!("{prefix}{i}"));
        if let Some(g) = group {
            p.arg("GROUP").arg(g);
        }
        p.ignore();
    }
    pipe.query::<()>(c)
        .unwrap_or_else(|e| panic!("add {n} to {q}: {e}"));
}

/// One row of DQ.GROUPS.
#[derive(Clone, Debug, PartialEq)]
struct Row {
    group: String,
    waiting: i64,
    ready: i64,
    inflight: i64,
    /// nil: not paused; -1: paused without FOR; else the end in Unix ms.
    paused_until: Value,
}

/// One call of DQ.GROUPS: (next cursor, rows). Checks the reply's shape.
fn groups_page(c: &mut redis::Connection, line: &str) -> (String, Vec<Row>) {
    let reply = cmd(c, line);
    let Value::Array(parts) = &reply else {
        panic!("{line}: not an array: {reply:?}")
    };
    assert_eq!(parts.len(), 2, "{line}: {reply:?}");
    assert!(
        matches!(parts[0], Value::BulkString(_)),
        "{line}: the cursor is not a bulk string: {reply:?}"
    );
    let cursor = text(&parts[0]);
    let rows = list(&parts[1])
        .iter()
        .map(|row| {
            let f = list(row);
            assert_eq!(f.len(), 5, "{line}: a row of {} fields: {row:?}", f.len());
            assert!(
                matches!(f[4], Value::Nil | Value::Int(_)),
                "{line}: paused-until {:?}",
                f[4]
            );
            Row {
                group: text(&f[0]),
                waiting: int(&f[1]),
                ready: int(&f[2]),
                inflight: int(&f[3]),
                paused_until: f[4].clone(),
            }
        })
        .collect();
    (cursor, rows)
}

/// Iterates DQ.GROUPS from cursor 0 to the end; `options` follow the
/// cursor (`COUNT 7`, `MATCH g* COUNT 3`). Every row returned, in order,
/// duplicates kept. `between` runs after each call but the last.
fn groups_all_with(
    c: &mut redis::Connection,
    q: &str,
    options: &str,
    mut between: impl FnMut(&mut redis::Connection, usize),
) -> Vec<Row> {
    let mut cursor = "0".to_string();
    let mut rows = Vec::new();
    for call in 0.. {
        assert!(call < 100_000, "DQ.GROUPS {q} did not end");
        let line = format!("DQ.GROUPS {q} {cursor} {options}");
        let (next, page) = groups_page(c, line.trim_end());
        rows.extend(page);
        if next == "0" {
            return rows;
        }
        cursor = next;
        between(c, call);
    }
    unreachable!()
}

fn groups_all(c: &mut redis::Connection, q: &str, options: &str) -> Vec<Row> {
    groups_all_with(c, q, options, |_, _| {})
}

/// The rows by group, checking that none came twice.
fn by_group(rows: Vec<Row>) -> BTreeMap<String, Row> {
    let mut map = BTreeMap::new();
    for row in rows {
        let name = row.group.clone();
        assert!(
            map.insert(name.clone(), row).is_none(),
            "group {name} returned twice"
        );
    }
    map
}

fn row(waiting: i64, ready: i64, inflight: i64, paused_until: Value) -> (i64, i64, i64, Value) {
    (waiting, ready, inflight, paused_until)
}

fn counts(r: &Row) -> (i64, i64, i64, Value) {
    (r.waiting, r.ready, r.inflight, r.paused_until.clone())
}

/// Waits until the replica has acknowledged the master's writes so far.
fn acked_by_replica(m: &mut redis::Connection) {
    assert!(
        wait_until(LONG, || int(&cmd(m, "WAIT 1 1000")) == 1),
        "the replica never acknowledged"
    );
}

#[test]
fn grouplimit_three_lets_three_out_and_a_freed_place_goes_to_the_earliest_due() {
    let server = Server::start();
    let mut c = server.conn();
    assert_eq!(cmd(&mut c, "DQ.CONFIG q SET GROUPLIMIT 3"), Value::Okay);
    assert_eq!(int(&conf(&mut c, "q", "group-limit")), 3);
    add_group(&mut c, "q", "a", 10, Some("a"));
    assert_eq!(
        popped_ids(&cmd(&mut c, "DQ.POP q COUNT 10")),
        ["a0", "a1", "a2"]
    );
    assert_eq!(cmd(&mut c, "DQ.POP q COUNT 10"), Value::Nil);
    let stats = cmd(&mut c, "DQ.STATS q");
    assert_eq!(
        (
            int(&field(&stats, "delayed")),
            int(&field(&stats, "ready")),
            int(&field(&stats, "inflight"))
        ),
        (7, 0, 3),
        "the 7 held back are reported delayed"
    );
    assert_eq!(state(&mut c, "q", "a3"), "delayed");
    // Added last but due first: it is the earliest-due waiting message.
    cmd(
        &mut c,
        &format!("DQ.ADD q x ID early GROUP a AT {}", now_ms() - 60_000),
    );
    assert_eq!(cmd(&mut c, "DQ.POP q COUNT 10"), Value::Nil);
    assert_eq!(int(&cmd(&mut c, "DQ.ACK q a0")), 1);
    // Ready the moment the place frees.
    assert_eq!(state(&mut c, "q", "early"), "ready");
    assert_eq!(state(&mut c, "q", "a3"), "delayed");
    assert_eq!(popped_ids(&cmd(&mut c, "DQ.POP q COUNT 10")), ["early"]);
    assert_eq!(cmd(&mut c, "DQ.POP q COUNT 10"), Value::Nil);
    assert_eq!(int(&cmd(&mut c, "DQ.ACK q a1")), 1);
    assert_eq!(popped_ids(&cmd(&mut c, "DQ.POP q COUNT 10")), ["a3"]);
    assert_eq!(int(&stat(&mut c, "q", "inflight")), 3);
    assert_eq!(int(&stat(&mut c, "q", "delayed")), 6);
}

#[test]
fn a_retry_keeps_its_place_and_dead_done_and_cancel_free_one() {
    let server = Server::start();
    let mut c = server.conn();
    cmd(&mut c, "DQ.CONFIG q SET GROUPLIMIT 2");
    add_group(&mut c, "q", "a", 5, Some("a"));
    assert_eq!(popped_ids(&cmd(&mut c, "DQ.POP q COUNT 10")), ["a0", "a1"]);
    // Delayed for a retry of its delivery: it still holds its place.
    assert_eq!(text(&cmd(&mut c, "DQ.NACK q a0 DELAY 600000")), "delayed");
    assert_eq!(cmd(&mut c, "DQ.POP q COUNT 10"), Value::Nil);
    assert_eq!(state(&mut c, "q", "a2"), "delayed");
    // Dead frees a place at once.
    assert_eq!(text(&cmd(&mut c, "DQ.NACK q a1 DEAD")), "dead");
    assert_eq!(state(&mut c, "q", "a2"), "ready");
    assert_eq!(state(&mut c, "q", "a3"), "delayed");
    assert_eq!(popped_ids(&cmd(&mut c, "DQ.POP q COUNT 10")), ["a2"]);
    // DONE frees one.
    assert_eq!(int(&cmd(&mut c, "DQ.DONE q a2 result")), 1);
    assert_eq!(state(&mut c, "q", "a3"), "ready");
    assert_eq!(state(&mut c, "q", "a4"), "delayed");
    // Cancelling the message delayed for its retry frees one.
    assert_eq!(int(&cmd(&mut c, "DQ.CANCEL q a0")), 1);
    assert_eq!(state(&mut c, "q", "a4"), "ready");
    assert_eq!(popped_ids(&cmd(&mut c, "DQ.POP q COUNT 10")), ["a3", "a4"]);
}

#[test]
fn a_group_at_its_limit_does_not_hold_up_other_groups_or_ungrouped_messages() {
    let server = Server::start();
    let mut c = server.conn();
    cmd(&mut c, "DQ.CONFIG q SET GROUPLIMIT 2");
    add_group(&mut c, "q", "a", 5, Some("a"));
    add_group(&mut c, "q", "b", 3, Some("b"));
    add_group(&mut c, "q", "f", 2, None);
    assert_eq!(
        sorted(popped_ids(&cmd(&mut c, "DQ.POP q COUNT 10"))),
        ["a0", "a1", "b0", "b1", "f0", "f1"]
    );
    assert_eq!(cmd(&mut c, "DQ.POP q COUNT 10"), Value::Nil);
    // Group a is at its limit with 3 waiting; newcomers elsewhere still go.
    cmd(&mut c, "DQ.ADD q x ID late-free");
    cmd(&mut c, "DQ.ADD q x ID c0 GROUP c");
    cmd(&mut c, "DQ.ADD q x ID a-late GROUP a");
    assert_eq!(
        sorted(popped_ids(&cmd(&mut c, "DQ.POP q COUNT 10"))),
        ["c0", "late-free"]
    );
    assert_eq!(int(&cmd(&mut c, "DQ.ACK q b0")), 1);
    assert_eq!(popped_ids(&cmd(&mut c, "DQ.POP q COUNT 10")), ["b2"]);
}

#[test]
fn the_default_limit_is_one_and_changing_it_applies_to_waiting_messages() {
    let server = Server::start();
    let mut c = server.conn();
    add_group(&mut c, "q", "a", 4, Some("a"));
    assert_eq!(int(&conf(&mut c, "q", "group-limit")), 1);
    assert_eq!(popped_ids(&cmd(&mut c, "DQ.POP q COUNT 10")), ["a0"]);
    assert_eq!(cmd(&mut c, "DQ.POP q COUNT 10"), Value::Nil);
    // Raising the limit lets two more out.
    cmd(&mut c, "DQ.CONFIG q SET GROUPLIMIT 3");
    assert_eq!(popped_ids(&cmd(&mut c, "DQ.POP q COUNT 10")), ["a1", "a2"]);
    // DEFAULT is 1 again: three out, so nothing more until two of them end.
    cmd(&mut c, "DQ.CONFIG q SET GROUPLIMIT DEFAULT");
    assert_eq!(int(&conf(&mut c, "q", "group-limit")), 1);
    assert_eq!(int(&cmd(&mut c, "DQ.ACK q a0")), 1);
    assert_eq!(cmd(&mut c, "DQ.POP q COUNT 10"), Value::Nil);
    assert_eq!(int(&cmd(&mut c, "DQ.ACK q a1")), 1);
    assert_eq!(cmd(&mut c, "DQ.POP q COUNT 10"), Value::Nil);
    assert_eq!(state(&mut c, "q", "a3"), "delayed");
    assert_eq!(int(&cmd(&mut c, "DQ.ACK q a2")), 1);
    assert_eq!(popped_ids(&cmd(&mut c, "DQ.POP q COUNT 10")), ["a3"]);
}

#[test]
fn a_paused_group_is_held_while_others_flow_and_resume_serves_a_blocked_pop() {
    let server = Server::start();
    let mut c = server.conn();
    cmd(&mut c, "DQ.ADD q x ID g0 GROUP g");
    cmd(&mut c, "DQ.ADD q x ID g1 GROUP g");
    cmd(&mut c, "DQ.ADD q x ID o0 GROUP o");
    cmd(&mut c, "DQ.ADD q x ID f0");
    assert_eq!(cmd(&mut c, "DQ.PAUSE q GROUP g"), Value::Okay);
    assert_eq!(
        sorted(popped_ids(&cmd(&mut c, "DQ.POP q COUNT 10"))),
        ["f0", "o0"]
    );
    assert_eq!(cmd(&mut c, "DQ.POP q COUNT 10"), Value::Nil);
    let g = by_group(groups_all(&mut c, "q", ""));
    assert_eq!(counts(&g["g"]), row(2, 0, 0, Value::Int(-1)), "{g:?}");
    assert_eq!(counts(&g["o"]), row(0, 0, 1, Value::Nil), "{g:?}");
    // The queue is not paused.
    assert_eq!(int(&stat(&mut c, "q", "paused")), 0);
    let waiter = server.in_background("DQ.POP q COUNT 10 BLOCK 60000");
    wait_blocked(&mut c, 1);
    assert_eq!(int(&cmd(&mut c, "DQ.RESUME q GROUP g")), 1);
    assert_eq!(popped_ids(&waiter.join().unwrap()), ["g0"]);
    assert_eq!(int(&cmd(&mut c, "DQ.RESUME q GROUP g")), 0);
    assert_eq!(int(&cmd(&mut c, "DQ.RESUME q GROUP nobody")), 0);
    assert_eq!(int(&cmd(&mut c, "DQ.ACK q g0")), 1);
    assert_eq!(popped_ids(&cmd(&mut c, "DQ.POP q")), ["g1"]);
    let g = by_group(groups_all(&mut c, "q", ""));
    assert_eq!(counts(&g["g"]), row(0, 0, 1, Value::Nil), "{g:?}");
}

#[test]
fn a_group_pause_for_a_time_ends_by_itself() {
    let server = Server::start();
    let mut c = server.conn();
    // The POP during the pause must come before it ends: when it came
    // later it proves nothing, and a fresh queue tries a longer pause.
    let (q, until) = in_time(300, |ms| {
        let q = format!("q{ms}");
        cmd(&mut c, &format!("DQ.ADD {q} x ID g0 GROUP g"));
        cmd(&mut c, &format!("DQ.ADD {q} x ID h0 GROUP h"));
        let before = now_ms();
        assert_eq!(
            cmd(&mut c, &format!("DQ.PAUSE {q} FOR {ms} GROUP g")),
            Value::Okay
        );
        assert_eq!(
            cmd(&mut c, &format!("DQ.PAUSE {q} FOR {ms} GROUP h")),
            Value::Okay
        );
        let during = cmd(&mut c, &format!("DQ.POP {q} COUNT 10"));
        let g = by_group(groups_all(&mut c, &q, ""));
        let after = now_ms();
        if after >= before + ms {
            return None;
        }
        assert_eq!(during, Value::Nil);
        let until = int(&g["g"].paused_until) as u64;
        assert!(
            (before + ms..=after + ms).contains(&until),
            "paused-until {until}, paused at {before}..{after} for {ms}"
        );
        assert_eq!((g["g"].waiting, g["g"].ready), (1, 0));
        Some((q, until))
    });
    // Nobody else talks to the server: the pause's end serves the waiter.
    let waiter = server.in_background(&format!("DQ.POP {q} BLOCK 60000"));
    let got = popped_ids(&waiter.join().unwrap());
    assert!(now_ms() >= until, "served before the pause ended");
    assert_eq!(got.len(), 1);
    // The other group's pause ended too.
    let mut seen = got;
    assert!(wait_until(LONG, || {
        seen.extend(popped_ids(&cmd(&mut c, &format!("DQ.POP {q} COUNT 10"))));
        seen.len() == 2
    }));
    assert_eq!(sorted(seen), ["g0", "h0"]);
    let g = by_group(groups_all(&mut c, &q, ""));
    assert_eq!(g["g"].paused_until, Value::Nil);
    assert_eq!(int(&cmd(&mut c, &format!("DQ.RESUME {q} GROUP g"))), 0);
}

#[test]
fn grouprate_limits_each_groups_deliveries_in_its_window() {
    let server = Server::start();
    let mut c = server.conn();
    cmd(&mut c, "DQ.CONFIG shown SET GROUPRATE 2/1s");
    assert_eq!(text(&conf(&mut c, "shown", "group-rate")), "2/1s");
    cmd(&mut c, "DQ.CONFIG shown SET GROUPRATE 10/500ms");
    assert_eq!(text(&conf(&mut c, "shown", "group-rate")), "10/500ms");
    cmd(&mut c, "DQ.CONFIG shown SET GROUPRATE 0");
    assert_eq!(conf(&mut c, "shown", "group-rate"), Value::Nil);
    cmd(&mut c, "DQ.CONFIG shown SET GROUPRATE 2/1s");
    cmd(&mut c, "DQ.CONFIG shown SET GROUPRATE DEFAULT");
    assert_eq!(conf(&mut c, "shown", "group-rate"), Value::Nil);

    // The second POP must come within the window; else a fresh queue
    // tries a longer one.
    let (q, window_end, mut got) = in_time(1000, |ms| {
        let q = format!("q{ms}");
        // GROUPLIMIT well above the rate: only the rate holds them back.
        cmd(
            &mut c,
            &format!("DQ.CONFIG {q} SET GROUPLIMIT 100 GROUPRATE 2/{ms}ms"),
        );
        add_group(&mut c, &q, "a", 5, Some("a"));
        add_group(&mut c, &q, "b", 3, Some("b"));
        let first = now_ms();
        let got = popped_ids(&cmd(&mut c, &format!("DQ.POP {q} COUNT 10")));
        let again = cmd(&mut c, &format!("DQ.POP {q} COUNT 10"));
        let stats = cmd(&mut c, &format!("DQ.STATS {q}"));
        if now_ms() >= first + ms {
            return None;
        }
        assert_eq!(got, ["a0", "a1", "b0", "b1"]);
        assert_eq!(again, Value::Nil, "a second POP in the window");
        assert_eq!(
            (
                int(&field(&stats, "delayed")),
                int(&field(&stats, "ready")),
                int(&field(&stats, "inflight"))
            ),
            (4, 0, 4),
            "the held back ones are reported delayed"
        );
        Some((q, first + ms, got))
    });
    // A blocked POP is served when the window moves on (nobody else
    // talks to the server meanwhile), and never before.
    let waiter = server.in_background(&format!("DQ.POP {q} COUNT 10 BLOCK 60000"));
    let more = popped_ids(&waiter.join().unwrap());
    assert!(
        now_ms() >= window_end,
        "{more:?} came before the window ended"
    );
    assert!(!more.is_empty(), "the blocked POP was never served");
    got.extend(more);
    // The rest come too, and never before the window moved on.
    assert!(
        wait_until(LONG, || {
            let more = popped_ids(&cmd(&mut c, &format!("DQ.POP {q} COUNT 10")));
            if !more.is_empty() {
                assert!(
                    now_ms() >= window_end,
                    "{more:?} came before the window ended"
                );
            }
            got.extend(more);
            got.len() == 8
        }),
        "{got:?}"
    );
    let a: Vec<&String> = got.iter().filter(|id| id.starts_with('a')).collect();
    assert_eq!(a, ["a0", "a1", "a2", "a3", "a4"], "a's in ADD order");
}

#[test]
fn fair_order_takes_from_the_groups_in_turn() {
    let server = Server::start();
    let mut c = server.conn();
    assert_eq!(
        cmd(&mut c, "DQ.CONFIG q SET ORDER fair GROUPLIMIT 100"),
        Value::Okay
    );
    assert_eq!(text(&conf(&mut c, "q", "order")), "fair");
    // The worst case for priority order: all of a first.
    add_group(&mut c, "q", "a", 50, Some("a"));
    add_group(&mut c, "q", "b", 5, Some("b"));
    add_group(&mut c, "q", "f", 5, None);
    let total: HashMap<char, usize> = [('a', 50), ('b', 5), ('f', 5)].into();
    let mut delivered: HashMap<char, usize> = total.keys().map(|k| (*k, 0)).collect();
    let mut order = Vec::new();
    // PEEK READY lists them in the order the POPs below take them.
    let peeked: Vec<String> = match cmd(&mut c, "DQ.PEEK q READY COUNT 15") {
        Value::Array(entries) => entries
            .iter()
            .map(|e| match e {
                Value::Array(fields) => text(&fields[0]),
                other => panic!("not a PEEK entry: {other:?}"),
            })
            .collect(),
        other => panic!("not a PEEK reply: {other:?}"),
    };
    for n in 1..=15 {
        let got = popped_ids(&cmd(&mut c, "DQ.POP q"));
        assert_eq!(got.len(), 1, "POP {n} gave {got:?}");
        let group = got[0].chars().next().unwrap();
        *delivered.get_mut(&group).unwrap() += 1;
        order.push(got[0].clone());
        for (x, &dx) in &delivered {
            for (y, &dy) in &delivered {
                // y still has messages: x may be at most one ahead of it.
                if dy < total[y] {
                    assert!(
                        dx <= dy + 1,
                        "after {n} POPs {x} has {dx} deliveries and {y} {dy}: {order:?}"
                    );
                }
            }
        }
    }
    assert_eq!(
        delivered,
        [('a', 5), ('b', 5), ('f', 5)].into(),
        "{order:?}"
    );
    assert_eq!(peeked, order, "PEEK foretold the turn");
    // Within each group: ADD order.
    for prefix in ["a", "b", "f"] {
        let of: Vec<&String> = order.iter().filter(|id| id.starts_with(prefix)).collect();
        let expected: Vec<String> = (0..5).map(|i| format!("{prefix}{i}")).collect();
        assert_eq!(of, expected.iter().collect::<Vec<_>>());
    }
    // The rest: all of a, in ADD order.
    let rest = popped_ids(&cmd(&mut c, "DQ.POP q COUNT 100"));
    let expected: Vec<String> = (5..50).map(|i| format!("a{i}")).collect();
    assert_eq!(rest, expected);
}

#[test]
fn priority_order_is_todays_order_exactly() {
    let server = Server::start();
    let mut c = server.conn();
    assert_eq!(cmd(&mut c, "DQ.CONFIG fresh SET LEASE 5000"), Value::Okay);
    assert_eq!(text(&conf(&mut c, "fresh", "order")), "priority");
    cmd(&mut c, "DQ.CONFIG q SET ORDER PRIORITY GROUPLIMIT 100");
    assert_eq!(text(&conf(&mut c, "q", "order")), "priority");
    cmd(&mut c, "DQ.CONFIG back SET ORDER FAIR GROUPLIMIT 100");
    cmd(&mut c, "DQ.CONFIG back SET ORDER DEFAULT");
    assert_eq!(text(&conf(&mut c, "back", "order")), "priority");
    // Priorities, due times (all past, some equal) and groups mixed;
    // `today` has the same messages without groups or settings.
    let base = now_ms() - 1_000_000;
    let mut expected = Vec::new();
    for i in 0..30u64 {
        let priority = [0i64, 5, -2, 5, 0][(i % 5) as usize];
        let due = base + 1000 * ((i * 7) % 11);
        let group = ["a", "b", "c", "-"][(i % 4) as usize];
        let id = format!("m{i:02}");
        for q in ["q", "back", "today"] {
            let mut line = format!("DQ.ADD {q} x ID {id} AT {due} PRIORITY {priority}");
            if q != "today" && group != "-" {
                line.push_str(&format!(" GROUP {group}"));
            }
            cmd(&mut c, &line);
        }
        expected.push((-priority, due, i, id));
    }
    expected.sort();
    let expected: Vec<String> = expected.into_iter().map(|e| e.3).collect();
    for q in ["today", "q", "back"] {
        let mut got = Vec::new();
        for _ in 0..30 {
            got.extend(popped_ids(&cmd(&mut c, &format!("DQ.POP {q}"))));
        }
        assert_eq!(got, expected, "{q}");
    }
}

#[test]
fn groups_iterates_every_group_once_with_match_counts_and_pauses() {
    let server = Server::start();
    let mut c = server.conn();
    cmd(&mut c, "DQ.CONFIG q SET GROUPLIMIT 2");
    add_group(&mut c, "q", "busy", 5, Some("busy"));
    cmd(&mut c, "DQ.ADD q x ID one GROUP single");
    cmd(&mut c, "DQ.ADD q x ID loose");
    assert_eq!(
        popped_ids(&cmd(&mut c, "DQ.POP q COUNT 10")),
        ["busy0", "busy1", "one", "loose"]
    );
    add_group(&mut c, "q", "rdy", 2, Some("rdy"));
    cmd(&mut c, "DQ.PAUSE q GROUP forever");
    let before = now_ms();
    cmd(&mut c, "DQ.PAUSE q FOR 3600000 GROUP timed");
    let after = now_ms();
    cmd(&mut c, "DQ.ADD q x ID t0 GROUP timed");
    // 1000 groups of one ready message each.
    let mut pipe = redis::pipe();
    for i in 0..1000 {
        pipe.cmd("DQ.ADD")
            .arg("q")
            .arg("x")
            .arg("ID")
            .arg(format!("m{i}"))
            .arg("GROUP")
            .arg(format!("g{i:04}"))
            .ignore();
    }
    pipe.query::<()>(&mut c).unwrap();
    assert_eq!(int(&stat(&mut c, "q", "groups")), 1005);

    let rows = groups_all(&mut c, "q", "COUNT 7");
    assert_eq!(rows.len(), 1005);
    let all = by_group(rows);
    for i in 0..1000 {
        let name = format!("g{i:04}");
        assert_eq!(counts(&all[&name]), row(0, 1, 0, Value::Nil), "{name}");
    }
    assert_eq!(counts(&all["busy"]), row(3, 0, 2, Value::Nil));
    assert_eq!(counts(&all["single"]), row(0, 0, 1, Value::Nil));
    assert_eq!(counts(&all["rdy"]), row(0, 2, 0, Value::Nil));
    assert_eq!(counts(&all["forever"]), row(0, 0, 0, Value::Int(-1)));
    let timed = &all["timed"];
    assert_eq!((timed.waiting, timed.ready, timed.inflight), (1, 0, 0));
    let until = int(&timed.paused_until) as u64;
    assert!(
        (before + 3_600_000..=after + 3_600_000).contains(&until),
        "paused-until {until}"
    );

    // The default COUNT, and groups added and removed mid-iteration: every
    // group present throughout comes exactly once.
    let rows = groups_all_with(&mut c, "q", "", |c, call| {
        if call == 3 {
            cmd(c, "DQ.ADD q x ID new GROUP zz-new");
            cmd(c, "DQ.ACK q one"); // group single goes
        }
    });
    let all = by_group(rows);
    for i in 0..1000 {
        assert!(all.contains_key(&format!("g{i:04}")), "g{i:04} missing");
    }
    for name in ["busy", "rdy", "forever", "timed"] {
        assert!(all.contains_key(name), "{name} missing");
    }
    assert_eq!(int(&stat(&mut c, "q", "groups")), 1005, "+zz-new -single");

    // MATCH.
    let matched: Vec<String> = groups_all(&mut c, "q", "MATCH g00[0-4]? COUNT 7")
        .into_iter()
        .map(|r| r.group)
        .collect();
    let expected: Vec<String> = (0..50).map(|i| format!("g{i:04}")).collect();
    assert_eq!(sorted(matched), expected);
    let matched = groups_all(&mut c, "q", "MATCH *e* COUNT 1000");
    assert_eq!(
        sorted(matched.into_iter().map(|r| r.group).collect()),
        ["forever", "timed", "zz-new"]
    );
    assert_eq!(groups_all(&mut c, "q", "MATCH nothing*"), []);
    // A queue that does not exist.
    assert_eq!(
        cmd(&mut c, "DQ.GROUPS absent 0"),
        Value::Array(vec![Value::BulkString(b"0".to_vec()), Value::Array(vec![])])
    );
}

#[test]
fn stats_counts_the_groups_that_exist() {
    let server = Server::start();
    let mut c = server.conn();
    cmd(&mut c, "DQ.ADD q x ID f0");
    assert_eq!(int(&stat(&mut c, "q", "groups")), 0);
    assert_eq!(int(&stat(&mut c, "absent", "groups")), 0);
    cmd(&mut c, "DQ.ADD q x ID a0 GROUP a");
    cmd(&mut c, "DQ.ADD q x ID b0 GROUP b");
    cmd(&mut c, "DQ.ADD q x ID b1 GROUP b");
    assert_eq!(int(&stat(&mut c, "q", "groups")), 2);
    assert_eq!(
        sorted(popped_ids(&cmd(&mut c, "DQ.POP q COUNT 10"))),
        ["a0", "b0", "f0"]
    );
    assert_eq!(int(&stat(&mut c, "q", "groups")), 2);
    cmd(&mut c, "DQ.ACK q a0");
    assert_eq!(int(&stat(&mut c, "q", "groups")), 1, "a has nothing left");
    // A pause alone keeps a group.
    cmd(&mut c, "DQ.PAUSE q GROUP p");
    assert_eq!(int(&stat(&mut c, "q", "groups")), 2);
    assert_eq!(int(&cmd(&mut c, "DQ.RESUME q GROUP p")), 1);
    assert_eq!(int(&stat(&mut c, "q", "groups")), 1);
    // A retry's delay keeps it.
    cmd(&mut c, "DQ.ACK q b0");
    assert_eq!(popped_ids(&cmd(&mut c, "DQ.POP q")), ["b1"]);
    assert_eq!(text(&cmd(&mut c, "DQ.NACK q b1 DELAY 600000")), "delayed");
    assert_eq!(int(&stat(&mut c, "q", "groups")), 1);
    cmd(&mut c, "DQ.CANCEL q b1");
    assert_eq!(int(&stat(&mut c, "q", "groups")), 0);
}

#[test]
fn queue_rate_and_maxinflight_still_hold_on_top_of_group_limits() {
    let server = Server::start();
    let mut c = server.conn();
    // MAXINFLIGHT is lower than what the groups allow.
    cmd(&mut c, "DQ.CONFIG cap SET GROUPLIMIT 5 MAXINFLIGHT 3");
    add_group(&mut c, "cap", "a", 5, Some("a"));
    add_group(&mut c, "cap", "b", 5, Some("b"));
    assert_eq!(entries(&cmd(&mut c, "DQ.POP cap COUNT 10")).len(), 3);
    assert_eq!(cmd(&mut c, "DQ.POP cap COUNT 10"), Value::Nil);
    // RATE is lower than what the groups allow.
    cmd(
        &mut c,
        "DQ.CONFIG rate SET GROUPLIMIT 5 GROUPRATE 5/1h RATE 4/1h",
    );
    add_group(&mut c, "rate", "a", 5, Some("a"));
    add_group(&mut c, "rate", "b", 5, Some("b"));
    assert_eq!(entries(&cmd(&mut c, "DQ.POP rate COUNT 10")).len(), 4);
    assert_eq!(cmd(&mut c, "DQ.POP rate COUNT 10"), Value::Nil);
    // The groups are lower than MAXINFLIGHT: they hold.
    cmd(&mut c, "DQ.CONFIG grp SET GROUPLIMIT 2 MAXINFLIGHT 8");
    add_group(&mut c, "grp", "a", 5, Some("a"));
    add_group(&mut c, "grp", "b", 5, Some("b"));
    assert_eq!(
        popped_ids(&cmd(&mut c, "DQ.POP grp COUNT 10")),
        ["a0", "a1", "b0", "b1"]
    );
    // A queue-wide pause holds every group; RESUME lets them go.
    cmd(&mut c, "DQ.PAUSE grp");
    cmd(&mut c, "DQ.ACK grp a0");
    assert_eq!(cmd(&mut c, "DQ.POP grp COUNT 10"), Value::Nil);
    assert_eq!(int(&cmd(&mut c, "DQ.RESUME grp")), 1);
    assert_eq!(popped_ids(&cmd(&mut c, "DQ.POP grp COUNT 10")), ["a2"]);
}

#[test]
fn bad_input_gets_an_error_and_changes_nothing() {
    let server = Server::start();
    let mut c = server.conn();
    cmd(&mut c, "DQ.ADD q x ID a0 GROUP a");
    cmd(
        &mut c,
        "DQ.CONFIG q SET GROUPLIMIT 5 GROUPRATE 3/1s ORDER FAIR",
    );
    let config = cmd(&mut c, "DQ.CONFIG q");
    let before = digest(&mut c);
    for (line, expected) in [
        ("DQ.CONFIG q SET GROUPLIMIT 0", "GROUPLIMIT"),
        ("DQ.CONFIG q SET GROUPLIMIT -1", "GROUPLIMIT"),
        ("DQ.CONFIG q SET GROUPLIMIT abc", "GROUPLIMIT"),
        ("DQ.CONFIG q SET GROUPLIMIT 2.5", "GROUPLIMIT"),
        ("DQ.CONFIG q SET GROUPLIMIT 1000001", "GROUPLIMIT"),
        ("DQ.CONFIG q SET GROUPRATE abc", "GROUPRATE"),
        ("DQ.CONFIG q SET GROUPRATE 5", "GROUPRATE"),
        ("DQ.CONFIG q SET GROUPRATE 5/0s", "GROUPRATE"),
        ("DQ.CONFIG q SET GROUPRATE -1/1s", "GROUPRATE"),
        ("DQ.CONFIG q SET ORDER RANDOM", "ORDER"),
        ("DQ.CONFIG q SET ORDER fifo", "ORDER"),
        // One bad pair refuses the whole SET.
        ("DQ.CONFIG q SET GROUPLIMIT 7 ORDER nope", "ORDER"),
        ("DQ.CONFIG q SET ORDER PRIORITY GROUPLIMIT 0", "GROUPLIMIT"),
        ("DQ.CONFIG q SET GROUPRATE 9/1h GROUPLIMIT x", "GROUPLIMIT"),
        ("DQ.GROUPS q 0 COUNT 0", "COUNT"),
        ("DQ.GROUPS q 0 COUNT -3", "COUNT"),
        ("DQ.GROUPS q 0 COUNT many", "COUNT"),
        ("DQ.GROUPS q xyz", "cursor"),
    ] {
        let err = cmd_err(&mut c, line);
        assert!(err.contains(expected), "{line}: {err}");
    }
    // DQ.PAUSE ... GROUP without a name, or with an empty one.
    let err = cmd_err(&mut c, "DQ.PAUSE q GROUP");
    assert!(err.starts_with("ERR"), "{err}");
    let empty = run(&mut c, &[b"DQ.PAUSE", b"q", b"GROUP", b""]);
    assert!(empty.is_err(), "DQ.PAUSE q GROUP '': {empty:?}");
    let empty = run(&mut c, &[b"DQ.PAUSE", b"q", b"FOR", b"1000", b"GROUP", b""]);
    assert!(empty.is_err(), "DQ.PAUSE q FOR 1000 GROUP '': {empty:?}");
    // Nothing changed.
    assert_eq!(cmd(&mut c, "DQ.CONFIG q"), config);
    assert_eq!(int(&conf(&mut c, "q", "group-limit")), 5);
    assert_eq!(text(&conf(&mut c, "q", "group-rate")), "3/1s");
    assert_eq!(text(&conf(&mut c, "q", "order")), "fair");
    assert_eq!(int(&stat(&mut c, "q", "paused")), 0);
    assert_eq!(groups_all(&mut c, "q", "").len(), 1, "no group paused");
    assert_eq!(digest(&mut c), before);
    // The limits of the range are accepted.
    cmd(&mut c, "DQ.CONFIG r SET GROUPLIMIT 1000000");
    assert_eq!(int(&conf(&mut c, "r", "group-limit")), 1_000_000);
    cmd(&mut c, "DQ.CONFIG r SET GROUPLIMIT 1");
    assert_eq!(int(&conf(&mut c, "r", "group-limit")), 1);
}

#[test]
fn debug_reload_keeps_group_settings_windows_and_pauses() {
    let server = Server::start();
    let mut c = server.conn();
    cmd(
        &mut c,
        "DQ.CONFIG q SET GROUPLIMIT 4 GROUPRATE 3/1h ORDER FAIR",
    );
    add_group(&mut c, "q", "a", 5, Some("a"));
    cmd(&mut c, "DQ.ADD q x ID h0 GROUP held");
    cmd(&mut c, "DQ.ADD q x ID t0 GROUP timed");
    cmd(&mut c, "DQ.ADD q x ID f0");
    cmd(&mut c, "DQ.PAUSE q GROUP held");
    cmd(&mut c, "DQ.PAUSE q FOR 3600000 GROUP timed");
    assert_eq!(
        sorted(popped_ids(&cmd(&mut c, "DQ.POP q COUNT 10"))),
        ["a0", "a1", "a2", "f0"]
    );
    assert_eq!(cmd(&mut c, "DQ.POP q COUNT 10"), Value::Nil);
    cmd(&mut c, "DQ.ACK q a0 a1 a2");
    let config = cmd(&mut c, "DQ.CONFIG q");
    let groups = by_group(groups_all(&mut c, "q", "COUNT 2"));
    let stats = stats_without_age(&mut c, "q");
    let before = digest(&mut c);
    assert_eq!(counts(&groups["held"]), row(1, 0, 0, Value::Int(-1)));
    assert!(matches!(groups["timed"].paused_until, Value::Int(t) if t > 0));

    cmd(&mut c, "DEBUG RELOAD");
    assert_eq!(digest(&mut c), before);
    assert_eq!(cmd(&mut c, "DQ.CONFIG q"), config);
    assert_eq!(int(&conf(&mut c, "q", "group-limit")), 4);
    assert_eq!(text(&conf(&mut c, "q", "group-rate")), "3/1h");
    assert_eq!(text(&conf(&mut c, "q", "order")), "fair");
    assert_eq!(by_group(groups_all(&mut c, "q", "COUNT 2")), groups);
    assert_eq!(stats_without_age(&mut c, "q"), stats);
    // a's window still holds its 3 deliveries; both pauses still hold.
    assert_eq!(cmd(&mut c, "DQ.POP q COUNT 10"), Value::Nil);
    assert_eq!(int(&cmd(&mut c, "DQ.RESUME q GROUP held")), 1);
    assert_eq!(popped_ids(&cmd(&mut c, "DQ.POP q COUNT 10")), ["h0"]);
    assert_eq!(int(&cmd(&mut c, "DQ.RESUME q GROUP timed")), 1);
    assert_eq!(popped_ids(&cmd(&mut c, "DQ.POP q COUNT 10")), ["t0"]);
}

#[test]
fn a_replica_has_the_same_groups_and_keeps_a_group_pause_after_a_reload() {
    let master = Server::start_with(&["--repl-diskless-sync-delay", "0"]);
    let replica = Server::start_replica_of(&master);
    let mut m = master.conn();
    let mut r = replica.conn();
    cmd(
        &mut m,
        "DQ.CONFIG q SET GROUPLIMIT 2 GROUPRATE 5/1h ORDER FAIR",
    );
    for g in 0..30 {
        add_group(&mut m, "q", &format!("g{g}-"), 3, Some(&format!("g{g}")));
    }
    add_group(&mut m, "q", "f", 3, None);
    cmd(&mut m, "DQ.ADD q x ID held0 GROUP held");
    cmd(&mut m, "DQ.ADD q x ID held1 GROUP held");
    cmd(&mut m, "DQ.PAUSE q GROUP held");
    cmd(&mut m, "DQ.PAUSE q FOR 3600000 GROUP timed");
    let popped = popped_ids(&cmd(&mut m, "DQ.POP q COUNT 25"));
    assert_eq!(popped.len(), 25);
    assert!(
        !popped.iter().any(|id| id.starts_with("held")),
        "{popped:?}"
    );
    for id in popped.iter().step_by(3) {
        cmd(&mut m, &format!("DQ.ACK q {id}"));
    }
    cmd(&mut m, "DQ.PAUSE q GROUP g7");
    cmd(&mut m, "DQ.RESUME q GROUP g7");
    acked_by_replica(&mut m);
    assert!(
        wait_until(LONG, || digest(&mut m) == digest(&mut r)),
        "the replica's digest differs from the master's"
    );
    let groups = by_group(groups_all(&mut m, "q", "COUNT 7"));
    assert_eq!(by_group(groups_all(&mut r, "q", "COUNT 7")), groups);
    assert_eq!(counts(&groups["held"]), row(2, 0, 0, Value::Int(-1)));
    assert_eq!(
        int(&stat(&mut r, "q", "groups")),
        int(&stat(&mut m, "q", "groups"))
    );
    let config = cmd(&mut m, "DQ.CONFIG q");

    // A reload of the replica's copy keeps it all.
    cmd(&mut r, "DEBUG RELOAD");
    assert_eq!(digest(&mut r), digest(&mut m));
    assert_eq!(by_group(groups_all(&mut r, "q", "COUNT 7")), groups);
    // Promoted, it shows the same settings and the pause still holds.
    drop(m);
    drop(master);
    cmd(&mut r, "REPLICAOF NO ONE");
    assert_eq!(cmd(&mut r, "DQ.CONFIG q"), config);
    let rest = popped_ids(&cmd(&mut r, "DQ.POP q COUNT 100"));
    assert!(!rest.is_empty(), "the other groups deliver");
    assert!(!rest.iter().any(|id| id.starts_with("held")), "{rest:?}");
    assert_eq!(cmd(&mut r, "DQ.POP q COUNT 100"), Value::Nil);
    assert_eq!(int(&cmd(&mut r, "DQ.RESUME q GROUP held")), 1);
    // GROUPLIMIT 2: both of held go.
    assert_eq!(
        popped_ids(&cmd(&mut r, "DQ.POP q COUNT 100")),
        ["held0", "held1"]
    );
}
