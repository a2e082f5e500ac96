'use strict';
// Schedules (DQ.SCHEDULE, DQ.UNSCHEDULE, DQ.SCHEDULES) and flow control
// (DQ.PAUSE, DQ.RESUME, RATE and MAXINFLIGHT through configSet) on one server.
const test = require('node:test');
const assert = require('node:assert');
const dq = require('..');
const { unique, redis, eventually } = require('./helpers');

const DAY = 24 * 3600 * 1000;

test('schedule sends every DQ.SCHEDULE option and schedules() reads each field back', async () => {
  const client = redis();
  try {
    const q = new dq.Queue(client, unique('sched'));
    const start = Date.now() + DAY;
    const next = await q.schedule('s1', 'hello', {
      every: '5m', start, end: start + DAY, limit: 3, missed: 'all', overlap: 'skip',
      priority: 3, maxAttempts: 4, backoff: 'fixed:1s', group: 'g', ttlMs: 1000,
    });
    // EVERY counts from START: the first run is at START.
    assert.strictEqual(next, start);
    const cronNext = await q.schedule('s2', 'hi', { cron: '0 8 * * *', tz: 'Europe/Berlin', start: new Date(start) });
    assert.ok(cronNext >= start, `next cron run ${cronNext}`);
    // NX leaves the existing schedule as it is, and says so with null.
    assert.strictEqual(await q.schedule('s2', 'other', { cron: '@daily', nx: true }), null);
    // A number of ms is an interval too.
    assert.strictEqual(await q.schedule('s3', 'x', { every: 60000, start }), start);

    const all = await q.schedules();
    assert.deepStrictEqual(all.map((s) => s.name), ['s1', 's2', 's3']);
    assert.deepStrictEqual(all[0], {
      name: 's1', spec: 'every 5m', tz: 'UTC', nextRun: start, lastRun: null, runs: 0, skipped: 0,
      limit: 3, start, end: start + DAY, missed: 'all', overlap: 'skip', payload: Buffer.from('hello'),
      priority: 3, maxAttempts: 4, backoff: 'fixed:1s', group: 'g', ttl: 1000,
    });
    assert.deepStrictEqual(all[1], {
      name: 's2', spec: 'cron 0 8 * * *', tz: 'Europe/Berlin', nextRun: cronNext, lastRun: null, runs: 0, skipped: 0,
      limit: null, start, end: null, missed: 'one', overlap: 'allow', payload: Buffer.from('hi'),
      priority: 0, maxAttempts: null, backoff: null, group: null, ttl: null,
    });
    assert.strictEqual(all[2].spec, 'every 1m');
    assert.strictEqual((await q.stats()).schedules, 3);

    assert.strictEqual(await q.unschedule('s1', 'nope', 's3'), 2);
    assert.deepStrictEqual((await q.schedules()).map((s) => s.name), ['s2']);
    assert.strictEqual((await q.stats()).added, 0);
  } finally {
    client.disconnect();
  }
});

test('a schedule\'s run is an ordinary message, id name@T, due at T', async () => {
  const client = redis();
  try {
    const q = new dq.Queue(client, unique('runs'));
    // START defaults to now: the first run is at once.
    const first = await q.schedule('tick', 'payload', { every: '1h', priority: 7 });
    let m = null;
    assert.ok(await eventually(async () => (m = await q.get(`tick@${first}`)) !== null, 60000), 'no run was made');
    assert.strictEqual(m.payload.toString(), 'payload');
    assert.strictEqual(m.priority, 7);
    const [s] = await q.schedules();
    assert.strictEqual(s.runs, 1);
    assert.strictEqual(s.lastRun, first);
    assert.strictEqual(s.nextRun, first + 3600 * 1000);
    const [d] = await q.pop();
    assert.strictEqual(d.id, `tick@${first}`);
    assert.strictEqual(await q.ack(d.id), 1);
  } finally {
    client.disconnect();
  }
});

test('bad schedules are refused with a clear error and change nothing', async () => {
  const client = redis();
  try {
    const q = new dq.Queue(client, unique('badsched'));
    await assert.rejects(q.schedule('s', 'x', { every: '5m', cron: '* * * * *' }), /exactly one of every and cron/);
    await assert.rejects(q.schedule('s', 'x', {}), /exactly one of every and cron/);
    await assert.rejects(q.schedule('s', 'x'), /exactly one of every and cron/);
    await assert.rejects(q.schedule('s', 'x', { every: '5m', colour: 'red' }), /unknown schedule option 'colour'/);
    await assert.rejects(q.schedule('s', 'x', { every: 500 }), RangeError);
    await assert.rejects(q.schedule('s', 'x', { every: '5m', tz: 'UTC' }), /tz needs cron/);
    await assert.rejects(q.schedule('s', 'x', { every: '5m', missed: 'sometimes' }), /missed must be one of skip, one, all/);
    await assert.rejects(q.schedule('s', 'x', { every: '5m', overlap: 'never' }), /overlap must be one of allow, skip/);
    await assert.rejects(q.schedule('s', 'x', { every: '5m', start: 2000, end: 1000 }), /start must not be after end/);
    await assert.rejects(q.schedule('s', 'x', { every: '5m', limit: 0 }), RangeError);
    await assert.rejects(q.schedule('', 'x', { every: '5m' }), RangeError);
    await assert.rejects(q.schedule('n'.repeat(1008), 'x', { every: '5m' }), RangeError);
    await assert.rejects(q.schedule('s', 42, { every: '5m' }), TypeError);
    await assert.rejects(q.unschedule(), TypeError);
    await assert.rejects(q.schedule('s', 'x', { every: '10ms' }), /every must be from 1000/); // before sending, as a number is
    // What only the server can check comes back as its error.
    await assert.rejects(q.schedule('s', 'x', { cron: '61 * * * *' }), (e) => e instanceof dq.DqError && /CRON must be five fields/.test(e.message));
    await assert.rejects(q.schedule('s', 'x', { cron: '@daily', tz: 'Mars/Olympus' }), (e) => e instanceof dq.DqError && /TZ must be an IANA/.test(e.message));
    assert.deepStrictEqual(await q.schedules(), []);
    assert.strictEqual((await q.stats()).schedules, 0);
  } finally {
    client.disconnect();
  }
});

test('pause holds back POP until resume, or for forMs; stats and config show it', async () => {
  const client = redis();
  try {
    const q = new dq.Queue(client, unique('pause'));
    await q.add('a', { id: 'a' });
    await q.add('b', { id: 'b' });
    assert.strictEqual(await q.pause(), undefined);
    assert.deepStrictEqual(await q.pop(), []);
    let s = await q.stats();
    assert.deepStrictEqual([s.paused, s['paused-until'], s.ready, s.throttled], [1, null, 2, 1]);
    assert.strictEqual((await q.config()).paused, 1);
    assert.strictEqual(await q.resume(), true);
    assert.strictEqual(await q.resume(), false);
    assert.strictEqual((await q.pop()).length, 1);

    const before = Date.now();
    await q.pause({ forMs: 3600000 });
    s = await q.stats();
    assert.strictEqual(s.paused, 1);
    assert.ok(s['paused-until'] >= before + 3600000, `paused-until ${s['paused-until']}`);
    assert.deepStrictEqual(await q.pop(), []);
    assert.strictEqual(await q.resume(), true);
    assert.strictEqual((await q.config())['paused-until'], null);

    await assert.rejects(q.pause(5000), /pause takes \{ forMs, group \}/);
    await assert.rejects(q.pause({ for: 5000 }), /unknown pause option 'for'/);
    await assert.rejects(q.pause({ forMs: 0 }), RangeError);
    assert.strictEqual((await q.stats()).paused, 0);
  } finally {
    client.disconnect();
  }
});

test('configSet sets and removes RATE and MAXINFLIGHT; a bad value changes nothing', async () => {
  const client = redis();
  try {
    const q = new dq.Queue(client, unique('limits'));
    for (let i = 0; i < 10; i++) await q.add('x', { id: `m${i}` });
    await q.configSet({ rate: '100/1s', maxInflight: 3 });
    let cfg = await q.config();
    assert.deepStrictEqual([cfg.rate, cfg['max-inflight']], ['100/1s', 3]);
    let s = await q.stats();
    assert.deepStrictEqual([s.rate, s['max-inflight']], ['100/1s', 3]);
    // MAXINFLIGHT lets 3 go, whatever COUNT asks.
    assert.strictEqual((await q.pop({ count: 10 })).length, 3);
    assert.strictEqual((await q.stats()).throttled, 1);

    // One bad pair refuses the whole SET.
    await assert.rejects(q.configSet({ leaseMs: 5000, rate: '2000000/1s' }), (e) => e instanceof dq.DqError && /RATE must be n\/duration/.test(e.message));
    await assert.rejects(q.configSet({ leaseMs: 5000, rate: 'fast' }), TypeError);
    await assert.rejects(q.configSet({ maxInflight: -1 }), RangeError);
    await assert.rejects(q.configSet({ rate: 5 }), /rate must be 'n\/duration'/);
    await assert.rejects(q.configSet({ colour: 'red' }), /unknown setting 'colour'/);
    await assert.rejects(q.configSet({}), /configSet needs one of/);
    cfg = await q.config();
    assert.deepStrictEqual([cfg.rate, cfg['max-inflight'], cfg['lease-ms-from']], ['100/1s', 3, 'module']);

    await q.configSet({ rate: 0, maxInflight: 0 });
    cfg = await q.config();
    assert.deepStrictEqual([cfg.rate, cfg['max-inflight']], [null, null]);
    await q.configSet({ rate: '5/1h', maxInflight: 'DEFAULT' });
    await q.configSet({ rate: 'DEFAULT' });
    s = await q.stats();
    assert.deepStrictEqual([s.rate, s['max-inflight']], [null, null]);
  } finally {
    client.disconnect();
  }
});
