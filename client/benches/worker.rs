//! The Worker (`Consumer`) against a plain loop (DQ.POP COUNT n, the
//! handlers, one DQ.ACK per batch), on the same server in the same run
//! (make bench, through scripts/bench-clients, which starts the server and
//! sets DQ_REDIS_URL):
//!
//! - throughput: N jobs due at once (50,000; quick: 10,000), concurrency
//!   50, a handler that does nothing: jobs per second from the first POP to
//!   the last ACK;
//! - lateness: M jobs falling due evenly over one second (10,000; quick:
//!   2,000) while the consumer waits: how long after its due time each
//!   job's handler starts, p50 and p99.
//!
//! Rounds alternate loop and Worker (5; quick: 1) and the median is kept,
//! on tokio's multi-thread runtime, then on its current-thread one. Prints
//! the tables and writes target/bench/worker-rust.md.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use dq_client::{CancellationToken, Delivery, Handler, Outcome, Settlement, Worker, WorkerConfig};
use redis::aio::MultiplexedConnection;

const CONCURRENCY: usize = 50;

fn now_ms() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock")
        .as_secs_f64()
        * 1000.0
}

/// What a handler does: nothing, or note how late the job started.
struct Job {
    late: Option<Arc<Mutex<Vec<f64>>>>,
    settled: Arc<AtomicU64>,
}

impl Job {
    fn run(&self, payload: &[u8]) {
        if let Some(late) = &self.late {
            let due: f64 = std::str::from_utf8(&payload[4..])
                .expect("utf-8")
                .parse()
                .expect("due");
            late.lock().expect("lock").push(now_ms() - due);
        }
    }
}

impl Handler for Job {
    async fn handle(&self, d: &Delivery) -> Outcome {
        self.run(&d.payload);
        Outcome::Ack
    }

    fn settled(&self, _d: &Delivery, _o: Option<&Outcome>, _s: &Settlement) {
        self.settled.fetch_add(1, Ordering::Relaxed);
    }
}

async fn fill(con: &mut MultiplexedConnection, name: &str, n: u64, first_due: Option<f64>) {
    for i in (0..n).step_by(1000) {
        let mut pipe = redis::pipe();
        for k in i..(i + 1000).min(n) {
            let cmd = pipe.cmd("DQ.ADD").arg(name);
            match first_due {
                None => cmd.arg(format!("job {k}")).arg("ID").arg(format!("j{k}")),
                Some(first) => {
                    let due = first as u64 + k * 1000 / n;
                    cmd.arg(format!("due {due}"))
                        .arg("AT")
                        .arg(due)
                        .arg("ID")
                        .arg(format!("j{k}"))
                }
            };
        }
        pipe.query_async::<()>(con).await.expect("DQ.ADD");
    }
}

type Popped = Option<Vec<(Vec<u8>, Vec<u8>, u64)>>;

/// The baseline: POP up to CONCURRENCY, run the handlers, one ACK for them all.
async fn plain_loop(mut con: MultiplexedConnection, name: String, n: u64, job: Arc<Job>) {
    let mut done = 0;
    while done < n {
        let batch: Popped = redis::cmd("DQ.POP")
            .arg(&name)
            .arg("COUNT")
            .arg(CONCURRENCY)
            .arg("BLOCK")
            .arg(1000)
            .arg("LEASE")
            .arg(30000)
            .query_async(&mut con)
            .await
            .expect("DQ.POP");
        let Some(batch) = batch else { continue };
        for (_, payload, _) in &batch {
            job.run(payload);
        }
        let mut ack = redis::cmd("DQ.ACK");
        ack.arg(&name);
        for (id, _, _) in &batch {
            ack.arg(id);
        }
        ack.query_async::<u64>(&mut con).await.expect("DQ.ACK");
        done += batch.len() as u64;
    }
}

async fn via_worker(client: redis::Client, name: String, n: u64, job: Arc<Job>) {
    let config = WorkerConfig {
        concurrency: CONCURRENCY,
        batch: CONCURRENCY,
        block: Duration::from_secs(1),
        ..WorkerConfig::default()
    };
    let worker = Worker::new(client, vec![name], config).expect("worker");
    let stop = CancellationToken::new();
    let settled = Arc::clone(&job.settled);
    let run = {
        let stop = stop.clone();
        tokio::spawn(async move { worker.run(job, stop).await })
    };
    while settled.load(Ordering::Relaxed) < n {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    stop.cancel();
    run.await.expect("worker task").expect("worker");
}

async fn consume(way: &str, client: &redis::Client, name: &str, n: u64, job: Arc<Job>) {
    // A blocking POP of 1 s needs more than the default response timeout.
    let config =
        redis::AsyncConnectionConfig::new().set_response_timeout(Some(Duration::from_secs(10)));
    let con = client
        .get_multiplexed_async_connection_with_config(&config)
        .await
        .expect("connect");
    match way {
        "loop" => plain_loop(con, name.to_owned(), n, job).await,
        _ => via_worker(client.clone(), name.to_owned(), n, job).await,
    }
}

struct Round {
    rate: f64,
    p50: f64,
    p99: f64,
}

async fn round(client: &redis::Client, way: &str, seq: u32, jobs: u64, spread: u64) -> Round {
    let mut con = client
        .get_multiplexed_async_connection()
        .await
        .expect("connect");
    let name = format!("bench-tp-{way}-{}-{seq}", std::process::id());
    fill(&mut con, &name, jobs, None).await;
    let job = Arc::new(Job {
        late: None,
        settled: Arc::new(AtomicU64::new(0)),
    });
    let start = Instant::now();
    consume(way, client, &name, jobs, job).await;
    let rate = jobs as f64 / start.elapsed().as_secs_f64();
    let _: () = redis::cmd("DEL")
        .arg(&name)
        .query_async(&mut con)
        .await
        .expect("DEL");

    let name = format!("bench-late-{way}-{}-{seq}", std::process::id());
    let late = Arc::new(Mutex::new(Vec::new()));
    let job = Arc::new(Job {
        late: Some(Arc::clone(&late)),
        settled: Arc::new(AtomicU64::new(0)),
    });
    let first = (now_ms() + 1500.0 + spread as f64 / 10.0).floor();
    let consumer = {
        let (client, name, job) = (client.clone(), name.clone(), Arc::clone(&job));
        let way = way.to_owned();
        tokio::spawn(async move { consume(&way, &client, &name, spread, job).await })
    };
    fill(&mut con, &name, spread, Some(first)).await;
    assert!(now_ms() < first, "adding took longer than the head start");
    consumer.await.expect("consumer");
    let _: () = redis::cmd("DEL")
        .arg(&name)
        .query_async(&mut con)
        .await
        .expect("DEL");
    let mut late = late.lock().expect("lock").clone();
    late.sort_by(f64::total_cmp);
    let at = |p: f64| late[((p / 100.0 * late.len() as f64) as usize).min(late.len() - 1)];
    Round {
        rate,
        p50: at(50.0),
        p99: at(99.0),
    }
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

/// The rounds on one runtime: the table's rows and the two ratios.
async fn measure(url: String, jobs: u64, spread: u64, rounds: usize) -> (String, f64, f64) {
    let client = redis::Client::open(url).expect("url");
    let mut results: Vec<(&str, Vec<Round>)> = vec![("loop", Vec::new()), ("worker", Vec::new())];
    let mut seq = 0;
    for _ in 0..rounds {
        for (way, rs) in results.iter_mut() {
            seq += 1;
            rs.push(round(&client, way, seq, jobs, spread).await);
        }
    }
    let med = |rs: &[Round], f: fn(&Round) -> f64| median(rs.iter().map(f).collect());
    let mut rows = String::new();
    for (way, rs) in &results {
        let label = if *way == "loop" {
            "plain loop (POP COUNT 50, one ACK per batch)"
        } else {
            "dq_client::Worker, concurrency 50"
        };
        writeln!(
            rows,
            "| {label} | {:.0} | {:.1} | {:.1} |",
            med(rs, |r| r.rate),
            med(rs, |r| r.p50),
            med(rs, |r| r.p99)
        )
        .unwrap();
    }
    let tp = med(&results[1].1, |r| r.rate) / med(&results[0].1, |r| r.rate);
    let late = med(&results[1].1, |r| r.p99) / med(&results[0].1, |r| r.p99).max(1.0);
    (rows, tp, late)
}

/// Both tokio runtimes: the multi-thread one `#[tokio::main]` makes (a
/// delivery's task may run on another thread than the POP's), and the
/// current-thread one.
fn main() {
    let url = std::env::var("DQ_REDIS_URL")
        .expect("DQ_REDIS_URL is not set: run it with scripts/bench-clients");
    let quick = std::env::var("DQ_BENCH_QUICK").is_ok_and(|v| !v.is_empty());
    let (jobs, spread, rounds) = if quick {
        (10_000, 2_000, 1)
    } else {
        (50_000, 10_000, 5)
    };
    let mut text = String::new();
    writeln!(
        text,
        "# Rust: Worker against a plain loop (dq-client on redis-rs, tokio)\n"
    )
    .unwrap();
    writeln!(text, "{jobs} jobs due at once (throughput); {spread} jobs due over one second (lateness: handler start - due time). Median of {rounds} round(s).\n").unwrap();
    for flavor in ["multi-thread", "current-thread"] {
        let runtime = match flavor {
            "multi-thread" => tokio::runtime::Builder::new_multi_thread(),
            _ => tokio::runtime::Builder::new_current_thread(),
        }
        .enable_all()
        .build()
        .expect("runtime");
        let (rows, tp, late) = runtime.block_on(measure(url.clone(), jobs, spread, rounds));
        writeln!(text, "tokio {flavor} runtime:\n").unwrap();
        writeln!(
            text,
            "| consumer | jobs/s | lateness p50 ms | lateness p99 ms |"
        )
        .unwrap();
        writeln!(text, "|---|---|---|---|").unwrap();
        write!(text, "{rows}").unwrap();
        writeln!(text, "\nWorker/loop ({flavor}): throughput {tp:.2}x, lateness p99 {late:.2}x (the aim: throughput at least 0.8x, p99 at most 2x).\n").unwrap();
    }
    print!("{text}");
    let out = std::env::var("DQ_BENCH_OUT")
        .unwrap_or_else(|_| concat!(env!("CARGO_MANIFEST_DIR"), "/../target/bench").to_owned());
    std::fs::create_dir_all(&out).expect("mkdir");
    std::fs::write(format!("{out}/worker-rust.md"), text).expect("write");
}
