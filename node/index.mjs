// dq-client as an ES module: the CommonJS library (index.js) under named
// exports, so `import { Queue, Worker } from 'dq-client'` and
// `import dq from 'dq-client'` give the very same classes as require().
import dq from './index.js';

export default dq;
export const {
  Queue,
  ShardedQueue,
  Worker,
  queues,
  DqError,
  StaleDelivery,
  UnknownMessage,
  WrongType,
  OutOfMemory,
  EventGapError,
  EventLogRestarted,
  Permanent,
  Retry,
  truncateError,
  MAX_ERROR_BYTES,
  MAX_RESULT_BYTES,
  MAX_PROGRESS_BYTES,
  crc32,
  keySlot,
  shardOf,
  shardNames,
  MAX_SHARDS,
} = dq;
