//! The `dq` section of INFO. Redis prefixes every field with `dq_`.

use std::os::raw::c_int;

use redis_module::{raw, Context};

use crate::server::registry;
use crate::server::timer;

/// Makes INFO's `dq` section dq's own: replaces the crate's default
/// handler, which has nothing to say. Call from the load callback.
pub fn register(ctx: &Context) {
    raw::register_info_function(ctx.ctx, Some(dq_info));
}

/// Registered with RedisModule_RegisterInfoFunc; runs on the main thread.
extern "C" fn dq_info(ctx: *mut raw::RedisModuleInfoCtx, _for_crash_report: c_int) {
    crate::server::guard::catch("info", || add_sections(ctx));
}

fn add_sections(ctx: *mut raw::RedisModuleInfoCtx) {
    let (queues, [delayed, ready, inflight, dead, done]) = registry::with(|r| r.totals());
    raw::add_info_section(ctx, Some("queues"));
    raw::add_info_field_unsigned_long_long(ctx, "queues", queues as u64);
    raw::add_info_field_unsigned_long_long(ctx, "messages_delayed", delayed);
    raw::add_info_field_unsigned_long_long(ctx, "messages_ready", ready);
    raw::add_info_field_unsigned_long_long(ctx, "messages_inflight", inflight);
    raw::add_info_field_unsigned_long_long(ctx, "messages_dead", dead);
    raw::add_info_field_unsigned_long_long(ctx, "messages_done", done);

    let report = timer::report();
    let work = report.work;
    raw::add_info_section(ctx, Some("timer"));
    raw::add_info_field_long_long(ctx, "timer_armed", report.armed.into());
    raw::add_info_field_unsigned_long_long(ctx, "timer_armed_for", report.armed_for.unwrap_or(0));
    raw::add_info_field_unsigned_long_long(ctx, "timer_ticks", work.ticks);
    raw::add_info_field_unsigned_long_long(ctx, "tick_budget", timer::TICK_BUDGET as u64);
    raw::add_info_field_unsigned_long_long(ctx, "ticks_continued", work.continued);
    raw::add_info_field_unsigned_long_long(ctx, "queues_scheduled", report.queues_scheduled as u64);
    raw::add_info_field_unsigned_long_long(ctx, "promoted", work.promoted);
    raw::add_info_field_unsigned_long_long(ctx, "leases_expired", work.leases_expired);
    raw::add_info_field_unsigned_long_long(ctx, "ttl_expired", work.ttl_expired);
    raw::add_info_field_unsigned_long_long(ctx, "schedule_runs", work.runs);
    raw::add_info_field_unsigned_long_long(ctx, "longest_tick_us", work.longest_tick_us);
    raw::add_info_field_unsigned_long_long(ctx, "lateness_ms", report.lateness_ms);
    raw::add_info_section(ctx, Some("propagation"));
    raw::add_info_field_long_long(
        ctx,
        "replicate_skips_lookup",
        crate::server::replication::skips_lookup().into(),
    );
}
