//! dq: a reliable delay queue inside Redis.
//!
//! Pure logic: `args` (grammar), `keys` (key naming), `message` (envelope),
//! `queue` (state machine over the `store` trait), `effects` (what to
//! replicate), `schedule` (when the timer is needed). Redis glue: `rkey`
//! (raw key access), `redis_store`, `timer`, and `commands`, one file per
//! command.

// In unit tests the module entry point is not built, so the handlers it
// registers look unused.
#![cfg_attr(test, allow(dead_code))]

pub mod args;
pub mod backoff;
pub mod commands;
pub mod effects;
pub mod error;
pub mod info;
pub mod keys;
pub mod message;
pub mod policy;
pub mod queue;
pub mod redis_store;
pub mod rkey;
pub mod schedule;
pub mod settings;
pub mod store;
pub mod timer;

#[cfg(not(test))]
mod module {
    use redis_module::{redis_module, Context, ModuleOptions, RedisString, Status};

    use crate::commands;

    fn init(ctx: &Context, _args: &[RedisString]) -> Status {
        // Keys are signalled as modified only when really written.
        ctx.set_module_options(ModuleOptions::NO_IMPLICIT_SIGNAL_MODIFIED);
        // Replaces the crate's default INFO handler, which has nothing to say.
        redis_module::raw::register_info_function(ctx.ctx, Some(crate::info::dq_info));
        match crate::timer::start(ctx) {
            Ok(()) => Status::Ok,
            Err(e) => {
                ctx.log_warning(&format!("dq: {e}"));
                Status::Err
            }
        }
    }

    redis_module! {
        name: "dq",
        version: 1,
        allocator: (redis_module::alloc::RedisAlloc, redis_module::alloc::RedisAlloc),
        data_types: [],
        init: init,
        commands: [
            ["dq.add", commands::add::command, "write deny-oom", 1, 1, 1, ""],
            ["dq.pop", commands::pop::command, "write", 1, 1, 1, ""],
            ["dq.ack", commands::ack::command, "write", 1, 1, 1, ""],
            ["dq.cancel", commands::cancel::command, "write", 1, 1, 1, ""],
            ["dq.get", commands::get::command, "readonly fast", 1, 1, 1, ""],
            ["dq.stats", commands::stats::command, "readonly fast", 1, 1, 1, ""],
        ],
    }
}
