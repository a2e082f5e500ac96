//! The `dq` section of INFO. Redis prefixes every field with `dq_`.

use std::os::raw::c_int;

use redis_module::raw;

use crate::timer;

/// Registered with RedisModule_RegisterInfoFunc; runs on the main thread.
pub extern "C" fn dq_info(ctx: *mut raw::RedisModuleInfoCtx, _for_crash_report: c_int) {
    let report = timer::report();
    raw::add_info_section(ctx, Some("timer"));
    raw::add_info_field_long_long(ctx, "timer_armed", report.armed.into());
    raw::add_info_field_unsigned_long_long(ctx, "timer_ticks", report.ticks);
    raw::add_info_field_unsigned_long_long(ctx, "queues_scheduled", report.queues_scheduled as u64);
}
