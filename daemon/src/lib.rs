//! What dq's daemons, dq-relay and dq-dashboard, share: log setup
//! ([`logs`]), SIGTERM and SIGINT ([`signals`]), a Redis URL with the
//! credentials given beside it ([`redis_url`]), and the one HTTP serving
//! loop both listeners run, with the same protections ([`http`]).
//!
//! Each binary keeps its own command line and environment variables; it
//! passes their values here.

pub mod http;
pub mod logs;
pub mod redis_url;
pub mod signals;

pub use logs::{LogColor, LogFormat};
pub use signals::Signals;
