//! The bad-input matrix: for every command, wrong arity, unknown, repeated
//! and conflicting options, malformed, negative, zero and overflowing
//! numbers, empty and oversized ids, bad states and bad backoff specs. Each
//! case must get an error that names the argument (the reply starts with
//! the expected text) and must leave the dataset as it was (`DEBUG DIGEST`
//! before and after). Every case targets real messages, so a parser that let
//! a bad argument through would change something.
//!
//! All mismatches are collected and reported together, so one run shows the
//! whole picture.

use dq_testkit::*;

/// One command line and the text its error reply must start with.
struct Case {
    args: Vec<Vec<u8>>,
    expected: String,
}

/// A case written as one line split on spaces.
fn line(l: &str, expected: impl Into<String>) -> Case {
    Case {
        args: l.split(' ').map(|a| a.as_bytes().to_vec()).collect(),
        expected: expected.into(),
    }
}

/// A case with arguments that hold spaces, nothing at all, or any byte.
fn raw(args: &[&[u8]], expected: impl Into<String>) -> Case {
    Case {
        args: args.iter().map(|a| a.to_vec()).collect(),
        expected: expected.into(),
    }
}

/// `template` with its `{}` argument replaced by `value`.
fn with_value(template: &str, value: &[u8], expected: &str) -> Case {
    Case {
        args: template
            .split(' ')
            .map(|a| {
                if a == "{}" {
                    value.to_vec()
                } else {
                    a.as_bytes().to_vec()
                }
            })
            .collect(),
        expected: expected.to_string(),
    }
}

/// `l`, whose last word is an option left without its value.
fn needs_value(l: &str) -> Case {
    let option = l.rsplit(' ').next().unwrap_or_default();
    line(l, format!("ERR {option} needs a value"))
}

/// `l`, which gives `option` more than once.
fn twice(l: &str, option: &str) -> Case {
    line(l, format!("ERR {option} is given more than once"))
}

/// `l`, in which `word` stands where an option belongs and is none.
fn unknown(l: &str, word: &str) -> Case {
    line(l, format!("ERR unknown option '{word}'"))
}

fn arity(command: &str) -> String {
    format!("ERR wrong number of arguments for '{command}' command")
}

const MS: &str = "must be a duration: whole milliseconds such as 1500, or a whole number with a unit ms, s, m, h or d such as 30s, 5m or 7d";
const POSITIVE_MS: &str = "must be a positive duration: whole milliseconds such as 1500, or a whole number with a unit ms, s, m, h or d such as 30s, 5m or 7d";
const COUNT: &str = "ERR COUNT must be an integer from 1 to 10000";
const LEASE: &str = "ERR LEASE must be a positive duration: whole milliseconds such as 1500, or a whole number with a unit ms, s, m, h or d such as 30s, 5m or 7d";
const MAXATTEMPTS: &str = "ERR MAXATTEMPTS must be an integer from 1 to 2147483647";
const PRIORITY: &str = "ERR PRIORITY must be an integer from -2147483648 to 2147483647";
const STATE: &str = "ERR state must be one of DELAYED, READY, INFLIGHT, DEAD, DONE";
const TOO_LATE: &str = "would be later than the latest time dq can store (2^53-1 ms)";
const EMPTY_ID: &str = "ERR id must not be empty";
const LONG_ID: &str = "ERR id is longer than 1024 bytes";

/// Queue `q` with messages in every state — dead, in flight, ready,
/// delayed, holding and waiting for a group, with a TTL — and settings of
/// its own. Nothing in it falls due or expires for an hour, so its digest
/// only changes when a command changes it.
fn populated(server: &Server) -> redis::Connection {
    let mut c = server.conn();
    cmd(&mut c, "DQ.CONFIG q SET MAXATTEMPTS 3 BACKOFF 1s,2s");
    cmd(&mut c, "DQ.ADD q x ID dead PRIORITY 9 MAXATTEMPTS 1");
    assert_eq!(entries(&cmd(&mut c, "DQ.POP q"))[0].0, "dead");
    assert_eq!(text(&cmd(&mut c, "DQ.NACK q dead")), "dead");
    cmd(&mut c, "DQ.ADD q x ID inflight PRIORITY 9");
    assert_eq!(
        entries(&cmd(&mut c, "DQ.POP q LEASE 3600000"))[0].0,
        "inflight"
    );
    cmd(&mut c, "DQ.ADD q x ID ready");
    cmd(&mut c, "DQ.ADD q x ID delayed DELAY 3600000");
    cmd(&mut c, "DQ.ADD q x ID mortal TTL 3600000");
    cmd(&mut c, "DQ.ADD q x ID first GROUP g");
    cmd(&mut c, "DQ.ADD q x ID second GROUP g");
    let stats = cmd(&mut c, "DQ.STATS q");
    let counts = ["delayed", "ready", "inflight", "dead"].map(|f| int(&field(&stats, f)));
    // `second` waits for its group, reported as delayed.
    assert_eq!(counts, [2, 3, 1, 1], "the fixture holds every state");
    c
}

/// Numbers that no numeric argument takes.
const NOT_NUMBERS: [&str; 14] = [
    "abc",
    "1.5",
    "",
    " 1",
    "1 ",
    "+1",
    "0x10",
    "1e3",
    "١",
    "9223372036854775808",
    "99999999999999999999",
    "18446744073709551616",
    "-9223372036854775809",
    "-99999999999999999999",
];

const TWO_POW_53: &str = "9007199254740992";

/// Every numeric argument of every command with every kind of bad number.
fn numeric_cases() -> Vec<Case> {
    // (template, error, zero allowed, negatives allowed, just out of range)
    let slots: [(&str, String, bool, bool, &[&str]); 14] = [
        (
            "DQ.ADD q x ID ready DELAY {}",
            format!("ERR DELAY {MS}"),
            true,
            false,
            &[TWO_POW_53],
        ),
        (
            "DQ.ADD q x ID ready AT {}",
            "ERR AT must be a non-negative integer Unix time in milliseconds".into(),
            true,
            false,
            &[TWO_POW_53],
        ),
        (
            "DQ.ADD q x ID ready PRIORITY {}",
            PRIORITY.into(),
            true,
            true,
            &["2147483648", "-2147483649"],
        ),
        (
            "DQ.ADD q x ID ready MAXATTEMPTS {}",
            MAXATTEMPTS.into(),
            false,
            false,
            &["2147483648"],
        ),
        (
            "DQ.ADD q x ID ready TTL {}",
            format!("ERR TTL {POSITIVE_MS}"),
            false,
            false,
            &[TWO_POW_53],
        ),
        ("DQ.POP q COUNT {}", COUNT.into(), false, false, &["10001"]),
        (
            "DQ.POP q BLOCK {}",
            format!("ERR BLOCK {MS}"),
            true,
            false,
            &[TWO_POW_53],
        ),
        (
            "DQ.POP q LEASE {}",
            LEASE.into(),
            false,
            false,
            &[TWO_POW_53],
        ),
        (
            "DQ.NACK q inflight DELAY {}",
            format!("ERR DELAY {MS}"),
            true,
            false,
            &[TWO_POW_53],
        ),
        (
            "DQ.TOUCH q inflight LEASE {}",
            LEASE.into(),
            false,
            false,
            &[TWO_POW_53],
        ),
        (
            "DQ.PEEK q READY COUNT {}",
            COUNT.into(),
            false,
            false,
            &["10001"],
        ),
        (
            "DQ.REDRIVE q COUNT {}",
            COUNT.into(),
            false,
            false,
            &["10001"],
        ),
        (
            "DQ.CONFIG q SET LEASE {}",
            LEASE.into(),
            false,
            false,
            &[TWO_POW_53],
        ),
        (
            "DQ.CONFIG q SET MAXATTEMPTS {}",
            MAXATTEMPTS.into(),
            false,
            false,
            &["2147483648"],
        ),
    ];
    let mut cases = Vec::new();
    for (template, error, zero_ok, negative_ok, beyond) in &slots {
        let mut values: Vec<&str> = NOT_NUMBERS.to_vec();
        values.extend_from_slice(beyond);
        if !zero_ok {
            values.push("0");
        }
        if !negative_ok {
            values.extend(["-1", "-9223372036854775808"]);
        }
        for value in values {
            cases.push(with_value(template, value.as_bytes(), error));
        }
    }
    cases
}

fn add_cases() -> Vec<Case> {
    let mut cases = vec![
        line("DQ.ADD", arity("dq.add")),
        line("DQ.ADD q", arity("dq.add")),
        line(
            "DQ.ADD q x DELAY 1 AT 2",
            "ERR DELAY and AT cannot be used together",
        ),
        line(
            "DQ.ADD q x AT 2 DELAY 1",
            "ERR DELAY and AT cannot be used together",
        ),
        line(
            "DQ.ADD q x NX XX ID ready",
            "ERR NX and XX cannot be used together",
        ),
        line(
            "DQ.ADD q x XX NX ID ready",
            "ERR NX and XX cannot be used together",
        ),
        line("DQ.ADD q x XX", "ERR XX needs ID"),
        line("DQ.ADD q x XX PRIORITY 1", "ERR XX needs ID"),
        unknown("DQ.ADD q x WHENEVER", "WHENEVER"),
        unknown("DQ.ADD q x ID ready 5", "5"),
        unknown("DQ.ADD q x ID ready DELAY=5", "DELAY=5"),
        unknown("DQ.ADD q x ID ready -DELAY 5", "-DELAY"),
        // An option name where a value belongs is the value, and a bad one.
        line("DQ.ADD q x DELAY ID ready", format!("ERR DELAY {MS}")),
        // Keywords are case-insensitive; errors use the canonical name.
        line("DQ.ADD q x id ready delay -1", format!("ERR DELAY {MS}")),
        line(
            "DQ.ADD q x ID ready DELAY 9007199254740991",
            format!("ERR DELAY {TOO_LATE}"),
        ),
        line(
            "DQ.ADD q x ID ready TTL 9007199254740991",
            format!("ERR TTL {TOO_LATE}"),
        ),
        // The reply names an unknown option without breaking its line.
        raw(
            &[b"DQ.ADD", b"q", b"x", b"ID", b"ready", b"a\r\nb"],
            "ERR unknown option 'a\\r\\nb'",
        ),
        // However it escapes them, the reply must stay readable: a client
        // that cannot decode it loses the connection.
        raw(
            &[b"DQ.ADD", b"q", b"x", b"ID", b"ready", b"a\0b"],
            "ERR unknown option 'a\\",
        ),
        raw(
            &[
                b"DQ.ADD",
                b"q",
                b"x",
                b"ID",
                b"ready",
                "caf\u{e9}".as_bytes(),
            ],
            "ERR unknown option 'caf",
        ),
        raw(
            &[b"DQ.ADD", b"q", b"x", b"ID", b"ready", b"\xff\xfe"],
            "ERR unknown option '",
        ),
        raw(
            &[b"DQ.ADD", b"q", b"x", b"ID", b"ready", b""],
            "ERR unknown option ''",
        ),
    ];
    for option in [
        "DELAY",
        "AT",
        "ID",
        "PRIORITY",
        "MAXATTEMPTS",
        "BACKOFF",
        "GROUP",
        "TTL",
    ] {
        cases.push(needs_value(&format!("DQ.ADD q x {option}")));
        cases.push(needs_value(&format!("DQ.ADD q x NX {option}")));
    }
    for (option, value) in [
        ("DELAY", "1"),
        ("AT", "1"),
        ("ID", "ready"),
        ("PRIORITY", "1"),
        ("MAXATTEMPTS", "2"),
        ("BACKOFF", "1s"),
        ("GROUP", "g"),
        ("TTL", "1000"),
        ("NX", ""),
        ("XX", ""),
    ] {
        let once = format!("{option} {value}");
        let once = once.trim_end();
        cases.push(twice(&format!("DQ.ADD q x ID ready {once} {once}"), option));
    }
    // ID twice is also refused when both are fine on their own.
    cases.push(twice("DQ.ADD q x ID dead ID inflight", "ID"));
    cases
}

fn pop_cases() -> Vec<Case> {
    vec![
        line("DQ.POP", arity("dq.pop")),
        needs_value("DQ.POP q COUNT"),
        needs_value("DQ.POP q BLOCK"),
        needs_value("DQ.POP q LEASE"),
        needs_value("DQ.POP q COUNT 2 LEASE"),
        twice("DQ.POP q COUNT 1 COUNT 1", "COUNT"),
        twice("DQ.POP q BLOCK 1 BLOCK 1", "BLOCK"),
        twice("DQ.POP q LEASE 1 LEASE 1", "LEASE"),
        unknown("DQ.POP q FAST", "FAST"),
        unknown("DQ.POP q 1", "1"),
        unknown("DQ.POP q COUNT 1 1", "1"),
        // An error after a good BLOCK answers at once rather than blocking.
        unknown("DQ.POP q BLOCK 0 NOW", "NOW"),
    ]
}

fn ack_and_cancel_cases() -> Vec<Case> {
    vec![
        line("DQ.ACK", arity("dq.ack")),
        line("DQ.ACK q", arity("dq.ack")),
        line("DQ.CANCEL", arity("dq.cancel")),
        line("DQ.CANCEL q", arity("dq.cancel")),
    ]
}

fn nack_and_touch_cases() -> Vec<Case> {
    vec![
        line("DQ.NACK", arity("dq.nack")),
        line("DQ.NACK q", arity("dq.nack")),
        needs_value("DQ.NACK q inflight DELAY"),
        twice("DQ.NACK q inflight DELAY 1 DELAY 1", "DELAY"),
        unknown("DQ.NACK q inflight SOON", "SOON"),
        unknown("DQ.NACK q inflight LEASE 5", "LEASE"),
        unknown("DQ.NACK q inflight DELAY 1 extra", "extra"),
        // As DQ.ADD refuses a DELAY past the latest storable time.
        line(
            "DQ.NACK q inflight DELAY 9007199254740991",
            format!("ERR DELAY {TOO_LATE}"),
        ),
        line(
            "DQ.NACK q inflight DEAD DELAY 5",
            "ERR DELAY and DEAD cannot be used together",
        ),
        line(
            "DQ.NACK q inflight DELAY 5 DEAD",
            "ERR DELAY and DEAD cannot be used together",
        ),
        twice("DQ.NACK q inflight DEAD DEAD", "DEAD"),
        needs_value("DQ.NACK q inflight ATTEMPT"),
        line("DQ.NACK q inflight ATTEMPT 0", ATTEMPT),
        line("DQ.NACK q inflight ATTEMPT -1", ATTEMPT),
        line("DQ.NACK q inflight ATTEMPT 1.5", ATTEMPT),
        line("DQ.NACK q inflight ATTEMPT 4294967296", ATTEMPT),
        twice("DQ.NACK q inflight ATTEMPT 1 ATTEMPT 1", "ATTEMPT"),
        needs_value("DQ.NACK q inflight ERROR"),
        raw(
            &[b"DQ.NACK", b"q", b"inflight", b"ERROR", b""],
            "ERR ERROR must not be empty",
        ),
        raw(
            &[b"DQ.NACK", b"q", b"inflight", b"ERROR", &[b'e'; 4097]],
            "ERR ERROR is longer than 4096 bytes",
        ),
        twice("DQ.NACK q inflight ERROR a ERROR b", "ERROR"),
        line("DQ.TOUCH", arity("dq.touch")),
        line("DQ.TOUCH q", arity("dq.touch")),
        needs_value("DQ.TOUCH q inflight LEASE"),
        twice("DQ.TOUCH q inflight LEASE 1 LEASE 1", "LEASE"),
        unknown("DQ.TOUCH q inflight DELAY 5", "DELAY"),
        unknown("DQ.TOUCH q inflight FOREVER", "FOREVER"),
        needs_value("DQ.TOUCH q inflight ATTEMPT"),
        line("DQ.TOUCH q inflight ATTEMPT 0", ATTEMPT),
        twice("DQ.TOUCH q inflight ATTEMPT 1 LEASE 5 ATTEMPT 1", "ATTEMPT"),
        unknown("DQ.TOUCH q inflight DEAD", "DEAD"),
        unknown("DQ.TOUCH q inflight ERROR x", "ERROR"),
    ]
}

const ATTEMPT: &str = "ERR ATTEMPT must be an integer from 1 to 4294967295";

fn read_cases() -> Vec<Case> {
    let mut cases = vec![
        line("DQ.GET", arity("dq.get")),
        line("DQ.GET q", arity("dq.get")),
        line("DQ.GET q ready extra", arity("dq.get")),
        line("DQ.STATS", arity("dq.stats")),
        line("DQ.STATS q extra", arity("dq.stats")),
        unknown("DQ.QUEUES extra", "extra"),
        needs_value("DQ.QUEUES MATCH"),
        twice("DQ.QUEUES WITHSTATS WITHSTATS", "WITHSTATS"),
        line("DQ.PEEK", arity("dq.peek")),
        line("DQ.PEEK q", arity("dq.peek")),
        needs_value("DQ.PEEK q READY COUNT"),
        twice("DQ.PEEK q READY COUNT 1 COUNT 2", "COUNT"),
        unknown("DQ.PEEK q READY ALL", "ALL"),
        unknown("DQ.PEEK q READY 5", "5"),
    ];
    for state in [
        &b"LATER"[..],
        b"",
        b"waiting",
        b"READY ",
        b"ready,dead",
        b"*",
    ] {
        cases.push(raw(&[b"DQ.PEEK", b"q", state], STATE));
        cases.push(raw(&[b"DQ.PURGE", b"q", state], STATE));
    }
    cases
}

fn admin_cases() -> Vec<Case> {
    vec![
        line("DQ.REDRIVE", arity("dq.redrive")),
        needs_value("DQ.REDRIVE q COUNT"),
        needs_value("DQ.REDRIVE q ID"),
        line(
            "DQ.REDRIVE q COUNT 1 ID dead",
            "ERR COUNT and ID cannot be used together",
        ),
        twice("DQ.REDRIVE q COUNT 1 COUNT 2", "COUNT"),
        unknown("DQ.REDRIVE q COUNT 1 extra", "extra"),
        unknown("DQ.REDRIVE q EVERYTHING", "EVERYTHING"),
        unknown("DQ.REDRIVE q dead", "dead"),
        line("DQ.PURGE", arity("dq.purge")),
        line("DQ.PURGE q READY DEAD", arity("dq.purge")),
        line("DQ.CONFIG", arity("dq.config")),
        line("DQ.CONFIG q SET", arity("dq.config")),
        line("DQ.CONFIG q SET LEASE", arity("dq.config")),
        line("DQ.CONFIG q SET LEASE 5 MAXATTEMPTS", arity("dq.config")),
        unknown("DQ.CONFIG q GET", "GET"),
        unknown("DQ.CONFIG q LEASE 5", "LEASE"),
        line(
            "DQ.CONFIG q SET COLOR red",
            "ERR unknown field 'COLOR': use LEASE, MAXATTEMPTS, BACKOFF, RATE, MAXINFLIGHT, RETAIN, RETAINMAX, EVENTS, GROUPLIMIT, GROUPRATE or ORDER",
        ),
        line(
            "DQ.CONFIG q SET PRIORITY 1",
            "ERR unknown field 'PRIORITY': use LEASE, MAXATTEMPTS, BACKOFF, RATE, MAXINFLIGHT, RETAIN, RETAINMAX, EVENTS, GROUPLIMIT, GROUPRATE or ORDER",
        ),
        twice("DQ.CONFIG q SET LEASE 1 LEASE 2", "LEASE"),
        twice("DQ.CONFIG q SET LEASE DEFAULT lease 5", "LEASE"),
        twice("DQ.CONFIG q SET MAXATTEMPTS 1 MAXATTEMPTS 2", "MAXATTEMPTS"),
        twice("DQ.CONFIG q SET BACKOFF 1s BACKOFF 2s", "BACKOFF"),
        // One bad pair refuses the good ones around it.
        line("DQ.CONFIG q SET MAXATTEMPTS 9 LEASE 0", LEASE),
        line("DQ.CONFIG q SET LEASE 9 MAXATTEMPTS 0", MAXATTEMPTS),
    ]
}

/// Every argument that is a message id, and GROUP, empty and too long.
fn id_cases() -> Vec<Case> {
    let long = vec![b'i'; 1025];
    let huge = vec![b'i'; 1 << 20];
    let mut cases = Vec::new();
    for (bad, expected) in [(&b""[..], EMPTY_ID), (&long, LONG_ID), (&huge, LONG_ID)] {
        let positions: [&[&[u8]]; 11] = [
            &[b"DQ.ADD", b"q", b"x", b"ID", bad],
            &[b"DQ.ADD", b"q", b"x", b"ID", bad, b"NX"],
            &[b"DQ.ACK", b"q", b"inflight", bad],
            &[b"DQ.ACK", b"q", bad, b"inflight"],
            &[b"DQ.CANCEL", b"q", b"ready", b"delayed", bad],
            &[b"DQ.NACK", b"q", bad],
            &[b"DQ.NACK", b"q", bad, b"DELAY", b"0"],
            &[b"DQ.TOUCH", b"q", bad],
            &[b"DQ.TOUCH", b"q", bad, b"ATTEMPT", b"1"],
            &[b"DQ.GET", b"q", bad],
            &[b"DQ.REDRIVE", b"q", b"ID", b"dead", bad],
        ];
        for args in positions {
            cases.push(raw(args, expected));
        }
    }
    for (bad, expected) in [
        (&b""[..], "ERR GROUP must not be empty"),
        (&long, "ERR GROUP is longer than 1024 bytes"),
        (&huge, "ERR GROUP is longer than 1024 bytes"),
    ] {
        cases.push(raw(
            &[b"DQ.ADD", b"q", b"x", b"ID", b"ready", b"GROUP", bad],
            expected,
        ));
    }
    cases
}

/// Bad BACKOFF specs, in DQ.ADD and in DQ.CONFIG SET.
fn backoff_cases() -> Vec<Case> {
    let too_many = vec!["1s"; 65].join(",");
    let specs: Vec<(&[u8], &str)> = vec![
        (b"", "a step is not a duration"),
        (b"exp:", "exp needs BASE:MAX"),
        (b"exp:1s", "exp needs BASE:MAX"),
        (b"exp:0:1s", "BASE must be more than 0"),
        (b"exp:5s:1s", "MAX must not be less than BASE"),
        (b"exp:1x:1h", "BASE is not a duration"),
        (b"exp:1s:1y", "MAX is not a duration"),
        (b"exp:1s:1h:2h", "MAX is not a duration"),
        (b"exp:-1s:1h", "BASE is not a duration"),
        (b"fixed:", "DELAY is not a duration"),
        (b"fixed:-1s", "DELAY is not a duration"),
        (b"1s,,2s", "a step is not a duration"),
        (b"1.5s", "a step is not a duration"),
        (b"1s ", "a step is not a duration"),
        (b"99999999999999999999", "a step is not a duration"),
        (b"104249991374d", "a step is not a duration"),
        (b"fixed:104249992d", "DELAY is not a duration"),
        (too_many.as_bytes(), "more than 64 steps"),
    ];
    let mut cases = Vec::new();
    for (spec, why) in specs {
        let expected = format!(
            "ERR BACKOFF must be exp:BASE:MAX, fixed:DELAY or a list of delays such as \
             15s,3m,1h; got '{}': {why}",
            String::from_utf8_lossy(spec)
        );
        cases.push(raw(
            &[b"DQ.ADD", b"q", b"x", b"ID", b"ready", b"BACKOFF", spec],
            expected.clone(),
        ));
        cases.push(raw(
            &[b"DQ.CONFIG", b"q", b"SET", b"BACKOFF", spec],
            expected,
        ));
    }
    // Not text: however the spec is shown, the reply must stay readable.
    let prefix = "ERR BACKOFF must be exp:BASE:MAX, fixed:DELAY or a list of delays such as \
                  15s,3m,1h; got '";
    cases.push(raw(
        &[b"DQ.ADD", b"q", b"x", b"ID", b"ready", b"BACKOFF", b"\xff"],
        prefix,
    ));
    cases.push(raw(
        &[b"DQ.CONFIG", b"q", b"SET", b"BACKOFF", b"\xff"],
        prefix,
    ));
    cases
}

/// The arguments as one readable line, long ones shortened.
fn show(args: &[Vec<u8>]) -> String {
    args.iter()
        .map(|a| {
            let s = String::from_utf8_lossy(a).escape_debug().to_string();
            if s.is_empty() {
                "''".to_string()
            } else if s.len() > 40 {
                format!("<{} bytes>", a.len())
            } else {
                s
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Runs every case, each on a connection of its own (a reply the client
/// cannot read would leave a shared one out of step), and compares digests
/// on another; returns one line per mismatch.
fn mismatches(server: &Server, cases: &[Case]) -> Vec<String> {
    let mut observer = server.conn();
    let mut before = digest(&mut observer);
    let mut found = Vec::new();
    for case in cases {
        let args: Vec<&[u8]> = case.args.iter().map(Vec::as_slice).collect();
        let shown = show(&case.args);
        let want = &case.expected;
        match run(&mut server.conn(), &args) {
            Ok(v) => found.push(format!("{shown}\n    replied {v:?}\n    want    {want}")),
            Err(e) if !e.starts_with(want) => {
                found.push(format!("{shown}\n    replied {e}\n    want    {want}"))
            }
            Err(_) => {}
        }
        let after = digest(&mut observer);
        if after != before {
            found.push(format!("{shown}\n    changed the dataset"));
            // Later cases are judged against the new state, not this one's.
            before = after;
        }
    }
    found
}

#[test]
fn every_bad_input_is_refused_by_name_and_changes_nothing() {
    let server = Server::start();
    let mut c = populated(&server);
    let cases: Vec<Case> = [
        numeric_cases(),
        add_cases(),
        pop_cases(),
        ack_and_cancel_cases(),
        nack_and_touch_cases(),
        read_cases(),
        admin_cases(),
        id_cases(),
        backoff_cases(),
    ]
    .into_iter()
    .flatten()
    .collect();
    let found = mismatches(&server, &cases);
    assert!(
        found.is_empty(),
        "{} of {} bad inputs were not refused as they should be:\n{}",
        found.len(),
        cases.len(),
        found.join("\n")
    );
    // The digest does notice a change: a good command after them all.
    let before = digest(&mut c);
    cmd(&mut c, "DQ.TOUCH q inflight LEASE 7200000");
    assert_ne!(digest(&mut c), before);
    // One bad id refused the whole ACK / CANCEL: nothing was acked.
    let state = |c: &mut redis::Connection, id: &str| {
        text(&field(&cmd(c, &format!("DQ.GET q {id}")), "state"))
    };
    assert_eq!(state(&mut c, "inflight"), "inflight");
    assert_eq!(state(&mut c, "dead"), "dead");
    assert_eq!(int(&field(&cmd(&mut c, "DQ.CONFIG q"), "max-attempts")), 3);
}

#[test]
fn a_queue_key_of_the_wrong_type_is_an_error_not_a_crash() {
    let server = Server::start();
    let mut c = populated(&server);
    cmd(&mut c, "DQ.ADD other x");
    cmd(&mut c, "SET plain not-a-queue");
    let before = digest(&mut c);
    for line in [
        "DQ.ADD plain x",
        "DQ.ADD plain x DELAY 10",
        "DQ.POP plain",
        "DQ.POP plain BLOCK 10",
        "DQ.ACK plain inflight",
        "DQ.CANCEL plain ready",
        "DQ.GET plain ready",
        "DQ.STATS plain",
        "DQ.NACK plain inflight",
        "DQ.TOUCH plain inflight",
        "DQ.PEEK plain READY",
        "DQ.SCAN plain 0",
        "DQ.REDRIVE plain",
        "DQ.PURGE plain",
        "DQ.PURGE plain DEAD",
        "DQ.CONFIG plain",
        "DQ.CONFIG plain SET LEASE 5",
    ] {
        let err = cmd_err(&mut c, line);
        assert_eq!(
            err, "WRONGTYPE key 'plain' holds the wrong kind of value: not a dq queue",
            "{line}"
        );
        assert_eq!(digest(&mut c), before, "{line}");
    }
    // Other queues keep working.
    assert_eq!(entries(&cmd(&mut c, "DQ.POP other")).len(), 1);
    // A non-ASCII key name is still named in a reply the client can read.
    let name = "café".as_bytes();
    run(&mut c, &[b"SET", name, b"not-a-queue"]).expect("SET");
    let err = run(&mut server.conn(), &[b"DQ.STATS", name]).unwrap_err();
    assert!(err.starts_with("WRONGTYPE key 'caf\\xc3\\xa9'"), "{err}");
}
