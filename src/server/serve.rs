//! Serving one queue: what a tick does to it (TTLs, leases, promotion,
//! schedule runs, within the tick's budget), propagated as one TICK, and
//! the takeover of a queue whose schedules missed runs while no master
//! held it. The timer (`timer.rs`) decides when; this opens the keys.

use std::cell::RefCell;
use std::time::Instant;

use redis_module::{Context, RedisString};

use crate::core::queue::TickWork;
use crate::core::registry::QueueRef;
use crate::server::key::QueueKey;
use crate::server::keyspace::{select_db, signal_ready};
use crate::server::registry;
use crate::server::replication;
use crate::server::settings;
use crate::server::timer::{record, CHUNK};

thread_local! {
    /// Queues that arrived with schedule runs due (RESTORE), and when: the
    /// next serving takes them over first. Rarely more than a few.
    static TAKE_OVERS: RefCell<Vec<(QueueRef, u64)>> = const { RefCell::new(Vec::new()) };
}

/// Expires TTLs and leases and promotes due messages of one queue within
/// `budget` and before `deadline`; propagates what it did as one
/// `DQ.APPLY queue now max-attempts TICK ...`; returns when the queue next
/// needs the timer.
pub fn serve(
    ctx: &Context,
    (db, name): &QueueRef,
    now: u64,
    budget: &mut usize,
    deadline: Instant,
) -> Option<u64> {
    if !select_db(ctx, *db) {
        return None;
    }
    let name = RedisString::create_from_slice(ctx.ctx, name);
    let mut key = match QueueKey::open(ctx, &name) {
        Ok(key) => key,
        // Not a queue any more: it leaves the schedule.
        Err(_) => return None,
    };
    let queue = key.queue()?;
    let policy = settings::policy(queue);
    let mut work = TickWork::default();
    let queue_ref = (*db, name.as_slice().to_vec());
    let pending = TAKE_OVERS.with(|t| {
        let takes = &mut t.borrow_mut();
        let at = takes.iter().position(|(q, _)| *q == queue_ref)?;
        Some(takes.swap_remove(at).1)
    });
    if let Some(at) = pending {
        work.runs = queue.take_over(at);
    }
    loop {
        let chunk = CHUNK.min(*budget);
        let done = queue.tick(now, chunk, &policy);
        let did = done.done();
        work.absorb(done);
        *budget -= did.min(*budget);
        // Less done than asked: nothing more is due here.
        if did < chunk || *budget == 0 || Instant::now() >= deadline {
            break;
        }
    }
    let mut next = queue.next_due();
    // Clients wait on the queue: wake them if its limits let go now, and
    // come back when they next will.
    if registry::has_waiters(*db, name.as_slice()) {
        if queue.deliverable(now) {
            signal_ready(ctx, &name);
        }
        if let Some(at) = queue.reopens_at(now) {
            next = Some(next.map_or(at, |n| n.min(at)));
        }
    }
    if !work.is_empty() {
        record(&work);
        replication::tick(ctx, &name, now, &work);
        // The schedule is set by the caller from `next`.
        key.announce(None);
    }
    next
}

/// The queue arrived at `at` with schedule runs due (see
/// `events::key_event`): its next serving takes it over as of then.
pub fn defer_take_over(queue: QueueRef, at: u64) {
    TAKE_OVERS.with(|t| t.borrow_mut().push((queue, at)));
}

/// Forgets the deferred takeovers of a database, or all (`None`): its
/// queues were flushed, or are about to be discovered again.
pub fn forget_take_overs(db: Option<i32>) {
    TAKE_OVERS.with(|t| {
        t.borrow_mut()
            .retain(|((q_db, _), _)| db.is_some_and(|db| *q_db != db))
    });
}

/// Takes over queue `name` of the selected database at `now` (see
/// `Queue::take_over`), propagating what it settled as one TICK.
pub fn take_over(ctx: &Context, name: &[u8], now: u64) {
    let name = RedisString::create_from_slice(ctx.ctx, name);
    let Ok(mut key) = QueueKey::open(ctx, &name) else {
        return;
    };
    let Some(queue) = key.queue() else {
        return;
    };
    let due_before = queue.next_due();
    let work = TickWork {
        runs: queue.take_over(now),
        ..TickWork::default()
    };
    if !work.is_empty() {
        record(&work);
        replication::tick(ctx, &name, now, &work);
        key.announce(due_before);
    }
}
