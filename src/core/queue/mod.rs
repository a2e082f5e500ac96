//! The queue value: one Redis key of the module's own type holds one of
//! these, and every transition of its messages is a method on it.
//!
//! ```text
//!   ADD ──► delayed ──(due: timer)──► ready ──POP──► inflight ──ACK──► gone
//!    └────────(due now)──────────────►  ▲  ▲            │
//!               ▲                       │  └(lease ends)┤
//!               └────────(NACK: backoff)┼───────────────┤
//!                                       │               ▼ attempts used up
//!                                       └──REDRIVE──── dead
//! ```
//! CANCEL removes a message from any state, PURGE a whole state.
//!
//! GROUP: a message of a group becomes ready only by taking its group; the
//! group stays taken through its delivery and retries until that message is
//! acknowledged, dead, cancelled or replaced. Meanwhile the group's other
//! due messages wait (state `Waiting`, reported as delayed) in due, then
//! insertion order, and the first of them is ready the moment the group is
//! free. A lease that runs out leaves the group with its holder, so the
//! holder is redelivered before anything behind it.
//!
//! Layout: records in a slab (`messages.rs`), found by id through a table
//! of slot numbers; one sorted index of plain integer keys per state
//! (`index.rs`), ordered as messages leave that state; a TTL index; groups with their holder and
//! waiting line. A record's index entries are derived from its fields
//! (`unindex`/`index` bracket every change), which is also how a loaded
//! value is rebuilt and checked (`codec.rs`).
//!
//! Nothing here knows about Redis, clocks or replication: callers pass
//! `now` and the policy in force, and read back what happened.

pub mod codec;
mod events;
mod flow;
mod group_names;
mod group_table;
mod groups;
mod index;
pub mod journal;
mod messages;
mod record;
mod schedules;

#[cfg(test)]
mod model;
#[cfg(test)]
pub(crate) mod tests;

use std::cmp::Reverse;
use std::collections::{BTreeSet, HashSet};

use crate::core::backoff::Backoff;
use crate::core::error::{printable, DqError, Result, Staleness};
use crate::core::fault;
use crate::core::limits::MAX_TIME_MS;
use crate::core::policy::{Policy, QueueConfig};

pub use crate::core::heap::alloc_size;
pub use events::{Counter, Counters, Event, Events};
pub use flow::{Flow, FOREVER};
use group_table::GroupTable;
use groups::{line_key, Fair};
pub use groups::{GroupFlow, GroupInfo};
use index::SortedIndex;
use journal::{Journal, Kind};
use messages::Messages;
pub use messages::Slot;
pub use record::{Death, DeathReason, Extra, Options, Record, State, Terms, Version};
use schedules::Schedules;
pub use schedules::{run_id, Runs};

/// (time, seq, slot): delayed by due time, in flight by lease deadline,
/// dead by time of death, TTLs by deadline, a group's waiting line by due
/// time. `seq` makes the order the same on every server; `slot` finds the
/// record.
type TimeKey = (u64, u64, Slot);

/// Ready order: highest priority, then earliest due, then first added.
type ReadyKey = (Reverse<i32>, u64, u64, Slot);

/// What ADD does when the id already exists (or not).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddMode {
    /// Add, or replace an existing message (the default).
    Upsert,
    /// Only add: an existing message is left untouched.
    OnlyNew,
    /// Only replace: nothing happens for an unknown id.
    OnlyExisting,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AddRequest<'a> {
    /// `None` lets the queue make a unique id.
    pub id: Option<&'a [u8]>,
    pub payload: &'a [u8],
    pub due_at: u64,
    pub priority: i32,
    pub mode: AddMode,
    /// Per-message MAXATTEMPTS; `None` follows the queue and module.
    pub max_attempts: Option<u32>,
    /// Per-message BACKOFF; `None` follows the queue and module.
    pub backoff: Option<Backoff>,
    /// Unix ms by which the message must be acknowledged (ADD's TTL).
    pub expire_at: Option<u64>,
    /// ADD's GROUP: at most one message of a group is out at a time.
    pub group: Option<&'a [u8]>,
    /// ADD's RETAIN: how long it is kept once done; `None` follows the
    /// queue and module.
    pub retain_ms: Option<u64>,
}

/// One message handed to a consumer by POP.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    pub id: Vec<u8>,
    pub payload: Vec<u8>,
    pub attempt: u32,
}

/// What NACK asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NackAction {
    /// Retry after this delay, or after the message's backoff (`None`).
    Retry(Option<u64>),
    /// A permanent failure: dead now.
    Dead,
}

/// Where a message went: delayed, ready, waiting or dead, due when.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Placed {
    pub state: State,
    pub due_at: u64,
}

/// What DQ.WAIT replies for an id: its outcome, or that it has none yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome<'a> {
    /// Still to run, running, or to be retried.
    Pending,
    /// Finished and retained, with its result (`None` after a plain ACK).
    Done(Option<&'a [u8]>),
    /// Dead, with its last error, if any.
    Dead(Option<&'a [u8]>),
    /// The queue holds no such id.
    Gone,
}

/// Which dead messages REDRIVE moves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Redrive<'a> {
    /// The `n` that died first.
    Oldest(usize),
    Ids(&'a [&'a [u8]]),
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Stats {
    pub delayed: u64,
    pub ready: u64,
    pub inflight: u64,
    pub dead: u64,
    /// Done messages kept for their retention.
    pub done: u64,
    pub counters: Counters,
    /// Since when the earliest-due ready message has been waiting.
    pub oldest_ready_since: Option<u64>,
    /// Due time of the earliest delayed message.
    pub next_due_at: Option<u64>,
    /// Recurring schedules the queue holds.
    pub schedules: u64,
    /// Groups that exist now (see `groups.rs`).
    pub groups: u64,
    /// The pause as stored (`FOREVER`: until DQ.RESUME; a time that has
    /// passed: no pause any more), RATE and MAXINFLIGHT.
    pub paused_until: Option<u64>,
    pub rate: Option<crate::core::flow::Rate>,
    pub max_inflight: Option<u32>,
}

/// How much timer work a tick did on one queue, phase by phase: replayed
/// on a replica as exactly this much work (and these schedule runs), it
/// makes the same changes.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TickWork {
    pub ttl_expired: usize,
    pub leases_expired: usize,
    pub promoted: usize,
    /// Groups looked at again, in order: a pause ended, GROUPRATE's window
    /// moved on. By name, as a replica's wake-ups may differ from its
    /// master's (a loaded value sets its own), though what waking a group
    /// does at a time does not.
    pub groups_woken: Vec<Box<[u8]>>,
    /// Schedule runs, made last.
    pub runs: Vec<Runs>,
}

impl TickWork {
    /// Messages moved and runs made or skipped: what the tick's budget counts.
    pub fn done(&self) -> usize {
        let runs: usize = self
            .runs
            .iter()
            .map(|r| r.made.len() + r.skipped as usize)
            .sum();
        self.ttl_expired + self.leases_expired + self.promoted + self.groups_woken.len() + runs
    }

    /// Adds another slice of the same tick's work.
    pub fn absorb(&mut self, more: TickWork) {
        self.ttl_expired += more.ttl_expired;
        self.leases_expired += more.leases_expired;
        self.promoted += more.promoted;
        self.groups_woken.extend(more.groups_woken);
        self.runs.extend(more.runs);
    }

    pub fn is_empty(&self) -> bool {
        *self == TickWork::default()
    }
}

/// Priorities looked at to find the oldest ready message.
const MAX_PRIORITY_HEADS: usize = 1024;

/// The first key of each priority in a ready index (the queue's, or an
/// ORDER FAIR line), highest priority first.
fn priority_heads<const R: usize>(
    index: &SortedIndex<ReadyKey, R>,
) -> impl Iterator<Item = &ReadyKey> + '_ {
    let mut head = index.first();
    std::iter::from_fn(move || {
        let key = head?;
        head = index.first_after(&(key.0, u64::MAX, u64::MAX, Slot::MAX));
        Some(key)
    })
}

#[derive(Default)]
pub struct Queue {
    messages: Messages,
    delayed: SortedIndex<TimeKey>,
    /// Empty under ORDER FAIR, whose lines hold the ready messages (see
    /// `groups`): a POP there takes each group's first message from
    /// anywhere in the ready order, and removing it from one index beside
    /// the lines cost a search of the tree of runs a message.
    ready: SortedIndex<ReadyKey>,
    inflight: SortedIndex<TimeKey>,
    /// Made on first use and dropped when empty again (see [`Rare`]).
    rare: Option<Box<Rare>>,
    counters: Counters,
    /// What the current command did; taken by the caller (not stored).
    events: Events,
}

/// What many queues never use: dead letters, TTLs, groups, their own
/// settings, schedules. Apart, so that a plain queue's value is a few hundred bytes
/// (most queues are small, and thousands of them are common).
#[derive(Default)]
struct Rare {
    dead: SortedIndex<TimeKey>,
    /// Done messages kept for their retention, by when they finished (the
    /// order RETAINMAX drops them in).
    done: SortedIndex<TimeKey>,
    expiry: SortedIndex<TimeKey>,
    /// Ordered, so that PEEK and SCAN list waiting messages the same way
    /// on every server.
    groups: GroupTable,
    waiting_len: usize,
    /// When the timer looks at a group again (`groups.rs`).
    wakes: BTreeSet<(u64, Box<[u8]>)>,
    /// ORDER FAIR's turn, while the queue has that order.
    fair: Option<Box<Fair>>,
    config: QueueConfig,
    schedules: Schedules,
    flow: Flow,
    /// The event log (DQ.CONFIG SET EVENTS), with its seq.
    journal: Journal,
    /// A panic stopped a change half-way and the queue failed its check
    /// (see [`Queue::mark_damaged`]). Not saved: a reload rebuilds the
    /// indexes from the records and checks them again.
    damaged: bool,
}

/// What a queue without rare parts reads.
static NO_RARE: Rare = Rare {
    dead: SortedIndex::new(),
    done: SortedIndex::new(),
    expiry: SortedIndex::new(),
    groups: GroupTable::new(),
    waiting_len: 0,
    wakes: BTreeSet::new(),
    fair: None,
    config: QueueConfig::NONE,
    schedules: Schedules::new(),
    flow: Flow::new(),
    journal: Journal::new(),
    damaged: false,
};

impl Rare {
    /// A queue's rare parts, empty when it has none. (Free functions of
    /// the field, so that a caller may hold other fields meanwhile.)
    fn of(rare: &Option<Box<Rare>>) -> &Rare {
        rare.as_deref().unwrap_or(&NO_RARE)
    }

    fn make(rare: &mut Option<Box<Rare>>) -> &mut Rare {
        rare.get_or_insert_with(Box::default)
    }

    /// Drops the rare parts once they hold nothing.
    fn tidy(rare: &mut Option<Box<Rare>>) {
        if rare.as_deref().is_some_and(|r| {
            r.dead.len() == 0
                && r.done.len() == 0
                && r.expiry.len() == 0
                && r.groups.is_empty()
                && r.wakes.is_empty()
                && r.fair.is_none()
                && r.config == QueueConfig::NONE
                && r.schedules.is_empty()
                && r.flow.is_empty()
                && r.journal.is_empty()
                && !r.damaged
        }) {
            *rare = None;
        }
    }
}

impl std::fmt::Debug for Queue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Queue")
            .field("messages", &self.messages.len())
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

/// The ids in the order given, each once: a command naming an id twice acts
/// on it once. A set, because one command may name thousands.
pub(crate) fn distinct<T: AsRef<[u8]>>(ids: &[T]) -> Vec<&[u8]> {
    let mut seen = HashSet::with_capacity(ids.len());
    ids.iter()
        .map(AsRef::as_ref)
        .filter(|id| seen.insert(*id))
        .collect()
}

/// The fencing rule of NACK and TOUCH: a call naming delivery `attempt`
/// (or, with `None`, whichever is current) of an id that is at delivery
/// `at` in `state` (`None`: no such id or queue). True when there is a
/// delivery in flight to act on; an error naming where the message is
/// when the call named a delivery that is over or has not happened.
pub fn check_delivery(id: &[u8], at: Option<(State, u32)>, attempt: Option<u32>) -> Result<bool> {
    let inflight = matches!(at, Some((State::Inflight, _)));
    let Some(n) = attempt else {
        return Ok(inflight);
    };
    let why = match at {
        Some((State::Inflight, c)) if c == n => return Ok(true),
        Some((state, c)) if n > c => Staleness::NotYet {
            at: c,
            state: state.reported().name(),
        },
        Some((state, c)) => Staleness::Over {
            at: c,
            state: state.reported().name(),
        },
        None => Staleness::Gone,
    };
    Err(DqError::StaleDelivery {
        id: printable(id),
        attempt: n,
        why,
    })
}

impl Queue {
    pub fn new() -> Queue {
        Queue::default()
    }

    pub fn len(&self) -> usize {
        self.messages.len()
    }

    pub fn is_empty(&self) -> bool {
        self.messages.is_empty()
    }

    pub fn config(&self) -> &QueueConfig {
        &Rare::of(&self.rare).config
    }

    /// A lower RETAINMAX drops the excess done messages at once, a lower
    /// EVENTS the oldest events.
    pub fn set_config(&mut self, now: u64, config: QueueConfig) {
        let old = self.config();
        let regroup = (old.group_limit, old.group_rate, old.fair)
            != (config.group_limit, config.group_rate, config.fair);
        let rare = Rare::make(&mut self.rare);
        rare.journal.set_max(config.events.unwrap_or(0));
        rare.config = config;
        self.fit_log_to_rate();
        self.trim_done(now);
        if regroup {
            self.regroup(now);
        }
        Rare::tidy(&mut self.rare);
    }

    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// The transitions made since the last call.
    pub fn take_events(&mut self) -> Events {
        std::mem::take(&mut self.events)
    }

    pub fn get(&self, id: &[u8]) -> Option<&Record> {
        self.messages.find(id).map(|slot| self.messages.at(slot))
    }

    /// Messages per reported state: delayed (with those waiting for their
    /// group), ready, in flight, dead, done.
    pub fn counts(&self) -> [u64; 5] {
        [
            (self.delayed.len() + Rare::of(&self.rare).waiting_len) as u64,
            self.ready_len() as u64,
            self.inflight.len() as u64,
            Rare::of(&self.rare).dead.len() as u64,
            Rare::of(&self.rare).done.len() as u64,
        ]
    }

    /// The event log.
    pub fn journal(&self) -> &Journal {
        &Rare::of(&self.rare).journal
    }

    /// Writes an event about the message at `slot`, when the queue keeps
    /// events; costs one test when it does not.
    #[inline]
    fn note(&mut self, now: u64, kind: Kind, slot: Slot, detail: Option<&[u8]>) {
        if let Some(rare) = self.rare.as_deref_mut().filter(|r| r.journal.is_on()) {
            let record = self.messages.at(slot);
            rare.journal
                .write(now, kind, record.id(), record.attempt, detail);
        }
    }

    /// Writes a queue-wide event (no id), when the queue keeps events.
    fn note_queue(&mut self, now: u64, kind: Kind, detail: Option<&[u8]>) {
        if let Some(rare) = self.rare.as_deref_mut().filter(|r| r.journal.is_on()) {
            rare.journal.write(now, kind, b"", 0, detail);
        }
    }

    /// Adds or replaces a message. Returns its id, or `None` when the mode
    /// said to leave things as they are.
    pub fn add(&mut self, now: u64, req: &AddRequest) -> Option<Vec<u8>> {
        let existing = req.id.and_then(|id| self.messages.find(id));
        match (req.mode, existing) {
            (AddMode::OnlyNew, Some(_)) | (AddMode::OnlyExisting, None) => return None,
            _ => {}
        }
        let mut seq = self.counters.bump(Counter::Added, 1);
        let id = match req.id {
            Some(id) => id.to_vec(),
            None => loop {
                // Time first makes ids readable and unique even if the
                // counter is ever reset; the loop only matters if a client
                // chose an id of the same shape.
                let candidate = format!("{now}-{seq}").into_bytes();
                if self.messages.find(&candidate).is_none() {
                    break candidate;
                }
                seq = self.counters.bump(Counter::Added, 1);
            },
        };
        let terms = Terms {
            priority: req.priority,
            seq,
            due_at: req.due_at,
            added_at: now,
            options: Options {
                max_attempts: req.max_attempts,
                backoff: req.backoff.clone(),
                expire_at: req.expire_at,
                group: req.group.map(Into::into),
                retain_ms: req.retain_ms,
            },
        };
        match existing {
            Some(slot) if self.messages.at(slot).state == State::Inflight => {
                let newer = Box::new(Version {
                    terms,
                    payload: req.payload.into(),
                });
                self.messages
                    .at_mut(slot)
                    .update_extra(|e| e.replacement = Some(newer));
                self.note(now, Kind::Replaced, slot, None);
            }
            Some(slot) => {
                self.unindex(slot);
                // The new version queues up in its group like a new
                // message; a group the old one held goes to the earliest
                // due of the new version and the group's waiting messages.
                let freed = self.free_group(slot);
                self.install(slot, now, req.payload, terms);
                self.note(now, Kind::Replaced, slot, None);
                if let Some(group) = freed {
                    self.hand_on(&group, now);
                }
            }
            None => {
                let slot = self.messages.insert(Record::new(&id, req.payload, terms));
                fault::point("add:record");
                self.note(now, Kind::Added, slot, None);
                self.place(slot, now);
            }
        }
        self.events.add(Event::Add);
        Some(id)
    }

    /// Takes up to `count` ready messages, leasing each until
    /// `lease_deadline`.
    /// What the queue's pause, RATE and MAXINFLIGHT allow at `now` (see
    /// `flow.rs`); a POP that got fewer than it asked because of them is
    /// counted as throttled.
    pub fn pop(&mut self, now: u64, count: usize, lease_deadline: u64) -> Vec<Delivery> {
        let taken = self.pop_slots(now, count, lease_deadline);
        taken.into_iter().map(|slot| self.delivered(slot)).collect()
    }

    /// [`Queue::pop`] without copying the messages out: the slots leased,
    /// in order, to read with [`Queue::leased`] (what DQ.POP replies and
    /// propagates straight from the records).
    pub fn pop_slots(&mut self, now: u64, count: usize, lease_deadline: u64) -> Vec<Slot> {
        let ready = self.ready_len();
        // Never more turns than there are ready messages: under ORDER FAIR
        // a turn that finds nothing drops groups from the ring, which a
        // replica replaying the claims would not do.
        let allowed = count.min(self.allowance(now)).min(ready);
        let mut taken = Vec::with_capacity(allowed);
        self.inflight.reserve(allowed);
        while taken.len() < allowed {
            let Some(slot) = self.take_next_ready() else {
                break;
            };
            self.lease_taken(now, slot, lease_deadline);
            taken.push(slot);
            fault::point("pop:batch");
        }
        self.note_throttle(count, taken.len(), ready);
        self.log_deliveries(now, taken.len());
        self.count_deliveries(taken.len());
        taken
    }

    /// Counts a POP the limits held back (the replay of one).
    pub fn count_throttle(&mut self) {
        self.counters.bump(Counter::Throttled, 1);
    }

    /// [`Queue::claim_slots`], with the messages copied out, for tests
    /// that compare them with what POP gave.
    #[cfg(test)]
    pub fn claim(&mut self, now: u64, ids: &[&[u8]], lease_deadline: u64) -> Vec<Delivery> {
        let taken = self.claim_slots(now, ids, lease_deadline);
        taken.into_iter().map(|slot| self.delivered(slot)).collect()
    }

    /// Leases the named messages that are ready, in the order given: how a
    /// replica or the AOF replays a POP (as XCLAIM replays XREADGROUP).
    /// Returns their slots.
    pub fn claim_slots(&mut self, now: u64, ids: &[&[u8]], lease_deadline: u64) -> Vec<Slot> {
        let mut taken = Vec::new();
        for id in distinct(ids) {
            if let Some(slot) = self.messages.find(id) {
                if self.messages.at(slot).state == State::Ready {
                    self.turn_fair(slot);
                    self.lease(now, slot, lease_deadline);
                    taken.push(slot);
                }
            }
        }
        // The log is pruned where the master pruned it: at `now`, when
        // deliveries are logged.
        self.log_deliveries(now, taken.len());
        self.count_deliveries(taken.len());
        taken
    }

    /// A leased message's id (what POP propagates).
    pub fn leased_id(&self, slot: Slot) -> &[u8] {
        self.messages.at(slot).id()
    }

    /// A leased message's id, payload and attempt.
    pub fn leased(&self, slot: Slot) -> (&[u8], &[u8], u32) {
        let record = self.messages.at(slot);
        (record.id(), record.payload(), record.attempt)
    }

    /// A copy of a leased message (the API tests and the model use).
    fn delivered(&self, slot: Slot) -> Delivery {
        let (id, payload, attempt) = self.leased(slot);
        Delivery {
            id: id.to_vec(),
            payload: payload.to_vec(),
            attempt,
        }
    }

    /// Leases a ready message (a replayed POP's claim).
    fn lease(&mut self, now: u64, slot: Slot, lease_deadline: u64) {
        self.leave_ready(slot);
        self.lease_taken(now, slot, lease_deadline);
    }

    /// Takes a ready message out of the ready index (and what counts it
    /// there), wherever it stands.
    fn leave_ready(&mut self, slot: Slot) {
        let key = self.messages.at(slot).ready_key(slot);
        if self.fair().is_none() {
            self.ready.remove(&key);
        }
        self.left_ready(&key);
    }

    /// Leases a ready message already out of the ready index. Only the
    /// state's index changes: its TTL's entry stays as it is.
    fn lease_taken(&mut self, now: u64, slot: Slot, lease_deadline: u64) {
        let record = self.messages.at_mut(slot);
        // A new delivery starts: the last one's PROGRESS no longer says
        // anything.
        if record.progress().is_some() {
            record.update_extra(|e| e.progress = None);
        }
        record.state = State::Inflight;
        record.attempt = record.attempt.saturating_add(1);
        record.lease_deadline = lease_deadline;
        self.inflight.insert((lease_deadline, record.seq, slot));
        self.log_group_delivery(slot, now);
        self.note(now, Kind::Delivered, slot, None);
    }

    fn count_deliveries(&mut self, n: usize) {
        if n > 0 {
            self.counters.bump(Counter::Delivered, n as u64);
            self.events.add(Event::Pop);
        }
    }

    /// ACK: the deliveries of `ids` ended well (see [`Queue::finish`]).
    /// Returns how many were in flight.
    pub fn ack(&mut self, now: u64, ids: &[&[u8]], module_retain_ms: u64) -> u64 {
        let count = self.finish(now, ids.iter().map(|&id| (id, None)), module_retain_ms);
        if count > 0 {
            self.events.add(Event::Ack);
        }
        count
    }

    /// DONE: as ACK, keeping each message's result while it is retained.
    pub fn done(&mut self, now: u64, results: &[(&[u8], &[u8])], module_retain_ms: u64) -> u64 {
        let items = results.iter().map(|&(id, result)| (id, Some(result)));
        let count = self.finish(now, items, module_retain_ms);
        if count > 0 {
            self.events.add(Event::Done);
        }
        count
    }

    /// Ends the in-flight deliveries named (each id once: the first time
    /// it is named). A newer version added meanwhile takes the message's
    /// place, as attempt 1 of its budget; else the message is kept as
    /// done, with its result, for its retention — its own RETAIN, else the
    /// queue's, else `module_retain_ms` — or deleted when that is 0 (the
    /// default). Then RETAINMAX is enforced. Returns how many ended.
    /// (ACK and DONE, and their replays.)
    pub fn finish<'a>(
        &mut self,
        now: u64,
        items: impl Iterator<Item = (&'a [u8], Option<&'a [u8]>)>,
        module_retain_ms: u64,
    ) -> u64 {
        // An id named twice is finished once: the first time leaves it
        // done, replaced or gone, none of which is in flight. So no set of
        // the ids seen, which would cost a hash of each.
        let mut count = 0;
        for (id, result) in items {
            let Some(found) = self.messages.find_entry(id) else {
                continue;
            };
            let slot = found.slot;
            if self.messages.at(slot).state != State::Inflight {
                continue;
            }
            count += 1;
            self.note(now, Kind::Done, slot, None);
            self.unindex(slot);
            fault::point("ack:batch");
            self.release_group(slot, now);
            if let Some(newer) = self.take_replacement(slot) {
                self.install(slot, now, &newer.payload, newer.terms);
                continue;
            }
            match self.retention(slot, module_retain_ms) {
                0 => {
                    // Nothing above adds or removes an id.
                    self.messages.remove_found(found);
                }
                retain => {
                    let drop_at = now.saturating_add(retain).min(MAX_TIME_MS);
                    self.messages
                        .replace_data(slot, |r| r.finish(now, drop_at, result));
                    self.index(slot);
                }
            }
        }
        if count > 0 {
            self.counters.bump(Counter::Acked, count);
            self.trim_done(now);
        }
        count
    }

    /// How long a message is kept once done: its own RETAIN, else the
    /// queue's, else the module's.
    fn retention(&self, slot: Slot, module_retain_ms: u64) -> u64 {
        self.messages
            .at(slot)
            .retain_ms()
            .or(self.config().retain_ms)
            .unwrap_or(module_retain_ms)
    }

    /// Drops the earliest finished done messages beyond RETAINMAX.
    fn trim_done(&mut self, now: u64) {
        let Some(max) = self.config().retain_max else {
            return;
        };
        let mut dropped = 0;
        while Rare::of(&self.rare).done.len() as u64 > max {
            let Some(&(.., slot)) = Rare::of(&self.rare).done.first() else {
                break;
            };
            self.note(now, Kind::Dropped, slot, None);
            self.unindex(slot);
            self.messages.remove(slot);
            dropped += 1;
        }
        self.count_dropped(dropped);
    }

    fn count_dropped(&mut self, dropped: u64) {
        if dropped > 0 {
            self.counters.bump(Counter::Dropped, dropped);
            self.events.add(Event::Dropped);
        }
    }

    /// A done message's outcome, or where a message stands: what DQ.WAIT
    /// replies.
    pub fn outcome(&self, id: &[u8]) -> Outcome<'_> {
        match self.get(id) {
            None => Outcome::Gone,
            Some(r) if r.state == State::Done => Outcome::Done(r.result()),
            Some(r) if r.state == State::Dead => Outcome::Dead(r.last_error()),
            Some(_) => Outcome::Pending,
        }
    }

    /// Records PROGRESS on an in-flight message (its delivery already
    /// checked by TOUCH): kept until its next delivery starts. Returns
    /// whether the message was in flight.
    pub fn set_progress(&mut self, now: u64, id: &[u8], value: &[u8]) -> bool {
        let Some(slot) = self.messages.find(id) else {
            return false;
        };
        if self.messages.at(slot).state != State::Inflight {
            return false;
        }
        self.messages
            .at_mut(slot)
            .update_extra(|e| e.progress = Some(value.into()));
        self.note(now, Kind::Progress, slot, Some(value));
        self.events.add(Event::Touch);
        true
    }

    /// Deletes messages in any state. Returns how many existed.
    pub fn cancel(&mut self, now: u64, ids: &[&[u8]]) -> u64 {
        let found: Vec<Slot> = distinct(ids)
            .into_iter()
            .filter_map(|id| self.messages.find(id))
            .collect();
        for &slot in &found {
            self.note(now, Kind::Cancelled, slot, None);
        }
        self.delete(&found, now);
        let count = found.len() as u64;
        if count > 0 {
            self.counters.bump(Counter::Cancelled, count);
            self.events.add(Event::Cancel);
        }
        count
    }

    /// Deletes records. The groups they held are handed on only once all
    /// are gone, so that a group is not handed to a message the same
    /// command deletes.
    fn delete(&mut self, slots: &[Slot], now: u64) {
        let mut freed = Vec::new();
        for &slot in slots {
            self.unindex(slot);
            freed.extend(self.free_group(slot));
            self.messages.remove(slot);
        }
        for group in freed {
            self.hand_on(&group, now);
        }
    }

    /// NACK: the delivery failed. `Retry` schedules the next attempt after
    /// the delay given or the message's backoff, or makes it dead when its
    /// attempts are used up; `Dead` makes it dead now. With `attempt`, only
    /// that delivery may be failed: any other gets a stale-delivery error
    /// and nothing changes. Returns where the message went, or `None` when
    /// the id was not in flight.
    pub fn nack(
        &mut self,
        now: u64,
        id: &[u8],
        action: NackAction,
        attempt: Option<u32>,
        error: Option<&[u8]>,
        policy: &Policy,
    ) -> Result<Option<Placed>> {
        let Some(slot) = self.delivery(id, attempt)? else {
            return Ok(None);
        };
        self.unindex(slot);
        if let Some(error) = error {
            let error: Box<[u8]> = error.into();
            self.messages
                .at_mut(slot)
                .update_extra(|e| e.last_error = Some(error));
        }
        let (retry_at, reason) = match action {
            NackAction::Dead => (None, DeathReason::Permanent),
            NackAction::Retry(delay) => {
                let record = self.messages.at(slot);
                let wait = delay.unwrap_or_else(|| {
                    policy
                        .backoff_or(record.backoff())
                        .0
                        .delay(record.attempts_used())
                });
                (
                    Some(now.saturating_add(wait).min(MAX_TIME_MS)),
                    DeathReason::Nack,
                )
            }
        };
        let placed = self.fail_delivery(slot, now, reason, retry_at, policy);
        self.counters.bump(Counter::Nacked, 1);
        self.events.add(Event::Nack);
        Ok(Some(placed))
    }

    /// The in-flight message `id`, checked against the delivery the caller
    /// names. `None`: not in flight (and no delivery named).
    fn delivery(&self, id: &[u8], attempt: Option<u32>) -> Result<Option<Slot>> {
        let slot = self.messages.find(id);
        let at = slot.map(|slot| {
            let record = self.messages.at(slot);
            (record.state, record.attempt)
        });
        Ok(check_delivery(id, at, attempt)?.then_some(slot).flatten())
    }

    /// A delivery ended without ACK: a waiting newer version takes the
    /// message's place; else it is retried at `retry_at`, or dies (now, or
    /// when its attempts are used up).
    fn fail_delivery(
        &mut self,
        slot: Slot,
        now: u64,
        reason: DeathReason,
        retry_at: Option<u64>,
        policy: &Policy,
    ) -> Placed {
        let why = match reason {
            DeathReason::LeaseExpired => "lease-expired",
            _ => "nack",
        };
        if let Some(newer) = self.take_replacement(slot) {
            // The newer version is what is delivered next: this delivery
            // ends without a retry of its own.
            self.note(now, Kind::Replaced, slot, Some(why.as_bytes()));
            self.release_group(slot, now);
            return self.install(slot, now, &newer.payload, newer.terms);
        }
        let record = self.messages.at(slot);
        let (max_attempts, _) = policy.max_attempts_or(record.max_attempts());
        match retry_at {
            Some(at) if record.attempts_used() < max_attempts => {
                self.note(now, Kind::Retry, slot, Some(why.as_bytes()));
                // It keeps its group: the retry goes before the group's
                // next message.
                self.messages.at_mut(slot).due_at = at;
                let placed = self.place(slot, now);
                self.counters.bump(Counter::Retried, 1);
                placed
            }
            _ => self.bury(slot, now, reason),
        }
    }

    /// Makes a message, already out of its state's index, dead, freeing
    /// its group.
    fn bury(&mut self, slot: Slot, now: u64, reason: DeathReason) -> Placed {
        self.note(now, Kind::Dead, slot, Some(reason.name().as_bytes()));
        let record = self.messages.at_mut(slot);
        record.state = State::Dead;
        record.lease_deadline = 0;
        record.update_extra(|e| e.death = Some(Death { reason, at: now }));
        let due_at = record.due_at;
        self.index(slot);
        self.release_group(slot, now);
        self.counters.bump(Counter::DeadLettered, 1);
        self.events.add(Event::Dead);
        Placed {
            state: State::Dead,
            due_at,
        }
    }

    /// Moves a lease deadline. With `attempt`, only that delivery's.
    /// Returns the new deadline, or `None` when the id is not in flight.
    pub fn touch(
        &mut self,
        id: &[u8],
        lease_deadline: u64,
        attempt: Option<u32>,
    ) -> Result<Option<u64>> {
        let Some(slot) = self.delivery(id, attempt)? else {
            return Ok(None);
        };
        self.unindex(slot);
        self.messages.at_mut(slot).lease_deadline = lease_deadline;
        self.index(slot);
        self.events.add(Event::Touch);
        Ok(Some(lease_deadline))
    }

    /// Dead messages back to ready with a fresh attempt budget (their
    /// delivery numbering goes on), as if added now. Returns how many moved.
    pub fn redrive(&mut self, now: u64, which: Redrive) -> u64 {
        let slots: Vec<Slot> = match which {
            Redrive::Oldest(n) => Rare::of(&self.rare)
                .dead
                .iter()
                .take(n)
                .map(|k| k.2)
                .collect(),
            Redrive::Ids(ids) => distinct(ids)
                .into_iter()
                .filter_map(|id| self.messages.find(id))
                .filter(|&slot| self.messages.at(slot).state == State::Dead)
                .collect(),
        };
        for &slot in &slots {
            self.unindex(slot);
            let record = self.messages.at_mut(slot);
            record.attempt_base = record.attempt;
            record.due_at = now;
            // Its TTL counted from an ADD long past: a redriven message
            // has none.
            record.update_extra(|e| {
                e.death = None;
                e.options.expire_at = None;
            });
            self.note(now, Kind::Redriven, slot, None);
            self.place(slot, now);
        }
        let count = slots.len() as u64;
        if count > 0 {
            self.counters.bump(Counter::Redriven, count);
            self.events.add(Event::Redrive);
        }
        count
    }

    /// Deletes every message of one state (`Delayed` includes those
    /// waiting for their group), or of the whole queue. Counters and
    /// settings stay. Returns how many messages were deleted.
    pub fn purge(&mut self, now: u64, state: Option<State>) -> u64 {
        let count = match state {
            None => {
                // Settings, counters, schedules and flow control (the
                // pause, and RATE's log of deliveries, which a purge must
                // not reset or RATE would let a burst through) stay: they
                // are not messages.
                let count = self.messages.len() as u64;
                if count == 0 {
                    // Nothing to delete changes nothing: a purge that
                    // deletes nothing is not propagated, so rebuilding
                    // the value (which settles ended group pauses and
                    // starts ORDER FAIR's turn again) would leave the
                    // replicas behind.
                    return 0;
                }
                let config = self.config().clone();
                let rare = Rare::make(&mut self.rare);
                let schedules = std::mem::take(&mut rare.schedules);
                let flow = std::mem::take(&mut rare.flow);
                let journal = std::mem::take(&mut rare.journal);
                // Group pauses and GROUPRATE's logs stay too, for the same
                // reasons.
                let group_flows: Vec<(Box<[u8]>, Option<u64>, crate::core::flow::DeliveryLog)> =
                    self.group_flows()
                        .map(|(name, f)| (name.into(), f.paused_until, f.log.clone()))
                        .collect();
                *self = Queue {
                    counters: self.counters,
                    events: self.events,
                    ..Queue::default()
                };
                self.set_config(now, config);
                let rare = Rare::make(&mut self.rare);
                rare.schedules = schedules;
                rare.flow = flow;
                rare.journal = journal;
                for (name, paused_until, log) in group_flows {
                    self.restore_group_flow(&name, paused_until, log);
                    self.hand_on(&name, now);
                }
                Rare::tidy(&mut self.rare);
                count
            }
            Some(state) => {
                // Deleted in an order every replica shares: ORDER FAIR's
                // turn (PEEK's order) restarts on a reload, so a replica's
                // may differ.
                let slots: Vec<Slot> = match (state, self.fair()) {
                    (State::Ready, Some(fair)) => fair.sorted_keys().iter().map(|k| k.3).collect(),
                    _ => self.iter_state(state).collect(),
                };
                self.delete(&slots, now);
                slots.len() as u64
            }
        };
        if count > 0 {
            self.counters.bump(Counter::Purged, count);
            self.note_queue(now, Kind::Purged, Some(count.to_string().as_bytes()));
            self.events.add(Event::Purge);
        }
        count
    }

    /// The messages reported in `state`, in the order they would leave it:
    /// messages held back by their group are already due, so they come
    /// before the delayed ones; ready ones in POP's order, which under
    /// ORDER FAIR takes the groups in turn.
    pub fn iter_state(&self, state: State) -> Box<dyn Iterator<Item = Slot> + '_> {
        match state {
            State::Delayed | State::Waiting => Box::new(
                Rare::of(&self.rare)
                    .groups
                    .with_entries()
                    .flat_map(|(_, g)| g.waiting.iter().map(|k| k.2))
                    .chain(self.delayed.iter().map(|k| k.2)),
            ),
            State::Ready => match self.fair() {
                Some(fair) => Box::new(fair.iter_turns().map(|k| k.3)),
                None => Box::new(self.ready.iter().map(|k| k.3)),
            },
            State::Inflight => Box::new(self.inflight.iter().map(|k| k.2)),
            State::Dead => Box::new(Rare::of(&self.rare).dead.iter().map(|k| k.2)),
            State::Done => Box::new(Rare::of(&self.rare).done.iter().map(|k| k.2)),
        }
    }

    /// Up to `count` messages of one state, in the order they would leave it.
    pub fn peek(&self, state: State, count: usize) -> Vec<&Record> {
        self.iter_state(state)
            .take(count)
            .map(|slot| self.messages.at(slot))
            .collect()
    }

    /// One step of an iteration over every message (or those of one
    /// reported state), as SCAN iterates a keyspace. Cursor 0 starts; the
    /// reply's cursor is 0 when the iteration is over. A message stays in
    /// its slot for its whole life, and slots are visited in order, so a
    /// message present for the whole iteration is returned exactly once.
    /// At most `count` messages are returned, and about ten times as many
    /// slots looked at.
    pub fn scan(&self, cursor: u64, state: Option<State>, count: usize) -> (u64, Vec<&Record>) {
        let mut found = Vec::new();
        let end = u64::from(self.messages.slot_end());
        if cursor >= end {
            return (0, found);
        }
        // At least one message a call, or a COUNT of 0 would never end.
        let count = count.max(1);
        let budget = count.saturating_mul(10);
        let mut next = end;
        for (looked, (slot, record)) in self.messages.iter_from(cursor as Slot).enumerate() {
            if found.len() == count || looked == budget {
                next = u64::from(slot);
                break;
            }
            if state.is_none_or(|s| s.reported() == record.state.reported()) {
                found.push(record);
            }
        }
        (if next >= end { 0 } else { next }, found)
    }

    /// Moves up to `limit` delayed messages whose time has come to ready.
    /// Returns how many it moved.
    pub fn promote_due(&mut self, now: u64, limit: usize) -> usize {
        let mut moved = 0;
        while moved < limit && self.delayed.first().is_some_and(|k| k.0 <= now) {
            // Taken off the front rather than searched for: a burst of
            // due messages is a run of pops from the first leaf.
            let Some((.., slot)) = self.delayed.pop_first() else {
                break;
            };
            if let Some(at) = self.messages.at(slot).live_expiry() {
                let seq = self.messages.at(slot).seq;
                Rare::make(&mut self.rare).expiry.remove(&(at, seq, slot));
            }
            if self.place(slot, now).state == State::Ready {
                self.note(now, Kind::Ready, slot, None);
            }
            moved += 1;
            fault::point("tick:promote");
        }
        moved
    }

    /// Ends up to `limit` leases that ran out. Each is a failed attempt: the
    /// message is ready again at once, keeping its place among ready
    /// messages, or dead when it has used its attempts; a newer version
    /// written meanwhile takes its place instead.
    pub fn expire_leases(&mut self, now: u64, limit: usize, policy: &Policy) -> usize {
        let mut ended = 0;
        while ended < limit {
            let Some(&(deadline, _, slot)) = self.inflight.first() else {
                break;
            };
            if deadline > now {
                break;
            }
            self.unindex(slot);
            let retry_at = self.messages.at(slot).due_at;
            self.fail_delivery(slot, now, DeathReason::LeaseExpired, Some(retry_at), policy);
            ended += 1;
        }
        if ended > 0 {
            self.counters.bump(Counter::LeaseExpired, ended as u64);
            self.events.add(Event::LeaseExpired);
        }
        ended
    }

    /// Dead-letters up to `limit` messages whose TTL ran out, in any state
    /// but dead, with reason `expired`. A newer version waiting behind an
    /// expired in-flight message takes its place instead.
    pub fn expire_ttl(&mut self, now: u64, limit: usize) -> usize {
        let mut ended = 0;
        while ended < limit {
            let Some(&(at, _, slot)) = Rare::of(&self.rare).expiry.first() else {
                break;
            };
            if at > now {
                break;
            }
            self.unindex(slot);
            if self.messages.at(slot).state == State::Done {
                // Its retention ran out.
                self.note(now, Kind::Dropped, slot, None);
                self.messages.remove(slot);
                self.count_dropped(1);
                ended += 1;
                continue;
            }
            match self.take_replacement(slot) {
                Some(newer) => {
                    // Its TTL ran out: the newer version takes its place.
                    self.note(now, Kind::Replaced, slot, Some(b"expired"));
                    self.release_group(slot, now);
                    self.install(slot, now, &newer.payload, newer.terms);
                }
                None => {
                    self.bury(slot, now, DeathReason::Expired);
                    self.counters.bump(Counter::Expired, 1);
                }
            }
            ended += 1;
        }
        ended
    }

    /// Timer work due at `now`, at most `budget` messages: TTLs first (a
    /// message past its TTL must not be delivered again), then leases,
    /// then promotion.
    pub fn tick(&mut self, now: u64, budget: usize, policy: &Policy) -> TickWork {
        let ttl_expired = self.expire_ttl(now, budget);
        let leases_expired = self.expire_leases(now, budget - ttl_expired, policy);
        let promoted = self.promote_due(now, budget - ttl_expired - leases_expired);
        let groups_woken = self.wake_groups(now, budget - ttl_expired - leases_expired - promoted);
        let woken = groups_woken.len();
        // Runs add messages already due: ready at once, nothing for the
        // phases before to do, so a replay in phase order matches.
        let runs = self.run_schedules(
            now,
            budget - ttl_expired - leases_expired - promoted - woken,
        );
        TickWork {
            ttl_expired,
            leases_expired,
            promoted,
            groups_woken,
            runs,
        }
    }

    /// Replays a tick's work exactly (a replica, the AOF).
    /// Returns what it did, which is `work` when the replica was in step.
    pub fn replay_tick(&mut self, now: u64, work: &TickWork, policy: &Policy) -> TickWork {
        let done = TickWork {
            ttl_expired: self.expire_ttl(now, work.ttl_expired),
            leases_expired: self.expire_leases(now, work.leases_expired, policy),
            promoted: self.promote_due(now, work.promoted),
            groups_woken: self.wake_named_groups(now, &work.groups_woken),
            runs: work.runs.clone(),
        };
        self.replay_runs(now, &work.runs);
        done
    }

    /// The earliest time the timer has work here: a delayed message falling
    /// due, a lease ending, a TTL running out or a schedule's run.
    pub fn next_due(&self) -> Option<u64> {
        fn earlier(a: Option<u64>, b: Option<u64>) -> Option<u64> {
            match (a, b) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            }
        }
        let mut due = earlier(
            self.delayed.first().map(|k| k.0),
            self.inflight.first().map(|k| k.0),
        );
        // Called on every write: a plain queue has no rare parts to look at.
        if let Some(rare) = self.rare.as_deref() {
            due = earlier(due, rare.expiry.first().map(|k| k.0));
            due = earlier(due, rare.schedules.earliest());
            due = earlier(due, rare.wakes.first().map(|(at, _)| *at));
        }
        due
    }

    pub fn stats(&self) -> Stats {
        // The head of each priority is that priority's earliest-due message.
        let heads: Vec<ReadyKey> = match self.fair() {
            Some(fair) => fair.priority_heads(MAX_PRIORITY_HEADS),
            None => priority_heads(&self.ready)
                .take(MAX_PRIORITY_HEADS)
                .copied()
                .collect(),
        };
        let oldest_ready_since = heads
            .iter()
            .map(|key| self.messages.at(key.3).ready_since())
            .min();
        let [delayed, ready, inflight, dead, done] = self.counts();
        Stats {
            delayed,
            ready,
            inflight,
            dead,
            done,
            counters: self.counters,
            oldest_ready_since,
            next_due_at: self.delayed.first().map(|k| k.0),
            schedules: self.schedule_count() as u64,
            groups: self.group_count() as u64,
            paused_until: self.flow().paused_until,
            rate: self.config().rate,
            max_inflight: self.config().max_inflight,
        }
    }

    /// Puts a message that is out of every index where it belongs now:
    /// delayed until due; then ready, unless another message holds its
    /// group, in which case it waits.
    fn place(&mut self, slot: Slot, now: u64) -> Placed {
        let record = self.messages.at_mut(slot);
        record.lease_deadline = 0;
        let due_at = record.due_at;
        let state = if due_at > now {
            State::Delayed
        } else if self.admit(slot, now) {
            State::Ready
        } else {
            State::Waiting
        };
        self.messages.at_mut(slot).state = state;
        self.index(slot);
        match state {
            State::Ready => self.events.add(Event::Ready),
            State::Waiting => {
                // The group may have been free with others already waiting:
                // the earliest of them (maybe this one) takes it.
                if let Some(group) = self.messages.at(slot).group().map(Box::<[u8]>::from) {
                    self.hand_on(&group, now);
                }
            }
            _ => {}
        }
        let record = self.messages.at(slot);
        Placed {
            state: record.state,
            due_at: record.due_at,
        }
    }

    fn take_replacement(&mut self, slot: Slot) -> Option<Version> {
        let record = self.messages.at_mut(slot);
        record.replacement()?;
        let mut newer = None;
        record.update_extra(|e| newer = e.replacement.take());
        newer.map(|b| *b)
    }

    /// A newer version takes the place of the message at `slot`, which is
    /// out of every index and holds no group.
    fn install(&mut self, slot: Slot, now: u64, payload: &[u8], terms: Terms) -> Placed {
        self.messages
            .replace_data(slot, |record| record.install(payload, terms));
        self.place(slot, now)
    }

    /// Takes a record's entries out of its state's index and the TTL index.
    fn unindex(&mut self, slot: Slot) {
        let record = self.messages.at(slot);
        let seq = record.seq;
        let expiry = record.live_expiry();
        // Only these leave something of the rare parts (ready, delayed and
        // in-flight messages leave the queue's own indexes, or ORDER FAIR's
        // lines, which keep the rare parts while they exist), so only they
        // may leave the rare parts empty.
        let tidy =
            expiry.is_some() || matches!(record.state, State::Dead | State::Done | State::Waiting);
        match record.state {
            State::Delayed => {
                self.delayed.remove(&(record.due_at, seq, slot));
            }
            State::Ready => self.leave_ready(slot),
            State::Inflight => {
                self.inflight.remove(&(record.lease_deadline, seq, slot));
            }
            State::Dead => {
                let died = record.death().map_or(0, |d| d.at);
                Rare::make(&mut self.rare).dead.remove(&(died, seq, slot));
            }
            State::Done => {
                let finished = record.lease_deadline;
                Rare::make(&mut self.rare)
                    .done
                    .remove(&(finished, seq, slot));
            }
            State::Waiting => {
                let name = record.group().unwrap_or_default();
                let key = line_key(record.holds_group, record.due_at, seq, slot);
                // A line left empty keeps its group until `hand_on`
                // forgets it: whoever freed the holder hands the group on.
                if let Some(group) = Rare::make(&mut self.rare)
                    .groups
                    .get_mut(name, &self.messages)
                {
                    if group.waiting.remove(&key) {
                        Rare::make(&mut self.rare).waiting_len -= 1;
                    }
                }
            }
        }
        if let Some(at) = expiry {
            Rare::make(&mut self.rare).expiry.remove(&(at, seq, slot));
        }
        if tidy {
            Rare::tidy(&mut self.rare);
        }
    }

    /// Puts a record's entries into its state's index and the TTL index.
    fn index(&mut self, slot: Slot) {
        let record = self.messages.at(slot);
        let seq = record.seq;
        let expiry = record.live_expiry();
        match record.state {
            State::Delayed => {
                self.delayed.insert((record.due_at, seq, slot));
            }
            State::Ready => {
                let key = record.ready_key(slot);
                if self.fair().is_none() {
                    self.ready.insert(key);
                }
                self.entered_ready(&key);
            }
            State::Inflight => {
                self.inflight.insert((record.lease_deadline, seq, slot));
            }
            State::Dead => {
                let died = record.death().map_or(0, |d| d.at);
                Rare::make(&mut self.rare).dead.insert((died, seq, slot));
            }
            State::Done => {
                let finished = record.lease_deadline;
                Rare::make(&mut self.rare)
                    .done
                    .insert((finished, seq, slot));
            }
            State::Waiting => {
                let name = record.group().unwrap_or_default();
                let key = line_key(record.holds_group, record.due_at, seq, slot);
                let group = Rare::make(&mut self.rare)
                    .groups
                    .get_or_default(name, &self.messages);
                if group.waiting.insert(key) {
                    Rare::make(&mut self.rare).waiting_len += 1;
                }
            }
        }
        if let Some(at) = expiry {
            Rare::make(&mut self.rare).expiry.insert((at, seq, slot));
        }
    }

    /// Heap bytes this value holds (MEMORY USAGE): the value itself, the
    /// slab, id table and records, each record's rare fields, and the
    /// indexes, each allocation as the allocator sizes it.
    pub fn mem_usage(&self) -> usize {
        use std::mem::size_of;
        // A group's waiting line is a BTreeSet: nodes hold up to 11 keys
        // and run about two-thirds full, with a header and child links.
        fn btree<K>(len: usize) -> usize {
            len * (size_of::<K>() * 3 / 2 + 4)
        }
        let boxed = |len: usize| if len == 0 { 0 } else { alloc_size(len) };
        let extras: usize = self
            .messages
            .iter()
            .filter_map(|(_, r)| r.extra())
            .map(|e| {
                alloc_size(size_of::<Extra>())
                    + e.last_error.as_ref().map_or(0, |t| boxed(t.len()))
                    + e.replacement.as_ref().map_or(0, |v| {
                        let group = v.terms.options.group.as_ref();
                        alloc_size(size_of::<Version>())
                            + boxed(v.payload.len())
                            + group.map_or(0, |g| boxed(g.len()))
                    })
            })
            .sum();
        let indexes = [
            &self.delayed,
            &self.inflight,
            &Rare::of(&self.rare).dead,
            &Rare::of(&self.rare).expiry,
        ]
        .iter()
        .map(|index| index.heap_bytes())
        .sum::<usize>()
            + self.ready.heap_bytes()
            + self.rare.as_ref().map_or(0, |r| {
                alloc_size(size_of::<Rare>()) + r.schedules.heap_bytes() + r.journal.mem_usage()
            })
            + btree::<TimeKey>(Rare::of(&self.rare).waiting_len)
            + self.groups_heap_bytes();
        alloc_size(size_of::<Queue>()) + self.messages.heap_bytes() + extras + indexes
    }

    /// Marks the queue as left half-changed by a panic (its check failed):
    /// the server then refuses it every command, and the timer leaves it,
    /// until a reload rebuilds it from its records.
    pub fn mark_damaged(&mut self) {
        Rare::make(&mut self.rare).damaged = true;
    }

    pub fn is_damaged(&self) -> bool {
        Rare::of(&self.rare).damaged
    }

    /// Checks every invariant that ties the indexes to the records: each
    /// record is indexed once, where its fields say; ids are unique; a
    /// message of a group is ready or in flight only holding a place of
    /// it, and the groups know exactly who holds their places (see
    /// `check_groups`). A loaded value is checked with this before a key
    /// gets it; the tests check it after every step.
    pub fn check(&self) -> std::result::Result<(), String> {
        Rare::of(&self.rare).schedules.check()?;
        for index in [
            &self.delayed,
            &self.inflight,
            &Rare::of(&self.rare).dead,
            &Rare::of(&self.rare).expiry,
        ] {
            index.check()?;
        }
        self.ready.check()?;
        self.check_groups()?;
        for (slot, record) in self.messages.iter() {
            let fail = |what: &str| Err(format!("message '{}' {what}", printable(record.id())));
            if self.messages.find(record.id()) != Some(slot) {
                return fail("is not unique");
            }
            let seq = record.seq;
            let indexed = match record.state {
                State::Delayed => self.delayed.contains(&(record.due_at, seq, slot)),
                State::Ready => self.ready_holds(slot, &record.ready_key(slot)),
                State::Inflight => self.inflight.contains(&(record.lease_deadline, seq, slot)),
                State::Dead => record
                    .death()
                    .is_some_and(|d| Rare::of(&self.rare).dead.contains(&(d.at, seq, slot))),
                State::Done => {
                    Rare::of(&self.rare)
                        .done
                        .contains(&(record.lease_deadline, seq, slot))
                }
                State::Waiting => record.group().is_some_and(|g| {
                    Rare::of(&self.rare)
                        .groups
                        .get(g, &self.messages)
                        .is_some_and(|g| {
                            g.waiting.contains(&line_key(
                                record.holds_group,
                                record.due_at,
                                seq,
                                slot,
                            ))
                        })
                }),
            };
            if !indexed {
                return fail(&format!("is not indexed as {:?}", record.state));
            }
            if record.state != State::Done
                && (record.state == State::Inflight) != (record.lease_deadline != 0)
            {
                return fail("has a stray lease");
            }
            if record.state == State::Done && (record.holds_group || record.death().is_some()) {
                return fail("is done but holds a group or a death");
            }
            if (record.state == State::Dead) != record.death().is_some() {
                return fail("has a stray death");
            }
            if record.attempt_base > record.attempt {
                return fail("has attempts below its base");
            }
            if record
                .live_expiry()
                .is_some_and(|at| !Rare::of(&self.rare).expiry.contains(&(at, seq, slot)))
            {
                return fail("lacks its TTL entry");
            }
            if record.replacement().is_some() && record.state != State::Inflight {
                return fail("has a stray replacement");
            }
            match (record.group(), record.holds_group) {
                (Some(_), true) if record.state == State::Dead => {
                    return fail("holds its group while dead");
                }
                (None, true) => return fail("holds a group without having one"),
                (Some(group), false) if matches!(record.state, State::Ready | State::Inflight) => {
                    return fail(&format!(
                        "is out without holding group '{}'",
                        printable(group)
                    ));
                }
                _ => {}
            }
        }
        let waiting: usize = Rare::of(&self.rare)
            .groups
            .values()
            .map(|g| g.waiting.len())
            .sum();
        let indexed = self.delayed.len()
            + self.ready_len()
            + self.inflight.len()
            + Rare::of(&self.rare).dead.len()
            + Rare::of(&self.rare).done.len()
            + waiting;
        if indexed != self.messages.len() || waiting != Rare::of(&self.rare).waiting_len {
            return Err(format!(
                "{indexed} index entries for {} messages",
                self.messages.len()
            ));
        }
        let live_ttls = self
            .messages
            .iter()
            .filter(|(_, r)| r.live_expiry().is_some())
            .count();
        if live_ttls != Rare::of(&self.rare).expiry.len() {
            return Err("stray TTL entries".into());
        }
        Ok(())
    }
}
