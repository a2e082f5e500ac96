//! Webhook retry: call a webhook; when the call fails, try again after 15s, 3m,
//! 10m, 30m, 1h, 2h, 6h and 15h, then keep it as a dead letter until it is redriven.
//!
//! ```text
//! cargo run --example webhook_retry -- producer   # queue three calls: one works, one is flaky, one's receiver is down
//! cargo run --example webhook_retry -- worker     # make the calls; Ctrl-C stops it
//! cargo run --example webhook_retry -- redrive    # show the dead letters and queue them again
//! ```
//!
//! REDIS_URL picks the server (default redis://127.0.0.1:6379). DQ_EXAMPLE_BACKOFF
//! replaces the waits (e.g. 100ms,200ms). The simulated receiver fails for URLs
//! containing DQ_EXAMPLE_DOWN (default "bad"; empty: nothing is down).

use std::collections::HashMap;
use std::error::Error;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use redis::{cmd, Connection, FromRedisValue, RedisResult, Value};
use serde::Deserialize;
use signal_hook::consts::{SIGINT, SIGTERM};

const QUEUE: &str = "webhooks";

#[derive(Deserialize)]
struct Webhook {
    url: String,
}

fn backoff() -> String {
    std::env::var("DQ_EXAMPLE_BACKOFF").unwrap_or_else(|_| "15s,3m,10m,30m,1h,2h,6h,15h".into())
}

fn producer(con: &mut Connection) -> Result<(), Box<dyn Error>> {
    let backoff = backoff();
    let max_attempts = backoff.split(',').count() + 1; // the first try, then one per wait
    for url in [
        "https://example.test/ok",
        "https://example.test/flaky",
        "https://example.test/bad",
    ] {
        let n: u64 = cmd("INCR").arg("webhooks:seq").query(con)?;
        let hook = format!("hook:{n}");
        let payload = serde_json::json!({ "url": url, "event": "order.paid" }).to_string();
        cmd("DQ.ADD")
            .arg(QUEUE)
            .arg(payload)
            .arg("ID")
            .arg(&hook)
            .arg("BACKOFF")
            .arg(&backoff)
            .arg("MAXATTEMPTS")
            .arg(max_attempts)
            .exec(con)?;
        println!("added {hook} {url}");
    }
    Ok(())
}

/// Stands in for an HTTP POST; true when the receiver answered 2xx.
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

/// One field of the message's DQ.GET record.
fn dq_get<T: FromRedisValue>(con: &mut Connection, id: &str, field: &str) -> RedisResult<T> {
    let mut record: HashMap<String, Value> = cmd("DQ.GET").arg(QUEUE).arg(id).query(con)?;
    let value = record.remove(field).unwrap_or(Value::Nil);
    Ok(T::from_redis_value(value)?)
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

fn worker(con: &mut Connection) -> Result<(), Box<dyn Error>> {
    let stopping = Arc::new(AtomicBool::new(false));
    signal_hook::flag::register(SIGINT, Arc::clone(&stopping))?;
    signal_hook::flag::register(SIGTERM, Arc::clone(&stopping))?;
    println!("worker waiting for webhooks");
    while !stopping.load(Ordering::Relaxed) {
        let batch: Option<Vec<(String, String, u64)>> = cmd("DQ.POP")
            .arg(QUEUE)
            .arg("COUNT")
            .arg(10)
            .arg("BLOCK")
            .arg(1000)
            .query(con)?;
        for (id, payload, attempt) in batch.unwrap_or_default() {
            let hook: Webhook = serde_json::from_str(&payload)?;
            let Some(error) = call_webhook(&hook.url, attempt) else {
                cmd("DQ.ACK").arg(QUEUE).arg(&id).exec(con)?;
                println!("delivered {id} attempt={attempt}");
                continue;
            };
            // No DELAY: the message's BACKOFF decides when it is due again.
            // ATTEMPT: if our lease ran out and another worker holds the
            // message now, the NACK is refused instead of failing their try.
            let state: String = match cmd("DQ.NACK")
                .arg(QUEUE)
                .arg(&id)
                .arg("ATTEMPT")
                .arg(attempt)
                .arg("ERROR")
                .arg(error)
                .query(con)
            {
                Ok(state) => state,
                Err(e) if e.code() == Some("STALE") => {
                    println!("too late for {id} attempt={attempt}: {e}");
                    continue;
                }
                Err(e) => return Err(e.into()),
            };
            if state == "dead" {
                println!("gave up {id} attempt={attempt}: dead letter");
            } else {
                let wait = dq_get::<i64>(con, &id, "due-at")? - now_ms();
                println!(
                    "retry {id} attempt={attempt} failed, next attempt in {:.1}s",
                    wait as f64 / 1000.0
                );
            }
        }
    }
    println!("worker stopped");
    Ok(())
}

fn redrive(con: &mut Connection) -> Result<(), Box<dyn Error>> {
    let dead: Vec<(String, String, u64, i64, Option<String>)> = cmd("DQ.PEEK")
        .arg(QUEUE)
        .arg("DEAD")
        .arg("COUNT")
        .arg(100)
        .query(con)?;
    for (id, payload, attempt, _died_at, error) in dead {
        let hook: Webhook = serde_json::from_str(&payload)?;
        let reason: String = dq_get(con, &id, "dead-reason")?;
        let error = error.unwrap_or_default();
        println!(
            "dead {id} {} attempts={attempt} reason={reason} error={error}",
            hook.url
        );
    }
    let moved: u64 = cmd("DQ.REDRIVE").arg(QUEUE).query(con)?;
    println!("redrove {moved} dead letter(s)");
    Ok(())
}

fn main() -> Result<(), Box<dyn Error>> {
    let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
    let mut con = redis::Client::open(url)?.get_connection()?;
    match std::env::args().nth(1).as_deref() {
        Some("producer") => producer(&mut con),
        Some("worker") => worker(&mut con),
        Some("redrive") => redrive(&mut con),
        _ => {
            eprintln!("usage: webhook_retry producer | worker | redrive");
            std::process::exit(2);
        }
    }
}
