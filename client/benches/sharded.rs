//! Sharded-queue throughput for 1, 2 and 4 shards on a 4-master cluster on
//! this machine: messages added per second through `ShardedQueue::add`
//! (many concurrent calls, pipelined per node), then consumed and
//! acknowledged per second by one `Consumer::sharded`. Writes
//! target/bench/sharded.md. `DQ_BENCH_QUICK=1` runs a short version.
//!
//! Every server and the client share this machine's cores, so the figures
//! show what one machine does, not how N machines scale (docs/clients.md, Scaling).

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use dq_client::{
    AddOptions, CancellationToken, Consumer, ConsumerConfig, Delivery, Handler, Outcome,
    Server as DqServer, ShardedQueue,
};
use dq_testkit::{Cluster, Server};

struct Count(Arc<AtomicU64>);

impl Handler for Count {
    async fn handle(&self, _d: &Delivery) -> Outcome {
        self.0.fetch_add(1, Ordering::Relaxed);
        Outcome::Ack
    }
}

const PRODUCERS: usize = 64;

async fn one_round(server: &DqServer, shards: u32, messages: u64) -> (f64, f64) {
    let con = server
        .connect(Duration::from_secs(10))
        .await
        .expect("connect");
    let queue = ShardedQueue::new(con, &format!("bench-{shards}"), shards).expect("layout");
    let payload = vec![b'x'; 64];

    let start = Instant::now();
    let mut producers = Vec::new();
    for p in 0..PRODUCERS as u64 {
        let (queue, payload) = (queue.clone(), payload.clone());
        producers.push(tokio::spawn(async move {
            for _ in (p..messages).step_by(PRODUCERS) {
                queue
                    .add(&payload, &AddOptions::default())
                    .await
                    .expect("DQ.ADD");
            }
        }));
    }
    for p in producers {
        p.await.expect("producer");
    }
    let add_rate = messages as f64 / start.elapsed().as_secs_f64();

    let done = Arc::new(AtomicU64::new(0));
    let config = ConsumerConfig {
        concurrency: 512,
        batch: 128,
        block: Duration::from_millis(100),
        ..ConsumerConfig::default()
    };
    let consumer = Consumer::sharded(server.clone(), queue.shards(), config).expect("consumer");
    let stop = CancellationToken::new();
    let start = Instant::now();
    let run = {
        let (done, stop) = (Arc::clone(&done), stop.clone());
        tokio::spawn(async move { consumer.run(Arc::new(Count(done)), stop).await })
    };
    while done.load(Ordering::Relaxed) < messages {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let consume_rate = messages as f64 / start.elapsed().as_secs_f64();
    stop.cancel();
    run.await.expect("consumer task").expect("consumer");
    (add_rate, consume_rate)
}

fn main() {
    let quick = std::env::var("DQ_BENCH_QUICK").is_ok_and(|v| !v.is_empty());
    let messages: u64 = if quick { 20_000 } else { 200_000 };
    let cluster = Cluster::start_with(4, &Server::builder().release());
    let server = DqServer::cluster(cluster.nodes.iter().map(|n| n.url())).expect("cluster");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");

    let mut table = String::from(
        "| shards | masters holding them | added/s | consumed+acked/s |\n|---|---|---|---|\n",
    );
    let mut base = None;
    for shards in [1u32, 2, 4] {
        let (add, consume) = rt.block_on(one_round(&server, shards, messages));
        let (add0, consume0) = *base.get_or_insert((add, consume));
        let masters = shards.min(4);
        let _ = writeln!(
            table,
            "| {shards} | {masters} | {add:.0} ({:.2}×) | {consume:.0} ({:.2}×) |",
            add / add0,
            consume / consume0
        );
        eprintln!("sharded: {shards} shard(s): {add:.0} added/s, {consume:.0} consumed/s");
    }
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let report = format!(
        "# Sharded queue throughput\n\n{messages} messages of 64 bytes per round, {PRODUCERS} concurrent \
         producers, one consumer (concurrency 512), a 4-master cluster on one machine with {cores} cores. \
         Each round's ratio is against 1 shard.\n\n{table}"
    );
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/bench");
    std::fs::create_dir_all(&dir).expect("target/bench");
    std::fs::write(dir.join("sharded.md"), &report).expect("write sharded.md");
    println!("{report}");
}
