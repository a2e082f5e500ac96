//! Every bad input gets an error that names the problem and changes nothing:
//! the dataset digest is the same before and after.

mod support;

use support::*;

/// A queue with a message in each state, and its digest.
fn prepared(server: &Server) -> (redis::Connection, String) {
    let mut c = server.conn();
    cmd(&mut c, "DQ.ADD q x ID inflight");
    cmd(&mut c, "DQ.POP q");
    cmd(&mut c, "DQ.ADD q x ID ready");
    cmd(&mut c, "DQ.ADD q x ID delayed DELAY 3600000");
    let digest = digest(&mut c);
    (c, digest)
}

#[test]
fn bad_arguments_are_refused_and_change_nothing() {
    let server = Server::start();
    let (mut c, before) = prepared(&server);
    let arity = |cmd: &str| format!("ERR wrong number of arguments for '{cmd}' command");
    let ms = "must be a non-negative integer number of milliseconds";
    let table: Vec<(&str, String)> = vec![
        ("DQ.ADD", arity("dq.add")),
        ("DQ.ADD q", arity("dq.add")),
        ("DQ.ADD q x DELAY", "ERR DELAY needs a value".into()),
        ("DQ.ADD q x DELAY -1", format!("ERR DELAY {ms}")),
        ("DQ.ADD q x DELAY 1.5", format!("ERR DELAY {ms}")),
        ("DQ.ADD q x DELAY abc", format!("ERR DELAY {ms}")),
        (
            "DQ.ADD q x DELAY 9223372036854775808",
            format!("ERR DELAY {ms}"),
        ),
        (
            "DQ.ADD q x DELAY 99999999999999999999999",
            format!("ERR DELAY {ms}"),
        ),
        (
            "DQ.ADD q x DELAY 9007199254740991",
            "ERR DELAY would be later than the latest time dq can store (2^53-1 ms)".into(),
        ),
        (
            "DQ.ADD q x AT -5",
            "ERR AT must be a non-negative integer Unix time in milliseconds".into(),
        ),
        (
            "DQ.ADD q x DELAY 1 AT 2",
            "ERR DELAY and AT cannot be used together".into(),
        ),
        (
            "DQ.ADD q x DELAY 1 DELAY 2",
            "ERR DELAY is given more than once".into(),
        ),
        (
            "DQ.ADD q x NX XX ID ready",
            "ERR NX and XX cannot be used together".into(),
        ),
        ("DQ.ADD q x XX", "ERR XX needs ID".into()),
        ("DQ.ADD q x GROUP", "ERR GROUP needs a value".into()),
        (
            "DQ.ADD q x GROUP g GROUP h",
            "ERR GROUP is given more than once".into(),
        ),
        (
            "DQ.ADD q x TTL 0",
            "ERR TTL must be a positive integer number of milliseconds".into(),
        ),
        (
            "DQ.ADD q x ID ready ID other",
            "ERR ID is given more than once".into(),
        ),
        (
            "DQ.ADD q x PRIORITY high",
            "ERR PRIORITY must be an integer from -2147483648 to 2147483647".into(),
        ),
        (
            "DQ.ADD q x PRIORITY -2147483649",
            "ERR PRIORITY must be an integer from -2147483648 to 2147483647".into(),
        ),
        (
            "DQ.ADD q x WHENEVER",
            "ERR unknown option 'WHENEVER'".into(),
        ),
        ("DQ.POP", arity("dq.pop")),
        (
            "DQ.POP q COUNT 0",
            "ERR COUNT must be an integer from 1 to 10000".into(),
        ),
        (
            "DQ.POP q COUNT -1",
            "ERR COUNT must be an integer from 1 to 10000".into(),
        ),
        (
            "DQ.POP q COUNT 10001",
            "ERR COUNT must be an integer from 1 to 10000".into(),
        ),
        ("DQ.POP q BLOCK -1", format!("ERR BLOCK {ms}")),
        (
            "DQ.POP q LEASE 0",
            "ERR LEASE must be a positive integer number of milliseconds".into(),
        ),
        ("DQ.POP q LEASE", "ERR LEASE needs a value".into()),
        (
            "DQ.POP q COUNT 1 COUNT 1",
            "ERR COUNT is given more than once".into(),
        ),
        ("DQ.POP q FAST", "ERR unknown option 'FAST'".into()),
        ("DQ.ACK", arity("dq.ack")),
        ("DQ.ACK q", arity("dq.ack")),
        ("DQ.CANCEL q", arity("dq.cancel")),
        ("DQ.GET q", arity("dq.get")),
        ("DQ.GET q a b", arity("dq.get")),
        ("DQ.STATS", arity("dq.stats")),
        ("DQ.STATS q extra", arity("dq.stats")),
    ];
    for (line, expected) in &table {
        assert_eq!(&cmd_err(&mut c, line), expected, "{line}");
        assert_eq!(digest(&mut c), before, "{line} changed the dataset");
    }
}

#[test]
fn bad_arguments_of_the_retry_and_admin_commands_change_nothing() {
    let server = Server::start();
    let (mut c, _) = prepared(&server);
    cmd(&mut c, "DQ.CONFIG q SET MAXATTEMPTS 3");
    let before = digest(&mut c);
    let arity = |cmd: &str| format!("ERR wrong number of arguments for '{cmd}' command");
    let lease = "ERR LEASE must be a positive integer number of milliseconds";
    let state = "ERR state must be one of DELAYED, READY, INFLIGHT, DEAD";
    let count = "ERR COUNT must be an integer from 1 to 10000";
    let table: Vec<(&str, String)> =
        vec![
        ("DQ.NACK q", arity("dq.nack")),
        ("DQ.NACK q inflight DELAY", "ERR DELAY needs a value".into()),
        (
            "DQ.NACK q inflight DELAY -1",
            "ERR DELAY must be a non-negative integer number of milliseconds".into(),
        ),
        ("DQ.NACK q inflight DELAY 1 DELAY 1", "ERR DELAY is given more than once".into()),
        ("DQ.NACK q inflight SOON", "ERR unknown option 'SOON'".into()),
        ("DQ.TOUCH q", arity("dq.touch")),
        ("DQ.TOUCH q inflight LEASE 0", lease.into()),
        ("DQ.TOUCH q inflight LEASE 9007199254740992", lease.into()),
        ("DQ.TOUCH q inflight LEASE", "ERR LEASE needs a value".into()),
        ("DQ.PEEK q", arity("dq.peek")),
        ("DQ.PEEK q LATER", state.into()),
        ("DQ.PEEK q READY COUNT 0", count.into()),
        ("DQ.PEEK q READY COUNT 1 COUNT 2", "ERR COUNT is given more than once".into()),
        ("DQ.PEEK q READY ALL", "ERR unknown option 'ALL'".into()),
        ("DQ.REDRIVE", arity("dq.redrive")),
        ("DQ.REDRIVE q COUNT", "ERR COUNT needs a value".into()),
        ("DQ.REDRIVE q COUNT -3", count.into()),
        ("DQ.REDRIVE q COUNT 1 ID a", "ERR COUNT and ID cannot be used together".into()),
        ("DQ.REDRIVE q ID", "ERR ID needs a value".into()),
        ("DQ.REDRIVE q EVERYTHING", "ERR unknown option 'EVERYTHING'".into()),
        ("DQ.PURGE", arity("dq.purge")),
        ("DQ.PURGE q ALL", state.into()),
        ("DQ.PURGE q READY DEAD", arity("dq.purge")),
        ("DQ.CONFIG", arity("dq.config")),
        ("DQ.CONFIG q SET", arity("dq.config")),
        ("DQ.CONFIG q SET LEASE", arity("dq.config")),
        ("DQ.CONFIG q GET", "ERR unknown option 'GET'".into()),
        ("DQ.CONFIG q SET LEASE 0", lease.into()),
        (
            "DQ.CONFIG q SET MAXATTEMPTS 1 MAXATTEMPTS 2",
            "ERR MAXATTEMPTS is given more than once".into(),
        ),
        // One bad pair refuses the good ones before it.
        ("DQ.CONFIG q SET MAXATTEMPTS 9 LEASE 0", lease.into()),
        (
            "DQ.CONFIG q SET PRIORITY 1",
            "ERR unknown field 'PRIORITY': use LEASE, MAXATTEMPTS or BACKOFF".into(),
        ),
        ("DQ.QUEUES extra", arity("dq.queues")),
        (
            "DQ.ADD q x MAXATTEMPTS 0",
            "ERR MAXATTEMPTS must be an integer from 1 to 2147483647".into(),
        ),
        (
            "DQ.ADD q x BACKOFF exp:5s:1s",
            "ERR BACKOFF must be exp:BASE:MAX, fixed:DELAY or a list of delays such as 15s,3m,1h; \
             got 'exp:5s:1s': MAX must not be less than BASE"
                .into(),
        ),
        ("DQ.ADD q x BACKOFF 1s BACKOFF 2s", "ERR BACKOFF is given more than once".into()),
    ];
    for (line, expected) in &table {
        assert_eq!(&cmd_err(&mut c, line), expected, "{line}");
        assert_eq!(digest(&mut c), before, "{line} changed the dataset");
    }
    assert_eq!(int(&field(&cmd(&mut c, "DQ.CONFIG q"), "max-attempts")), 3);
}

#[test]
fn empty_and_oversized_ids_are_refused() {
    let server = Server::start();
    let (mut c, before) = prepared(&server);
    let long = vec![b'i'; 1025];
    let cases: Vec<(Vec<&[u8]>, &str)> = vec![
        (
            vec![b"DQ.ADD", b"q", b"x", b"ID", b""],
            "ERR id must not be empty",
        ),
        (
            vec![b"DQ.ADD", b"q", b"x", b"ID", &long],
            "ERR id is longer than 1024 bytes",
        ),
        (
            vec![b"DQ.ACK", b"q", b"inflight", b""],
            "ERR id must not be empty",
        ),
        (
            vec![b"DQ.CANCEL", b"q", b"ready", b""],
            "ERR id must not be empty",
        ),
        (
            vec![b"DQ.CANCEL", b"q", b"ready", &long],
            "ERR id is longer than 1024 bytes",
        ),
        (vec![b"DQ.GET", b"q", b""], "ERR id must not be empty"),
        (vec![b"DQ.NACK", b"q", b""], "ERR id must not be empty"),
        (
            vec![b"DQ.TOUCH", b"q", &long],
            "ERR id is longer than 1024 bytes",
        ),
        (
            vec![b"DQ.REDRIVE", b"q", b"ID", b"a", b""],
            "ERR id must not be empty",
        ),
    ];
    for (args, expected) in cases {
        assert_eq!(run(&mut c, &args).unwrap_err(), expected);
        assert_eq!(digest(&mut c), before);
    }
    // The ACK and CANCEL above were refused whole: nothing was acked.
    assert_eq!(
        text(&field(&cmd(&mut c, "DQ.GET q inflight"), "state")),
        "inflight"
    );
}

#[test]
fn a_queue_key_of_the_wrong_type_is_an_error_not_a_crash() {
    let server = Server::start();
    let (mut c, _) = prepared(&server);
    cmd(&mut c, "DQ.ADD other x");
    let Value::Array(keys) = cmd(&mut c, "KEYS dq:*:q:delayed") else {
        panic!()
    };
    let delayed = text(&keys[0]);
    cmd(&mut c, &format!("DEL {delayed}"));
    cmd(&mut c, &format!("SET {delayed} not-a-zset"));
    let before = digest(&mut c);
    for line in [
        "DQ.ADD q x",
        "DQ.ADD q x DELAY 10",
        "DQ.POP q",
        "DQ.POP q BLOCK 10",
        "DQ.ACK q inflight",
        "DQ.CANCEL q ready",
        "DQ.GET q ready",
        "DQ.STATS q",
        "DQ.NACK q inflight",
        "DQ.TOUCH q inflight",
        "DQ.PEEK q READY",
        "DQ.REDRIVE q",
        "DQ.PURGE q",
        "DQ.PURGE q DEAD",
        "DQ.CONFIG q",
        "DQ.CONFIG q SET LEASE 5",
    ] {
        let err = cmd_err(&mut c, line);
        assert_eq!(
            err,
            format!("WRONGTYPE key '{delayed}' of the queue holds the wrong kind of value"),
            "{line}"
        );
        assert_eq!(digest(&mut c), before, "{line}");
    }
    // Other queues keep working.
    assert_eq!(entries(&cmd(&mut c, "DQ.POP other")).len(), 1);
}
