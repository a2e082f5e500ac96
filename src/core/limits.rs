//! Every bound dq puts on what a client may store or ask for, in one
//! place: the grammar refuses what exceeds them, the codec refuses a
//! loaded value that does, and the docs quote them.

/// The latest Unix time in ms dq stores, so that a time stays exact in any
/// client's double (and in a ZSET score, for the retired multi-key
/// layout): up to 2^53, about year 287,000.
pub const MAX_TIME_MS: u64 = (1 << 53) - 1;

/// Longest message id (and GROUP name) accepted.
pub const MAX_ID_LEN: usize = 1024;

/// Most messages one command handles (COUNT).
pub const MAX_COUNT: usize = 10_000;

/// Longest ERROR text NACK keeps: a summary of why the work failed, held
/// by every replica and the AOF, not a log.
pub const MAX_ERROR_LEN: usize = 4096;

/// Most steps a BACKOFF step list may have: a record carries its backoff.
pub const MAX_STEPS: usize = 64;

/// Longest payload (or NACK error text) a load accepts: the server's own
/// bulk limit is lower unless raised.
pub const MAX_PAYLOAD: usize = 512 * 1024 * 1024;

/// Longest schedule name: its runs' ids are `name@T`, T a Unix time in ms
/// of at most 16 digits, and must fit [`MAX_ID_LEN`].
pub const MAX_SCHEDULE_NAME_LEN: usize = MAX_ID_LEN - 17;

/// Longest cron expression or time zone name accepted.
pub const MAX_CRON_LEN: usize = 256;

/// Runs MISSED ALL makes at most for the run times a schedule missed.
pub const MAX_MISSED_RUNS: usize = 1000;

/// Shortest EVERY.
pub const MIN_EVERY_MS: u64 = 1000;

/// Largest RATE limit: the delivery log holds at most this many entries.
pub const MAX_RATE: u64 = 1_000_000;

/// PROGRESS (TOUCH): what a consumer reports of a delivery under way.
pub const MAX_PROGRESS_LEN: usize = 64 * 1024;

/// A result (DONE): as long as a payload may be.
pub const MAX_RESULT_LEN: usize = MAX_PAYLOAD;

/// RETAINMAX: done messages a queue keeps at most (0: no cap).
pub const MAX_RETAIN_MAX: u64 = MAX_TIME_MS;

/// The most events a queue keeps (DQ.CONFIG SET EVENTS): about 5 GB of
/// events of a short id.
pub const MAX_EVENTS: u64 = 100_000_000;

/// The most events one DQ.EVENTS returns.
pub const MAX_EVENTS_COUNT: usize = 10_000;

/// GROUPLIMIT's largest value.
pub const MAX_GROUP_LIMIT: u64 = 1_000_000;
