//! How the node learns which queues it holds, and keeps knowing: the
//! registry of queues (and, on a master, their timed work) is rebuilt from
//! the keys whenever the server may hold queues it has not seen — module
//! load, the end of an RDB/AOF load, promotion from replica to master, and
//! SWAPDB — and kept as keys change behind dq's back: DEL, EXPIRE, RENAME,
//! MOVE, COPY, RESTORE (as slot migration does), FLUSHDB.

use std::cell::Cell;
use std::collections::BTreeSet;
use std::ffi::CStr;
use std::os::raw::{c_char, c_int, c_void};

use redis_module::{raw, Context, RedisString};

use crate::server::clock::now_ms;
use crate::server::guard;
use crate::server::key::{self, scan_queues};
use crate::server::keyspace::{restore_caller_db, select_db, selected_db};
use crate::server::registry;
use crate::server::serve::{self, defer_take_over, forget_take_overs, take_over};
use crate::server::timer::{arm, is_master, read_role, set_serve, subscribe};
use crate::server::watch;

/// Queues kept in a retired layout, found while discovering. The server
/// glue cannot import the importer (`legacy`, which builds on it), so the
/// module's entry point hands it over at load.
pub struct Importer {
    /// The queue a key of the old layout belongs to, if it is one.
    pub queue_of: fn(&[u8]) -> Option<Vec<u8>>,
    /// Converts one queue of database `db` into today's one key.
    pub convert: fn(&Context, i32, &[u8]),
}

thread_local! {
    static IMPORTER: Cell<Option<&'static Importer>> = const { Cell::new(None) };
}

pub fn set_importer(importer: &'static Importer) {
    IMPORTER.with(|i| i.set(Some(importer)));
}

/// Rebuilds the registry of queues (and, on a master, their timed work)
/// from the keys of every database; a master converts the queues it finds
/// in a retired layout, and then counts that database again.
///
/// A master takes over each queue whose schedules have runs due: the run
/// times that passed with no master to make them are settled as MISSED
/// says (see `Queue::take_over`).
pub fn discover(ctx: &Context) {
    registry::with(|r| r.clear(None));
    forget_take_overs(None);
    let master = is_master();
    let now = now_ms();
    let original_db = selected_db(ctx);
    let mut db = 0;
    while select_db(ctx, db) {
        let (old, missed) = track_db(ctx, db, master, now);
        // Not while scanning: converting and taking over write the keyspace.
        let importer = IMPORTER.with(Cell::get);
        if let Some(importer) = importer.filter(|_| master && !old.is_empty()) {
            for name in &old {
                (importer.convert)(ctx, db, name);
            }
            track_db(ctx, db, master, now);
        }
        for name in missed.iter().filter(|_| master) {
            take_over(ctx, name, now);
        }
        db += 1;
    }
    select_db(ctx, original_db);
    arm(ctx);
}

/// Counts every queue of the selected database `db` and (on a master)
/// puts it on the schedule; returns the queues of a retired layout it
/// saw, and the queues with schedule runs due at `now`.
fn track_db(ctx: &Context, db: i32, master: bool, now: u64) -> (BTreeSet<Vec<u8>>, Vec<Vec<u8>>) {
    let mut old = BTreeSet::new();
    let mut missed = Vec::new();
    let importer = IMPORTER.with(Cell::get);
    scan_queues(ctx, |name, queue| match queue {
        Some(queue) => {
            registry::with(|r| {
                r.set_counts(db, name, Some(queue.counts()));
                if let Some(at) = queue.next_due().filter(|_| master) {
                    r.note_due(db, name, at);
                }
            });
            if queue.runs_due(now) {
                missed.push(name.to_vec());
            }
        }
        None => old.extend(importer.and_then(|i| (i.queue_of)(name))),
    });
    (old, missed)
}

extern "C" fn on_role_changed(
    ctx: *mut raw::RedisModuleCtx,
    _event: raw::RedisModuleEvent,
    _subevent: u64,
    _data: *mut c_void,
) {
    // Now master: serve what replication brought. Now replica: stop.
    guard::catch("role change", || {
        let ctx = Context::new(ctx);
        read_role(&ctx);
        discover(&ctx);
    });
}

extern "C" fn on_swapdb(
    ctx: *mut raw::RedisModuleCtx,
    _event: raw::RedisModuleEvent,
    _subevent: u64,
    _data: *mut c_void,
) {
    guard::catch("swapdb", || {
        let ctx = Context::new(ctx);
        discover(&ctx);
        settle_watchers(&ctx);
    });
}

/// Answers every waiting client from what its key holds now (after
/// SWAPDB, which moves whole databases under them).
fn settle_watchers(ctx: &Context) {
    let original = selected_db(ctx);
    for db in watch::watched_dbs() {
        if !select_db(ctx, db) {
            continue;
        }
        for name in watch::watched_in(db) {
            let name = RedisString::create_from_slice(ctx.ctx, &name);
            let handle = key::open_read(ctx, &name);
            let queue = key::read(&handle, &name).ok().flatten();
            watch::settle(db, name.as_slice(), queue);
        }
    }
    select_db(ctx, original);
}

/// A key changed without a DQ command: DEL, UNLINK, EXPIRE, RENAME, MOVE,
/// COPY, RESTORE (as slot migration does)... (The module's own writes
/// announce `dq.*` events and keep the registry themselves.) A key
/// that arrived is opened: if it is a queue, the registry counts it and, on
/// a master, its place in the schedule is computed from it. A key that
/// left, or was replaced by something else, is forgotten if it was a
/// queue. Other events — and every event on any other key in the server —
/// cost a name comparison, not a key lookup.
extern "C" fn on_key_event(
    ctx: *mut raw::RedisModuleCtx,
    _type: c_int,
    event: *const c_char,
    key: *mut raw::RedisModuleString,
) -> c_int {
    guard::catch("key event", || key_event(ctx, event, key));
    raw::REDISMODULE_OK as c_int
}

fn key_event(
    ctx: *mut raw::RedisModuleCtx,
    event: *const c_char,
    key: *mut raw::RedisModuleString,
) {
    // SAFETY: Redis passes a NUL-terminated event name, valid for the call.
    let event = unsafe { CStr::from_ptr(event) }.to_bytes();
    let arrived = match event {
        b"restore" | b"rename_to" | b"move_to" | b"copy_to" => true,
        b"del" | b"expired" | b"evicted" | b"rename_from" | b"move_from" => false,
        // EXPIRE, PERSIST, dq's own `dq.*` announcements: the value stays.
        _ => return,
    };
    let ctx = Context::new(ctx);
    let db = selected_db(&ctx);
    let name = RedisString::new(std::ptr::NonNull::new(ctx.ctx), key);
    key_changed(&ctx, db, event, &name, arrived);
    restore_caller_db(&ctx, event, name.as_slice());
}

fn key_changed(ctx: &Context, db: i32, event: &[u8], name: &RedisString, arrived: bool) {
    let now = now_ms();
    let (counts, next, missed) = if arrived {
        let handle = key::open_read(ctx, name);
        match key::read(&handle, name) {
            Ok(Some(queue)) => (Some(queue.counts()), queue.next_due(), queue.runs_due(now)),
            _ => (None, None, false),
        }
    } else {
        (None, None, false)
    };
    // A client waiting on the queue is answered from what the key now
    // holds: nothing, when it left.
    if watch::has_watchers(db, name.as_slice()) {
        let handle = key::open_read(ctx, name);
        let queue = key::read(&handle, name).ok().flatten();
        watch::settle(db, name.as_slice(), queue);
    }
    let name = name.as_slice();
    if counts.is_none() && !registry::with(|r| r.knows(db, name)) {
        return; // not a queue, and never was
    }
    registry::with(|r| r.set_counts(db, name, counts));
    if is_master() {
        // A queue restored from elsewhere (a slot move, a backup) missed
        // the runs due meanwhile. A key event may not write: the timer's
        // next serving of the queue settles them, as of now.
        if missed && event == b"restore" {
            defer_take_over((db, name.to_vec()), now);
        }
        registry::with(|r| r.set_due(db, name, next));
        arm(ctx);
    }
}

extern "C" fn on_flush(
    ctx: *mut raw::RedisModuleCtx,
    _event: raw::RedisModuleEvent,
    subevent: u64,
    data: *mut c_void,
) {
    if subevent != raw::REDISMODULE_SUBEVENT_FLUSHDB_END || data.is_null() {
        return;
    }
    // SAFETY: for this event Redis passes a RedisModuleFlushInfo.
    let info = unsafe { &*(data as *const raw::RedisModuleFlushInfo) };
    let db = (info.dbnum >= 0).then_some(info.dbnum);
    guard::catch("flush", || {
        watch::settle_flushed(db);
        registry::with(|r| r.clear(db));
        forget_take_overs(db);
        arm(&Context::new(ctx));
    });
}

extern "C" fn on_loading(
    ctx: *mut raw::RedisModuleCtx,
    _event: raw::RedisModuleEvent,
    subevent: u64,
    _data: *mut c_void,
) {
    if subevent == raw::REDISMODULE_SUBEVENT_LOADING_ENDED {
        guard::catch("loading", || discover(&Context::new(ctx)));
    }
}

/// Subscribes to the server events that can bring queues the schedule does
/// not know, and builds the schedule for data already present.
pub fn start(ctx: &Context) -> Result<(), String> {
    set_serve(serve::serve);
    let events = [
        (
            raw::REDISMODULE_EVENT_REPLICATION_ROLE_CHANGED,
            on_role_changed as _,
        ),
        (raw::REDISMODULE_EVENT_LOADING, on_loading as _),
        (raw::REDISMODULE_EVENT_SWAPDB, on_swapdb as _),
        (raw::REDISMODULE_EVENT_FLUSHDB, on_flush as _),
    ];
    for (id, callback) in events {
        if !subscribe(ctx, id, Some(callback)) {
            return Err(format!("could not subscribe to server event {id}"));
        }
    }
    // SAFETY: as above.
    let status = unsafe {
        raw::RedisModule_SubscribeToKeyspaceEvents.unwrap()(
            ctx.ctx,
            raw::REDISMODULE_NOTIFY_GENERIC
                | raw::REDISMODULE_NOTIFY_EXPIRED
                | raw::REDISMODULE_NOTIFY_EVICTED,
            Some(on_key_event),
        )
    };
    if status != raw::REDISMODULE_OK as c_int {
        return Err("could not subscribe to keyspace events".into());
    }
    read_role(ctx);
    discover(ctx);
    Ok(())
}
