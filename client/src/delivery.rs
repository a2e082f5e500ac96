use std::borrow::Cow;
use std::future::Future;
use std::time::{Duration, Instant};

/// One delivery of a message: what `DQ.POP` gave this consumer.
#[derive(Clone, Debug)]
pub struct Delivery {
    pub queue: String,
    /// Ids are byte strings (1 to 1024 bytes of anything).
    pub id: Vec<u8>,
    pub payload: Vec<u8>,
    /// Which delivery of the message this is, from 1; `(id, attempt)` names it.
    pub attempt: u64,
    /// When the POP that leased it was sent: the lease runs from about then.
    pub leased_at: Instant,
}

impl Delivery {
    /// The id for logs and headers; bytes that are not UTF-8 become U+FFFD.
    pub fn id_lossy(&self) -> Cow<'_, str> {
        String::from_utf8_lossy(&self.id)
    }
}

/// What the handler decided about a delivery: the command the consumer
/// sends. docs/client-vocabulary.md has the same words for the Python and
/// Node.js libraries (`action`: "ack", "nack", "dead").
///
/// 0.x change: `Nack` was called `Retry` (a NACK schedules a retry, but the
/// message dies instead when its attempts are used up).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The work is done: `DQ.ACK`, sent with the other deliveries of its
    /// queue that finished since the last ACK's round trip.
    Ack,
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
    /// The action's name in every dq library: "ack", "nack" or "dead".
    pub fn action(&self) -> &'static str {
        match self {
            Outcome::Ack => "ack",
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

/// How the outcome reached the server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Settlement {
    /// ACK removed the message.
    Acked,
    /// The DQ.ACK that carried it counted fewer than it carried: this
    /// message, or another of the same batch, was no longer in flight (the
    /// lease had run out, or it was cancelled). The work was done;
    /// at-least-once means it may be done again.
    AckedLate,
    /// NACK was applied; the message is now in this state.
    Nacked(NackState),
    /// The delivery was over before the NACK or a TOUCH reached the server
    /// (`STALE`): its lease had run out. Nothing was changed.
    Stale,
    /// The server could not be reached to settle it; the lease will run
    /// out and the message will be delivered again.
    Unsettled(String),
}

impl Settlement {
    /// The state's name in every dq library: "acked", "acked-late",
    /// "delayed", "ready", "dead", "stale" or "unsettled".
    pub fn state(&self) -> &'static str {
        match self {
            Settlement::Acked => "acked",
            Settlement::AckedLate => "acked-late",
            Settlement::Nacked(NackState::Delayed) => "delayed",
            Settlement::Nacked(NackState::Ready) => "ready",
            Settlement::Nacked(NackState::Dead) => "dead",
            Settlement::Stale => "stale",
            Settlement::Unsettled(_) => "unsettled",
        }
    }
}

/// The work done for each delivery.
pub trait Handler: Send + Sync + 'static {
    /// Does the work. The lease is kept alive while this runs. If a TOUCH
    /// learns that the delivery is over (another consumer may hold the
    /// message now), the returned future is dropped: work should be
    /// cancel-safe at its await points.
    fn handle(&self, delivery: &Delivery) -> impl Future<Output = Outcome> + Send;

    /// Told how each delivery ended: the outcome (none when a TOUCH found
    /// the delivery over and the work was abandoned) and what the server
    /// made of it. For logs and metrics.
    fn settled(&self, _delivery: &Delivery, _outcome: Option<&Outcome>, _settlement: &Settlement) {}
}
