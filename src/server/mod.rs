//! Server glue: everything that talks to Redis, and the only place with
//! raw module-API calls and `unsafe` (each `unsafe` block states the
//! invariant it relies on). It builds on the core and the grammar and
//! never imports the commands: they call it.
//!
//! - `data_type`: the queue as a module type (RDB, AOF rewrite, digest,
//!   MEMORY USAGE, COPY, free).
//! - `key`: opening a queue's key, and what every write owes the server
//!   afterwards (WATCH, notifications, blocked clients, the registry).
//! - `replication`: the one deterministic command each write propagates.
//! - `blocking`: parking a client on a queue's key (DQ.POP BLOCK).
//! - `clock`, `timer`, `events`, `registry`: when timed work runs, and how
//!   the node learns of queues (load, promotion, key events, flushes).
//! - `settings`, `eviction`, `info`, `acl`, `command_info`: module
//!   settings, the loss guard, INFO dq, ACL categories, COMMAND DOCS.
//! - `command`: a command's one declaration, and its registration.
//! - `guard`, `reply`: panics caught at every entry point, and the one
//!   place an error becomes a reply.

pub mod acl;
pub mod blocking;
pub mod clock;
pub mod command;
pub mod command_info;
pub mod data_type;
pub mod events;
pub mod eviction;
pub mod guard;
pub mod info;
pub mod key;
pub mod keyspace;
pub mod registry;
pub mod replication;
pub mod reply;
pub mod serve;
pub mod settings;
pub mod timer;
pub mod watch;
