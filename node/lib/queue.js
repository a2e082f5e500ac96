'use strict';
// Queue and ShardedQueue handles: one method per command, over an ioredis
// Redis or Cluster client the caller owns.

const crypto = require('node:crypto');
const c = require('./commands');
const blocking = require('./blocking');
const ev = require('./events');
const { shardNames, shardOf } = require('./shard');

class Queue {
  /** @param client an ioredis Redis or Cluster @param name the queue (its key) */
  constructor(client, name) {
    if (!client || typeof client.sendCommand !== 'function') throw new TypeError('client must be an ioredis Redis or Cluster');
    if (typeof name !== 'string') throw new TypeError('name must be a string');
    this.client = client;
    this.name = name;
  }

  _send(command, args) {
    return c.send(this.client, command, this.name, args);
  }

  /** DQ.ADD: the id, or null when NX found the id or XX did not. */
  async add(payload, options = {}) {
    const { shardKey, ...rest } = options;
    return c.str(await this._send('DQ.ADD', c.addArgs(payload, rest)));
  }

  /**
   * DQ.POP: the deliveries taken (an empty array when none); each reports
   * its progress on this queue's client, with the lease this POP took.
   */
  async pop(options = {}) {
    return c.deliveries(await this._send('DQ.POP', c.popArgs(options)), this.name, this.client, options.leaseMs);
  }

  /** DQ.ACK: how many of the ids were in flight and are now finished (gone, or kept as done while a retention holds). */
  async ack(...ids) {
    if (ids.length === 0) throw new TypeError('ack needs at least one id');
    return Number(await this._send('DQ.ACK', ids.map((id) => c.bytesArg('id', id))));
  }

  /**
   * DQ.DONE: as ack, and each message keeps its result (a string or a
   * Buffer, empty included) while its retention lasts, for wait(), get()
   * and the dashboard. `results`: [id, result] pairs, an array of them or a
   * Map. How many of the ids were in flight and are now finished.
   */
  async done(results) {
    return Number(await this._send('DQ.DONE', c.doneArgs(results)));
  }

  /**
   * DQ.WAIT: the message's outcome, { state, value }: 'done' with its
   * result (a Buffer; null after a plain ACK), 'dead' with its last error
   * (a Buffer; null when none), 'gone' (never added, cancelled, purged, or
   * finished with no retention to keep it); null when it has none after
   * `timeoutMs` (a duration; none or 0 looks once). The server answers the
   * moment the outcome exists (a retry or a replacement is no outcome). A
   * wait blocks a connection of its own, kept for the next wait, never
   * the client's shared one.
   */
  async wait(id, options = {}) {
    const { args, ms } = c.waitArgs(id, options);
    const reply = ms === 0 ? await this._send('DQ.WAIT', args) : await blocking.waitsOf(this.client).wait(this.name, args, ms);
    return c.outcome(reply);
  }

  /** DQ.NACK: the new state ('delayed', 'ready' or 'dead'). */
  async nack(id, options = {}) {
    const state = await this._send('DQ.NACK', c.nackArgs(id, options));
    if (state == null) throw new c.UnknownMessage(`message '${id}' is not in flight in queue '${this.name}'`);
    return c.str(state);
  }

  /**
   * DQ.TOUCH: the new lease deadline (Unix ms). `progress` (a string or a
   * Buffer, at most 64 KiB) records how far the delivery got.
   */
  async touch(id, options = {}) {
    const deadline = await this._send('DQ.TOUCH', c.touchArgs(id, options));
    if (deadline == null) throw new c.UnknownMessage(`message '${id}' is not in flight in queue '${this.name}'`);
    return Number(deadline);
  }

  /**
   * DQ.TOUCH ... PROGRESS, for code that pops by itself (a delivery's own
   * progress() does it for you): records `value` as the delivery's
   * progress, renewing the lease (by `leaseMs`, else the queue's); fenced
   * with `attempt`. The new lease deadline.
   */
  async progress(id, value, { leaseMs, attempt } = {}) {
    return this.touch(id, { leaseMs, attempt, progress: c.valueArg('progress', value, c.MAX_PROGRESS_BYTES) });
  }

  /** DQ.STATS: counts and counters (numbers, or null). */
  async stats() {
    return c.record(await this._send('DQ.STATS'));
  }

  /** DQ.GET: the message's record, or null for an unknown id. */
  async get(id) {
    return c.record(await this._send('DQ.GET', [c.bytesArg('id', id)]));
  }

  /** DQ.PEEK: up to `count` messages of `state` in the order they leave it. */
  async peek(state, count = 10) {
    const reply = await this._send('DQ.PEEK', [c.stateArg(state), 'COUNT', c.intArg('count', count, 1, 10000)]);
    return reply.map(c.entry);
  }

  /** Every message (of `state`), paging with DQ.SCAN until its cursor is 0. */
  async *scan(options = {}) {
    const a = c.scanArgs(options);
    let cursor = '0';
    do {
      const page = c.scanPage(await this._send('DQ.SCAN', [cursor, ...a]));
      cursor = page.cursor;
      yield* page.entries;
    } while (cursor !== '0');
  }

  /**
   * Every group of the queue (matching `match`, a glob-style pattern),
   * paging with DQ.GROUPS (`count` groups looked at a page, default 100)
   * until its cursor is 0: { name, waiting, ready, inflight, paused,
   * pausedUntil }. Groups are visited in name order; one present
   * throughout is given exactly once.
   */
  async *groups(options = {}) {
    const a = c.groupsArgs(options);
    let cursor = '0';
    do {
      const page = c.groupsPage(await this._send('DQ.GROUPS', [cursor, ...a]));
      cursor = page.cursor;
      yield* page.groups;
    } while (cursor !== '0');
  }

  /** DQ.REDRIVE: dead messages back to ready (`count`, `ids`, or up to 10000). */
  async redrive({ count, ids } = {}) {
    if (count != null && ids != null) throw new TypeError('count and ids cannot be used together');
    const a = [];
    if (count != null) a.push('COUNT', c.intArg('count', count, 1, 10000));
    if (ids != null) {
      if (!Array.isArray(ids) || ids.length === 0) throw new TypeError('ids must be a non-empty array');
      a.push('ID', ...ids.map((id) => c.bytesArg('id', id)));
    }
    return Number(await this._send('DQ.REDRIVE', a));
  }

  /** DQ.CANCEL: how many of the ids existed. */
  async cancel(...ids) {
    if (ids.length === 0) throw new TypeError('cancel needs at least one id');
    return Number(await this._send('DQ.CANCEL', ids.map((id) => c.bytesArg('id', id))));
  }

  /** DQ.PURGE of one state, or of every message. */
  async purge(state) {
    return Number(await this._send('DQ.PURGE', state == null ? [] : [c.stateArg(state)]));
  }

  /** DQ.CONFIG: the settings in force and where each comes from. */
  async config() {
    return c.record(await this._send('DQ.CONFIG'));
  }

  /**
   * DQ.CONFIG SET: { leaseMs, maxAttempts, backoff, rate, maxInflight,
   * retainMs, retainMax, events, groupLimit, groupRate, order } ('DEFAULT'
   * removes a value; rate 0 and maxInflight 0 remove a limit; retainMs 0
   * keeps no finished message, retainMax 0 caps none; events n keeps the
   * last n events, 0 none; groupLimit n lets at most n of each group out
   * at once, 1 to 1000000, 'DEFAULT' 1; groupRate 'n/duration' each
   * group's deliveries, 0 removes it; order 'priority' or 'fair').
   * The server checks every pair before it changes any.
   */
  async configSet(settings = {}) {
    await this._send('DQ.CONFIG', ['SET', ...c.configArgs(settings)]);
  }

  /**
   * DQ.SCHEDULE: creates or replaces the recurring schedule `name`, whose
   * runs add `payload`; exactly one of `every` ('5m', or ms) and `cron`.
   * The next run time (Unix ms), or null when none is left or `nx` found
   * the schedule.
   */
  async schedule(name, payload, options = {}) {
    const next = await this._send('DQ.SCHEDULE', c.scheduleArgs(name, payload, options));
    return next == null ? null : Number(next);
  }

  /** DQ.UNSCHEDULE: how many of the names were schedules. */
  async unschedule(...names) {
    if (names.length === 0) throw new TypeError('unschedule needs at least one name');
    return Number(await this._send('DQ.UNSCHEDULE', names.map((n) => c.bytesArg('name', n, 1007))));
  }

  /** DQ.SCHEDULES: every schedule of the queue, by name. */
  async schedules() {
    return ((await this._send('DQ.SCHEDULES')) || []).map(c.schedule);
  }

  /**
   * DQ.PAUSE: POP delivers nothing until resume(), or for `forMs`; with
   * `group`, nothing of that group only (the rest of the queue goes on).
   */
  async pause(options = {}) {
    if (options === null || typeof options !== 'object') throw new TypeError('pause takes { forMs, group } or nothing');
    for (const k of Object.keys(options)) if (k !== 'forMs' && k !== 'group') throw new TypeError(`unknown pause option '${k}'`);
    const a = options.forMs == null ? [] : ['FOR', c.durationArg('forMs', options.forMs, 1)];
    if (options.group != null) a.push('GROUP', c.bytesArg('group', options.group));
    await this._send('DQ.PAUSE', a);
  }

  /** DQ.RESUME: whether the queue (with `group`: that group) was paused. */
  async resume(options = {}) {
    if (options === null || typeof options !== 'object') throw new TypeError('resume takes { group } or nothing');
    for (const k of Object.keys(options)) if (k !== 'group') throw new TypeError(`unknown resume option '${k}'`);
    const a = options.group == null ? [] : ['GROUP', c.bytesArg('group', options.group)];
    return Number(await this._send('DQ.RESUME', a)) === 1;
  }

  /**
   * The queue's events (DQ.EVENTS), kept once `configSet({ events: n })`
   * asked for them: an async iterator, after the seq `after` (none: from
   * the oldest kept), for ever, each DQ.EVENTS ... BLOCK on a connection of
   * its own. It throws EventGapError when `after` was trimmed and
   * EventLogRestarted when the queue was deleted or replaced (see
   * lib/events.js); `break`, close() or `signal` end it.
   */
  events(options = {}) {
    return new ev.EventReader(this, ev.readOptions(options, 'events'));
  }

  /** An EventEmitter of the queue's events ('done', 'dead', ..., 'gap', 'error'), as BullMQ's QueueEvents; close() ends it. */
  listen(options = {}) {
    return new ev.QueueEventsListener(this, options);
  }

  /**
   * The newest seq the queue has written (0 when none): `events({ after:
   * await queue.lastEventSeq() })` reads the events written from now on.
   */
  async lastEventSeq() {
    return Number((await this._send('DQ.EVENTS', ['COUNT', 1]))[0]);
  }
}

/**
 * Flow fields of k shards as those of one queue: paused while any shard is
 * (until the latest end; null when one is paused without end); the limits
 * summed, what the whole queue lets through.
 */
function mergeFlow(records) {
  const paused = records.filter((r) => r.paused);
  const ends = paused.map((r) => r['paused-until']);
  const rates = records.map((r) => r.rate);
  let rate = null;
  if (rates.every((r) => r != null)) {
    const parts = rates.map((r) => /^(\d+)\/(.+)$/.exec(r));
    if (parts.every((m) => m && m[2] === parts[0][2])) rate = `${parts.reduce((n, m) => n + Number(m[1]), 0)}/${parts[0][2]}`;
    // Shards set apart from this library: no one rate describes them.
    else rate = rates.join(',');
  }
  const inflight = records.map((r) => r['max-inflight']);
  return {
    paused: paused.length > 0 ? 1 : 0,
    'paused-until': paused.length > 0 && ends.every((e) => e != null) ? Math.max(...ends) : null,
    rate,
    'max-inflight': inflight.every((n) => n != null) ? inflight.reduce((a, b) => a + b, 0) : null,
  };
}

const FLOW_FIELDS = ['paused', 'paused-until', 'rate', 'max-inflight'];

/** A queue spread over `shards` dq queues (docs/sharding.md). */
class ShardedQueue {
  constructor(client, name, { shards } = {}) {
    this.client = client;
    this.name = name;
    this.shardNames = shardNames(name, shards);
    this.shards = this.shardNames.map((n) => new Queue(client, n));
  }

  /** The shard queue a basis (group, else shard key, else id) goes to. */
  shardFor(basis) {
    return this.shards[shardOf(basis, this.shards.length)];
  }

  /** DQ.ADD on the message's shard; an id is made here when none is given. */
  async add(payload, options = {}) {
    const o = { ...options };
    if (o.id == null) o.id = crypto.randomBytes(16).toString('hex');
    const basis = o.group != null ? o.group : o.shardKey != null ? c.bytesArg('shardKey', o.shardKey) : o.id;
    return this.shardFor(basis).add(payload, o);
  }

  _candidates({ group, shardKey } = {}) {
    const basis = group != null ? group : shardKey;
    return basis != null ? [this.shardFor(basis)] : this.shards;
  }

  /**
   * The shards' DQ.STATS summed (oldest-ready-age-ms: the oldest;
   * next-due-at: the earliest; paused while any shard is; rate and
   * max-inflight: the whole queue's, the shards' limits summed).
   */
  async stats() {
    const all = await Promise.all(this.shards.map((s) => s.stats()));
    const sum = {};
    for (const s of all) {
      for (const [k, v] of Object.entries(s)) {
        if (FLOW_FIELDS.includes(k)) continue;
        if (k === 'oldest-ready-age-ms') sum[k] = v == null ? sum[k] ?? null : Math.max(sum[k] ?? 0, v);
        else if (k === 'next-due-at') sum[k] = v == null ? sum[k] ?? null : Math.min(sum[k] ?? Infinity, v);
        else sum[k] = (sum[k] || 0) + (v || 0);
      }
    }
    return 'paused' in all[0] ? { ...sum, ...mergeFlow(all) } : sum;
  }

  /** DQ.GET where the id is: the shard of `group`/`shardKey` when given, else every shard. */
  async get(id, basis) {
    for (const shard of this._candidates(basis)) {
      const m = await shard.get(id);
      if (m) return { ...m, shard: shard.name };
    }
    return null;
  }

  /**
   * Queue.wait on the shard that holds `id`: the shard of `group` or
   * `shardKey` when given (the basis it was added with), else of the id
   * itself, where add() put a message added without either. A message on
   * another shard is 'gone' there.
   */
  async wait(id, options = {}) {
    if (options === null || typeof options !== 'object') throw new TypeError('wait takes { timeoutMs, group, shardKey } or nothing');
    const { group, shardKey, ...rest } = options;
    const basis = group != null ? c.bytesArg('group', group) : shardKey != null ? c.bytesArg('shardKey', shardKey) : c.bytesArg('id', id);
    return this.shardFor(basis).wait(id, rest);
  }

  /** DQ.CANCEL of one id where it is (see get). */
  async cancel(id, basis) {
    let n = 0;
    for (const shard of this._candidates(basis)) n += await shard.cancel(id);
    return n;
  }

  /** Up to `count` messages of `state` over all shards, by time. */
  async peek(state, count = 10) {
    const all = (await Promise.all(this.shards.map(async (s) => (await s.peek(state, count)).map((e) => ({ ...e, shard: s.name }))))).flat();
    return all.sort((a, b) => a.time - b.time).slice(0, count);
  }

  /** Every message of every shard (of `state`), shard after shard. */
  async *scan(options) {
    for (const shard of this.shards) for await (const e of shard.scan(options)) yield { ...e, shard: shard.name };
  }

  /** Every group of every shard (a group lives on one shard), shard after shard, each with `shard`. */
  async *groups(options) {
    for (const shard of this.shards) for await (const g of shard.groups(options)) yield { ...g, shard: shard.name };
  }

  /** Dead messages of every shard back to ready (up to 10000 per shard); how many moved. */
  async redrive() {
    let n = 0;
    for (const shard of this.shards) n += await shard.redrive();
    return n;
  }

  async purge(state) {
    let n = 0;
    for (const shard of this.shards) n += await shard.purge(state);
    return n;
  }

  /**
   * Shard 0's settings (configSet keeps every shard alike), with the flow
   * fields of the whole queue: paused while any shard is, rate and
   * max-inflight the shards' limits summed, throttled summed; and
   * retain-max the shards' caps summed (null when no shard has one); and
   * events the shards' summed. group-limit, group-rate and order are
   * shard 0's: each holds per group, and configSet gives every shard the
   * same (a group lives on one shard).
   */
  async config() {
    const all = await Promise.all(this.shards.map((s) => s.config()));
    const whole = { ...all[0] };
    if ('retain-max' in whole) {
      const caps = all.map((r) => r['retain-max']).filter((n) => n != null);
      whole['retain-max'] = caps.length > 0 ? caps.reduce((a, b) => a + b, 0) : null;
    }
    if ('events' in whole) whole.events = all.reduce((n, r) => n + (r.events || 0), 0);
    if (!('paused' in whole)) return whole;
    return { ...whole, ...mergeFlow(all), throttled: all.reduce((n, r) => n + (r.throttled || 0), 0) };
  }

  /**
   * DQ.CONFIG SET on every shard. A limit of the whole queue is split so
   * that it still holds exactly: each of k shards gets floor(n / k) of
   * `rate: 'n/d'`, of `maxInflight: n`, of `retainMax: n` (so all
   * together never keep more than n done messages) and of `events: n` (the
   * shards keep n events in all, each the last of its own), and n < k is refused
   * (a shard would get 0, which removes its limit). groupLimit, groupRate
   * and order go to every shard as they are: a group's messages all live
   * on one shard, so its shard's limit is the group's. Checked here before
   * any shard is changed; shard 0 answers first, so a refusal by the
   * server changes nothing either.
   */
  async configSet(settings = {}) {
    c.configArgs(settings); // refuses what no shard would take
    const k = this.shards.length;
    const shardSettings = { ...settings };
    if (settings.rate != null) {
      const rate = c.splitRate(settings.rate);
      if (rate != null) {
        if (rate.n < k) throw new RangeError(`rate ${settings.rate} cannot be split over ${k} shards: each gets floor(n / ${k}) deliveries, so n must be at least ${k}`);
        shardSettings.rate = `${Math.floor(rate.n / k)}/${rate.per}`;
      }
    }
    for (const name of ['maxInflight', 'retainMax', 'events']) {
      const n = settings[name];
      if (n == null || n === 'DEFAULT') continue;
      if (n > 0 && n < k) throw new RangeError(`${name} ${n} cannot be split over ${k} shards: each gets floor(n / ${k}), so n must be at least ${k} (or 0 to remove it)`);
      shardSettings[name] = Math.floor(n / k);
    }
    const [first, ...rest] = this.shards;
    await first.configSet(shardSettings);
    await Promise.all(rest.map((shard) => shard.configSet(shardSettings)));
  }

  /** The queue a schedule lives on: placed by its name, as a message by its basis. */
  scheduleShard(name) {
    return this.shardFor(c.bytesArg('name', name, 1007));
  }

  /** DQ.SCHEDULE on the schedule's shard (see scheduleShard). */
  schedule(name, payload, options = {}) {
    return this.scheduleShard(name).schedule(name, payload, options);
  }

  /** DQ.UNSCHEDULE of each name on its shard: how many were schedules. */
  async unschedule(...names) {
    if (names.length === 0) throw new TypeError('unschedule needs at least one name');
    const byShard = new Map();
    for (const name of names) {
      const shard = this.scheduleShard(name);
      if (!byShard.has(shard)) byShard.set(shard, []);
      byShard.get(shard).push(name);
    }
    const counts = await Promise.all([...byShard].map(([shard, some]) => shard.unschedule(...some)));
    return counts.reduce((a, b) => a + b, 0);
  }

  /** Every shard's schedules, by name, each with `shard`. */
  async schedules() {
    const all = await Promise.all(this.shards.map(async (s) => (await s.schedules()).map((r) => ({ ...r, shard: s.name }))));
    return all.flat().sort((a, b) => Buffer.compare(Buffer.from(a.name), Buffer.from(b.name)));
  }

  /** DQ.PAUSE on every shard; with `group`, on the group's shard only. */
  async pause(options = {}) {
    if (options !== null && typeof options === 'object' && options.group != null) {
      return this.shardFor(c.bytesArg('group', options.group)).pause(options);
    }
    const [first, ...rest] = this.shards;
    await first.pause(options);
    await Promise.all(rest.map((shard) => shard.pause(options)));
  }

  /** DQ.RESUME on every shard: whether any was paused; with `group`, on the group's shard only: whether the group was. */
  async resume(options = {}) {
    if (options !== null && typeof options === 'object' && options.group != null) {
      return this.shardFor(c.bytesArg('group', options.group)).resume(options);
    }
    return (await Promise.all(this.shards.map((s) => s.resume(options)))).some(Boolean);
  }

  /**
   * Every shard's events, merged: one reader per shard, each with its own
   * seq. `after` and `position` are objects of seqs by shard name; each
   * event carries `shard`.
   */
  events(options = {}) {
    return new ev.MergedEventReader(this, ev.readOptions(options, 'events', this.shardNames));
  }

  /** Queue.listen over every shard; `position` is an object of seqs by shard name. */
  listen(options = {}) {
    return new ev.QueueEventsListener(this, options);
  }

  /** Each shard's newest seq, by shard name: the `after` of a reader of what is written from now on. */
  async lastEventSeq() {
    const seqs = await Promise.all(this.shards.map((s) => s.lastEventSeq()));
    return Object.fromEntries(this.shardNames.map((name, i) => [name, seqs[i]]));
  }
}

/** DQ.QUEUES: every queue of the server, or of every master of a cluster, sorted. */
async function queues(client) {
  const nodes = typeof client.nodes === 'function' ? client.nodes('master') : [client];
  const lists = await Promise.all(nodes.map((n) => c.send(n, 'DQ.QUEUES')));
  return [...new Set(lists.flat().map(c.str))].sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)));
}

module.exports = { Queue, ShardedQueue, queues };
