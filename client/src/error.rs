/// What can fail a call, or stop a [`Consumer`](crate::Consumer).
///
/// The server's errors that a program acts on have their own variants; the
/// mapping from a reply is in one place, `From<redis::RedisError>`.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// `STALE`: the delivery a fenced NACK or TOUCH names is over — its
    /// lease ran out, or it was acknowledged or failed. Nothing changed.
    #[error("{0}")]
    StaleDelivery(String),
    /// NACK or TOUCH without ATTEMPT found the id not in flight.
    #[error("message '{id}' is not in flight in queue '{queue}'")]
    UnknownMessage { queue: String, id: String },
    /// `WRONGTYPE`: the key under the queue's name is not a dq queue.
    #[error("{0}")]
    WrongType(String),
    /// `OOM`, or the eviction guard's refusal: DQ.ADD cannot add now.
    #[error("{0}")]
    OutOfMemory(String),
    /// Any other error the server replied, or a connection failure.
    #[error("redis: {0}")]
    Redis(redis::RedisError),
    /// The server answered something a dq command never answers (another
    /// module under the same name, or a version this client does not know).
    #[error("unexpected reply to {command}: {detail}")]
    Reply {
        command: &'static str,
        detail: String,
    },
    /// `GAP`: DQ.EVENTS was asked for the events after a seq the queue
    /// no longer keeps (its log keeps the last n, `DQ.CONFIG queue SET
    /// EVENTS n`). `oldest` is the oldest seq it still keeps: read on
    /// after `oldest - 1` (the events between are gone), or rebuild what
    /// you keep from DQ.SCAN. Never a silent skip.
    #[error("events of queue '{queue}' were trimmed: the oldest event kept is {oldest}")]
    Gap { queue: String, oldest: u64 },
    /// DQ.EVENTS replied a last seq below the one the reader read after:
    /// the log it followed is gone (the queue was deleted, or replaced by
    /// RESTORE) and the queue's log started over. Read again from 0 (or
    /// from the oldest kept) for the new log's events.
    #[error(
        "the event log of queue '{queue}' started over: its last seq is {last_seq}, below {after}"
    )]
    EventLogRestarted {
        queue: String,
        after: u64,
        last_seq: u64,
    },
    /// Refused before anything was sent: a configuration that cannot work
    /// (a Consumer's, a sharded queue's), or a call the server would refuse
    /// for its arguments' shape — an empty id, a count or lease of 0,
    /// DELAY with AT, NX with XX, EVERY under 1 s (the calls every dq
    /// library refuses: tests/vectors/commands.json).
    #[error("invalid configuration: {0}")]
    Config(String),
}

/// The server's whole error text, as it sent it: `CODE detail`.
fn server_text(e: &redis::RedisError) -> String {
    match (e.code(), e.detail()) {
        (Some(code), Some(detail)) => format!("{code} {detail}"),
        _ => e.to_string(),
    }
}

impl From<redis::RedisError> for Error {
    fn from(e: redis::RedisError) -> Self {
        match e.code() {
            Some("STALE") => Error::StaleDelivery(server_text(&e)),
            Some("WRONGTYPE") => Error::WrongType(server_text(&e)),
            Some("OOM") => Error::OutOfMemory(server_text(&e)),
            // The eviction guard (see docs/operations.md, OOM).
            Some("ERR")
                if e.detail()
                    .is_some_and(|d| d.starts_with("maxmemory-policy is")) =>
            {
                Error::OutOfMemory(server_text(&e))
            }
            _ => Error::Redis(e),
        }
    }
}

impl Error {
    /// Whether retrying the same call can succeed: the connection failed or
    /// timed out, rather than the server refusing the call.
    pub fn is_transient(&self) -> bool {
        matches!(self, Error::Redis(e) if e.is_io_error() || e.is_timeout() || e.is_connection_dropped())
    }
}
