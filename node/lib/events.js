'use strict';
// Reading a queue's event log (DQ.EVENTS, docs/semantics.md "Events"): an
// async iterator that re-blocks on a connection of its own (blocking.js, as
// Queue.wait), one merged over the shards of a ShardedQueue, and an
// EventEmitter over either for code written against BullMQ's QueueEvents.
// Nothing is skipped silently: a trimmed seq is EventGapError, a log that
// started again is EventLogRestarted, and the emitter goes past either only
// for a listener that asked to be told.

const { EventEmitter } = require('node:events');
const c = require('./commands');
const blocking = require('./blocking');

/** How long one DQ.EVENTS waits before the reader asks again (and finds out that a silent server is gone). */
const DEFAULT_BLOCK_MS = 10000;

const READ_OPTIONS = ['after', 'count', 'blockMs', 'signal'];

/**
 * A reader's options checked before anything is sent: `after` (a seq, or
 * for a sharded queue an object of seqs by shard name), `count` (events per
 * DQ.EVENTS), `blockMs` (how long each read waits; 0 = for ever) and
 * `signal` (an AbortSignal that closes the reader).
 */
function readOptions(o, what, shardNames = null, allowed = READ_OPTIONS) {
  if (o === null || typeof o !== 'object') throw new TypeError(`${what} takes { ${allowed.join(', ')} } or nothing`);
  for (const k of Object.keys(o)) if (!allowed.includes(k)) throw new TypeError(`unknown ${what} option '${k}' (${allowed.join(', ')})`);
  const out = {
    after: null,
    count: o.count == null ? null : c.intArg('count', o.count, 1, 10000),
    blockMs: o.blockMs == null ? DEFAULT_BLOCK_MS : c.durationArg('blockMs', o.blockMs, 0),
    signal: null,
  };
  if (o.signal != null) {
    if (typeof o.signal.aborted !== 'boolean' || typeof o.signal.addEventListener !== 'function') throw new TypeError('signal must be an AbortSignal');
    out.signal = o.signal;
  }
  if (shardNames === null) {
    if (o.after != null) out.after = c.intArg('after', o.after, 0, Number.MAX_SAFE_INTEGER);
    return out;
  }
  out.after = {};
  if (o.after == null) return out;
  if (typeof o.after !== 'object' || Array.isArray(o.after)) {
    throw new TypeError(`after of a sharded queue is an object of seqs by shard name, such as ${JSON.stringify({ [shardNames[0]]: 12 })} (the position a reader gives)`);
  }
  for (const [k, v] of Object.entries(o.after)) {
    if (!shardNames.includes(k)) throw new RangeError(`'${k}' in after is not a shard of this queue (its shards: ${shardNames.join(', ')})`);
    if (v != null) out.after[k] = c.intArg(`after['${k}']`, v, 0, Number.MAX_SAFE_INTEGER);
  }
  return out;
}

/**
 * Calls `close` when `signal` aborts (at once if it has): a function that
 * stops listening, so a long-lived signal does not keep every reader it
 * ever closed.
 */
function follow(signal, close) {
  if (!signal) return () => {};
  if (signal.aborted) {
    queueMicrotask(close);
    return () => {};
  }
  signal.addEventListener('abort', close, { once: true });
  return () => signal.removeEventListener('abort', close);
}

/**
 * One `[seq, at, type, id, attempt, detail]` as an event: id a string
 * (null for the queue-wide purged, paused, resumed), attempt a number or
 * null, detail a string (the reason, or how many were purged) except for
 * `progress`, whose detail is the Buffer the handler reported, as
 * Message.progress is.
 */
function event(e) {
  const type = c.str(e[2]);
  let detail = null;
  if (e[5] != null) detail = type === 'progress' ? (Buffer.isBuffer(e[5]) ? e[5] : Buffer.from(String(e[5]))) : c.str(e[5]);
  return {
    seq: Number(e[0]),
    at: Number(e[1]),
    type,
    id: e[3] == null ? null : c.str(e[3]),
    attempt: e[4] == null ? null : Number(e[4]),
    detail,
  };
}

/**
 * An async iterator over one queue's events, oldest first, for ever: each
 * DQ.EVENTS ... BLOCK waits on a connection of its own and the next one is
 * sent as soon as the events read are taken. `position` is the seq of the
 * last event it gave (null before the first, unless `after` set it): keep
 * it, and a reader made with `after: position` goes on with the next one.
 * It ends when closed (close(), `break` in for await, the signal); it
 * throws EventGapError when `after` is older than the queue keeps and
 * EventLogRestarted when the queue's last seq fell below it.
 */
class EventReader {
  constructor(queue, options, shard = null) {
    this.queue = queue;
    this.shard = shard;
    this.position = options.after;
    this._args = options.count == null ? [] : ['COUNT', options.count];
    this._blockMs = options.blockMs;
    this._buffer = [];
    this._ended = new AbortController();
    this._unlink = follow(options.signal, () => this.close());
  }

  [Symbol.asyncIterator]() {
    return this;
  }

  get closed() {
    return this._ended.signal.aborted;
  }

  async next() {
    for (;;) {
      if (this.closed) return { value: undefined, done: true };
      if (this._buffer.length > 0) {
        const value = this._buffer.shift();
        this.position = value.seq;
        return { value, done: false };
      }
      let reply;
      try {
        reply = await this._read();
      } catch (e) {
        // Closed by its caller, or by the caller closing the client (quit(), disconnect()).
        if (this.closed || this.queue.client.status === 'end') {
          this.close();
          return { value: undefined, done: true };
        }
        throw this._fail(e);
      }
      // The BLOCK ran out with nothing new: wait again.
      if (reply == null) continue;
      const last = Number(reply[0]);
      if (reply[1].length > 0) {
        this._buffer = reply[1].map(event);
        continue;
      }
      // A blocked read answers with no event only when the last seq is no
      // longer the one it waited after: the log it followed is gone.
      if (this.position === null) {
        this.position = 0;
        continue;
      }
      if (last < this.position) throw this._fail(new c.EventLogRestarted(this.queue.name, this.position, last, this.shard));
      throw this._fail(new c.DqError(`DQ.EVENTS on queue '${this.queue.name}' replied no event after ${this.position} though its last seq is ${last}`));
    }
  }

  _read() {
    const args = this.position === null ? [] : ['AFTER', this.position];
    args.push(...this._args, 'BLOCK', this._blockMs);
    const timeoutMs = this._blockMs === 0 ? 0 : this._blockMs + blocking.GRACE_MS;
    return blocking.waitsOf(this.queue.client).call('DQ.EVENTS', this.queue.name, args, timeoutMs, this._ended.signal);
  }

  /** A failure ends the reader; a GAP says which queue and seq it was about. */
  _fail(e) {
    if (e instanceof c.EventGapError) {
      e.queue = this.queue.name;
      e.after = this.position;
      e.shard = this.shard;
    }
    this.close();
    return e;
  }

  /** Ends the reader: a blocked read ends now (its connection is closed), and the iterator is done. */
  close() {
    this._unlink();
    this._ended.abort();
  }

  async return() {
    this.close();
    return { value: undefined, done: true };
  }
}

/**
 * The events of every shard of a ShardedQueue: one EventReader per shard,
 * each blocked on a connection of its own, merged as they come. Each event
 * carries `shard` (the shard's queue name) and that shard's own seq; a
 * shard's events come in their order, the shards' interleaved as they are
 * read (seqs of different shards do not compare). `position` is an object
 * of the last seq given by shard name, the `after` that goes on from here.
 * A failure of one shard (EventGapError, EventLogRestarted, with `shard`)
 * closes them all and is thrown.
 */
class MergedEventReader {
  constructor(sharded, options) {
    this._position = { ...options.after };
    this._readers = sharded.shards.map((q, i) => {
      const name = sharded.shardNames[i];
      return new EventReader(q, { ...options, after: options.after[name] ?? null, signal: null }, name);
    });
    this._pending = new Map();
    this._closed = false;
    this._unlink = follow(options.signal, () => this.close());
  }

  [Symbol.asyncIterator]() {
    return this;
  }

  get closed() {
    return this._closed;
  }

  /** The last seq given of each shard (shards not read from yet: as `after` said, or absent). */
  get position() {
    return { ...this._position };
  }

  async next() {
    if (this._closed) return { value: undefined, done: true };
    for (const r of this._readers) {
      if (!this._pending.has(r)) this._pending.set(r, r.next().then((res) => ({ r, res }), (err) => ({ r, err })));
    }
    const { r, res, err } = await Promise.race(this._pending.values());
    this._pending.delete(r);
    if (err) {
      this.close();
      throw err;
    }
    // A shard's reader ends only when closed, which closes the whole.
    if (res.done || this._closed) {
      this.close();
      return { value: undefined, done: true };
    }
    this._position[r.shard] = res.value.seq;
    return { value: { ...res.value, shard: r.shard }, done: false };
  }

  close() {
    this._unlink();
    this._closed = true;
    for (const r of this._readers) r.close();
  }

  async return() {
    this.close();
    return { value: undefined, done: true };
  }
}

/**
 * BullMQ's QueueEvents for dq: an EventEmitter that emits each event under
 * its type ('added', 'delivered', 'done', 'retry', 'dead', 'progress', ...)
 * and under 'event', following the queue (every shard of a ShardedQueue)
 * from `after` until close(). A trimmed seq emits 'gap' (the
 * EventGapError) and goes on from the oldest kept; a restarted log emits
 * 'restart' (the EventLogRestarted) and goes on from its start; with no
 * listener for either, it is an 'error' instead, as any other failure (a
 * lost server, a listener that threw): the emitter stops and emits 'close'.
 * `position` says where it is (a seq, or an object by shard name).
 */
class QueueEventsListener extends EventEmitter {
  constructor(source, options) {
    super();
    this._sharded = Array.isArray(source.shardNames);
    const o = readOptions(options, 'listen', this._sharded ? source.shardNames : null, ['after', 'count', 'blockMs']);
    this._position = o.after;
    this._readers = new Set();
    this._closed = false;
    const follows = this._sharded
      ? source.shards.map((q, i) => this._follow(q, source.shardNames[i], o))
      : [this._follow(source, null, o)];
    this._done = Promise.all(follows).then(() => {
      this.emit('close');
    });
  }

  /** The seq of the last event emitted (null before any), or for a sharded queue an object of them by shard name. */
  get position() {
    return this._sharded ? { ...this._position } : this._position;
  }

  async _follow(queue, shard, options) {
    let after = shard === null ? this._position : this._position[shard] ?? null;
    while (!this._closed) {
      const reader = new EventReader(queue, { ...options, after }, shard);
      this._readers.add(reader);
      try {
        for await (const e of reader) {
          const value = shard === null ? e : { ...e, shard };
          if (shard === null) this._position = e.seq;
          else this._position[shard] = e.seq;
          this.emit(e.type, value);
          this.emit('event', value);
        }
        return;
      } catch (err) {
        if (this._closed) return;
        if (err instanceof c.EventGapError && this.listenerCount('gap') > 0) {
          this.emit('gap', err);
          after = err.oldest - 1;
          continue;
        }
        if (err instanceof c.EventLogRestarted && this.listenerCount('restart') > 0) {
          this.emit('restart', err);
          after = 0;
          continue;
        }
        this.close();
        this.emit('error', err);
        return;
      } finally {
        this._readers.delete(reader);
      }
    }
  }

  /** Stops: a blocked read ends now. Resolves once every read has ended and 'close' was emitted. */
  close() {
    this._closed = true;
    for (const r of this._readers) r.close();
    return this._done;
  }
}

module.exports = { EventReader, MergedEventReader, QueueEventsListener, readOptions, event, DEFAULT_BLOCK_MS };
