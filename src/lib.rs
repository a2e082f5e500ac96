//! dq: a reliable delay queue inside Redis.
//!
//! Pure logic: `queue` (the value: state machine, indexes, codec), `args`
//! (grammar), `backoff`, `policy`, `schedule` (when the timer is needed),
//! `census`. Redis glue: `qtype` (the data type: RDB, AOF, digest, memory,
//! copy, free), `qkey` (opening a queue's key and announcing writes),
//! `propagate` (what replicas and the AOF get), `timer`, `eviction`,
//! `command_info` (publishes the `docs` each command declares), and
//! `commands`, one file per command. `upgrade` converts queues of the
//! round-1 layout (ZSET and HASH keys, read with `keys` and `message`).

// In unit tests and fuzz builds the module entry point is not built, so the
// handlers it registers look unused.
#![cfg_attr(any(test, fuzzing), allow(dead_code))]

pub mod args;
pub mod backoff;
pub mod census;
pub mod command_info;
pub mod commands;
pub mod docs;
pub mod error;
pub mod eviction;
pub mod guard;
pub mod info;
pub mod keys;
pub mod message;
pub mod policy;
pub mod propagate;
pub mod qkey;
pub mod qtype;
pub mod queue;
pub mod rkey;
pub mod schedule;
pub mod settings;
pub mod timer;
pub mod upgrade;

// Fuzz findings and seeds, replayed on stable (see fuzz/).
#[cfg(test)]
mod regressions;

#[cfg(not(any(test, fuzzing)))]
mod module {
    use redis_module::{redis_module, Context, ModuleOptions, RedisString, Status};

    use crate::commands;
    use crate::guard;
    use crate::qtype::QUEUE_TYPE;
    use crate::settings;

    /// Registers `dq.lease-ms`, `dq.max-attempts` and `dq.backoff`, starting
    /// from the load arguments. (Done here rather than by the crate's macro,
    /// which cannot take load arguments without bool and enum settings.)
    fn register_settings(ctx: &Context, args: &[RedisString]) -> Result<(), String> {
        let args: Vec<&[u8]> = args.iter().map(RedisString::as_slice).collect();
        let start = settings::load_values(&args).map_err(|e| e.to_string())?;
        settings::register(ctx, &start)
    }

    fn init(ctx: &Context, args: &[RedisString]) -> Status {
        // A panic while loading fails the load instead of the server.
        guard::catch("load", || load(ctx, args)).unwrap_or(Status::Err)
    }

    fn load(ctx: &Context, args: &[RedisString]) -> Status {
        if let Err(e) = register_settings(ctx, args) {
            crate::guard::warn(Some(ctx), &format!("dq: {e}"));
            return Status::Err;
        }
        // COMMAND DOCS, key specs and arity checks, where the server can.
        crate::command_info::publish(ctx);
        // Keys are signalled as modified only when really written; a short
        // or bad read while loading a queue is an error we handle (RESTORE
        // answers it), not the end of the server. One call: each replaces
        // the options set before.
        ctx.set_module_options(
            ModuleOptions::NO_IMPLICIT_SIGNAL_MODIFIED | ModuleOptions::HANDLE_IO_ERRORS,
        );
        // Replaces the crate's default INFO handler, which has nothing to say.
        redis_module::raw::register_info_function(ctx.ctx, Some(crate::info::dq_info));
        match crate::timer::start(ctx) {
            Ok(()) => Status::Ok,
            Err(e) => {
                crate::guard::warn(Some(ctx), &format!("dq: {e}"));
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
        commands: [
            ["dq.add", guard::command("dq.add", commands::add::command), "write deny-oom", 1, 1, 1, ""],
            ["dq.pop", guard::command("dq.pop", commands::pop::command), "write blocking", 1, 1, 1, ""],
            ["dq.ack", guard::command("dq.ack", commands::ack::command), "write", 1, 1, 1, ""],
            ["dq.cancel", guard::command("dq.cancel", commands::cancel::command), "write", 1, 1, 1, ""],
            ["dq.nack", guard::command("dq.nack", commands::nack::command), "write fast", 1, 1, 1, ""],
            ["dq.touch", guard::command("dq.touch", commands::touch::command), "write fast", 1, 1, 1, ""],
            ["dq.redrive", guard::command("dq.redrive", commands::redrive::command), "write", 1, 1, 1, ""],
            ["dq.purge", guard::command("dq.purge", commands::purge::command), "write", 1, 1, 1, ""],
            ["dq.get", guard::command("dq.get", commands::get::command), "readonly fast", 1, 1, 1, ""],
            ["dq.peek", guard::command("dq.peek", commands::peek::command), "readonly", 1, 1, 1, ""],
            ["dq.stats", guard::command("dq.stats", commands::stats::command), "readonly fast", 1, 1, 1, ""],
            // Write, so Redis' guards (replica, MISCONF, min-replicas) apply
            // to SET; the cost is that reading it needs the master. Not
            // deny-oom: like CONFIG SET, it may still change settings when
            // memory is full.
            ["dq.config", guard::command("dq.config", commands::config::command), "write", 1, 1, 1, ""],
            ["dq.queues", guard::command("dq.queues", commands::queues::command), "readonly", 0, 0, 0, ""],
            ["dq.scan", guard::command("dq.scan", commands::scan::command), "readonly", 1, 1, 1, ""],
            // Replication and the AOF only (it refuses clients).
            ["dq.apply", guard::command("dq.apply", commands::apply::command), "write", 1, 1, 1, ""],
        ],
    }
}
