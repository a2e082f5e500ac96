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

/** How many times the masters ran `command` (INFO commandstats). */
async function calls(c, command) {
  let n = 0;
  const re = new RegExp(`cmdstat_${command.replace('.', '\\.')}:calls=(\\d+)`);
  for (const node of c.nodes('master')) {
    const m = re.exec(await node.info('commandstats'));
    if (m) n += Number(m[1]);
  }
  return n;
}

test('a sharded queue\'s schedule lives on the shard of its name; schedules() merges the shards by name', async () => {
  const c = cluster();
  try {
    await c.ping();
    const q = new dq.ShardedQueue(c, unique('sched'), { shards: 8 });
    const later = Date.now() + 24 * 3600 * 1000;
    const names = Array.from({ length: 24 }, (_, i) => `report-${i}`);
    for (const name of names) assert.strictEqual(await q.schedule(name, name, { every: '1h', start: later }), later);
    // Each on the shard its name picks, as a message's basis would, and there only.
    for (const name of names) {
      const home = q.shards[dq.shardOf(name, 8)];
      assert.strictEqual(q.scheduleShard(name), home);
      for (const shard of q.shards) {
        const here = (await shard.schedules()).some((s) => s.name === name);
        assert.strictEqual(here, shard === home, `${name} on ${shard.name}`);
      }
    }
    assert.ok(new Set(names.map((n) => dq.shardOf(n, 8))).size > 1, 'every name on one shard tests nothing');
    const all = await q.schedules();
    assert.deepStrictEqual(all.map((s) => s.name), [...names].sort());
    for (const s of all) assert.strictEqual(s.shard, q.shards[dq.shardOf(s.name, 8)].name);
    assert.strictEqual((await q.stats()).schedules, 24);

    // A run is made on the schedule's shard.
    const first = await q.schedule('now', 'x', { every: '1h' });
    assert.ok(await eventually(async () => (await q.scheduleShard('now').get(`now@${first}`)) !== null, 60000), 'no run was made');

    assert.strictEqual(await q.unschedule(...names, 'now', 'nope'), 25);
    assert.deepStrictEqual(await q.schedules(), []);
  } finally {
    c.disconnect();
  }
});

test('limits of a sharded queue are split floor(n / shards) per shard; n < shards is refused and changes nothing; pause is every shard\'s', async () => {
  const c = cluster();
  try {
    await c.ping();
    const q = new dq.ShardedQueue(c, unique('flow'), { shards: 4 });
    await q.configSet({ rate: '10/1s', maxInflight: 9 });
    for (const shard of q.shards) {
      const cfg = await shard.config();
      assert.deepStrictEqual([cfg.rate, cfg['max-inflight']], ['2/1s', 2], shard.name);
    }
    // What the whole queue lets through, the shards' limits summed.
    let cfg = await q.config();
    assert.deepStrictEqual([cfg.rate, cfg['max-inflight']], ['8/1s', 8]);
    const stats = await q.stats();
    assert.deepStrictEqual([stats.rate, stats['max-inflight'], stats.paused], ['8/1s', 8, 0]);

    await assert.rejects(q.configSet({ rate: '3/1s' }), /cannot be split over 4 shards/);
    await assert.rejects(q.configSet({ leaseMs: 1000, maxInflight: 3 }), /cannot be split over 4 shards/);
    await assert.rejects(q.configSet({ rate: 'lots' }), TypeError);
    // A refusal by the server (shard 0 answers first) changes no shard either.
    await assert.rejects(q.configSet({ rate: '100/never' }), TypeError); // the window, by the duration grammar
    await assert.rejects(q.configSet({ rate: '8000000/1s' }), dq.DqError); // 2000000/1s a shard: over the server's limit
    for (const shard of q.shards) {
      const s = await shard.config();
      assert.deepStrictEqual([s.rate, s['max-inflight'], s['lease-ms-from']], ['2/1s', 2, 'module'], shard.name);
    }

    await q.configSet({ rate: 0, maxInflight: 0 });
    cfg = await q.config();
    assert.deepStrictEqual([cfg.rate, cfg['max-inflight']], [null, null]);

    await q.pause({ forMs: 3600000 });
    for (const shard of q.shards) assert.strictEqual((await shard.stats()).paused, 1, shard.name);
    assert.strictEqual((await q.stats()).paused, 1);
    assert.ok((await q.config())['paused-until'] > Date.now());
    assert.strictEqual(await q.resume(), true);
    assert.strictEqual(await q.resume(), false);
    assert.strictEqual((await q.stats()).paused, 0);
  } finally {
    c.disconnect();
  }
});

test('a Worker on a cluster: one DQ.MPOP for queues of one slot, in their order; one DQ.POP poller per queue across slots', async () => {
  const c = cluster();
  try {
    await c.ping();
    const tag = unique('tag');
    const oneSlot = [`{${tag}}urgent`, `{${tag}}bulk`].map((n) => new dq.Queue(c, n));
    const apart = [unique('urgent'), unique('bulk')].map((n) => new dq.Queue(c, n));
    assert.notStrictEqual(dq.keySlot(apart[0].name), dq.keySlot(apart[1].name));

    for (const [queues, polling] of [[oneSlot, 'mpop'], [apart, 'pop']]) {
      const [urgent, bulk] = queues;
      for (let i = 0; i < 5; i++) await bulk.add('b', { id: `b${i}` });
      for (let i = 0; i < 5; i++) await urgent.add('u', { id: `u${i}` });
      const before = { pop: await calls(c, 'dq.pop'), mpop: await calls(c, 'dq.mpop') };
      const order = [];
      const worker = new dq.Worker(queues, async (d) => {
        order.push(d.queue);
      }, { concurrency: 1, blockMs: 200 });
      const run = worker.run();
      assert.ok(await eventually(async () => (await urgent.stats()).acked + (await bulk.stats()).acked === 10, 60000), `${polling}: ${order.length} of 10`);
      worker.stop();
      await run;
      const after = { pop: await calls(c, 'dq.pop'), mpop: await calls(c, 'dq.mpop') };
      assert.strictEqual(order.length, 10);
      if (polling === 'mpop') {
        assert.deepStrictEqual(order, [...Array(5).fill(urgent.name), ...Array(5).fill(bulk.name)]);
        assert.ok(after.mpop - before.mpop >= 10, `${after.mpop - before.mpop} DQ.MPOPs`);
        assert.strictEqual(after.pop, before.pop, 'a DQ.POP was sent');
      } else {
        assert.ok(after.pop - before.pop >= 10, `${after.pop - before.pop} DQ.POPs`);
        assert.strictEqual(after.mpop, before.mpop, 'a DQ.MPOP was sent');
      }
      for (const q of queues) assert.strictEqual((await q.stats()).acked, 5, q.name);
    }
  } finally {
    c.disconnect();
  }
});
