//! dq-client's consume loop on its own, against a real server: the cases
//! the relay's HTTP tests cannot stage — a delivery taken over by another
//! consumer (STALE on NACK and on TOUCH) — and a shutdown that does not
//! wait for a long BLOCK.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use dq_client::{
    CancellationToken, Consumer, ConsumerConfig, Delivery, Handler, Outcome, Settlement,
};
use dq_testkit::*;

/// What `settled` was told, per delivery.
type Settled = Arc<Mutex<Vec<(u64, Option<Outcome>, Settlement)>>>;

/// While its first delivery runs, another consumer takes the message:
/// an unfenced NACK ends delivery 1 and a POP takes delivery 2. Then the
/// handler either returns (`wait` None) or works on for `wait`.
struct TakenOver {
    url: String,
    wait: Option<Duration>,
    settled: Settled,
}

impl TakenOver {
    fn take_over(&self) {
        let mut con = redis::Client::open(self.url.as_str())
            .and_then(|c| c.get_connection())
            .expect("connect");
        cmd(&mut con, "DQ.NACK jobs job DELAY 0");
        let popped = cmd(&mut con, "DQ.POP jobs LEASE 60000");
        assert!(matches!(popped, Value::Array(_)), "{popped:?}");
    }
}

impl Handler for TakenOver {
    async fn handle(&self, delivery: &Delivery) -> Outcome {
        if delivery.attempt == 1 {
            self.take_over();
        }
        if let Some(wait) = self.wait {
            tokio::time::sleep(wait).await;
        }
        Outcome::Nack {
            delay: None,
            error: "failed".into(),
        }
    }

    fn settled(&self, d: &Delivery, outcome: Option<&Outcome>, settlement: &Settlement) {
        self.settled
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push((d.attempt, outcome.cloned(), settlement.clone()));
    }
}

fn config(lease: Duration) -> ConsumerConfig {
    ConsumerConfig {
        // One slot: the consumer cannot take the message back itself.
        concurrency: 1,
        batch: 1,
        block: Duration::from_secs(1),
        lease,
        ..ConsumerConfig::default()
    }
}

async fn run_until_settled(server: &Server, wait: Option<Duration>, lease: Duration) -> Settled {
    let settled: Settled = Arc::default();
    let handler = Arc::new(TakenOver {
        url: server.url(),
        wait,
        settled: Arc::clone(&settled),
    });
    let client = redis::Client::open(server.url()).expect("a client");
    let consumer = Consumer::new(client, vec!["jobs".into()], config(lease)).expect("a consumer");
    let shutdown = CancellationToken::new();
    let run = tokio::spawn({
        let shutdown = shutdown.clone();
        async move { consumer.run(handler, shutdown).await }
    });
    let check = Arc::clone(&settled);
    let done = tokio::task::spawn_blocking(move || {
        wait_until(LONG, || {
            !check.lock().unwrap_or_else(|p| p.into_inner()).is_empty()
        })
    })
    .await
    .expect("the wait");
    assert!(done, "the delivery was never settled");
    shutdown.cancel();
    tokio::time::timeout(LONG, run)
        .await
        .expect("run returns after shutdown")
        .expect("the run task")
        .expect("run");
    settled
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_nack_is_stale_and_leaves_the_new_delivery_alone() {
    let server = Server::start();
    cmd(&mut server.conn(), "DQ.ADD jobs {} ID job");
    let settled = run_until_settled(&server, None, Duration::from_secs(30)).await;
    let settled = settled.lock().unwrap_or_else(|p| p.into_inner()).clone();
    assert_eq!(settled.len(), 1, "{settled:?}");
    assert_eq!(settled[0].0, 1);
    assert!(matches!(settled[0].1, Some(Outcome::Nack { .. })));
    assert_eq!(settled[0].2, Settlement::Stale);
    // Delivery 2, the other consumer's, is untouched.
    let mut con = server.conn();
    assert_eq!(dq_get_field(&mut con, "jobs", "job", "state"), "inflight");
    assert_eq!(dq_get_field(&mut con, "jobs", "job", "attempt"), "2");
    assert_eq!(dq_get_field(&mut con, "jobs", "job", "last-error"), "(nil)");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_touch_abandons_the_work() {
    let server = Server::start();
    cmd(&mut server.conn(), "DQ.ADD jobs {} ID job");
    // The work would take an hour; the next TOUCH (every 300 ms) finds
    // the delivery over and drops it.
    let settled = run_until_settled(
        &server,
        Some(Duration::from_secs(3600)),
        Duration::from_millis(900),
    )
    .await;
    let settled = settled.lock().unwrap_or_else(|p| p.into_inner()).clone();
    assert_eq!(settled, vec![(1, None, Settlement::Stale)]);
    let mut con = server.conn();
    assert_eq!(dq_get_field(&mut con, "jobs", "job", "state"), "inflight");
    assert_eq!(dq_get_field(&mut con, "jobs", "job", "attempt"), "2");
}

struct Never;
impl Handler for Never {
    async fn handle(&self, _: &Delivery) -> Outcome {
        Outcome::Ack
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_unblocks_a_waiting_pop() {
    let server = Server::start();
    let client = redis::Client::open(server.url()).expect("a client");
    let config = ConsumerConfig {
        // Without CLIENT UNBLOCK, run would return only after an hour.
        block: Duration::from_secs(3600),
        ..ConsumerConfig::default()
    };
    let consumer = Consumer::new(client, vec!["empty".into()], config).expect("a consumer");
    let shutdown = CancellationToken::new();
    let run = tokio::spawn({
        let shutdown = shutdown.clone();
        async move { consumer.run(Arc::new(Never), shutdown).await }
    });
    // Wait until the POP is blocked on the server.
    let url = server.url();
    let blocked = tokio::task::spawn_blocking(move || {
        let mut con = redis::Client::open(url.as_str())
            .and_then(|c| c.get_connection())
            .expect("connect");
        wait_until(LONG, || {
            text(&cmd(&mut con, "INFO clients")).contains("blocked_clients:1")
        })
    })
    .await
    .expect("the wait");
    assert!(blocked, "the POP never blocked");
    shutdown.cancel();
    tokio::time::timeout(LONG, run)
        .await
        .expect("run returns without waiting for the BLOCK")
        .expect("the run task")
        .expect("run");
}

#[test]
fn bad_configurations_are_refused() {
    let client = redis::Client::open("redis://127.0.0.1:1/").expect("a client");
    let config = |f: fn(&mut ConsumerConfig)| {
        let mut c = ConsumerConfig::default();
        f(&mut c);
        Consumer::new(client.clone(), vec!["q".into()], c).is_err()
    };
    assert!(config(|c| c.concurrency = 0));
    assert!(config(|c| c.batch = 0));
    assert!(config(|c| c.batch = 10_001));
    assert!(config(|c| c.block = Duration::ZERO));
    assert!(config(|c| c.touch_every = Some(c.lease)));
    assert!(Consumer::new(client.clone(), Vec::new(), ConsumerConfig::default()).is_err());
    assert!(!config(|_| {}));
}
