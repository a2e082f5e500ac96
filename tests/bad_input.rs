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
