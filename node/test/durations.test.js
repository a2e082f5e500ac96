'use strict';
// Durations in every option that takes one: a number of milliseconds (as
// ever) or a string in the module's grammar ('30s', '5m', '1500';
// docs/commands.md, "Arguments, replies and errors"), each sent as a number
// of ms, and refused before sending when the server would refuse it. The
// shared vectors (client-vectors.test.js) hold the string forms to the other
// libraries; this file adds the Worker's and Retry's options. No server.

const test = require('node:test');
const assert = require('node:assert');
const dq = require('..');
const c = require('../lib/commands');

const Redis = require(process.env.DQ_IOREDIS || 'ioredis');

/** A client that sends nothing: each command's name and arguments are recorded, answered with `reply`. */
function recorder(reply = 0) {
  const client = new Redis({ lazyConnect: true });
  const sent = [];
  client.sendCommand = (cmd) => {
    if (cmd.name !== 'ping') sent.push([cmd.name, ...cmd.args.map(String)]);
    cmd.resolve(reply);
    return cmd.promise;
  };
  return { client, sent };
}

test('every form of a duration sends the same milliseconds', async () => {
  for (const d of [90000, '90s', '90000', '90000ms', '0000090s']) {
    assert.deepStrictEqual(c.addArgs('p', { delayMs: d, ttlMs: d }), ['p', 'DELAY', 90000, 'TTL', 90000], d);
    assert.deepStrictEqual(c.popArgs({ count: 2, blockMs: d, leaseMs: d }), ['COUNT', 2, 'BLOCK', 90000, 'LEASE', 90000], d);
    assert.deepStrictEqual(c.nackArgs('a', { delayMs: d }), ['a', 'DELAY', 90000], d);
    assert.deepStrictEqual(c.configArgs({ leaseMs: d }), ['LEASE', 90000], d);
    assert.deepStrictEqual(c.scheduleArgs('n', 'p', { every: d, ttlMs: d }), ['n', 'p', 'EVERY', 90000, 'TTL', 90000], d);
    const { client, sent } = recorder(1);
    const q = new dq.Queue(client, 'q');
    await q.touch('a', { leaseMs: d });
    await q.pause({ forMs: d });
    assert.deepStrictEqual(sent, [['DQ.TOUCH', 'q', 'a', 'LEASE', '90000'], ['DQ.PAUSE', 'q', 'FOR', '90000']], d);
  }
  assert.deepStrictEqual(c.configArgs({ leaseMs: 'DEFAULT' }), ['LEASE', 'DEFAULT']);
  assert.deepStrictEqual(c.configArgs({ rate: '20/250ms' }), ['RATE', '20/250ms']); // sent as given
});

test('the grammar is the server\'s', () => {
  // The same table as the module's own test (src/grammar/args.rs).
  for (const [text, ms] of [['0', 0], ['1500', 1500], ['250ms', 250], ['30s', 30000], ['5m', 300000], ['2h', 7200000],
    ['7d', 604800000], ['007s', 7000], ['9007199254740991', 2 ** 53 - 1], ['104249991d', 104249991 * 86400000]]) {
    assert.strictEqual(c.parseDuration(text), ms, text);
  }
  for (const text of ['', '-1', '+1', ' 1', '1 ', '1.5s', '5 s', '5S', '5sec', 's', '1e3', '0x10', '1_000', '1h30m',
    '9007199254740992', '104249992d', '5s\n', '\uff15s', '99999999999999999999999999']) {
    assert.strictEqual(c.parseDuration(text), null, JSON.stringify(text));
  }
});

test('what the server would refuse is refused before sending: RangeError for a value, TypeError for a type', async () => {
  for (const [call, error] of [
    [() => c.addArgs('p', { delayMs: '1.5s' }), RangeError],
    [() => c.addArgs('p', { delayMs: '5 s' }), RangeError],
    [() => c.addArgs('p', { delayMs: '5S' }), RangeError],
    [() => c.addArgs('p', { delayMs: -1 }), RangeError],
    [() => c.addArgs('p', { delayMs: 1.5 }), RangeError],
    [() => c.addArgs('p', { delayMs: true }), TypeError],
    [() => c.addArgs('p', { delayMs: 5n }), TypeError],
    [() => c.addArgs('p', { ttlMs: '0ms' }), RangeError],
    [() => c.popArgs({ leaseMs: '0s' }), RangeError],
    [() => c.popArgs({ blockMs: '-1' }), RangeError],
    [() => c.configArgs({ leaseMs: 'default' }), RangeError], // the word is 'DEFAULT'
    [() => c.configArgs({ rate: '100/1w' }), TypeError], // a rate's errors are TypeErrors, as before
    [() => c.configArgs({ rate: '100/0s' }), TypeError],
    [() => c.scheduleArgs('n', 'p', { every: '999ms' }), RangeError],
    [() => c.scheduleArgs('n', 'p', { every: '' }), RangeError],
    [() => c.scheduleArgs('n', 'p', { every: {} }), TypeError],
  ]) {
    assert.throws(call, error, String(call));
  }
  const { client, sent } = recorder();
  const q = new dq.Queue(client, 'q');
  await assert.rejects(q.touch('a', { leaseMs: '0s' }), RangeError);
  await assert.rejects(q.pause({ forMs: '1h30m' }), RangeError);
  await assert.rejects(new dq.ShardedQueue(client, 'jobs', { shards: 2 }).pause({ forMs: '0s' }), RangeError);
  assert.deepStrictEqual(sent, []);
});

test('a refusal names the option and shows the grammar', () => {
  assert.throws(() => c.addArgs('p', { delayMs: '1.5s' }), /delayMs must be a duration: .*'30s', '5m'.*not '1\.5s'/);
  assert.throws(() => c.scheduleArgs('n', 'p', { every: '999ms' }), /every must be from 1000 to \d+ ms, not '999ms' \(999 ms\)/);
});

test('Retry takes a duration and keeps a number of ms', () => {
  assert.strictEqual(new dq.Retry('5s').delayMs, 5000);
  assert.strictEqual(new dq.Retry(250, 'HTTP 503').delayMs, 250);
  assert.strictEqual(new dq.Retry().delayMs, null);
  assert.strictEqual(new dq.Retry(null, 'why').delayMs, null);
  assert.throws(() => new dq.Retry('1.5s'), RangeError);
});

test('a Worker\'s leaseMs and blockMs take a duration, kept as numbers of ms', () => {
  const { client, sent } = recorder();
  const q = new dq.Queue(client, 'q');
  const worker = new dq.Worker(q, async () => {}, { leaseMs: '45s', blockMs: '2s' });
  assert.deepStrictEqual([worker.leaseMs, worker.blockMs], [45000, 2000]);
  assert.throws(() => new dq.Worker(q, async () => {}, { leaseMs: '2ms' }), /leaseMs must be from 3/); // a heartbeat each third
  assert.throws(() => new dq.Worker(q, async () => {}, { blockMs: '1 s' }), RangeError);
  assert.deepStrictEqual(sent, []);
});
