'use strict';
// The Worker: one poller per queue (per shard), each on a connection of its
// own, sharing `concurrency` permits first come, first served; a heartbeat
// TOUCH per running handler; ACK or NACK by the handler's outcome; a stop
// that lets running handlers finish and settles them.

const Redis = require('ioredis');
const c = require('./commands');
const { Queue, ShardedQueue } = require('./queue');
const { keySlot } = require('./shard');

/** A counting semaphore whose waiters are served in arrival order. */
class Permits {
  constructor(n) {
    this.free = n;
    this.waiters = [];
    this.closed = false;
  }

  /** At least one permit (up to `most` when nobody waits), or 0 once closed. */
  acquire(most) {
    if (this.closed) return Promise.resolve(0);
    if (this.free > 0 && this.waiters.length === 0) {
      const n = Math.min(this.free, most);
      this.free -= n;
      return Promise.resolve(n);
    }
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  release(n = 1) {
    for (let i = 0; i < n; i++) {
      const next = this.closed ? undefined : this.waiters.shift();
      if (next) next(1);
      else this.free++;
    }
  }

  close() {
    this.closed = true;
    for (const w of this.waiters.splice(0)) w(0);
  }
}

const SILENT = { info() {}, warn() {}, error: (...a) => console.error(...a) };

class Worker {
  /**
   * @param queues a Queue, a ShardedQueue, or an array of them
   * @param handler async (delivery) => void; throw Permanent or Retry to choose the NACK
   */
  constructor(queues, handler, { concurrency = 1, leaseMs = 30000, blockMs = 1000, handleSignals = false, logger = SILENT, onSettled } = {}) {
    const list = Array.isArray(queues) ? queues : [queues];
    this.parts = list.flatMap((q) => {
      if (q instanceof ShardedQueue) return q.shards;
      if (q instanceof Queue) return [q];
      throw new TypeError('queues must be Queue or ShardedQueue objects');
    });
    if (this.parts.length === 0) throw new TypeError('a worker needs at least one queue');
    if (typeof handler !== 'function') throw new TypeError('handler must be a function');
    this.handler = handler;
    this.concurrency = c.intArg('concurrency', concurrency, 1, 100000);
    this.leaseMs = c.intArg('leaseMs', leaseMs, 3, c.MAX_TIME);
    this.blockMs = c.intArg('blockMs', blockMs, 1, c.MAX_TIME);
    this.handleSignals = Boolean(handleSignals);
    this.logger = logger;
    this.onSettled = onSettled;
    this.permits = new Permits(this.concurrency);
    // A poller takes at most its share of the free permits at once, so one
    // busy queue cannot starve the others.
    this.share = Math.max(1, Math.floor(this.concurrency / this.parts.length));
    this.stopping = false;
    this.running = new Set();
    this.started = false;
  }

  /** Runs until stop(); resolves when every delivery taken was settled. */
  async run() {
    if (this.started) throw new Error('a worker runs once');
    this.started = true;
    const onSignal = () => this.stop();
    if (this.handleSignals) {
      process.once('SIGTERM', onSignal);
      process.once('SIGINT', onSignal);
    }
    try {
      await Promise.all(this.parts.map((part) => this._poll(part)));
      while (this.running.size > 0) await Promise.allSettled([...this.running]);
    } finally {
      if (this.handleSignals) {
        process.removeListener('SIGTERM', onSignal);
        process.removeListener('SIGINT', onSignal);
      }
    }
  }

  /** Takes no new message; run() resolves once the running handlers are settled. */
  stop() {
    this.stopping = true;
    this.permits.close();
  }

  /** A connection of the poller's own: a blocked POP serves nobody else. */
  async _connect(part, address) {
    const client = part.client;
    if (!client.isCluster) return client.duplicate();
    if (!address) {
      await client.ping(); // the slot map is known once the cluster is ready
      const owners = client.slots[keySlot(part.name)];
      address = owners && owners[0];
    }
    const [host, port] = address ? [address.slice(0, address.lastIndexOf(':')), Number(address.slice(address.lastIndexOf(':') + 1))] : [];
    return new Redis({ ...client.options.redisOptions, host, port, maxRetriesPerRequest: null });
  }

  async _pop(conn, part, count, blockMs) {
    const a = ['COUNT', count];
    if (blockMs != null) a.push('BLOCK', blockMs);
    a.push('LEASE', this.leaseMs);
    const reply = await c.send(conn, 'DQ.POP', part.name, a);
    return (reply || []).map((e) => c.delivery(e, part.name));
  }

  async _poll(part) {
    let conn = null;
    let address = null;
    let pause = 100;
    try {
      while (!this.stopping) {
        let n = await this.permits.acquire(this.share);
        if (n === 0) break;
        if (this.stopping) {
          this.permits.release(n);
          break;
        }
        let batch;
        try {
          conn = conn || (await this._connect(part, address));
          // What is ready now, up to this poller's permits.
          batch = await this._pop(conn, part, n);
          if (batch.length === 0 && !this.stopping) {
            // Nothing ready: give the permits back (another queue may have
            // work) and wait for one message holding none; it then waits
            // for a permit, its lease kept alive by the heartbeat.
            this.permits.release(n);
            n = 0;
            batch = await this._pop(conn, part, 1, this.blockMs);
          }
        } catch (e) {
          this.permits.release(n);
          const moved = /^(MOVED|ASK) \d+ (\S+)/.exec((e && e.message) || '');
          if (moved) address = moved[2];
          else this.logger.warn(`dq: POP from ${part.name} failed: ${e.message}; retrying in ${pause} ms`);
          if (conn) conn.disconnect();
          conn = null;
          if (!moved || moved[1] === 'ASK') {
            await new Promise((r) => setTimeout(r, pause));
            pause = Math.min(pause * 2, 5000);
          }
          continue;
        }
        pause = 100;
        if (batch.length < n) this.permits.release(n - batch.length);
        // Deliveries taken after a stop request are handled all the same.
        batch.forEach((d, i) => {
          const p = this._handle(part, d, i < n);
          this.running.add(p);
          p.finally(() => this.running.delete(p));
        });
      }
    } finally {
      if (conn) conn.disconnect();
    }
  }

  async _handle(part, d, permitted) {
    const abort = new AbortController();
    d.signal = abort.signal;
    const heartbeat = setInterval(async () => {
      try {
        await part.touch(d.id, { leaseMs: this.leaseMs, attempt: d.attempt });
      } catch (e) {
        if (e instanceof c.StaleDelivery) {
          d.lost = true;
          abort.abort();
          clearInterval(heartbeat);
          this.logger.warn(`dq: lost the lease of ${d.id} attempt ${d.attempt} in ${d.queue}`);
        } else {
          this.logger.warn(`dq: TOUCH ${d.id} in ${d.queue} failed: ${e.message}`);
        }
      }
    }, Math.max(1, Math.floor(this.leaseMs / 3)));
    try {
      // Taken by a blocking POP without a permit: wait for one (0 once
      // stopping: leased to us, it is handled all the same).
      if (!permitted) permitted = (await this.permits.acquire(1)) > 0;
      let failure = null;
      try {
        await this.handler(d);
      } catch (e) {
        failure = e;
      } finally {
        clearInterval(heartbeat);
      }
      const outcome = await this._settle(part, d, failure);
      if (this.onSettled) {
        try {
          await this.onSettled(d, outcome);
        } catch (e) {
          this.logger.error(`dq: onSettled threw: ${e.message}`);
        }
      }
    } finally {
      clearInterval(heartbeat);
      if (permitted) this.permits.release(1);
    }
  }

  /** ACK, or the NACK the failure asks for; returns { action, state, error }. */
  async _settle(part, d, failure) {
    let action = 'ack';
    let options = { attempt: d.attempt };
    if (failure instanceof c.Permanent) {
      action = 'dead';
      options = { ...options, dead: true, error: failure.message };
    } else if (failure instanceof c.Retry) {
      action = 'retry';
      options = { ...options, delayMs: failure.delayMs ?? undefined, error: failure.message === 'retry' ? undefined : failure.message };
    } else if (failure) {
      action = 'retry';
      options = { ...options, error: `${(failure && failure.name) || 'Error'}: ${(failure && failure.message) || failure}` };
      this.logger.warn(`dq: handler failed on ${d.id} attempt ${d.attempt} in ${d.queue}: ${options.error}`);
    }
    if (d.lost) return { action, state: null, error: options.error ?? null };
    try {
      if (action === 'ack') {
        const n = await part.ack(d.id);
        return { action, state: n > 0 ? 'acked' : 'acked-late', error: null };
      }
      return { action, state: await part.nack(d.id, options), error: options.error ?? null };
    } catch (e) {
      if (e instanceof c.StaleDelivery) this.logger.warn(`dq: ${e.message}`);
      else this.logger.error(`dq: settling ${d.id} attempt ${d.attempt} in ${d.queue} failed: ${e.message}`);
      return { action, state: null, error: options.error ?? null, failure: e };
    }
  }
}

module.exports = { Worker, Permits };
