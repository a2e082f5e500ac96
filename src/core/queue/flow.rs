//! A queue's flow control: a pause, a RATE and a MAXINFLIGHT, enforced on
//! every POP, so they hold across any number of consumers.
//!
//! A POP delivers what the limits allow at its time (maybe fewer than it
//! asked, maybe none); what it cannot deliver stays ready. The pause and
//! the delivery log are state of the queue's value, written by commands
//! and by their replay at the master's time; RATE and MAXINFLIGHT are its
//! settings (`QueueConfig`).

use super::{Counter, Event, Kind, Queue, Rare};
use crate::core::flow::DeliveryLog;

/// `paused_until` of a queue paused until DQ.RESUME.
pub const FOREVER: u64 = u64::MAX;

/// The state flow control keeps (in the queue's rare parts).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Flow {
    /// Paused until this time (`FOREVER`: until DQ.RESUME); `None`: not
    /// paused.
    pub paused_until: Option<u64>,
    /// Recent deliveries, kept while a RATE is set.
    pub log: DeliveryLog,
}

impl Flow {
    pub(super) const fn new() -> Flow {
        Flow {
            paused_until: None,
            log: DeliveryLog::new(),
        }
    }

    pub(super) fn is_empty(&self) -> bool {
        self.paused_until.is_none() && self.log.is_empty()
    }
}

impl Queue {
    /// The flow state (the codec).
    pub fn flow(&self) -> &Flow {
        &Rare::of(&self.rare).flow
    }

    /// Puts back a stored flow state (the codec).
    pub(super) fn restore_flow(&mut self, flow: Flow) {
        Rare::make(&mut self.rare).flow = flow;
        self.fit_log_to_rate();
        Rare::tidy(&mut self.rare);
    }

    /// Pauses POP until `until` (`FOREVER` for until DQ.RESUME).
    pub fn pause(&mut self, now: u64, until: u64) {
        Rare::make(&mut self.rare).flow.paused_until = Some(until);
        self.note_queue(now, Kind::Paused, None);
        self.events.add(Event::Pause);
    }

    /// Ends a pause: whether the queue was paused at `now`, and whether
    /// anything changed (a pause whose time had passed is forgotten too).
    pub fn resume(&mut self, now: u64) -> (bool, bool) {
        let was = self.paused_at(now);
        let changed = self
            .rare
            .as_deref_mut()
            .and_then(|rare| rare.flow.paused_until.take())
            .is_some();
        Rare::tidy(&mut self.rare);
        if was {
            self.note_queue(now, Kind::Resumed, None);
            self.events.add(Event::Resume);
        }
        (was, changed)
    }

    /// Whether POP delivers nothing at `now` because of a pause.
    pub fn paused_at(&self, now: u64) -> bool {
        Rare::of(&self.rare)
            .flow
            .paused_until
            .is_some_and(|until| now < until)
    }

    /// `(paused, paused-until)` as DQ.STATS shows them: the end of the
    /// pause, `None` for a pause until DQ.RESUME or no pause.
    pub fn pause_state(&self, now: u64) -> (bool, Option<u64>) {
        let until = Rare::of(&self.rare).flow.paused_until;
        let paused = until.is_some_and(|until| now < until);
        (paused, until.filter(|&u| paused && u != FOREVER))
    }

    /// How many messages the limits let a POP deliver at `now`.
    pub fn allowance(&self, now: u64) -> usize {
        if self.paused_at(now) {
            return 0;
        }
        let mut allowed = usize::MAX;
        let config = self.config();
        if let Some(max) = config.max_inflight {
            allowed = allowed.min((max as usize).saturating_sub(self.inflight.len()));
        }
        if let Some(rate) = config.rate {
            let left = Rare::of(&self.rare).flow.log.allowance(now, &rate);
            allowed = allowed.min(usize::try_from(left).unwrap_or(usize::MAX));
        }
        allowed
    }

    /// Forgets deliveries the rate no longer counts at `now`: POP and its
    /// replay do it, at the same time on every server.
    pub(super) fn prune_log(&mut self, now: u64) {
        if let (Some(rate), Some(rare)) = (self.config().rate, self.rare.as_deref_mut()) {
            rare.flow.log.prune(now, &rate);
        }
        Rare::tidy(&mut self.rare);
    }

    /// Whether a POP at `now` could deliver something.
    pub fn deliverable(&self, now: u64) -> bool {
        self.ready_len() > 0 && self.allowance(now) > 0
    }

    /// When the limits next let a POP deliver, if they let none at `now`
    /// and something is ready: a pause's end, or the rate window moving
    /// on. `None` while MAXINFLIGHT alone holds (an ACK frees it: no timer
    /// needed) or a pause has no end.
    pub fn reopens_at(&self, now: u64) -> Option<u64> {
        if self.ready_len() == 0 || self.allowance(now) > 0 {
            return None;
        }
        let flow = &Rare::of(&self.rare).flow;
        if let Some(until) = flow.paused_until.filter(|&u| now < u) {
            return (until != FOREVER).then_some(until);
        }
        let config = self.config();
        if config
            .max_inflight
            .is_some_and(|max| self.inflight.len() >= max as usize)
        {
            return None;
        }
        config.rate.and_then(|rate| flow.log.reopens_at(now, &rate))
    }

    /// Notes `n` deliveries at `now` in the rate's log.
    /// Logs `n` deliveries at `now` under a RATE, pruning first what no
    /// window ending then holds. Only a POP that delivered touches the log:
    /// one that delivered nothing propagates nothing, so it must change
    /// nothing a replica would hold differently.
    pub(super) fn log_deliveries(&mut self, now: u64, n: usize) {
        if n > 0 && self.config().rate.is_some() {
            self.prune_log(now);
            Rare::make(&mut self.rare).flow.log.record(now, n as u64);
        }
    }

    /// A POP asked for `asked` and was given `given` of `ready` ready
    /// messages: when the limits gave fewer than both, it counts as
    /// throttled.
    pub(super) fn note_throttle(&mut self, asked: usize, given: usize, ready: usize) {
        if given < asked.min(ready) {
            self.counters.bump(Counter::Throttled, 1);
        }
    }

    /// Keeps the delivery log to what the rate needs: none without one.
    pub(super) fn fit_log_to_rate(&mut self) {
        if self.config().rate.is_none() {
            if let Some(rare) = self.rare.as_deref_mut() {
                rare.flow.log = DeliveryLog::default();
            }
            Rare::tidy(&mut self.rare);
        }
    }
}
