//! The one error type of dq. (It becomes a reply in one place:
//! `server::reply::error`.)
//!
//! Every message starts with an upper-case code (`ERR`, `WRONGTYPE`, ...) so a
//! client sees the same shape as errors from built-in commands.

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DqError {
    #[error("ERR wrong number of arguments for '{0}' command")]
    WrongArity(&'static str),

    /// A duration argument that is not one: `what` it must be ("a
    /// duration", "a positive duration", "a duration of at least 1s").
    #[error("ERR {option} must be {what}: whole milliseconds such as 1500, or a whole number with a unit ms, s, m, h or d such as 30s, 5m or 7d")]
    BadDuration {
        option: &'static str,
        what: &'static str,
    },

    #[error("ERR {option} must be {expected}")]
    BadValue {
        option: &'static str,
        expected: &'static str,
    },

    #[error("ERR unknown option '{0}'")]
    UnknownOption(String),

    #[error("ERR {0} is given more than once")]
    RepeatedOption(&'static str),

    #[error("ERR {0} and {1} cannot be used together")]
    ConflictingOptions(&'static str, &'static str),

    #[error("ERR {0} needs a value")]
    MissingValue(&'static str),

    #[error("ERR {0} needs {1}")]
    Requires(&'static str, &'static str),

    #[error("ERR {0} must not be empty")]
    Empty(&'static str),

    #[error("ERR {what} is longer than {max} bytes")]
    TooLong { what: &'static str, max: usize },

    #[error("ERR {0} would be later than the latest time dq can store (2^53-1 ms)")]
    TimeOverflow(&'static str),

    #[error("ERR BACKOFF must be exp:BASE:MAX, fixed:DELAY or a list of delays such as 15s,3m,1h; got {0}")]
    BadBackoff(String),

    #[error("ERR the queue setting '{0}' holds an unreadable value; set it again with DQ.CONFIG")]
    BadQueueSetting(&'static str),

    #[error("ERR unknown field '{0}': use LEASE, MAXATTEMPTS, BACKOFF, RATE, MAXINFLIGHT, RETAIN, RETAINMAX, EVENTS, GROUPLIMIT, GROUPRATE or ORDER")]
    UnknownField(String),

    #[error("WRONGTYPE key '{0}' holds the wrong kind of value: not a dq queue")]
    WrongType(String),

    #[error("ERR message '{id}' is corrupt: {why}")]
    Corrupt { id: String, why: String },

    /// The loss guard (see `eviction.rs`).
    #[error("ERR maxmemory-policy is {0}: the server may evict a whole queue, so DQ.ADD is refused; use noeviction or a volatile-* policy")]
    EvictionPolicy(String),

    /// DQ.APPLY from an ordinary client.
    #[error("ERR DQ.APPLY carries replication and the AOF; clients use the other DQ commands")]
    NotForClients,

    /// A DQ.APPLY that does not say what to do.
    #[error("ERR DQ.APPLY cannot be replayed: {0}")]
    BadApply(String),

    /// NACK or TOUCH with ATTEMPT n, when delivery n is no longer the
    /// message's current one: another consumer may hold it now.
    #[error("STALE delivery {attempt} of message '{id}' {why}")]
    StaleDelivery {
        id: String,
        attempt: u32,
        why: Staleness,
    },

    #[error("ERR CRON must be five fields (minute hour day-of-month month day-of-week) with numbers, names, *, lists, ranges and steps, or @hourly, @daily, @weekly, @monthly or @yearly; got {0}")]
    BadCron(String),

    #[error("ERR TZ must be an IANA time zone name such as Europe/Berlin or UTC; got '{0}'")]
    UnknownZone(String),

    #[error("ERR {earlier} must not be after {later}")]
    OutOfOrder {
        earlier: &'static str,
        later: &'static str,
    },

    /// DQ.EVENTS AFTER a seq the queue no longer keeps: the reader missed
    /// events, and is told so rather than given what follows.
    #[error("GAP the oldest event kept is {0}")]
    Gap(u64),

    /// A panic caught at an entry point (see `guard.rs`).
    #[error("ERR dq internal error: the command stopped; see the server log")]
    Internal,

    /// An internal error stopped a change of the queue half-way and left
    /// it failing its own check: it serves nothing until reloaded.
    #[error("DAMAGED queue '{0}' was left inconsistent by an internal error (see the server log): DUMP and RESTORE it (or DEBUG RELOAD) to rebuild it, or DEL it")]
    Damaged(String),
}

pub type Result<T, E = DqError> = std::result::Result<T, E>;

/// Names bytes from a client in an error message without letting control
/// characters or invalid UTF-8 break the reply line.
pub fn printable(bytes: &[u8]) -> String {
    // Byte-wise: an error reply must be ASCII, whatever the name holds.
    // Long ones are cut, as Redis cuts an unknown command's name: an error
    // that echoes a 5 KB argument helps nobody.
    const SHOWN: usize = 256;
    match bytes.len() {
        0..=SHOWN => bytes.escape_ascii().to_string(),
        n => format!("{}... ({n} bytes)", bytes[..SHOWN].escape_ascii()),
    }
}

/// Why a NACK or TOUCH naming a delivery (ATTEMPT n) cannot act on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Staleness {
    /// The message is at a later delivery, or at this one but no longer
    /// in flight.
    Over { at: u32, state: &'static str },
    /// The message has not been delivered that many times.
    NotYet { at: u32, state: &'static str },
    /// The queue holds no such message now.
    Gone,
}

impl std::fmt::Display for Staleness {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Staleness::Over { at, state } => {
                write!(f, "is over: the message is at delivery {at} ({state})")
            }
            Staleness::NotYet { at: 0, state } => {
                write!(f, "has not happened: the message was never delivered ({state})")
            }
            Staleness::NotYet { at, state } => {
                write!(f, "has not happened: the message is at delivery {at} ({state})")
            }
            Staleness::Gone => write!(
                f,
                "is over or never happened: the queue holds no such message (acknowledged, cancelled, purged, or never added)"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_start_with_an_upper_case_code() {
        let e = DqError::BadValue {
            option: "COUNT",
            expected: "an integer from 1 to 10000",
        };
        assert_eq!(
            e.to_string(),
            "ERR COUNT must be an integer from 1 to 10000"
        );
        assert!(DqError::WrongType("k".into())
            .to_string()
            .starts_with("WRONGTYPE "));
    }

    #[test]
    fn printable_escapes_newlines() {
        assert_eq!(printable(b"a\r\nb"), "a\\r\\nb");
        // Non-ASCII bytes too: a reply that is not ASCII upsets clients.
        assert_eq!(printable(b"caf\xc3\xa9\xff"), "caf\\xc3\\xa9\\xff");
    }
}
