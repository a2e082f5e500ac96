//! Key-space calls the redis-module crate does not wrap: signalling a key
//! modified or ready, the selected database, and walking the keyspace.
//! Each is called on the main thread inside a callback whose `Context` is
//! live.

use std::os::raw::c_void;

use redis_module::{raw, Context, RedisString};

/// Tells WATCH and client-side caching that `name` changed. The module
/// turns off the implicit signal on closing every writable key, so that a
/// command that changes nothing invalidates nothing.
pub fn signal_modified(ctx: &Context, name: &RedisString) {
    // SAFETY: main thread, live context and string.
    unsafe { raw::RedisModule_SignalModifiedKey.unwrap()(ctx.ctx, name.inner) };
}

/// Selects database `db` for the context's following key calls; false for
/// an index the server does not have.
pub fn select_db(ctx: &Context, db: i32) -> bool {
    // SAFETY: live context on the main thread; fails for an invalid index.
    unsafe {
        raw::RedisModule_SelectDb.unwrap()(ctx.ctx, db)
            == raw::REDISMODULE_OK as std::os::raw::c_int
    }
}

/// Wakes clients blocked on `name` (DQ.POP BLOCK waits on the queue's key).
pub fn signal_ready(ctx: &Context, name: &RedisString) {
    // SAFETY: main thread, live context and string.
    unsafe { raw::RedisModule_SignalKeyAsReady.unwrap()(ctx.ctx, name.inner) };
}

/// The database a context works in.
pub fn selected_db(ctx: &Context) -> i32 {
    // SAFETY: live context on the main thread.
    unsafe { raw::RedisModule_GetSelectedDb.unwrap()(ctx.ctx) }
}

/// Calls `visit` with the name of every key in the selected database and,
/// when the server could open it, its read-only handle (valid during the
/// call only).
pub fn scan_keys(ctx: &Context, mut visit: impl FnMut(&[u8], Option<*mut raw::RedisModuleKey>)) {
    type Visit<'a> = &'a mut dyn FnMut(&[u8], Option<*mut raw::RedisModuleKey>);
    extern "C" fn on_key(
        _ctx: *mut raw::RedisModuleCtx,
        name: *mut raw::RedisModuleString,
        key: *mut raw::RedisModuleKey,
        visit: *mut c_void,
    ) {
        // SAFETY: `visit` is the closure passed to RedisModule_Scan below,
        // alive for the whole scan; `name` is valid during the callback.
        let visit = unsafe { &mut *(visit as *mut Visit) };
        let key = (!key.is_null()).then_some(key);
        // No unwinding through the server's scan.
        crate::server::guard::catch("scan", || visit(RedisString::string_as_slice(name), key));
    }
    let mut visit: Visit = &mut visit;
    // SAFETY: main thread; the cursor is destroyed after the last call.
    unsafe {
        let cursor = raw::RedisModule_ScanCursorCreate.unwrap()();
        while raw::RedisModule_Scan.unwrap()(
            ctx.ctx,
            cursor,
            Some(on_key),
            &mut visit as *mut Visit as *mut c_void,
        ) != 0
        {}
        raw::RedisModule_ScanCursorDestroy.unwrap()(cursor);
    }
}
