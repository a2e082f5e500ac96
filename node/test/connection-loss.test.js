'use strict';
// The Worker across a lost connection and a server restart, each on a
// server of the test's own (OwnServer), since the test kills its clients or
// the server itself.
//
// Each test runs a stream of jobs in three waves and checks at-least-once:
// every job added is handled, the queue drains to empty, a job whose ACK was
// confirmed ('acked') is never handled again, and stop() returns. Mid-run:
// - the connections test kills every connection of the worker (CLIENT KILL
//   TYPE normal) and the worker must reconnect by itself;
// - the restart test kills the server (SIGKILL, AOF with appendfsync
//   always) and starts it again on the same port.
// Then the ACK of one job, 'mark', is made to fail for certain: its handler
// waits, before it returns, until the test has cut the worker off — every
// connection killed and no new one let in (maxclients 1: only the test's own
// connection), or the server killed — and the test lets the worker back
// only once it has reported mark 'unsettled'. Mark then comes back after its
// lease and is handled again.
const test = require('node:test');
const assert = require('node:assert');
const dq = require('..');
const { Redis, unique, eventually, OwnServer } = require('./helpers');

const WAVE = 40; // jobs per wave
const LEASE_MS = 2000; // short, so that mark comes back soon after its ACK failed
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** What the handlers saw and what onSettled was told, in one order. */
class Journal {
  constructor() {
    this.events = []; // ['handled', id, attempt] | ['settled', id, outcome]
  }

  handled(d) {
    this.events.push(['handled', d.id, d.attempt]);
  }

  settled(d, o) {
    this.events.push(['settled', d.id, o]);
  }

  handledIds() {
    return new Set(this.events.filter((e) => e[0] === 'handled').map((e) => e[1]));
  }

  attempts(id) {
    return this.events.filter((e) => e[0] === 'handled' && e[1] === id).map((e) => e[2]);
  }

  outcomes(id) {
    return this.events.filter((e) => e[0] === 'settled' && e[1] === id).map((e) => e[2]);
  }

  /**
   * Whether every id was settled at least once. Not necessarily 'acked': an
   * ACK cut off by the kill may have reached the server before its reply
   * was lost ('unsettled', yet the message is gone); one that did not brings
   * the message back, and the queue is not drained until it is handled again.
   */
  settledAll(ids) {
    return this.unsettled(ids).length === 0;
  }

  /** The ids never settled, with what happened to them. */
  unsettled(ids) {
    const settled = new Set(this.events.filter((e) => e[0] === 'settled').map((e) => e[1]));
    return ids.filter((id) => !settled.has(id)).map((id) => [id, this.attempts(id)]);
  }

  check(added) {
    const handled = this.handledIds();
    assert.deepStrictEqual(added.filter((id) => !handled.has(id)), [], 'jobs never handled');
    const confirmed = new Set();
    for (const [kind, id, x] of this.events) {
      if (kind === 'handled') {
        assert.ok(!confirmed.has(id), `${id} was handled again after its ACK was confirmed`);
        continue;
      }
      assert.strictEqual(x.action, 'ack', `${id}: ${JSON.stringify(x)}`);
      assert.ok(['acked', 'acked-late', 'unsettled'].includes(x.state), `${id}: ${JSON.stringify(x)}`);
      if (x.state === 'unsettled') assert.ok(x.failure instanceof Error, `${id}: ${JSON.stringify(x)}`);
      if (x.state === 'acked') confirmed.add(id);
    }
    assert.ok(this.settledAll(added));
  }
}

const drained = (s) => s.ready === 0 && s.delayed === 0 && s.inflight === 0 && s.dead === 0;

/** Fails unless `promise` settles within `ms`. */
async function within(ms, promise, what) {
  let timer;
  const late = new Promise((resolve, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms waiting for ${what}`)), ms);
  });
  try {
    return await Promise.race([promise, late]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * The scenario; `cutOff(admin, stays)` and `letBack(admin)` are what the
 * test does mid-run (the first time, then around mark's ACK).
 */
async function scenario(server, cutOff, letBack) {
  // The test's own connection waits through the restarts (no retry limit).
  const admin = new Redis(server.url, { maxRetriesPerRequest: null });
  const client = new Redis(server.url, { maxRetriesPerRequest: 3 });
  // Their reconnection errors are expected here: not printed as unhandled.
  for (const c of [admin, client]) c.on('error', () => {});
  try {
    await exercise(admin, client, cutOff, letBack);
  } finally {
    // Also when the test failed: nothing left to keep the process alive.
    client.disconnect();
    admin.disconnect();
  }
}

async function exercise(admin, client, cutOff, letBack) {
  const name = unique('loss');
  const aq = new dq.Queue(admin, name);
  const journal = new Journal();
  let reachMark;
  const atMark = new Promise((resolve) => (reachMark = resolve));
  let cut;
  const isCut = new Promise((resolve) => (cut = resolve));
  const wave = async (prefix) => {
    const ids = [];
    for (let i = 0; i < WAVE; i++) ids.push(await aq.add(`${prefix}${i}`, { id: `${prefix}${i}` }));
    return ids;
  };

  const worker = new dq.Worker(new dq.Queue(client, name), async (d) => {
    journal.handled(d);
    if (d.id === 'mark' && d.attempt === 1) {
      // The worker is cut off before this returns: its ACK cannot be sent.
      reachMark();
      await isCut;
    }
    await sleep(2);
  }, { concurrency: 4, leaseMs: LEASE_MS, blockMs: 200, onSettled: (d, o) => journal.settled(d, o) });
  const added = await wave('a');
  // ioredis prints an 'error' event nobody listens to: the worker's own
  // connections must not (it logs a failed POP itself).
  const unhandled = [];
  const consoleError = console.error;
  console.error = (...args) => {
    if (String(args[0]).startsWith('[ioredis] Unhandled error event')) unhandled.push(args.join(' ').split('\n')[0]);
    else consoleError(...args);
  };
  const running = worker.run();
  try {
    try {
      assert.ok(await eventually(() => journal.handledIds().size >= 10), '10 jobs handled');
      await cutOff(admin, false);
      await letBack(admin);
      added.push(...(await wave('b')));
      assert.ok(await eventually(() => added.every((id) => journal.handledIds().has(id)), 60000), 'the jobs added before and after');
      added.push(await aq.add('m', { id: 'mark' }));
      await within(60000, atMark, 'mark to be handled');
      await cutOff(admin, true);
      cut();
      assert.ok(await eventually(() => journal.outcomes('mark').length > 0, 60000), "mark's settlement");
      await letBack(admin);
      added.push(...(await wave('c')));
      if (!(await eventually(async () => drained(await aq.stats()) && journal.settledAll(added), 60000))) {
        assert.fail(`the queue did not drain: ${JSON.stringify(await aq.stats())}; never settled ${JSON.stringify(journal.unsettled(added))}`);
      }
    } finally {
      cut();
      worker.stop();
    }
    await within(60000, running, 'run() to return after stop()');
  } finally {
    console.error = consoleError;
  }
  assert.deepStrictEqual(unhandled, [], "errors of the worker's own connections were printed as unhandled");
  journal.check(added);
  // Mark's first ACK could not reach the server: reported 'unsettled', with
  // why; it came back after its lease, was handled again and acked.
  const [first] = journal.outcomes('mark');
  assert.deepStrictEqual([first.action, first.state], ['ack', 'unsettled']);
  assert.ok(first.failure instanceof Error, String(first.failure));
  assert.deepStrictEqual(journal.attempts('mark').slice(0, 2), [1, 2]);
  assert.ok(drained(await aq.stats()));
}

test('the worker reconnects by itself after its connections are killed, and reports an ACK that could not be sent', async () => {
  const server = await OwnServer.start();
  try {
    let maxclients = null;
    await scenario(server, async (admin, doorClosed) => {
      if (doorClosed) {
        maxclients = (await admin.config('GET', 'maxclients'))[1];
        await admin.config('SET', 'maxclients', '1');
      }
      const killed = await admin.client('KILL', 'TYPE', 'normal', 'SKIPME', 'yes');
      assert.ok(killed >= 1, 'the worker had no connection to kill');
    }, async (admin) => {
      if (maxclients !== null) await admin.config('SET', 'maxclients', maxclients);
      maxclients = null;
    });
  } finally {
    await server.close();
  }
});

test('the worker rides out a server restart (AOF, appendfsync always) and reports an ACK that could not be sent', async () => {
  const server = await OwnServer.start('--appendonly', 'yes', '--appendfsync', 'always');
  try {
    await scenario(server, async (admin, staysDown) => {
      await server.kill();
      if (!staysDown) await server.start();
    }, async () => {
      if (!server.running) await server.start();
    });
  } finally {
    await server.close();
  }
});
