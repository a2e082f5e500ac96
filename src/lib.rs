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
    use std::os::raw::c_int;

    use redis_module::{raw, redis_module, Context, RedisString, Status};

    use crate::commands;
    use crate::grammar;
    use crate::legacy;
    use crate::server::data_type::QUEUE_TYPE;
    use crate::server::{acl, command_info, events, guard, info, replication, settings};

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
        // A panic while loading fails the load instead of the server.
        guard::catch("load", || load(ctx, args)).unwrap_or(Status::Err)
    }

    fn load(ctx: &Context, args: &[RedisString]) -> Status {
        if let Err(e) = register_settings(ctx, args).and_then(|()| register_commands(ctx)) {
            guard::warn(Some(ctx), &format!("dq: {e}"));
            return Status::Err;
        }
        // COMMAND DOCS, key specs and arity checks, where the server can.
        command_info::publish(ctx, &commands::DOCS);
        // ACL categories (@write, @read, ... and @dq), where the server can;
        // only during load does the server accept them.
        acl::publish(ctx);
        replication::set_module_options(ctx);
        // Replaces the crate's default INFO handler, which has nothing to say.
        raw::register_info_function(ctx.ctx, Some(info::dq_info));
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

    /// Registers one command whose handler gets the server's argument
    /// vector borrowed (see `guard::dispatch`).
    macro_rules! command {
        ($ctx:expr, $name:literal, $handler:path, $flags:literal, $first:literal, $last:literal, $step:literal) => {{
            extern "C" fn run(
                ctx: *mut raw::RedisModuleCtx,
                argv: *mut *mut raw::RedisModuleString,
                argc: c_int,
            ) -> c_int {
                // SAFETY: exactly what the server passed this callback.
                unsafe { guard::dispatch(ctx, argv, argc, $name, $handler) }
            }
            let name = concat!($name, "\0");
            let flags = concat!($flags, "\0");
            // SAFETY: OnLoad; NUL-terminated names that are 'static.
            let status = unsafe {
                raw::RedisModule_CreateCommand.unwrap()(
                    $ctx.ctx,
                    name.as_ptr().cast(),
                    Some(run),
                    flags.as_ptr().cast(),
                    $first,
                    $last,
                    $step,
                )
            };
            if status != raw::REDISMODULE_OK as c_int {
                return Err(format!("could not create command {}", $name));
            }
        }};
    }

    fn register_commands(ctx: &Context) -> Result<(), String> {
        use commands::*;
        // fast: O(log N) for one message, like ZADD (and NACK, TOUCH here).
        command!(ctx, "dq.add", add::command, "write deny-oom fast", 1, 1, 1);
        command!(ctx, "dq.pop", pop::command, "write blocking", 1, 1, 1);
        // Keys after numkeys: the command tells where (getkeys-api).
        command!(
            ctx,
            "dq.mpop",
            mpop::command,
            "write blocking getkeys-api",
            0,
            0,
            0
        );
        command!(ctx, "dq.ack", ack::command, "write", 1, 1, 1);
        command!(ctx, "dq.cancel", cancel::command, "write", 1, 1, 1);
        command!(ctx, "dq.nack", nack::command, "write fast", 1, 1, 1);
        command!(ctx, "dq.touch", touch::command, "write fast", 1, 1, 1);
        command!(ctx, "dq.redrive", redrive::command, "write", 1, 1, 1);
        command!(ctx, "dq.purge", purge::command, "write", 1, 1, 1);
        command!(ctx, "dq.get", get::command, "readonly fast", 1, 1, 1);
        command!(ctx, "dq.peek", peek::command, "readonly", 1, 1, 1);
        command!(ctx, "dq.stats", stats::command, "readonly fast", 1, 1, 1);
        // Write, so Redis' guards (replica, MISCONF, min-replicas) apply
        // to SET; the cost is that reading it needs the master. Not
        // deny-oom: like CONFIG SET, it may still change settings when
        // memory is full.
        command!(ctx, "dq.config", config::command, "write", 1, 1, 1);
        command!(ctx, "dq.queues", queues::command, "readonly", 0, 0, 0);
        command!(ctx, "dq.scan", scan::command, "readonly", 1, 1, 1);
        command!(
            ctx,
            "dq.schedule",
            schedule::command,
            "write deny-oom",
            1,
            1,
            1
        );
        command!(ctx, "dq.unschedule", unschedule::command, "write", 1, 1, 1);
        command!(ctx, "dq.schedules", schedules::command, "readonly", 1, 1, 1);
        command!(ctx, "dq.pause", pause::command, "write fast", 1, 1, 1);
        command!(ctx, "dq.resume", resume::command, "write fast", 1, 1, 1);
        // Replication and the AOF only (it refuses clients).
        command!(ctx, "dq.apply", apply::command, "write", 1, 1, 1);
        Ok(())
    }

    redis_module! {
        name: "dq",
        version: 1,
        allocator: (redis_module::alloc::RedisAlloc, redis_module::alloc::RedisAlloc),
        data_types: [QUEUE_TYPE],
        init: init,
        // Registered in `load` (see `register_commands`): the crate's list
        // would copy and reference-count every argument of every call.
        commands: [],
    }
}
