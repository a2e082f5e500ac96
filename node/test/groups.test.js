'use strict';
// Groups (docs/commands.md, "Groups: limits, fair order, pauses"): the
// settings GROUPLIMIT, GROUPRATE and ORDER through configSet and config,
// a group's pause and resume, DQ.GROUPS as an async generator, STATS'
// groups; and a ShardedQueue's, where a group lives on one shard.

const test = require('node:test');
const assert = require('node:assert');
const dq = require('..');
const { unique, redis, cluster, eventually } = require('./helpers');

/** How many commands `client` sent while `fn` ran. */
async function sentDuring(client, fn) {
  const own = client.sendCommand;
  let n = 0;
  client.sendCommand = function (...args) {
    n++;
    return own.apply(this, args);
  };
  try {
    await fn();
  } finally {
    client.sendCommand = own;
  }
  return n;
}

/** Every group `groups()` yields, in the order given. */
async function allGroups(q, options) {
  const out = [];
  for await (const g of q.groups(options)) out.push(g);
  return out;
}

/** Pops until `n` deliveries came (a POP may give fewer while a group is let out), or fails after the deadline. */
async function popN(q, n, options = {}) {
  const got = [];
  const ok = await eventually(async () => {
    got.push(...(await q.pop({ count: n - got.length, ...options })));
    return got.length >= n;
  }, 10000);
  assert.ok(ok, `${got.length} of ${n} delivered: ${got.map((d) => d.id)}`);
  return got;
}

const groupOf = (id) => id.split('.')[0];

test('configSet and config: groupLimit, groupRate and order round trip; a bad value is refused before anything is sent', async () => {
  const client = redis();
  try {
    const q = new dq.Queue(client, unique('group-config'));
    await q.add('x'); // the queue exists: its defaults
    let cfg = await q.config();
    assert.deepStrictEqual([cfg['group-limit'], cfg['group-rate'], cfg.order], [1, null, 'priority']);

    await q.configSet({ groupLimit: 3, groupRate: '10/1s', order: 'Fair' });
    cfg = await q.config();
    assert.deepStrictEqual([cfg['group-limit'], cfg['group-rate'], cfg.order], [3, '10/1s', 'fair']);
    // After events, in the server's order.
    const keys = Object.keys(cfg);
    assert.deepStrictEqual(keys.slice(keys.indexOf('events'), keys.indexOf('events') + 4), ['events', 'group-limit', 'group-rate', 'order']);

    await q.configSet({ groupLimit: 1000000, groupRate: '5000/1h', order: 'PRIORITY' });
    cfg = await q.config();
    assert.deepStrictEqual([cfg['group-limit'], cfg['group-rate'], cfg.order], [1000000, '5000/1h', 'priority']);
    await q.configSet({ groupRate: 0, order: 'fair' });
    assert.deepStrictEqual([(await q.config())['group-rate'], (await q.config()).order], [null, 'fair']);
    await q.configSet({ groupLimit: 'DEFAULT', groupRate: '20/250ms', order: 'DEFAULT' });
    cfg = await q.config();
    assert.deepStrictEqual([cfg['group-limit'], cfg['group-rate'], cfg.order], [1, '20/250ms', 'priority']);
    await q.configSet({ groupRate: 'DEFAULT' });
    assert.strictEqual((await q.config())['group-rate'], null);

    await q.configSet({ groupLimit: 7, groupRate: '3/1m', order: 'fair' });
    const refusals = [
      [() => q.configSet({ groupLimit: 0 }), RangeError],
      [() => q.configSet({ groupLimit: 1000001 }), RangeError],
      [() => q.configSet({ groupLimit: 2.5 }), RangeError],
      [() => q.configSet({ groupLimit: '2' }), RangeError],
      [() => q.configSet({ groupLimit: -1, order: 'fair' }), RangeError],
      [() => q.configSet({ groupRate: '10 a second' }), TypeError],
      [() => q.configSet({ groupRate: '10/1.5s' }), TypeError],
      [() => q.configSet({ groupRate: 10 }), TypeError],
      [() => q.configSet({ order: 'random' }), RangeError],
      [() => q.configSet({ order: 1 }), RangeError],
      [() => q.configSet({ groupLimit: 2, order: 'lifo' }), RangeError],
      [() => q.configSet({ groupLimits: 2 }), TypeError],
      [() => q.pause({ group: '' }), RangeError],
      [() => q.pause({ group: 'x'.repeat(1025) }), RangeError],
      [() => q.pause({ group: 42 }), TypeError],
      [() => q.pause({ groups: 'a' }), TypeError],
      [() => q.resume({ group: '' }), RangeError],
      [() => q.resume({ forMs: 1000 }), TypeError],
      [() => q.resume(null), TypeError],
      [() => q.groups({ count: 0 }).next(), RangeError],
      [() => q.groups({ count: 10001 }).next(), RangeError],
      [() => q.groups({ match: 7 }).next(), TypeError],
      [() => q.groups({ cursor: '0' }).next(), TypeError],
    ];
    for (const [call, type] of refusals) {
      assert.strictEqual(await sentDuring(client, () => assert.rejects(call, type)), 0, String(call));
    }
    cfg = await q.config();
    assert.deepStrictEqual([cfg['group-limit'], cfg['group-rate'], cfg.order], [7, '3/1m', 'fair']);
  } finally {
    client.disconnect();
  }
});

test('GROUPLIMIT 2: a pop of 5 of one group gets 2, the next one as a place frees; stats counts the groups', async () => {
  const client = redis();
  try {
    const q = new dq.Queue(client, unique('group-limit'));
    await q.configSet({ groupLimit: 2 });
    for (let i = 0; i < 5; i++) await q.add(`p${i}`, { id: `g.${i}`, group: 'g' });
    const first = await q.pop({ count: 5 });
    assert.deepStrictEqual(first.map((d) => d.id), ['g.0', 'g.1']);
    assert.deepStrictEqual(await q.pop({ count: 5 }), []);
    let stats = await q.stats();
    assert.deepStrictEqual([stats.groups, stats.inflight, stats.ready, stats.delayed], [1, 2, 0, 3]);
    assert.deepStrictEqual(await allGroups(q), [{ name: 'g', waiting: 3, ready: 0, inflight: 2, paused: false, pausedUntil: null }]);

    await q.ack('g.0');
    const next = await popN(q, 1, { count: 5 });
    assert.deepStrictEqual(next.map((d) => d.id), ['g.2']);
    assert.deepStrictEqual(await q.pop({ count: 5 }), []);

    // Raising the limit lets the waiting ones out at once.
    await q.configSet({ groupLimit: 10 });
    assert.deepStrictEqual((await popN(q, 2, { count: 5 })).map((d) => d.id), ['g.3', 'g.4']);
    await q.ack('g.1', 'g.2', 'g.3', 'g.4');
    stats = await q.stats();
    assert.deepStrictEqual([stats.groups, stats.inflight, stats.acked], [0, 0, 5]);
  } finally {
    client.disconnect();
  }
});

test('pause({ group }) holds that group while another flows; resume({ group }) says it was paused and lets it out', async () => {
  const client = redis();
  try {
    const q = new dq.Queue(client, unique('group-pause'));
    await q.configSet({ groupLimit: 10, events: 100 });
    for (let i = 0; i < 3; i++) {
      await q.add('x', { id: `a.${i}`, group: 'a' });
      await q.add('x', { id: `b.${i}`, group: 'b' });
    }
    await q.pause({ group: 'a' });
    let groups = await allGroups(q);
    assert.deepStrictEqual(groups.map((g) => [g.name, g.waiting, g.ready, g.paused, g.pausedUntil]), [['a', 3, 0, true, null], ['b', 0, 3, false, null]]);
    // The queue itself is not paused: b flows, a does not.
    assert.strictEqual((await q.stats()).paused, 0);
    const got = await q.pop({ count: 10 });
    assert.deepStrictEqual(got.map((d) => d.id).sort(), ['b.0', 'b.1', 'b.2']);
    await q.add('x', { id: 'b.3', group: 'b' });
    assert.deepStrictEqual((await popN(q, 1, { count: 10 })).map((d) => d.id), ['b.3']);

    assert.strictEqual(await q.resume({ group: 'a' }), true);
    assert.strictEqual(await q.resume({ group: 'a' }), false);
    assert.strictEqual(await q.resume(), false, 'the queue was never paused');
    assert.deepStrictEqual((await popN(q, 3, { count: 10 })).map((d) => d.id).sort(), ['a.0', 'a.1', 'a.2']);

    // A pause for a while: its end is shown; a group paused with no message exists.
    const before = Date.now();
    await q.pause({ group: 'c', forMs: '1h' });
    groups = await allGroups(q);
    const c = groups.find((g) => g.name === 'c');
    assert.ok(c && c.paused && c.pausedUntil >= before + 3600000 - 1 && c.pausedUntil <= Date.now() + 3600000 + 1, JSON.stringify(c));
    assert.deepStrictEqual([c.waiting, c.ready, c.inflight], [0, 0, 0]);
    assert.strictEqual(await q.resume({ group: 'c' }), true);
    assert.ok(await eventually(async () => !(await allGroups(q)).some((g) => g.name === 'c')), 'c stayed after its resume');

    // The group's pause and resume name it in the events; the queue's own, none.
    await q.pause();
    await q.resume();
    const reader = q.events();
    const flow = [];
    for await (const e of reader) {
      if (e.type === 'paused' || e.type === 'resumed') flow.push([e.type, e.id, e.detail]);
      if (flow.length === 6) break;
    }
    assert.deepStrictEqual(flow, [['paused', null, 'a'], ['resumed', null, 'a'], ['paused', null, 'c'], ['resumed', null, 'c'], ['paused', null, null], ['resumed', null, null]]);
  } finally {
    client.disconnect();
  }
});

test('groups() follows the cursor over 250 groups, 7 at a time: each once, in name order, counts and pauses right', async () => {
  const client = redis();
  try {
    const q = new dq.Queue(client, unique('group-list'));
    const name = (i) => `g${String(i).padStart(3, '0')}`;
    const N = 250;
    // Every group one message, every fifth two (the second waits: GROUPLIMIT 1);
    // every seventh's first is popped, by its priority.
    const popped = [];
    for (let i = 0; i < N; i++) {
      const first = i % 7 === 0;
      await q.add('x', { id: `${name(i)}.0`, group: name(i), priority: first ? 10 : 0 });
      if (first) popped.push(`${name(i)}.0`);
      if (i % 5 === 0) await q.add('x', { id: `${name(i)}.1`, group: name(i) });
    }
    const got = await q.pop({ count: popped.length });
    assert.deepStrictEqual(got.map((d) => d.id).sort(), popped);
    const paused = (i) => i % 11 === 0 || i % 13 === 0;
    const before = Date.now();
    for (let i = 0; i < N; i++) {
      if (i % 11 === 0) await q.pause({ group: name(i) });
      else if (i % 13 === 0) await q.pause({ group: name(i), forMs: '1h' });
    }
    const after = Date.now();

    let pages = 0;
    const send = q._send.bind(q);
    q._send = (command, args) => {
      if (command === 'DQ.GROUPS') {
        pages++;
        assert.deepStrictEqual(args.slice(1), ['COUNT', 7]);
      }
      return send(command, args);
    };
    const groups = await allGroups(q, { count: 7 });
    q._send = send;
    assert.ok(pages >= Math.ceil(N / 7), `${pages} pages`);
    assert.deepStrictEqual(groups.map((g) => g.name), Array.from({ length: N }, (_, i) => name(i)));
    for (let i = 0; i < N; i++) {
      const g = groups[i];
      const messages = i % 5 === 0 ? 2 : 1;
      const inflight = i % 7 === 0 ? 1 : 0;
      const ready = inflight === 0 && !paused(i) ? 1 : 0;
      assert.deepStrictEqual([g.waiting, g.ready, g.inflight, g.paused], [messages - inflight - ready, ready, inflight, paused(i)], g.name);
      if (i % 11 !== 0 && i % 13 === 0) assert.ok(g.pausedUntil >= before + 3600000 && g.pausedUntil <= after + 3600000, `${g.name}: ${g.pausedUntil}`);
      else assert.strictEqual(g.pausedUntil, null, g.name);
    }
    assert.deepStrictEqual(Object.keys(groups[0]).sort(), ['inflight', 'name', 'paused', 'pausedUntil', 'ready', 'waiting']);

    // MATCH: pages may come back empty, the iteration goes on to the end.
    assert.deepStrictEqual((await allGroups(q, { match: 'g1?5', count: 3 })).map((g) => g.name), ['g105', 'g115', 'g125', 'g135', 'g145', 'g155', 'g165', 'g175', 'g185', 'g195']);
    assert.deepStrictEqual(await allGroups(q, { match: 'none-*' }), []);
    assert.strictEqual((await q.stats()).groups, N);
    assert.deepStrictEqual(await allGroups(new dq.Queue(client, unique('no-such-queue'))), []);
  } finally {
    client.disconnect();
  }
});

test('a ShardedQueue: group settings on every shard unsplit, groups() over every shard, a group\'s pause and resume on its shard only', async () => {
  const c = cluster();
  try {
    await c.ping();
    const q = new dq.ShardedQueue(c, unique('group-sharded'), { shards: 4 });
    await q.configSet({ groupLimit: 3, groupRate: '10/1s', order: 'fair', maxInflight: 8 });
    for (const shard of q.shards) {
      const cfg = await shard.config();
      assert.deepStrictEqual([cfg['group-limit'], cfg['group-rate'], cfg.order, cfg['max-inflight']], [3, '10/1s', 'fair', 2], shard.name);
    }
    let cfg = await q.config();
    assert.deepStrictEqual([cfg['group-limit'], cfg['group-rate'], cfg.order, cfg['max-inflight']], [3, '10/1s', 'fair', 8]);
    await assert.rejects(q.configSet({ groupLimit: 0 }), RangeError);
    await q.configSet({ groupRate: 0, maxInflight: 0 });
    cfg = await q.config();
    assert.deepStrictEqual([cfg['group-limit'], cfg['group-rate'], cfg.order], [3, null, 'fair']);

    const names = Array.from({ length: 40 }, (_, i) => `t${String(i).padStart(2, '0')}`);
    for (const g of names) {
      for (let k = 0; k < 4; k++) await q.add('x', { id: `${g}.${k}`, group: g });
    }
    const groups = await allGroups(q, { count: 5 });
    assert.deepStrictEqual(groups.map((g) => g.name).sort(), names);
    for (const g of groups) {
      assert.strictEqual(g.shard, q.shardFor(g.name).name, g.name);
      assert.deepStrictEqual([g.waiting, g.ready, g.inflight, g.paused], [1, 3, 0, false], g.name);
    }
    assert.ok(new Set(groups.map((g) => g.shard)).size > 1, 'every group on one shard tests nothing');
    assert.strictEqual((await q.stats()).groups, 40);

    const home = q.shardFor('t05');
    await q.pause({ group: 't05' });
    for (const shard of q.shards) {
      const here = (await allGroups(shard)).find((g) => g.name === 't05');
      if (shard === home) assert.deepStrictEqual([here.paused, here.ready, here.waiting], [true, 0, 4]);
      else assert.strictEqual(here, undefined, `t05 paused on ${shard.name}`);
      assert.strictEqual((await shard.stats()).paused, 0, shard.name);
    }
    assert.strictEqual((await q.stats()).groups, 40);
    const out = await popN(home, (await home.stats()).ready, { count: 1000 });
    assert.ok(out.length > 0 && out.every((d) => groupOf(d.id) !== 't05'), out.map((d) => d.id).join(' '));

    assert.strictEqual(await q.resume({ group: 't05' }), true);
    assert.strictEqual(await q.resume({ group: 't05' }), false);
    const t05 = await popN(home, 3, { count: 1000 });
    assert.deepStrictEqual(t05.map((d) => d.id).sort(), ['t05.0', 't05.1', 't05.2']);
    assert.strictEqual((await q.stats()).paused, 0);
  } finally {
    c.disconnect();
  }
});
