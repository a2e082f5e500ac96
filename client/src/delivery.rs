use std::borrow::Cow;
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use crate::error::Error;
pub use crate::outcome::{NackState, Outcome};
use crate::server::Connection;

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
    /// Shared by the clones of this delivery: the worker's heartbeat tells
    /// the handler through it.
    lost: Arc<Lost>,
    /// Where [`Delivery::progress`] goes: the worker's connection and
    /// lease; `None` for a delivery made by [`Delivery::new`].
    reporter: Option<Reporter>,
}

/// The worker's connection and lease, for a handler's progress.
#[derive(Clone)]
pub(crate) struct Reporter {
    pub commands: Connection,
    pub lease: Duration,
}

impl std::fmt::Debug for Reporter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reporter")
            .field("lease", &self.lease)
            .finish_non_exhaustive()
    }
}

/// How the worker tells a handler that its delivery is over. The token
/// is made only when the handler asks for it: most never do, and a
/// delivery then costs one allocation less.
#[derive(Debug, Default)]
struct Lost(Mutex<LostState>);

#[derive(Debug, Default)]
struct LostState {
    /// Made by `Delivery::cancelled`: so the handler took it, and the
    /// worker waits for the handler rather than drop its future at once.
    token: Option<CancellationToken>,
    reason: Option<LostReason>,
}

impl Lost {
    fn state(&self) -> MutexGuard<'_, LostState> {
        // Nothing panics while holding it; a poisoned lock's data is whole.
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Why a delivery ended while its handler ran: what a heartbeat
/// (`DQ.TOUCH ... ATTEMPT n`, answered `STALE`) and the `DQ.GET` after it
/// found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LostReason {
    /// The message is gone: DQ.CANCEL or DQ.PURGE deleted it (or anything
    /// else that removes a message, such as an ACK by another client).
    Cancelled,
    /// The message is still there but this delivery is over: its lease
    /// ran out (another consumer may hold the message now), or another
    /// client NACKed it.
    Lost,
}

impl LostReason {
    /// The reason's name in every dq library: "cancelled" or "lost".
    pub fn as_str(self) -> &'static str {
        match self {
            LostReason::Cancelled => "cancelled",
            LostReason::Lost => "lost",
        }
    }
}

impl Delivery {
    /// A delivery as a POP of `queue` would make it, leased now: for the
    /// tests of a [`Handler`] (a [`Consumer`](crate::Consumer) makes its own).
    pub fn new(
        queue: impl Into<String>,
        id: impl Into<Vec<u8>>,
        payload: impl Into<Vec<u8>>,
        attempt: u64,
    ) -> Delivery {
        Delivery::leased(
            queue.into(),
            id.into(),
            payload.into(),
            attempt,
            Instant::now(),
        )
    }

    pub(crate) fn leased(
        queue: String,
        id: Vec<u8>,
        payload: Vec<u8>,
        attempt: u64,
        leased_at: Instant,
    ) -> Delivery {
        Delivery {
            queue,
            id,
            payload,
            attempt,
            leased_at,
            lost: Arc::default(),
            reporter: None,
        }
    }

    /// The delivery a worker hands its handler: its progress goes through
    /// the worker's connection, with the worker's lease.
    pub(crate) fn reporting(mut self, reporter: Reporter) -> Delivery {
        self.reporter = Some(reporter);
        self
    }

    /// Reports how far the work got (any bytes, at most 64 KiB: "40%",
    /// `{"rows": 1200}`): one `DQ.TOUCH queue id LEASE ms ATTEMPT n
    /// PROGRESS value`, fenced by this delivery's attempt and renewing its
    /// lease as the heartbeat does. [`Queue::get`](crate::Queue::get)
    /// shows it as `progress` until the next delivery of the message
    /// starts; a done message keeps the last one. Returns the new lease
    /// deadline (Unix ms).
    ///
    /// [`Error::StaleDelivery`] when this delivery is over (its lease ran
    /// out, or the message was cancelled: stop working; the heartbeat
    /// tells [`Delivery::cancelled`] too), [`Error::Config`] with nothing
    /// sent for progress over 64 KiB or a delivery no worker made
    /// ([`Delivery::new`]).
    pub async fn progress(&self, value: impl AsRef<[u8]>) -> Result<u64, Error> {
        let value = value.as_ref();
        crate::commands::check_progress(value)?;
        let Some(reporter) = &self.reporter else {
            return Err(Error::Config(
                "this delivery was not made by a worker (Delivery::new): there is no \
                 connection to report its progress on"
                    .into(),
            ));
        };
        let cmd = crate::commands::touch_progress(
            &self.queue,
            &self.id,
            reporter.lease,
            self.attempt,
            value,
        );
        let reply = crate::reply::query(&mut reporter.commands.clone(), &cmd).await?;
        crate::queue::parse_touch(&self.queue, &self.id, reply)
    }

    /// The id for logs and headers; bytes that are not UTF-8 become U+FFFD.
    pub fn id_lossy(&self) -> Cow<'_, str> {
        String::from_utf8_lossy(&self.id)
    }

    /// A token cancelled when the worker learns, on a heartbeat, that this
    /// delivery is over while the handler runs: the message was cancelled
    /// or purged, or the lease was lost ([`Delivery::lost_reason`] says
    /// which). A handler that takes it is waited for — it has until the
    /// next heartbeat would be due (`touch_every`) to return, then its
    /// future is dropped — so it can stop cleanly:
    ///
    /// ```no_run
    /// # use dq_client::{Delivery, Outcome};
    /// # async fn work(_: &[u8]) -> Outcome { Outcome::Ack }
    /// async fn handle(delivery: &Delivery) -> Outcome {
    ///     let cancelled = delivery.cancelled();
    ///     tokio::select! {
    ///         outcome = work(&delivery.payload) => outcome,
    ///         _ = cancelled.cancelled() => {
    ///             // Clean up; what is returned now is not sent.
    ///             Outcome::Ack
    ///         }
    ///     }
    /// }
    /// ```
    ///
    /// A handler that never takes it is dropped at the first refused
    /// heartbeat, as before. Either way no ACK or NACK is sent for the
    /// delivery, and [`Handler::settled`] is told [`Settlement::Stale`]
    /// (with [`Settlement::state_of`] "cancelled" or "stale").
    pub fn cancelled(&self) -> CancellationToken {
        let mut state = self.lost.state();
        let over = state.reason.is_some();
        state
            .token
            .get_or_insert_with(|| {
                let token = CancellationToken::new();
                if over {
                    token.cancel();
                }
                token
            })
            .clone()
    }

    /// Why the delivery ended while its handler ran; `None` while it holds.
    pub fn lost_reason(&self) -> Option<LostReason> {
        self.lost.state().reason
    }

    /// Records why the delivery is over (the first reason stays) and fires
    /// the token; whether the handler took the token.
    pub(crate) fn lose(&self, reason: LostReason) -> bool {
        let mut state = self.lost.state();
        state.reason.get_or_insert(reason);
        match &state.token {
            Some(token) => {
                token.cancel();
                true
            }
            None => false,
        }
    }
}

/// How the outcome reached the server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Settlement {
    /// ACK (or DONE, for [`Outcome::Done`]) finished the message: it is
    /// gone, or kept as `done` while a RETAIN holds.
    Acked,
    /// The DQ.ACK (or DQ.DONE) that carried it counted fewer than it
    /// carried: this message, or another of the same batch, was no longer
    /// in flight (the lease had run out, or it was cancelled). The work was
    /// done; at-least-once means it may be done again.
    AckedLate,
    /// NACK was applied; the message is now in this state.
    Nacked(NackState),
    /// The delivery was over before the NACK or a TOUCH reached the server
    /// (`STALE`): its lease had run out, or the message was cancelled or
    /// purged ([`Delivery::lost_reason`] says which when a TOUCH found it;
    /// [`Settlement::state_of`] names it). Nothing was changed.
    Stale,
    /// The server could not be reached to settle it; the lease will run
    /// out and the message will be delivered again.
    Unsettled(String),
}

impl Settlement {
    /// As [`Settlement::state`], but "cancelled" for a delivery whose
    /// message was cancelled or purged while its handler ran (a
    /// [`Settlement::Stale`] whose [`Delivery::lost_reason`] is
    /// [`LostReason::Cancelled`]): the name the other dq libraries report.
    pub fn state_of(&self, delivery: &Delivery) -> &'static str {
        match (self, delivery.lost_reason()) {
            (Settlement::Stale, Some(LostReason::Cancelled)) => "cancelled",
            _ => self.state(),
        }
    }
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
    /// learns that the delivery is over (it was cancelled or purged, or
    /// another consumer may hold the message now), [`Delivery::cancelled`]
    /// fires, and the returned future is dropped — at once, unless the
    /// handler took that token: work should be cancel-safe at its await
    /// points.
    fn handle(&self, delivery: &Delivery) -> impl Future<Output = Outcome> + Send;

    /// Told how each delivery ended: the outcome (none when a TOUCH found
    /// the delivery over and the work was abandoned) and what the server
    /// made of it. For logs and metrics. A delivery found over is
    /// [`Settlement::Stale`] and sends nothing, even when its handler
    /// returned an outcome after [`Delivery::cancelled`] fired;
    /// [`Settlement::state_of`] names it "cancelled" when the message was
    /// cancelled or purged.
    fn settled(&self, _delivery: &Delivery, _outcome: Option<&Outcome>, _settlement: &Settlement) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_token_fires_whenever_it_is_taken() {
        // Not taken: the worker drops the handler at once; taken later, it
        // has fired already.
        let d = Delivery::new("q", "a", "", 1);
        assert!(!d.lose(LostReason::Cancelled));
        assert!(d.cancelled().is_cancelled());
        assert_eq!(d.lost_reason(), Some(LostReason::Cancelled));

        // Taken first, fired through a clone (the worker's); the first
        // reason stays.
        let d = Delivery::new("q", "b", "", 2);
        let token = d.cancelled();
        assert!(!token.is_cancelled());
        assert_eq!(d.lost_reason(), None);
        assert!(d.clone().lose(LostReason::Lost));
        assert!(token.is_cancelled());
        assert!(d.lose(LostReason::Cancelled));
        assert_eq!(d.lost_reason(), Some(LostReason::Lost));
        assert_eq!(Settlement::Stale.state_of(&d), "stale");
    }
}
