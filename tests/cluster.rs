//! A 3-master Redis Cluster on loopback ports: queues of every name shape
//! work through a cluster client, each node's timer serves the queues it
//! owns, and a queue keeps every message while its slot moves to another
//! node.

use std::time::Duration;

use dq_testkit::*;

fn c_cmd(c: &mut redis::cluster::ClusterConnection, args: &[&[u8]]) -> Value {
    cluster_run(c, args).unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

fn popped(v: &Value) -> Vec<(String, i64)> {
    entries(v).into_iter().map(|(id, _, n)| (id, n)).collect()
}

#[test]
fn queue_names_of_every_shape_are_served_by_the_node_that_owns_them() {
    let cluster = Cluster::start(3);
    let mut c = cluster.client();
    let long = "q".repeat(300);
    let names: [&str; 8] = [
        "plain",
        "{tag}name",
        "a{b}c",
        "{}x",
        "x{",
        "}{",
        &long,
        "заказы-⏰",
    ];
    let mut owners = std::collections::HashSet::new();
    for name in names {
        let q = name.as_bytes();
        c_cmd(&mut c, &[b"DQ.ADD", q, b"now", b"ID", b"a"]);
        // Due in 100 ms: only the owning node's timer can make it ready.
        c_cmd(
            &mut c,
            &[b"DQ.ADD", q, b"later", b"ID", b"b", b"DELAY", b"100"],
        );
        assert_eq!(popped(&c_cmd(&mut c, &[b"DQ.POP", q])), [("a".into(), 1)]);
        assert_eq!(int(&c_cmd(&mut c, &[b"DQ.ACK", q, b"a"])), 1);
        let mut got = Vec::new();
        assert!(
            wait_until(LONG, || {
                got = popped(&c_cmd(&mut c, &[b"DQ.POP", q]));
                !got.is_empty()
            }),
            "{name}: the delayed message never became ready"
        );
        assert_eq!(got, [("b".into(), 1)], "{name}");
        // All of the queue's keys live on the node that owns the name.
        let owner = cluster.owner(q);
        owners.insert(owner);
        for (i, node) in cluster.nodes.iter().enumerate() {
            let mut n = node.conn();
            let keys = int(&cmd(&mut n, "DBSIZE"));
            let stats = run(&mut n, &[b"DQ.STATS", q]);
            if i == owner {
                assert!(keys > 0, "{name}");
                assert_eq!(int(&field(&stats.unwrap(), "acked")), 1, "{name}");
            } else {
                assert!(stats.unwrap_err().starts_with("MOVED"), "{name}");
            }
        }
        c_cmd(&mut c, &[b"DQ.PURGE", q]);
    }
    assert!(owners.len() >= 2, "the names should spread over the nodes");
    for node in &cluster.nodes {
        let keys: Vec<String> = match cmd(&mut node.conn(), "KEYS *") {
            Value::Array(k) => k.iter().map(text).collect(),
            other => panic!("{other:?}"),
        };
        // A purged queue stays, empty, with its counters: one key each.
        for key in keys {
            assert_eq!(
                text(&cmd(&mut node.conn(), &format!("TYPE {key}"))),
                "dq--queue"
            );
        }
    }
}

/// Moves the slot of a queue holding delayed, ready, in-flight, dead and
/// group-waiting messages to another node with `CLUSTER SETSLOT` and
/// MIGRATE, one key at a time with pauses in between, while a producer
/// adds to a second queue of the same slot and leases run out and messages
/// fall due. Each queue is one key, so it is wholly on one node or the
/// other, and the server's ASK redirection routes to it. Nothing may be
/// lost or changed on the way, and the new owner serves the queue without
/// a restart.
#[test]
fn a_queue_keeps_every_message_while_its_slot_moves() {
    let cluster = Cluster::start(3);
    let mut c = cluster.client();
    let q: &[u8] = b"orders";
    let add = |c: &mut redis::cluster::ClusterConnection, rest: &[&[u8]]| {
        let mut args: Vec<&[u8]> = vec![b"DQ.ADD", q, b"x"];
        args.extend_from_slice(rest);
        c_cmd(c, &args);
    };
    add(&mut c, &[b"ID", b"inflight"]);
    assert_eq!(
        popped(&c_cmd(&mut c, &[b"DQ.POP", q, b"LEASE", b"300"])).len(),
        1
    );
    add(&mut c, &[b"ID", b"dead", b"MAXATTEMPTS", b"1"]);
    c_cmd(&mut c, &[b"DQ.POP", q]);
    assert_eq!(text(&c_cmd(&mut c, &[b"DQ.NACK", q, b"dead"])), "dead");
    add(&mut c, &[b"ID", b"delayed", b"DELAY", b"400"]);
    add(&mut c, &[b"ID", b"ttl", b"DELAY", b"60000", b"TTL", b"500"]);
    add(&mut c, &[b"ID", b"ready"]);
    add(&mut c, &[b"ID", b"g1", b"GROUP", b"g", b"PRIORITY", b"-1"]);
    add(&mut c, &[b"ID", b"g2", b"GROUP", b"g", b"PRIORITY", b"-1"]);

    // Meanwhile a producer keeps adding to another queue of the same slot,
    // through a cluster client that follows ASK.
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    let stop = std::sync::Arc::new(AtomicBool::new(false));
    let count = std::sync::Arc::new(AtomicUsize::new(0));
    let producer = {
        let mut p = cluster.client();
        let (stop, count) = (stop.clone(), count.clone());
        std::thread::spawn(move || {
            let mut added = Vec::new();
            while !stop.load(Ordering::SeqCst) {
                let id = format!("live-{}", added.len());
                let args: [&[u8]; 5] = [b"DQ.ADD", b"{orders}live", b"x", b"ID", id.as_bytes()];
                cluster_run(&mut p, &args).unwrap_or_else(|e| panic!("{id}: {e}"));
                added.push(id);
                count.fetch_add(1, Ordering::SeqCst);
                std::thread::sleep(Duration::from_millis(5));
            }
            added
        })
    };
    let running = |n: usize| wait_until(LONG, || count.load(Ordering::SeqCst) >= n);
    assert!(running(5), "the producer should be adding before the move");
    let slot = int(&c_cmd(&mut c, &[b"CLUSTER", b"KEYSLOT", q])).to_string();
    let from = cluster.owner(q);
    let to = (from + 1) % 3;
    let (from_id, to_id) = (cluster.id(from), cluster.id(to));
    let mut src = cluster.nodes[from].conn();
    let mut dst = cluster.nodes[to].conn();
    cmd(
        &mut dst,
        &format!("CLUSTER SETSLOT {slot} IMPORTING {from_id}"),
    );
    cmd(
        &mut src,
        &format!("CLUSTER SETSLOT {slot} MIGRATING {to_id}"),
    );
    let dst_port = cluster.nodes[to].port.to_string();
    let mut batches = 0;
    loop {
        let keys = match cmd(&mut src, &format!("CLUSTER GETKEYSINSLOT {slot} 1")) {
            Value::Array(k) => k,
            other => panic!("{other:?}"),
        };
        if keys.is_empty() {
            break;
        }
        let mut args: Vec<Vec<u8>> = ["MIGRATE", "127.0.0.1", &dst_port, "", "0", "60000", "KEYS"]
            .iter()
            .map(|s| s.as_bytes().to_vec())
            .collect();
        args.extend(keys.iter().map(|k| text(k).into_bytes()));
        let args: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
        run(&mut src, &args).unwrap();
        batches += 1;
        // A moved queue is asked for on the importing node.
        let moved = text(&keys[0]).into_bytes();
        let err = run(&mut src, &[b"DQ.STATS", &moved]).unwrap_err();
        assert!(err.starts_with("ASK"), "{err}");
        cmd(&mut dst, "ASKING");
        run(&mut dst, &[b"DQ.STATS", &moved]).unwrap();
        // Leases end, messages and TTLs fall due meanwhile.
        std::thread::sleep(Duration::from_millis(150));
    }
    assert_eq!(batches, 2, "two queues, one key each");
    for node in &cluster.nodes {
        cmd(
            &mut node.conn(),
            &format!("CLUSTER SETSLOT {slot} NODE {to_id}"),
        );
    }

    let before = count.load(Ordering::SeqCst);
    assert!(
        running(before + 5),
        "the producer should go on after the move"
    );
    stop.store(true, Ordering::SeqCst);
    let live_added = producer.join().unwrap();
    let mut live_seen = std::collections::HashSet::new();
    assert!(
        wait_until(LONG, || {
            let got = c_cmd(&mut c, &[b"DQ.POP", b"{orders}live", b"COUNT", b"1000"]);
            live_seen.extend(popped(&got).into_iter().map(|e| e.0));
            live_seen.len() == live_added.len()
        }),
        "{} of {} delivered",
        live_seen.len(),
        live_added.len()
    );

    // The new owner serves everything.
    let mut seen: Vec<(String, i64)> = Vec::new();
    assert!(
        wait_until(LONG, || {
            for entry in popped(&c_cmd(
                &mut c,
                &[b"DQ.POP", q, b"COUNT", b"10", b"LEASE", b"60000"],
            )) {
                let id = entry.0.clone();
                seen.push(entry);
                c_cmd(&mut c, &[b"DQ.ACK", q, id.as_bytes()]);
            }
            seen.len() == 5
        }),
        "delivered after the move: {seen:?}"
    );
    seen.sort();
    assert_eq!(
        seen,
        [
            ("delayed".into(), 1),
            ("g1".into(), 1),
            ("g2".into(), 1),
            ("inflight".into(), 2),
            ("ready".into(), 1)
        ]
    );
    assert!(
        wait_until(LONG, || {
            int(&field(&c_cmd(&mut c, &[b"DQ.STATS", q]), "dead")) == 2
        }),
        "the NACKed one and the expired one"
    );
    let ttl = c_cmd(&mut c, &[b"DQ.GET", q, b"ttl"]);
    assert_eq!(text(&field(&ttl, "dead-reason")), "expired");
    assert_eq!(int(&cmd(&mut cluster.nodes[from].conn(), "DBSIZE")), 0);
}
