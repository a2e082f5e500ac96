// Compiled with `tsc --noEmit` by scripts/test-node: the types must describe
// the library as the tests use it.
import Redis from 'ioredis';
import * as dq from '..';

async function main(): Promise<void> {
  const client = new Redis();
  const q = new dq.Queue(client, 'orders');
  const id: string | null = await q.add(Buffer.from('{}'), { delayMs: 1000, id: 'a', group: 'g', priority: 1 });
  const sharded = new dq.ShardedQueue(client, 'jobs', { shards: 8 });
  await sharded.add('x', { shardKey: 'user:1' });
  const names: string[] = sharded.shardNames;
  const stats: dq.Stats = await q.stats();
  const n: number = stats.ready + (stats['oldest-ready-age-ms'] ?? 0);
  const message: dq.Message | null = await q.get('a');
  const payload: Buffer | undefined = message?.payload;
  for await (const e of q.scan({ state: 'DEAD', count: 100 })) {
    const err: string | null = e.lastError;
  }
  const worker = new dq.Worker([q, sharded], async (d: dq.Delivery) => {
    if (d.attempt > 3) throw new dq.Permanent('enough');
    if (d.lost || d.signal?.aborted) return;
    throw new dq.Retry(5000);
  }, { concurrency: 8, leaseMs: 30000, handleSignals: true, onSettled: (d, o: dq.Outcome) => {
    const a: dq.Action = o.action;
    const st: dq.SettlementState = o.state;
    void [a, st];
  } });
  await worker.run();
  worker.stop();
  try {
    await q.nack('a', { attempt: 1, error: 'x' });
  } catch (e) {
    if (e instanceof dq.StaleDelivery || e instanceof dq.UnknownMessage || e instanceof dq.DqError) return;
  }
  const all: string[] = await dq.queues(client);
  const next: number | null = await q.schedule('digest', '{}', { cron: '0 8 * * *', tz: 'Europe/Berlin', start: new Date(), missed: 'skip', overlap: 'skip', nx: true, maxAttempts: 3, ttlMs: 60000 });
  await sharded.schedule('tick', 'x', { every: '5m', limit: 10 });
  const removed: number = await q.unschedule('digest', 'tick');
  const schedules: dq.Schedule[] = await sharded.schedules();
  const nextRun: number | null = schedules[0].nextRun;
  const home: dq.Queue = sharded.scheduleShard('tick');
  await q.pause({ forMs: 5000 });
  await sharded.pause();
  const wasPaused: boolean = await q.resume();
  await sharded.configSet({ rate: '100/1s', maxInflight: 20 });
  await q.configSet({ rate: 0, maxInflight: 'DEFAULT' });
  const cfg: dq.QueueConfig = await q.config();
  const limits: [string | null, number | null, number] = [cfg.rate, cfg['max-inflight'], stats.throttled];
  const polled = new dq.Worker([new dq.Queue(client, '{jobs}urgent'), new dq.Queue(client, '{jobs}bulk')], async (d) => {
    d.signal?.addEventListener('abort', () => {
      const why: 'lost' | 'cancelled' | null = d.lostReason;
      const cancelled: boolean = d.cancelled;
      void [why, cancelled];
    });
  }, { onSettled: (_d, o) => {
    if (o.state === 'cancelled') return;
  } });
  // Durations: a number of ms or a string in the server's grammar.
  const d: dq.Duration = '30s';
  await q.add('x', { delayMs: '5m', ttlMs: 86400000 });
  await q.pop({ count: 2, blockMs: '5s', leaseMs: d });
  await q.nack('a', { delayMs: '1m' });
  await q.touch('a', { leaseMs: '2h', attempt: 1 });
  await q.configSet({ leaseMs: '5m' });
  await q.schedule('t', 'x', { every: 60000, ttlMs: '1h' });
  await sharded.pause({ forMs: '10m' });
  const retry = new dq.Retry('30s');
  const retryMs: number | null = retry.delayMs;
  const timed = new dq.Worker(q, async () => {}, { leaseMs: '30s', blockMs: 500 });
  // Outcomes: a handler's result, waiting for it, progress, retention.
  await q.add('x', { id: 'r', retainMs: '1h' });
  const resulting = new dq.Worker(q, async (d) => {
    const deadline: number = await d.progress('40%');
    void deadline;
    return JSON.stringify({ charged: true });
  }, { onSettled: (_d, o) => {
    if (o.action === 'done') return;
  } });
  const outcome: dq.JobOutcome | null = await q.wait('r', { timeoutMs: '5s' });
  const result: Buffer | null = outcome && outcome.state === 'done' ? outcome.value : null;
  const shardOutcome: dq.JobOutcome | null = await sharded.wait('r', { timeoutMs: 1000, shardKey: 'user:1' });
  const finished: number = await q.done([['a', 'result'], ['b', Buffer.from('')]]) + await q.done(new Map([['c', 'r']]));
  await q.progress('a', 'half', { attempt: 1, leaseMs: '1m' });
  await q.touch('a', { attempt: 1, progress: Buffer.from('x') });
  await q.configSet({ retainMs: '7d', retainMax: 1000 });
  await sharded.configSet({ retainMs: 'DEFAULT', retainMax: 'DEFAULT' });
  const kept: [number, string, number | null, number, number] = [cfg['retain-ms'], cfg['retain-ms-from'], cfg['retain-max'], stats.done, stats.dropped];
  const shown: [Buffer | null, number | null, number | null, Buffer | null] = message
    ? [message.result, message['finished-at'], message['retained-until'], message.progress] : [null, null, null, null];
  const doneOnes: dq.Entry[] = await q.peek('done', 5);
  await q.purge('DONE');
  // Events: an async iterator, typed by type; a sharded queue's position by shard.
  await q.configSet({ events: 10000 });
  await sharded.configSet({ events: 'DEFAULT' });
  const keeps: number = cfg.events;
  const reader: dq.EventReader<number | null> = q.events({ after: 12, count: 100, blockMs: '30s', signal: new AbortController().signal });
  for await (const e of reader) {
    const seq: number = e.seq;
    if (e.type === 'progress') {
      const value: Buffer = e.detail;
      const who: string = e.id;
      void [value, who];
    } else if (e.type === 'purged') {
      const none: null = e.id;
      void none;
    }
    const at: number = e.at;
    const attempt: number | null = e.attempt;
    void [seq, at, attempt];
    break;
  }
  const readTo: number | null = reader.position;
  reader.close();
  try {
    for await (const e of sharded.events({ after: { [sharded.shardNames[0]]: 3 } })) {
      const shard: string | undefined = e.shard;
      void shard;
    }
  } catch (e) {
    if (e instanceof dq.EventGapError) {
      const oldest: number = e.oldest;
      const where: string | null = e.shard;
      void [oldest, where];
    } else if (e instanceof dq.EventLogRestarted) {
      const last: number = e.lastSeq;
      void last;
    }
  }
  const listener: dq.QueueEventsListener<dq.ShardPositions> = sharded.listen({ after: {} });
  listener.on('done', (e: dq.EventOf<'done'>) => {
    const job: string = e.id;
    void job;
  }).on('dead', (e) => {
    const reason: string | null = e.detail;
    void reason;
  }).on('gap', (g: dq.EventGapError) => void g.oldest)
    .on('event', (e: dq.QueueEvent) => void e.type)
    .on('error', (err: Error) => void err);
  const where: dq.ShardPositions = listener.position;
  await listener.close();
  const single: number | null = q.listen({ after: await q.lastEventSeq() }).position;
  const now: dq.ShardPositions = await sharded.lastEventSeq();
  sharded.events({ after: now }).close();
  const kind: dq.EventType = 'retry';
  // Groups: limits, order, pauses of one group, the groups listed.
  await q.configSet({ groupLimit: 2, groupRate: '10/1s', order: 'fair' });
  await sharded.configSet({ groupLimit: 'DEFAULT', groupRate: 0, order: 'DEFAULT' });
  const groupCfg: [number, string | null, 'priority' | 'fair'] = [cfg['group-limit'], cfg['group-rate'], cfg.order];
  await q.pause({ group: 'tenant-1', forMs: '1m' });
  await sharded.pause({ group: Buffer.from('tenant-2') });
  const groupWasPaused: boolean = await q.resume({ group: 'tenant-1' }) || await sharded.resume({ group: 'tenant-2' });
  for await (const g of q.groups({ match: 'tenant-*', count: 50 })) {
    const info: dq.GroupInfo = g;
    const counts: [string, number, number, number, boolean, number | null] = [g.name, g.waiting, g.ready, g.inflight, g.paused, g.pausedUntil];
    void [info, counts];
  }
  for await (const g of sharded.groups()) {
    const shardOfGroup: string | undefined = g.shard;
    void shardOfGroup;
  }
  const groupCount: number = stats.groups;
  const groupEvent = (e: dq.EventOf<'paused'>): string | null => e.detail;
  void [groupCfg, groupWasPaused, groupCount, groupEvent];
  void [keeps, readTo, where, single, kind];
  void [id, names, n, payload, all, next, removed, nextRun, home, wasPaused, limits, polled, retryMs, timed,
    resulting, result, shardOutcome, finished, kept, shown, doneOnes, dq.MAX_RESULT_BYTES, dq.MAX_PROGRESS_BYTES];
}
void main;
