//! A queue's key: opening it as the module type (WRONGTYPE for any other),
//! and what every write owes the rest of the server afterwards — WATCH and
//! client tracking, keyspace notifications, blocked consumers, and the
//! registry of queues (INFO's counts, the timer's schedule). Replication is each command's own
//! business (see `replication.rs`).

use std::ptr::NonNull;

use redis_module::key::{RedisKey, RedisKeyWritable};
use redis_module::{raw, Context, NotifyEvent, RedisString};

use crate::core::error::{printable, DqError, Result};
use crate::core::queue::{Event, Queue};
use crate::server::clock::now_ms;
use crate::server::data_type::QUEUE_TYPE;
use crate::server::guard;
use crate::server::keyspace::{scan_keys, selected_db, signal_modified, signal_ready};
use crate::server::registry;
use crate::server::replication;
use crate::server::timer;
use crate::server::watch;

fn wrong_type(name: &RedisString) -> DqError {
    DqError::WrongType(printable(name.as_slice()))
}

/// The queue under `name` for reading: `None` when the key is absent.
/// The queue borrows the open key.
pub fn read<'k>(key: &'k RedisKey, name: &RedisString) -> Result<Option<&'k Queue>> {
    let queue = key
        .get_value::<Queue>(&QUEUE_TYPE)
        .map_err(|_| wrong_type(name))?;
    match queue {
        Some(queue) if queue.is_damaged() => Err(damaged(name)),
        queue => Ok(queue),
    }
}

fn damaged(name: &RedisString) -> DqError {
    DqError::Damaged(printable(name.as_slice()))
}

pub fn open_read(ctx: &Context, name: &RedisString) -> RedisKey {
    ctx.open_key(name)
}

/// A queue key opened for writing.
pub struct QueueKey<'c> {
    ctx: &'c Context,
    name: &'c RedisString,
    key: RedisKeyWritable,
    /// The queue `key` holds, found once: each lookup through the key API
    /// asks the server the key's type and module type again (about 80
    /// instructions, several times a command).
    value: Option<NonNull<Queue>>,
}

impl<'c> QueueKey<'c> {
    /// Opens `name` for writing; a key of another type is refused before
    /// anything changes.
    pub fn open(ctx: &'c Context, name: &'c RedisString) -> Result<QueueKey<'c>> {
        let key = ctx.open_key_writable(name);
        let mut opened = QueueKey {
            ctx,
            name,
            key,
            value: None,
        };
        opened.find()?;
        Ok(opened)
    }

    /// Looks the value up through the key API (after opening the key or
    /// giving it a value).
    /// A damaged queue is refused (see `guard`); any other is noted, to be
    /// checked if the entry point panics.
    fn find(&mut self) -> Result<()> {
        let value = self
            .key
            .get_value::<Queue>(&QUEUE_TYPE)
            .map_err(|_| wrong_type(self.name))?;
        if value.as_ref().is_some_and(|q| q.is_damaged()) {
            return Err(damaged(self.name));
        }
        self.value = value.map(NonNull::from);
        if let Some(queue) = self.value {
            guard::opened(self.ctx, self.name, queue);
        }
        Ok(())
    }

    /// The queue, or `None` when the key does not exist.
    pub fn queue(&mut self) -> Option<&mut Queue> {
        // SAFETY: `value` is the module value of `self.key`, which stays
        // open, holding that value, while `self` lives: only
        // `queue_or_create` and `replace` give the key a value, and both
        // look it up again, and no dq command deletes its own key. The
        // borrow is of `self`, so no two references to the queue coexist.
        self.value.map(|mut queue| unsafe { queue.as_mut() })
    }

    /// The queue, created empty if the key does not exist.
    pub fn queue_or_create(&mut self) -> Result<&mut Queue> {
        if self.value.is_none() {
            self.key
                .set_value(&QUEUE_TYPE, Queue::new())
                .map_err(|_| wrong_type(self.name))?;
            self.find()?;
        }
        self.queue().ok_or(DqError::Internal)
    }

    /// Replaces the value, if any (the AOF rewrite's LOAD, the importer of
    /// the multi-key layout): setting a module value frees the one it replaces.
    pub fn replace(&mut self, queue: Queue) -> Result<()> {
        if let Some(old) = self.value.take() {
            guard::forget(old);
        }
        watch::replacing(|| self.key.set_value(&QUEUE_TYPE, queue))
            .map_err(|_| wrong_type(self.name))?;
        self.find()
    }

    /// The value changed without a transition (settings): WATCH and INFO
    /// must know.
    pub fn changed(&mut self) {
        let (ctx, name) = (self.ctx, self.name);
        signal_modified(ctx, name);
        if let Some(queue) = self.queue() {
            let counts = queue.counts();
            let db = selected_db(ctx);
            registry::with(|r| r.set_counts(db, name.as_slice(), Some(counts)));
            watch::settle(db, name.as_slice(), Some(queue));
            // New limits may let blocked clients through.
            if registry::has_waiters(db, name.as_slice()) && queue.deliverable(now_ms()) {
                signal_ready(ctx, name);
            }
        }
    }

    /// Tells the server what the last operation changed; nothing when it
    /// changed nothing. `due_before`: the queue's next timed work before
    /// the operation, so the timer learns only of earlier work.
    pub fn announce(&mut self, due_before: Option<u64>) {
        let (ctx, name) = (self.ctx, self.name);
        let Some(queue) = self.queue() else {
            return;
        };
        let events = queue.take_events();
        if events.is_empty() {
            return;
        }
        let counts = queue.counts();
        let due = queue.next_due();
        signal_modified(ctx, name);
        for event in events.iter() {
            notify(ctx, name, event);
        }
        // Blocked clients try again when messages became ready, or when a
        // limit let go (an ACK under MAXINFLIGHT, RESUME, new settings).
        let db = selected_db(ctx);
        // Read once: each read of a server string is a call into the server.
        let bytes = name.as_slice();
        if events.contains(Event::Ready)
            || (registry::has_waiters(db, bytes) && queue.deliverable(now_ms()))
        {
            signal_ready(ctx, name);
        }
        registry::with(|r| r.set_counts(db, bytes, Some(counts)));
        watch::settle(db, bytes, Some(queue));
        match due.filter(|&at| due_before.is_none_or(|before| at < before)) {
            Some(at) => timer::note_due(ctx, bytes, at),
            None => timer::poke(ctx),
        }
    }
}

/// What a queue that a panic interrupted, but left passing its check, is
/// owed (see `guard`): its whole value propagated, since replicas and the
/// AOF got none of the change, and the announcement of a write.
pub fn recover(ctx: &Context, name: &RedisString, queue: &mut Queue) {
    queue.take_events();
    replication::load(ctx, name, queue);
    signal_modified(ctx, name);
    let db = selected_db(ctx);
    registry::with(|r| r.set_counts(db, name.as_slice(), Some(queue.counts())));
    if registry::has_waiters(db, name.as_slice()) && queue.deliverable(now_ms()) {
        signal_ready(ctx, name);
    }
    watch::settle(db, name.as_slice(), Some(queue));
    match queue.next_due() {
        Some(at) => timer::note_due(ctx, name.as_slice(), at),
        None => timer::poke(ctx),
    }
}

fn notify(ctx: &Context, name: &RedisString, event: Event) {
    // SAFETY: main thread, live context; the event name is a C string and
    // the key name outlives the call.
    unsafe {
        raw::RedisModule_NotifyKeyspaceEvent.unwrap()(
            ctx.ctx,
            NotifyEvent::GENERIC.bits(),
            event.name().as_ptr(),
            name.inner,
        );
    }
}

/// The queue behind a key handle the server opened (a scan's), if it is
/// one.
///
/// # Safety
/// `key` must be an open key handle, valid for the borrow.
pub unsafe fn queue_of<'k>(key: *mut raw::RedisModuleKey) -> Option<&'k Queue> {
    if raw::RedisModule_KeyType.unwrap()(key) != raw::REDISMODULE_KEYTYPE_MODULE as i32
        || raw::RedisModule_ModuleTypeGetType.unwrap()(key) != *QUEUE_TYPE.raw_type.borrow()
    {
        return None;
    }
    raw::RedisModule_ModuleTypeGetValue.unwrap()(key)
        .cast::<Queue>()
        .as_ref()
}

/// Calls `visit` with the name of every key in the selected database and
/// the queue it holds, if it is one.
pub fn scan_queues(ctx: &Context, mut visit: impl FnMut(&[u8], Option<&Queue>)) {
    scan_keys(ctx, |name, key| {
        // SAFETY: `key` is the open handle the scan passes for this key,
        // valid during the callback.
        let queue = key.and_then(|key| unsafe { queue_of(key) });
        visit(name, queue);
    });
}
