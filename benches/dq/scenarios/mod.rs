//! The scenarios, one file each (the numbers are the issues'
//! targets' numbering, not the order they run in: see main). Each
//! measures on servers of its own and adds its rows and notes to the
//! report.

mod add;
mod backlog;
mod burst;
mod events;
mod flow;
mod groups;
mod idle;
mod lateness;
mod lifecycle;
mod lines;
mod memory;
mod outcomes;
mod queues;
/// How late dq.ready events come, shared by the queues and schedules
/// scenarios.
mod ready;
mod schedules;
mod unlink;

pub use add::add_throughput;
pub use backlog::backlog;
pub use burst::burst;
pub use events::events;
pub use flow::flow;
pub use groups::groups;
pub use idle::idle;
pub use lateness::lateness;
pub use lifecycle::lifecycle;
pub use lines::server_lines;
pub use memory::memory;
pub use outcomes::outcomes;
pub use queues::many_queues;
pub use schedules::schedules;
pub use unlink::unlink;
