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
// The Worker is measured over one queue (DQ.POP) against the plain loop,
// and over two queues of one server (one DQ.MPOP; the jobs alternate
// between them) against the same plain loop made of DQ.MPOP: a reply
// holds one queue's messages, so two queues take more round trips than
// one whoever consumes them. And MPOP's order is strict: the second
// queue's jobs wait while the first has ready ones (a trickle of them
// after any stall of the server keeps it from empty), so the MPOP rows'
// lateness p99 is the second queue's and varies much more from run to
// run. Rounds alternate the four (5; quick: 1) and the median is kept.
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

/** The queues a way consumes: one, or two for the ways over several (DQ.MPOP). */
const queuesOf = (way, name) => (way === 'mpop' || way === 'loopMpop' ? [`${name}-a`, `${name}-b`] : [name]);

/** n jobs, job k in queue k mod queues. */
async function fill(client, names, n) {
  for (let i = 0; i < n; i += 1000) {
    const p = client.pipeline();
    for (let k = i; k < Math.min(n, i + 1000); k++) p.call('DQ.ADD', names[k % names.length], `job ${k}`, 'ID', `j${k}`);
    await p.exec();
  }
}

// The baseline: POP up to CONCURRENCY, run the handlers, one ACK for them all.
async function plainLoop(client, [name], n, handler) {
  const q = new dq.Queue(client, name);
  let done = 0;
  while (done < n) {
    const batch = await q.pop({ count: CONCURRENCY, blockMs: 1000, leaseMs: 30000 });
    if (batch.length === 0) continue;
    await Promise.all(batch.map(handler));
    await q.ack(...batch.map((d) => d.id));
    done += batch.length;
  }
  return process.hrtime.bigint();
}

// The same over several queues: DQ.MPOP up to CONCURRENCY, the handlers,
// one ACK to the queue the reply names.
async function plainMpopLoop(client, names, n, handler) {
  const queues = new Map(names.map((name) => [name, new dq.Queue(client, name)]));
  let done = 0;
  while (done < n) {
    const reply = await client.call('DQ.MPOP', names.length, ...names, 'COUNT', CONCURRENCY, 'BLOCK', 1000, 'LEASE', 30000);
    if (reply == null) continue;
    const batch = reply[1].map(([id, payload]) => ({ id, payload }));
    await Promise.all(batch.map(handler));
    await queues.get(reply[0]).ack(...batch.map((d) => d.id));
    done += batch.length;
  }
  return process.hrtime.bigint();
}

async function viaWorker(client, names, n, handler) {
  let done = 0;
  let finish;
  const finished = new Promise((r) => (finish = r));
  const queues = names.map((name) => new dq.Queue(client, name));
  const worker = new dq.Worker(queues.length === 1 ? queues[0] : queues, handler, {
    concurrency: CONCURRENCY,
    blockMs: 1000,
    onSettled: () => {
      if (++done === n) finish(process.hrtime.bigint());
    },
  });
  const run = worker.run();
  const end = await finished;
  // Not timed: a POP blocked when the last job settled ends within blockMs.
  worker.stop();
  await run;
  return end;
}

const ways = { loop: plainLoop, worker: viaWorker, loopMpop: plainMpopLoop, mpop: viaWorker };
const WAYS = Object.keys(ways);

async function throughput(client, way) {
  const names = queuesOf(way, qname(`tp-${way}`));
  await fill(client, names, JOBS);
  const start = process.hrtime.bigint();
  const end = await ways[way](client, names, JOBS, async () => {});
  const secs = Number(end - start) / 1e9;
  for (const name of names) {
    const stats = await new dq.Queue(client, name).stats();
    if (stats.acked !== JOBS / names.length || stats.inflight !== 0) throw new Error(`${way}: ${JSON.stringify(stats)}`);
    await client.del(name);
  }
  return JOBS / secs;
}

const pct = (sorted, p) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];

async function lateness(client, way) {
  const names = queuesOf(way, qname(`late-${way}`));
  const late = [];
  const handler = async (d) => {
    late.push(Date.now() - Number(d.payload.toString().split(' ')[1]));
  };
  // Due over one second, starting once everything is added and the
  // consumer waits.
  const first = Date.now() + 1500 + SPREAD_JOBS / 10;
  // A connection of its own: the loop's blocking POP would hold up the ADDs.
  const consumer = client.duplicate();
  const run = ways[way](consumer, names, SPREAD_JOBS, handler);
  for (let i = 0; i < SPREAD_JOBS; i += 1000) {
    const p = client.pipeline();
    for (let k = i; k < Math.min(SPREAD_JOBS, i + 1000); k++) {
      const due = first + Math.floor((k * 1000) / SPREAD_JOBS);
      p.call('DQ.ADD', names[k % names.length], `due ${due}`, 'AT', String(due), 'ID', `j${k}`);
    }
    await p.exec();
  }
  if (Date.now() >= first) throw new Error('adding took longer than the head start');
  await run;
  consumer.disconnect();
  for (const name of names) await client.del(name);
  late.sort((a, b) => a - b);
  return { p50: pct(late, 50), p99: pct(late, 99) };
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

async function main() {
  const client = new Redis(url);
  const tp = Object.fromEntries(WAYS.map((way) => [way, []]));
  const p50 = Object.fromEntries(WAYS.map((way) => [way, []]));
  const p99 = Object.fromEntries(WAYS.map((way) => [way, []]));
  for (let r = 0; r < ROUNDS; r++) {
    if (process.env.DQ_BENCH_ONLY === 'lateness') for (const way of WAYS) tp[way].push(1);
    else for (const way of WAYS) tp[way].push(await throughput(client, way));
    for (const way of WAYS) {
      const l = await lateness(client, way);
      p50[way].push(l.p50);
      p99[way].push(l.p99);
    }
  }
  const label = {
    loop: 'plain loop (POP COUNT 50, one ACK per batch)',
    worker: 'dq.Worker, concurrency 50',
    loopMpop: 'plain loop over 2 queues (MPOP COUNT 50, one ACK per batch)',
    mpop: 'dq.Worker over 2 queues (one DQ.MPOP), concurrency 50',
  };
  const row = (way) => `| ${label[way]} | ${Math.round(median(tp[way]))} | ${median(p50[way])} | ${median(p99[way])} |`;
  const tpRatio = (way, base) => (median(tp[way]) / median(tp[base])).toFixed(2);
  const lateRatio = (way, base) => (median(p99[way]) / Math.max(1, median(p99[base]))).toFixed(2);
  const text = [
    `# Node.js: Worker against a plain loop (ioredis ${require('ioredis/package.json').version}, Node ${process.version})`,
    '',
    `${JOBS} jobs due at once (throughput); ${SPREAD_JOBS} jobs due over one second (lateness: handler start - due time). Median of ${ROUNDS} round(s).`,
    '',
    '| consumer | jobs/s | lateness p50 ms | lateness p99 ms |',
    '|---|---|---|---|',
    row('loop'),
    row('worker'),
    row('loopMpop'),
    row('mpop'),
    '',
    `Worker/loop: throughput ${tpRatio('worker', 'loop')}x, lateness p99 ${lateRatio('worker', 'loop')}x (the aim: throughput at least 0.8x, p99 at most 2x).`,
    `Worker/loop over 2 queues (MPOP): throughput ${tpRatio('mpop', 'loopMpop')}x, lateness p99 ${lateRatio('mpop', 'loopMpop')}x; against the one-queue loop: throughput ${tpRatio('mpop', 'loop')}x, lateness p99 ${lateRatio('mpop', 'loop')}x.`,
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
