//! The Rust client against real servers: a sharded queue of 8 shards on a
//! 3-master cluster; on one server the calls' typed errors, lease
//! heartbeats, a graceful stop and a panicking handler.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use dq_client::{
    AddOptions, CancellationToken, Consumer, ConsumerConfig, Delivery, Error, Handler, NackOptions,
    Outcome, Queue, Server as DqServer, ShardedQueue,
};
use dq_testkit::{cmd, field, int, text, Cluster, Server, LONG};

/// What the test handler saw, in order.
#[derive(Default)]
struct Seen {
    /// (queue, id, attempt) of every delivery, in the order handled.
    deliveries: Vec<(String, String, u64)>,
}

struct Record(Arc<Mutex<Seen>>);

impl Handler for Record {
    async fn handle(&self, d: &Delivery) -> Outcome {
        self.0.lock().unwrap().deliveries.push((
            d.queue.clone(),
            d.id_lossy().into_owned(),
            d.attempt,
        ));
        // A little work, so that concurrency and the share of slots matter.
        tokio::time::sleep(Duration::from_millis(1)).await;
        Outcome::Ack
    }
}

fn config() -> ConsumerConfig {
    ConsumerConfig {
        concurrency: 4,
        batch: 16,
        block: Duration::from_millis(200),
        lease: Duration::from_secs(30),
        ..ConsumerConfig::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sharded_queue_spreads_over_every_master_and_delivers_each_message_once() {
    let cluster = Cluster::start(3);
    let server = DqServer::cluster(cluster.nodes.iter().map(|n| n.url())).unwrap();
    let con = server.connect(Duration::from_secs(5)).await.unwrap();
    let queue = ShardedQueue::new(con.clone(), "jobs", 8).unwrap();

    // The 8 shards sit on all three masters.
    let owners: HashSet<usize> = queue
        .shards()
        .names()
        .iter()
        .map(|n| cluster.owner(n.as_bytes()))
        .collect();
    assert_eq!(owners.len(), 3, "shards on masters {owners:?}");

    // 1600 messages by random id and 400 in 8 groups of 50, all due now.
    let mut ids = HashSet::new();
    let mut groups: HashMap<String, Vec<String>> = HashMap::new();
    for i in 0..2000 {
        let mut o = AddOptions::default();
        if i % 5 == 0 {
            let g = format!("g{}", i % 8);
            o.group = Some(g.clone().into_bytes());
            o.id = Some(format!("m{i}").into_bytes());
            groups.entry(g).or_default().push(format!("m{i}"));
        }
        let id = queue
            .add(format!("{i}").as_bytes(), &o)
            .await
            .unwrap()
            .unwrap();
        assert!(ids.insert(String::from_utf8(id).unwrap()));
    }
    // Every shard holds a fair part of the backlog (expected 250 each).
    let mut backlog = HashMap::new();
    for name in queue.shards().names() {
        let ready = int(&field(&cluster_cmd(&cluster, &["DQ.STATS", name]), "ready"));
        assert!(ready > 100, "shard {name} holds only {ready}");
        backlog.insert(name.clone(), ready as usize);
    }

    // The admin calls see the sharded queue as one.
    let total = queue.stats().await.unwrap();
    assert_eq!(total.ready + total.delayed, 2000);
    assert_eq!(total.added, 2000);
    let by_basis = queue.get(b"m5", Some(b"g5")).await.unwrap().unwrap();
    let by_search = queue.get(b"m5", None).await.unwrap().unwrap();
    assert_eq!(by_basis.0, queue.shards().route(b"g5"));
    assert_eq!(by_basis, by_search);
    assert_eq!(text_of(&by_basis.1.payload), "5");

    let seen = Arc::new(Mutex::new(Seen::default()));
    let consumer = Consumer::sharded(server, queue.shards(), config()).unwrap();
    let stop = CancellationToken::new();
    let run = {
        let (seen, stop) = (Arc::clone(&seen), stop.clone());
        tokio::spawn(async move { consumer.run(Arc::new(Record(seen)), stop).await })
    };
    let done = || seen.lock().unwrap().deliveries.len() >= 2000;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while !done() && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    stop.cancel();
    run.await.unwrap().unwrap();

    assert_eq!(queue.stats().await.unwrap().acked, 2000);
    let seen = seen.lock().unwrap();
    // Each message exactly once, on its first attempt.
    assert_eq!(seen.deliveries.len(), 2000);
    let got: HashSet<&String> = seen.deliveries.iter().map(|(_, id, _)| id).collect();
    assert_eq!(got.len(), 2000);
    assert!(seen
        .deliveries
        .iter()
        .all(|(_, id, a)| *a == 1 && ids.contains(id)));
    // Acked once: the shards' ACK counters sum to 2000, nothing left.
    let mut acked = 0;
    for name in queue.shards().names() {
        let stats = cluster_cmd(&cluster, &["DQ.STATS", name]);
        acked += int(&field(&stats, "acked"));
        for state in ["delayed", "ready", "inflight", "dead"] {
            assert_eq!(int(&field(&stats, state)), 0, "{name} {state}");
        }
    }
    assert_eq!(acked, 2000);
    // A group's messages in the order they were added.
    for (g, order) in &groups {
        let handled: Vec<&String> = seen
            .deliveries
            .iter()
            .map(|(_, id, _)| id)
            .filter(|id| order.contains(id))
            .collect();
        assert_eq!(handled, order.iter().collect::<Vec<_>>(), "group {g}");
    }
    // A fair share: by the time half the messages were handled, every shard
    // had given at least a quarter of its backlog.
    let mut first_half: HashMap<&str, usize> = HashMap::new();
    for (q, _, _) in &seen.deliveries[..1000] {
        *first_half.entry(q.as_str()).or_default() += 1;
    }
    for (name, total) in &backlog {
        let given = first_half.get(name.as_str()).copied().unwrap_or(0);
        assert!(
            given * 4 >= *total,
            "shard {name}: {given} of {total} in the first half"
        );
    }
}

fn text_of(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A command on the master that owns its queue.
fn cluster_cmd(cluster: &Cluster, args: &[&str]) -> redis::Value {
    let node = cluster.owner(args[1].as_bytes());
    cmd(&mut cluster.nodes[node].conn(), &args.join(" "))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_fail_with_typed_errors() {
    let server = Server::start();
    let dq = DqServer::single(server.url()).unwrap();
    let con = dq.connect(Duration::from_secs(5)).await.unwrap();
    let q = Queue::new(con.clone(), "typed");
    let id = q.add(b"p", &AddOptions::default()).await.unwrap().unwrap();

    // Not in flight: NACK and TOUCH without ATTEMPT say so.
    let e = q.nack(&id, &NackOptions::default()).await.unwrap_err();
    assert!(matches!(e, Error::UnknownMessage { .. }), "{e:?}");
    let e = q.touch(&id, None, None).await.unwrap_err();
    assert!(matches!(e, Error::UnknownMessage { .. }), "{e:?}");

    // A fenced NACK of a delivery that is over is STALE, and NACK with
    // ERROR keeps the text.
    let mut c = server.conn();
    cmd(&mut c, "DQ.POP typed");
    let stale = NackOptions {
        attempt: Some(7),
        ..NackOptions::default()
    };
    let e = q.nack(&id, &stale).await.unwrap_err();
    assert!(
        matches!(&e, Error::StaleDelivery(t) if t.starts_with("STALE delivery 7")),
        "{e:?}"
    );
    let dead = NackOptions {
        dead: true,
        attempt: Some(1),
        error: Some("HTTP 410".into()),
        ..NackOptions::default()
    };
    assert_eq!(
        q.nack(&id, &dead).await.unwrap(),
        dq_client::NackState::Dead
    );
    let got = cmd(
        &mut c,
        &format!("DQ.GET typed {}", String::from_utf8_lossy(&id)),
    );
    assert_eq!(text(&field(&got, "last-error")), "HTTP 410");
    assert_eq!(text(&field(&got, "dead-reason")), "permanent");

    // WRONGTYPE, and OOM under maxmemory.
    cmd(&mut c, "SET plain x");
    let e = Queue::new(con.clone(), "plain")
        .add(b"p", &AddOptions::default())
        .await
        .unwrap_err();
    assert!(matches!(e, Error::WrongType(_)), "{e:?}");
    cmd(&mut c, "CONFIG SET maxmemory 1");
    let e = q.add(b"p", &AddOptions::default()).await.unwrap_err();
    cmd(&mut c, "CONFIG SET maxmemory 0");
    assert!(matches!(e, Error::OutOfMemory(_)), "{e:?}");
    cmd(&mut c, "CONFIG SET maxmemory-policy allkeys-lru");
    cmd(&mut c, "CONFIG SET maxmemory 1gb");
    let e = q.add(b"p", &AddOptions::default()).await.unwrap_err();
    assert!(
        matches!(e, Error::OutOfMemory(ref t) if t.contains("allkeys-lru")),
        "{e:?}"
    );

    // Any other refusal is the server's error, untouched.
    let bad = AddOptions {
        backoff: Some("soon".into()),
        ..AddOptions::default()
    };
    let e = q.add(b"p", &bad).await.unwrap_err();
    assert!(
        matches!(&e, Error::Redis(r) if r.to_string().contains("BACKOFF must be")),
        "{e:?}"
    );
    // What the server would refuse for its shape is refused before it is
    // sent (tests/vectors/commands.json has every such call).
    let bad = AddOptions {
        xx: true,
        ..AddOptions::default()
    };
    let e = q.add(b"p", &bad).await.unwrap_err();
    assert!(
        matches!(&e, Error::Config(t) if t.contains("xx needs an id")),
        "{e:?}"
    );
}

/// Sleeps for the time its payload names (ms), or panics on "panic".
struct Work;

impl Handler for Work {
    async fn handle(&self, d: &Delivery) -> Outcome {
        let text = String::from_utf8_lossy(&d.payload).into_owned();
        if text == "panic" {
            panic!("boom in {}", d.id_lossy());
        }
        let ms = text.parse().unwrap_or(0);
        tokio::time::sleep(Duration::from_millis(ms)).await;
        Outcome::Ack
    }
}

fn stats(c: &mut redis::Connection, queue: &str, f: &str) -> i64 {
    int(&field(&cmd(c, &format!("DQ.STATS {queue}")), f))
}

/// Runs a consumer of `queue` with [`Work`] until the token is cancelled.
fn consume(
    server: &Server,
    queue: &str,
    config: ConsumerConfig,
) -> (
    CancellationToken,
    tokio::task::JoinHandle<Result<(), Error>>,
) {
    let dq = DqServer::single(server.url()).unwrap();
    let consumer = Consumer::new(dq, vec![queue.into()], config).unwrap();
    let stop = CancellationToken::new();
    let token = stop.clone();
    let run = tokio::spawn(async move { consumer.run(Arc::new(Work), token).await });
    (stop, run)
}

async fn wait_for(mut condition: impl FnMut() -> bool) -> bool {
    let deadline = tokio::time::Instant::now() + LONG;
    while !condition() {
        if tokio::time::Instant::now() > deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    true
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lease_is_kept_alive_past_its_first_deadline() {
    let server = Server::start();
    let mut c = server.conn();
    // The work takes three leases; heartbeats, every third of a lease, keep
    // it one delivery. A machine that stalls the consumer for two thirds of
    // a lease loses the lease whatever the heartbeat does: then a fresh
    // queue tries a lease four times longer. A heartbeat that does not work
    // loses every one.
    let mut lease = 300;
    loop {
        let q = format!("slow{lease}");
        cmd(&mut c, &format!("DQ.ADD {q} {} ID long", 3 * lease));
        let config = ConsumerConfig {
            lease: Duration::from_millis(lease),
            ..config()
        };
        let (stop, run) = consume(&server, &q, config);
        assert!(wait_for(|| stats(&mut c, &q, "acked") == 1).await);
        stop.cancel();
        run.await.unwrap().unwrap();
        let delivered = stats(&mut c, &q, "delivered");
        let expired = stats(&mut c, &q, "lease-expired");
        if (delivered, expired) == (1, 0) {
            return;
        }
        assert!(
            lease < 4_800,
            "with a lease of {lease} ms: {delivered} deliveries, {expired} leases ran out"
        );
        lease *= 4;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_graceful_stop_loses_nothing() {
    let server = Server::start();
    let mut c = server.conn();
    // The stop must come while messages are still queued, or it tests
    // nothing: when the consumer handled them all first (the test's look
    // came late), a fresh queue tries four times as many.
    let mut n = 60;
    loop {
        let q = format!("stop{n}");
        for i in 0..n {
            cmd(&mut c, &format!("DQ.ADD {q} 40 ID m{i}"));
        }
        let (stop, run) = consume(&server, &q, config());
        // Stop while handlers run: run() returns once they are settled.
        assert!(wait_for(|| stats(&mut c, &q, "acked") >= 8).await);
        stop.cancel();
        run.await.unwrap().unwrap();
        let (acked, ready) = (stats(&mut c, &q, "acked"), stats(&mut c, &q, "ready"));
        assert_eq!(stats(&mut c, &q, "inflight"), 0);
        assert_eq!(acked + ready, n, "acked {acked} + ready {ready}");
        if ready > 0 {
            return;
        }
        assert!(
            n < 3840,
            "the stop came after all {n} messages were handled"
        );
        n *= 4;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_handler_fails_the_delivery_with_its_message() {
    let server = Server::start();
    let mut c = server.conn();
    cmd(&mut c, "DQ.ADD p panic ID bad BACKOFF fixed:1h");
    let (stop, run) = consume(&server, "p", config());
    assert!(wait_for(|| stats(&mut c, "p", "nacked") == 1).await);
    stop.cancel();
    run.await.unwrap().unwrap();
    let got = cmd(&mut c, "DQ.GET p bad");
    assert_eq!(text(&field(&got, "state")), "delayed");
    assert_eq!(
        text(&field(&got, "last-error")),
        "the handler panicked: boom in bad"
    );
}
