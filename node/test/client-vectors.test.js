'use strict';
// Every case of tests/vectors/commands.json and replies.json (written by
// scripts/client-vectors; docs/clients.md, "How the libraries are tested"),
// on ioredis 5 and on ioredis 6, with no server: a real client whose
// sendCommand records what the library sends and answers it with the
// vector's reply, decoded by that ioredis' own DataHandler (redis-parser on
// 5; on 6 its RESP2/RESP3 decoder, in both of its reply mappings).

const test = require('node:test');
const assert = require('node:assert');
const path = require('node:path');
const { EventEmitter } = require('node:events');
const dq = require('..');
const c = require('../lib/commands');

const vectors = (name) => require(path.join(__dirname, '../../tests/vectors', name)).cases;
const COMMANDS = vectors('commands.json');
const REPLIES = vectors('replies.json');

/** The two ioredis lines the peer dependency allows, and how each can speak. */
const CLIENTS = [
  { lib: 'ioredis', modes: [{ protocol: 2 }] },
  { lib: 'ioredis6', modes: [{ protocol: 2 }, { protocol: 3, replyMapping: 'legacy' }, { protocol: 3, replyMapping: 'resp3' }] },
];

/** Plausible replies to the command cases, as ioredis delivers them (their parsing is replies.json's). */
const CANNED = {
  'DQ.ADD': Buffer.from('id'), 'DQ.NACK': Buffer.from('ready'), 'DQ.TOUCH': 1, 'DQ.GET': null, 'DQ.PEEK': [],
  'DQ.SCAN': [Buffer.from('0'), []], 'DQ.STATS': [], 'DQ.CONFIG': Buffer.from('OK'), 'DQ.SCHEDULES': [],
  'DQ.PAUSE': Buffer.from('OK'), 'DQ.QUEUES': [], 'DQ.POP': null, 'DQ.MPOP': null, 'DQ.WAIT': null,
  'DQ.GROUPS': [Buffer.from('0'), []],
};

/** A command's argv as it goes on the wire: the RESP array toWritable() writes, read back. */
function argv(cmd) {
  const w = cmd.toWritable();
  const wire = Buffer.isBuffer(w) ? w : Buffer.from(w, 'utf8');
  let at = wire.indexOf('\r\n') + 2;
  const out = [];
  for (let n = Number(wire.subarray(1, at - 2)); n > 0; n--) {
    const end = wire.indexOf('\r\n', at);
    const len = Number(wire.subarray(at + 1, end));
    out.push(wire.subarray(end + 2, end + 2 + len));
    at = end + 2 + len + 2;
  }
  return out;
}

/**
 * A client of `lib` that sends nothing: each command is recorded, then
 * answered by `replies` (RESP text, one per command, decoded by lib's own
 * DataHandler as a connection in `mode` decodes it) or else a canned reply.
 */
function fake(lib, mode, replies = []) {
  const Redis = require(lib);
  const DataHandler = require(path.join(path.dirname(require.resolve(lib)), 'DataHandler')).default;
  const client = new Redis({ lazyConnect: true, ...mode });
  // A blocking wait's connection of its own is this same recording client.
  client.duplicate = () => client;
  const sent = [];
  client.sendCommand = (cmd) => {
    sent.push(argv(cmd));
    if (replies.length === 0) {
      cmd.resolve(CANNED[cmd.name] === undefined ? 0 : CANNED[cmd.name]);
      return cmd.promise;
    }
    const stream = new EventEmitter();
    stream.resume = () => {};
    const connection = {
      stream,
      commandQueue: [{ command: cmd }],
      condition: { subscriber: false, protocol: mode.protocol, replyMapping: mode.replyMapping },
      status: 'ready',
      options: {},
      emit() {},
      handleReconnection: (err, item) => item.command.reject(err), // what a client does without reconnectOnError
    };
    new DataHandler(connection, { stringNumbers: false, replyMapping: mode.replyMapping });
    stream.emit('data', Buffer.from(replies.shift(), 'utf8'));
    return cmd.promise;
  };
  return { client, sent, replies };
}

const camel = (k) => (k === 'every_ms' ? 'every' : k.replace(/_([a-z])/g, (_, ch) => ch.toUpperCase()));

/** The vector's neutral call on this library: snake_case names become camelCase options. */
async function call(client, v) {
  const { op, args } = v;
  const o = Object.fromEntries(Object.entries(args).map(([k, x]) => [camel(k), x]));
  if (op === 'queues') return dq.queues(client);
  if (op === 'mpop') {
    const { queues, ...options } = o;
    return c.mpopReply(await c.send(client, 'DQ.MPOP', undefined, c.mpopArgs(queues, options)));
  }
  const q = new dq.Queue(client, v.queue);
  const { payload, id, ids, name, names, state, count, cursor, ...rest } = o;
  switch (op) {
    case 'add': return q.add(payload, { id, ...rest });
    case 'ack': case 'cancel': return q[op](...ids);
    case 'nack': case 'touch': case 'wait': return q[op](id, rest);
    case 'done': return q.done(rest.results);
    case 'get': return q.get(id);
    case 'pop': return q.pop({ count, ...rest });
    case 'peek': return count === undefined ? q.peek(state) : q.peek(state, count);
    case 'scan': return onePage(client, cursor, c.scanPage, () => q.scan({ state, count }));
    case 'groups': return onePage(client, cursor, c.groupsPage, () => q.groups({ ...rest, count }));
    case 'redrive': return q.redrive({ count, ids });
    case 'purge': return q.purge(state);
    case 'config_set': return q.configSet(rest);
    case 'schedule': return q.schedule(name, payload, rest);
    case 'unschedule': return q.unschedule(...names);
    case 'pause': case 'resume': return q[op](rest);
    default: return q[op]();
  }
}

/**
 * One page of a cursor's iteration (DQ.SCAN: Queue.scan; DQ.GROUPS:
 * Queue.groups), as `open()` starts it: its request at `cursor` (an
 * earlier page, answered here with nothing, names it), its reply read by
 * `parse`, the page parser the iterator uses; any later request is
 * answered as the end.
 */
async function onePage(client, cursor, parse, open) {
  const sendCommand = client.sendCommand;
  let page = null;
  client.sendCommand = (cmd) => {
    if (page === null && argv(cmd)[2].toString() === cursor) {
      sendCommand(cmd);
      page = cmd.promise.then(parse);
      page.catch(() => {});
    } else {
      cmd.resolve([Buffer.from(page === null ? cursor : '0'), []]);
    }
    return cmd.promise;
  };
  try {
    const pages = open();
    await pages.next();
    await pages.return();
  } finally {
    client.sendCommand = sendCommand;
  }
  return page;
}

/** A result in the vectors' form: server field names (nextRun: next-run), Buffers as UTF-8 text. */
function normal(v) {
  if (v === undefined) return null; // a call that returns nothing
  if (Buffer.isBuffer(v)) return v.toString('utf8');
  if (Array.isArray(v)) return v.map(normal);
  if (v !== null && typeof v === 'object') {
    return Object.fromEntries(Object.entries(v).map(([k, x]) => [k.replace(/[A-Z]/g, (ch) => `-${ch.toLowerCase()}`), normal(x)]));
  }
  return v;
}

/** `got` has what `want` says: a record may hold more fields. */
function matches(want, got, at = 'result') {
  if (Array.isArray(want)) {
    assert.ok(Array.isArray(got) && got.length === want.length, `${at}: ${JSON.stringify(got)}`);
    want.forEach((w, i) => matches(w, got[i], `${at}[${i}]`));
  } else if (want !== null && typeof want === 'object') {
    assert.ok(got !== null && typeof got === 'object', `${at}: ${JSON.stringify(got)}`);
    for (const [k, w] of Object.entries(want)) {
      assert.ok(k in got, `${at}: no ${k} in ${JSON.stringify(got)}`);
      matches(w, got[k], `${at}.${k}`);
    }
  } else {
    assert.strictEqual(got, want, at);
  }
}

const skip = (v) => (v.not_in && v.not_in.node) || false;

for (const { lib } of CLIENTS) {
  test(`${lib}: every call of commands.json sends its argv, or is refused before sending`, async (t) => {
    for (const v of COMMANDS) {
      await t.test(v.name, { skip: skip(v) }, async () => {
        const { client, sent } = fake(lib, { protocol: 2 });
        if (v.refused) {
          await assert.rejects(async () => call(client, v), (e) => e instanceof TypeError || e instanceof RangeError);
          assert.deepStrictEqual(sent, []);
        } else {
          await call(client, v);
          assert.deepStrictEqual(sent.map((a) => a.map(String)), [v.argv]);
          assert.deepStrictEqual(sent, [v.argv.map((a) => Buffer.from(a, 'utf8'))]);
        }
      });
    }
  });
}

for (const { lib, modes } of CLIENTS) {
  for (const mode of modes) {
    const label = `${lib}, RESP${mode.protocol}${mode.replyMapping ? ` (${mode.replyMapping} mapping)` : ''}`;
    test(`${label}: every reply of replies.json reads as it says`, async (t) => {
      for (const v of REPLIES.filter((r) => r.protocol === mode.protocol)) {
        await t.test(v.name, { skip: skip(v) }, async () => {
          const { client, replies } = fake(lib, mode, [v.resp]);
          if (v.raises) {
            await assert.rejects(async () => call(client, v), (e) => {
              assert.strictEqual(e.name, v.raises, e.message);
              assert.ok(e instanceof dq.DqError && e.message.includes(v.says), e.message);
              return true;
            });
          } else {
            matches(v.result, normal(await call(client, v)));
          }
          assert.deepStrictEqual(replies, []);
        });
      }
    });
  }
}

test('the vectors cover every operation, and every record in its four forms', () => {
  const ops = new Set(COMMANDS.map((v) => v.op));
  for (const op of ['add', 'pop', 'mpop', 'ack', 'done', 'wait', 'nack', 'touch', 'cancel', 'get', 'peek', 'scan', 'redrive', 'purge',
    'stats', 'config', 'config_set', 'schedule', 'unschedule', 'schedules', 'pause', 'resume', 'queues', 'groups']) {
    assert.ok(ops.has(op), op);
  }
  const forms = new Set(REPLIES.filter((v) => v.op === 'get' && v.words).map((v) => `${v.protocol}/${v.words}`));
  assert.deepStrictEqual([...forms].sort(), ['2/bulk', '2/simple', '3/bulk', '3/simple']);
});

test('a Worker asks one POP for 10000 at most, the server\'s COUNT limit, whatever its concurrency', async () => {
  const { client, sent } = fake('ioredis', { protocol: 2 });
  const worker = new dq.Worker(new dq.Queue(client, 'orders'), async () => {}, { concurrency: 20000, leaseMs: 30000 });
  assert.deepStrictEqual(await worker._pop(client, worker.pollers[0], 20000), []);
  assert.deepStrictEqual(sent.map((a) => a.map(String)), [['DQ.POP', 'orders', 'COUNT', '10000', 'LEASE', '30000']]);
});
