'use strict';
// Job outcomes (issue 34): a handler's result (DQ.DONE, one per queue per
// batch), waiting for it (DQ.WAIT on a connection of its own), progress
// (a fenced TOUCH ... PROGRESS with the worker's lease), retention, the
// done state; on a server and on a sharded queue of a cluster.

const test = require('node:test');
const assert = require('node:assert');
const dq = require('..');
const c = require('../lib/commands');
const { waitsOf } = require('../lib/blocking');
const { resultOf } = require('../lib/worker');
const { Redis, unique, redis, cluster, eventually, monitor } = require('./helpers');

const url = process.env.DQ_REDIS_URL;

async function withWorker(queue, handler, options, body) {
  const worker = new dq.Worker(queue, handler, { blockMs: 200, ...options });
  const run = worker.run();
  try {
    return await body(worker);
  } finally {
    worker.stop();
    await run;
  }
}

/** The connections a server has under `name` (CLIENT LIST), asked on `admin`. */
async function named(admin, name) {
  const list = await admin.client('LIST');
  return list.split('\n').filter((line) => line.includes(` name=${name} `)).length;
}

/** Counts the calls `sendCommand` makes on `client` while `fn` runs. */
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

test('a Worker handler\'s result comes back by wait; undefined is a plain ACK; get shows the result', async () => {
  const client = redis();
  try {
    const q = new dq.Queue(client, unique('results'));
    await q.configSet({ retainMs: '1h' });
    await q.add('{"order":17}', { id: 'order:17' });
    await q.add('{"order":18}', { id: 'order:18' });
    await q.add('{"order":19}', { id: 'order:19' });
    const settled = new Map();
    const waiting = q.wait('order:17', { timeoutMs: '20s' });
    await withWorker(q, async (d) => {
      if (d.id === 'order:17') return 'cancelled, refund sent';
      if (d.id === 'order:18') return Buffer.from([0, 255, 1]);
      return undefined;
    }, { concurrency: 4, onSettled: (d, o) => settled.set(d.id, o) }, async () => {
      const outcome = await waiting;
      assert.deepStrictEqual(outcome, { state: 'done', value: Buffer.from('cancelled, refund sent') });
      assert.ok(await eventually(() => settled.size === 3));
    });
    // Bytes stay bytes; a plain ACK keeps no result, not an empty one.
    assert.deepStrictEqual(await q.wait('order:18', { timeoutMs: 1000 }), { state: 'done', value: Buffer.from([0, 255, 1]) });
    assert.deepStrictEqual(await q.wait('order:19'), { state: 'done', value: null });
    assert.deepStrictEqual(settled.get('order:17'), { action: 'done', state: 'acked', error: null });
    assert.deepStrictEqual(settled.get('order:19'), { action: 'ack', state: 'acked', error: null });
    const m = await q.get('order:17');
    assert.strictEqual(m.state, 'done');
    assert.deepStrictEqual(m.result, Buffer.from('cancelled, refund sent'));
    assert.ok(m['finished-at'] > 0 && m['retained-until'] === m['finished-at'] + 3600000, JSON.stringify(m));
    assert.strictEqual((await q.get('order:19')).result, null);
    const stats = await q.stats();
    assert.strictEqual(stats.done, 3);
    assert.strictEqual(stats.acked, 3);
  } finally {
    client.disconnect();
  }
});

test('without a retention a result is dropped with the message, as a plain ACK drops it: wait says gone', async () => {
  const client = redis();
  try {
    const q = new dq.Queue(client, unique('noretain'));
    await q.add('x', { id: 'a' });
    await withWorker(q, async () => 'a result', {}, async () => {
      assert.ok(await eventually(async () => (await q.stats()).acked === 1));
    });
    assert.strictEqual(await q.get('a'), null);
    assert.deepStrictEqual(await q.wait('a', { timeoutMs: 1000 }), { state: 'gone', value: null });
    assert.strictEqual((await q.stats()).done, 0);
  } finally {
    client.disconnect();
  }
});

test('wait: null when no outcome came within its timeout, or at once without one', async () => {
  const client = redis();
  try {
    const q = new dq.Queue(client, unique('timeout'));
    await q.add('later', { id: 'later', delayMs: '1h' });
    assert.strictEqual(await q.wait('later'), null);
    assert.strictEqual(await q.wait('later', { timeoutMs: 0 }), null);
    const started = Date.now();
    assert.strictEqual(await q.wait('later', { timeoutMs: 300 }), null);
    // The server held it for its BLOCK: the call did wait.
    assert.ok(Date.now() - started >= 290, `${Date.now() - started} ms`);
    // A wait longer than a Node timer can time (2^31 - 1 ms) still waits for its outcome.
    await q.configSet({ retainMs: '1h' });
    await q.add('now', { id: 'now' });
    const long = q.wait('now', { timeoutMs: '30d' });
    const [d] = await q.pop();
    await q.done([[d.id, 'r']]);
    assert.deepStrictEqual(await long, { state: 'done', value: Buffer.from('r') });
  } finally {
    client.disconnect();
  }
});

test('wait: dead with its last error, gone when never added, and woken by a cancel with gone', async () => {
  const client = redis();
  try {
    const q = new dq.Queue(client, unique('dead'));
    await q.add('x', { id: 'hook' });
    await q.add('y', { id: 'running' });
    const dead = q.wait('hook', { timeoutMs: '20s' });
    await withWorker(q, async (d) => {
      if (d.id === 'hook') throw new dq.Permanent('HTTP 410 Gone');
      await new Promise((r) => d.signal.addEventListener('abort', r));
    }, { leaseMs: 3000 }, async () => {
      assert.deepStrictEqual(await dead, { state: 'dead', value: Buffer.from('HTTP 410 Gone') });
      assert.ok(await eventually(async () => (await q.get('running'))?.state === 'inflight'));
      const cancelled = q.wait('running', { timeoutMs: '20s' });
      // The wait is blocked on the server before the cancel: CLIENT LIST shows its DQ.WAIT.
      assert.ok(await eventually(async () => / cmd=dq\.wait /.test(await client.client('LIST'))));
      assert.strictEqual(await q.cancel('running'), 1);
      assert.deepStrictEqual(await cancelled, { state: 'gone', value: null });
    });
    assert.deepStrictEqual(await q.wait('never-added', { timeoutMs: 1000 }), { state: 'gone', value: null });
  } finally {
    client.disconnect();
  }
});

test('a wait blocks a connection of its own, kept for the next wait and closed when the client ends', async () => {
  const name = unique('waiter').replace(/[^a-z0-9-]/gi, '');
  const client = new Redis(url, { connectionName: name });
  const admin = redis();
  try {
    const q = new dq.Queue(client, unique('own'));
    await q.configSet({ retainMs: '1m' });
    await q.add('x', { id: 'w' });
    let settled = false;
    const waiting = q.wait('w', { timeoutMs: '3s' }).finally(() => (settled = true));
    assert.ok(await eventually(async () => / cmd=dq\.wait /.test(await admin.client('LIST'))));
    // The shared connection answers while the wait blocks: on it, STATS
    // would queue behind the wait until its 3 s ran out.
    assert.strictEqual((await q.stats()).ready, 1);
    assert.strictEqual(settled, false);
    const [d] = await q.pop();
    assert.strictEqual(await q.done([[d.id, 'ok']]), 1);
    assert.deepStrictEqual(await waiting, { state: 'done', value: Buffer.from('ok') });
    // The client's own connection and the wait's.
    assert.strictEqual(await named(admin, name), 2);
    for (let i = 0; i < 3; i++) assert.strictEqual((await q.wait('w', { timeoutMs: 1000 })).state, 'done');
    assert.strictEqual(await named(admin, name), 2, 'the next waits took the kept connection');
    // Three at once need three connections; sixteen per node stay kept after them.
    await q.add('y', { id: 'slow', delayMs: '1h' });
    await Promise.all([1, 2, 3].map(() => q.wait('slow', { timeoutMs: 200 })));
    assert.strictEqual(await named(admin, name), 4);
    await client.quit();
    assert.ok(await eventually(async () => (await named(admin, name)) === 0), 'the kept connections end with the client');
  } finally {
    client.disconnect();
    admin.disconnect();
  }
});

test('progress: a handler\'s report is fenced, keeps the worker\'s lease, shows in get, and stays once done', async () => {
  const client = redis();
  try {
    const q = new dq.Queue(client, unique('progress'));
    await q.configSet({ retainMs: '1h', leaseMs: '30s' });
    await q.add('x', { id: 'export' });
    const seen = [];
    await withWorker(q, async (d) => {
      const before = Date.now();
      const deadline = await d.progress('rows 1-500');
      // The worker's 2-minute lease, not the queue's 30 s.
      seen.push(deadline >= before + 120000, (await q.get(d.id)).progress.toString());
      await d.progress(Buffer.from('rows 501-1000'));
      return 'exported';
    }, { leaseMs: '2m' }, async () => {
      assert.strictEqual((await q.wait('export', { timeoutMs: '20s' })).state, 'done');
    });
    assert.deepStrictEqual(seen, [true, 'rows 1-500']);
    const m = await q.get('export');
    assert.deepStrictEqual(m.progress, Buffer.from('rows 501-1000'), 'a done message keeps the last progress');

    // A delivery that is over reports nothing: STALE.
    await q.add('y', { id: 'again' });
    const [first] = await q.pop({ leaseMs: '10m' });
    const before = Date.now();
    assert.ok((await first.progress('half')) >= before + 600000, 'a popped delivery reports with its POP\'s lease');
    await q.nack(first.id, { attempt: first.attempt, delayMs: 0 });
    await assert.rejects(first.progress('too late'), dq.StaleDelivery);
    const [second] = await q.pop();
    assert.strictEqual(second.attempt, 2);
    // For code that pops by itself: queue.progress, fenced by attempt.
    await assert.rejects(q.progress(second.id, 'x', { attempt: 1 }), dq.StaleDelivery);
    assert.ok((await q.progress(second.id, '3/4', { attempt: 2 })) > 0);
    assert.deepStrictEqual((await q.get(second.id)).progress, Buffer.from('3/4'));
  } finally {
    client.disconnect();
  }
});

test('retainMs on add keeps that message whatever the queue keeps; 0 keeps it nowhere', async () => {
  const client = redis();
  try {
    const q = new dq.Queue(client, unique('retain'));
    await q.add('x', { id: 'kept', retainMs: '1h' });
    await q.add('y', { id: 'plain' });
    for (const d of await q.pop({ count: 2 })) await q.ack(d.id);
    const kept = await q.get('kept');
    assert.strictEqual(kept.state, 'done');
    assert.strictEqual(kept['retained-until'] - kept['finished-at'], 3600000);
    assert.strictEqual(await q.get('plain'), null);

    // A queue that keeps everything for an hour, and a message it must not keep.
    await q.configSet({ retainMs: 3600000 });
    assert.strictEqual((await q.config())['retain-ms'], 3600000);
    await q.add('z', { id: 'secret', retainMs: 0 });
    const [d] = await q.pop();
    assert.strictEqual(await q.done([[d.id, 'token']]), 1);
    assert.deepStrictEqual(await q.wait('secret'), { state: 'gone', value: null });
    // NX over a done id: refused while it is kept ("at most once per id").
    assert.strictEqual(await q.add('x', { id: 'kept', nx: true }), null);
  } finally {
    client.disconnect();
  }
});

test('the done state: peek, scan and purge DONE; stats count done and dropped; config reads and sets retainMax', async () => {
  const client = redis();
  try {
    const q = new dq.Queue(client, unique('state'));
    await q.configSet({ retainMs: '1h', retainMax: 2 });
    const config = await q.config();
    assert.deepStrictEqual([config['retain-ms'], config['retain-ms-from'], config['retain-max']], [3600000, 'queue', 2]);
    for (const id of ['a', 'b', 'c']) {
      await q.add(id, { id });
      const [d] = await q.pop();
      await q.done(new Map([[d.id, `r-${id}`]]));
    }
    // The cap of 2 let the earliest finished go.
    const stats = await q.stats();
    assert.deepStrictEqual([stats.done, stats.dropped], [2, 1]);
    assert.deepStrictEqual((await q.peek('done')).map((e) => e.id), ['b', 'c']);
    const scanned = [];
    for await (const e of q.scan({ state: 'DONE' })) scanned.push(e.id);
    assert.deepStrictEqual(scanned.sort(), ['b', 'c']);
    assert.strictEqual(await q.purge('done'), 2);
    assert.strictEqual((await q.stats()).done, 0);
    await q.configSet({ retainMs: 'DEFAULT', retainMax: 0 });
    const back = await q.config();
    assert.deepStrictEqual([back['retain-ms-from'], back['retain-max']], ['module', null]);
  } finally {
    client.disconnect();
  }
});

test('a batch of results goes in one DQ.DONE of id result pairs, its plain ends in one DQ.ACK', async () => {
  const client = redis();
  const q = new dq.Queue(client, unique('batch'));
  const seen = [];
  const monitored = await monitor((args) => {
    if (args[1] === q.name && (args[0] === 'DQ.DONE' || args[0] === 'DQ.ACK')) seen.push(args);
  });
  try {
    await q.configSet({ retainMs: '1h' });
    for (let i = 0; i < 10; i++) await q.add(`job ${i}`, { id: `j${i}` });
    // The ten handlers end together, so the worker settles them together.
    let release;
    const together = new Promise((r) => (release = r));
    let running = 0;
    await withWorker(q, async (d) => {
      if (++running === 10) release();
      await together;
      return Number(d.id.slice(1)) % 2 === 0 ? `result of ${d.id}` : undefined;
    }, { concurrency: 10 }, async () => {
      assert.ok(await eventually(() => seen.length === 2));
    });
    const done = seen.filter((a) => a[0] === 'DQ.DONE');
    const acks = seen.filter((a) => a[0] === 'DQ.ACK');
    assert.strictEqual(done.length, 1, JSON.stringify(seen));
    assert.strictEqual(acks.length, 1, JSON.stringify(seen));
    const pairs = done[0].slice(2);
    assert.deepStrictEqual(pairs.filter((_, i) => i % 2 === 0).sort(), ['j0', 'j2', 'j4', 'j6', 'j8']);
    for (let i = 0; i < pairs.length; i += 2) assert.strictEqual(pairs[i + 1], `result of ${pairs[i]}`);
    assert.deepStrictEqual(acks[0].slice(2).sort(), ['j1', 'j3', 'j5', 'j7', 'j9']);
    assert.deepStrictEqual(await q.wait('j4'), { state: 'done', value: Buffer.from('result of j4') });
    assert.deepStrictEqual(await q.wait('j5'), { state: 'done', value: null });
  } finally {
    client.disconnect();
    monitored.close();
  }
});

test('a handler\'s return that cannot be a result: acknowledged without one, said once; one too long: dead', async () => {
  const client = redis();
  try {
    const q = new dq.Queue(client, unique('wrongtype'));
    await q.configSet({ retainMs: '1h' });
    await q.add('x', { id: 'a' });
    await q.add('y', { id: 'b' });
    const errors = [];
    const settled = [];
    const logger = { info() {}, warn() {}, error: (m) => errors.push(m) };
    await withWorker(q, async () => ({ charged: true }), { logger, concurrency: 2, onSettled: (d, o) => settled.push(o.action) }, async () => {
      assert.ok(await eventually(() => settled.length === 2));
    });
    assert.deepStrictEqual(settled, ['ack', 'ack']);
    assert.deepStrictEqual(await q.wait('a'), { state: 'done', value: null });
    assert.strictEqual(errors.length, 1, errors.join('\n'));
    assert.match(errors[0], /returned Object, which is no result.*JSON\.stringify/);
    // More than the server keeps: the whole batch's DONE would be refused.
    // (allocUnsafe: the pages of 512 MiB are never touched.)
    const tooLong = resultOf(Buffer.allocUnsafe(dq.MAX_RESULT_BYTES + 1), () => {});
    assert.ok(tooLong instanceof dq.Permanent && tooLong.message.includes('536870912'), tooLong.message);
    assert.strictEqual(resultOf('', () => assert.fail('no wrong type')), '', 'an empty result is one');
    assert.strictEqual(resultOf(null, () => assert.fail('no wrong type')), undefined);
  } finally {
    client.disconnect();
  }
});

test('bad input is refused before anything is sent', async () => {
  const client = redis();
  try {
    const q = new dq.Queue(client, 'refused');
    const sharded = new dq.ShardedQueue(client, 'refused-sharded', { shards: 4 });
    const refusals = [
      [() => q.wait(''), RangeError],
      [() => q.wait('a', { timeoutMs: '1.5s' }), RangeError],
      [() => q.wait('a', { timeoutMs: -1 }), RangeError],
      [() => q.wait('a', { timeout: 1000 }), TypeError],
      [() => q.done([]), TypeError],
      [() => q.done('a'), TypeError],
      [() => q.done([['a']]), TypeError],
      [() => q.done([['a', 42]]), TypeError],
      [() => q.done([['', 'r']]), RangeError],
      [() => q.progress('a', undefined), TypeError],
      [() => q.progress('a', 'p'.repeat(dq.MAX_PROGRESS_BYTES + 1)), RangeError],
      [() => q.touch('a', { progress: { percent: 40 } }), TypeError],
      [() => q.add('x', { retainMs: -1 }), RangeError],
      [() => q.add('x', { retainMs: '1.5h' }), RangeError],
      [() => q.configSet({ retainMs: '7 d' }), RangeError],
      [() => q.configSet({ retainMax: -1 }), RangeError],
      [() => q.configSet({ retainMax: 1.5 }), RangeError],
      [() => q.peek('finished'), RangeError],
      [() => sharded.configSet({ retainMax: 3 }), RangeError],
      [() => sharded.wait('a', { timeoutMs: '1 s' }), RangeError],
      [() => sharded.wait('', { timeoutMs: 1000 }), RangeError],
    ];
    for (const [call, type] of refusals) {
      assert.strictEqual(await sentDuring(client, () => assert.rejects(call, type)), 0, String(call));
    }
    const [d] = c.deliveries([[Buffer.from('a'), Buffer.from('p'), 1]], 'refused');
    await assert.rejects(d.progress('x'), /not popped by this library/);
  } finally {
    client.disconnect();
  }
});

test('a sharded queue on a cluster: results by wait on the shard of the basis, RETAINMAX split over the shards', async () => {
  const cl = cluster();
  try {
    await cl.ping();
    const q = new dq.ShardedQueue(cl, unique('sharded-results'), { shards: 4 });
    await q.configSet({ retainMs: '1h', retainMax: 1000 });
    for (const shard of q.shards) assert.strictEqual((await shard.config())['retain-max'], 250);
    assert.strictEqual((await q.config())['retain-max'], 1000);

    const ids = [];
    for (let i = 0; i < 12; i++) ids.push(await q.add(`job ${i}`, i % 3 === 0 ? { shardKey: `user:${i}` } : {}));
    const waits = ids.map((id, i) => q.wait(id, { timeoutMs: '30s', ...(i % 3 === 0 ? { shardKey: `user:${i}` } : {}) }));
    await withWorker(q, async (d) => {
      await d.progress('working');
      return `done ${d.payload}`;
    }, { concurrency: 4 }, async () => {
      const outcomes = await Promise.all(waits);
      assert.deepStrictEqual(outcomes.map((o) => o.value.toString()), ids.map((_, i) => `done job ${i}`));
    });
    // A basis other than the one it was added with: another shard, where it is not.
    const elsewhere = q.shards.find((s) => s !== q.shardFor('user:0'));
    const other = ['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h'].find((k) => q.shardFor(k) === elsewhere);
    assert.strictEqual((await q.wait(ids[0], { timeoutMs: 500, shardKey: other })).state, 'gone');
    const m = await q.get(ids[0], { shardKey: 'user:0' });
    assert.deepStrictEqual([m.state, m.result.toString(), m.progress.toString()], ['done', 'done job 0', 'working']);
    assert.strictEqual((await q.stats()).done, 12);

    // A wait sent to a master that does not hold the shard follows the MOVED.
    const shard = q.shardFor(ids[1]);
    const home = cl.slots[dq.keySlot(shard.name)][0];
    const wrong = cl.nodes('master').map((n) => `${n.options.host}:${n.options.port}`).find((a) => a !== home);
    const waits_ = waitsOf(cl);
    waits_.homes.set(dq.keySlot(shard.name), wrong);
    assert.strictEqual((await q.wait(ids[1], { timeoutMs: 1000 })).state, 'done');
    assert.strictEqual(waits_.homes.get(dq.keySlot(shard.name)), home);
  } finally {
    cl.disconnect();
  }
});
