'use strict';
// The Worker against a plain loop (DQ.POP COUNT n, the handlers, one DQ.ACK
// per batch), on the same server in the same run (make bench):
//
// - throughput: N jobs due at once (50,000; quick: 10,000), concurrency 50,
//   a handler that does nothing: jobs per second from the first POP to the
//   last ACK.
// - lateness: M jobs falling due evenly over one second (10,000; quick:
//   2,000) while the consumer waits: how long after its due time each job's
//   handler starts, p50 and p99.
//
// Rounds alternate loop and Worker (5; quick: 1) and the median is kept.
// Prints a table and writes target/bench/worker-node.md. Run by
// scripts/bench-clients under scripts/with-servers (DQ_REDIS_URL).

const fs = require('node:fs');
const path = require('node:path');
const Redis = require('ioredis');
const dq = require('..');

const url = process.env.DQ_REDIS_URL;
if (!url) throw new Error('DQ_REDIS_URL is not set: run it with scripts/bench-clients');
const quick = Boolean(process.env.DQ_BENCH_QUICK);
const JOBS = quick ? 10000 : 50000;
const SPREAD_JOBS = quick ? 2000 : 10000;
const ROUNDS = quick ? 1 : 5;
const CONCURRENCY = 50;
const out = process.env.DQ_BENCH_OUT || path.join(__dirname, '..', '..', 'target', 'bench');

let seq = 0;
const qname = (what) => `bench-${what}-${process.pid}-${seq++}`;

async function fill(client, name, n, dueAt) {
  for (let i = 0; i < n; i += 1000) {
    const p = client.pipeline();
    for (let k = i; k < Math.min(n, i + 1000); k++) {
      if (dueAt) p.call('DQ.ADD', name, `job ${k}`, 'AT', String(dueAt(k)), 'ID', `j${k}`);
      else p.call('DQ.ADD', name, `job ${k}`, 'ID', `j${k}`);
    }
    await p.exec();
  }
}

// The baseline: POP up to CONCURRENCY, run the handlers, one ACK for them all.
async function plainLoop(client, name, n, handler) {
  const q = new dq.Queue(client, name);
  let done = 0;
  while (done < n) {
    const batch = await q.pop({ count: CONCURRENCY, blockMs: 1000, leaseMs: 30000 });
    if (batch.length === 0) continue;
    await Promise.all(batch.map(handler));
    await q.ack(...batch.map((d) => d.id));
    done += batch.length;
  }
}

async function viaWorker(client, name, n, handler) {
  let done = 0;
  let finish;
  const finished = new Promise((r) => (finish = r));
  const worker = new dq.Worker(new dq.Queue(client, name), handler, {
    concurrency: CONCURRENCY,
    blockMs: 1000,
    onSettled: () => {
      if (++done === n) finish();
    },
  });
  const run = worker.run();
  await finished;
  worker.stop();
  await run;
}

const ways = { loop: plainLoop, worker: viaWorker };

async function throughput(client, way) {
  const name = qname(`tp-${way}`);
  await fill(client, name, JOBS);
  const start = process.hrtime.bigint();
  await ways[way](client, name, JOBS, async () => {});
  const secs = Number(process.hrtime.bigint() - start) / 1e9;
  const stats = await new dq.Queue(client, name).stats();
  if (stats.acked !== JOBS || stats.inflight !== 0) throw new Error(`${way}: ${JSON.stringify(stats)}`);
  await client.del(name);
  return JOBS / secs;
}

const pct = (sorted, p) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];

async function lateness(client, way) {
  const name = qname(`late-${way}`);
  const late = [];
  const handler = async (d) => {
    late.push(Date.now() - Number(d.payload.toString().split(' ')[1]));
  };
  // Due over one second, starting once everything is added and the
  // consumer waits.
  const first = Date.now() + 1500 + SPREAD_JOBS / 10;
  // A connection of its own: the loop's blocking POP would hold up the ADDs.
  const consumer = client.duplicate();
  const run = ways[way](consumer, name, SPREAD_JOBS, handler);
  for (let i = 0; i < SPREAD_JOBS; i += 1000) {
    const p = client.pipeline();
    for (let k = i; k < Math.min(SPREAD_JOBS, i + 1000); k++) {
      const due = first + Math.floor((k * 1000) / SPREAD_JOBS);
      p.call('DQ.ADD', name, `due ${due}`, 'AT', String(due), 'ID', `j${k}`);
    }
    await p.exec();
  }
  if (Date.now() >= first) throw new Error('adding took longer than the head start');
  await run;
  consumer.disconnect();
  await client.del(name);
  late.sort((a, b) => a - b);
  return { p50: pct(late, 50), p99: pct(late, 99) };
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

async function main() {
  const client = new Redis(url);
  const tp = { loop: [], worker: [] };
  const p50 = { loop: [], worker: [] };
  const p99 = { loop: [], worker: [] };
  for (let r = 0; r < ROUNDS; r++) {
    if (process.env.DQ_BENCH_ONLY === 'lateness') for (const way of ['loop', 'worker']) tp[way].push(1);
    else for (const way of ['loop', 'worker']) tp[way].push(await throughput(client, way));
    for (const way of ['loop', 'worker']) {
      const l = await lateness(client, way);
      p50[way].push(l.p50);
      p99[way].push(l.p99);
    }
  }
  const row = (way) => `| ${way === 'loop' ? 'plain loop (POP COUNT 50, one ACK per batch)' : 'dq.Worker, concurrency 50'} | ${Math.round(median(tp[way]))} | ${median(p50[way])} | ${median(p99[way])} |`;
  const tpRatio = median(tp.worker) / median(tp.loop);
  const lateRatio = median(p99.worker) / Math.max(1, median(p99.loop));
  const text = [
    `# Node.js: Worker against a plain loop (ioredis ${require('ioredis/package.json').version}, Node ${process.version})`,
    '',
    `${JOBS} jobs due at once (throughput); ${SPREAD_JOBS} jobs due over one second (lateness: handler start - due time). Median of ${ROUNDS} round(s).`,
    '',
    '| consumer | jobs/s | lateness p50 ms | lateness p99 ms |',
    '|---|---|---|---|',
    row('loop'),
    row('worker'),
    '',
    `Worker/loop: throughput ${tpRatio.toFixed(2)}x, lateness p99 ${lateRatio.toFixed(2)}x (the aim: throughput at least 0.8x, p99 at most 2x).`,
    '',
  ].join('\n');
  process.stdout.write(text);
  fs.mkdirSync(out, { recursive: true });
  fs.writeFileSync(path.join(out, 'worker-node.md'), text);
  await client.quit();
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
