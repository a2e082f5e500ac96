'use strict';
// The DQ.* grammar in one place: argument checks and lists, reply parsing,
// error mapping, and how a command is sent (routed by its queue's slot on a
// cluster, so no command takes a MOVED detour).

const { keySlot } = require('./shard');

const MAX_ERROR_BYTES = 4096;
const MAX_TIME = 2 ** 53 - 1;
/** The longest result DQ.DONE keeps: the server's payload limit (512 MiB). */
const MAX_RESULT_BYTES = 512 * 1024 * 1024;
/** The longest PROGRESS value DQ.TOUCH takes (64 KiB). */
const MAX_PROGRESS_BYTES = 65536;
const STATES = ['DELAYED', 'READY', 'INFLIGHT', 'DEAD', 'DONE'];

class DqError extends Error {
  constructor(message) {
    super(message);
    this.name = this.constructor.name;
  }
}
/** STALE: the delivery a fenced NACK or TOUCH names is over. */
class StaleDelivery extends DqError {}
/** NACK or TOUCH without ATTEMPT found the id not in flight. */
class UnknownMessage extends DqError {}
/** WRONGTYPE: the key under the queue's name is not a dq queue. */
class WrongType extends DqError {}
/** OOM, or the eviction guard's refusal of DQ.ADD. */
class OutOfMemory extends DqError {}
/**
 * GAP: a reader asked for events after a seq the queue no longer keeps (the
 * log keeps its last n, DQ.CONFIG SET EVENTS). `oldest` is the oldest seq
 * still kept: reading on after `oldest - 1` skips what was trimmed, knowingly.
 * An event reader sets `queue` and `after` (and `shard` on a sharded queue).
 */
class EventGapError extends DqError {
  constructor(message, oldest) {
    super(message);
    this.oldest = oldest;
    this.queue = null;
    this.after = null;
    this.shard = null;
  }
}
/**
 * The queue's last seq is below the seq a reader follows from: the log it
 * followed is gone (the queue was deleted and made again, or replaced by
 * RESTORE), and the new one numbers from 1 again. Read on after 0 for every
 * event of the new log. `lastSeq`: the new log's last seq.
 */
class EventLogRestarted extends DqError {
  constructor(queue, after, lastSeq, shard = null) {
    super(`the event log of queue '${queue}' restarted: its last seq is ${lastSeq}, below ${after} (the queue was deleted or replaced); read on after 0`);
    this.queue = queue;
    this.after = after;
    this.lastSeq = lastSeq;
    this.shard = shard;
  }
}
/** Thrown by a handler: the failure is permanent, the message is dead now. */
class Permanent extends Error {
  constructor(message) {
    super(message);
    this.name = 'Permanent';
  }
}
/**
 * Thrown by a handler: try again after `delayMs` (else the backoff decides),
 * a duration (a number of ms, or a string such as '30s'), kept in ms.
 */
class Retry extends Error {
  constructor(delayMs, message) {
    super(message || 'retry');
    this.name = 'Retry';
    this.delayMs = delayMs === undefined || delayMs === null ? null : durationArg('delayMs', delayMs, 0);
  }
}

/** The server's error as a typed one; anything else is a DqError. */
function mapError(e) {
  const text = (e && e.message) || String(e);
  if (!(e && e.name === 'ReplyError')) return e;
  if (text.startsWith('STALE')) return new StaleDelivery(text);
  const gap = /^GAP the oldest event kept is (\d+)/.exec(text);
  if (gap) return new EventGapError(text, Number(gap[1]));
  if (text.startsWith('WRONGTYPE')) return new WrongType(text);
  if (text.startsWith('OOM') || text.startsWith('ERR maxmemory-policy is')) return new OutOfMemory(text);
  return new DqError(text);
}

function intArg(name, v, min, max) {
  if (!Number.isInteger(v) || v < min || v > max) {
    throw new RangeError(`${name} must be an integer from ${min} to ${max}, not ${v}`);
  }
  return v;
}

// The module's duration grammar (docs/commands.md, "Arguments, replies and
// errors"): a whole number alone (milliseconds) or with one lower-case unit.
const DURATION = /^([0-9]+)(ms|s|m|h|d)?$/;
const UNIT_MS = { ms: 1n, s: 1000n, m: 60000n, h: 3600000n, d: 86400000n };
const DURATION_FORMS = "a number of milliseconds, or a string: a whole number alone (ms) or with a unit ms, s, m, h or d, such as '1500', '250ms', '30s', '5m', '2h', '7d' (no fractions, signs, spaces or upper-case units)";

/** A duration string in the server's grammar as ms; null when it is not one, or is past 2^53 - 1 ms. */
function parseDuration(text) {
  const m = typeof text === 'string' ? DURATION.exec(text) : null;
  if (!m) return null;
  const ms = BigInt(m[1]) * (m[2] ? UNIT_MS[m[2]] : 1n); // exact, however long the digits
  return ms <= BigInt(MAX_TIME) ? Number(ms) : null;
}

/**
 * A duration option as a whole number of ms from `min` to `max`: a number
 * of ms, or a string in the server's grammar ('30s', '5m', '1500').
 */
function durationArg(name, v, min, max = MAX_TIME) {
  if (typeof v === 'number') return intArg(name, v, min, max);
  if (typeof v !== 'string') throw new TypeError(`${name} must be a duration: ${DURATION_FORMS}; not ${typeof v}`);
  const ms = parseDuration(v);
  if (ms === null) throw new RangeError(`${name} must be a duration: ${DURATION_FORMS}; not '${v}'`);
  if (ms < min || ms > max) throw new RangeError(`${name} must be from ${min} to ${max} ms, not '${v}' (${ms} ms)`);
  return ms;
}

function bytesArg(name, v, max = 1024) {
  if (typeof v !== 'string' && !Buffer.isBuffer(v)) throw new TypeError(`${name} must be a string or a Buffer`);
  const n = Buffer.byteLength(v);
  if (n < 1 || n > max) throw new RangeError(`${name} must be 1 to ${max} bytes, not ${n}`);
  return v;
}

/**
 * Bytes the server keeps as they are (a result, a progress value): a string
 * (sent as UTF-8) or a Buffer, empty allowed, at most `max` bytes.
 */
function valueArg(name, v, max) {
  if (typeof v !== 'string' && !Buffer.isBuffer(v)) throw new TypeError(`${name} must be a string or a Buffer, not ${v === null ? 'null' : typeof v}`);
  // A string's UTF-8 length is at most 3 bytes per UTF-16 unit: counting
  // them (a pass over the text) is needed only for a long one.
  const n = typeof v === 'string' && v.length * 3 <= max ? 0 : Buffer.byteLength(v);
  if (n > max) throw new RangeError(`${name} is at most ${max} bytes (the server's limit), not ${n}`);
  return v;
}

function stateArg(state) {
  const s = typeof state === 'string' ? state.toUpperCase() : '';
  if (!STATES.includes(s)) throw new RangeError(`state must be one of ${STATES.join(', ')}, not ${state}`);
  return s;
}

/** `text` cut to at most `max` bytes at a UTF-8 character boundary. */
function truncateError(text, max = MAX_ERROR_BYTES) {
  const b = Buffer.from(String(text), 'utf8');
  if (b.length <= max) return String(text);
  let end = max;
  while (end > 0 && (b[end] & 0xc0) === 0x80) end--;
  return b.subarray(0, end).toString('utf8');
}

const ADD_OPTIONS = ['delayMs', 'atMs', 'id', 'nx', 'xx', 'priority', 'maxAttempts', 'backoff', 'group', 'ttlMs', 'retainMs', 'shardKey'];

function addArgs(payload, o = {}) {
  if (typeof payload !== 'string' && !Buffer.isBuffer(payload)) throw new TypeError('payload must be a string or a Buffer');
  for (const k of Object.keys(o)) if (!ADD_OPTIONS.includes(k)) throw new TypeError(`unknown add option '${k}'`);
  const a = [payload];
  if (o.delayMs != null && o.atMs != null) throw new TypeError('delayMs and atMs cannot be used together');
  if (o.nx && o.xx) throw new TypeError('nx and xx cannot be used together');
  if (o.xx && o.id == null) throw new TypeError('xx needs id');
  if (o.delayMs != null) a.push('DELAY', durationArg('delayMs', o.delayMs, 0));
  if (o.atMs != null) a.push('AT', intArg('atMs', o.atMs, 0, MAX_TIME));
  if (o.id != null) a.push('ID', bytesArg('id', o.id));
  if (o.nx) a.push('NX');
  if (o.xx) a.push('XX');
  if (o.priority != null) a.push('PRIORITY', intArg('priority', o.priority, -(2 ** 31), 2 ** 31 - 1));
  if (o.maxAttempts != null) a.push('MAXATTEMPTS', intArg('maxAttempts', o.maxAttempts, 1, 2 ** 31 - 1));
  if (o.backoff != null) a.push('BACKOFF', bytesArg('backoff', o.backoff, 4096));
  if (o.group != null) a.push('GROUP', bytesArg('group', o.group));
  if (o.ttlMs != null) a.push('TTL', durationArg('ttlMs', o.ttlMs, 1));
  // 0 is a retention too: this message is not kept, whatever the queue's.
  if (o.retainMs != null) a.push('RETAIN', durationArg('retainMs', o.retainMs, 0));
  return a;
}

const SCHEDULE_OPTIONS = ['every', 'cron', 'tz', 'start', 'end', 'limit', 'missed', 'overlap', 'nx', 'priority', 'maxAttempts', 'backoff', 'group', 'ttlMs'];

/** One of `allowed` (any case), as the server spells it. */
function enumArg(name, v, allowed) {
  const s = typeof v === 'string' ? v.toUpperCase() : '';
  if (!allowed.includes(s)) throw new RangeError(`${name} must be one of ${allowed.map((a) => a.toLowerCase()).join(', ')}, not ${v}`);
  return s;
}

/** A Unix time in ms, given as a number or a Date. */
function timeArg(name, v) {
  const ms = v instanceof Date ? v.getTime() : v;
  return intArg(name, ms, 0, MAX_TIME);
}

/** DQ.SCHEDULE's arguments after the queue: name, payload, EVERY or CRON, options. */
function scheduleArgs(name, payload, o = {}) {
  // The server's limit: `name@<time>` must fit an id (1024 bytes).
  bytesArg('name', name, 1007);
  if (typeof payload !== 'string' && !Buffer.isBuffer(payload)) throw new TypeError('payload must be a string or a Buffer');
  if (o === null || typeof o !== 'object') throw new TypeError('schedule options must be an object such as { every: \'5m\' }');
  for (const k of Object.keys(o)) if (!SCHEDULE_OPTIONS.includes(k)) throw new TypeError(`unknown schedule option '${k}'`);
  if ((o.every == null) === (o.cron == null)) throw new TypeError('a schedule needs exactly one of every and cron');
  const a = [name, payload];
  if (o.every != null) a.push('EVERY', durationArg('every', o.every, 1000));
  if (o.cron != null) {
    if (typeof o.cron !== 'string' || o.cron.trim() === '') throw new TypeError('cron must be five fields such as \'0 8 * * *\' or @daily');
    a.push('CRON', o.cron);
  }
  if (o.tz != null) {
    if (o.cron == null) throw new TypeError('tz needs cron: an interval has no time zone');
    if (typeof o.tz !== 'string' || o.tz === '') throw new TypeError('tz must be an IANA time zone name such as Europe/Berlin');
    a.push('TZ', o.tz);
  }
  const start = o.start != null ? timeArg('start', o.start) : null;
  const end = o.end != null ? timeArg('end', o.end) : null;
  if (start != null && end != null && start > end) throw new RangeError('start must not be after end');
  if (start != null) a.push('START', start);
  if (end != null) a.push('END', end);
  if (o.limit != null) a.push('LIMIT', intArg('limit', o.limit, 1, MAX_TIME));
  if (o.missed != null) a.push('MISSED', enumArg('missed', o.missed, ['SKIP', 'ONE', 'ALL']));
  if (o.overlap != null) a.push('OVERLAP', enumArg('overlap', o.overlap, ['ALLOW', 'SKIP']));
  if (o.nx) a.push('NX');
  if (o.priority != null) a.push('PRIORITY', intArg('priority', o.priority, -(2 ** 31), 2 ** 31 - 1));
  if (o.maxAttempts != null) a.push('MAXATTEMPTS', intArg('maxAttempts', o.maxAttempts, 1, 2 ** 31 - 1));
  if (o.backoff != null) a.push('BACKOFF', bytesArg('backoff', o.backoff, 4096));
  if (o.group != null) a.push('GROUP', bytesArg('group', o.group));
  if (o.ttlMs != null) a.push('TTL', durationArg('ttlMs', o.ttlMs, 1));
  return a;
}

/**
 * DQ.CONFIG SET's pairs for { leaseMs, maxAttempts, backoff, rate,
 * maxInflight, retainMs, retainMax, events, groupLimit, groupRate, order }.
 */
const CONFIG_SETTINGS = ['leaseMs', 'maxAttempts', 'backoff', 'rate', 'maxInflight', 'retainMs', 'retainMax', 'events', 'groupLimit', 'groupRate', 'order'];
/** The most events DQ.CONFIG SET EVENTS keeps per queue. */
const MAX_EVENTS = 100000000;
/** The most messages of a group out at once DQ.CONFIG SET GROUPLIMIT takes. */
const MAX_GROUP_LIMIT = 1000000;

function configArgs(settings) {
  if (settings === null || typeof settings !== 'object') throw new TypeError('configSet takes an object such as { leaseMs: 60000 }');
  for (const k of Object.keys(settings)) if (!CONFIG_SETTINGS.includes(k)) throw new TypeError(`unknown setting '${k}' (${CONFIG_SETTINGS.join(', ')})`);
  const { leaseMs, maxAttempts, backoff, rate, maxInflight, retainMs, retainMax, events, groupLimit, groupRate, order } = settings;
  const a = [];
  if (leaseMs != null) a.push('LEASE', leaseMs === 'DEFAULT' ? leaseMs : durationArg('leaseMs', leaseMs, 1));
  if (maxAttempts != null) a.push('MAXATTEMPTS', maxAttempts === 'DEFAULT' ? maxAttempts : intArg('maxAttempts', maxAttempts, 1, 2 ** 31 - 1));
  if (backoff != null) a.push('BACKOFF', bytesArg('backoff', backoff, 4096));
  if (rate != null) {
    splitRate(rate); // refuses what is not a rate
    a.push('RATE', String(rate));
  }
  if (maxInflight != null) a.push('MAXINFLIGHT', maxInflight === 'DEFAULT' ? maxInflight : intArg('maxInflight', maxInflight, 0, 2 ** 32 - 1));
  // RETAIN 0 keeps nothing whatever dq.retain-ms says; DEFAULT follows it.
  if (retainMs != null) a.push('RETAIN', retainMs === 'DEFAULT' ? retainMs : durationArg('retainMs', retainMs, 0));
  if (retainMax != null) a.push('RETAINMAX', retainMax === 'DEFAULT' ? retainMax : intArg('retainMax', retainMax, 0, MAX_TIME));
  if (events != null) a.push('EVENTS', events === 'DEFAULT' ? events : intArg('events', events, 0, MAX_EVENTS));
  // A group's own limits: GROUPLIMIT DEFAULT is 1 (one of a group out at a time).
  if (groupLimit != null) a.push('GROUPLIMIT', groupLimit === 'DEFAULT' ? groupLimit : intArg('groupLimit', groupLimit, 1, MAX_GROUP_LIMIT));
  if (groupRate != null) {
    splitRate(groupRate, 'groupRate'); // refuses what is not a rate
    a.push('GROUPRATE', String(groupRate));
  }
  if (order != null) a.push('ORDER', order === 'DEFAULT' ? order : enumArg('order', order, ['PRIORITY', 'FAIR']));
  if (a.length === 0) throw new TypeError(`configSet needs one of ${CONFIG_SETTINGS.join(', ')}`);
  return a;
}

/**
 * A rate 'n/duration' split into n and the duration; null for a rate that
 * removes the limit (0, '0', '0/...', 'DEFAULT'). The window is checked
 * with the duration grammar (at least 1 ms); n's range is the server's to
 * check.
 */
function splitRate(rate, name = 'rate') {
  if (rate === 0 || rate === '0' || rate === 'DEFAULT') return null;
  if (typeof rate !== 'string') throw new TypeError(`${name} must be 'n/duration' such as '100/1s', or 0 to remove it, not ${rate}`);
  const m = /^([0-9]+)\/(.*)$/s.exec(rate);
  if (!m || !parseDuration(m[2])) {
    throw new TypeError(`${name} must be 'n/duration' such as '100/1s', '5000/1h' or '20/250ms' (the duration as in any duration option, at least 1 ms), or 0 to remove it; not '${rate}'`);
  }
  const n = Number(m[1]);
  return n === 0 ? null : { n, per: m[2] };
}

/** DQ.TOUCH's arguments after the queue: id [LEASE ms] [ATTEMPT n] [PROGRESS value]. */
function touchArgs(id, { leaseMs, attempt, progress } = {}) {
  const a = [bytesArg('id', id)];
  if (leaseMs != null) a.push('LEASE', durationArg('leaseMs', leaseMs, 1));
  if (attempt != null) a.push('ATTEMPT', intArg('attempt', attempt, 1, 2 ** 32 - 1));
  if (progress !== undefined) a.push('PROGRESS', valueArg('progress', progress, MAX_PROGRESS_BYTES));
  return a;
}

/** DQ.DONE's arguments after the queue: id result pairs, from an iterable of [id, result]. */
function doneArgs(results) {
  if (results == null || typeof results[Symbol.iterator] !== 'function' || typeof results === 'string') {
    throw new TypeError('done takes [id, result] pairs: an array of them, or a Map of id to result');
  }
  const a = [];
  for (const pair of results) {
    if (!Array.isArray(pair) || pair.length !== 2) throw new TypeError(`done takes [id, result] pairs, not ${JSON.stringify(pair)}`);
    a.push(bytesArg('id', pair[0]), valueArg('result', pair[1], MAX_RESULT_BYTES));
  }
  if (a.length === 0) throw new TypeError('done needs at least one [id, result] pair');
  return a;
}

/** DQ.WAIT's arguments after the queue: id, and BLOCK ms unless it only looks (no timeout, or 0). */
function waitArgs(id, o = {}) {
  if (o === null || typeof o !== 'object') throw new TypeError('wait takes { timeoutMs } or nothing');
  for (const k of Object.keys(o)) if (k !== 'timeoutMs') throw new TypeError(`unknown wait option '${k}'`);
  const a = [bytesArg('id', id)];
  // BLOCK 0 would wait for ever: a timeout of 0 looks once, as no timeout does.
  const ms = o.timeoutMs == null ? 0 : durationArg('timeoutMs', o.timeoutMs, 0);
  if (ms > 0) a.push('BLOCK', ms);
  return { args: a, ms };
}

/**
 * DQ.WAIT's reply: null (no outcome yet), or { state, value }: 'done' and
 * its result (a Buffer; null after a plain ACK), 'dead' and its last error
 * (a Buffer; null when none), 'gone' and null.
 */
function outcome(reply) {
  if (reply == null) return null;
  if (!Array.isArray(reply) || reply.length !== 2) throw new DqError(`DQ.WAIT replied ${JSON.stringify(reply)}, not [state, value]`);
  const state = str(reply[0]);
  if (state !== 'done' && state !== 'dead' && state !== 'gone') throw new DqError(`DQ.WAIT replied an outcome '${state}' this library does not know`);
  return { state, value: reply[1] == null ? null : Buffer.isBuffer(reply[1]) ? reply[1] : Buffer.from(String(reply[1])) };
}

function nackArgs(id, o = {}) {
  const a = [bytesArg('id', id)];
  if (o.delayMs != null && o.dead) throw new TypeError('delayMs and dead cannot be used together');
  if (o.delayMs != null) a.push('DELAY', durationArg('delayMs', o.delayMs, 0));
  if (o.dead) a.push('DEAD');
  if (o.attempt != null) a.push('ATTEMPT', intArg('attempt', o.attempt, 1, 2 ** 32 - 1));
  if (o.error != null && String(o.error) !== '') a.push('ERROR', truncateError(o.error));
  return a;
}

const str = (v) => (v == null ? null : Buffer.isBuffer(v) ? v.toString('utf8') : typeof v === 'number' ? v : String(v));

/**
 * A record reply as [field, value] pairs: a flat field/value array (RESP2,
 * and RESP3 under ioredis 6's default 'legacy' reply mapping) or an object
 * (a RESP3 map under its 'resp3' mapping). Field names and words come as
 * Buffers whether the server wrote them as simple or bulk strings.
 */
function pairs(reply) {
  if (!Array.isArray(reply)) return Object.entries(reply);
  const out = [];
  for (let i = 0; i + 1 < reply.length; i += 2) out.push([reply[i], reply[i + 1]]);
  return out;
}

/** The fields that hold the user's own bytes, kept as Buffers: what was added, what a handler returned or reported. */
const BYTES_FIELDS = new Set(['payload', 'result', 'progress']);

/** A record reply as an object keyed by the server's field names; `payload`, `result` and `progress` stay Buffers. */
function record(reply) {
  if (reply == null) return null;
  const out = {};
  for (const [k, v] of pairs(reply)) {
    const key = str(k);
    out[key] = BYTES_FIELDS.has(key) ? v : str(v);
  }
  return out;
}

/** A DQ.SCHEDULES record as a Schedule (camelCase; null where the server says nil). */
function schedule(reply) {
  const r = record(reply);
  const f = (k) => (r[k] === undefined ? null : r[k]);
  return {
    name: f('name'),
    spec: f('spec'),
    tz: f('tz'),
    nextRun: f('next-run'),
    lastRun: f('last-run'),
    runs: f('runs'),
    skipped: f('skipped'),
    limit: f('limit'),
    start: f('start'),
    end: f('end'),
    missed: f('missed'),
    overlap: f('overlap'),
    payload: f('payload'),
    priority: f('priority'),
    maxAttempts: f('max-attempts'),
    backoff: f('backoff'),
    group: f('group'),
    ttl: f('ttl'),
  };
}

/** A PEEK/SCAN entry. */
function entry(e) {
  return { id: str(e[0]), payload: e[1], attempt: Number(e[2]), time: Number(e[3]), lastError: e.length > 4 ? str(e[4]) : null };
}

/**
 * A POP entry: id, payload (a Buffer), attempt, queue, lost, cancelled,
 * lostReason, and `signal`, an AbortSignal made when first read (most
 * handlers never read it), aborted when the worker learns the delivery is
 * over: its lease was lost, or the message was cancelled or purged.
 */
class Delivery {
  #abort = null;
  // Where progress() goes: the client the delivery came from and the lease
  // its POP took (null: the queue's), set by whoever popped it.
  #client = null;
  #leaseMs = null;

  constructor(id, payload, attempt, queue) {
    this.id = id;
    this.payload = payload;
    this.attempt = attempt;
    this.queue = queue;
    this.lost = false;
    this.cancelled = false;
    this.lostReason = null;
  }

  get signal() {
    if (!this.#abort) {
      this.#abort = new AbortController();
      if (this.lost) this.#abort.abort();
    }
    return this.#abort.signal;
  }

  _reporting(client, leaseMs) {
    this.#client = client;
    this.#leaseMs = leaseMs ?? null;
    return this;
  }

  /**
   * Reports how far the work got (a string or a Buffer, at most 64 KiB):
   * one `DQ.TOUCH queue id [LEASE ms] ATTEMPT n PROGRESS value`, fenced by
   * this delivery's attempt, and renewing its lease by the one its POP took
   * (a Worker's `leaseMs`), so a report never shortens it. DQ.GET shows it
   * as `progress` until the next delivery starts; a done message keeps the
   * last. Resolves to the new lease deadline (Unix ms); rejects with
   * StaleDelivery once the delivery is over (stop working).
   */
  async progress(value) {
    if (this.#client === null) throw new TypeError('this delivery was not popped by this library: there is no connection to report its progress on');
    const args = touchArgs(this.id, { leaseMs: this.#leaseMs, attempt: this.attempt, progress: value });
    return Number(await send(this.#client, 'DQ.TOUCH', this.queue, args));
  }

  /**
   * The heartbeat found the delivery over: 'cancelled' when the message is
   * gone (DQ.CANCEL, DQ.PURGE), 'lost' when it is still there (the lease
   * ran out: another consumer may hold it).
   */
  _lose(reason = 'lost') {
    this.lost = true;
    this.lostReason = reason;
    this.cancelled = reason === 'cancelled';
    if (this.#abort) this.#abort.abort();
  }
}

function delivery(e, queue) {
  return new Delivery(str(e[0]), e[1], Number(e[2]), queue);
}

/** DQ.POP's options: COUNT (default 1, always sent), BLOCK, LEASE. */
function popArgs({ count = 1, blockMs, leaseMs } = {}) {
  const a = ['COUNT', intArg('count', count, 1, 10000)];
  if (blockMs != null) a.push('BLOCK', durationArg('blockMs', blockMs, 0));
  if (leaseMs != null) a.push('LEASE', durationArg('leaseMs', leaseMs, 1));
  return a;
}

/** DQ.MPOP's arguments: numkeys, the queues in their order, then DQ.POP's options. */
function mpopArgs(queues, options) {
  return [queues.length, ...queues, ...popArgs(options)];
}

/**
 * DQ.POP's reply (nil or entries) as the deliveries of `queue`; with
 * `client`, each reports its progress there, with the POP's `leaseMs`.
 */
function deliveries(reply, queue, client = null, leaseMs = null) {
  const out = (reply || []).map((e) => delivery(e, queue));
  if (client !== null) for (const d of out) d._reporting(client, leaseMs);
  return out;
}

/** DQ.MPOP's reply: { queue, deliveries }, queue null when nothing was taken. */
function mpopReply(reply) {
  if (reply == null) return { queue: null, deliveries: [] };
  const queue = str(reply[0]);
  return { queue, deliveries: deliveries(reply[1], queue) };
}

/** DQ.SCAN's options after the cursor: STATE, COUNT, each only when given. */
function scanArgs({ state, count } = {}) {
  const a = [];
  if (state != null) a.push('STATE', stateArg(state));
  if (count != null) a.push('COUNT', intArg('count', count, 1, 10000));
  return a;
}

/** A DQ.SCAN page: { cursor, entries }. */
function scanPage(reply) {
  return { cursor: str(reply[0]), entries: reply[1].map(entry) };
}

/** DQ.GROUPS' options after the cursor: MATCH, COUNT (default 100, always sent). */
function groupsArgs(o = {}) {
  if (o === null || typeof o !== 'object') throw new TypeError('groups takes { match, count } or nothing');
  for (const k of Object.keys(o)) if (k !== 'match' && k !== 'count') throw new TypeError(`unknown groups option '${k}'`);
  const { match, count = 100 } = o;
  const a = [];
  if (match != null) {
    if (typeof match !== 'string' && !Buffer.isBuffer(match)) throw new TypeError('match must be a glob-style pattern (a string or a Buffer)');
    a.push('MATCH', match);
  }
  a.push('COUNT', intArg('count', count, 1, 10000));
  return a;
}

/**
 * A DQ.GROUPS entry `[group, waiting, ready, inflight, paused-until]` as
 * { name, waiting, ready, inflight, paused, pausedUntil }: pausedUntil the
 * pause's end (Unix ms), null when not paused or paused until resume (-1).
 */
function group(e) {
  const until = e[4] == null ? null : Number(e[4]);
  return {
    name: str(e[0]),
    waiting: Number(e[1]),
    ready: Number(e[2]),
    inflight: Number(e[3]),
    paused: until !== null,
    pausedUntil: until === null || until < 0 ? null : until,
  };
}

/** A DQ.GROUPS page: { cursor, groups }. */
function groupsPage(reply) {
  return { cursor: str(reply[0]), groups: (reply[1] || []).map(group) };
}

const commandClasses = new WeakMap();

/**
 * The Command class of the ioredis that made `client` (5 or 6): this library
 * requires no ioredis of its own, so a command is always built by the same
 * copy that sends it. ioredis does not show the class on its instances
 * (their `constructor` is EventEmitter's), so it is taken from a command the
 * client builds: a PING handed to a stand-in sendCommand, never sent.
 */
function commandClass(client) {
  let Command = commandClasses.get(client);
  if (Command) return Command;
  const own = Object.getOwnPropertyDescriptor(client, 'sendCommand');
  client.sendCommand = (cmd) => {
    Command = cmd && cmd.constructor;
    return new Promise(() => {});
  };
  try {
    client.callBuffer('PING');
  } finally {
    if (own) Object.defineProperty(client, 'sendCommand', own);
    else delete client.sendCommand;
  }
  if (typeof Command !== 'function' || typeof Command.prototype.toWritable !== 'function') {
    throw new TypeError('client must be an ioredis (5 or 6) Redis or Cluster');
  }
  commandClasses.set(client, Command);
  return Command;
}

/**
 * Sends `name queue ...args` on `client` (Redis or Cluster): replies keep
 * bulk strings as Buffers; on a cluster the command goes to the queue's
 * slot owner, as ioredis knows no key position for module commands. With
 * `timeoutMs` the call fails ('Command timed out') when no reply came
 * that long after it was sent.
 */
async function send(client, name, queue, args = [], timeoutMs = 0) {
  const all = queue === undefined ? args : [queue, ...args];
  const Command = commandClass(client);
  try {
    const cmd = new Command(name, all, { replyEncoding: null });
    if (queue !== undefined) cmd.slot = keySlot(queue);
    // Node's timers take at most 2^31 - 1 ms (a longer one fires at once):
    // a call allowed longer than that (24.8 days) is not timed here.
    if (timeoutMs > 0 && timeoutMs <= 2 ** 31 - 1) cmd.setTimeout(timeoutMs);
    client.sendCommand(cmd);
    return await cmd.promise;
  } catch (e) {
    throw mapError(e);
  }
}

module.exports = {
  DqError, StaleDelivery, UnknownMessage, WrongType, OutOfMemory, Permanent, Retry, EventGapError, EventLogRestarted,
  MAX_ERROR_BYTES, MAX_RESULT_BYTES, MAX_PROGRESS_BYTES, MAX_TIME, MAX_EVENTS, MAX_GROUP_LIMIT,
  mapError, intArg, durationArg, parseDuration, bytesArg, valueArg, stateArg, enumArg, timeArg, truncateError,
  addArgs, nackArgs, touchArgs, doneArgs, waitArgs, outcome, scheduleArgs, configArgs, splitRate, popArgs, mpopArgs, scanArgs,
  groupsArgs, record, schedule, entry, group, delivery, deliveries, mpopReply, scanPage, groupsPage, Delivery, str, send,
};
