'use strict';
// What the tests share: clients for the servers scripts/with-servers started
// (DQ_REDIS_URL, DQ_CLUSTER_NODES), servers of a test's own (OwnServer: to
// kill and restart), unique queue names and polling. The
// clients are of ioredis 5, or of the package DQ_IOREDIS names (scripts/test-node
// runs the tests again with ioredis6, ioredis 6 under another name).

const { spawn } = require('node:child_process');
const fs = require('node:fs');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');
const Redis = require(process.env.DQ_IOREDIS || 'ioredis');

const url = process.env.DQ_REDIS_URL;
if (!url) throw new Error('DQ_REDIS_URL is not set: run the tests with scripts/test-node');

let n = 0;
/** A queue name no other test uses. */
const unique = (what) => `${what}-${process.pid}-${Date.now()}-${n++}`;

const redis = () => new Redis(url, { maxRetriesPerRequest: 3 });

function cluster() {
  const nodes = (process.env.DQ_CLUSTER_NODES || '').split(',').filter(Boolean);
  if (nodes.length === 0) throw new Error('DQ_CLUSTER_NODES is not set: run the tests with scripts/test-node');
  return new Redis.Cluster(nodes.map((n) => ({ host: n.slice(0, n.lastIndexOf(':')), port: Number(n.slice(n.lastIndexOf(':') + 1)) })));
}

/** Polls `condition` until it holds (true) or `ms` pass (false). */
async function eventually(condition, ms = 20000) {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (await condition()) return true;
    await new Promise((r) => setTimeout(r, 20));
  }
  return false;
}

/** A DQ.GET / DQ.STATS field as text, by plain command. */
async function field(client, command, queue, ...rest) {
  const name = rest.pop();
  const reply = await client.call(command, queue, ...rest);
  if (reply == null) return undefined;
  for (let i = 0; i < reply.length; i += 2) if (reply[i] === name) return reply[i + 1];
  return undefined;
}

const ROOT = path.resolve(__dirname, '..', '..');

/** The module a server of a test's own loads: DQ_MODULE, else the debug build, as scripts/with-servers does. */
function modulePath() {
  if (process.env.DQ_MODULE) return process.env.DQ_MODULE;
  const target = process.env.CARGO_TARGET_DIR || path.join(ROOT, 'target');
  const file = path.join(path.isAbsolute(target) ? target : path.join(ROOT, target), 'debug', 'libdq.so');
  if (!fs.existsSync(file)) throw new Error(`${file} is missing: run \`cargo build\` at the root first (scripts/test-node does)`);
  return file;
}

async function freePort() {
  const s = net.createServer();
  await new Promise((resolve) => s.listen(0, '127.0.0.1', resolve));
  const { port } = s.address();
  await new Promise((resolve) => s.close(resolve));
  return port;
}

/** Whether a server answers PING on `port` (false while it loads its AOF). */
function pong(port) {
  return new Promise((resolve) => {
    let got = '';
    const s = net.connect(port, '127.0.0.1', () => s.write('PING\r\n'));
    s.setTimeout(1000, () => s.destroy());
    s.on('data', (d) => {
      got += d;
      if (got.includes('\r\n')) s.destroy();
    });
    s.on('error', () => {});
    s.on('close', () => resolve(got.startsWith('+PONG')));
  });
}

/**
 * A server of one test's own, which it may kill and start again: unlike
 * scripts/with-servers' (shared by every test), redis-server (DQ_SERVER)
 * with the module loaded, on a free loopback port, in a temporary
 * directory, with more `--name value` arguments (`--appendonly yes`).
 * kill() is a crash (SIGKILL); start() brings it back on the same port and
 * directory, so it loads what it persisted. close() when done.
 */
class OwnServer {
  static async start(...args) {
    const server = new OwnServer(args);
    // A port found free may be taken before the server binds it.
    for (let i = 0; i < 20; i++) {
      server.port = await freePort();
      if (await server._spawn()) return server;
    }
    await server.close();
    throw new Error('20 free ports in a row were taken before the server bound them');
  }

  constructor(args) {
    this.binary = process.env.DQ_SERVER || 'redis-server';
    this.module = modulePath();
    this.args = args;
    this.dir = fs.mkdtempSync(path.join(os.tmpdir(), 'dq-nodetest-'));
    this.log = path.join(this.dir, 'server.log');
    this.proc = null;
    this.port = 0;
  }

  get url() {
    return `redis://127.0.0.1:${this.port}`;
  }

  get running() {
    return this.proc !== null && this.proc.exitCode === null && this.proc.signalCode === null;
  }

  _logText() {
    return fs.existsSync(this.log) ? fs.readFileSync(this.log, 'utf8') : '';
  }

  /** Starts the server on this.port and waits until it answers PING: false when the port was taken. */
  async _spawn() {
    const logged = this._logText().length;
    const proc = spawn(this.binary, ['--port', String(this.port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no',
      '--dir', this.dir, '--logfile', this.log, ...this.args, '--loadmodule', this.module], { stdio: 'ignore' });
    this.proc = proc;
    const exited = new Promise((resolve) => proc.once('exit', resolve));
    const deadline = Date.now() + 60000;
    while (Date.now() < deadline) {
      if (!this.running) {
        await exited;
        if (this._logText().slice(logged).includes('Address already in use')) return false;
        throw new Error(`${this.binary} exited; its log:\n${this._logText()}`);
      }
      if (await pong(this.port)) return true;
      await new Promise((r) => setTimeout(r, 20));
    }
    await this.kill();
    throw new Error(`${this.binary} did not answer PING on port ${this.port} within 60 s`);
  }

  /** Kills the server as a crash would (SIGKILL) and waits until it is gone. */
  async kill() {
    if (!this.running) return;
    const exited = new Promise((resolve) => this.proc.once('exit', resolve));
    this.proc.kill('SIGKILL');
    await exited;
  }

  /** Starts it again on its port and directory, after kill(). */
  async start() {
    const deadline = Date.now() + 60000;
    while (!(await this._spawn())) {
      if (Date.now() > deadline) throw new Error(`port ${this.port} stayed taken for 60 s: no restart`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  async close() {
    await this.kill();
    fs.rmSync(this.dir, { recursive: true, force: true });
  }
}

/** The arguments of one MONITOR line, unquoted as the server quoted them (sdscatrepr). */
function monitorArgs(line) {
  const args = [];
  const escapes = { n: '\n', r: '\r', t: '\t', a: '\x07', b: '\b', '"': '"', '\\': '\\' };
  let i = line.indexOf(']') + 1;
  while ((i = line.indexOf('"', i)) !== -1) {
    let arg = '';
    for (i++; i < line.length && line[i] !== '"'; i++) {
      if (line[i] !== '\\') {
        arg += line[i];
      } else if (line[i + 1] === 'x') {
        arg += String.fromCharCode(parseInt(line.slice(i + 2, i + 4), 16));
        i += 3;
      } else {
        arg += escapes[line[i + 1]] ?? line[i + 1];
        i++;
      }
    }
    args.push(arg);
    i++;
  }
  return args;
}

/**
 * MONITOR on a plain socket of its own: `onCommand(args)` for each command
 * the server runs. (ioredis' monitor() can mistake a monitored line that
 * comes in the same read as MONITOR's +OK for a reply, and fails with
 * "Command queue state error" when another test's client connects then.)
 * Resolves once the server monitors; `close()` ends it.
 */
function monitor(onCommand) {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(port) || 6379, hostname || '127.0.0.1');
    let buffered = '';
    let started = false;
    socket.setEncoding('latin1');
    socket.on('error', reject);
    socket.on('connect', () => socket.write('MONITOR\r\n'));
    socket.on('data', (chunk) => {
      buffered += chunk;
      let end;
      while ((end = buffered.indexOf('\r\n')) !== -1) {
        const line = buffered.slice(0, end);
        buffered = buffered.slice(end + 2);
        if (!started) {
          if (line !== '+OK') return reject(new Error(`MONITOR answered ${line}`));
          started = true;
          resolve({ close: () => socket.destroy() });
        } else {
          onCommand(monitorArgs(line));
        }
      }
    });
  });
}

module.exports = { Redis, unique, redis, cluster, eventually, field, monitor, OwnServer };
