//! What the server enforces around dq: command flags (write, readonly,
//! fast, blocking, deny-oom) and what follows from them under `maxmemory`,
//! on a replica and with ACL key patterns; and the documented bounds —
//! COUNT, id and GROUP length, numeric ranges, payload size up to
//! `proto-max-bulk-len`.

use dq_testkit::*;

fn bytes(v: &Value) -> Vec<u8> {
    match v {
        Value::BulkString(b) => b.clone(),
        other => panic!("not a bulk string: {other:?}"),
    }
}

/// The flags of `COMMAND INFO name`, without `module`, sorted.
fn flags(c: &mut redis::Connection, name: &str) -> Vec<String> {
    let info = list(&cmd(c, &format!("COMMAND INFO {name}")));
    let mut flags: Vec<String> = list(&list(&info[0])[2])
        .iter()
        .map(text)
        .filter(|f| f != "module")
        .collect();
    flags.sort();
    flags
}

/// A numeric field of INFO.
fn info_number(c: &mut redis::Connection, section: &str, name: &str) -> i64 {
    let info = text(&cmd(c, &format!("INFO {section}")));
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {name} in INFO {section}"))
}

/// Bytes of every value, \r\n and NUL included, in no simple pattern.
fn payload(len: usize) -> Vec<u8> {
    let mut x: u32 = 2_463_534_242;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x as u8
        })
        .collect()
}

#[test]
fn command_flags_fit_what_each_command_does() {
    let server = Server::start();
    let mut c = server.conn();
    // write: changes the dataset, so replicas, OOM, MISCONF and CLIENT
    // PAUSE WRITE treat it as a write. denyoom: only DQ.ADD (and DQ.CONFIG
    // SET, a few bytes) grows memory; the others free it or keep it level,
    // and must keep working under maxmemory so consumers can drain a queue.
    // fast: O(1) or O(log N) for one message. blocking: DQ.POP BLOCK.
    let expected: [(&str, &[&str]); 13] = [
        ("dq.add", &["denyoom", "fast", "write"]),
        ("dq.pop", &["blocking", "write"]),
        ("dq.ack", &["write"]),
        ("dq.cancel", &["write"]),
        ("dq.nack", &["fast", "write"]),
        ("dq.touch", &["fast", "write"]),
        ("dq.redrive", &["write"]),
        ("dq.purge", &["write"]),
        ("dq.get", &["fast", "readonly"]),
        ("dq.peek", &["readonly"]),
        ("dq.stats", &["fast", "readonly"]),
        ("dq.config", &["write"]),
        ("dq.queues", &["readonly"]),
    ];
    let wrong: Vec<String> = expected
        .iter()
        .filter_map(|(name, want)| {
            let got = flags(&mut c, name);
            (got != *want).then(|| format!("{name}: flags {got:?}, want {want:?}"))
        })
        .collect();
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn under_maxmemory_add_is_refused_and_what_frees_memory_still_works() {
    let server = Server::start_with(&["--maxmemory-policy", "noeviction"]);
    let mut c = server.conn();
    cmd(&mut c, "DQ.ADD q x ID later DELAY 3600000");
    let used = info_number(&mut c, "memory", "used_memory");
    cmd(
        &mut c,
        &format!("CONFIG SET maxmemory {}", used + (1 << 20)),
    );
    let body = payload(16 << 10);
    let mut oom = None;
    for i in 0..10_000 {
        let id = format!("fill-{i}");
        match run(&mut c, &[b"DQ.ADD", b"q", &body, b"ID", id.as_bytes()]) {
            Ok(_) => {}
            Err(e) => {
                oom = Some((i, e));
                break;
            }
        }
    }
    let (filled, err) = oom.expect("DQ.ADD was never refused under maxmemory");
    assert!(filled > 5, "refused too early: {err}");
    assert!(err.starts_with("OOM "), "{err}");
    // A refused ADD changes nothing, also when it would replace.
    let before = digest(&mut c);
    let err = cmd_err(&mut c, "DQ.ADD q y ID fill-0");
    assert!(err.starts_with("OOM "), "{err}");
    assert_eq!(digest(&mut c), before);
    // Reads work.
    assert_eq!(
        bytes(&field(&cmd(&mut c, "DQ.GET q fill-0"), "payload")),
        body
    );
    assert_eq!(
        int(&field(&cmd(&mut c, "DQ.STATS q"), "ready")),
        filled as i64
    );
    assert_eq!(list(&cmd(&mut c, "DQ.PEEK q READY COUNT 3")).len(), 3);
    assert_eq!(list(&cmd(&mut c, "DQ.QUEUES")).len(), 1);
    cmd(&mut c, "DQ.CONFIG q");
    // Consumers drain: POP, ACK, NACK, TOUCH; operators clean up: CANCEL,
    // REDRIVE, PURGE. None of them is refused.
    let popped = entries(&cmd(&mut c, "DQ.POP q COUNT 3"));
    assert_eq!(popped.len(), 3);
    assert_eq!(int(&cmd(&mut c, &format!("DQ.ACK q {}", popped[0].0))), 1);
    assert_eq!(
        text(&cmd(&mut c, &format!("DQ.NACK q {} DELAY 0", popped[1].0))),
        "ready"
    );
    cmd(&mut c, &format!("DQ.TOUCH q {} LEASE 60000", popped[2].0));
    assert_eq!(int(&cmd(&mut c, "DQ.CANCEL q fill-5 later")), 2);
    assert_eq!(int(&cmd(&mut c, "DQ.REDRIVE q")), 0);
    assert_eq!(int(&cmd(&mut c, "DQ.PURGE q READY")), filled as i64 - 3);
    // With the memory back, DQ.ADD works again (a lazy free may lag).
    assert!(
        wait_until(LONG, || run(
            &mut c,
            &[b"DQ.ADD", b"q", &body, b"ID", b"after"]
        )
        .is_ok()),
        "DQ.ADD still refused after the queue was purged"
    );
}

#[test]
fn a_replica_serves_every_read_command_and_refuses_every_write() {
    let master = Server::start_with(&["--repl-diskless-sync-delay", "0"]);
    let port = master.port.to_string();
    let replica = Server::start_with(&["--replicaof", "127.0.0.1", &port]);
    let mut m = master.conn();
    let mut r = replica.conn();
    assert!(wait_until(LONG, || {
        text(&cmd(&mut r, "INFO replication")).contains("master_link_status:up")
    }));
    cmd(&mut m, "DQ.ADD q x ID dead MAXATTEMPTS 1");
    cmd(&mut m, "DQ.POP q");
    cmd(&mut m, "DQ.NACK q dead");
    cmd(&mut m, "DQ.ADD q x ID inflight");
    cmd(&mut m, "DQ.POP q LEASE 3600000");
    cmd(&mut m, "DQ.ADD q x ID ready");
    cmd(&mut m, "DQ.ADD q x ID delayed DELAY 3600000");
    assert!(wait_until(LONG, || int(&cmd(&mut m, "WAIT 1 1000")) == 1));
    assert!(wait_until(LONG, || digest(&mut m) == digest(&mut r)));
    let before = digest(&mut r);
    assert_eq!(
        text(&field(&cmd(&mut r, "DQ.GET q ready"), "state")),
        "ready"
    );
    assert_eq!(cmd(&mut r, "DQ.GET q unknown"), Value::Nil);
    assert_eq!(list(&cmd(&mut r, "DQ.PEEK q DEAD")).len(), 1);
    let stats = cmd(&mut r, "DQ.STATS q");
    let counts = ["delayed", "ready", "inflight", "dead"].map(|f| int(&field(&stats, f)));
    assert_eq!(counts, [1, 1, 1, 1]);
    assert_eq!(list(&cmd(&mut r, "DQ.QUEUES")).len(), 1);
    let mut writable = Vec::new();
    for line in [
        "DQ.ADD q x",
        "DQ.POP q",
        "DQ.POP q BLOCK 10",
        "DQ.ACK q inflight",
        "DQ.CANCEL q ready",
        "DQ.NACK q inflight",
        "DQ.TOUCH q inflight",
        "DQ.REDRIVE q",
        "DQ.PURGE q",
        "DQ.CONFIG q",
        "DQ.CONFIG q SET LEASE 5",
    ] {
        match run(
            &mut r,
            &line.split(' ').map(str::as_bytes).collect::<Vec<_>>(),
        ) {
            Err(e) if e.starts_with("READONLY") => {}
            other => writable.push(format!("{line}: {other:?}")),
        }
    }
    assert!(writable.is_empty(), "{}", writable.join("\n"));
    assert_eq!(digest(&mut r), before);
}

/// Every command on queue `q`, as a user would try it.
fn every_command(q: &str) -> Vec<String> {
    [
        "DQ.ADD {} x ID new",
        "DQ.POP {}",
        "DQ.ACK {} inflight",
        "DQ.CANCEL {} ready",
        "DQ.NACK {} inflight",
        "DQ.TOUCH {} inflight",
        "DQ.REDRIVE {}",
        "DQ.PURGE {} DELAYED",
        "DQ.GET {} ready",
        "DQ.PEEK {} READY",
        "DQ.STATS {}",
        "DQ.CONFIG {}",
        "DQ.CONFIG {} SET LEASE 5000",
    ]
    .iter()
    .map(|l| l.replace("{}", q))
    .collect()
}

fn fill(c: &mut redis::Connection, q: &str) {
    for line in [
        "DQ.ADD {} x ID dead MAXATTEMPTS 1",
        "DQ.POP {}",
        "DQ.NACK {} dead",
        "DQ.ADD {} x ID inflight",
        "DQ.POP {} LEASE 3600000",
        "DQ.ADD {} x ID ready",
        "DQ.ADD {} x ID delayed DELAY 3600000",
    ] {
        cmd(c, &line.replace("{}", q));
    }
}

/// The digest of queue `q`'s key.
fn queue_digest(c: &mut redis::Connection, q: &str) -> String {
    assert_eq!(text(&cmd(c, &format!("TYPE {q}"))), "dq--queue");
    text(&list(&cmd(c, &format!("DEBUG DIGEST-VALUE {q}")))[0])
}

/// Logs in as a new user with these ACL rules.
fn user(server: &Server, name: &str, rules: &str) -> redis::Connection {
    let mut admin = server.conn();
    cmd(
        &mut admin,
        &format!("ACL SETUSER {name} reset on >pw {rules}"),
    );
    let mut c = server.conn();
    cmd(&mut c, &format!("AUTH {name} pw"));
    c
}

fn denied(c: &mut redis::Connection, line: &str) -> bool {
    let args: Vec<&[u8]> = line.split(' ').map(str::as_bytes).collect();
    matches!(run(c, &args), Err(e) if e.starts_with("NOPERM"))
}

#[test]
fn acl_key_patterns_and_key_permissions_apply_to_the_queue() {
    let server = Server::start();
    let mut admin = server.conn();
    fill(&mut admin, "orders");
    fill(&mut admin, "payments");
    let payments_before = queue_digest(&mut admin, "payments");
    let mut wrong = Vec::new();
    let mut check = |who: &str, c: &mut redis::Connection, line: &str, refused: bool| {
        if denied(c, line) != refused {
            let want = if refused { "NOPERM" } else { "allowed" };
            wrong.push(format!("{who}: {line}: want {want}"));
        }
    };

    // ~orders*: every command on orders, none on payments.
    let mut alice = user(&server, "alice", "~orders* +@all");
    for line in every_command("orders") {
        check("alice", &mut alice, &line, false);
    }
    for line in every_command("payments") {
        check("alice", &mut alice, &line, true);
    }
    // DQ.QUEUES names no key: like KEYS it lists every queue.
    check("alice", &mut alice, "DQ.QUEUES", false);

    // %R~orders*: read permission only — GET, PEEK and STATS.
    let mut reader = user(&server, "reader", "%R~orders* +@all");
    let reads = ["DQ.GET", "DQ.PEEK", "DQ.STATS"];
    for line in every_command("orders") {
        let is_read = reads.iter().any(|r| line.starts_with(&format!("{r} ")));
        check("reader", &mut reader, &line, !is_read);
    }

    // %W~orders*: write permission only — whatever inserts, updates or
    // deletes without returning what the queue holds.
    let mut writer = user(&server, "writer", "%W~orders* +@all");
    let blind = [
        "DQ.ADD",
        "DQ.ACK",
        "DQ.CANCEL",
        "DQ.NACK",
        "DQ.TOUCH",
        "DQ.REDRIVE",
        "DQ.PURGE",
    ];
    for line in every_command("orders") {
        let is_blind = blind.iter().any(|w| line.starts_with(&format!("{w} ")));
        check("writer", &mut writer, &line, !is_blind);
    }

    // Commands are granted one by one like built-in ones.
    let mut viewer = user(&server, "viewer", "~* +dq.get +dq.stats");
    check("viewer", &mut viewer, "DQ.GET orders ready", false);
    check("viewer", &mut viewer, "DQ.STATS payments", false);
    check("viewer", &mut viewer, "DQ.ADD orders x", true);
    check("viewer", &mut viewer, "DQ.QUEUES", true);

    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    let Value::Array(names) = cmd(&mut alice, "DQ.QUEUES") else {
        panic!("DQ.QUEUES is not a list")
    };
    assert_eq!(
        names.iter().map(text).collect::<Vec<_>>(),
        ["orders", "payments"]
    );
    // Nothing refused touched payments.
    assert_eq!(queue_digest(&mut admin, "payments"), payments_before);
}

#[test]
fn a_4_mib_payload_round_trips_byte_for_byte() {
    let server = Server::start();
    let mut c = server.conn();
    let body = payload(4 << 20);
    let id = text(&run(&mut c, &[b"DQ.ADD", b"q", &body]).expect("ADD of 4 MiB"));
    let got = run(&mut c, &[b"DQ.GET", b"q", id.as_bytes()]).expect("GET");
    assert!(
        bytes(&field(&got, "payload")) == body,
        "GET changed the payload"
    );
    let peeked = list(&cmd(&mut c, "DQ.PEEK q READY"));
    assert!(
        bytes(&list(&peeked[0])[1]) == body,
        "PEEK changed the payload"
    );
    let popped = list(&cmd(&mut c, "DQ.POP q"));
    let entry = list(&popped[0]);
    assert_eq!(text(&entry[0]), id);
    assert!(bytes(&entry[1]) == body, "POP changed the payload");
    // And after a retry, which rewrites the record.
    assert_eq!(
        text(&cmd(&mut c, &format!("DQ.NACK q {id} DELAY 0"))),
        "ready"
    );
    let entry = list(&list(&cmd(&mut c, "DQ.POP q"))[0]);
    assert!(bytes(&entry[1]) == body, "the retry changed the payload");
    assert_eq!(int(&cmd(&mut c, &format!("DQ.ACK q {id}"))), 1);
    // Empty is a payload too.
    run(&mut c, &[b"DQ.ADD", b"q", b"", b"ID", b"empty"]).expect("ADD of an empty payload");
    assert_eq!(
        bytes(&field(&cmd(&mut c, "DQ.GET q empty"), "payload")),
        b""
    );
}

#[test]
fn the_largest_payload_is_the_servers_proto_max_bulk_len() {
    let server = Server::start();
    let mut c = server.conn();
    cmd(&mut c, "CONFIG SET proto-max-bulk-len 1mb");
    let limit = 1 << 20;
    // Exactly the limit: dq adds its envelope and stores it all.
    let body = payload(limit);
    run(&mut c, &[b"DQ.ADD", b"q", &body, b"ID", b"max"]).expect("ADD at the limit");
    let got = run(&mut c, &[b"DQ.GET", b"q", b"max"]).expect("GET");
    assert!(bytes(&field(&got, "payload")) == body);
    // One byte more: the server refuses the argument before dq sees it
    // (a protocol error, and it closes the connection).
    let before = digest(&mut c);
    let mut other = server.conn();
    let over = payload(limit + 1);
    let refused = run(&mut other, &[b"DQ.ADD", b"q", &over, b"ID", b"over"]);
    assert!(refused.is_err(), "{:?}", refused.map(|_| ()));
    let mut c = server.conn();
    assert_eq!(digest(&mut c), before);
    assert_eq!(cmd(&mut c, "DQ.GET q over"), Value::Nil);
    assert_eq!(int(&field(&cmd(&mut c, "DQ.STATS q"), "added")), 1);
}

#[test]
fn ids_and_groups_of_1024_bytes_work_and_1025_are_refused() {
    let server = Server::start();
    let mut c = server.conn();
    let id = vec![b'i'; 1024];
    let group = vec![b'g'; 1024];
    let added = run(
        &mut c,
        &[b"DQ.ADD", b"q", b"x", b"ID", &id, b"GROUP", &group],
    )
    .expect("ADD with a 1024-byte id and group");
    assert_eq!(bytes(&added), id);
    let got = run(&mut c, &[b"DQ.GET", b"q", &id]).expect("GET");
    assert_eq!(bytes(&field(&got, "id")), id);
    assert_eq!(bytes(&field(&got, "group")), group);
    let popped = list(&cmd(&mut c, "DQ.POP q"));
    assert_eq!(bytes(&list(&popped[0])[0]), id);
    assert_eq!(int(&run(&mut c, &[b"DQ.ACK", b"q", &id]).expect("ACK")), 1);

    let before = digest(&mut c);
    let long = vec![b'i'; 1025];
    for (args, want) in [
        (
            vec![&b"DQ.ADD"[..], b"q", b"x", b"ID", &long],
            "ERR id is longer than 1024 bytes",
        ),
        (
            vec![&b"DQ.ADD"[..], b"q", b"x", b"GROUP", &long],
            "ERR GROUP is longer than 1024 bytes",
        ),
        (
            vec![&b"DQ.GET"[..], b"q", &long],
            "ERR id is longer than 1024 bytes",
        ),
    ] {
        assert_eq!(run(&mut c, &args).unwrap_err(), want);
    }
    assert_eq!(digest(&mut c), before);
}

#[test]
fn count_goes_up_to_10000_in_pop_peek_and_redrive() {
    let server = Server::start();
    let mut c = server.conn();
    cmd(&mut c, "DQ.CONFIG q SET MAXATTEMPTS 1");
    let n = 10_001;
    let mut adds = redis::pipe();
    for i in 0..n {
        adds.cmd("DQ.ADD")
            .arg("q")
            .arg("x")
            .arg("ID")
            .arg(i.to_string());
    }
    adds.query::<Vec<Value>>(&mut c)
        .expect("add 10001 messages");
    assert_eq!(
        list(&cmd(&mut c, "DQ.PEEK q READY COUNT 10000")).len(),
        10_000
    );
    assert!(cmd_err(&mut c, "DQ.PEEK q READY COUNT 10001").starts_with("ERR COUNT"));
    assert!(cmd_err(&mut c, "DQ.POP q COUNT 10001").starts_with("ERR COUNT"));
    let mut popped = entries(&cmd(&mut c, "DQ.POP q COUNT 10000"));
    assert_eq!(popped.len(), 10_000);
    popped.extend(entries(&cmd(&mut c, "DQ.POP q COUNT 10000")));
    assert_eq!(popped.len(), n);
    let mut nacks = redis::pipe();
    for (id, _, _) in &popped {
        nacks.cmd("DQ.NACK").arg("q").arg(id);
    }
    nacks
        .query::<Vec<Value>>(&mut c)
        .expect("NACK every message");
    assert_eq!(int(&field(&cmd(&mut c, "DQ.STATS q"), "dead")), n as i64);
    assert_eq!(
        list(&cmd(&mut c, "DQ.PEEK q DEAD COUNT 10000")).len(),
        10_000
    );
    assert!(cmd_err(&mut c, "DQ.REDRIVE q COUNT 10001").starts_with("ERR COUNT"));
    assert_eq!(int(&cmd(&mut c, "DQ.REDRIVE q COUNT 10000")), 10_000);
    assert_eq!(int(&cmd(&mut c, "DQ.REDRIVE q COUNT 10000")), 1);
}

#[test]
fn the_documented_bounds_themselves_are_accepted() {
    let server = Server::start();
    let mut c = server.conn();
    let get =
        |c: &mut redis::Connection, id: &str, f: &str| field(&cmd(c, &format!("DQ.GET q {id}")), f);
    cmd(&mut c, "DQ.ADD q x ID low PRIORITY -2147483648 AT 0");
    cmd(&mut c, "DQ.ADD q x ID high PRIORITY 2147483647 DELAY 0");
    assert_eq!(int(&get(&mut c, "low", "priority")), -2_147_483_648);
    assert_eq!(int(&get(&mut c, "high", "priority")), 2_147_483_647);
    assert_eq!(text(&get(&mut c, "low", "state")), "ready");
    cmd(
        &mut c,
        "DQ.ADD q x ID last AT 9007199254740991 MAXATTEMPTS 2147483647",
    );
    assert_eq!(int(&get(&mut c, "last", "due-at")), 9_007_199_254_740_991);
    assert_eq!(int(&get(&mut c, "last", "max-attempts")), 2_147_483_647);
    let steps = vec!["1s"; 64].join(",");
    cmd(
        &mut c,
        &format!("DQ.ADD q x ID steps DELAY 3600000 BACKOFF {steps}"),
    );
    assert_eq!(text(&get(&mut c, "steps", "backoff")), steps);
    // The longest duration a spec can hold: under 2^53 ms.
    cmd(
        &mut c,
        "DQ.ADD q x ID far DELAY 3600000 BACKOFF fixed:104249991d",
    );
    cmd(
        &mut c,
        "DQ.ADD q x ID soon DELAY 3600000 BACKOFF exp:1ms:1ms TTL 1",
    );
    // A lease past the latest storable time ends at that time.
    let popped = entries(&cmd(
        &mut c,
        "DQ.POP q COUNT 1 LEASE 9007199254740991 BLOCK 9007199254740991",
    ));
    assert_eq!(popped[0].0, "high");
    assert_eq!(
        int(&get(&mut c, "high", "lease-deadline")),
        9_007_199_254_740_991
    );
    assert_eq!(
        int(&cmd(&mut c, "DQ.TOUCH q high LEASE 9007199254740991")),
        9_007_199_254_740_991
    );
    assert_eq!(text(&cmd(&mut c, "DQ.NACK q high DELAY 0")), "ready");
    cmd(
        &mut c,
        "DQ.CONFIG q SET LEASE 9007199254740991 MAXATTEMPTS 2147483647",
    );
    let config = cmd(&mut c, "DQ.CONFIG q");
    assert_eq!(int(&field(&config, "lease-ms")), 9_007_199_254_740_991);
    assert_eq!(int(&field(&config, "max-attempts")), 2_147_483_647);
    // Any byte string names a queue, the empty one too.
    run(&mut c, &[b"DQ.ADD", b"", b"x", b"ID", b"a"]).expect("ADD to the queue ''");
    assert_eq!(
        int(&field(&run(&mut c, &[b"DQ.STATS", b""]).unwrap(), "ready")),
        1
    );
}
