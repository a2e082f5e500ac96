//! Job outcomes through the Rust client, against real servers: a Worker
//! handler's result reaches DQ.WAIT (and DQ.GET), a plain ACK keeps no
//! result, progress is fenced by the delivery's attempt, waits time out
//! and never hold up the queue's shared connection, a sharded queue's wait
//! goes to the id's shard across a cluster's masters, and the admin calls
//! read and act on the `done` state and the retention settings (RESP2 and
//! RESP3).

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use dq_client::admin;
use dq_client::{
    AddOptions, CancellationToken, Delivery, Error, Handler, JobOutcome, Outcome, Queue,
    Server as DqServer, Settlement, ShardedQueue, State, Worker, WorkerConfig,
};
use dq_testkit::{cmd, field, int, text, Cluster, Server, LONG};
use tokio::sync::Notify;
use tokio::time::Instant;

fn config() -> WorkerConfig {
    WorkerConfig {
        concurrency: 8,
        batch: 16,
        block: Duration::from_millis(200),
        ..WorkerConfig::default()
    }
}

async fn queue(server: &Server, name: &str) -> Queue {
    let con = DqServer::single(server.url().as_str())
        .unwrap()
        .connect(Duration::from_secs(5))
        .await
        .unwrap();
    Queue::new(con, name)
}

fn add_id(id: &str) -> AddOptions {
    AddOptions {
        id: Some(id.as_bytes().to_vec()),
        ..AddOptions::default()
    }
}

/// Polls `check` until it holds or LONG has passed.
async fn eventually(mut check: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + LONG;
    while Instant::now() < deadline {
        if check() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    check()
}

/// Runs a worker with `handler` on `queues` until `stop` is cancelled.
fn spawn_worker<H: Handler>(
    server: &Server,
    queues: &[&str],
    handler: H,
    stop: &CancellationToken,
) -> tokio::task::JoinHandle<Result<(), Error>> {
    let queues = queues.iter().map(|q| q.to_string()).collect();
    let worker = Worker::new(
        DqServer::single(server.url().as_str()).unwrap(),
        queues,
        config(),
    )
    .unwrap();
    let stop = stop.clone();
    tokio::spawn(async move { worker.run(Arc::new(handler), stop).await })
}

/// Returns the payload reversed as the result for ids starting with `r`,
/// nothing (a plain ACK) for the others; records each settlement.
/// (id, action, settlement state) of each delivery.
type Settled = Vec<(String, &'static str, String)>;

#[derive(Clone, Default)]
struct Results {
    settled: Arc<Mutex<Settled>>,
}

impl Handler for Results {
    async fn handle(&self, d: &Delivery) -> Outcome {
        if d.id.starts_with(b"r") {
            let mut result = d.payload.clone();
            result.reverse();
            Outcome::Done(result)
        } else {
            Outcome::Ack
        }
    }

    fn settled(&self, d: &Delivery, outcome: Option<&Outcome>, settlement: &Settlement) {
        let action = outcome.map_or("none", Outcome::action);
        self.settled.lock().unwrap().push((
            d.id_lossy().into_owned(),
            action,
            settlement.state().to_owned(),
        ));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handlers_result_reaches_wait_and_a_plain_ack_keeps_none() {
    let server = Server::start();
    let mut c = server.conn();
    let jobs = queue(&server, "jobs").await;
    jobs.config_set(&[("RETAIN", "1h")]).await.unwrap();

    // Waiters that start before the work is done are answered by it.
    let mut waiters = Vec::new();
    for i in 0..20 {
        let id = format!("{}{i}", if i % 2 == 0 { "r" } else { "a" });
        jobs.add(format!("payload-{i}").as_bytes(), &add_id(&id))
            .await
            .unwrap();
        let q = jobs.clone();
        waiters.push((
            i,
            tokio::spawn(async move { q.wait(id.as_bytes(), LONG).await }),
        ));
    }
    let results = Results::default();
    let stop = CancellationToken::new();
    let run = spawn_worker(&server, &["jobs"], results.clone(), &stop);
    for (i, waiter) in waiters {
        let got = waiter.await.unwrap().unwrap();
        let want = if i % 2 == 0 {
            let mut r = format!("payload-{i}").into_bytes();
            r.reverse();
            Some(r)
        } else {
            None
        };
        assert_eq!(got, Some(JobOutcome::Done(want)), "message {i}");
    }
    assert!(eventually(|| results.settled.lock().unwrap().len() == 20).await);
    stop.cancel();
    run.await.unwrap().unwrap();

    for (id, action, state) in results.settled.lock().unwrap().iter() {
        let want = if id.starts_with('r') { "done" } else { "ack" };
        assert_eq!((*action, state.as_str()), (want, "acked"), "{id}");
    }
    // DQ.GET shows the result and when the message finished; the server
    // counts both kinds as acked and holds them as done.
    let m = jobs.get(b"r4").await.unwrap().unwrap();
    assert_eq!(m.state(), Some(State::Done));
    assert_eq!(m.result.as_deref(), Some(&b"4-daolyap"[..]));
    let finished = m.finished_at.unwrap();
    assert_eq!(m.retained_until, Some(finished + 3_600_000));
    assert_eq!(jobs.get(b"a1").await.unwrap().unwrap().result, None);
    let stats = jobs.stats().await.unwrap();
    assert_eq!((stats.acked, stats.done, stats.total()), (20, 20, 20));
    // The results went by DQ.DONE, the plain ones by DQ.ACK: one command
    // per kind per batch, never one per message.
    let mut calls = |name: &str| -> i64 {
        let info = text(&cmd(&mut c, "INFO commandstats"));
        info.lines()
            .find_map(|l| l.strip_prefix(&format!("cmdstat_{name}:calls=")))
            .and_then(|rest| rest.split(',').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or(0)
    };
    let (done, ack) = (calls("dq.done"), calls("dq.ack"));
    assert!((1..=10).contains(&done), "{done} DQ.DONE for 10 results");
    assert!((1..=10).contains(&ack), "{ack} DQ.ACK for 10 plain ends");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_retain_a_finished_job_is_gone_and_with_its_own_retain_it_is_kept() {
    let server = Server::start();
    let jobs = queue(&server, "jobs").await;
    jobs.add(b"x", &add_id("r-forgotten")).await.unwrap();
    let kept = AddOptions {
        retain: Some(Duration::from_secs(600)),
        ..add_id("r-kept")
    };
    jobs.add(b"y", &kept).await.unwrap();
    let stop = CancellationToken::new();
    let run = spawn_worker(&server, &["jobs"], Results::default(), &stop);
    assert_eq!(
        jobs.wait(b"r-kept", LONG).await.unwrap(),
        Some(JobOutcome::Done(Some(b"y".to_vec())))
    );
    assert_eq!(
        jobs.wait(b"r-forgotten", LONG).await.unwrap(),
        Some(JobOutcome::Gone)
    );
    stop.cancel();
    run.await.unwrap().unwrap();
    let m = jobs.get(b"r-kept").await.unwrap().unwrap();
    assert_eq!(
        m.retained_until.unwrap() - m.finished_at.unwrap(),
        600_000,
        "the message's own RETAIN"
    );
    assert_eq!(jobs.get(b"r-forgotten").await.unwrap(), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_looks_once_times_out_with_none_and_tells_dead_and_gone() {
    let server = Server::start();
    let mut c = server.conn();
    let jobs = queue(&server, "jobs").await;
    jobs.add(b"x", &add_id("pending")).await.unwrap();
    assert_eq!(jobs.wait(b"pending", Duration::ZERO).await.unwrap(), None);
    let started = Instant::now();
    assert_eq!(
        jobs.wait(b"pending", Duration::from_millis(150))
            .await
            .unwrap(),
        None
    );
    assert!(started.elapsed() >= Duration::from_millis(150));
    assert_eq!(
        jobs.wait(b"never-added", LONG).await.unwrap(),
        Some(JobOutcome::Gone)
    );
    assert_eq!(
        Queue::new(jobs_con(&server).await, "no-such-queue")
            .wait(b"a", LONG)
            .await
            .unwrap(),
        Some(JobOutcome::Gone)
    );
    // A dead letter's outcome is its last error.
    cmd(&mut c, "DQ.ADD jobs y ID failing");
    let popped = cmd(&mut c, "DQ.POP jobs COUNT 10 LEASE 60000");
    assert!(format!("{popped:?}").contains("failing"));
    let waiter = {
        let q = jobs.clone();
        tokio::spawn(async move { q.wait(b"failing", LONG).await })
    };
    cmd(&mut c, "DQ.NACK jobs failing DEAD ERROR HTTP-410");
    assert_eq!(
        waiter.await.unwrap().unwrap(),
        Some(JobOutcome::Dead(Some(b"HTTP-410".to_vec())))
    );
    // An empty id is refused before anything is sent.
    assert!(matches!(jobs.wait(b"", LONG).await, Err(Error::Config(_))));
    // A key of another type.
    cmd(&mut c, "SET str x");
    assert!(matches!(
        Queue::new(jobs_con(&server).await, "str")
            .wait(b"a", Duration::from_millis(10))
            .await,
        Err(Error::WrongType(_))
    ));
}

async fn jobs_con(server: &Server) -> dq_client::Connection {
    DqServer::single(server.url().as_str())
        .unwrap()
        .connect(Duration::from_secs(5))
        .await
        .unwrap()
}

/// The number of clients the server holds blocked now.
fn blocked(c: &mut redis::Connection) -> i64 {
    let info = text(&cmd(c, "INFO clients"));
    info.lines()
        .find_map(|l| l.strip_prefix("blocked_clients:"))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(-1)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_never_holds_up_the_queues_shared_connection_and_a_dropped_one_ends() {
    let server = Server::start();
    let mut c = server.conn();
    let jobs = queue(&server, "jobs").await;
    jobs.add(b"x", &add_id("slow")).await.unwrap();
    let waiting = {
        let q = jobs.clone();
        tokio::spawn(async move { q.wait(b"slow", LONG).await })
    };
    assert!(eventually(|| blocked(&mut c) == 1).await, "the wait blocks");
    // The same handle (and its one shared connection) serves other calls
    // meanwhile: had the wait been sent on it, these would come after it.
    for more in 0..3 {
        assert_eq!(jobs.stats().await.unwrap().ready, 1 + more);
        jobs.add(b"more", &AddOptions::default()).await.unwrap();
    }
    assert!(!waiting.is_finished(), "the wait is still waiting");
    // Dropping a wait (a caller's own timeout) closes its connection: the
    // server stops waiting too, and the next wait works.
    waiting.abort();
    assert!(waiting.await.unwrap_err().is_cancelled());
    assert!(
        eventually(|| blocked(&mut c) == 0).await,
        "the dropped wait ended"
    );
    let again = {
        let q = jobs.clone();
        tokio::spawn(async move { q.wait(b"slow", LONG).await })
    };
    assert!(eventually(|| blocked(&mut c) == 1).await);
    cmd(&mut c, "DQ.CANCEL jobs slow");
    assert_eq!(again.await.unwrap().unwrap(), Some(JobOutcome::Gone));
}

/// Reports progress, lets the test look, then reports again: refused once
/// the test has cancelled the message under it.
struct Reporting {
    reported: Arc<Notify>,
    go_on: Arc<Notify>,
    second: Arc<Mutex<Option<Result<u64, Error>>>>,
}

impl Handler for Reporting {
    async fn handle(&self, d: &Delivery) -> Outcome {
        let deadline = d
            .progress("step 1/2")
            .await
            .expect("progress while it holds");
        assert!(deadline > 0);
        self.reported.notify_one();
        self.go_on.notified().await;
        *self.second.lock().unwrap() = Some(d.progress(b"step 2/2").await);
        Outcome::Done(b"finished".to_vec())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_is_one_fenced_call_shown_by_get_and_a_stale_attempts_is_refused() {
    let server = Server::start();
    let mut c = server.conn();
    let jobs = queue(&server, "jobs").await;
    jobs.config_set(&[("RETAIN", "1h")]).await.unwrap();
    jobs.add(b"work", &add_id("p1")).await.unwrap();
    let (reported, go_on) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
    let second = Arc::new(Mutex::new(None));
    let handler = Reporting {
        reported: Arc::clone(&reported),
        go_on: Arc::clone(&go_on),
        second: Arc::clone(&second),
    };
    let stop = CancellationToken::new();
    let run = spawn_worker(&server, &["jobs"], handler, &stop);
    reported.notified().await;
    let m = jobs.get(b"p1").await.unwrap().unwrap();
    assert_eq!(m.state(), Some(State::Inflight));
    assert_eq!(m.progress.as_deref(), Some(&b"step 1/2"[..]));
    // The progress TOUCH renewed the lease by the worker's lease (30 s),
    // not the queue's default.
    assert!(m.lease_deadline.unwrap() > dq_testkit::now_ms() + 20_000);
    // Another delivery's progress for it (a stale attempt) is refused and
    // changes nothing.
    let stale = jobs.progress(b"p1", b"from attempt 2", None, Some(2)).await;
    assert!(matches!(stale, Err(Error::StaleDelivery(_))), "{stale:?}");
    assert_eq!(
        jobs.get(b"p1").await.unwrap().unwrap().progress.as_deref(),
        Some(&b"step 1/2"[..])
    );
    // The delivery is over (cancelled): its own next report is refused.
    assert_eq!(int(&cmd(&mut c, "DQ.CANCEL jobs p1")), 1);
    go_on.notify_one();
    assert!(eventually(|| second.lock().unwrap().is_some()).await);
    let refused = second.lock().unwrap().take().unwrap();
    assert!(
        matches!(refused, Err(Error::StaleDelivery(_))),
        "{refused:?}"
    );
    stop.cancel();
    run.await.unwrap().unwrap();

    // Fenced progress of a delivery that holds is kept with the result.
    jobs.add(b"work", &add_id("p2")).await.unwrap();
    let popped = cmd(&mut c, "DQ.POP jobs COUNT 1 LEASE 60000");
    assert!(format!("{popped:?}").contains("p2"));
    let attempt = int(&field(&cmd(&mut c, "DQ.GET jobs p2"), "attempt")) as u64;
    jobs.progress(b"p2", b"90%", None, Some(attempt))
        .await
        .unwrap();
    assert_eq!(jobs.done(&[(b"p2", b"ok")]).await.unwrap(), 1);
    let m = jobs.get(b"p2").await.unwrap().unwrap();
    assert_eq!(
        (m.result.as_deref(), m.progress.as_deref()),
        (Some(&b"ok"[..]), Some(&b"90%"[..]))
    );
    // Over 64 KiB is refused before sending; so is a delivery no worker
    // made; an id not in flight is UnknownMessage.
    let big = vec![b'p'; dq_client::MAX_PROGRESS_BYTES + 1];
    assert!(matches!(
        jobs.progress(b"p2", &big, None, None).await,
        Err(Error::Config(_))
    ));
    assert!(matches!(
        Delivery::new("jobs", "p2", "", 1).progress("x").await,
        Err(Error::Config(_))
    ));
    assert!(matches!(
        jobs.progress(b"p2", b"x", None, None).await,
        Err(Error::UnknownMessage { .. })
    ));
}

/// A sharded queue's result, waited for on the id's shard.
struct Echo(Arc<AtomicUsize>);

impl Handler for Echo {
    async fn handle(&self, d: &Delivery) -> Outcome {
        self.0.fetch_add(1, Ordering::Relaxed);
        Outcome::done(format!(
            "{}:{}",
            d.queue,
            String::from_utf8_lossy(&d.payload)
        ))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sharded_queues_wait_goes_to_the_ids_shard_on_any_master() {
    let cluster = Cluster::start(3);
    let server = DqServer::cluster(cluster.nodes.iter().map(|n| n.url())).unwrap();
    let con = server.connect(Duration::from_secs(5)).await.unwrap();
    let jobs = ShardedQueue::new(con.clone(), "renders", 8).unwrap();
    jobs.config_set(&[("RETAIN", "1h"), ("RETAINMAX", "8000")])
        .await
        .unwrap();
    let settings = jobs.config().await.unwrap();
    assert_eq!(
        (settings.retain_ms, settings.retain_max),
        (3_600_000, Some(8000))
    );

    // Ids the library makes, ids of the caller's, and grouped messages
    // (whose shard is their group's).
    let mut expected: HashMap<Vec<u8>, (Option<Vec<u8>>, String)> = HashMap::new();
    for i in 0..40 {
        let mut o = AddOptions::default();
        let mut basis = None;
        if i % 4 == 1 {
            o.id = Some(format!("render-{i}").into_bytes());
        }
        if i % 4 == 2 {
            let g = format!("tenant-{}", i % 3).into_bytes();
            o.id = Some(format!("grouped-{i}").into_bytes());
            o.group = Some(g.clone());
            basis = Some(g);
        }
        let id = jobs
            .add(format!("p{i}").as_bytes(), &o)
            .await
            .unwrap()
            .unwrap();
        let shard = jobs
            .shards()
            .route(basis.as_deref().unwrap_or(&id))
            .to_owned();
        expected.insert(id, (basis, format!("{shard}:p{i}")));
    }
    let owners: std::collections::HashSet<usize> = expected
        .values()
        .map(|(_, r)| cluster.owner(r.split(':').next().unwrap().as_bytes()))
        .collect();
    assert_eq!(owners.len(), 3, "the shards used sit on every master");

    // The waiters start first: each blocks on its shard's master.
    let mut waiters = Vec::new();
    for (id, (basis, result)) in &expected {
        let (q, id, basis) = (jobs.clone(), id.clone(), basis.clone());
        let result = result.clone();
        waiters.push(tokio::spawn(async move {
            let got = q.wait(&id, basis.as_deref(), LONG).await;
            (id, got, result)
        }));
    }
    let handled = Arc::new(AtomicUsize::new(0));
    let worker = Worker::sharded(server, jobs.shards(), config()).unwrap();
    let stop = CancellationToken::new();
    let run = {
        let (stop, handler) = (stop.clone(), Echo(Arc::clone(&handled)));
        tokio::spawn(async move { worker.run(Arc::new(handler), stop).await })
    };
    for waiter in waiters {
        let (id, got, result) = waiter.await.unwrap();
        assert_eq!(
            got.unwrap(),
            Some(JobOutcome::Done(Some(result.into_bytes()))),
            "{}",
            String::from_utf8_lossy(&id)
        );
    }
    stop.cancel();
    run.await.unwrap().unwrap();
    assert_eq!(handled.load(Ordering::Relaxed), 40);

    // Looked for on another shard, a message is not there.
    let (id, (basis, _)) = expected.iter().find(|(_, (b, _))| b.is_some()).unwrap();
    let elsewhere = (0..)
        .map(|k: u32| format!("other-{k}").into_bytes())
        .find(|b| jobs.shards().route(b) != jobs.shards().route(basis.as_deref().unwrap()))
        .unwrap();
    assert_eq!(
        jobs.wait(id, Some(&elsewhere), Duration::ZERO)
            .await
            .unwrap(),
        Some(JobOutcome::Gone)
    );
    // The done messages are read from every shard.
    assert_eq!(jobs.stats().await.unwrap().done, 40);
    assert_eq!(jobs.peek(State::Done, 100).await.unwrap().len(), 40);
    assert_eq!(jobs.purge(Some(State::Done)).await.unwrap(), 40);
    // A plain queue whose slot is on another master than the seed: the
    // wait follows MOVED to it.
    let far = (0..)
        .map(|k: u32| format!("far-{k}"))
        .find(|n| cluster.owner(n.as_bytes()) != 0)
        .unwrap();
    let q = Queue::new(con, far.as_str());
    q.config_set(&[("RETAIN", "1m")]).await.unwrap();
    q.add(b"x", &add_id("m")).await.unwrap();
    let waiting = {
        let q = q.clone();
        tokio::spawn(async move { q.wait(b"m", LONG).await })
    };
    let owner = &cluster.nodes[cluster.owner(far.as_bytes())];
    let mut c = owner.conn();
    assert!(
        eventually(|| blocked(&mut c) == 1).await,
        "blocked on the owner"
    );
    cmd(&mut c, &format!("DQ.POP {far} COUNT 1"));
    cmd(&mut c, &format!("DQ.DONE {far} m moved"));
    assert_eq!(
        waiting.await.unwrap().unwrap(),
        Some(JobOutcome::Done(Some(b"moved".to_vec())))
    );
}

async fn admin_calls(resp3: bool) {
    let server = Server::start();
    let url = if resp3 {
        format!("{}?protocol=resp3", server.url())
    } else {
        server.url()
    };
    let client = redis::Client::open(url).unwrap();
    let mut con = client.get_multiplexed_async_connection().await.unwrap();
    let mut c = server.conn();
    let q = b"outcomes".as_slice();
    let config = admin::config(&mut con, q).await.unwrap();
    assert_eq!(
        (
            config.retain_ms,
            config.retain_ms_from.as_str(),
            config.retain_max
        ),
        (0, "module", None)
    );
    admin::config_set(&mut con, q, &[("RETAIN", "2h"), ("RETAINMAX", "3")])
        .await
        .unwrap();
    let config = admin::config(&mut con, q).await.unwrap();
    assert_eq!(
        (
            config.retain_ms,
            config.retain_ms_from.as_str(),
            config.retain_max
        ),
        (7_200_000, "queue", Some(3))
    );
    // The server's checks, with its words.
    for (pair, says) in [
        (("RETAIN", "1.5h"), "RETAIN must be a duration"),
        (("RETAINMAX", "-1"), "RETAINMAX must be an integer"),
    ] {
        let e = admin::config_set(&mut con, q, &[pair]).await.unwrap_err();
        assert!(e.to_string().contains(says), "{e}");
    }
    for id in ["a", "b", "c", "d"] {
        cmd(&mut c, &format!("DQ.ADD outcomes work-{id} ID {id}"));
    }
    cmd(&mut c, "DQ.POP outcomes COUNT 4 LEASE 60000");
    cmd(&mut c, "DQ.TOUCH outcomes a PROGRESS half");
    let pairs: [(&[u8], &[u8]); 3] = [(b"a", b"r-a"), (b"b", b""), (b"gone", b"x")];
    assert_eq!(admin::done(&mut con, q, &pairs).await.unwrap(), 2);
    assert_eq!(admin::done(&mut con, q, &[]).await.unwrap(), 0);
    cmd(&mut c, "DQ.ACK outcomes c");
    let a = admin::get(&mut con, q, b"a").await.unwrap().unwrap();
    assert_eq!(a.state, "done");
    assert_eq!(a.result.as_deref(), Some(&b"r-a"[..]));
    assert_eq!(a.progress.as_deref(), Some(&b"half"[..]));
    assert_eq!(a.due_at, None);
    assert_eq!(
        a.retained_until.unwrap() - a.finished_at.unwrap(),
        7_200_000
    );
    let b = admin::get(&mut con, q, b"b").await.unwrap().unwrap();
    assert_eq!(
        b.result.as_deref(),
        Some(&b""[..]),
        "an empty result is one"
    );
    let c_ = admin::get(&mut con, q, b"c").await.unwrap().unwrap();
    assert_eq!((c_.state(), c_.result), (Some(State::Done), None));
    // PEEK DONE: earliest finished first, each with when it finished.
    let peeked = admin::peek(&mut con, q, State::Done, 10).await.unwrap();
    let ids: Vec<&[u8]> = peeked.iter().map(|e| e.id.as_slice()).collect();
    assert_eq!(ids, [&b"a"[..], b"b", b"c"]);
    assert_eq!(peeked[0].time, a.finished_at.unwrap());
    let (cursor, scanned) = admin::scan_page(&mut con, q, Some(State::Done), 0, 100)
        .await
        .unwrap();
    assert_eq!((cursor, scanned.len()), (0, 3));
    let stats = admin::stats(&mut con, q).await.unwrap();
    assert_eq!((stats.done, stats.inflight, stats.total()), (3, 1, 4));
    // RETAINMAX: the fourth done drops the earliest finished.
    cmd(&mut c, "DQ.DONE outcomes d r-d");
    assert_eq!(admin::get(&mut con, q, b"a").await.unwrap(), None);
    assert_eq!(admin::stats(&mut con, q).await.unwrap().dropped, 1);
    assert_eq!(
        admin::wait(&mut con, q, b"d", Duration::ZERO)
            .await
            .unwrap(),
        Some(JobOutcome::Done(Some(b"r-d".to_vec())))
    );
    assert_eq!(
        admin::purge(&mut con, q, Some(State::Done)).await.unwrap(),
        3
    );
    assert_eq!(admin::stats(&mut con, q).await.unwrap().total(), 0);
    admin::config_set(&mut con, q, &[("RETAIN", "DEFAULT"), ("RETAINMAX", "0")])
        .await
        .unwrap();
    let config = admin::config(&mut con, q).await.unwrap();
    assert_eq!(
        (config.retain_ms_from.as_str(), config.retain_max),
        ("module", None)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admin_calls_read_and_act_on_done_messages_resp2() {
    admin_calls(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admin_calls_read_and_act_on_done_messages_resp3() {
    admin_calls(true).await;
}
