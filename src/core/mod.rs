//! The pure core: the queue value and its state machine, its encoding,
//! the retry arithmetic, the layers of policy, the node's registry of
//! queues, the limits, and the one error type. Nothing here imports
//! `redis_module`: it is unit-tested (and fuzzed) without a server, and
//! callers pass in the clock and the policy in force.

pub mod backoff;
pub mod error;
pub mod fault;
pub mod flow;
pub mod heap;
pub mod lazyfree;
pub mod limits;
pub mod policy;
pub mod queue;
pub mod registry;
pub mod schedule;
#[cfg(test)]
pub(crate) mod testing;
