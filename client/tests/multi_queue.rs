//! A Worker over several queues (`Consumer::over`): one DQ.MPOP in the
//! order given when one can serve them (a single server; a cluster with
//! every name in one hash slot), else one poller per queue; every
//! delivery settled on the queue it came from.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use dq_client::{
    CancellationToken, Consumer, ConsumerConfig, Delivery, Error, Handler, Outcome,
    Server as DqServer, Shards, Source, Worker, WorkerConfig,
};
use dq_testkit::{cmd, field, int, Cluster, Server, LONG};

/// Records the queue of each delivery; fails those of queues named
/// `*fail*` for good.
struct Record(Arc<Mutex<Vec<String>>>);

impl Handler for Record {
    async fn handle(&self, d: &Delivery) -> Outcome {
        self.0.lock().unwrap().push(d.queue.clone());
        if d.queue.contains("fail") {
            return Outcome::Dead { error: "no".into() };
        }
        Outcome::Ack
    }
}

fn config() -> WorkerConfig {
    WorkerConfig {
        concurrency: 1,
        block: Duration::from_millis(200),
        ..WorkerConfig::default()
    }
}

/// How many times a server ran `command`, from INFO commandstats.
fn calls(con: &mut redis::Connection, command: &str) -> u64 {
    let info: String = redis::cmd("INFO").arg("commandstats").query(con).unwrap();
    let prefix = format!("cmdstat_{command}:calls=");
    info.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .and_then(|rest| rest.split(',').next())
        .map(|n| n.parse().unwrap())
        .unwrap_or(0)
}

/// Runs `worker` until `n` deliveries were handled; their queues in order.
async fn consume(worker: Consumer, n: usize) -> Vec<String> {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let stop = CancellationToken::new();
    let run = {
        let (seen, stop) = (Arc::clone(&seen), stop.clone());
        tokio::spawn(async move { worker.run(Arc::new(Record(seen)), stop).await })
    };
    let deadline = tokio::time::Instant::now() + LONG;
    while seen.lock().unwrap().len() < n && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    stop.cancel();
    run.await.unwrap().unwrap();
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), n, "{seen:?}");
    seen
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_server_is_polled_with_one_mpop_in_strict_order() {
    let server = Server::start();
    let mut c = server.conn();
    // Filled before the worker starts: everything is ready at once, so
    // strict order means every urgent one first, then every failing one,
    // then the bulk.
    for (queue, n) in [("bulk", 5), ("fail", 3), ("urgent", 4)] {
        for i in 0..n {
            cmd(&mut c, &format!("DQ.ADD {queue} x ID {queue}{i}"));
        }
    }
    let (pops, mpops) = (calls(&mut c, "dq.pop"), calls(&mut c, "dq.mpop"));
    let dq = DqServer::single(server.url()).unwrap();
    let worker = Worker::over(dq, ["urgent", "fail", "bulk"], config()).unwrap();
    assert!(worker.polls_in_order());
    let seen = consume(worker, 12).await;
    let expected: Vec<&str> = [["urgent"; 4].as_slice(), &["fail"; 3], &["bulk"; 5]].concat();
    assert_eq!(seen, expected);
    assert_eq!(calls(&mut c, "dq.pop"), pops);
    assert!(calls(&mut c, "dq.mpop") > mpops);
    // Each settled on its own queue.
    let stat = |c: &mut redis::Connection, q: &str, f: &str| {
        int(&field(&cmd(c, &format!("DQ.STATS {q}")), f))
    };
    assert_eq!(stat(&mut c, "urgent", "acked"), 4);
    assert_eq!(stat(&mut c, "bulk", "acked"), 5);
    assert_eq!(stat(&mut c, "fail", "dead"), 3);
    for q in ["urgent", "fail", "bulk"] {
        assert_eq!(stat(&mut c, q, "inflight"), 0, "{q}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_queue_is_passed_over_and_a_blocked_mpop_is_served() {
    let server = Server::start();
    let mut c = server.conn();
    cmd(&mut c, "DQ.PAUSE first");
    for i in 0..3 {
        cmd(&mut c, &format!("DQ.ADD first x ID f{i}"));
    }
    let dq = DqServer::single(server.url()).unwrap();
    let worker = Worker::over(dq, ["first", "second"], config()).unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let stop = CancellationToken::new();
    let run = {
        let (seen, stop) = (Arc::clone(&seen), stop.clone());
        tokio::spawn(async move { worker.run(Arc::new(Record(seen)), stop).await })
    };
    // The worker waits in a blocking MPOP; a message on the second queue
    // reaches it, the paused first queue's do not.
    cmd(&mut c, "DQ.ADD second y ID s0");
    let deadline = tokio::time::Instant::now() + LONG;
    while seen.lock().unwrap().is_empty() && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(*seen.lock().unwrap(), ["second"]);
    cmd(&mut c, "DQ.RESUME first");
    while seen.lock().unwrap().len() < 4 && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    stop.cancel();
    run.await.unwrap().unwrap();
    assert_eq!(*seen.lock().unwrap(), ["second", "first", "first", "first"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_uses_mpop_on_one_slot_and_one_poller_per_queue_across_slots() {
    let cluster = Cluster::start(3);
    let server = || DqServer::cluster(cluster.nodes.iter().map(|n| n.url())).unwrap();
    let calls_everywhere = |command: &str| -> u64 {
        cluster
            .nodes
            .iter()
            .map(|n| calls(&mut n.conn(), command))
            .sum()
    };
    let add = |queue: &str, n: usize| {
        let node = &cluster.nodes[cluster.owner(queue.as_bytes())];
        let mut c = node.conn();
        for i in 0..n {
            cmd(&mut c, &format!("DQ.ADD {queue} x ID m{i}"));
        }
    };

    // One hash tag, one slot: one DQ.MPOP, in order.
    add("{jobs}bulk", 3);
    add("{jobs}urgent", 3);
    let (pops, mpops) = (calls_everywhere("dq.pop"), calls_everywhere("dq.mpop"));
    let worker = Worker::over(server(), ["{jobs}urgent", "{jobs}bulk"], config()).unwrap();
    assert!(worker.polls_in_order());
    let seen = consume(worker, 6).await;
    assert_eq!(
        seen,
        [
            "{jobs}urgent",
            "{jobs}urgent",
            "{jobs}urgent",
            "{jobs}bulk",
            "{jobs}bulk",
            "{jobs}bulk"
        ]
    );
    assert_eq!(calls_everywhere("dq.pop"), pops);
    assert!(calls_everywhere("dq.mpop") > mpops);

    // Names in several slots (on several masters): one poller per queue.
    let a = "alpha";
    let b = ["beta", "gamma", "delta", "omega", "kappa", "sigma"]
        .into_iter()
        .find(|b| cluster.owner(b.as_bytes()) != cluster.owner(a.as_bytes()))
        .expect("a name on another master");
    add(a, 4);
    add(b, 4);
    let (pops, mpops) = (calls_everywhere("dq.pop"), calls_everywhere("dq.mpop"));
    let worker = Worker::over(server(), [a, b], config()).unwrap();
    assert!(!worker.polls_in_order());
    let mut seen = consume(worker, 8).await;
    seen.sort();
    assert_eq!(seen, [[a; 4], [b; 4]].concat());
    assert_eq!(calls_everywhere("dq.mpop"), mpops);
    assert!(calls_everywhere("dq.pop") > pops);
    for q in [a, b, "{jobs}urgent", "{jobs}bulk"] {
        let node = &cluster.nodes[cluster.owner(q.as_bytes())];
        let stats = cmd(&mut node.conn(), &format!("DQ.STATS {q}"));
        assert_eq!(
            int(&field(&stats, "acked")),
            if q.contains("jobs") { 3 } else { 4 }
        );
        assert_eq!(int(&field(&stats, "inflight")), 0, "{q}");
    }
}

#[test]
fn which_way_a_worker_polls() {
    let single = || DqServer::single("redis://127.0.0.1:1").unwrap();
    let cluster = || DqServer::cluster(["redis://127.0.0.1:1"]).unwrap();
    let config = ConsumerConfig::default;
    let polls = |w: Result<Consumer, Error>| w.unwrap().polls_in_order();

    assert!(polls(Worker::over(single(), ["a", "b"], config())));
    assert!(!polls(Worker::over(single(), ["a"], config())));
    assert!(polls(Worker::over(
        cluster(),
        ["{t}a", "{t}b", "x{t}"],
        config()
    )));
    assert!(!polls(Worker::over(cluster(), ["{t}a", "{u}b"], config())));
    // A sharded queue's shards are in several slots by design.
    let shards = Shards::new("s", 4).unwrap();
    let mixed = [Source::from("a"), Source::from(&shards)];
    assert!(!polls(Worker::over(single(), mixed, config())));
    assert!(!polls(Worker::over(single(), [&shards], config())));
    // Consumer::new keeps each queue on its own.
    assert!(
        !Worker::new(single(), vec!["a".into(), "b".into()], config())
            .unwrap()
            .polls_in_order()
    );

    for bad in [vec!["a", "b", "a"], vec![]] {
        let e = Worker::over(single(), bad, config()).err().unwrap();
        assert!(matches!(e, Error::Config(_)), "{e:?}");
    }
    let twice = [
        Source::from(&shards),
        Source::from(shards.names()[1].as_str()),
    ];
    assert!(matches!(
        Worker::over(single(), twice, config()),
        Err(Error::Config(_))
    ));
}
