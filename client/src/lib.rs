//! The Rust client of dq (the Redis module in this repository): a
//! [`Server`] (one node or a Redis Cluster), [`Queue`] and [`ShardedQueue`]
//! handles with every DQ.ADD option and the admin calls, typed [`Error`]s,
//! and a consume loop. Sharded queues follow docs/sharding.md.
//!
//! [`Consumer::run`] takes messages from one or more queues with blocking
//! `DQ.POP`s, hands each to a [`Handler`] — at most `concurrency` at once per
//! queue — keeps its lease alive with `DQ.TOUCH` while the handler works, and
//! settles it with `DQ.ACK`, `DQ.DONE` (with the handler's result) or
//! `DQ.NACK` as the handler decides. Every NACK
//! and TOUCH names its delivery (`ATTEMPT n`), so a consumer whose lease ran
//! out can never fail or extend someone else's delivery. When the shutdown
//! token is cancelled it stops taking messages, lets the deliveries it holds
//! finish and settles them, then returns. [`Consumer::over`] serves several
//! queues from one pool of slots — with one `DQ.MPOP`, in the order given,
//! when one command can reach them all — and [`Delivery::cancelled`] tells a
//! handler that its message was cancelled or purged while it ran.
//!
//! A finished job's outcome comes back with [`Queue::wait`] (a
//! [`JobOutcome`]: done with its result, dead with its last error, or
//! gone) while a retention (RETAIN) keeps it; a handler reports how far it
//! got with [`Delivery::progress`], fenced by its attempt.
//!
//! Queues also carry the server's recurring schedules ([`Schedule`],
//! [`Queue::schedule`]) and flow control ([`Queue::pause`], `RATE` and
//! `MAXINFLIGHT` through [`Queue::config_set`], a RATE read back as a
//! [`Rate`]); on a [`ShardedQueue`] a schedule lives on the shard of its
//! name and limits are split exactly. Per group (a tenant, a customer):
//! `GROUPLIMIT`, `GROUPRATE` and `ORDER` ([`Order`]) through
//! `config_set`, [`Queue::pause_group`] and [`Queue::resume_group`], and
//! [`Queue::groups`] listing each [`GroupInfo`]; a sharded queue keeps
//! each group on one shard, so these hold per group exactly. The [`admin`] calls take any
//! connection; [`admin::queues_with_stats`] reads every queue of a node,
//! flow control included, in one call.
//!
//! ```no_run
//! use std::sync::Arc;
//! use dq_client::{Consumer, ConsumerConfig, Delivery, Handler, Outcome};
//! use tokio_util::sync::CancellationToken;
//!
//! struct Print;
//! impl Handler for Print {
//!     async fn handle(&self, d: &Delivery) -> Outcome {
//!         println!("{} attempt {}", d.id_lossy(), d.attempt);
//!         Outcome::Ack
//!     }
//! }
//!
//! # async fn demo() -> Result<(), dq_client::Error> {
//! let client = redis::Client::open("redis://127.0.0.1/")?;
//! let consumer = Consumer::new(client, vec!["jobs".into()], ConsumerConfig::default())?;
//! consumer.run(Arc::new(Print), CancellationToken::new()).await
//! # }
//! ```

pub mod admin;
mod args;
mod commands;
mod consumer;
mod delivery;
mod error;
mod events;
mod outcome;
mod queue;
mod reply;
mod schedule;
mod server;
mod shard;
#[cfg(test)]
mod vectors;

pub use admin::{
    Entry, GroupInfo, InfoDq, JobOutcome, Message, Order, QueueConfig, Rate, State, Stats,
};
pub use args::parse_duration;
pub use commands::{truncate_error, MAX_ERROR_BYTES, MAX_PROGRESS_BYTES};
pub use consumer::{stop_on_signals, Consumer, ConsumerConfig, Source};
/// The name the Python and Node.js libraries give a [`Consumer`]
/// (docs/client-vocabulary.md).
pub type Worker = Consumer;
/// The options of a [`Worker`]: [`ConsumerConfig`].
pub type WorkerConfig = ConsumerConfig;
pub use delivery::{Delivery, Handler, LostReason, NackState, Outcome, Settlement};
pub use error::Error;
pub use events::{Event, EventKind, EventPage, EventsOptions, MAX_EVENTS_COUNT};
// The trait of `Queue::events` and its combinators (`next`, `filter`,
// ...), so users need not name futures-util.
pub use futures_util::{Stream, StreamExt};
pub use queue::{AddOptions, NackOptions, Queue, ShardEvent, ShardSeqs, ShardedQueue};
pub use schedule::{Missed, Overlap, Schedule, ScheduleInfo};
pub use server::{node_info, Connection, Server};
pub use shard::{hash_slot, key_slot, random_id, shard_of, Shards, MAX_SHARDS};
// The token type of `Consumer::run`, so users need not name tokio-util.
pub use tokio_util::sync::CancellationToken;
