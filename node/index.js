'use strict';
// dq-client: queues, sharded queues and a worker for dq (the Redis delay-queue
// module), on ioredis. README.md says how each maps onto the commands.

const commands = require('./lib/commands');
const { Queue, ShardedQueue, queues } = require('./lib/queue');
const { Worker } = require('./lib/worker');
const { crc32, keySlot, shardOf, shardNames, MAX_SHARDS } = require('./lib/shard');

module.exports = {
  Queue,
  ShardedQueue,
  Worker,
  queues,
  DqError: commands.DqError,
  StaleDelivery: commands.StaleDelivery,
  UnknownMessage: commands.UnknownMessage,
  WrongType: commands.WrongType,
  OutOfMemory: commands.OutOfMemory,
  EventGapError: commands.EventGapError,
  EventLogRestarted: commands.EventLogRestarted,
  Permanent: commands.Permanent,
  Retry: commands.Retry,
  truncateError: commands.truncateError,
  MAX_ERROR_BYTES: commands.MAX_ERROR_BYTES,
  MAX_RESULT_BYTES: commands.MAX_RESULT_BYTES,
  MAX_PROGRESS_BYTES: commands.MAX_PROGRESS_BYTES,
  crc32,
  keySlot,
  shardOf,
  shardNames,
  MAX_SHARDS,
};
