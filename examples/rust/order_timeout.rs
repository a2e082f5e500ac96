//! Order timeout: cancel an order that is still unpaid 30 minutes after it was placed.
//!
//! ```text
//! cargo run --example order_timeout -- producer [N]   # place N orders (default 3); the first one gets paid
//! cargo run --example order_timeout -- worker         # cancel the orders whose time ran out; Ctrl-C stops it
//! ```
//!
//! REDIS_URL picks the server (default redis://127.0.0.1:6379), DQ_EXAMPLE_DELAY_MS
//! how long an order may stay unpaid (default 1800000, 30 minutes).

use std::error::Error;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use redis::{cmd, Connection};
use serde_json::{json, Value};
use signal_hook::consts::{SIGINT, SIGTERM};

const QUEUE: &str = "orders";

fn producer(con: &mut Connection, count: usize) -> Result<(), Box<dyn Error>> {
    let delay: u64 = match std::env::var("DQ_EXAMPLE_DELAY_MS") {
        Ok(ms) => ms.parse()?,
        Err(_) => 30 * 60 * 1000,
    };
    let mut orders = Vec::new();
    for _ in 0..count {
        let n: u64 = cmd("INCR").arg("shop:order-seq").query(con)?;
        let order = format!("order:{n}");
        // The order id is the message id, so paying can cancel the timeout.
        cmd("DQ.ADD")
            .arg(QUEUE)
            .arg(json!({ "order": order }).to_string())
            .arg("DELAY")
            .arg(delay)
            .arg("ID")
            .arg(&order)
            .exec(con)?;
        println!("added {order}, cancelled unless paid within {delay} ms");
        orders.push(order);
    }
    if let Some(first) = orders.first() {
        let cancelled: u64 = cmd("DQ.CANCEL").arg(QUEUE).arg(first).query(con)?;
        if cancelled == 1 {
            println!("paid {first}, its timeout is removed");
        }
    }
    Ok(())
}

/// Stands in for the real work: mark the order cancelled, release its stock.
fn cancel_order(_order: &str) {}

fn worker(con: &mut Connection) -> Result<(), Box<dyn Error>> {
    let stopping = Arc::new(AtomicBool::new(false));
    signal_hook::flag::register(SIGINT, Arc::clone(&stopping))?;
    signal_hook::flag::register(SIGTERM, Arc::clone(&stopping))?;
    println!("worker waiting for orders");
    while !stopping.load(Ordering::Relaxed) {
        // BLOCK 1000 wakes the loop at least every second to see a stop request.
        let batch: Option<Vec<(String, String, u64)>> = cmd("DQ.POP")
            .arg(QUEUE)
            .arg("COUNT")
            .arg(10)
            .arg("BLOCK")
            .arg(1000)
            .query(con)?;
        // The batch at hand is finished even after a stop request: each
        // message is either acked here or, if we crash, redelivered after its lease.
        for (id, payload, attempt) in batch.unwrap_or_default() {
            let order: Value = serde_json::from_str(&payload)?;
            cancel_order(order["order"].as_str().unwrap_or_default());
            cmd("DQ.ACK").arg(QUEUE).arg(&id).exec(con)?;
            println!("cancelled {id} attempt={attempt}");
        }
    }
    println!("worker stopped");
    Ok(())
}

fn main() -> Result<(), Box<dyn Error>> {
    let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
    let mut con = redis::Client::open(url)?.get_connection()?;
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        ["producer"] => producer(&mut con, 3),
        ["producer", n] => producer(&mut con, n.parse()?),
        ["worker"] => worker(&mut con),
        _ => {
            eprintln!("usage: order_timeout producer [N] | worker");
            std::process::exit(2);
        }
    }
}
