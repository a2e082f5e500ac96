'use strict';
// Connections of their own for commands that block the server-side client:
// a Worker poller's DQ.POP ... BLOCK, Queue.wait's DQ.WAIT ... BLOCK and an
// event reader's DQ.EVENTS ... BLOCK. A blocked command on the caller's
// shared connection would hold up every other command queued behind it
// (ioredis pipelines one socket).

const c = require('./commands');
const { keySlot } = require('./shard');

/**
 * Where a blocking command on `queue` goes: '' on a standalone server; on a
 * cluster `address` when a MOVED named one, else the master of the queue's
 * slot in the client's slot map (known once the cluster is ready).
 */
async function resolve(client, queue, address) {
  if (!client.isCluster) return '';
  if (address) return address;
  const slot = keySlot(queue);
  if (client.status !== 'ready' || !client.slots[slot]) await client.ping();
  const owners = client.slots[slot];
  return (owners && owners[0]) || '';
}

/**
 * A new connection to where `resolve` pointed: the client duplicated, or a
 * Redis of the same ioredis as the cluster's own nodes (5 or 6) to that
 * master. Its 'error' events are heard (else ioredis prints each failed
 * reconnection as unhandled): a command that fails says why to its caller.
 */
async function open(client, address) {
  let conn;
  if (!client.isCluster) {
    conn = client.duplicate();
  } else {
    if (client.nodes().length === 0) await client.ping();
    const [host, port] = address ? [address.slice(0, address.lastIndexOf(':')), Number(address.slice(address.lastIndexOf(':') + 1))] : [];
    conn = client.nodes()[0].duplicate({ ...client.options.redisOptions, host, port, maxRetriesPerRequest: null });
  }
  conn.on('error', () => {});
  return conn;
}

/** The most connections a client keeps open per node between waits. */
const IDLE_PER_NODE = 16;
/** How long past its BLOCK a wait's reply may take before the wait fails (a server that stopped answering). */
const GRACE_MS = 10000;
/** Redirections followed before giving up: a slot moves once, not 16 times. */
const MAX_REDIRECTS = 16;

/**
 * The waits of one client (a Redis or a Cluster): each blocking command
 * (DQ.WAIT, DQ.EVENTS) on a connection of its own, taken from the idle ones to its node or opened,
 * and kept for the next wait afterwards (the next of 500 waits in a row
 * pays no connect). All are closed when the client ends (quit() or
 * disconnect()), so they never keep the process alive after it.
 */
class Waits {
  constructor(client) {
    this.client = client;
    this.idle = new Map(); // address -> connections free for the next wait
    this.busy = new Set(); // connections a wait is blocked on
    this.homes = new Map(); // cluster: slot -> the master a MOVED named
    client.on('end', () => this.close());
  }

  _take(address) {
    const free = this.idle.get(address);
    return free && free.length > 0 ? free.pop() : null;
  }

  _keep(address, conn) {
    this.busy.delete(conn);
    if (conn.status === 'end') return;
    const free = this.idle.get(address) || [];
    this.idle.set(address, free);
    if (free.length < IDLE_PER_NODE) free.push(conn);
    else conn.disconnect();
  }

  _drop(conn) {
    this.busy.delete(conn);
    conn.disconnect();
  }

  /** `DQ.WAIT queue ...args` (args holding BLOCK ms), MOVED and ASK followed: the raw reply. */
  wait(queue, args, ms) {
    return this.call('DQ.WAIT', queue, args, ms + GRACE_MS);
  }

  /**
   * `command queue ...args`, a command that blocks, on a connection of its
   * own, MOVED and ASK followed: the raw reply. It fails when no reply came
   * `timeoutMs` after it was sent (0: never), and when `signal` aborts: the
   * connection it is blocked on is closed, which is the only way to end a
   * blocked command early without a second connection for CLIENT UNBLOCK.
   */
  async call(command, queue, args, timeoutMs, signal = null) {
    const slot = keySlot(queue);
    let address = this.client.isCluster ? this.homes.get(slot) || null : null;
    let asking = false;
    for (let i = 0; i < MAX_REDIRECTS; i++) {
      if (signal && signal.aborted) throw abortError(signal);
      let conn;
      try {
        address = await resolve(this.client, queue, address);
        conn = this._take(address) || (await open(this.client, address));
      } catch (e) {
        // The master a MOVED named may be gone (a failover): the next wait asks the slot map.
        this.homes.delete(slot);
        throw e;
      }
      this.busy.add(conn);
      // An abort closes the connection: it is not kept for the next call,
      // even when the reply came just before.
      let aborted = false;
      const abort = () => {
        aborted = true;
        this._drop(conn);
      };
      if (signal) {
        if (signal.aborted) {
          this._keep(address, conn);
          throw abortError(signal);
        }
        signal.addEventListener('abort', abort, { once: true });
      }
      try {
        // ASKING lets the next command into a slot that is moving to this node.
        const [, reply] = await Promise.all([
          asking ? c.send(conn, 'ASKING') : null,
          c.send(conn, command, queue, args, timeoutMs),
        ]);
        if (!aborted) this._keep(address, conn);
        return reply;
      } catch (e) {
        if (aborted) throw abortError(signal);
        const moved = /^(MOVED|ASK) \d+ (\S+)/.exec((e && e.message) || '');
        if (moved) {
          this._keep(address, conn);
          asking = moved[1] === 'ASK';
          if (!asking) this.homes.set(slot, moved[2]);
          address = moved[2];
          continue;
        }
        // A server's refusal leaves the connection as good as it was; a
        // timeout or a broken socket may leave a wait blocked on it.
        if (e instanceof c.DqError) this._keep(address, conn);
        else this._drop(conn);
        throw e;
      } finally {
        if (signal) signal.removeEventListener('abort', abort);
      }
    }
    throw new c.DqError(`${command} on queue '${queue}' was redirected ${MAX_REDIRECTS} times: the cluster is changing; try again`);
  }

  close() {
    for (const conn of this.busy) conn.disconnect();
    for (const free of this.idle.values()) for (const conn of free) conn.disconnect();
    this.busy.clear();
    this.idle.clear();
  }
}

/** Why a call ended by its signal: the signal's reason, or an AbortError. */
function abortError(signal) {
  if (signal.reason instanceof Error) return signal.reason;
  const e = new Error('the call was aborted');
  e.name = 'AbortError';
  return e;
}

const waits = new WeakMap();

/** The client's Waits, made on its first blocking wait. */
function waitsOf(client) {
  let w = waits.get(client);
  if (!w) {
    w = new Waits(client);
    waits.set(client, w);
  }
  return w;
}

module.exports = { resolve, open, waitsOf, GRACE_MS };
