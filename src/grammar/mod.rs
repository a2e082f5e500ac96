//! Argument grammar: bytes in, typed values (or an error that names the
//! argument) out. Pure, like the core it builds on: the parsing every
//! command shares, Redis' glob patterns for MATCH, the module's load-time
//! arguments, ids packed for propagation, and what COMMAND DOCS says of
//! each command. Each command's
//! own grammar lives in its file under `commands/`.

pub mod args;
pub mod docs;
pub mod glob;
pub mod packed;
pub mod settings;
