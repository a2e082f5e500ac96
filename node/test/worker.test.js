'use strict';
const test = require('node:test');
const assert = require('node:assert');
const dq = require('..');
const { unique, redis, eventually, monitor } = require('./helpers');

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function withWorker(queue, handler, options, body) {
  const worker = new dq.Worker(queue, handler, { blockMs: 200, ...options });
  const run = worker.run();
  try {
    await body(worker);
  } finally {
    worker.stop();
    await run;
  }
}

test('a worker acks what its handler finished, NACKs with the error text, dead on Permanent', async () => {
  const client = redis();
  try {
    const q = new dq.Queue(client, unique('work'));
    await q.add('ok', { id: 'ok' });
    await q.add('fail', { id: 'fail', backoff: 'fixed:1h' });
    await q.add('gone', { id: 'gone' });
    const settled = [];
    await withWorker(q, async (d) => {
      if (d.payload.toString() === 'fail') throw new TypeError('no such order');
      if (d.payload.toString() === 'gone') throw new dq.Permanent('HTTP 410 Gone');
    }, { concurrency: 2, onSettled: (d, o) => settled.push([d.id, o.action, o.state]) }, async () => {
      assert.ok(await eventually(() => settled.length === 3));
    });
    const stats = await q.stats();
    assert.strictEqual(stats.acked, 1);
    assert.strictEqual(stats.nacked, 2);
    const fail = await q.get('fail');
    assert.strictEqual(fail.state, 'delayed');
    assert.strictEqual(fail['last-error'], 'TypeError: no such order');
    const gone = await q.get('gone');
    assert.strictEqual(gone['dead-reason'], 'permanent');
    assert.strictEqual(gone['last-error'], 'HTTP 410 Gone');
    assert.deepStrictEqual(settled.sort(), [['fail', 'nack', 'delayed'], ['gone', 'dead', 'dead'], ['ok', 'ack', 'acked']]);
  } finally {
    client.disconnect();
  }
});

test('Retry chooses the delay', async () => {
  const client = redis();
  try {
    const q = new dq.Queue(client, unique('retry'));
    await q.add('x', { id: 'r' });
    const before = Date.now();
    let after;
    await withWorker(q, async () => {
      throw new dq.Retry(3600000, 'later');
    }, {}, async () => {
      assert.ok(await eventually(async () => (await q.stats()).nacked === 1));
      after = Date.now();
    });
    const m = await q.get('r');
    // An hour after the NACK, which came between before and after.
    assert.ok(m['due-at'] >= before + 3600000 && m['due-at'] <= after + 3600000, `due-at ${m['due-at']}`);
    assert.strictEqual(m['last-error'], 'later');
  } finally {
    client.disconnect();
  }
});

test('the heartbeat keeps the lease past its first deadline', async () => {
  const client = redis();
  try {
    // The handler takes three leases; the heartbeat, a TOUCH every third of
    // a lease, must keep it one delivery. A machine that stalls the worker
    // for two thirds of a lease loses the lease whatever the heartbeat does:
    // then a fresh queue tries a lease four times longer. A heartbeat that
    // does not work loses every one.
    let stats;
    for (const leaseMs of [300, 1200, 4800]) {
      const q = new dq.Queue(client, unique('beat'));
      await q.add('slow', { id: 'slow' });
      await withWorker(q, () => sleep(3 * leaseMs), { leaseMs }, async () => {
        assert.ok(await eventually(async () => (await q.stats()).acked === 1, 60000));
      });
      stats = await q.stats();
      if (stats.delivered === 1 && stats['lease-expired'] === 0) return;
    }
    assert.fail(`the lease ran out each time, the last: ${JSON.stringify(stats)}`);
  } finally {
    client.disconnect();
  }
});

test('stop() lets running handlers finish and loses nothing', async () => {
  const client = redis();
  try {
    const q = new dq.Queue(client, unique('stop'));
    for (let i = 0; i < 60; i++) await q.add('x', { id: `m${i}` });
    const worker = new dq.Worker(q, () => sleep(40), { concurrency: 4, blockMs: 200 });
    const run = worker.run();
    assert.ok(await eventually(async () => (await q.stats()).acked >= 8));
    worker.stop();
    await run;
    const s = await q.stats();
    assert.strictEqual(s.inflight, 0);
    assert.ok(s.ready > 0, 'the stop came too late to test anything');
    assert.strictEqual(s.acked + s.ready, 60);
  } finally {
    client.disconnect();
  }
});

test('a lost lease marks the delivery and it is not NACKed', async () => {
  const client = redis();
  try {
    const name = unique('lost');
    const q = new dq.Queue(client, name);
    await q.add('x', { id: 'l' });
    let seen;
    await withWorker(q, async (d) => {
      seen = d;
      // Someone else takes over: the delivery this handler holds is over.
      await client.call('DQ.NACK', name, 'l', 'DELAY', '3600000');
      await eventually(() => d.lost, 5000);
      throw new Error('too late');
    }, { leaseMs: 150 }, async () => {
      assert.ok(await eventually(() => seen && seen.lost));
    });
    assert.ok(seen.signal.aborted);
    // The message is still there (delayed by the takeover): lost, not cancelled.
    assert.strictEqual(seen.lostReason, 'lost');
    assert.strictEqual(seen.cancelled, false);
    const s = await q.stats();
    assert.strictEqual(s.nacked, 1); // only the takeover's
  } finally {
    client.disconnect();
  }
});

test('ACKs go in batches: fewer DQ.ACKs than deliveries, POPs ask for the free permits', async () => {
  const client = redis();
  try {
    const name = unique('batch');
    const q = new dq.Queue(client, name);
    const p = client.pipeline();
    for (let i = 0; i < 400; i++) p.call('DQ.ADD', name, 'x', 'ID', `m${i}`);
    await p.exec();
    // Every command the server runs on this queue, as MONITOR shows it.
    const seen = [];
    const m = await monitor((args) => {
      if (args[1] === name) seen.push(args);
    });
    const states = [];
    await withWorker(q, async () => {}, { concurrency: 20, onSettled: (d, o) => states.push(o.state) }, async () => {
      assert.ok(await eventually(() => states.length === 400));
    });
    m.close();
    assert.deepStrictEqual([...new Set(states)], ['acked']);
    assert.strictEqual((await q.stats()).acked, 400);
    const acks = seen.filter((a) => a[0].toUpperCase() === 'DQ.ACK');
    const acked = acks.reduce((n, a) => n + a.length - 2, 0);
    assert.strictEqual(acked, 400);
    // Handlers that finish together are acknowledged together.
    assert.ok(acks.length < 400, `${acks.length} DQ.ACKs for 400 deliveries`);
    for (const pop of seen.filter((a) => a[0].toUpperCase() === 'DQ.POP')) {
      const count = Number(pop[pop.indexOf('COUNT') + 1]);
      assert.ok(count >= 1 && count <= 20, `POP COUNT ${count} beyond the concurrency`);
    }
  } finally {
    client.disconnect();
  }
});

test('a handler that finishes after its lease was lost is still ACKed: ACK is proof the work was done', async () => {
  const client = redis();
  try {
    const name = unique('late');
    const q = new dq.Queue(client, name);
    await q.add('x', { id: 'l' });
    let outcome;
    await withWorker(q, async (d) => {
      // Another consumer takes it over after a NACK: this delivery is over.
      await client.call('DQ.NACK', name, 'l', 'DELAY', '0');
      const [[, , attempt]] = await client.call('DQ.POP', name, 'LEASE', '3600000');
      assert.strictEqual(Number(attempt), 2);
      await eventually(() => d.lost, 20000);
    }, { leaseMs: 150, onSettled: (d, o) => (outcome = o) }, async () => {
      assert.ok(await eventually(() => outcome !== undefined));
    });
    // The message was in flight (with the other consumer): the ACK removed it.
    assert.deepStrictEqual({ action: outcome.action, state: outcome.state }, { action: 'ack', state: 'acked' });
    assert.strictEqual(await q.get('l'), null);
  } finally {
    client.disconnect();
  }
});

test('a stopped worker with handleSignals leaves nothing open but the caller\'s client', async () => {
  const client = redis();
  try {
    const q = new dq.Queue(client, unique('signals'));
    const worker = new dq.Worker(q, async () => {}, { blockMs: 200, handleSignals: true });
    const before = process.listenerCount('SIGTERM');
    const run = worker.run();
    await eventually(async () => (await client.client('LIST')).split('\n').filter(Boolean).length >= 2);
    assert.strictEqual(process.listenerCount('SIGTERM'), before + 1);
    worker.stop();
    await run;
    assert.strictEqual(process.listenerCount('SIGTERM'), before);
    // Only this test's connection is left of the worker's.
    assert.ok(await eventually(async () => !(await client.client('LIST')).includes('cmd=dq.pop')));
  } finally {
    client.disconnect();
  }
});

/** Waits until `signal` aborts (or a minute passes: then the test fails on what it checks). */
const aborted = (signal) => new Promise((resolve) => {
  const timer = setTimeout(resolve, 60000);
  signal.addEventListener('abort', () => {
    clearTimeout(timer);
    resolve();
  });
});

for (const how of ['cancel', 'purge']) {
  test(`a handler learns through its signal that its message was removed by DQ.${how.toUpperCase()}; nothing is sent for it`, async () => {
    const client = redis();
    try {
      const q = new dq.Queue(client, unique(how));
      await q.add('x', { id: 'c' });
      let running = null;
      let sawAtAbort = null;
      let outcome;
      // A short lease, so the heartbeat (a third of it) comes soon.
      await withWorker(q, async (d) => {
        running = d;
        await aborted(d.signal);
        sawAtAbort = { cancelled: d.cancelled, lostReason: d.lostReason, lost: d.lost };
        // One handler gives up with the abort's error, the other returns.
        if (how === 'cancel') throw d.signal.reason;
      }, { leaseMs: 1500, onSettled: (d, o) => (outcome = o) }, async () => {
        assert.ok(await eventually(() => running !== null, 60000), 'the handler never ran');
        if (how === 'cancel') assert.strictEqual(await q.cancel('c'), 1);
        else assert.strictEqual(await q.purge(), 1);
        assert.ok(await eventually(() => outcome !== undefined, 60000), 'never settled');
      });
      assert.deepStrictEqual(sawAtAbort, { cancelled: true, lostReason: 'cancelled', lost: true });
      assert.strictEqual(running.signal.aborted, true);
      assert.deepStrictEqual({ action: outcome.action, state: outcome.state }, { action: how === 'cancel' ? 'nack' : 'ack', state: 'cancelled' });
      const s = await q.stats();
      // Neither an ACK nor a NACK reached the server.
      assert.deepStrictEqual([s.acked, s.nacked, s[how === 'cancel' ? 'cancelled' : 'purged']], [0, 0, 1]);
    } finally {
      client.disconnect();
    }
  });
}

test('several queues of one server: one DQ.MPOP takes from them in their order, ACKs go to each', async () => {
  const client = redis();
  try {
    const names = ['urgent', 'normal', 'bulk'].map(unique);
    const [urgent, normal, bulk] = names.map((n) => new dq.Queue(client, n));
    // Added last, taken first: the order is the worker's, not the queues' age.
    for (let i = 0; i < 4; i++) await bulk.add('b', { id: `b${i}` });
    for (let i = 0; i < 4; i++) await normal.add('n', { id: `n${i}` });
    for (let i = 0; i < 4; i++) await urgent.add('u', { id: `u${i}` });
    const seen = [];
    const m = await monitor((args) => {
      if (args.some((a) => names.includes(a))) seen.push(args);
    });
    const order = [];
    const settled = [];
    await withWorker([urgent, normal, bulk], async (d) => {
      order.push(d.queue);
    }, { concurrency: 1, onSettled: (d, o) => settled.push(o.state) }, async () => {
      assert.ok(await eventually(() => settled.length === 12));
    });
    m.close();
    assert.deepStrictEqual(order, [...Array(4).fill(names[0]), ...Array(4).fill(names[1]), ...Array(4).fill(names[2])]);
    assert.deepStrictEqual([...new Set(settled)], ['acked']);
    for (const q of [urgent, normal, bulk]) assert.strictEqual((await q.stats()).acked, 4, q.name);
    const verbs = new Set(seen.map((a) => a[0].toUpperCase()));
    assert.ok(!verbs.has('DQ.POP'), 'a DQ.POP was sent');
    const mpops = seen.filter((a) => a[0].toUpperCase() === 'DQ.MPOP');
    assert.ok(mpops.length >= 12, `${mpops.length} DQ.MPOPs`);
    for (const a of mpops) assert.deepStrictEqual(a.slice(1, 5), ['3', ...names]);
  } finally {
    client.disconnect();
  }
});

test('bad worker options are refused', () => {
  const client = { sendCommand() {} };
  const q = new dq.Queue(client, 'q');
  assert.throws(() => new dq.Worker([q, new dq.Queue(client, 'q')], () => {}), /queue 'q' is given twice/);
  assert.throws(() => new dq.Worker(q, 'not a function'), TypeError);
  assert.throws(() => new dq.Worker(q, () => {}, { concurrency: 0 }), RangeError);
  assert.throws(() => new dq.Worker([], () => {}), TypeError);
  assert.throws(() => new dq.Worker(['q'], () => {}), TypeError);
});
