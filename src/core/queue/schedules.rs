//! A queue's recurring schedules: a run at time T adds the message
//! `name@T` (NX: a run made twice is one message), due at T, with the
//! schedule's payload and options.
//!
//! The timer makes each run at its time (`run_schedules`, a phase of the
//! tick); a master that takes the queue over (after a restart, a failover,
//! a slot move) first settles the run times nobody made, as MISSED says
//! (`take_over`). Either way what was done travels as explicit run times
//! ([`Runs`]), so a replica or the AOF makes exactly the same runs.

use std::collections::{BTreeMap, BTreeSet};

use super::{AddMode, AddRequest, Event, Queue, Rare, State};
use crate::core::limits::{MAX_MISSED_RUNS, MAX_TIME_MS};
use crate::core::schedule::{Overlap, Schedule};

/// The schedules of a queue: by name, and by next run time.
#[derive(Debug, Default)]
pub(super) struct Schedules {
    pub(super) by_name: BTreeMap<Box<[u8]>, Schedule>,
    due: BTreeSet<(u64, Box<[u8]>)>,
}

impl Schedules {
    pub(super) const fn new() -> Schedules {
        Schedules {
            by_name: BTreeMap::new(),
            due: BTreeSet::new(),
        }
    }

    pub(super) fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }

    fn unindex(&mut self, name: &[u8]) {
        if let Some(at) = self.by_name.get(name).and_then(|s| s.next_run) {
            self.due.remove(&(at, name.into()));
        }
    }

    fn index(&mut self, name: &[u8]) {
        if let Some(at) = self.by_name.get(name).and_then(|s| s.next_run) {
            self.due.insert((at, name.into()));
        }
    }

    pub(super) fn earliest(&self) -> Option<u64> {
        self.due.first().map(|(at, _)| *at)
    }

    /// What the schedules hold on the heap, as the allocator sizes it: a
    /// B-tree entry by name and one by time, the name twice, the schedule
    /// and its payload and options.
    pub(super) fn heap_bytes(&self) -> usize {
        use super::alloc_size;
        use std::mem::size_of;
        self.by_name
            .iter()
            .map(|(name, s)| {
                let t = &s.template;
                let entry = (size_of::<Box<[u8]>>() + size_of::<Schedule>()) * 3 / 2
                    + size_of::<(u64, Box<[u8]>)>() * 3 / 2;
                entry
                    + 2 * alloc_size(name.len())
                    + alloc_size(t.payload.len())
                    + t.group.as_ref().map_or(0, |g| alloc_size(g.len()))
                    + s.spec
                        .cron_parts()
                        .map_or(0, |(text, _)| 512 + alloc_size(text.len()))
            })
            .sum()
    }

    pub(super) fn check(&self) -> Result<(), String> {
        let indexed: BTreeSet<(u64, Box<[u8]>)> = self
            .by_name
            .iter()
            .filter_map(|(name, s)| Some((s.next_run?, name.clone())))
            .collect();
        if indexed != self.due {
            return Err("the schedules' due index is stale".into());
        }
        Ok(())
    }
}

/// What one schedule did in a tick or a takeover: the run times it made,
/// the runs it skipped (OVERLAP SKIP), and its next run time after.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Runs {
    pub name: Vec<u8>,
    pub made: Vec<u64>,
    pub skipped: u64,
    pub next: Option<u64>,
}

/// The id of the run of schedule `name` at `at`.
pub fn run_id(name: &[u8], at: u64) -> Vec<u8> {
    let mut id = name.to_vec();
    id.push(b'@');
    id.extend_from_slice(at.to_string().as_bytes());
    id
}

impl Queue {
    /// Creates or replaces schedule `name` at `now`; its next run is the
    /// first at or after `now` that it allows, and after the last run
    /// made. A replaced schedule keeps its counts and last run. `None`
    /// when `only_new` and it exists (left untouched); else its next run
    /// time.
    pub fn put_schedule(
        &mut self,
        now: u64,
        name: &[u8],
        mut schedule: Schedule,
        only_new: bool,
    ) -> Option<Option<u64>> {
        let schedules = &mut Rare::make(&mut self.rare).schedules;
        if let Some(old) = schedules.by_name.get(name) {
            if only_new {
                Rare::tidy(&mut self.rare);
                return None;
            }
            schedule.runs = old.runs;
            schedule.skipped = old.skipped;
            schedule.last_run = old.last_run;
        }
        // A clock behind the last run (a promoted replica's) must not make
        // a run time again: each run is one message, made once.
        let from = schedule
            .last_run
            .map_or(now, |last| now.max(last.saturating_add(1)));
        schedule.next_run = schedule.next_from(from);
        let next = schedule.next_run;
        schedules.unindex(name);
        schedules.by_name.insert(name.into(), schedule);
        schedules.index(name);
        self.events.add(Event::Schedule);
        Some(next)
    }

    /// Puts back a stored schedule as it was (the codec); false when the
    /// name is taken.
    pub(super) fn restore_schedule(&mut self, name: Box<[u8]>, schedule: Schedule) -> bool {
        let schedules = &mut Rare::make(&mut self.rare).schedules;
        if schedules.by_name.contains_key(&name) {
            return false;
        }
        schedules.by_name.insert(name.clone(), schedule);
        schedules.index(&name);
        true
    }

    /// Removes schedules; the messages their runs made stay. Returns how
    /// many existed.
    pub fn unschedule(&mut self, names: &[&[u8]]) -> u64 {
        let mut removed = 0;
        if let Some(rare) = self.rare.as_deref_mut() {
            for name in super::distinct(names) {
                rare.schedules.unindex(name);
                removed += u64::from(rare.schedules.by_name.remove(name).is_some());
            }
        }
        Rare::tidy(&mut self.rare);
        if removed > 0 {
            self.events.add(Event::Unschedule);
        }
        removed
    }

    /// Every schedule, by name.
    pub fn schedules(&self) -> impl Iterator<Item = (&[u8], &Schedule)> {
        Rare::of(&self.rare)
            .schedules
            .by_name
            .iter()
            .map(|(name, s)| (&name[..], s))
    }

    pub fn schedule(&self, name: &[u8]) -> Option<&Schedule> {
        Rare::of(&self.rare).schedules.by_name.get(name)
    }

    /// Whether a schedule has a run due at or before `at`.
    pub fn runs_due(&self, at: u64) -> bool {
        Rare::of(&self.rare)
            .schedules
            .earliest()
            .is_some_and(|due| due <= at)
    }

    pub fn schedule_count(&self) -> usize {
        Rare::of(&self.rare).schedules.by_name.len()
    }

    /// Whether the run of `name` at `at` still has its message out:
    /// delayed, waiting, ready or in flight (OVERLAP SKIP).
    fn run_is_out(&self, name: &[u8], at: u64) -> bool {
        self.get(&run_id(name, at))
            .is_some_and(|r| !matches!(r.state, State::Dead | State::Done))
    }

    /// Adds the run of `name` at `at`, made at `now`; a run already made
    /// is one message.
    fn make_run(&mut self, now: u64, name: &[u8], at: u64) {
        let Some(schedule) = self.schedule(name) else {
            return;
        };
        let t = schedule.template.clone();
        let id = run_id(name, at);
        let request = AddRequest {
            id: Some(&id),
            payload: &t.payload,
            due_at: at,
            priority: t.priority,
            mode: AddMode::OnlyNew,
            max_attempts: t.max_attempts,
            backoff: t.backoff,
            expire_at: t.ttl_ms.map(|ttl| now.saturating_add(ttl).min(MAX_TIME_MS)),
            group: t.group.as_deref(),
            retain_ms: None,
        };
        self.add(now, &request);
    }

    /// Makes (or, under OVERLAP SKIP, skips) the runs of `name` at
    /// `times`, and sets its next run to `next_from`'s answer after them.
    fn settle(&mut self, now: u64, name: &[u8], times: &[u64], next_from: u64) -> Runs {
        let mut runs = Runs {
            name: name.to_vec(),
            made: Vec::new(),
            skipped: 0,
            next: None,
        };
        for &at in times {
            let Some(s) = self.schedule(name) else {
                break;
            };
            let skip = s.overlap == Overlap::Skip
                && s.last_run.is_some_and(|last| self.run_is_out(name, last));
            if skip {
                runs.skipped += 1;
                self.note_runs(name, &[], 1);
            } else {
                self.make_run(now, name, at);
                runs.made.push(at);
                self.note_runs(name, &[at], 0);
            }
        }
        runs.next = self.schedule(name).and_then(|s| s.next_from(next_from));
        self.set_next_run(name, runs.next);
        runs
    }

    /// Counts runs made (and skipped) on the schedule.
    fn note_runs(&mut self, name: &[u8], made: &[u64], skipped: u64) {
        let schedules = &mut Rare::make(&mut self.rare).schedules;
        if let Some(s) = schedules.by_name.get_mut(name) {
            s.runs += made.len() as u64;
            s.skipped += skipped;
            if let Some(&last) = made.last() {
                s.last_run = Some(last);
            }
        }
    }

    fn set_next_run(&mut self, name: &[u8], next: Option<u64>) {
        let schedules = &mut Rare::make(&mut self.rare).schedules;
        schedules.unindex(name);
        if let Some(s) = schedules.by_name.get_mut(name) {
            s.next_run = next;
        }
        schedules.index(name);
    }

    /// The schedules' part of a tick: every run due at `now`, at most
    /// `budget` of them, earliest first. A schedule whose runs the budget
    /// cut keeps its place for the next tick.
    pub fn run_schedules(&mut self, now: u64, budget: usize) -> Vec<Runs> {
        let mut done = Vec::new();
        let mut used = 0;
        while used < budget {
            let Some((at, name)) = Rare::of(&self.rare)
                .schedules
                .due
                .first()
                .filter(|(at, _)| *at <= now)
                .cloned()
            else {
                break;
            };
            // The run times due now, as far as the budget, LIMIT and END go.
            let mut times = vec![at];
            let mut last = at;
            if let Some(s) = self.schedule(&name) {
                let left = s.limit.map_or(u64::MAX, |l| l.saturating_sub(s.runs));
                while used + times.len() < budget && (times.len() as u64) < left {
                    let next = s
                        .spec
                        .next_after(s.start, last)
                        .filter(|&n| n <= now && s.end.is_none_or(|end| n <= end));
                    match next {
                        Some(n) => {
                            times.push(n);
                            last = n;
                        }
                        None => break,
                    }
                }
            }
            used += times.len();
            done.push(self.settle(now, &name, &times, last.saturating_add(1)));
        }
        done
    }

    /// A master takes the queue over at `now` (after a restart, a failover
    /// or a slot move): the run times that passed with nobody to make them
    /// are settled as each schedule's MISSED says, and each schedule goes
    /// on from its first run after `now`.
    pub fn take_over(&mut self, now: u64) -> Vec<Runs> {
        let due: Vec<Box<[u8]>> = Rare::of(&self.rare)
            .schedules
            .due
            .iter()
            .take_while(|(at, _)| *at <= now)
            .map(|(_, name)| name.clone())
            .collect();
        due.iter()
            .map(|name| {
                let times = self
                    .schedule(name)
                    .map_or_else(Vec::new, |s| s.missed_runs(now, MAX_MISSED_RUNS));
                self.settle(now, name, &times, now.saturating_add(1))
            })
            .collect()
    }

    /// Replays what a master's tick or takeover did to the schedules.
    pub fn replay_runs(&mut self, now: u64, runs: &[Runs]) {
        for r in runs {
            if self.schedule(&r.name).is_none() {
                continue;
            }
            for &at in &r.made {
                self.make_run(now, &r.name, at);
            }
            self.note_runs(&r.name, &r.made, r.skipped);
            self.set_next_run(&r.name, r.next);
        }
    }
}
