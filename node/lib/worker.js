'use strict';
// The Worker: one poller per queue (per shard), each on a connection of its
// own, sharing `concurrency` permits first come, first served — or, for
// several queues one DQ.MPOP can serve, one poller over all of them in
// their order; a heartbeat TOUCH per running handler, which also learns
// that a message was cancelled under it; the ends of the deliveries that
// finished since the last round trip in one DQ.ACK per queue (one DQ.DONE
// for those whose handler returned a result), a NACK per failure; a stop
// that lets running handlers finish and settles them.

const c = require('./commands');
const blocking = require('./blocking');
const { Queue, ShardedQueue } = require('./queue');
const { keySlot } = require('./shard');

/** Resolves after the deliveries that finished in this turn of the event loop were counted. */
const nextTurn = () => new Promise((resolve) => setImmediate(resolve));

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

  /** Up to `most` free permits without waiting (none while others wait). */
  tryAcquire(most) {
    if (this.closed || this.waiters.length > 0) return 0;
    const n = Math.min(this.free, most);
    this.free -= n;
    return n;
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

/**
 * One queue's ends of work: the deliveries that finished while the last
 * command was on its way go out together in the next, sent the moment the
 * previous one is answered (or at the end of the current turn of the event
 * loop when none is on its way), never held back by a timer. The plain
 * ends go in one DQ.ACK, those with a result in one DQ.DONE of id result
 * pairs, both at once when a batch holds both: a plain end keeps no result
 * rather than an empty one.
 */
class Acker {
  constructor(part, logger) {
    this.part = part;
    this.logger = logger;
    this.pending = [];
    this.busy = false;
  }

  /**
   * Queues `d`'s end, with its `result` (undefined: none); `done(state,
   * failure)` is told 'acked', 'acked-late' or 'unsettled'.
   */
  add(d, result, done) {
    this.pending.push({ d, result, done });
    if (!this.busy) {
      this.busy = true;
      setImmediate(() => this._flush());
    }
  }

  async _flush() {
    while (this.pending.length > 0) {
      const batch = this.pending;
      this.pending = [];
      const dones = batch.filter((p) => p.result !== undefined);
      // Handlers that returned nothing: the batch is one DQ.ACK, as before results existed.
      if (dones.length === 0) await this._send(batch, 'DQ.ACK');
      else await Promise.all([this._send(batch.filter((p) => p.result === undefined), 'DQ.ACK'), this._send(dones, 'DQ.DONE')]);
    }
    this.busy = false;
  }

  async _send(batch, command) {
    if (batch.length === 0) return;
    const args = [];
    for (const p of batch) {
      args.push(p.d.id);
      if (command === 'DQ.DONE') args.push(p.result);
    }
    let state;
    let failure;
    try {
      const n = Number(await c.send(this.part.client, command, this.part.name, args));
      // A count short of the batch: some message of it was no longer in
      // flight (its lease ran out, or it was cancelled); which one the
      // reply does not say, so each of the batch is told 'acked-late'.
      state = n === batch.length ? 'acked' : 'acked-late';
      if (state === 'acked-late') this.logger.warn(`dq: ${command} of ${batch.length} id(s) in ${this.part.name} counted ${n}: the rest were no longer in flight`);
    } catch (e) {
      this.logger.error(`dq: ${command} of ${batch.length} id(s) in ${this.part.name} failed: ${e.message}; they come back after their lease`);
      state = 'unsettled';
      failure = e;
    }
    for (const p of batch) p.done(state, failure);
  }
}

/**
 * What a handler's return value makes of a delivery that succeeded: its
 * result (a string or a Buffer, sent with DQ.DONE), or undefined for a
 * plain DQ.ACK — undefined or null returned, and any other value, which
 * cannot be a result: a handler written before results existed may return
 * one by accident (`async (d) => fetch(url)`), and its work is done all the
 * same (`onWrongType` says so). A result over the server's limit makes a
 * Permanent error: the server would refuse the whole DQ.DONE of the batch.
 */
function resultOf(value, onWrongType) {
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'string' && !Buffer.isBuffer(value)) {
    onWrongType(typeof value === 'object' ? (value.constructor && value.constructor.name) || 'an object' : `a ${typeof value}`);
    return undefined;
  }
  try {
    return c.valueArg('result', value, c.MAX_RESULT_BYTES);
  } catch (e) {
    return new c.Permanent(`the handler's ${e.message}`);
  }
}

const SILENT = { info() {}, warn() {}, error: (...a) => console.error(...a) };

/**
 * Whether one DQ.MPOP can serve all of `list`: plain queues (a ShardedQueue
 * spreads over slots by design) of one client, on a standalone server or
 * all in one hash slot of a cluster.
 */
function oneMpop(list) {
  if (list.length < 2 || !list.every((q) => q instanceof Queue && q.client === list[0].client)) return false;
  if (!list[0].client.isCluster) return true;
  const slot = keySlot(list[0].name);
  return list.every((q) => keySlot(q.name) === slot);
}

class Worker {
  /**
   * @param queues a Queue, a ShardedQueue, or an array of them
   * @param handler async (delivery) => result; a string or a Buffer is kept
   *   as the result (DQ.DONE), undefined is a plain DQ.ACK; throw Permanent
   *   or Retry to choose the NACK
   */
  constructor(queues, handler, { concurrency = 1, leaseMs = 30000, blockMs = 1000, handleSignals = false, logger = SILENT, onSettled } = {}) {
    const list = Array.isArray(queues) ? queues : [queues];
    this.parts = list.flatMap((q) => {
      if (q instanceof ShardedQueue) return q.shards;
      if (q instanceof Queue) return [q];
      throw new TypeError('queues must be Queue or ShardedQueue objects');
    });
    if (this.parts.length === 0) throw new TypeError('a worker needs at least one queue');
    const seen = new Map();
    for (const part of this.parts) {
      if (seen.get(part.name) === part.client) throw new TypeError(`queue '${part.name}' is given twice`);
      seen.set(part.name, part.client);
    }
    // A poller: the queues one POP (or MPOP) takes from, in their order.
    this.pollers = oneMpop(list) ? [{ parts: this.parts, byName: new Map(this.parts.map((p) => [p.name, p])) }] : this.parts.map((p) => ({ parts: [p], byName: null }));
    if (typeof handler !== 'function') throw new TypeError('handler must be a function');
    this.handler = handler;
    this.concurrency = c.intArg('concurrency', concurrency, 1, 100000);
    this.leaseMs = c.durationArg('leaseMs', leaseMs, 3); // a number of ms, or '30s'
    this.blockMs = c.durationArg('blockMs', blockMs, 1);
    this.handleSignals = Boolean(handleSignals);
    this.logger = logger;
    this.onSettled = onSettled;
    this.permits = new Permits(this.concurrency);
    // A poller takes at most its share of the free permits at once, so one
    // busy queue cannot starve the others.
    this.share = Math.max(1, Math.floor(this.concurrency / this.pollers.length));
    this.stopping = false;
    this.active = 0; // deliveries taken and not yet settled
    this.drained = null;
    this.started = false;
    this.ackers = new Map(this.parts.map((part) => [part, new Acker(part, this.logger)]));
    // The running deliveries the heartbeat renews: delivery -> { part, due, touching }.
    this.beating = new Map();
    // Deliveries a TOUCH found over, while the worker asks why: delivery ->
    // a promise that resolves once it is marked lost or cancelled.
    this.asking = new Map();
    this.touchEvery = Math.max(1, Math.floor(this.leaseMs / 3));
    // Told once: a handler that returns what cannot be a result.
    this.toldWrongType = false;
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
    // One timer for every running delivery's heartbeat, checked four times
    // per renewal period: a lease is renewed between a third of it and
    // five twelfths of it after the last renewal.
    const beat = setInterval(() => this._beat(), Math.max(1, Math.floor(this.touchEvery / 4)));
    if (this.pollers.length === 1 && this.pollers[0].parts.length > 1) {
      this.logger.info(`dq: one DQ.MPOP over ${this.parts.map((p) => p.name).join(', ')}, in that order`);
    }
    try {
      await Promise.all(this.pollers.map((poller) => this._poll(poller)));
      while (this.active > 0) await new Promise((resolve) => (this.drained = resolve));
    } finally {
      clearInterval(beat);
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

  /**
   * A connection of the poller's own: a blocked POP serves nobody else (a
   * POP that fails is logged by the poller).
   */
  async _connect(part, address) {
    return blocking.open(part.client, await blocking.resolve(part.client, part.name, address));
  }

  /** DQ.POP of the poller's queue, or DQ.MPOP of its queues: the deliveries (all of one queue). */
  async _pop(conn, poller, count, blockMs) {
    // One POP takes at most 10000 (the server's COUNT limit); permits it
    // did not fill go back, as when fewer are ready.
    const options = { count: Math.min(count, 10000), blockMs, leaseMs: this.leaseMs };
    if (poller.byName === null) {
      const name = poller.parts[0].name;
      return c.deliveries(await c.send(conn, 'DQ.POP', name, c.popArgs(options)), name);
    }
    const names = poller.parts.map((p) => p.name);
    return c.mpopReply(await c.send(conn, 'DQ.MPOP', undefined, c.mpopArgs(names, options))).deliveries;
  }

  async _poll(poller) {
    const part = poller.parts[0]; // where a poller over several queues connects: they share a slot
    const names = poller.parts.map((p) => p.name).join(', ');
    let conn = null;
    let address = null;
    let pause = 100;
    try {
      while (!this.stopping) {
        let n = await this.permits.acquire(this.share);
        if (n === 0) break;
        if (n < this.share) {
          // Handlers that finish in this same turn free their permits too:
          // one POP asks for all of them.
          await nextTurn();
          n += this.permits.tryAcquire(this.share - n);
        }
        if (this.stopping) {
          this.permits.release(n);
          break;
        }
        let batch;
        try {
          conn = conn || (await this._connect(part, address));
          // What is ready now, up to this poller's permits.
          batch = await this._pop(conn, poller, n);
          if (batch.length === 0 && !this.stopping) {
            // Nothing ready. The only poller keeps its permits and waits
            // for as many messages: a burst that falls due comes in one
            // reply. Among several, it gives them back (another queue may
            // have work) and waits for one message holding none; that one
            // then waits for a permit, its lease kept alive by the heartbeat.
            if (this.pollers.length > 1) {
              this.permits.release(n);
              n = 0;
            }
            batch = await this._pop(conn, poller, Math.max(n, 1), this.blockMs);
          }
        } catch (e) {
          this.permits.release(n);
          const moved = /^(MOVED|ASK) \d+ (\S+)/.exec((e && e.message) || '');
          if (moved) address = moved[2];
          else this.logger.warn(`dq: POP from ${names} failed: ${e.message}; retrying in ${pause} ms`);
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
        if (batch.length === 0) continue;
        const from = poller.byName === null ? part : poller.byName.get(batch[0].queue);
        if (from === undefined) {
          // Not one of the queues asked for: nothing this worker can settle.
          this.logger.error(`dq: DQ.MPOP replied queue ${batch[0].queue}, not one of ${names}; its ${batch.length} message(s) come back after their lease`);
          continue;
        }
        // Deliveries taken after a stop request are handled all the same.
        for (let i = 0; i < batch.length; i++) this._handle(from, batch[i], i < n);
      }
    } finally {
      if (conn) conn.disconnect();
    }
  }

  /** The heartbeat: TOUCHes each running delivery a third of a lease after its last renewal. */
  _beat() {
    const now = Date.now();
    for (const [d, b] of this.beating) {
      if (b.touching || now < b.due) continue;
      b.touching = true;
      b.part.touch(d.id, { leaseMs: this.leaseMs, attempt: d.attempt }).then(
        () => {
          b.due = Date.now() + this.touchEvery;
        },
        (e) => {
          if (e instanceof c.StaleDelivery) {
            if (!this.beating.delete(d)) return; // settled meanwhile: its own ACK or NACK ended it
            const asked = this._whyOver(b.part, d);
            this.asking.set(d, asked);
            asked.then(() => this.asking.delete(d));
          } else {
            this.logger.warn(`dq: TOUCH ${d.id} in ${d.queue} failed: ${e.message}`);
          }
        },
      ).finally(() => {
        b.touching = false;
      });
    }
  }

  /**
   * A delivery a fenced TOUCH found over: if the message is gone, it was
   * cancelled or purged (or, after a lost lease, finished by another
   * consumer): 'cancelled'; if it is still there, the lease ran out and
   * someone else may hold it: 'lost'. Then the handler is told (signal).
   */
  async _whyOver(part, d) {
    let reason = 'lost';
    try {
      if ((await part.get(d.id)) === null) reason = 'cancelled';
    } catch (e) {
      this.logger.warn(`dq: DQ.GET ${d.id} in ${d.queue} failed: ${e.message}; taking the delivery as lost`);
    }
    d._lose(reason);
    if (reason === 'cancelled') this.logger.warn(`dq: ${d.id} in ${d.queue} was cancelled while attempt ${d.attempt} ran`);
    else this.logger.warn(`dq: lost the lease of ${d.id} attempt ${d.attempt} in ${d.queue}`);
  }

  /**
   * Runs the handler on `d`, then settles it. Kept free of promises of its
   * own on the way of a handler that succeeds: at tens of thousands of
   * deliveries a second, each allocation shows.
   */
  _handle(part, d, permitted) {
    this.active++;
    // Its progress goes on the shared connection (the poller's blocks in
    // POP), renewing the lease by the worker's own.
    d._reporting(part.client, this.leaseMs);
    this.beating.set(d, { part, due: Date.now() + this.touchEvery, touching: false });
    if (!permitted) {
      // Taken by a blocking POP without a permit: wait for one (0 once
      // stopping: leased to us, it is handled all the same).
      this.permits.acquire(1).then((got) => this._run(part, d, got > 0));
    } else {
      this._run(part, d, true);
    }
  }

  _run(part, d, permitted) {
    let returned;
    try {
      returned = this.handler(d);
    } catch (e) {
      this._done(part, d, permitted, true, e);
      return;
    }
    if (returned && typeof returned.then === 'function') {
      returned.then(
        (value) => this._succeeded(part, d, permitted, value),
        (e) => this._done(part, d, permitted, true, e),
      );
    } else {
      this._succeeded(part, d, permitted, returned);
    }
  }

  _succeeded(part, d, permitted, value) {
    const result = resultOf(value, this._wrongType);
    if (result instanceof Error) this._done(part, d, permitted, true, result);
    else this._done(part, d, permitted, false, null, result);
  }

  /** Says once that a handler's return value was no result (logger.error: printed by default). */
  _wrongType = (what) => {
    if (this.toldWrongType) return;
    this.toldWrongType = true;
    this.logger.error(`dq: a handler returned ${what}, which is no result: its messages are acknowledged without one (return a string or a Buffer to keep a result, JSON.stringify an object; undefined for none). Said once per worker.`);
  };

  /** `result`: what a handler that succeeded returned (undefined: none). */
  _done(part, d, permitted, failed, failure, result) {
    this.beating.delete(d);
    // The handler is done: its permit goes to the next POP while the ACK
    // or NACK is on its way.
    if (permitted) this.permits.release(1);
    if (this.asking.size > 0 && this.asking.has(d)) {
      // Settled once the worker knows whether it was cancelled (then
      // nothing is sent) or lost.
      this.asking.get(d).then(() => this._settle(part, d, failed, failure, result)).then((outcome) => this._settled(d, outcome));
      return;
    }
    if (!failed && !d.lost) {
      const action = result === undefined ? 'ack' : 'done';
      this.ackers.get(part).add(d, result, (state, e) => this._settled(d, e ? { action, state, error: null, failure: e } : { action, state, error: null }));
      return;
    }
    this._settle(part, d, failed, failure, result).then((outcome) => this._settled(d, outcome));
  }

  _settled(d, outcome) {
    const finish = () => {
      if (--this.active === 0 && this.drained) {
        this.drained();
        this.drained = null;
      }
    };
    if (!this.onSettled) return finish();
    let r;
    try {
      r = this.onSettled(d, outcome);
    } catch (e) {
      this.logger.error(`dq: onSettled threw: ${e.message}`);
      return finish();
    }
    if (r && typeof r.then === 'function') {
      r.then(finish, (e) => {
        this.logger.error(`dq: onSettled threw: ${e && e.message}`);
        finish();
      });
    } else {
      finish();
    }
  }

  /**
   * ACK or DONE (batched per queue), or the NACK the failure asks for;
   * returns { action, state, error[, failure] }. action: 'ack', 'done',
   * 'nack' or 'dead' (what the handler asked for); state: 'acked', 'acked-late', the NACK's
   * new state ('delayed', 'ready', 'dead'), 'stale' (the delivery was over:
   * nothing changed), 'cancelled' (the message was cancelled or purged
   * while the handler ran: nothing is sent) or 'unsettled' (the call
   * failed; `failure` says why).
   */
  async _settle(part, d, failed, failure, result) {
    let action = failed || result === undefined ? 'ack' : 'done';
    let options = { attempt: d.attempt };
    if (failed && failure instanceof c.Permanent) {
      action = 'dead';
      options = { ...options, dead: true, error: failure.message };
    } else if (failed && failure instanceof c.Retry) {
      action = 'nack';
      options = { ...options, delayMs: failure.delayMs ?? undefined, error: failure.message === 'retry' ? undefined : failure.message };
    } else if (failed) {
      action = 'nack';
      options = { ...options, error: `${(failure && failure.name) || 'Error'}: ${(failure && failure.message) || failure}` };
      if (!d.cancelled) this.logger.warn(`dq: handler failed on ${d.id} attempt ${d.attempt} in ${d.queue}: ${options.error}`);
    }
    const error = options.error ?? null;
    if (d.cancelled) return { action, state: 'cancelled', error };
    try {
      // ACK and DONE are not fenced: a late one is proof the work was
      // done. A delivery known to be lost goes alone, so its count is its own.
      if (action === 'ack') return { action, state: (await part.ack(d.id)) > 0 ? 'acked' : 'acked-late', error };
      if (action === 'done') return { action, state: (await part.done([[d.id, result]])) > 0 ? 'acked' : 'acked-late', error };
      // The lease was lost: another consumer may hold the message now.
      if (d.lost) return { action, state: 'stale', error };
      return { action, state: await part.nack(d.id, options), error };
    } catch (e) {
      if (e instanceof c.StaleDelivery) {
        this.logger.warn(`dq: ${e.message}`);
        return { action, state: 'stale', error };
      }
      this.logger.error(`dq: settling ${d.id} attempt ${d.attempt} in ${d.queue} failed: ${e.message}`);
      return { action, state: 'unsettled', error, failure: e };
    }
  }
}

module.exports = { Worker, Permits, Acker, resultOf };
