'use strict';
// A job's result back to its caller, one job after another (issue 34): the
// time from add to the result in hand, through a worker of concurrency 10,
// p50 and p99 over 500 jobs (quick: 100), for
//
// - dq-client: queue.add → dq.Worker (its handler returns the result:
//   DQ.DONE) → queue.wait (DQ.WAIT BLOCK on a connection of its own), the
//   queue keeping results (RETAIN 1h);
// - BullMQ 5.81.5 (a dev dependency, node/package.json): queue.add → a
//   BullMQ Worker (its processor returns the result) →
//   job.waitUntilFinished(queueEvents), completed jobs kept (its default);
//
// on the same server (the one scripts/with-servers started, DQ_REDIS_URL),
// in the same run. The payload is {"order":42}, the result 16 bytes; each
// side first runs 50 jobs not timed (connections opened, code warm). Rounds
// alternate the two (3; quick: 1) and the median of each figure is kept.
// Prints a table and writes target/bench/wait-node.md. Run by
// `scripts/bench-clients wait` (make bench runs it).

const fs = require('node:fs');
const path = require('node:path');
const Redis = require('ioredis');
const bullmq = require('bullmq');
const dq = require('..');

const url = process.env.DQ_REDIS_URL;
if (!url) throw new Error('DQ_REDIS_URL is not set: run it with scripts/bench-clients wait');
const quick = Boolean(process.env.DQ_BENCH_QUICK);
const JOBS = quick ? 100 : 500;
const WARMUP = 50;
const ROUNDS = quick ? 1 : 3;
const CONCURRENCY = 10;
const PAYLOAD = { order: 42 };
const RESULT = 'refund sent: 42!';
const out = process.env.DQ_BENCH_OUT || path.join(__dirname, '..', '..', 'target', 'bench');

let seq = 0;
const qname = (what) => `bench-wait-${what}-${process.pid}-${seq++}`;
const ms = (t0, t1) => Number(t1 - t0) / 1e6;

/** WARMUP + n jobs one after another; the latencies (ms) of the last n. */
async function timed(n, one) {
  const lat = [];
  for (let i = 0; i < WARMUP + n; i++) {
    const t0 = process.hrtime.bigint();
    await one(i);
    if (i >= WARMUP) lat.push(ms(t0, process.hrtime.bigint()));
  }
  return lat;
}

async function dqRound(client) {
  const q = new dq.Queue(client, qname('dq'));
  await q.configSet({ retainMs: '1h' });
  const worker = new dq.Worker(q, async () => RESULT, { concurrency: CONCURRENCY });
  const run = worker.run();
  const payload = JSON.stringify(PAYLOAD);
  const lat = await timed(JOBS, async () => {
    const id = await q.add(payload);
    const outcome = await q.wait(id, { timeoutMs: '10s' });
    if (!outcome || outcome.state !== 'done' || outcome.value.toString() !== RESULT) throw new Error(`dq: ${id} ended ${JSON.stringify(outcome)}`);
  });
  // Not timed: a POP blocked when the last job settled ends within blockMs.
  worker.stop();
  await run;
  await client.del(q.name);
  return lat;
}

async function bullmqRound() {
  const { hostname, port } = new URL(url);
  // BullMQ's workers need maxRetriesPerRequest null (its blocking calls).
  const connection = { host: hostname, port: Number(port), maxRetriesPerRequest: null };
  const name = qname('bullmq');
  const queue = new bullmq.Queue(name, { connection });
  const events = new bullmq.QueueEvents(name, { connection });
  const worker = new bullmq.Worker(name, async () => RESULT, { connection, concurrency: CONCURRENCY });
  await Promise.all([queue.waitUntilReady(), events.waitUntilReady(), worker.waitUntilReady()]);
  const lat = await timed(JOBS, async () => {
    const job = await queue.add('job', PAYLOAD);
    const result = await job.waitUntilFinished(events, 10000);
    if (result !== RESULT) throw new Error(`BullMQ: job ${job.id} returned ${JSON.stringify(result)}`);
  });
  await worker.close();
  await events.close();
  await queue.obliterate({ force: true });
  await queue.close();
  return lat;
}

const pct = (sorted, p) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

async function main() {
  const client = new Redis(url);
  const sides = { dq: { p50: [], p99: [] }, bullmq: { p50: [], p99: [] } };
  for (let r = 0; r < ROUNDS; r++) {
    for (const [side, round] of [['dq', () => dqRound(client)], ['bullmq', bullmqRound]]) {
      const lat = (await round()).sort((a, b) => a - b);
      sides[side].p50.push(pct(lat, 50));
      sides[side].p99.push(pct(lat, 99));
    }
  }
  const fig = (side, p) => median(sides[side][p]).toFixed(2);
  const each = (side, p) => sides[side][p].map((v) => v.toFixed(2)).join(', ');
  const below = (p) => (median(sides.dq[p]) < median(sides.bullmq[p]) ? 'below' : 'NOT below');
  const { version: server } = /redis_version:(?<version>\S+)/.exec(await client.info('server')).groups;
  const text = [
    `# Node.js: a job's result back by waiting, dq-client against BullMQ ${require('bullmq/package.json').version} (Redis ${server}, ioredis ${require('ioredis/package.json').version}, Node ${process.version})`,
    '',
    `${JOBS} jobs one after another: add, a worker of concurrency ${CONCURRENCY} returns a ${RESULT.length}-byte result, the caller waits for it; latency from add to the result in hand. Median of ${ROUNDS} round(s) (each round's figures in brackets).`,
    '',
    '| client | p50 ms | p99 ms |',
    '|---|--:|--:|',
    `| dq-client: queue.add → dq.Worker → queue.wait (DQ.WAIT) | ${fig('dq', 'p50')} (${each('dq', 'p50')}) | ${fig('dq', 'p99')} (${each('dq', 'p99')}) |`,
    `| BullMQ: queue.add → Worker → job.waitUntilFinished(queueEvents) | ${fig('bullmq', 'p50')} (${each('bullmq', 'p50')}) | ${fig('bullmq', 'p99')} (${each('bullmq', 'p99')}) |`,
    '',
    `dq's p50 is ${below('p50')} BullMQ's, its p99 ${below('p99')} (the target: both below).`,
    '',
  ].join('\n');
  process.stdout.write(text);
  fs.mkdirSync(out, { recursive: true });
  fs.writeFileSync(path.join(out, 'wait-node.md'), text);
  await client.quit();
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
