'use strict';
const test = require('node:test');
const assert = require('node:assert');
const dq = require('..');
const { unique, redis, field } = require('./helpers');

test('add sends every DQ.ADD option', async () => {
  const client = redis();
  try {
    const q = new dq.Queue(client, unique('add'));
    const id = await q.add('{"a":1}', { delayMs: 60000, id: 'm1', priority: -3, maxAttempts: 4, backoff: 'fixed:1s', group: 'g', ttlMs: 900000 });
    assert.strictEqual(id, 'm1');
    const m = await q.get('m1');
    assert.strictEqual(m.state, 'delayed');
    assert.strictEqual(m.payload.toString(), '{"a":1}');
    assert.strictEqual(m.priority, -3);
    assert.strictEqual(m['max-attempts'], 4);
    assert.strictEqual(m.backoff, 'fixed:1s');
    assert.strictEqual(m.group, 'g');
    assert.ok(m['expires-at'] > Date.now());
    assert.strictEqual(await q.add('x', { id: 'm1', nx: true }), null);
    assert.strictEqual(await q.add('x', { id: 'nope', xx: true }), null);
    const at = await q.add(Buffer.from([0, 255]), { atMs: 1 });
    assert.strictEqual((await q.get(at)).state, 'ready');
    assert.deepStrictEqual((await q.get(at)).payload, Buffer.from([0, 255]));
    const stats = await q.stats();
    assert.strictEqual(stats.added, 2);
    assert.strictEqual(stats.ready, 1);
  } finally {
    client.disconnect();
  }
});

test('bad arguments are refused before anything is sent', async () => {
  const client = redis();
  try {
    const q = new dq.Queue(client, unique('bad'));
    await assert.rejects(q.add('x', { delayMs: -1 }), RangeError);
    await assert.rejects(q.add('x', { nx: true, xx: true, id: 'a' }), TypeError);
    await assert.rejects(q.add('x', { colour: 'red' }), /unknown add option/);
    await assert.rejects(q.add(42), TypeError);
    await assert.rejects(q.peek('SOON'), /state must be one of/);
    await assert.rejects(q.pop({ count: 0 }), RangeError);
    assert.strictEqual((await q.stats()).added, 0);
  } finally {
    client.disconnect();
  }
});

test('typed errors: stale, unknown, wrong type, out of memory', async () => {
  const client = redis();
  const name = unique('typed');
  try {
    const q = new dq.Queue(client, name);
    const id = await q.add('p');
    await assert.rejects(q.nack(id), dq.UnknownMessage);
    await assert.rejects(q.touch(id), dq.UnknownMessage);
    const [d] = await q.pop();
    await assert.rejects(q.nack(id, { attempt: d.attempt + 5 }), (e) => e instanceof dq.StaleDelivery && /^STALE delivery 6/.test(e.message));
    assert.strictEqual(await q.nack(id, { attempt: d.attempt, dead: true, error: 'HTTP 410' }), 'dead');
    assert.strictEqual(await field(client, 'DQ.GET', name, id, 'last-error'), 'HTTP 410');
    assert.strictEqual(await field(client, 'DQ.GET', name, id, 'dead-reason'), 'permanent');

    await client.set(`${name}-string`, 'x');
    await assert.rejects(new dq.Queue(client, `${name}-string`).add('p'), dq.WrongType);
    await client.config('SET', 'maxmemory', '1');
    try {
      await assert.rejects(q.add('p'), dq.OutOfMemory);
    } finally {
      await client.config('SET', 'maxmemory', '0');
    }
  } finally {
    client.disconnect();
  }
});

test('admin calls: peek, scan, redrive, cancel, purge, config', async () => {
  const client = redis();
  try {
    const q = new dq.Queue(client, unique('admin'));
    for (let i = 0; i < 25; i++) await q.add(`p${i}`, { id: `m${i}` });
    assert.deepStrictEqual((await q.peek('READY', 3)).map((e) => e.id), ['m0', 'm1', 'm2']);
    const seen = [];
    for await (const e of q.scan({ state: 'READY', count: 4 })) seen.push(e.id);
    assert.strictEqual(new Set(seen).size, 25);
    const [d] = await q.pop();
    await q.nack(d.id, { attempt: d.attempt, dead: true, error: 'bad' });
    assert.strictEqual((await q.peek('DEAD'))[0].lastError, 'bad');
    assert.strictEqual(await q.redrive(), 1);
    assert.strictEqual(await q.cancel('m1', 'nope'), 1);
    await q.configSet({ leaseMs: 5000, backoff: 'exp:1s:1h' });
    const cfg = await q.config();
    assert.strictEqual(cfg['lease-ms'], 5000);
    assert.strictEqual(cfg['lease-ms-from'], 'queue');
    assert.strictEqual(await q.purge('READY'), 24);
    assert.ok((await dq.queues(client)).includes(q.name));
  } finally {
    client.disconnect();
  }
});
