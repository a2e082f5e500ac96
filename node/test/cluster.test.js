'use strict';
const test = require('node:test');
const assert = require('node:assert');
const dq = require('..');
const { unique, cluster, eventually } = require('./helpers');

/** MOVED replies the masters sent so far (INFO errorstats). */
async function movedCount(c) {
  let n = 0;
  for (const node of c.nodes('master')) {
    const m = /errorstat_MOVED:count=(\d+)/.exec(await node.info('errorstats'));
    if (m) n += Number(m[1]);
  }
  return n;
}

test('a sharded queue of 8 shards on 3 masters: each message once, groups in order, a fair share', async () => {
  const c = cluster();
  try {
    await c.ping();
    const q = new dq.ShardedQueue(c, unique('jobs'), { shards: 8 });
    const moved = await movedCount(c);

    // 1600 messages by random id and 400 in 8 groups, all due now.
    const ids = new Set();
    const groups = new Map();
    for (let i = 0; i < 2000; i++) {
      const o = {};
      if (i % 5 === 0) {
        o.group = `g${i % 8}`;
        o.id = `m${i}`;
        if (!groups.has(o.group)) groups.set(o.group, []);
        groups.get(o.group).push(o.id);
      }
      ids.add(await q.add(String(i), o));
    }
    assert.strictEqual(ids.size, 2000);

    // The shards are on all three masters: each master holds some of them.
    const holders = new Set();
    for (const node of c.nodes('master')) {
      for (const name of q.shardNames) {
        // A node counts keys only in slots it owns.
        if ((await node.cluster('COUNTKEYSINSLOT', dq.keySlot(name))) > 0) holders.add(`${node.options.host}:${node.options.port}`);
      }
    }
    assert.strictEqual(holders.size, 3);
    const backlog = new Map();
    for (const shard of q.shards) backlog.set(shard.name, (await shard.stats()).ready);
    for (const [name, n] of backlog) assert.ok(n > 100, `${name} holds only ${n}`);
    const total = await q.stats();
    assert.strictEqual(total.added, 2000);
    assert.strictEqual(total.ready + total.delayed, 2000);
    assert.strictEqual((await q.get('m5', { group: 'g5' })).shard, q.shardFor('g5').name);

    const order = [];
    const worker = new dq.Worker(q, async (d) => {
      order.push([d.queue, d.id, d.attempt]);
      await new Promise((r) => setTimeout(r, 1));
    }, { concurrency: 4, blockMs: 200 });
    const run = worker.run();
    assert.ok(await eventually(() => order.length >= 2000, 60000), `${order.length} of 2000 handled`);
    worker.stop();
    await run;

    assert.strictEqual(order.length, 2000);
    assert.strictEqual(new Set(order.map((o) => o[1])).size, 2000);
    assert.ok(order.every(([, id, attempt]) => attempt === 1 && ids.has(id)));
    const after = await q.stats();
    assert.strictEqual(after.acked, 2000);
    assert.strictEqual(after.ready + after.delayed + after.inflight + after.dead, 0);
    for (const [g, want] of groups) {
      const got = order.map((o) => o[1]).filter((id) => want.includes(id));
      assert.deepStrictEqual(got, want, `group ${g}`);
    }
    // With equal backlogs, by half-time every shard gave a quarter of its own.
    const firstHalf = new Map();
    for (const [queue] of order.slice(0, 1000)) firstHalf.set(queue, (firstHalf.get(queue) || 0) + 1);
    for (const [name, n] of backlog) assert.ok((firstHalf.get(name) || 0) * 4 >= n, `${name}: ${firstHalf.get(name)} of ${n} in the first half`);
    // Every command went straight to its shard's master.
    assert.strictEqual(await movedCount(c), moved);
    assert.ok((await dq.queues(c)).includes(q.shardNames[0]));
  } finally {
    c.disconnect();
  }
});
