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
  void [id, names, n, payload, all];
}
void main;
