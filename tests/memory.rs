//! What queues cost in memory, measured against the server's own
//! `used_memory`: many small queues, queues of a few messages, drained
//! queues. (A big queue's MEMORY USAGE is checked in native_type.rs.)

use dq_testkit::*;

const PAYLOAD: &str = "0123456789012345678901234567890123456789012345678901234567890123";

/// Adds one 64-byte message, due in an hour, to each of `queues` queues
/// (`messages` to each); returns the used_memory growth per queue and the
/// mean MEMORY USAGE of those queues.
fn small_queues(
    c: &mut redis::Connection,
    prefix: &str,
    queues: usize,
    messages: usize,
) -> (f64, f64) {
    let before = used_memory(c);
    let mut pipe = redis::pipe();
    for q in 0..queues {
        for m in 0..messages {
            pipe.cmd("DQ.ADD")
                .arg(format!("{prefix}-{q:05}"))
                .arg(PAYLOAD)
                .arg("ID")
                .arg(format!("msg-{m:010}"))
                .arg("DELAY")
                .arg(3_600_000)
                .ignore();
        }
    }
    pipe.query::<()>(c).unwrap();
    let grown = (used_memory(c) - before) as f64 / queues as f64;
    let mut pipe = redis::pipe();
    for q in 0..queues {
        pipe.cmd("MEMORY")
            .arg("USAGE")
            .arg(format!("{prefix}-{q:05}"))
            .arg("SAMPLES")
            .arg(0);
    }
    let usages: Vec<i64> = pipe.query(c).unwrap();
    let usage = usages.iter().sum::<i64>() as f64 / queues as f64;
    (grown, usage)
}

fn assert_close(usage: f64, grown: f64, what: &str) {
    let ratio = usage / grown;
    assert!(
        (0.9..=1.1).contains(&ratio),
        "{what}: MEMORY USAGE {usage:.0} B for {grown:.0} B used ({ratio:.3})"
    );
}

#[test]
fn thousands_of_one_message_queues_cost_a_few_hundred_bytes_each() {
    let server = Server::start();
    let mut c = server.conn();
    let n = 5_000;
    let (dq, usage) = small_queues(&mut c, "tenant", n, 1);
    assert_close(usage, dq, "one-message queues");
    // The design dq replaces, beside it on the same server: per topic, a
    // ZSET of ids by due time and a HASH of payloads.
    let before = used_memory(&mut c);
    let mut pipe = redis::pipe();
    for q in 0..n {
        let topic = format!("topic-{q:05}");
        pipe.cmd("ZADD")
            .arg(format!("{topic}:delayed"))
            .arg(now_ms() + 3_600_000)
            .arg("msg-0000000000")
            .ignore();
        pipe.cmd("HSET")
            .arg(format!("{topic}:payloads"))
            .arg("msg-0000000000")
            .arg(PAYLOAD)
            .ignore();
    }
    pipe.query::<()>(&mut c).unwrap();
    let zset_hash = (used_memory(&mut c) - before) as f64 / n as f64;
    // Was 83,748 bytes a queue (a whole 80 KiB record chunk for one message).
    assert!(
        dq <= 3.0 * zset_hash,
        "a one-message queue takes {dq:.0} B, {:.2}× the {zset_hash:.0} B of a ZSET + HASH",
        dq / zset_hash
    );
}

#[test]
fn memory_usage_follows_queues_of_a_few_messages() {
    let server = Server::start();
    let mut c = server.conn();
    for (messages, queues) in [(2, 2_000), (9, 500), (40, 200), (300, 20)] {
        let (grown, usage) = small_queues(&mut c, &format!("q{messages}"), queues, messages);
        assert_close(usage, grown, &format!("queues of {messages} messages"));
    }
}

#[test]
fn a_drained_queue_gives_its_memory_back_and_keeps_its_counters() {
    let server = Server::start();
    let mut c = server.conn();
    // The server allocates some things once, on first use (about 50 KB
    // on the first POP): a first round trip of another queue pays them.
    cmd(&mut c, "DQ.ADD other x ID first");
    cmd(&mut c, "DQ.POP other");
    cmd(&mut c, "DQ.ACK other first");
    cmd(&mut c, "DQ.CONFIG q SET LEASE 60000");
    let before = used_memory(&mut c);
    let empty_usage = int(&cmd(&mut c, "MEMORY USAGE q"));
    // The big pipelines go through a connection of their own, closed
    // before the last look: its buffers are not the queue's.
    let mut load = server.conn();
    let n = 50_000;
    for round in 0..(n / 5_000) {
        let mut pipe = redis::pipe();
        for i in 0..5_000 {
            pipe.cmd("DQ.ADD")
                .arg("q")
                .arg(PAYLOAD)
                .arg("ID")
                .arg(format!("m{round}-{i}"))
                .ignore();
        }
        pipe.query::<()>(&mut load).unwrap();
    }
    let full = used_memory(&mut load) - before;
    assert!(full > (n as i64) * 100, "{full} bytes for {n} messages");
    let mut left = n;
    while left > 0 {
        let taken = entries(&cmd(&mut load, "DQ.POP q COUNT 1000"));
        assert!(!taken.is_empty(), "{left} messages did not come");
        let mut ack = redis::cmd("DQ.ACK");
        ack.arg("q");
        for (id, _, _) in &taken {
            ack.arg(id);
        }
        let acked: i64 = ack.query(&mut load).unwrap();
        assert_eq!(acked as usize, taken.len());
        left -= taken.len();
    }
    drop(load);
    // What stays is the server's own, allocated once whatever the count
    // (about 75 KB here, the same for 10,000 or 50,000 messages): the
    // queue holds what it held empty, and its slab, table and indexes went.
    let mut kept = 0;
    let limit = (full / 20).min(256 * 1024);
    wait_until(std::time::Duration::from_secs(10), || {
        kept = used_memory(&mut c) - before;
        kept < limit
    });
    assert!(
        kept < limit,
        "a drained queue still holds {kept} bytes more than before its {n} messages ({full})"
    );
    assert_eq!(int(&cmd(&mut c, "MEMORY USAGE q")), empty_usage);
    assert_eq!(int(&field(&cmd(&mut c, "DQ.STATS q"), "acked")), n as i64);
    assert_eq!(int(&field(&cmd(&mut c, "DQ.CONFIG q"), "lease-ms")), 60_000);
}

/// MEMORY USAGE of `key`, every element counted.
fn memory_usage(c: &mut redis::Connection, key: &str) -> i64 {
    redis::cmd("MEMORY")
        .arg("USAGE")
        .arg(key)
        .arg("SAMPLES")
        .arg(0)
        .query(c)
        .unwrap()
}

/// Adds `n` ready messages to `queue`, message `i` in the group
/// `tenant-i` when `grouped`; returns the used_memory growth per message.
fn ready_messages(c: &mut redis::Connection, queue: &str, n: usize, grouped: bool) -> f64 {
    let before = used_memory(c);
    let mut pipe = redis::pipe();
    for i in 0..n {
        pipe.cmd("DQ.ADD")
            .arg(queue)
            .arg(PAYLOAD)
            .arg("ID")
            .arg(format!("msg-{i:010}"));
        if grouped {
            pipe.arg("GROUP").arg(format!("tenant-{i:06}"));
        }
        pipe.ignore();
    }
    pipe.query::<()>(c).unwrap();
    (used_memory(c) - before) as f64 / n as f64
}

#[test]
fn a_message_in_a_group_of_its_own_costs_little_more_than_one_without() {
    let server = Server::start();
    let mut c = server.conn();
    let n = 20_000;
    let plain = ready_messages(&mut c, "plain", n, false);
    let grouped = ready_messages(&mut c, "grouped", n, true);
    // Was 1.74× while each group kept an entry and a copy of its name in
    // a B-tree; issue 36 asks for at most 1.3×.
    assert!(
        grouped <= 1.3 * plain,
        "{grouped:.0} B a grouped message against {plain:.0} B ({:.2}×)",
        grouped / plain
    );
    let usage = memory_usage(&mut c, "grouped");
    assert_close(usage as f64 / n as f64, grouped, "a queue of lone groups");
    // A change of limits looks at every group, giving each an entry for a
    // while; none is left behind.
    let _: () = redis::cmd("DQ.CONFIG")
        .arg("grouped")
        .arg("SET")
        .arg("GROUPLIMIT")
        .arg(2)
        .query(&mut c)
        .unwrap();
    let after = memory_usage(&mut c, "grouped");
    assert!(
        after as f64 <= 1.02 * usage as f64,
        "MEMORY USAGE {usage} B before GROUPLIMIT 2, {after} B after"
    );
    // DQ.GROUPS lists every group once, in name order, the names read
    // from the messages.
    let mut cursor = "0".to_string();
    let mut names = Vec::new();
    loop {
        let (next, page): (String, Vec<redis::Value>) = redis::cmd("DQ.GROUPS")
            .arg("grouped")
            .arg(&cursor)
            .arg("COUNT")
            .arg(1000)
            .query(&mut c)
            .unwrap();
        for group in page {
            let redis::Value::Array(fields) = group else {
                panic!("a group: {group:?}");
            };
            let Some(redis::Value::BulkString(name)) = fields.first() else {
                panic!("a group's name: {fields:?}");
            };
            names.push(String::from_utf8(name.clone()).unwrap());
        }
        if next == "0" {
            break;
        }
        cursor = next;
    }
    let want: Vec<String> = (0..n).map(|i| format!("tenant-{i:06}")).collect();
    assert_eq!(names, want);
}
