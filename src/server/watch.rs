//! Clients waiting for something particular of one queue — DQ.WAIT for one
//! message's outcome — answered the moment a write, the timer or the key's
//! removal gives it, and at no cost while nobody waits.
//!
//! Unlike DQ.POP, which waits for any message and is served by whichever
//! client the server wakes first (keys signalled ready), a watcher waits
//! for its own answer: the module keeps the watchers of each queue and,
//! after each change of that queue, answers those that can be answered
//! (RedisModule_BlockClient and UnblockClient, from the main thread). A
//! removed key (DEL, UNLINK, RENAME away, MOVE, expiry, eviction, FLUSHDB)
//! answers them too, which key-blocked clients are not told of on every
//! server line.

use std::cell::{Cell, RefCell};
use std::os::raw::{c_int, c_void};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

use hashbrown::HashMap;
use redis_module::{raw, Context, RedisString, RedisValue};

use crate::core::error::Result;
use crate::core::queue::Queue;
use crate::core::registry::QueueRef;
use crate::server::guard;
use crate::server::keyspace::selected_db;

/// What a watcher waits for.
pub trait Watch: 'static {
    /// The reply (a value or an error), when the queue (`None`: the key is
    /// gone, or holds no queue) gives one now; `None` keeps the client
    /// waiting.
    fn answer(&self, queue: Option<&Queue>) -> Option<Result<RedisValue>>;
}

/// A reply handed from `settle` to `on_reply`: the error as its text, which
/// can be cloned into the reply.
type Answer = std::result::Result<RedisValue, String>;

struct Watcher {
    client: *mut raw::RedisModuleBlockedClient,
    watch: Box<dyn Watch>,
}

thread_local! {
    /// Set while dq replaces a queue's value with another (see `replacing`).
    static REPLACING: Cell<bool> = const { Cell::new(false) };

    /// The watchers of each queue, in the order they came. Main thread
    /// only; a queue is here only while someone waits on it.
    static WATCHERS: RefCell<HashMap<QueueRef, Vec<Watcher>>> = RefCell::new(HashMap::new());
}

/// How many queues have watchers: what every write reads first, a load
/// cheaper than reaching the thread-local map. Main thread only, so
/// relaxed; kept by `updated`.
static WATCHED: AtomicUsize = AtomicUsize::new(0);

/// Notes the map's size after a change of it.
fn updated(w: &HashMap<QueueRef, Vec<Watcher>>) {
    WATCHED.store(w.len(), Relaxed);
}

/// Whether anyone waits on the queue. Every write asks: most of the time
/// nobody waits anywhere, and that costs one load.
pub fn has_watchers(db: i32, name: &[u8]) -> bool {
    WATCHED.load(Relaxed) > 0 && WATCHERS.with(|w| w.borrow().contains_key(&(db, name.to_vec())))
}

/// Parks the calling client on the queue `name` of its database for up to
/// `timeout_ms` (0: for ever), until `watch` answers. The caller checked
/// the answer is not there yet, and that the client may block.
pub fn block(ctx: &Context, name: &RedisString, timeout_ms: u64, watch: Box<dyn Watch>) {
    let queue = (selected_db(ctx), name.as_slice().to_vec());
    // SAFETY: called from the command's own context, on the main thread.
    // The handle stays valid until UnblockClient is called for it, which
    // `answer`, `on_timeout` and `on_disconnect` do exactly once, each
    // after taking it off the list.
    let client = unsafe {
        let client = raw::RedisModule_BlockClient.unwrap()(
            ctx.ctx,
            Some(on_reply),
            Some(on_timeout),
            Some(free_reply),
            timeout_ms as i64,
        );
        raw::RedisModule_SetDisconnectCallback.unwrap()(client, Some(on_disconnect));
        client
    };
    WATCHERS.with(|w| {
        let mut w = w.borrow_mut();
        w.entry(queue).or_default().push(Watcher { client, watch });
        updated(&w);
    });
}

/// Answers the watchers of queue `name` that `queue` (`None`: it is gone)
/// answers now. Call after any change of the queue or of its key.
pub fn settle(db: i32, name: &[u8], queue: Option<&Queue>) {
    if !has_watchers(db, name) {
        return;
    }
    let key = (db, name.to_vec());
    let answered: Vec<(*mut raw::RedisModuleBlockedClient, Answer)> = WATCHERS.with(|w| {
        let mut w = w.borrow_mut();
        let Some(list) = w.get_mut(&key) else {
            return Vec::new();
        };
        let mut answered = Vec::new();
        list.retain(|watcher| match watcher.watch.answer(queue) {
            Some(value) => {
                answered.push((watcher.client, value.map_err(|e| e.to_string())));
                false
            }
            None => true,
        });
        if list.is_empty() {
            w.remove(&key);
            updated(&w);
        }
        answered
    });
    for (client, value) in answered {
        let reply = Box::into_raw(Box::new(value));
        // SAFETY: a handle from `block`, taken off the list just now, so
        // unblocked once; the server hands `reply` to `on_reply` and then
        // to `free_reply`, which frees it.
        unsafe { raw::RedisModule_UnblockClient.unwrap()(client, reply.cast()) };
    }
}

/// The queue `name` leaves the keyspace (deleted, renamed away or
/// overwritten): its watchers are told it is gone, unless dq itself is
/// replacing the value (see `replacing`), whose watchers are answered from
/// the new value once it is in place.
pub fn unlinked(db: i32, name: &[u8]) {
    if !REPLACING.with(Cell::get) {
        settle(db, name, None);
    }
}

/// Runs `f`, during which dq's own replacement of a value is not taken for
/// the key leaving.
pub fn replacing<T>(f: impl FnOnce() -> T) -> T {
    REPLACING.with(|r| r.set(true));
    let out = f();
    REPLACING.with(|r| r.set(false));
    out
}

/// Answers every watcher of a database (`None`: of all) whose queue is
/// gone: FLUSHDB, FLUSHALL.
pub fn settle_flushed(db: Option<i32>) {
    let keys: Vec<QueueRef> = WATCHERS.with(|w| {
        w.borrow()
            .keys()
            .filter(|(d, _)| db.is_none_or(|db| *d == db))
            .cloned()
            .collect()
    });
    for (db, name) in keys {
        settle(db, &name, None);
    }
}

/// The databases with watchers.
pub fn watched_dbs() -> Vec<i32> {
    WATCHERS.with(|w| {
        let mut dbs: Vec<i32> = w.borrow().keys().map(|(db, _)| *db).collect();
        dbs.sort_unstable();
        dbs.dedup();
        dbs
    })
}

/// The watched queues of a database, for a caller that settles each from
/// its key (SWAPDB).
pub fn watched_in(db: i32) -> Vec<Vec<u8>> {
    WATCHERS.with(|w| {
        w.borrow()
            .keys()
            .filter(|(d, _)| *d == db)
            .map(|(_, name)| name.clone())
            .collect()
    })
}

/// Takes a client off the lists (it timed out or went away).
fn forget(client: *mut raw::RedisModuleBlockedClient) {
    WATCHERS.with(|w| {
        let mut w = w.borrow_mut();
        for list in w.values_mut() {
            list.retain(|watcher| watcher.client != client);
        }
        w.retain(|_, list| !list.is_empty());
        updated(&w);
    });
}

extern "C" fn on_reply(
    ctx: *mut raw::RedisModuleCtx,
    _argv: *mut *mut raw::RedisModuleString,
    _argc: c_int,
) -> c_int {
    let ctx = Context::new(ctx);
    // SAFETY: the reply `settle` handed to UnblockClient, alive until
    // `free_reply` runs after this callback.
    let reply = unsafe { raw::RedisModule_GetBlockedClientPrivateData.unwrap()(ctx.ctx) };
    let value = (!reply.is_null()).then(|| unsafe { &*(reply as *const Answer) });
    if guard::catch("wait reply", || {
        ctx.reply(match value {
            Some(Ok(value)) => Ok(value.clone()),
            Some(Err(error)) => Err(redis_module::RedisError::String(error.clone())),
            None => Ok(RedisValue::Null),
        })
    })
    .is_none()
    {
        ctx.reply(Err(crate::server::reply::error(
            crate::core::error::DqError::Internal,
        )));
    }
    raw::REDISMODULE_OK as c_int
}

extern "C" fn on_timeout(
    ctx: *mut raw::RedisModuleCtx,
    _argv: *mut *mut raw::RedisModuleString,
    _argc: c_int,
) -> c_int {
    let ctx = Context::new(ctx);
    // SAFETY: the timeout callback of a client blocked by `block`: the
    // server gives the handle, which is still on a list (a client
    // answered is no longer blocked, so cannot time out).
    let client = unsafe { raw::RedisModule_GetBlockedClientHandle.unwrap()(ctx.ctx) };
    forget(client);
    ctx.reply(Ok(RedisValue::Null));
    // SAFETY: the server frees a timed-out handle only when the module
    // unblocks it, which nothing else will now (it left the lists).
    unsafe { raw::RedisModule_UnblockClient.unwrap()(client, std::ptr::null_mut()) };
    raw::REDISMODULE_OK as c_int
}

extern "C" fn on_disconnect(
    _ctx: *mut raw::RedisModuleCtx,
    client: *mut raw::RedisModuleBlockedClient,
) {
    forget(client);
    // SAFETY: as in `on_timeout`: the client went away, and the handle is
    // freed once the module unblocks it.
    unsafe { raw::RedisModule_UnblockClient.unwrap()(client, std::ptr::null_mut()) };
}

extern "C" fn free_reply(_ctx: *mut raw::RedisModuleCtx, reply: *mut c_void) {
    if !reply.is_null() {
        // SAFETY: made by Box::into_raw in `settle`; the server frees it once.
        drop(unsafe { Box::from_raw(reply.cast::<Answer>()) });
    }
}
