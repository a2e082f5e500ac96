//! Cancelling a running job: when the message a handler works on is
//! cancelled (DQ.CANCEL) or purged (DQ.PURGE), the next heartbeat's fenced
//! DQ.TOUCH is refused, and the handler's `Delivery::cancelled()` token
//! fires with the reason "cancelled"; a delivery whose message is still
//! there (another client NACKed it) is "lost". Nothing is sent for either.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use dq_client::{
    CancellationToken, Delivery, Handler, LostReason, Outcome, Server as DqServer, Settlement,
    Worker, WorkerConfig,
};
use dq_testkit::{cmd, field, int, Server, LONG};

#[derive(Default)]
struct Seen {
    started: Vec<String>,
    /// (id, reason) of each handler that saw its token fire.
    told: Vec<(String, Option<LostReason>)>,
    /// (id, outcome given, settlement, settlement's state name).
    settled: Vec<(String, Option<&'static str>, Settlement, &'static str)>,
}

/// Works until its delivery's token fires, then returns at once.
struct Patient(Arc<Mutex<Seen>>);

impl Handler for Patient {
    async fn handle(&self, d: &Delivery) -> Outcome {
        let cancelled = d.cancelled();
        let id = d.id_lossy().into_owned();
        self.0.lock().unwrap().started.push(id.clone());
        cancelled.cancelled().await;
        self.0.lock().unwrap().told.push((id, d.lost_reason()));
        // Not sent: the delivery is over.
        Outcome::Ack
    }

    fn settled(&self, d: &Delivery, outcome: Option<&Outcome>, settlement: &Settlement) {
        self.0.lock().unwrap().settled.push((
            d.id_lossy().into_owned(),
            outcome.map(Outcome::action),
            settlement.clone(),
            settlement.state_of(d),
        ));
    }
}

/// Never looks at its token: dropped at the first refused heartbeat.
struct Heedless(Arc<Mutex<Seen>>);

impl Handler for Heedless {
    async fn handle(&self, d: &Delivery) -> Outcome {
        self.0
            .lock()
            .unwrap()
            .started
            .push(d.id_lossy().into_owned());
        std::future::pending::<()>().await;
        Outcome::Ack
    }

    fn settled(&self, d: &Delivery, outcome: Option<&Outcome>, settlement: &Settlement) {
        self.0.lock().unwrap().settled.push((
            d.id_lossy().into_owned(),
            outcome.map(Outcome::action),
            settlement.clone(),
            settlement.state_of(d),
        ));
    }
}

async fn wait_for(seen: &Mutex<Seen>, condition: impl Fn(&Seen) -> bool) {
    let deadline = tokio::time::Instant::now() + LONG;
    while !condition(&seen.lock().unwrap()) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "not within {LONG:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A worker of `queue` with `handler`; a lease of 2 s, so the heartbeat
/// comes every 2/3 s (and a loaded machine does not lose the lease).
fn start<H: Handler>(server: &Server, queue: &str, handler: H) -> Running {
    let config = WorkerConfig {
        concurrency: 4,
        block: Duration::from_millis(200),
        lease: Duration::from_secs(2),
        ..WorkerConfig::default()
    };
    let dq = DqServer::single(server.url()).unwrap();
    let worker = Worker::new(dq, vec![queue.into()], config).unwrap();
    let stop = CancellationToken::new();
    let token = stop.clone();
    let run = tokio::spawn(async move { worker.run(Arc::new(handler), token).await });
    (stop, run)
}

/// A worker of `queue`, its stop token and its task.
type Running = (
    CancellationToken,
    tokio::task::JoinHandle<Result<(), dq_client::Error>>,
);

/// Message `id` added to `queue`, and a worker whose handler (`handler`
/// of the shared record) has started on it.
async fn one_started<H: Handler>(
    server: &Server,
    queue: &str,
    id: &str,
    handler: impl FnOnce(Arc<Mutex<Seen>>) -> H,
) -> (redis::Connection, Arc<Mutex<Seen>>, Running) {
    let mut c = server.conn();
    cmd(&mut c, &format!("DQ.ADD {queue} x ID {id}"));
    let seen = Arc::new(Mutex::new(Seen::default()));
    let running = start(server, queue, handler(Arc::clone(&seen)));
    wait_for(&seen, |s| s.started.len() == 1).await;
    (c, seen, running)
}

/// Once the delivery has settled, the worker stopped and its end.
async fn settled_then_stopped(seen: &Mutex<Seen>, (stop, run): Running) {
    wait_for(seen, |s| s.settled.len() == 1).await;
    stop.cancel();
    run.await.unwrap().unwrap();
}

fn stat(c: &mut redis::Connection, queue: &str, name: &str) -> i64 {
    int(&field(&cmd(c, &format!("DQ.STATS {queue}")), name))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_is_told_when_its_message_is_cancelled_or_purged() {
    let server = Server::start();
    let mut c = server.conn();
    cmd(&mut c, "DQ.ADD jobs x ID by-cancel");
    cmd(&mut c, "DQ.ADD jobs x ID by-purge");
    let seen = Arc::new(Mutex::new(Seen::default()));
    let (stop, run) = start(&server, "jobs", Patient(Arc::clone(&seen)));
    wait_for(&seen, |s| s.started.len() == 2).await;

    assert_eq!(int(&cmd(&mut c, "DQ.CANCEL jobs by-cancel")), 1);
    wait_for(&seen, |s| s.settled.len() == 1).await;
    assert_eq!(
        seen.lock().unwrap().told,
        [("by-cancel".to_string(), Some(LostReason::Cancelled))]
    );

    assert_eq!(int(&cmd(&mut c, "DQ.PURGE jobs INFLIGHT")), 1);
    wait_for(&seen, |s| s.settled.len() == 2).await;
    stop.cancel();
    run.await.unwrap().unwrap();

    let seen = seen.lock().unwrap();
    assert_eq!(
        seen.told[1],
        ("by-purge".to_string(), Some(LostReason::Cancelled))
    );
    // The outcome it returned was not sent: "cancelled", no ACK.
    for (i, id) in ["by-cancel", "by-purge"].iter().enumerate() {
        assert_eq!(
            seen.settled[i],
            (id.to_string(), Some("ack"), Settlement::Stale, "cancelled")
        );
    }
    assert_eq!(stat(&mut c, "jobs", "acked"), 0);
    assert_eq!(stat(&mut c, "jobs", "nacked"), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delivery_whose_message_stays_is_lost_not_cancelled() {
    let server = Server::start();
    let (mut c, seen, running) = one_started(&server, "lost", "m", Patient).await;
    // Another client fails the delivery: the message is delayed again.
    assert_eq!(
        dq_testkit::text(&cmd(&mut c, "DQ.NACK lost m DELAY 600000")),
        "delayed"
    );
    settled_then_stopped(&seen, running).await;
    let seen = seen.lock().unwrap();
    assert_eq!(seen.told, [("m".to_string(), Some(LostReason::Lost))]);
    assert_eq!(
        seen.settled[0],
        ("m".to_string(), Some("ack"), Settlement::Stale, "stale")
    );
    // Its ACK was not sent: the message waits for its next attempt.
    assert_eq!(stat(&mut c, "lost", "delayed"), 1);
    assert_eq!(stat(&mut c, "lost", "acked"), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_that_never_takes_its_token_is_dropped_at_once() {
    let server = Server::start();
    let (mut c, seen, running) = one_started(&server, "heedless", "h", Heedless).await;
    cmd(&mut c, "DQ.CANCEL heedless h");
    settled_then_stopped(&seen, running).await;
    assert_eq!(
        seen.lock().unwrap().settled[0],
        ("h".to_string(), None, Settlement::Stale, "cancelled")
    );
}

#[test]
fn a_new_delivery_holds_until_told() {
    let d = Delivery::new("q", "id", "payload", 1);
    assert_eq!(d.lost_reason(), None);
    assert!(!d.cancelled().is_cancelled());
    assert_eq!(Settlement::Stale.state_of(&d), "stale");
    assert_eq!(Settlement::Acked.state_of(&d), "acked");
    assert_eq!(LostReason::Cancelled.as_str(), "cancelled");
    assert_eq!(LostReason::Lost.as_str(), "lost");
}
