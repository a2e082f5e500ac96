'use strict';
// The event reader (issue 35): Queue.events, an async iterator re-blocking
// DQ.EVENTS on a connection of its own; the GAP and a restarted log as
// typed errors; Queue.listen, the QueueEvents-style emitter; and a sharded
// queue's readers, one per shard, merged.

const test = require('node:test');
const assert = require('node:assert');
const dq = require('..');
const { waitsOf } = require('../lib/blocking');
const { Redis, unique, cluster, eventually } = require('./helpers');

const url = process.env.DQ_REDIS_URL;

/** A client whose connections (its readers' included: they duplicate it) carry `name`, so CLIENT LIST can tell them apart. */
const named = (name) => new Redis(url, { maxRetriesPerRequest: 3, connectionName: name });

/** How many connections named `name` are blocked in DQ.EVENTS. */
async function blockedReaders(admin, name) {
  const list = await admin.client('LIST');
  return list.split('\n').filter((l) => l.includes(` name=${name} `) && / flags=\w*b/.test(l) && l.includes(' cmd=dq.events ')).length;
}

/** The next `n` events of an iterator (it stays open). */
async function take(reader, n) {
  const out = [];
  while (out.length < n) {
    const { value, done } = await reader.next();
    assert.ok(!done, `the reader ended after ${out.length} of ${n} events`);
    out.push(value);
  }
  return out;
}

const shape = (e) => [e.seq, e.type, e.id, e.attempt, e.detail];

test('every event of an add, a pop, progress and an ack, in order, typed; config shows events', async () => {
  const client = named(unique('reader'));
  try {
    const q = new dq.Queue(client, unique('events'));
    await q.configSet({ events: 100 });
    assert.strictEqual((await q.config()).events, 100);
    const before = Date.now();
    await q.add('x', { id: 'a' });
    const [d] = await q.pop({ leaseMs: '1m' });
    await d.progress(Buffer.from([0, 255]));
    await q.ack('a');
    await q.pause();
    const after = Date.now();
    const reader = q.events();
    const events = await take(reader, 5);
    reader.close();
    assert.deepStrictEqual(events.map(shape), [
      [1, 'added', 'a', null, null],
      [2, 'delivered', 'a', 1, null],
      // The user's bytes stay bytes.
      [3, 'progress', 'a', 1, Buffer.from([0, 255])],
      [4, 'done', 'a', 1, null],
      [5, 'paused', null, null, null],
    ]);
    for (const e of events) assert.ok(e.at >= before - 1 && e.at <= after + 1, `${e.at} not in ${before}..${after}`);
    assert.deepStrictEqual(Object.keys(events[0]).sort(), ['at', 'attempt', 'detail', 'id', 'seq', 'type']);
    assert.strictEqual(reader.position, 5);
    assert.deepStrictEqual(await reader.next(), { value: undefined, done: true });
  } finally {
    client.disconnect();
  }
});

test('a reader resumes after the seq it kept; a retry and a death carry their detail', async () => {
  const client = named(unique('reader'));
  try {
    const q = new dq.Queue(client, unique('events'));
    await q.configSet({ events: 100, maxAttempts: 2 });
    await q.add('x', { id: 'a' });
    await q.pop();
    await q.nack('a', { delayMs: 0 });
    let kept;
    for await (const e of q.events({ after: 0, count: 1 })) {
      kept = e.seq;
      if (e.type === 'delivered') break;
    }
    assert.strictEqual(kept, 2);
    await q.pop();
    await q.nack('a', { error: 'boom' });
    const reader = q.events({ after: kept });
    assert.deepStrictEqual((await take(reader, 3)).map(shape), [
      [3, 'retry', 'a', 1, 'nack'],
      [4, 'delivered', 'a', 2, null],
      [5, 'dead', 'a', 2, 'nack'],
    ]);
    reader.close();
  } finally {
    client.disconnect();
  }
});

test('lastEventSeq(): a reader after it reads only what is written from now on', async () => {
  const client = named(unique('reader'));
  try {
    const q = new dq.Queue(client, unique('events'));
    assert.strictEqual(await q.lastEventSeq(), 0);
    await q.configSet({ events: 100 });
    await q.add('x', { id: 'old' });
    await q.cancel('old');
    assert.strictEqual(await q.lastEventSeq(), 2);
    const reader = q.events({ after: await q.lastEventSeq() });
    const next = reader.next();
    await q.add('x', { id: 'new' });
    assert.deepStrictEqual(shape((await next).value), [3, 'added', 'new', null, null]);
    reader.close();
  } finally {
    client.disconnect();
  }
});

test('an after older than the queue keeps throws EventGapError with the oldest seq kept', async () => {
  const client = named(unique('reader'));
  try {
    const q = new dq.Queue(client, unique('events'));
    await q.configSet({ events: 3 });
    for (let i = 0; i < 6; i++) await q.add('x', { id: `m${i}` });
    const reader = q.events({ after: 1 });
    const err = await reader.next().then(() => null, (e) => e);
    assert.ok(err instanceof dq.EventGapError && err instanceof dq.DqError, String(err));
    assert.deepStrictEqual([err.oldest, err.after, err.queue, err.shard], [4, 1, q.name, null]);
    assert.match(err.message, /^GAP the oldest event kept is 4/);
    // A failed reader is over; a new one from oldest - 1 reads what is kept.
    assert.deepStrictEqual(await reader.next(), { value: undefined, done: true });
    const again = q.events({ after: err.oldest - 1 });
    assert.deepStrictEqual((await take(again, 3)).map((e) => e.id), ['m3', 'm4', 'm5']);
    again.close();
  } finally {
    client.disconnect();
  }
});

test('a blocked reader re-blocks when its BLOCK runs out and is woken by the next event', async () => {
  const name = unique('reader');
  const client = named(name);
  const admin = new Redis(url);
  try {
    const q = new dq.Queue(client, unique('events'));
    await q.configSet({ events: 10 });
    await q.add('x', { id: 'first' });
    const waits = waitsOf(client);
    const call = waits.call;
    let reads = 0;
    waits.call = function (...args) {
      if (args[0] === 'DQ.EVENTS') reads++;
      return call.apply(this, args);
    };
    const reader = q.events({ after: 1, blockMs: 50 });
    const next = reader.next();
    // Its first BLOCK ran out and it blocked again, on one connection.
    assert.ok(await eventually(async () => reads >= 3 && (await blockedReaders(admin, name)) === 1));
    await q.add('x', { id: 'second' });
    const { value } = await next;
    assert.deepStrictEqual(shape(value), [2, 'added', 'second', null, null]);
    reader.close();
  } finally {
    client.disconnect();
    admin.disconnect();
  }
});

test('close() and an aborted signal end a blocked read at once and close its connection', async () => {
  const name = unique('reader');
  const client = named(name);
  const admin = new Redis(url);
  try {
    const q = new dq.Queue(client, unique('events'));
    await q.configSet({ events: 10 });
    // BLOCK 0 waits for ever: only close() ends it.
    const reader = q.events({ blockMs: 0 });
    const next = reader.next();
    assert.ok(await eventually(async () => (await blockedReaders(admin, name)) === 1));
    reader.close();
    assert.deepStrictEqual(await next, { value: undefined, done: true });
    assert.ok(await eventually(async () => (await blockedReaders(admin, name)) === 0));

    const abort = new AbortController();
    const seen = [];
    const loop = (async () => {
      for await (const e of q.events({ signal: abort.signal, blockMs: 0 })) seen.push(e);
    })();
    assert.ok(await eventually(async () => (await blockedReaders(admin, name)) === 1));
    abort.abort();
    await loop;
    assert.deepStrictEqual(seen, []);
    assert.ok(await eventually(async () => (await blockedReaders(admin, name)) === 0));
  } finally {
    client.disconnect();
    admin.disconnect();
  }
});

test('a queue deleted under a reader throws EventLogRestarted; read on after 0', async () => {
  const client = named(unique('reader'));
  try {
    const q = new dq.Queue(client, unique('events'));
    await q.configSet({ events: 10 });
    await q.add('x', { id: 'a' });
    const reader = q.events({ after: 1 });
    const next = reader.next().then(() => null, (e) => e);
    await client.del(q.name);
    const err = await next;
    assert.ok(err instanceof dq.EventLogRestarted && err instanceof dq.DqError, String(err));
    assert.deepStrictEqual([err.lastSeq, err.after, err.queue], [0, 1, q.name]);
    await q.configSet({ events: 10 });
    await q.add('x', { id: 'b' });
    const fresh = q.events({ after: 0 });
    assert.deepStrictEqual(shape((await fresh.next()).value), [1, 'added', 'b', null, null]);
    fresh.close();
  } finally {
    client.disconnect();
  }
});

test('listen(): on(\'done\') as BullMQ\'s on(\'completed\'), every event on \'event\', position, close() ends a blocked read', async () => {
  const name = unique('reader');
  const client = named(name);
  const admin = new Redis(url);
  try {
    const q = new dq.Queue(client, unique('events'));
    await q.configSet({ events: 100 });
    const listener = q.listen({ after: 0 });
    const done = [];
    const all = [];
    let closed = 0;
    listener.on('done', (e) => done.push(e));
    listener.on('event', (e) => all.push(e.type));
    listener.on('close', () => closed++);
    await q.add('x', { id: 'a' });
    await q.add('y', { id: 'b' });
    const taken = await q.pop({ count: 2 });
    await q.ack(...taken.map((d) => d.id));
    assert.ok(await eventually(() => done.length === 2));
    assert.deepStrictEqual(done.map((e) => [e.type, e.id, e.attempt]), [['done', 'a', 1], ['done', 'b', 1]]);
    assert.deepStrictEqual(all, ['added', 'added', 'delivered', 'delivered', 'done', 'done']);
    assert.strictEqual(listener.position, 6);
    assert.ok(await eventually(async () => (await blockedReaders(admin, name)) === 1));
    await listener.close();
    assert.strictEqual(closed, 1);
    assert.ok(await eventually(async () => (await blockedReaders(admin, name)) === 0));
  } finally {
    client.disconnect();
    admin.disconnect();
  }
});

test('closing the client ends its readers quietly: done, \'close\', no \'error\'', async () => {
  const name = unique('reader');
  const client = named(name);
  const admin = new Redis(url);
  try {
    const q = new dq.Queue(client, unique('events'));
    await q.configSet({ events: 10 });
    const reader = q.events({ blockMs: 0 });
    const next = reader.next();
    const listener = q.listen({ blockMs: 0 });
    const errors = [];
    listener.on('error', (e) => errors.push(e));
    const closed = new Promise((resolve) => listener.on('close', resolve));
    assert.ok(await eventually(async () => (await blockedReaders(admin, name)) === 2));
    await client.quit();
    assert.deepStrictEqual(await next, { value: undefined, done: true });
    await closed;
    assert.deepStrictEqual(errors, []);
    assert.ok(await eventually(async () => (await blockedReaders(admin, name)) === 0));
  } finally {
    client.disconnect();
    admin.disconnect();
  }
});

test('listen(): a gap is emitted and skipped knowingly with a \'gap\' listener, an \'error\' without one', async () => {
  const client = named(unique('reader'));
  try {
    const q = new dq.Queue(client, unique('events'));
    await q.configSet({ events: 2 });
    for (let i = 0; i < 5; i++) await q.add('x', { id: `m${i}` });
    const told = q.listen({ after: 1 });
    const gaps = [];
    const added = [];
    told.on('gap', (e) => gaps.push(e));
    told.on('added', (e) => added.push(e.id));
    assert.ok(await eventually(() => added.length === 2));
    assert.deepStrictEqual(gaps.map((e) => [e.oldest, e.after]), [[4, 1]]);
    assert.deepStrictEqual(added, ['m3', 'm4']);
    await told.close();

    const untold = q.listen({ after: 1 });
    const errors = [];
    const ended = new Promise((resolve) => untold.on('close', resolve));
    untold.on('error', (e) => errors.push(e));
    untold.on('added', (e) => added.push(e.id));
    await ended;
    assert.strictEqual(errors.length, 1);
    assert.ok(errors[0] instanceof dq.EventGapError);
    assert.strictEqual(added.length, 2);
  } finally {
    client.disconnect();
  }
});

test('bad options are refused before anything is sent', async () => {
  const client = named(unique('reader'));
  try {
    const q = new dq.Queue(client, 'never-sent');
    assert.throws(() => q.events({ after: -1 }), RangeError);
    assert.throws(() => q.events({ after: 1.5 }), RangeError);
    assert.throws(() => q.events({ count: 0 }), RangeError);
    assert.throws(() => q.events({ count: 10001 }), RangeError);
    assert.throws(() => q.events({ blockMs: '1.5s' }), RangeError);
    assert.throws(() => q.events({ from: 3 }), /unknown events option 'from'/);
    assert.throws(() => q.events({ signal: {} }), TypeError);
    assert.throws(() => q.listen({ signal: new AbortController().signal }), /unknown listen option 'signal'/);
    await assert.rejects(q.configSet({ events: -1 }), RangeError);
    await assert.rejects(q.configSet({ events: 100000001 }), RangeError);
    const sharded = new dq.ShardedQueue(client, 'never-sent', { shards: 2 });
    assert.throws(() => sharded.events({ after: 3 }), /object of seqs by shard name/);
    assert.throws(() => sharded.events({ after: { elsewhere: 3 } }), /'elsewhere' in after is not a shard/);
    assert.throws(() => sharded.listen({ after: { [sharded.shardNames[0]]: -1 } }), RangeError);
    await assert.rejects(sharded.configSet({ events: 1 }), /cannot be split over 2 shards/);
    assert.strictEqual(await client.exists('never-sent', ...sharded.shardNames), 0);
  } finally {
    client.disconnect();
  }
});

test('a sharded queue on a cluster: one reader per shard merged, each with its own seq; listen over every shard', async () => {
  const cl = cluster();
  try {
    await cl.ping();
    const q = new dq.ShardedQueue(cl, unique('sharded-events'), { shards: 4 });
    await q.configSet({ events: 400 });
    for (const shard of q.shards) assert.strictEqual((await shard.config()).events, 100);
    assert.strictEqual((await q.config()).events, 400);
    // Two messages on each shard, by a shard key of that shard.
    const keys = [];
    for (let k = 0; keys.length < 8; k++) {
      const key = `user:${k}`;
      if (keys.filter((x) => q.shardFor(x) === q.shardFor(key)).length < 2) keys.push(key);
    }
    const ids = [];
    for (const key of keys) ids.push(await q.add('x', { shardKey: key }));

    const reader = q.events();
    const events = await take(reader, 8);
    assert.deepStrictEqual(events.map((e) => e.id).sort(), [...ids].sort());
    for (const name of q.shardNames) {
      const mine = events.filter((e) => e.shard === name);
      assert.deepStrictEqual(mine.map((e) => e.seq), [1, 2], name);
      assert.ok(mine.every((e) => e.type === 'added'));
    }
    const position = reader.position;
    assert.deepStrictEqual(position, Object.fromEntries(q.shardNames.map((n) => [n, 2])));
    assert.deepStrictEqual(await q.lastEventSeq(), position);
    // The next event comes through the reader blocked on its shard.
    const next = reader.next();
    const late = await q.add('y', { shardKey: keys[5] });
    const { value } = await next;
    assert.deepStrictEqual([value.id, value.seq, value.shard], [late, 3, q.shardFor(keys[5]).name]);
    reader.close();

    // Resuming from the position kept: only what came after it.
    const resumed = q.events({ after: position });
    assert.deepStrictEqual((await resumed.next()).value.id, late);
    resumed.close();

    // A shard that trimmed what `after` names: the GAP says which shard.
    const gapShard = q.shardNames[2];
    await q.shards[2].configSet({ events: 1 });
    const gapped = q.events({ after: { ...position, [gapShard]: 0 } });
    const err = await take(gapped, 10).then(() => null, (e) => e);
    assert.ok(err instanceof dq.EventGapError, String(err));
    assert.deepStrictEqual([err.shard, err.queue, err.oldest], [gapShard, gapShard, 2]);
    assert.ok(gapped.closed);
    await q.shards[2].configSet({ events: 100 });

    const listener = q.listen({ after: position });
    const done = [];
    listener.on('done', (e) => done.push([e.id, e.shard]));
    const taken = [];
    for (const shard of q.shards) taken.push(...(await shard.pop({ count: 10 })));
    for (const d of taken) await q.shards.find((s) => s.name === d.queue).ack(d.id);
    assert.ok(await eventually(() => done.length === 9));
    assert.deepStrictEqual(done.sort(), taken.map((d) => [d.id, d.queue]).sort());
    // Each shard's position: its 2 added, then a delivered and a done per message; one more on the late one's shard.
    const lateShard = q.shardFor(keys[5]).name;
    assert.deepStrictEqual(listener.position, Object.fromEntries(q.shardNames.map((n) => [n, n === lateShard ? 3 + 3 * 2 : 2 + 2 * 2])));
    await listener.close();
  } finally {
    cl.disconnect();
  }
});
