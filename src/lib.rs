pub mod args;
pub mod error;
pub mod keys;
pub mod message;
pub mod queue;
pub mod store;
