//! dq: a reliable delay queue inside Redis.
//!
//! Layers, each importing only those before it (see docs/development.md):
//!
//! 1. `core`: the queue value and its state machine, codec, backoff,
//!    policy, registry of queues, limits and errors. Pure Rust, no Redis.
//! 2. `grammar`: argument parsing shared by the commands, glob patterns,
//!    load-time arguments, and what COMMAND DOCS says of each command.
//! 3. `server`: the glue, and the only place with raw Redis calls and
//!    `unsafe`: the data type's callbacks, key access, replication, the
//!    clock, the timer, blocking, server events, settings, INFO, ACL.
//! 4. `commands`: one file per command (its grammar, handler and replay)
//!    and `legacy`, the importer of the retired multi-key layout.
//! 5. This file: the module's entry point, which wires them together.

// In unit tests and fuzz builds the module entry point is not built, so the
// handlers it registers look unused.
#![cfg_attr(any(test, fuzzing), allow(dead_code))]

pub mod commands;
pub mod core;
pub mod grammar;
pub mod legacy;
mod server;

// Fuzz findings and seeds, replayed on stable (see fuzz/).
#[cfg(test)]
mod regressions;

#[cfg(not(any(test, fuzzing)))]
mod module {
    use redis_module::{redis_module, Context, RedisString, Status};

    use crate::commands;
    use crate::grammar;
    use crate::legacy;
    use crate::server::data_type::QUEUE_TYPE;
    use crate::server::{
        acl, command, command_info, events, guard, info, key, replication, settings,
    };

    /// Registers `dq.lease-ms`, `dq.max-attempts` and `dq.backoff`, starting
    /// from the load arguments. (Done here rather than by the crate's macro,
    /// which cannot take load arguments without bool and enum settings.)
    fn register_settings(ctx: &Context, args: &[RedisString]) -> Result<(), String> {
        let args: Vec<&[u8]> = args.iter().map(RedisString::as_slice).collect();
        let start = grammar::settings::load_values(&args).map_err(|e| e.to_string())?;
        settings::register(ctx, &start)
    }

    fn init(ctx: &Context, args: &[RedisString]) -> Status {
        // Before anything can panic: panics are reported by dq's hook,
        // whatever the server's environment says (see the function).
        guard::install_panic_hook();
        guard::arm_faults();
        // A panic while loading fails the load instead of the server.
        guard::catch("load", || load(ctx, args)).unwrap_or(Status::Err)
    }

    fn load(ctx: &Context, args: &[RedisString]) -> Status {
        let registered =
            register_settings(ctx, args).and_then(|()| command::register(ctx, commands::ALL));
        if let Err(e) = registered {
            guard::warn(Some(ctx), &format!("dq: {e}"));
            return Status::Err;
        }
        // COMMAND DOCS, key specs and arity checks, where the server can.
        command_info::publish(ctx, commands::ALL);
        // ACL categories (@write, @read, ... and @dq), where the server can;
        // only during load does the server accept them.
        acl::publish(ctx, commands::ALL);
        replication::set_module_options(ctx);
        guard::set_recovery(key::recover);
        info::register(ctx);
        // Queues found in the retired multi-key layout are converted.
        events::set_importer(&legacy::IMPORTER);
        match events::start(ctx) {
            Ok(()) => Status::Ok,
            Err(e) => {
                guard::warn(Some(ctx), &format!("dq: {e}"));
                Status::Err
            }
        }
    }

    redis_module! {
        name: "dq",
        version: 1,
        allocator: (redis_module::alloc::RedisAlloc, redis_module::alloc::RedisAlloc),
        data_types: [QUEUE_TYPE],
        init: init,
        // Registered in `load` from `commands::ALL` (see server/command.rs):
        // the crate's list would copy and reference-count every argument of
        // every call.
        commands: [],
    }
}
