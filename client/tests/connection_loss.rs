//! The Consumer across a lost connection and a server restart, each on a
//! server of the test's own, which it kills the clients of or kills.
//!
//! Each test runs a stream of jobs in three waves and checks at-least-once:
//! every job added is handled, the queue drains to empty, a job whose ACK
//! was confirmed (`Acked`) is never handled again, and `run` returns once
//! its token is cancelled. Mid-run:
//!
//! - the connections test kills every connection of the consumer (CLIENT
//!   KILL TYPE normal) and it must reconnect by itself;
//! - the restart test kills the server (AOF with appendfsync always) and
//!   starts it again on the same port.
//!
//! Then the ACK of one job, "mark", is made to fail for certain: its handler
//! waits, before it returns, until the test has cut the consumer off —
//! every connection killed and no new one let in (maxclients 1: only the
//! test's own connection), or the server killed — and the test lets the
//! consumer back only once it has reported mark `Unsettled` (after the
//! ACK's retries). Mark then comes back after its lease and is handled
//! again.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use dq_client::{
    CancellationToken, Consumer, ConsumerConfig, Delivery, Handler, Outcome, Server as DqServer,
    Settlement,
};
use dq_testkit::{cmd, field, int, list, text, Server, LONG};
use tokio::time::{sleep, timeout, Instant};

const QUEUE: &str = "jobs";
const WAVE: usize = 40;
/// Short, so that mark comes back soon after its ACK failed.
const LEASE: Duration = Duration::from_secs(2);

enum Event {
    Handled(String, u64),
    Settled(String, Option<&'static str>, Settlement),
}

/// What the handler saw and what `settled` was told, in one order; and
/// mark's two signals.
#[derive(Default)]
struct Journal {
    events: Mutex<Vec<Event>>,
    /// Mark's handler runs (its first attempt).
    at_mark: CancellationToken,
    /// The test has cut the consumer off: mark's handler may return.
    cut: CancellationToken,
}

impl Journal {
    fn handled_ids(&self) -> HashSet<String> {
        let events = self.events.lock().unwrap();
        events
            .iter()
            .filter_map(|e| match e {
                Event::Handled(id, _) => Some(id.clone()),
                Event::Settled(..) => None,
            })
            .collect()
    }

    fn attempts(&self, of: &str) -> Vec<u64> {
        let events = self.events.lock().unwrap();
        events
            .iter()
            .filter_map(|e| match e {
                Event::Handled(id, attempt) if id == of => Some(*attempt),
                _ => None,
            })
            .collect()
    }

    fn settlements(&self, of: &str) -> Vec<Settlement> {
        let events = self.events.lock().unwrap();
        events
            .iter()
            .filter_map(|e| match e {
                Event::Settled(id, _, s) if id == of => Some(s.clone()),
                _ => None,
            })
            .collect()
    }

    /// Whether every id was settled at least once. Not necessarily
    /// `Acked`: an ACK cut off by the kill may have reached the server
    /// before its reply was lost (`Unsettled` or `AckedLate`, yet the
    /// message is gone); one that did not brings the message back, and the
    /// queue is not drained until it is handled again.
    fn settled_all(&self, ids: &[String]) -> bool {
        ids.iter().all(|id| !self.settlements(id).is_empty())
    }

    fn check(&self, added: &[String]) {
        let handled = self.handled_ids();
        let never: Vec<&String> = added.iter().filter(|id| !handled.contains(*id)).collect();
        assert!(never.is_empty(), "never handled: {never:?}");
        let mut confirmed = HashSet::new();
        for event in self.events.lock().unwrap().iter() {
            match event {
                Event::Handled(id, _) => assert!(
                    !confirmed.contains(id),
                    "{id} was handled again after its ACK was confirmed"
                ),
                Event::Settled(id, action, settlement) => {
                    assert_eq!(*action, Some("ack"), "{id}");
                    assert!(
                        matches!(
                            settlement,
                            Settlement::Acked | Settlement::AckedLate | Settlement::Unsettled(_)
                        ),
                        "{id}: {settlement:?}"
                    );
                    if *settlement == Settlement::Acked {
                        confirmed.insert(id.clone());
                    }
                }
            }
        }
        assert!(self.settled_all(added));
    }
}

struct Jobs(Arc<Journal>);

impl Handler for Jobs {
    async fn handle(&self, d: &Delivery) -> Outcome {
        let id = d.id_lossy().into_owned();
        let mark = id == "mark" && d.attempt == 1;
        self.0
            .events
            .lock()
            .unwrap()
            .push(Event::Handled(id, d.attempt));
        if mark {
            // The consumer is cut off before this returns: its ACK cannot
            // be sent.
            self.0.at_mark.cancel();
            let _ = timeout(LONG, self.0.cut.cancelled()).await;
        }
        sleep(Duration::from_millis(2)).await;
        Outcome::Ack
    }

    fn settled(&self, d: &Delivery, outcome: Option<&Outcome>, settlement: &Settlement) {
        self.0.events.lock().unwrap().push(Event::Settled(
            d.id_lossy().into_owned(),
            outcome.map(Outcome::action),
            settlement.clone(),
        ));
    }
}

/// What the test does to the consumer mid-run.
enum Trouble {
    /// CLIENT KILL of every connection but the test's own (`admin`); while
    /// it stays cut off, maxclients 1 lets no new one in.
    KillClients {
        admin: redis::Connection,
        maxclients: Option<String>,
    },
    /// SIGKILL of the server, then a start on the same port and directory.
    Restart,
}

struct Scenario {
    server: Server,
    trouble: Trouble,
}

impl Scenario {
    /// Cuts the consumer off; it `stays` so until `let_back`.
    fn cut_off(&mut self, stays: bool) {
        match &mut self.trouble {
            Trouble::KillClients { admin, maxclients } => {
                if stays {
                    let got = list(&cmd(admin, "CONFIG GET maxclients"));
                    *maxclients = Some(text(&got[1]));
                    cmd(admin, "CONFIG SET maxclients 1");
                }
                let killed = int(&cmd(admin, "CLIENT KILL TYPE normal SKIPME yes"));
                assert!(killed >= 1, "the consumer had no connection to kill");
            }
            Trouble::Restart => {
                self.server.crash();
                if !stays {
                    self.server.start_again();
                }
            }
        }
    }

    fn let_back(&mut self) {
        match &mut self.trouble {
            Trouble::KillClients { admin, maxclients } => {
                if let Some(n) = maxclients.take() {
                    cmd(admin, &format!("CONFIG SET maxclients {n}"));
                }
            }
            Trouble::Restart => {
                if !self.server.is_up() {
                    self.server.start_again();
                }
            }
        }
    }

    fn add_wave(&self, prefix: &str) -> Vec<String> {
        let mut c = self.server.conn();
        (0..WAVE)
            .map(|i| {
                let id = format!("{prefix}{i}");
                cmd(&mut c, &format!("DQ.ADD {QUEUE} {id} ID {id}"));
                id
            })
            .collect()
    }

    /// Nothing left in the queue: no message delayed, ready, in flight or dead.
    fn drained(&self) -> bool {
        let stats = cmd(&mut self.server.conn(), &format!("DQ.STATS {QUEUE}"));
        ["delayed", "ready", "inflight", "dead"]
            .iter()
            .all(|f| int(&field(&stats, f)) == 0)
    }
}

/// Polls `condition` until it holds; fails after [`LONG`].
async fn until(what: &str, condition: impl FnMut() -> bool) {
    until_within(LONG, what, condition).await;
}

async fn until_within(long: Duration, what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + long;
    while !condition() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        sleep(Duration::from_millis(20)).await;
    }
}

/// Runs a blocking step (a server's start waits for PING) off the runtime's
/// worker thread, so that the consumer's tasks go on meanwhile.
fn blocking<T>(f: impl FnOnce() -> T) -> T {
    tokio::task::block_in_place(f)
}

async fn run_scenario(mut sc: Scenario) {
    let journal = Arc::new(Journal::default());
    let config = ConsumerConfig {
        concurrency: 4,
        batch: 16,
        block: Duration::from_millis(200),
        lease: LEASE,
        ..ConsumerConfig::default()
    };
    let dq = DqServer::single(sc.server.url()).unwrap();
    let consumer = Consumer::new(dq, vec![QUEUE.into()], config).unwrap();
    let mut added = sc.add_wave("a");
    let stop = CancellationToken::new();
    let run = {
        let (jobs, stop) = (Jobs(Arc::clone(&journal)), stop.clone());
        tokio::spawn(async move { consumer.run(Arc::new(jobs), stop).await })
    };

    until("10 jobs handled", || journal.handled_ids().len() >= 10).await;
    blocking(|| {
        sc.cut_off(false);
        sc.let_back();
    });
    added.extend(blocking(|| sc.add_wave("b")));
    until("the jobs added before and after", || {
        let handled = journal.handled_ids();
        added.iter().all(|id| handled.contains(id))
    })
    .await;

    blocking(|| cmd(&mut sc.server.conn(), &format!("DQ.ADD {QUEUE} m ID mark")));
    added.push("mark".into());
    timeout(LONG, journal.at_mark.cancelled())
        .await
        .expect("mark was not handled");
    blocking(|| sc.cut_off(true));
    journal.cut.cancel();
    // The acker tries the ACK 5 times, and each try waits until the shared
    // connection's manager gives up reconnecting (6 tries, 6.3 s of backoff):
    // some 38 s in all.
    until_within(2 * LONG, "mark's settlement", || {
        !journal.settlements("mark").is_empty()
    })
    .await;
    blocking(|| sc.let_back());
    added.extend(blocking(|| sc.add_wave("c")));
    until("the queue to drain", || {
        blocking(|| sc.drained()) && journal.settled_all(&added)
    })
    .await;

    stop.cancel();
    timeout(LONG, run)
        .await
        .expect("run did not return after its token was cancelled")
        .unwrap()
        .unwrap();
    journal.check(&added);
    // Mark's first ACK could not reach the server: reported unsettled, with
    // why; it came back after its lease, was handled again and acked.
    let first = journal.settlements("mark").remove(0);
    assert!(
        matches!(&first, Settlement::Unsettled(why) if !why.is_empty()),
        "{first:?}"
    );
    assert_eq!(journal.attempts("mark")[..2], [1, 2]);
    assert!(sc.drained());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_consumer_reconnects_after_its_connections_are_killed() {
    let server = Server::start();
    let admin = server.conn();
    run_scenario(Scenario {
        server,
        trouble: Trouble::KillClients {
            admin,
            maxclients: None,
        },
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_consumer_rides_out_a_server_restart() {
    let server = Server::start_with(&["--appendonly", "yes", "--appendfsync", "always"]);
    run_scenario(Scenario {
        server,
        trouble: Trouble::Restart,
    })
    .await;
}
