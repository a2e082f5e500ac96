//! What a queue counts and announces: lifetime counters (DQ.STATS) and
//! transitions (keyspace notifications on the queue name).

/// Lifetime counters kept with each queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Counter {
    Added,
    Delivered,
    Acked,
    Nacked,
    /// Deliveries that failed (NACK or lease expiry) and were scheduled again.
    Retried,
    LeaseExpired,
    DeadLettered,
    /// Messages that died because their TTL ran out.
    Expired,
    Redriven,
    Cancelled,
    Purged,
    /// POPs that delivered fewer than they asked (and than were ready)
    /// because of a pause, RATE or MAXINFLIGHT.
    Throttled,
    /// Done messages let go: their retention ran out, or RETAINMAX.
    Dropped,
}

impl Counter {
    pub const ALL: [Counter; 13] = [
        Counter::Added,
        Counter::Delivered,
        Counter::Acked,
        Counter::Nacked,
        Counter::Retried,
        Counter::LeaseExpired,
        Counter::DeadLettered,
        Counter::Expired,
        Counter::Redriven,
        Counter::Cancelled,
        Counter::Purged,
        Counter::Throttled,
        Counter::Dropped,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Counter::Added => "added",
            Counter::Delivered => "delivered",
            Counter::Acked => "acked",
            Counter::Nacked => "nacked",
            Counter::Retried => "retried",
            Counter::LeaseExpired => "lease-expired",
            Counter::DeadLettered => "dead-lettered",
            Counter::Expired => "expired",
            Counter::Redriven => "redriven",
            Counter::Cancelled => "cancelled",
            Counter::Purged => "purged",
            Counter::Throttled => "throttled",
            Counter::Dropped => "dropped",
        }
    }
}

/// A transition, announced as a keyspace notification on the queue name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    Add,
    Ready,
    Pop,
    Ack,
    Nack,
    Touch,
    LeaseExpired,
    Dead,
    Redrive,
    Cancel,
    Purge,
    Schedule,
    Unschedule,
    Pause,
    Resume,
    /// DQ.DONE ended deliveries with results.
    Done,
    /// Done messages were let go (retention, RETAINMAX).
    Dropped,
}

impl Event {
    pub const ALL: [Event; 17] = [
        Event::Add,
        Event::Ready,
        Event::Pop,
        Event::Ack,
        Event::Nack,
        Event::Touch,
        Event::LeaseExpired,
        Event::Dead,
        Event::Redrive,
        Event::Cancel,
        Event::Purge,
        Event::Schedule,
        Event::Unschedule,
        Event::Pause,
        Event::Resume,
        Event::Done,
        Event::Dropped,
    ];

    /// The event name, NUL-terminated for the notification API.
    pub fn name(self) -> &'static std::ffi::CStr {
        match self {
            Event::Add => c"dq.add",
            Event::Ready => c"dq.ready",
            Event::Pop => c"dq.pop",
            Event::Ack => c"dq.ack",
            Event::Nack => c"dq.nack",
            Event::Touch => c"dq.touch",
            Event::LeaseExpired => c"dq.lease-expired",
            Event::Dead => c"dq.dead",
            Event::Redrive => c"dq.redrive",
            Event::Cancel => c"dq.cancel",
            Event::Purge => c"dq.purge",
            Event::Schedule => c"dq.schedule",
            Event::Unschedule => c"dq.unschedule",
            Event::Pause => c"dq.pause",
            Event::Resume => c"dq.resume",
            Event::Done => c"dq.done",
            Event::Dropped => c"dq.dropped",
        }
    }
}

/// The kinds of transition one command or tick made: each is announced
/// once, however many messages it moved.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Events(u32);

impl Events {
    pub fn add(&mut self, event: Event) {
        self.0 |= 1 << event as u32;
    }

    pub fn contains(self, event: Event) -> bool {
        self.0 & (1 << event as u32) != 0
    }

    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// Each kind once, in a fixed order.
    pub fn iter(self) -> impl Iterator<Item = Event> {
        Event::ALL.into_iter().filter(move |e| self.contains(*e))
    }
}

/// The lifetime counters of one queue.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters(pub [u64; Counter::ALL.len()]);

impl Counters {
    pub fn get(&self, counter: Counter) -> u64 {
        self.0[counter as usize]
    }

    /// Every counter with its value, in `Counter::ALL` order.
    pub fn iter(&self) -> impl Iterator<Item = (Counter, u64)> + '_ {
        Counter::ALL.into_iter().map(|c| (c, self.get(c)))
    }

    /// Adds `n`; returns the new value.
    pub fn bump(&mut self, counter: Counter, n: u64) -> u64 {
        let value = &mut self.0[counter as usize];
        *value = value.saturating_add(n);
        *value
    }
}
