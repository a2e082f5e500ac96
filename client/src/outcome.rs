//! What a handler decides about a delivery, and the state a NACK leaves:
//! plain data that the command builders and the consumer both read, kept
//! apart so that neither has to import the other.

use std::time::Duration;

/// What the handler decided about a delivery: the command the consumer
/// sends. docs/client-vocabulary.md has the same words for the Python and
/// Node.js libraries (`action`: "ack", "done", "nack", "dead").
///
/// 0.x changes: `Nack` was called `Retry` (a NACK schedules a retry, but
/// the message dies instead when its attempts are used up); `Done` is new.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The work is done: `DQ.ACK`, sent with the other deliveries of its
    /// queue that finished since the last ACK's round trip.
    Ack,
    /// The work is done, and this is its result (any bytes, empty
    /// included; at most 512 MiB): `DQ.DONE queue id result`, sent with
    /// the other results of its queue that came since the last one's round
    /// trip. While a retention (RETAIN) keeps the message, `Queue::wait`
    /// and `Queue::get` give the result back; without one it is dropped
    /// with the message, as after an ACK. A result over the limit makes
    /// the message dead, with that reason.
    Done(Vec<u8>),
    /// The work failed and may succeed later: `DQ.NACK` with `DELAY` when
    /// given, else the message's backoff. The message becomes dead if this
    /// was its last attempt. `error` is kept as its last error.
    Nack {
        delay: Option<Duration>,
        error: String,
    },
    /// The work can never succeed: `DQ.NACK ... DEAD`, dead at once.
    Dead { error: String },
}

impl Outcome {
    /// The work is done with this result: `Outcome::Done`.
    pub fn done(result: impl Into<Vec<u8>>) -> Outcome {
        Outcome::Done(result.into())
    }

    /// The action's name in every dq library: "ack", "done", "nack" or
    /// "dead".
    pub fn action(&self) -> &'static str {
        match self {
            Outcome::Ack => "ack",
            Outcome::Done(_) => "done",
            Outcome::Nack { .. } => "nack",
            Outcome::Dead { .. } => "dead",
        }
    }
}

/// The message's state after a NACK, as the server replied it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NackState {
    Delayed,
    Ready,
    Dead,
}
