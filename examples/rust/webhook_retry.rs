//! Webhook retry, on the dq-client library: call a webhook; when the call
//! fails, try again after 15s, 3m, 10m, 30m, 1h, 2h, 6h and 15h, then keep it
//! as a dead letter until it is redriven.
//!
//! ```text
//! cargo run -p dq-client --example webhook_retry -- producer   # queue three calls: one works, one is flaky, one's receiver is down
//! cargo run -p dq-client --example webhook_retry -- worker     # make the calls; Ctrl-C stops it
//! cargo run -p dq-client --example webhook_retry -- redrive    # show the dead letters and queue them again
//! ```
//!
//! REDIS_URL picks the server (default redis://127.0.0.1:6379). DQ_EXAMPLE_BACKOFF
//! replaces the waits (e.g. 100ms,200ms). The simulated receiver fails for URLs
//! containing DQ_EXAMPLE_DOWN (default "bad"; empty: nothing is down).
//! examples/rust/order_timeout.rs does its job with plain redis commands.

use std::error::Error;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use dq_client::{
    AddOptions, Connection, Consumer, ConsumerConfig, Delivery, Handler, NackState, Outcome, Queue,
    Server, Settlement, State,
};
use serde::Deserialize;
use tokio_util::task::TaskTracker;

const QUEUE: &str = "webhooks";

#[derive(Deserialize)]
struct Webhook {
    url: String,
}

fn backoff() -> String {
    std::env::var("DQ_EXAMPLE_BACKOFF").unwrap_or_else(|_| "15s,3m,10m,30m,1h,2h,6h,15h".into())
}

async fn producer(con: Connection) -> Result<(), Box<dyn Error>> {
    let queue = Queue::new(con.clone(), QUEUE);
    let backoff = backoff();
    let max_attempts = backoff.split(',').count() as u32 + 1; // the first try, then one per wait
    for url in [
        "https://example.test/ok",
        "https://example.test/flaky",
        "https://example.test/bad",
    ] {
        let n: u64 = redis::cmd("INCR")
            .arg("webhooks:seq")
            .query_async(&mut con.clone())
            .await?;
        let hook = format!("hook:{n}");
        let payload = serde_json::json!({ "url": url, "event": "order.paid" }).to_string();
        let options = AddOptions {
            id: Some(hook.clone().into_bytes()),
            backoff: Some(backoff.clone()),
            max_attempts: Some(max_attempts),
            ..AddOptions::default()
        };
        queue.add(payload.as_bytes(), &options).await?;
        println!("added {hook} {url}");
    }
    Ok(())
}

/// Stands in for an HTTP POST: `None` when the receiver answered 2xx, else why not.
fn call_webhook(url: &str, attempt: u64) -> Option<&'static str> {
    let down = std::env::var("DQ_EXAMPLE_DOWN").unwrap_or_else(|_| "bad".into());
    if !down.is_empty() && url.contains(&down) {
        return Some("HTTP 503 Service Unavailable");
    }
    if url.contains("flaky") && attempt < 3 {
        return Some("timed out after 10s");
    }
    None
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

struct Calls {
    queue: Queue,
    /// The "next attempt in" lines, which read the message's due time.
    reports: TaskTracker,
}

impl Handler for Calls {
    async fn handle(&self, d: &Delivery) -> Outcome {
        let hook: Webhook = match serde_json::from_slice(&d.payload) {
            Ok(hook) => hook,
            Err(e) => {
                return Outcome::Dead {
                    error: format!("not a webhook: {e}"),
                }
            }
        };
        match call_webhook(&hook.url, d.attempt) {
            None => Outcome::Ack,
            // No delay: the message's BACKOFF decides when it is due again.
            Some(error) => Outcome::Nack {
                delay: None,
                error: error.into(),
            },
        }
    }

    fn settled(&self, d: &Delivery, _outcome: Option<&Outcome>, settlement: &Settlement) {
        let (id, attempt) = (d.id_lossy().into_owned(), d.attempt);
        match settlement {
            Settlement::Acked | Settlement::AckedLate => {
                println!("delivered {id} attempt={attempt}")
            }
            Settlement::Nacked(NackState::Dead) => {
                println!("gave up {id} attempt={attempt}: dead letter")
            }
            Settlement::Nacked(_) => {
                let queue = self.queue.clone();
                self.reports.spawn(async move {
                    let due = match queue.get(id.as_bytes()).await {
                        Ok(Some(m)) => m.due_at.unwrap_or_default() as i64,
                        _ => now_ms(),
                    };
                    let wait = (due - now_ms()) as f64 / 1000.0;
                    println!("retry {id} attempt={attempt} failed, next attempt in {wait:.1}s");
                });
            }
            // ATTEMPT fenced the NACK: our lease ran out and another worker
            // may hold the message now, so its try was left alone.
            Settlement::Stale => println!("too late for {id} attempt={attempt}"),
            Settlement::Unsettled(e) => eprintln!("could not settle {id}: {e}"),
        }
    }
}

async fn worker(server: Server, con: Connection) -> Result<(), Box<dyn Error>> {
    let stop = dq_client::stop_on_signals()?;
    let config = ConsumerConfig {
        concurrency: 10,
        block: Duration::from_secs(1),
        ..ConsumerConfig::default()
    };
    let consumer = Consumer::new(server, vec![QUEUE.into()], config)?;
    let calls = Arc::new(Calls {
        queue: Queue::new(con, QUEUE),
        reports: TaskTracker::new(),
    });
    println!("worker waiting for webhooks");
    consumer.run(Arc::clone(&calls), stop).await?;
    calls.reports.close();
    calls.reports.wait().await;
    println!("worker stopped");
    Ok(())
}

async fn redrive(con: Connection) -> Result<(), Box<dyn Error>> {
    let queue = Queue::new(con, QUEUE);
    for dead in queue.peek(State::Dead, 100).await? {
        let hook: Webhook = serde_json::from_slice(&dead.payload)?;
        let message = queue.get(&dead.id).await?;
        let reason = message.and_then(|m| m.dead_reason).unwrap_or_default();
        let error =
            String::from_utf8_lossy(dead.last_error.as_deref().unwrap_or_default()).into_owned();
        println!(
            "dead {} {} attempts={} reason={reason} error={error}",
            String::from_utf8_lossy(&dead.id),
            hook.url,
            dead.attempt
        );
    }
    let moved = queue.redrive_all().await?;
    println!("redrove {moved} dead letter(s)");
    Ok(())
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn Error>> {
    let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
    let server = Server::single(url)?;
    let con = server.connect(Duration::from_secs(5)).await?;
    match std::env::args().nth(1).as_deref() {
        Some("producer") => producer(con).await,
        Some("worker") => worker(server, con).await,
        Some("redrive") => redrive(con).await,
        _ => {
            eprintln!("usage: webhook_retry producer | worker | redrive");
            std::process::exit(2);
        }
    }
}
