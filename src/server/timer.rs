//! The one module timer that replaces an external broker.
//!
//! It is armed for the earliest moment any queue has timed work (a delayed
//! message falling due, a lease ending) and for nothing else: an idle server
//! has no timer at all. A tick works in bounded batches. Work left over
//! (a burst falling due at once) goes on in the next turns of the event
//! loop, one batch per turn as the server wakes up, so clients are
//! served between batches and no turn waits for a timer (the server fires a
//! module timer at the earliest 1 ms after it was set, which left the main
//! thread idle a third of the time during a burst).
//!
//! Only a master runs it. What is due when comes from the registry of
//! queues (`server::registry`), which `events.rs` rebuilds and keeps.

use std::cell::{Cell, RefCell};
use std::os::raw::{c_int, c_void};
use std::time::{Duration, Instant};

use redis_module::{raw, Context, ContextFlags, RedisModuleTimerID};

use crate::core::queue::TickWork;
use crate::core::registry::QueueRef;
use crate::server::clock::now_ms;
use crate::server::guard;
use crate::server::keyspace::{select_db, selected_db};
use crate::server::registry;

/// The time a tick may take: the main-thread pause. A message costs more to
/// move as its queue grows, so a count alone would not bound the pause
/// (measured: 1024 promotions into a million-message ready set once took
/// up to 25 ms).
const TICK_TIME: Duration = Duration::from_millis(2);

/// And the messages a tick may move, across all queues: the time bound
/// decides in practice (the native queue promotes about 4,000 a
/// millisecond in a release build, measured with a million due at once);
/// this only caps a tick on a machine whose clock reads oddly.
pub const TICK_BUDGET: usize = 16_384;

/// Work is done in chunks this big between looks at the clock.
pub const CHUNK: usize = 128;

#[derive(Default)]
struct Timer {
    armed: Option<(RedisModuleTimerID, u64)>,
    /// Work is due now: the next wake-up event runs a tick.
    behind: bool,
    /// The next wake-up is the clients' turn, not the tick's.
    rest: bool,
    /// Subscribed to the event loop's wake-ups. Only while behind (and a
    /// moment after): the server calls a subscriber twice on every turn
    /// of its loop, a cost every workload would pay.
    listening: bool,
    /// A timer will unsubscribe (the event's own callback must not).
    unlisten_pending: bool,
    work: TimerWork,
}

/// What the timer has done since the module loaded.
#[derive(Debug, Clone, Copy, Default)]
pub struct TimerWork {
    pub ticks: u64,
    /// Ticks that went on with work a previous tick left, in the next turn
    /// of the event loop rather than by the timer.
    pub continued: u64,
    pub promoted: u64,
    pub leases_expired: u64,
    pub ttl_expired: u64,
    /// Schedule runs made.
    pub runs: u64,
    pub longest_tick_us: u64,
}

/// What `INFO dq` shows about the timer.
pub struct TimerReport {
    pub armed: bool,
    /// When the armed timer fires (Unix ms); `None` when none is armed.
    pub armed_for: Option<u64>,
    pub work: TimerWork,
    pub queues_scheduled: usize,
    /// How long the most overdue timed work has waited, in ms: 0 while the
    /// timer keeps up.
    pub lateness_ms: u64,
}

pub fn report() -> TimerReport {
    let now = now_ms();
    TIMER.with(|t| {
        let t = t.borrow();
        TimerReport {
            armed: t.armed.is_some() || t.behind,
            armed_for: t.armed.map(|(_, at)| at),
            work: t.work,
            queues_scheduled: registry::with(|r| r.scheduled()),
            lateness_ms: registry::with(|r| r.earliest()).map_or(0, |at| now.saturating_sub(at)),
        }
    })
}

/// Serves one queue in a tick (see `serve::serve`): handed over at start,
/// because serving opens keys, and keys tell the timer of their work.
pub type Serve = fn(&Context, &QueueRef, u64, &mut usize, Instant) -> Option<u64>;

thread_local! {
    static SERVE: Cell<Option<Serve>> = const { Cell::new(None) };
}

pub fn set_serve(serve: Serve) {
    SERVE.with(|s| s.set(Some(serve)));
}

thread_local! {
    // Redis calls commands, timers and events on its main thread only.
    static TIMER: RefCell<Timer> = RefCell::new(Timer::default());
    static MASTER: Cell<bool> = const { Cell::new(false) };
}

/// Whether this server is a master, as of the last role change. Asking the
/// server (RedisModule_GetContextFlags) on every write is not free, and the
/// role changes only where `read_role` is called: at load and on the
/// role-changed event.
pub fn is_master() -> bool {
    MASTER.with(Cell::get)
}

/// Reads the role from the server: at load and when it changes.
pub fn read_role(ctx: &Context) {
    let master = ctx.get_flags().contains(ContextFlags::MASTER);
    MASTER.with(|m| m.set(master));
}

/// A command created timed work in `queue` (of the selected database) at `at`.
pub fn note_due(ctx: &Context, queue: &[u8], at: u64) {
    let db = selected_db(ctx);
    registry::with(|r| r.note_due(db, queue, at));
    arm(ctx);
}

/// A write ran: if timed work is already due, it is served in the next
/// turn of the event loop rather than when the timer fires (a module timer
/// fires a millisecond late at best). Under steady traffic this is what
/// keeps a due message's wait well under a millisecond.
pub fn poke(ctx: &Context) {
    let due = TIMER.with(|t| {
        let t = t.borrow();
        !t.behind && registry::with(|r| r.earliest()).is_some_and(|at| at <= now_ms())
    });
    if due {
        arm(ctx);
    }
}

/// Makes sure a tick runs at the schedule's earliest time: in this turn of
/// the event loop if that time has come, else by the timer.
pub fn arm(ctx: &Context) {
    let earliest = registry::with(|r| r.earliest());
    let armed = TIMER.with(|t| t.borrow().armed);
    let earliest = earliest.filter(|_| is_master());
    let was_behind = TIMER.with(|t| t.borrow().behind);
    // Behind: the next turns of the event loop go on with the work (see
    // `on_wake_up`), where the server lets a module wake it up.
    let due_now = earliest.is_some_and(|at| at <= now_ms())
        && (was_behind || (can_wake_up() && listen_to_wake_ups(ctx)));
    TIMER.with(|t| t.borrow_mut().behind = due_now);
    if !due_now {
        stop_listening_soon(ctx);
    }
    let Some(at) = earliest.filter(|_| !due_now) else {
        if let Some((id, _)) = armed {
            let _ = ctx.stop_timer::<()>(id);
            TIMER.with(|t| t.borrow_mut().armed = None);
        }
        return;
    };
    if let Some((id, armed_at)) = armed {
        if armed_at <= at {
            return;
        }
        let _ = ctx.stop_timer::<()>(id);
    }
    // The server fires a timer no earlier than its period, so a message is
    // never promoted before its due millisecond.
    let now = now_ms();
    let fire_at = fire_time(at, now);
    // The timer carries no data: `stop_timer::<()>` above relies on that.
    let id = ctx.create_timer(Duration::from_millis(fire_at - now), tick, ());
    TIMER.with(|t| t.borrow_mut().armed = Some((id, fire_at)));
}

/// The longest period the timer is armed for: work further ahead is
/// reached in hops (a hop's tick finds nothing due and arms the next).
/// Redis 7.0's event loop multiplies the period a module timer handler
/// returns, in ms, by 1000 in 32-bit arithmetic: a period over 35.8
/// minutes wrapped to a time in the past, and the server spun at 100% CPU
/// calling its timer handler until that work fell due (fixed in 7.2).
const LONGEST_PERIOD_MS: u64 = 10 * 60 * 1000;

/// When to fire for work at `at` (Unix ms), at `now`.
fn fire_time(at: u64, now: u64) -> u64 {
    at.clamp(now, now + LONGEST_PERIOD_MS)
}

fn listen_to_wake_ups(ctx: &Context) -> bool {
    if TIMER.with(|t| t.borrow().listening) {
        return true;
    }
    // Not called from the event's own callback: that only runs while
    // already listening.
    let listening = subscribe(ctx, raw::REDISMODULE_EVENT_EVENTLOOP, Some(on_wake_up));
    TIMER.with(|t| t.borrow_mut().listening = listening);
    listening
}

/// Unsubscribing from inside the event's callback would free what the
/// server still uses after the call, so a timer does it.
fn stop_listening_soon(ctx: &Context) {
    let (listening, pending) = TIMER.with(|t| {
        let t = t.borrow();
        (t.listening, t.unlisten_pending)
    });
    if listening && !pending {
        ctx.create_timer(Duration::ZERO, stop_listening, ());
        TIMER.with(|t| t.borrow_mut().unlisten_pending = true);
    }
}

fn stop_listening(ctx: &Context, _: ()) {
    guard::catch("timer", || {
        let nothing_to_do = TIMER.with(|t| {
            let mut t = t.borrow_mut();
            t.unlisten_pending = false;
            t.behind || !t.listening
        });
        if nothing_to_do {
            return;
        }
        subscribe(ctx, raw::REDISMODULE_EVENT_EVENTLOOP, None);
        TIMER.with(|t| t.borrow_mut().listening = false);
    });
}

/// Whether the server lets a module wake its event loop (Redis 7.0 and
/// later, every Valkey); elsewhere a timer continues the work, 1 ms later.
fn can_wake_up() -> bool {
    // SAFETY: the API table is filled once at load and only read after.
    unsafe { raw::RedisModule_EventLoopAddOneShot }.is_some()
}

/// Makes sure the coming poll of the event loop does not sleep: without
/// this, the server could wait for its next own timer (up to 100 ms)
/// before the turn that continues the work. Called just before the poll:
/// a wake-up written earlier in a turn can be read and dropped by that
/// same turn (the server drains its module pipe when it serves it).
fn wake_up_next_turn() -> bool {
    extern "C" fn nothing(_: *mut c_void) {}
    // SAFETY: main thread; the callback ignores its null argument. The
    // call only queues the callback and writes a byte to the server's
    // module pipe.
    unsafe {
        raw::RedisModule_EventLoopAddOneShot.is_some_and(|add| {
            add(Some(nothing), std::ptr::null_mut()) == raw::REDISMODULE_OK as c_int
        })
    }
}

/// The timer fired.
fn tick(ctx: &Context, _: ()) {
    TIMER.with(|t| t.borrow_mut().armed = None);
    guarded_tick(ctx);
}

/// The event loop's turns, while behind: just before it polls, make sure
/// the poll does not sleep; just after, go on with the work that is due,
/// before the server serves the clients whose requests woke it (their
/// replies then wait for one tick, not for this tick and the next).
extern "C" fn on_wake_up(
    ctx: *mut raw::RedisModuleCtx,
    _event: raw::RedisModuleEvent,
    subevent: u64,
    _data: *mut c_void,
) {
    let behind = TIMER.with(|t| t.borrow().behind);
    if !behind {
        return;
    }
    if subevent == raw::REDISMODULE_SUBEVENT_EVENTLOOP_BEFORE_SLEEP {
        wake_up_next_turn();
        return;
    }
    if subevent != raw::REDISMODULE_SUBEVENT_EVENTLOOP_AFTER_SLEEP {
        return;
    }
    if TIMER.with(|t| std::mem::take(&mut t.borrow_mut().rest)) {
        // Requests that came during the last tick were not in the poll
        // that woke the server: a turn without a tick serves them before
        // the next tick, so a client waits for one tick at most.
        return;
    }
    TIMER.with(|t| {
        let mut t = t.borrow_mut();
        t.behind = false;
        t.work.continued += 1;
    });
    guarded_tick(&Context::new(ctx));
}

fn guarded_tick(ctx: &Context) {
    if guard::catch("timer", || run_tick(ctx)).is_none() {
        // The tick stopped half-way: try again in a second rather than at
        // once, so that a fault that repeats costs a log line a second.
        if let Some((id, _)) = TIMER.with(|t| t.borrow_mut().armed.take()) {
            let _ = ctx.stop_timer::<()>(id);
        }
        let id = ctx.create_timer(Duration::from_secs(1), tick, ());
        TIMER.with(|t| {
            let mut t = t.borrow_mut();
            t.armed = Some((id, now_ms() + 1000));
            t.behind = false;
        });
        stop_listening_soon(ctx);
    }
}

fn run_tick(ctx: &Context) {
    let started = std::time::Instant::now();
    TIMER.with(|t| t.borrow_mut().work.ticks += 1);
    if !is_master() {
        return;
    }
    let now = now_ms();
    let due = registry::with(|r| r.take_due(now));
    let original_db = selected_db(ctx);
    let mut budget = TICK_BUDGET;
    let deadline = started + TICK_TIME;
    for (at, queue) in due {
        if std::time::Instant::now() >= deadline {
            budget = 0;
        }
        let next = if budget == 0 {
            Some(at) // not served: keeps its place in line
        } else {
            // A queue with work left goes behind everything due before now,
            // so one big backlog cannot starve the other queues.
            // A queue that makes serving panic leaves the schedule (logged)
            // until a command or key event brings it back.
            let serve = SERVE.with(Cell::get);
            guard::catch("serve", || {
                serve.and_then(|f| f(ctx, &queue, now, &mut budget, deadline))
            })
            .flatten()
            .map(|next| next.max(now))
        };
        registry::with(|r| r.set_due(queue.0, &queue.1, next));
    }
    select_db(ctx, original_db);
    let took = started.elapsed().as_micros() as u64;
    TIMER.with(|t| {
        let work = &mut t.borrow_mut().work;
        work.longest_tick_us = work.longest_tick_us.max(took);
    });
    arm(ctx);
    TIMER.with(|t| {
        let mut t = t.borrow_mut();
        t.rest = t.behind;
    });
}

/// Counts a tick's work (or a takeover's) in INFO dq.
pub fn record(work: &TickWork) {
    TIMER.with(|t| {
        let total = &mut t.borrow_mut().work;
        total.ttl_expired += work.ttl_expired as u64;
        total.leases_expired += work.leases_expired as u64;
        total.promoted += work.promoted as u64;
        total.runs += work.runs.iter().map(|r| r.made.len() as u64).sum::<u64>();
    });
}

/// Subscribes to server event `id`, or unsubscribes (`None`); false when
/// the server refused.
pub fn subscribe(ctx: &Context, id: u64, callback: raw::RedisModuleEventCallback) -> bool {
    // SAFETY: live module context on the main thread; the callback, if any,
    // is an `extern "C"` function of the module.
    let status = unsafe {
        raw::RedisModule_SubscribeToServerEvent.unwrap()(
            ctx.ctx,
            raw::RedisModuleEvent { id, dataver: 1 },
            callback,
        )
    };
    status == raw::REDISMODULE_OK as c_int
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_timer_fires_at_the_work_or_within_the_longest_period() {
        assert_eq!(fire_time(1_500, 1_000), 1_500);
        assert_eq!(fire_time(500, 1_000), 1_000, "overdue: at once");
        let far = 1_000 + 24 * 3_600_000;
        assert_eq!(fire_time(far, 1_000), 1_000 + LONGEST_PERIOD_MS);
        // Under the period Redis 7.0's event loop mishandles (2^31 µs).
        assert!(LONGEST_PERIOD_MS * 1000 < i32::MAX as u64);
    }
}
