// Types of dq-client (index.js, and index.mjs for ES modules). test/types.ts
// checks them with tsc. ioredis is a peer dependency (5 or 6): these are the
// types of the ioredis your project has.
import type { Redis, Cluster } from 'ioredis';
import type { EventEmitter } from 'events';

export type Client = Redis | Cluster;
export type Bytes = string | Buffer;
/** 'done': finished by ACK or DONE and kept by a retention (RETAIN), with its result. */
export type State = 'DELAYED' | 'READY' | 'INFLIGHT' | 'DEAD' | 'DONE' | 'delayed' | 'ready' | 'inflight' | 'dead' | 'done';
/**
 * A duration: a number of milliseconds, or a string in the server's grammar,
 * a whole number alone (ms) or with a unit ms, s, m, h or d: '1500', '250ms',
 * '30s', '5m', '2h', '7d' (no fractions, signs, spaces or upper-case units;
 * at most 2^53 - 1 ms). Checked before sending (TypeError, RangeError) and
 * sent as a number of ms.
 */
export type Duration = number | string;

export interface AddOptions {
  /** Due this long from now (DELAY): 5000, '30s', '2h'. */
  delayMs?: Duration;
  /** Due at this Unix time in ms (AT). */
  atMs?: number;
  /** Your id, 1 to 1024 bytes; else the server makes one (a sharded queue: this library). */
  id?: Bytes;
  nx?: boolean;
  xx?: boolean;
  priority?: number;
  maxAttempts?: number;
  /** exp:BASE:MAX, fixed:D or a list such as 15s,3m,1h. */
  backoff?: string;
  group?: Bytes;
  /** Dead-lettered ('expired') if not acknowledged this long after the ADD (TTL). */
  ttlMs?: Duration;
  /** Kept as 'done', with its result, this long once finished (RETAIN), over the queue's retention; 0: not kept. */
  retainMs?: Duration;
  /** Sharded queues: the shard basis when there is no group. Ignored by a Queue. */
  shardKey?: Bytes;
}

export interface NackOptions {
  delayMs?: Duration;
  dead?: boolean;
  attempt?: number;
  error?: string;
}

export interface Delivery {
  id: string;
  payload: Buffer;
  /** Which delivery of the message this is, from 1. */
  attempt: number;
  queue: string;
  /** Set when a heartbeat found the delivery over: its lease lost (another consumer may hold the message), or the message cancelled. */
  lost: boolean;
  /** Set when a heartbeat found the message gone: DQ.CANCEL or DQ.PURGE while the handler ran. */
  cancelled: boolean;
  /** Why the delivery is over: 'cancelled' (the message is gone), 'lost' (it is still there: the lease ran out), null while it is not. */
  lostReason: 'lost' | 'cancelled' | null;
  /** Aborted when the delivery is over: lease lost or message cancelled (set while a Worker handles the delivery). */
  signal?: AbortSignal;
  /**
   * Reports how far the work got (at most 64 KiB): one fenced
   * `DQ.TOUCH queue id [LEASE ms] ATTEMPT n PROGRESS value`, renewing the
   * lease by the one its POP took (a Worker's leaseMs). The new lease
   * deadline (Unix ms); StaleDelivery once the delivery is over.
   */
  progress(value: Bytes): Promise<number>;
}

/**
 * What became of a message (DQ.WAIT): 'done' and its result (null after a
 * plain ACK), 'dead' and its last error (null when none), 'gone' and null
 * (never added, cancelled, purged, or finished with no retention to keep it).
 */
export interface JobOutcome {
  state: 'done' | 'dead' | 'gone';
  value: Buffer | null;
}

export interface Entry {
  id: string;
  payload: Buffer;
  attempt: number;
  time: number;
  lastError: string | null;
  /** ShardedQueue only: the shard it is in. */
  shard?: string;
}

/** DQ.STATS, field names as the server gives them. */
export interface Stats {
  delayed: number;
  ready: number;
  inflight: number;
  dead: number;
  /** Finished messages kept by a retention. */
  done: number;
  added: number;
  delivered: number;
  acked: number;
  nacked: number;
  retried: number;
  'lease-expired': number;
  'dead-lettered': number;
  expired: number;
  redriven: number;
  cancelled: number;
  purged: number;
  /** Done messages let go by their retention or RETAINMAX. */
  dropped: number;
  /** POPs that delivered fewer than they asked (and than were ready) because of a pause, RATE or MAXINFLIGHT. */
  throttled: number;
  'oldest-ready-age-ms': number | null;
  'next-due-at': number | null;
  /** Recurring schedules the queue holds. */
  schedules: number;
  /** Groups that exist now: with a message waiting, ready, in flight or delayed for a retry, or a pause (a ShardedQueue: the shards' summed). */
  groups: number;
  /** 1 while paused (a ShardedQueue: while any shard is). */
  paused: 0 | 1;
  /** Unix ms the pause ends; null when not paused or paused until resume(). */
  'paused-until': number | null;
  /** '100/1s', null when none (a ShardedQueue: the whole queue's, the shards' summed). */
  rate: string | null;
  /** null when none (a ShardedQueue: the shards' summed). */
  'max-inflight': number | null;
}

/** DQ.GET, field names as the server gives them. */
export interface Message {
  id: string;
  state: 'delayed' | 'ready' | 'inflight' | 'dead' | 'done';
  payload: Buffer;
  priority: number;
  attempt: number;
  'due-at': number;
  'lease-deadline': number | null;
  'added-at': number;
  'replacement-pending': number;
  'max-attempts': number;
  'max-attempts-from': string;
  backoff: string;
  'backoff-from': string;
  'dead-reason': string | null;
  'died-at': number | null;
  'expires-at': number | null;
  group: string | null;
  'waiting-for': string | null;
  'attempts-left': number;
  'last-error': string | null;
  /** What DQ.DONE kept (empty is a result); null unless done by DONE (a plain ACK keeps none). */
  result: Buffer | null;
  /** Unix ms of the ACK or DONE that finished it; null unless done. */
  'finished-at': number | null;
  /** Unix ms its retention runs out; null unless done. */
  'retained-until': number | null;
  /** The last progress its delivery reported: the running one's, or once done the last one's; null when none was. */
  progress: Buffer | null;
  /** ShardedQueue.get only. */
  shard?: string;
}

export interface QueueConfig {
  'lease-ms': number;
  'lease-ms-from': string;
  'max-attempts': number;
  'max-attempts-from': string;
  backoff: string;
  'backoff-from': string;
  /** How long a finished message is kept as 'done' (0: not kept). */
  'retain-ms': number;
  /** 'queue' or 'module'. */
  'retain-ms-from': string;
  /** At most this many done messages; null: no cap (a ShardedQueue: the shards' caps summed). */
  'retain-max': number | null;
  /** How many of its last events the queue keeps (0: none); a ShardedQueue: the shards' summed. */
  events: number;
  /** At most this many messages of each group out at once (1 unless set). A ShardedQueue: shard 0's, as every shard's. */
  'group-limit': number;
  /** Each group's deliveries at most n in any window: '10/1s'; null when none. A ShardedQueue: shard 0's, as every shard's. */
  'group-rate': string | null;
  /** How POP picks: 'priority' (across groups) or 'fair' (the groups with a ready message in turn). */
  order: 'priority' | 'fair';
  rate: string | null;
  'max-inflight': number | null;
  paused: 0 | 1;
  'paused-until': number | null;
  throttled: number;
}

export interface ConfigSettings {
  leaseMs?: Duration | 'DEFAULT';
  maxAttempts?: number | 'DEFAULT';
  backoff?: string;
  /** At most n deliveries in any window of the duration: '100/1s', '5000/1h'; 0 (or 'DEFAULT') removes it. A ShardedQueue of k shards gives each floor(n / k). */
  rate?: string | 0 | 'DEFAULT';
  /** At most this many messages in flight at once; 0 (or 'DEFAULT') removes it. A ShardedQueue of k shards gives each floor(n / k). */
  maxInflight?: number | 'DEFAULT';
  /** Keep finished messages as 'done' this long (RETAIN); 0 keeps none, 'DEFAULT' follows the module's dq.retain-ms. */
  retainMs?: Duration | 'DEFAULT';
  /** At most this many done messages, the earliest finished dropped first (RETAINMAX); 0 (or 'DEFAULT'): no cap. A ShardedQueue of k shards gives each floor(n / k). */
  retainMax?: number | 'DEFAULT';
  /** Keep the queue's last n events for events() and listen() (EVENTS), at most 100000000; 0 (or 'DEFAULT') keeps none. A ShardedQueue of k shards gives each floor(n / k). */
  events?: number | 'DEFAULT';
  /** At most n messages of each group ready or in flight at once (GROUPLIMIT), 1 to 1000000; 'DEFAULT': 1. A ShardedQueue gives every shard n (a group lives on one shard). */
  groupLimit?: number | 'DEFAULT';
  /** Each group at most n deliveries in any window of the duration (GROUPRATE): '10/1s'; 0 (or 'DEFAULT') removes it. A ShardedQueue gives every shard the same. */
  groupRate?: string | 0 | 'DEFAULT';
  /** 'fair': POP serves the groups with a ready message in turn; 'priority' (the default, also 'DEFAULT'): by priority across groups. Any case. */
  order?: 'priority' | 'fair' | 'PRIORITY' | 'FAIR' | 'DEFAULT';
}

/** A group of a queue (DQ.GROUPS). */
export interface GroupInfo {
  name: string;
  /** Its due messages held back: by GROUPLIMIT, GROUPRATE or its pause. */
  waiting: number;
  ready: number;
  inflight: number;
  /** Whether the group is paused (pause({ group })). */
  paused: boolean;
  /** Unix ms its pause ends; null when not paused or paused until resume(). */
  pausedUntil: number | null;
  /** ShardedQueue only: the shard the group lives on. */
  shard?: string;
}

export interface GroupsOptions {
  /** Only the groups whose name matches this glob-style pattern (as SCAN MATCH). */
  match?: Bytes;
  /** Groups looked at per DQ.GROUPS (default 100; 1 to 10000). */
  count?: number;
}

/** DQ.SCHEDULE's options: exactly one of `every` and `cron`. */
export interface ScheduleOptions {
  /** A duration of at least 1 s: '30s', '5m', '1h', '1d', or a number of ms. */
  every?: Duration;
  /** Five fields (minute hour day-of-month month day-of-week), or @hourly, @daily, @weekly, @monthly, @yearly. */
  cron?: string;
  /** An IANA zone for cron (default UTC). */
  tz?: string;
  /** No run before this Unix ms (EVERY counts its runs from it; default: now). */
  start?: number | Date;
  /** No run after this Unix ms. */
  end?: number | Date;
  /** No more runs once this many were made. */
  limit?: number;
  /** Run times missed while no master held the queue: 'skip', 'one' (default), 'all'. */
  missed?: 'skip' | 'one' | 'all' | 'SKIP' | 'ONE' | 'ALL';
  /** 'skip': no run while the previous run's message is still in the queue; 'allow' (default). */
  overlap?: 'allow' | 'skip' | 'ALLOW' | 'SKIP';
  /** Leave an existing schedule of this name untouched (the reply is then null). */
  nx?: boolean;
  /** What each run adds, as DQ.ADD's options. */
  priority?: number;
  maxAttempts?: number;
  backoff?: string;
  group?: Bytes;
  ttlMs?: Duration;
}

/** A DQ.SCHEDULES record; null where the server says nil. */
export interface Schedule {
  name: string;
  /** 'every 5m' or 'cron 0 8 * * *'. */
  spec: string;
  tz: string;
  /** Unix ms of the next run; null when none is left. */
  nextRun: number | null;
  /** Unix ms of the last run made; null before the first. */
  lastRun: number | null;
  runs: number;
  skipped: number;
  limit: number | null;
  start: number;
  end: number | null;
  missed: 'skip' | 'one' | 'all';
  overlap: 'allow' | 'skip';
  payload: Buffer;
  priority: number;
  maxAttempts: number | null;
  backoff: string | null;
  group: string | null;
  /** TTL in ms of each run's message. */
  ttl: number | null;
  /** ShardedQueue.schedules only: the shard it lives on. */
  shard?: string;
}

/** What DQ.EVENTS writes, one per change of a message's state (docs/semantics.md, "Events"). */
export type EventType = 'added' | 'replaced' | 'ready' | 'delivered' | 'done' | 'retry' | 'dead' | 'cancelled'
  | 'redriven' | 'progress' | 'dropped' | 'purged' | 'paused' | 'resumed';

/** The queue-wide events: no id. */
export type QueueWideEventType = 'purged' | 'paused' | 'resumed';

/**
 * One event of type T: `seq` (the queue's own numbering from 1; a shard's
 * on a ShardedQueue), `at` (Unix ms), `id` (null for the queue-wide ones),
 * `attempt` (null where none applies) and `detail`: the reason of `retry`
 * and `dead` ('nack', 'lease-expired', ...), of `replaced` after a delivery
 * ended, how many for `purged`, the reported value (a Buffer) for
 * `progress`, the group's name for `paused` and `resumed` of a group (null
 * for the queue's own), else null.
 */
export interface EventOf<T extends EventType> {
  seq: number;
  at: number;
  type: T;
  id: T extends QueueWideEventType ? null : string;
  attempt: number | null;
  detail: T extends 'progress' ? Buffer : T extends 'purged' ? string : string | null;
  /** ShardedQueue only: the shard (its queue name) the event and its seq belong to. */
  shard?: string;
}

/** Any event, narrowed by `type`. */
export type QueueEvent = { [T in EventType]: EventOf<T> }[EventType];

/** A sharded queue's position: the last seq read of each shard, by shard name. */
export type ShardPositions = Record<string, number>;

export interface EventsOptions {
  /** Read the events after this seq (one you kept from an event, or a reader's `position`); none: from the oldest kept. */
  after?: number;
  /** Events per DQ.EVENTS (default the server's, 100; at most 10000). */
  count?: number;
  /** How long each DQ.EVENTS blocks before the reader sends the next (default 10 s; 0: for ever). */
  blockMs?: Duration;
  /** Aborting it closes the reader. */
  signal?: AbortSignal;
}

export interface ShardedEventsOptions extends Omit<EventsOptions, 'after'> {
  /** The seq to read after of each shard, by shard name (a reader's `position`); a shard not named: from its oldest kept. */
  after?: ShardPositions;
}

/**
 * An async iterator over a queue's events, oldest first, for ever: it ends
 * only when closed (close(), `break`, the signal, the client closed), and
 * throws EventGapError or EventLogRestarted rather than skip an event.
 */
export interface EventReader<P> extends AsyncIterableIterator<QueueEvent> {
  /** The seq of the last event given (a ShardedQueue: by shard name): the `after` that goes on from there. */
  readonly position: P;
  readonly closed: boolean;
  /** Ends it; a blocked read ends now (its connection is closed). */
  close(): void;
  next(): Promise<IteratorResult<QueueEvent, undefined>>;
  return(): Promise<IteratorResult<QueueEvent, undefined>>;
  [Symbol.asyncIterator](): EventReader<P>;
}

/**
 * BullMQ's QueueEvents for dq: each event under its type ('done' for
 * BullMQ's 'completed', 'dead' for 'failed', ...) and under 'event'; 'gap'
 * and 'restart' (skipped knowingly only when listened to: else an
 * 'error'), 'error' (it stops), 'close'.
 */
export interface QueueEventsListener<P> extends EventEmitter {
  /** The seq of the last event emitted (null before any; a ShardedQueue: by shard name). */
  readonly position: P;
  /** Stops; resolves once every read has ended and 'close' was emitted. */
  close(): Promise<void>;
  on<T extends EventType>(type: T, listener: (event: EventOf<T>) => void): this;
  on(type: 'event', listener: (event: QueueEvent) => void): this;
  on(type: 'gap', listener: (error: EventGapError) => void): this;
  on(type: 'restart', listener: (error: EventLogRestarted) => void): this;
  on(type: 'error', listener: (error: Error) => void): this;
  on(type: 'close', listener: () => void): this;
  on(type: string | symbol, listener: (...args: any[]) => void): this;
  once<T extends EventType>(type: T, listener: (event: EventOf<T>) => void): this;
  once(type: 'event', listener: (event: QueueEvent) => void): this;
  once(type: 'gap', listener: (error: EventGapError) => void): this;
  once(type: 'restart', listener: (error: EventLogRestarted) => void): this;
  once(type: 'error', listener: (error: Error) => void): this;
  once(type: 'close', listener: () => void): this;
  once(type: string | symbol, listener: (...args: any[]) => void): this;
}

export class Queue {
  constructor(client: Client, name: string);
  readonly client: Client;
  readonly name: string;
  add(payload: Bytes, options?: AddOptions): Promise<string | null>;
  pop(options?: { count?: number; blockMs?: Duration; leaseMs?: Duration }): Promise<Delivery[]>;
  ack(...ids: Bytes[]): Promise<number>;
  /** DQ.DONE: as ack, keeping each result while a retention keeps the message; [id, result] pairs (an array or a Map). */
  done(results: Iterable<readonly [Bytes, Bytes]>): Promise<number>;
  /** DQ.WAIT: the outcome, or null when there is none after timeoutMs (none or 0: look once); blocks a connection of its own. */
  wait(id: Bytes, options?: { timeoutMs?: Duration }): Promise<JobOutcome | null>;
  nack(id: Bytes, options?: NackOptions): Promise<'delayed' | 'ready' | 'dead'>;
  touch(id: Bytes, options?: { leaseMs?: Duration; attempt?: number; progress?: Bytes }): Promise<number>;
  /** DQ.TOUCH ... PROGRESS for code that pops by itself: the new lease deadline. */
  progress(id: Bytes, value: Bytes, options?: { leaseMs?: Duration; attempt?: number }): Promise<number>;
  stats(): Promise<Stats>;
  get(id: Bytes): Promise<Message | null>;
  peek(state: State, count?: number): Promise<Entry[]>;
  scan(options?: { state?: State; count?: number }): AsyncGenerator<Entry>;
  /** Every group (DQ.GROUPS, paged until its cursor is 0), in name order. */
  groups(options?: GroupsOptions): AsyncGenerator<GroupInfo>;
  redrive(options?: { count?: number; ids?: Bytes[] }): Promise<number>;
  cancel(...ids: Bytes[]): Promise<number>;
  purge(state?: State): Promise<number>;
  config(): Promise<QueueConfig>;
  configSet(settings: ConfigSettings): Promise<void>;
  /** DQ.SCHEDULE: the next run time (Unix ms), or null when none is left or `nx` found the schedule. */
  schedule(name: Bytes, payload: Bytes, options: ScheduleOptions): Promise<number | null>;
  /** DQ.UNSCHEDULE: how many of the names were schedules. */
  unschedule(...names: Bytes[]): Promise<number>;
  /** DQ.SCHEDULES: every schedule, by name. */
  schedules(): Promise<Schedule[]>;
  /** DQ.PAUSE: POP delivers nothing until resume(), or for `forMs`; with `group`, nothing of that group only. */
  pause(options?: { forMs?: Duration; group?: Bytes }): Promise<void>;
  /** DQ.RESUME: whether the queue (with `group`: that group) was paused. */
  resume(options?: { group?: Bytes }): Promise<boolean>;
  /** The queue's events (DQ.EVENTS ... BLOCK in a loop on a connection of its own), after `after`. */
  events(options?: EventsOptions): EventReader<number | null>;
  /** An EventEmitter of the queue's events, from `after`, until close(). */
  listen(options?: Omit<EventsOptions, 'signal'>): QueueEventsListener<number | null>;
  /** The newest seq written (0: none): `events({ after: await q.lastEventSeq() })` reads from now on. */
  lastEventSeq(): Promise<number>;
}

export interface Basis {
  group?: Bytes;
  shardKey?: Bytes;
}

export class ShardedQueue {
  constructor(client: Client, name: string, options: { shards: number });
  readonly client: Client;
  readonly name: string;
  readonly shardNames: string[];
  readonly shards: Queue[];
  shardFor(basis: Bytes): Queue;
  add(payload: Bytes, options?: AddOptions): Promise<string | null>;
  stats(): Promise<Stats>;
  get(id: Bytes, basis?: Basis): Promise<Message | null>;
  /** Queue.wait on the shard of `group` or `shardKey` (the basis it was added with), else of the id. */
  wait(id: Bytes, options?: { timeoutMs?: Duration } & Basis): Promise<JobOutcome | null>;
  cancel(id: Bytes, basis?: Basis): Promise<number>;
  peek(state: State, count?: number): Promise<Entry[]>;
  scan(options?: { state?: State; count?: number }): AsyncGenerator<Entry>;
  /** Every group of every shard, shard after shard, each with `shard`. */
  groups(options?: GroupsOptions): AsyncGenerator<GroupInfo>;
  redrive(): Promise<number>;
  purge(state?: State): Promise<number>;
  config(): Promise<QueueConfig>;
  /** On every shard; rate, maxInflight, retainMax and events are split, floor(n / shards) each (n < shards is refused); groupLimit, groupRate and order are not (a group lives on one shard). */
  configSet(settings: ConfigSettings): Promise<void>;
  /** The shard a schedule of this name lives on (as shardFor). */
  scheduleShard(name: Bytes): Queue;
  schedule(name: Bytes, payload: Bytes, options: ScheduleOptions): Promise<number | null>;
  unschedule(...names: Bytes[]): Promise<number>;
  /** Every shard's schedules, by name, each with `shard`. */
  schedules(): Promise<Schedule[]>;
  /** On every shard; with `group`, on the group's shard only. */
  pause(options?: { forMs?: Duration; group?: Bytes }): Promise<void>;
  /** On every shard: whether any was paused; with `group`, on the group's shard: whether the group was. */
  resume(options?: { group?: Bytes }): Promise<boolean>;
  /** Every shard's events merged, one reader per shard, each event with its `shard` and that shard's seq. */
  events(options?: ShardedEventsOptions): EventReader<ShardPositions>;
  /** Queue.listen over every shard. */
  listen(options?: Omit<ShardedEventsOptions, 'signal'>): QueueEventsListener<ShardPositions>;
  /** Each shard's newest seq, by shard name: the `after` that reads from now on. */
  lastEventSeq(): Promise<ShardPositions>;
}

/** What the worker sent for a delivery: docs/client-vocabulary.md. */
export type Action = 'ack' | 'done' | 'nack' | 'dead';

/** What the server made of it: docs/client-vocabulary.md. */
export type SettlementState = 'acked' | 'acked-late' | 'delayed' | 'ready' | 'dead' | 'stale' | 'cancelled' | 'unsettled';

export interface Outcome {
  /** What the handler asked for: 'ack' (it resolved with no result), 'done' (it resolved with a result: DQ.DONE), 'nack' (it threw, or threw Retry: a retry is scheduled, or the message dies if its attempts are used up), 'dead' (it threw Permanent). */
  action: Action;
  /**
   * 'acked'; 'acked-late' (the DQ.ACK of its batch counted fewer: a message of the batch was no longer in flight);
   * the NACK's new state ('delayed', 'ready', 'dead'); 'stale' (the delivery was over, its lease lost: nothing changed);
   * 'cancelled' (the message was cancelled or purged while the handler ran: nothing was sent);
   * 'unsettled' (the call failed, `failure` says why: the message comes back after its lease).
   */
  state: SettlementState;
  /** The ERROR text sent with the NACK, if any. */
  error: string | null;
  failure?: Error;
}

export interface Logger {
  info(message: string): void;
  warn(message: string): void;
  error(message: string): void;
}

export interface WorkerOptions {
  /** Handlers running at once (default 1). */
  concurrency?: number;
  /** The lease each POP takes and each heartbeat TOUCH renews, renewed every third of it (default 30000; at least 3 ms). */
  leaseMs?: Duration;
  /** How long an idle poller's POP blocks (default 1000); a stop waits for it at most this long. */
  blockMs?: Duration;
  /** Stop on SIGTERM and SIGINT while run() runs (default false). Close your own client after run() returns. */
  handleSignals?: boolean;
  logger?: Logger;
  onSettled?: (delivery: Delivery, outcome: Outcome) => void | Promise<void>;
}

/**
 * Several plain Queues of one client, on a standalone server or all in one
 * cluster hash slot (a common {tag}), are polled by one DQ.MPOP in the
 * order given (strict priority); anything else (keys in several slots,
 * ShardedQueues) by one poller per queue (per shard), in no order.
 */
/**
 * What a handler returns: a string or a Buffer is the job's result
 * (DQ.DONE, kept while a retention keeps the message); undefined or null
 * is a plain DQ.ACK.
 */
export type HandlerResult = Bytes | null | undefined | void;

export type Handler = (delivery: Delivery) => HandlerResult | Promise<HandlerResult>;

export class Worker {
  constructor(queues: Queue | ShardedQueue | Array<Queue | ShardedQueue>, handler: Handler, options?: WorkerOptions);
  run(): Promise<void>;
  stop(): void;
}

export class DqError extends Error {}
export class StaleDelivery extends DqError {}
export class UnknownMessage extends DqError {}
export class WrongType extends DqError {}
export class OutOfMemory extends DqError {}
/** GAP: `after` is older than the queue keeps; `oldest` is the oldest seq kept (read on after oldest - 1, knowingly). */
export class EventGapError extends DqError {
  readonly oldest: number;
  readonly queue: string | null;
  readonly after: number | null;
  /** The shard, when read through a ShardedQueue. */
  readonly shard: string | null;
}
/** The queue's last seq fell below `after`: it was deleted or replaced, its new log starts at 1 (read on after 0). */
export class EventLogRestarted extends DqError {
  readonly queue: string;
  readonly after: number;
  readonly lastSeq: number;
  readonly shard: string | null;
}
export class Permanent extends Error {
  constructor(message: string);
}
export class Retry extends Error {
  /** `delayMs`: a Duration, kept as a number of ms. */
  constructor(delayMs?: Duration | null, message?: string);
  readonly delayMs: number | null;
}

export function queues(client: Client): Promise<string[]>;
export function truncateError(text: string, max?: number): string;
export function crc32(data: Buffer): number;
export function keySlot(key: Bytes): number;
export function shardOf(basis: Bytes, shards: number): number;
export function shardNames(name: string, shards: number): string[];
export const MAX_ERROR_BYTES: number;
/** The longest result DQ.DONE keeps (512 MiB): a longer one makes the message dead. */
export const MAX_RESULT_BYTES: number;
/** The longest progress value (64 KiB). */
export const MAX_PROGRESS_BYTES: number;
export const MAX_SHARDS: number;
