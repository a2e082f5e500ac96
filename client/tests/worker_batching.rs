//! The Worker batches what the server lets it batch: the ACKs of the
//! deliveries that finished together go in one DQ.ACK, and every delivery
//! is still told it was acked. (The speed is make bench's: no timing here.)

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use dq_client::{CancellationToken, Delivery, Handler, Outcome, Settlement, Worker, WorkerConfig};
use dq_testkit::{cmd, field, int, Server};

/// (action, settlement state) of each delivery, as the handler was told.
type Told = Arc<Mutex<Vec<(Option<&'static str>, &'static str)>>>;

struct Quick {
    settled: Told,
    handled: AtomicU64,
}

impl Handler for Quick {
    async fn handle(&self, _d: &Delivery) -> Outcome {
        self.handled.fetch_add(1, Ordering::Relaxed);
        Outcome::Ack
    }

    fn settled(&self, _d: &Delivery, outcome: Option<&Outcome>, settlement: &Settlement) {
        self.settled
            .lock()
            .unwrap()
            .push((outcome.map(Outcome::action), settlement.state()));
    }
}

/// How many times the server ran `command`, from INFO commandstats.
fn calls(con: &mut redis::Connection, command: &str) -> u64 {
    let info: String = redis::cmd("INFO").arg("commandstats").query(con).unwrap();
    let prefix = format!("cmdstat_{command}:calls=");
    info.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .map(|rest| rest.split(',').next().unwrap().parse().unwrap())
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acks_of_deliveries_that_finish_together_go_in_one_dq_ack() {
    let server = Server::start();
    let mut con = server.conn();
    let mut pipe = redis::pipe();
    for i in 0..500 {
        pipe.cmd("DQ.ADD")
            .arg("batch")
            .arg("x")
            .arg("ID")
            .arg(format!("m{i}"));
    }
    pipe.query::<()>(&mut con).unwrap();
    let acks_before = calls(&mut con, "dq.ack");

    let settled = Arc::new(Mutex::new(Vec::new()));
    let handler = Arc::new(Quick {
        settled: Arc::clone(&settled),
        handled: AtomicU64::new(0),
    });
    let config = WorkerConfig {
        concurrency: 20,
        batch: 20,
        block: Duration::from_millis(200),
        ..WorkerConfig::default()
    };
    let worker = Worker::new(
        redis::Client::open(server.url()).unwrap(),
        vec!["batch".into()],
        config,
    )
    .unwrap();
    let stop = CancellationToken::new();
    let run = {
        let (handler, stop) = (Arc::clone(&handler), stop.clone());
        tokio::spawn(async move { worker.run(handler, stop).await })
    };
    // Generous: a slow machine is slow, not wrong.
    for _ in 0..6000 {
        if settled.lock().unwrap().len() == 500 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    stop.cancel();
    run.await.unwrap().unwrap();

    let settled = settled.lock().unwrap();
    assert_eq!(settled.len(), 500);
    assert!(settled.iter().all(|s| *s == (Some("ack"), "acked")));
    let stats = cmd(&mut con, "DQ.STATS batch");
    assert_eq!(int(&field(&stats, "acked")), 500);
    let acks = calls(&mut con, "dq.ack") - acks_before;
    assert!(acks < 500, "{acks} DQ.ACKs for 500 deliveries");
}
