//! Key-space calls the redis-module crate does not wrap: signalling a key
//! modified or ready, the selected database, and walking the keyspace.
//! Each is called on the main thread inside a callback whose `Context` is
//! live.

use std::cell::RefCell;
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

thread_local! {
    /// The database to put the calling client back in, and the key whose
    /// arrival in another database ends the command (see `restore_caller_db`).
    static CALLER_DB: RefCell<Option<(i32, Vec<u8>)>> = const { RefCell::new(None) };
}

/// COPY of a queue from database `from_db` to the key `to`, maybe in
/// another database: the `copy_to` event that follows puts the caller back.
pub fn copying(from_db: i32, to: &[u8]) {
    CALLER_DB.with(|c| *c.borrow_mut() = Some((from_db, to.to_vec())));
}

/// Valkey 8.1 runs keyspace-event subscribers on the calling client itself
/// and selects the event's database on it without selecting the caller's
/// back (valkey-io/valkey#4024): after MOVE or COPY ... DB n the client
/// would go on in database n. The arrival event ends both commands, and
/// the caller's database is known from `move_from` (MOVE) or the copy
/// callback (COPY of a queue), so it is selected again there. On servers
/// that run subscribers on a client of their own this selects on that
/// client, which changes nothing. (COPY ... DB n of a key that is not a
/// queue still moves the caller on those Valkey releases, as with any
/// module that subscribes to generic events.)
pub fn restore_caller_db(ctx: &Context, event: &[u8], name: &[u8]) {
    match event {
        b"move_from" => {
            let db = selected_db(ctx);
            CALLER_DB.with(|c| *c.borrow_mut() = Some((db, name.to_vec())));
        }
        b"move_to" | b"copy_to" => {
            if let Some((db, key)) = CALLER_DB.with(|c| c.borrow_mut().take()) {
                if key == name {
                    select_db(ctx, db);
                }
            }
        }
        _ => {}
    }
}
