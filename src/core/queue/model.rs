//! The random-operation model test: long random sequences of every
//! operation, on a clock that mostly moves on but also stands still, leaps
//! and steps back (as a server's clock may). After every step:
//!
//! - **What POP and MPOP return** is what a small reference says: the
//!   ready messages (read from the records, not from the indexes POP uses)
//!   in priority, then due, then insertion order, as many as COUNT and the
//!   limits allow — the pause, MAXINFLIGHT and RATE recomputed here from
//!   the model's own log of deliveries; MPOP over two queues, in either
//!   order, takes from the first that can deliver and counts no throttle
//!   for one it passes over.
//! - **Groups** (three names, and messages without one): GROUPLIMIT,
//!   GROUPRATE and ORDER change, groups are paused (for a while or until
//!   resumed) and resumed. The ready records are already the deliverable
//!   ones (the gate acts as a message becomes ready), so ORDER PRIORITY's
//!   reference is as above; under ORDER FAIR the model keeps the turn
//!   itself — a group joins at the back with its first ready message,
//!   the group in front is served and goes to the back, one with nothing
//!   ready leaves when its turn comes, and setting the order or a limit,
//!   or a load, builds it again from the ready order — and each POP must
//!   follow it (groups that became ready in the same step may come in
//!   either order; where that leaves the turn unknown, any run of POPs
//!   must still be even: no group ready all along gets two more than
//!   another). After every step, from the records: no group holds more
//!   places than GROUPLIMIT (more only as many as it held when the limit
//!   was lowered), none waits for a free place without a pause or
//!   GROUPRATE to hold it, a group surely paused has nothing ready and
//!   gets no delivery, a group's deliveries in any GROUPRATE window (the
//!   model's own log, from the last change of the rate; messages ready
//!   when it changed go as they are) are within it, and DQ.GROUPS tells
//!   the same counts and pauses.
//! - **A shadow replica** is handed what the step propagated (as the
//!   command handlers build it: ADD with its id, CLAIM of the ids leased,
//!   the delay a NACK chose, the lease a TOUCH gave, a tick's counts, ...)
//!   and must reach the master's exact state; every so often it is saved
//!   and loaded back, as a replica's full sync or a restart does. Now and
//!   then a POP is made on the replica too, as if it had been promoted,
//!   and must deliver what the master did (ORDER FAIR's turn included,
//!   unless a load rebuilt one side's turn alone).
//! - **The event log** (seeds that keep events from the start): every
//!   step's events are at the step's time, numbered on from the last; a
//!   POP's are its deliveries, in order, with their attempts; the lifetime
//!   counters of DQ.STATS follow from the events alone; the replica and a
//!   saved-and-loaded copy hold the same log. Other seeds turn EVENTS on,
//!   off and small, and a read behind what is kept is a gap.
//! - The invariants: the indexes agree with the records, nothing is in
//!   flight twice, an id's attempt numbers only grow, MAXATTEMPTS counts
//!   from the last ADD, replacement or REDRIVE, a message leaves only by
//!   ACK, CANCEL, PURGE or as a new version, a tick that did less than its
//!   budget left nothing due, a schedule's run is made at most once, never
//!   early, never past END or LIMIT.
//!
//! `DQ_MODEL_TRACE=1 cargo test --lib model` prints each step;
//! `DQ_MODEL_SEED=n` runs seed `n` alone, `DQ_MODEL_SEED=a..b` seeds a to b.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};

use super::codec;
use super::journal::Entry;
use super::tests::{fenced, request};
use super::*;
use crate::core::flow::Rate;
use crate::core::policy::Settings;
use crate::core::schedule::{Missed, Overlap, Schedule, Spec, Template};
use crate::core::testing::xorshift;

/// The policy every step runs under: the queue's settings over these
/// module defaults, as the server resolves them (master and replica).
fn policy_of(q: &Queue) -> Policy {
    q.config().resolve(&Settings {
        max_attempts: 3,
        backoff: Backoff::Fixed(100),
        ..Settings::default()
    })
}

fn schedule_every(ms: u64, start: u64) -> Schedule {
    Schedule {
        spec: Spec::Every(ms),
        start,
        end: None,
        limit: None,
        missed: Missed::One,
        overlap: Overlap::Allow,
        template: Template::default(),
        next_run: None,
        last_run: None,
        runs: 0,
        skipped: 0,
    }
}

/// One queue of the model: the master's, its replica's, and what the
/// model knows of its limits.
struct Side {
    q: Queue,
    shadow: Queue,
    /// Deliveries (time, how many) while a RATE is set, as the queue's
    /// own log should hold them.
    deliveries: Vec<(u64, u64)>,
    /// The pause as set: until when.
    paused_until: Option<u64>,
    /// Each group's deliveries while GROUPRATE stays as it is (and the
    /// clock has not stepped back), at the time the queue logs them.
    group_log: HashMap<Vec<u8>, Vec<u64>>,
    /// Each group's pause as set: until when, and the latest time shown
    /// since (the pause surely holds while that is before its end).
    group_pauses: HashMap<Vec<u8>, (u64, u64)>,
    /// Groups that may hold more places than GROUPLIMIT, as many as they
    /// held when it was lowered (shrinking as their messages finish).
    group_caps: HashMap<Vec<u8>, usize>,
    /// ORDER FAIR's turn as the model sees it: blocks of groups whose
    /// order among themselves is not known (groups that got their first
    /// ready message in the same step), most of them of one group.
    ring: VecDeque<Vec<GKey>>,
    /// Whether `ring` is the queue's turn; if not, until the turn is
    /// known again, POP is checked for fairness only.
    ring_sure: bool,
    /// While the turn is not known: the groups ready at the start of a
    /// run of POPs with nothing between, and what each got since.
    stretch: Option<(HashSet<GKey>, HashMap<GKey, u32>)>,
    /// Whether the replica's turn is the master's: only a load of one of
    /// them alone rebuilds it apart.
    shadow_turn_same: bool,
    /// The next POP is made on the replica too, as if it were promoted,
    /// instead of replaying its claims.
    pop_on_shadow: bool,
}

/// Ids as text, for messages.
fn show_all(ids: &[Vec<u8>]) -> Vec<String> {
    ids.iter()
        .map(|id| String::from_utf8_lossy(id).into_owned())
        .collect()
}

/// A group of ORDER FAIR's turn: `None` stands for the messages without
/// a group.
type GKey = Option<Vec<u8>>;

/// Where a ready message stands in ready order: priority, due, seq.
type ReadyKeyOf = (Reverse<i32>, u64, u64);

impl Side {
    fn new() -> Side {
        Side {
            q: Queue::new(),
            shadow: Queue::new(),
            deliveries: Vec::new(),
            paused_until: None,
            group_log: HashMap::new(),
            group_pauses: HashMap::new(),
            group_caps: HashMap::new(),
            ring: VecDeque::new(),
            ring_sure: true,
            stretch: None,
            shadow_turn_same: true,
            pop_on_shadow: false,
        }
    }

    /// Each group's ready messages, in ready order, read from the records.
    fn ready_by_group(&self) -> BTreeMap<GKey, VecDeque<Vec<u8>>> {
        let mut ready: Vec<(ReadyKeyOf, GKey, Vec<u8>)> = self
            .q
            .messages
            .iter()
            .filter(|(_, r)| r.state == State::Ready)
            .map(|(_, r)| {
                let g = r.group().map(<[u8]>::to_vec);
                ((Reverse(r.priority), r.due_at, r.seq), g, r.id().to_vec())
            })
            .collect();
        ready.sort();
        let mut by_group: BTreeMap<GKey, VecDeque<Vec<u8>>> = BTreeMap::new();
        for (.., g, id) in ready {
            by_group.entry(g).or_default().push_back(id);
        }
        by_group
    }

    /// The groups that have ready messages, in the order of their first
    /// one (how the queue builds its turn after ORDER FAIR is set, or a
    /// load).
    fn ready_groups_in_order(&self) -> Vec<GKey> {
        let mut seen = HashSet::new();
        let mut order = Vec::new();
        for id in self.ready_in_order() {
            let g = self.q.get(&id).and_then(|r| r.group()).map(<[u8]>::to_vec);
            if seen.insert(g.clone()) {
                order.push(g);
            }
        }
        order
    }

    /// The groups that have a ready message.
    fn ready_groups(&self) -> BTreeSet<GKey> {
        self.q
            .messages
            .iter()
            .filter(|(_, r)| r.state == State::Ready)
            .map(|(_, r)| r.group().map(<[u8]>::to_vec))
            .collect()
    }

    fn in_ring(&self, g: &GKey) -> bool {
        self.ring.iter().any(|block| block.contains(g))
    }

    /// After a step other than POP: a group that got a ready message and
    /// is not in the turn joins it at the back (several at once: in an
    /// order the model does not know).
    fn sync_ring(&mut self) {
        if !self.q.config().fair {
            self.ring.clear();
            self.ring_sure = true;
            return;
        }
        let entrants: Vec<GKey> = self
            .ready_groups()
            .into_iter()
            .filter(|g| !self.in_ring(g))
            .collect();
        if !entrants.is_empty() {
            self.ring.push_back(entrants);
        }
    }

    /// The turn as the queue builds it anew: the groups in the order of
    /// their first ready message (`order`, read before the change), then
    /// those the change made ready (`then_by_name`: one after another, by
    /// name, as the queue hands its groups on).
    fn rebuild_ring(&mut self, order: Vec<GKey>, then_by_name: bool) {
        self.ring = order.into_iter().map(|g| vec![g]).collect();
        self.ring_sure = true;
        self.stretch = None;
        if then_by_name && self.q.config().fair {
            let entrants: Vec<GKey> = self
                .ready_groups()
                .into_iter()
                .filter(|g| !self.in_ring(g))
                .collect();
            self.ring.extend(entrants.into_iter().map(|g| vec![g]));
        }
        self.sync_ring();
    }
}

struct Model {
    seed: u64,
    step: usize,
    now: u64,
    /// The latest time the clock has shown.
    latest: u64,
    /// The queue every operation acts on.
    main: Side,
    /// A second queue, after or before `main` in an MPOP.
    other: Side,
    /// Each id's last delivery number while it stays in the queue.
    attempts: HashMap<Vec<u8>, u32>,
    /// Each schedule's LIMIT and END as last set, and the run times made.
    bounds: HashMap<Vec<u8>, (Option<u64>, Option<u64>)>,
    made: HashSet<(Vec<u8>, u64)>,
    /// `dq.retain-ms` of this run: ACK and DONE propagate it.
    module_retain: u64,
    /// Each done message's outcome, as ACK (None) or DONE left it.
    results: HashMap<Vec<u8>, Option<Vec<u8>>>,
    /// The counters as `main`'s events tell them, while it has kept
    /// every event since it was made (`None` once it may not have).
    from_events: Option<Counters>,
}

impl Model {
    /// ACK (`results` None) or DONE of `items` on `main`, and what it
    /// propagates: `ACK id...` when the module keeps nothing, else `DONE
    /// retain id tagged-result...`.
    fn finish(&mut self, items: &[(Vec<u8>, Option<Vec<u8>>)], is_done: bool) {
        let now = self.now;
        let retain = self.module_retain;
        let done_before: HashSet<Vec<u8>> = done_ids(&self.main.q);
        let count = if is_done {
            let results: Vec<(&[u8], &[u8])> = items
                .iter()
                .map(|(id, r)| (&id[..], r.as_deref().unwrap_or_default()))
                .collect();
            self.main.q.done(now, &results, retain)
        } else {
            let ids: Vec<&[u8]> = items.iter().map(|(id, _)| &id[..]).collect();
            self.main.q.ack(now, &ids, retain)
        };
        if count == 0 {
            return;
        }
        if !is_done && retain == 0 {
            let ids: Vec<&[u8]> = items.iter().map(|(id, _)| &id[..]).collect();
            self.main.shadow.ack(now, &ids, 0);
        } else {
            let tagged = items.iter().map(|(id, r)| (&id[..], r.as_deref()));
            self.main.shadow.finish(now, tagged, retain);
        }
        // What each newly done message must answer while it stays done (the
        // first naming of an id is the one that counts).
        let mut named = HashSet::new();
        for (id, result) in items {
            if !named.insert(id.clone()) || done_before.contains(id) {
                continue;
            }
            if self.main.q.get(id).is_some_and(|r| r.state == State::Done) {
                self.results.insert(id.clone(), result.clone());
            }
        }
    }
}

fn done_ids(q: &Queue) -> HashSet<Vec<u8>> {
    q.messages
        .iter()
        .filter(|(_, r)| r.state == State::Done)
        .map(|(_, r)| r.id().to_vec())
        .collect()
}

impl Model {
    fn at(&self) -> String {
        format!("seed {} step {} now {}", self.seed, self.step, self.now)
    }

    /// DQ.POP on `main`, checked against the reference.
    fn pop(&mut self, count: usize, deadline: u64) {
        let at = self.at();
        let (now, latest) = (self.now, self.latest);
        self.main
            .pop(now, latest, count, deadline, &mut self.attempts, &at);
    }

    /// DQ.MPOP over `main` and `other`, in the order given: it takes from
    /// the first queue that can deliver now (ready messages and room in
    /// its limits), and a queue it passes over is not counted throttled.
    fn mpop(&mut self, other_first: bool, count: usize, deadline: u64) {
        let at = self.at();
        let (now, latest) = (self.now, self.latest);
        let (first, second) = if other_first {
            (&mut self.other, &mut self.main)
        } else {
            (&mut self.main, &mut self.other)
        };
        for side in [first, second] {
            let can = !side.ready_in_order().is_empty() && side.allowance(now) > 0;
            assert_eq!(side.q.deliverable(now), can, "{at}: MPOP");
            if can {
                side.pop(now, latest, count, deadline, &mut self.attempts, &at);
                return;
            }
        }
    }
}

impl Side {
    /// What the limits let a POP deliver at `now`, from the model's own
    /// view of them.
    fn allowance(&self, now: u64) -> usize {
        if self.paused_until.is_some_and(|until| now < until) {
            return 0;
        }
        let mut allowed = usize::MAX;
        let config = self.q.config();
        if let Some(max) = config.max_inflight {
            let inflight = self
                .q
                .messages
                .iter()
                .filter(|(_, r)| r.state == State::Inflight)
                .count();
            allowed = allowed.min((max as usize).saturating_sub(inflight));
        }
        if let Some(rate) = config.rate {
            let since = now.saturating_sub(rate.window_ms);
            let used: u64 = self
                .deliveries
                .iter()
                .filter(|(at, _)| *at > since)
                .map(|(_, n)| n)
                .sum();
            allowed = allowed.min(rate.limit.saturating_sub(used) as usize);
        }
        allowed
    }

    /// The ready messages in the order POP must take them.
    fn ready_in_order(&self) -> Vec<Vec<u8>> {
        let mut ready: Vec<(Reverse<i32>, u64, u64, Vec<u8>)> = self
            .q
            .messages
            .iter()
            .filter(|(_, r)| r.state == State::Ready)
            .map(|(_, r)| (Reverse(r.priority), r.due_at, r.seq, r.id().to_vec()))
            .collect();
        ready.sort();
        ready.into_iter().map(|(.., id)| id).collect()
    }

    fn pop(
        &mut self,
        now: u64,
        latest: u64,
        count: usize,
        deadline: u64,
        attempts: &mut HashMap<Vec<u8>, u32>,
        at: &str,
    ) {
        let ready = self.ready_in_order();
        let allowed = self.allowance(now);
        let expected: Vec<Vec<u8>> = ready.iter().take(count.min(allowed)).cloned().collect();
        let fair = self.q.config().fair;
        let by_group = if fair {
            self.ready_by_group()
        } else {
            BTreeMap::new()
        };
        let throttles = self.q.counters().get(Counter::Throttled);
        let seq_before = self.q.journal().last_seq();
        let taken = self.q.pop(now, count, deadline);
        // A POP's events are the promotions it made first, then its
        // deliveries, in order, with their attempts; a small log keeps the
        // last of them.
        if self.q.journal().is_on() {
            let journal = self.q.journal();
            let from = seq_before.max(journal.oldest() - 1);
            let logged: Vec<(Kind, Vec<u8>, u32)> = match journal.read(from, usize::MAX) {
                Ok(new) => new
                    .map(|(_, e)| (e.kind, e.id().unwrap_or_default().to_vec(), e.attempt))
                    .collect(),
                Err(gap) => panic!("{at}: reading from {from} gives {gap:?}"),
            };
            let written = (journal.last_seq() - seq_before) as usize;
            assert_eq!(
                logged.len(),
                written.min(journal.len()),
                "{at}: POP's events kept"
            );
            let promoted = logged.iter().take_while(|e| e.0 == Kind::Ready).count();
            let delivered: Vec<(Kind, Vec<u8>, u32)> = taken
                .iter()
                .map(|d| (Kind::Delivered, d.id.clone(), d.attempt))
                .collect();
            let kept = logged.len() - promoted;
            assert_eq!(
                logged[promoted..],
                delivered[delivered.len() - kept..],
                "{at}: POP's events"
            );
        }
        let got: Vec<Vec<u8>> = taken.iter().map(|d| d.id.clone()).collect();
        if fair {
            // As many as the reference says, in the turn the model keeps.
            assert_eq!(got.len(), expected.len(), "{at}: ORDER FAIR POP {count}");
            self.check_fair(by_group, &got, at);
        } else {
            assert_eq!(
                got,
                expected,
                "{at}: POP {count} (allowance {allowed}; pause {:?} / queue's {:?}; config {:?}; log {:?} / queue's {:?})",
                self.paused_until,
                Rare::of(&self.q.rare).flow.paused_until,
                self.q.config(),
                self.deliveries,
                Rare::of(&self.q.rare).flow.log.entries().collect::<Vec<_>>()
            );
        }
        self.check_group_deliveries(now, latest, &got, at);
        let throttled = self.q.counters().get(Counter::Throttled) > throttles;
        assert_eq!(
            throttled,
            expected.len() < count.min(ready.len()),
            "{at}: throttled"
        );
        for d in &taken {
            let record = self.q.get(&d.id).map(|r| (r.state, r.due_at, r.attempt));
            assert_eq!(
                record.map(|r| (r.0, r.2)),
                Some((State::Inflight, d.attempt)),
                "{at}"
            );
            // Never delivered before it was due (by the clock as it stood
            // when it became ready).
            assert!(record.is_some_and(|r| r.1 <= latest), "{at}");
            let last = attempts.insert(d.id.clone(), d.attempt);
            assert!(
                last.is_none_or(|a| a < d.attempt),
                "{at}: attempt {} after {last:?}",
                d.attempt
            );
        }
        // The log as the queue keeps it: pruned at each POP that delivers
        // of what no window ending then holds, and in time order (a delivery after
        // the clock stepped back is logged at the last one's time).
        if let Some(rate) = self.q.config().rate.filter(|_| !taken.is_empty()) {
            let since = now.saturating_sub(rate.window_ms);
            self.deliveries.retain(|(t, _)| *t > since);
            let t = self.deliveries.last().map_or(now, |l| l.0.max(now));
            self.deliveries.push((t, taken.len() as u64));
        }
        if std::mem::take(&mut self.pop_on_shadow) && (!fair || self.shadow_turn_same) {
            // A replica promoted now would make the same POP: it turned
            // ORDER FAIR's ring as its master did (unless a load rebuilt
            // its turn alone).
            let on_shadow: Vec<Vec<u8>> = self
                .shadow
                .pop(now, count, deadline)
                .into_iter()
                .map(|d| d.id)
                .collect();
            assert_eq!(
                show_all(&on_shadow),
                show_all(&got),
                "{at}: the replica, promoted, would deliver otherwise (fair {fair})"
            );
        } else if !taken.is_empty() || throttled {
            // Propagated as CLAIM [THROTTLED] deadline ids, when it
            // delivered or was held back.
            if throttled {
                self.shadow.count_throttle();
            }
            let ids: Vec<&[u8]> = got.iter().map(Vec::as_slice).collect();
            self.shadow.claim_slots(now, &ids, deadline);
        }
    }
}

impl Side {
    /// A POP under ORDER FAIR: each group's messages go in ready order,
    /// and the groups in the turn the model keeps (or, while it does not
    /// know the turn, evenly: see `stretch`).
    fn check_fair(
        &mut self,
        mut by_group: BTreeMap<GKey, VecDeque<Vec<u8>>>,
        got: &[Vec<u8>],
        at: &str,
    ) {
        let group_of: HashMap<Vec<u8>, GKey> = by_group
            .iter()
            .flat_map(|(g, ids)| ids.iter().map(move |id| (id.clone(), g.clone())))
            .collect();
        let (start, tally) = self
            .stretch
            .get_or_insert_with(|| (by_group.keys().cloned().collect(), HashMap::new()));
        let start = start.clone();
        let mut tally = std::mem::take(tally);
        for (i, id) in got.iter().enumerate() {
            let Some(g) = group_of.get(id) else {
                panic!("{at}: ORDER FAIR delivered {id:?}, which was not ready");
            };
            assert_eq!(
                by_group.get(g).and_then(|l| l.front()),
                Some(id),
                "{at}: ORDER FAIR delivery {i}: not the first ready of group {g:?} ({by_group:?})"
            );
            while self.ring_sure {
                let Some(block) = self.ring.front() else {
                    panic!("{at}: ORDER FAIR delivered {id:?} of {g:?}, but no group is in turn");
                };
                let has = |g: &GKey| by_group.get(g).is_some_and(|l| !l.is_empty());
                let with_ready = block.iter().filter(|g| has(g)).count();
                if with_ready == 0 {
                    // Nothing ready when its turn comes: it leaves.
                    self.ring.pop_front();
                    continue;
                }
                if with_ready < block.len() {
                    // Which of these left the turn depends on an order
                    // the model does not know.
                    self.ring_sure = false;
                    break;
                }
                let Some(pos) = block.iter().position(|b| b == g) else {
                    panic!(
                        "{at}: ORDER FAIR delivery {i}: {id:?} of group {g:?}, but the turn is {block:?} (ring {:?}; ready {by_group:?}; got {got:?})",
                        self.ring
                    );
                };
                if let Some(block) = self.ring.front_mut() {
                    block.remove(pos);
                    if block.is_empty() {
                        self.ring.pop_front();
                    }
                }
                self.ring.push_back(vec![g.clone()]);
                break;
            }
            if let Some(line) = by_group.get_mut(g) {
                line.pop_front();
            }
            *tally.entry(g.clone()).or_default() += 1;
        }
        // Round-robin: of the groups ready all along since the run of POPs
        // began, none got two more than another.
        let steady: Vec<(&GKey, u32)> = start
            .iter()
            .filter(|g| by_group.get(*g).is_some_and(|l| !l.is_empty()))
            .map(|g| (g, tally.get(g).copied().unwrap_or(0)))
            .collect();
        let most = steady.iter().map(|s| s.1).max().unwrap_or(0);
        let least = steady.iter().map(|s| s.1).min().unwrap_or(0);
        assert!(
            most <= least + 1,
            "{at}: ORDER FAIR: deliveries since the POPs began {steady:?}"
        );
        if let Some(stretch) = self.stretch.as_mut() {
            stretch.1 = tally;
        }
    }

    /// Each delivery of a group: never while the group is paused, and
    /// within GROUPRATE in every window (the model's own log).
    fn check_group_deliveries(&mut self, now: u64, latest: u64, got: &[Vec<u8>], at: &str) {
        let rate = self.q.config().group_rate;
        for id in got {
            let Some(g) = self.q.get(id).and_then(|r| r.group()).map(<[u8]>::to_vec) else {
                continue;
            };
            if let Some(&(until, seen)) = self.group_pauses.get(&g) {
                assert!(
                    !(seen < until && now < until),
                    "{at}: {id:?} delivered while group {g:?} is paused until {until} (latest {latest})"
                );
            }
            let Some(rate) = rate else {
                continue;
            };
            let log = self.group_log.entry(g.clone()).or_default();
            let t = log.last().map_or(now, |&l| l.max(now));
            log.push(t);
            let since = t.saturating_sub(rate.window_ms);
            let in_window = log.iter().filter(|&&d| d > since).count() as u64;
            assert!(
                in_window <= rate.limit,
                "{at}: group {g:?} had {in_window} deliveries in the {} ms up to {t}, GROUPRATE {rate:?} (log {log:?})",
                rate.window_ms
            );
            let keep_from = log.len().saturating_sub(rate.limit as usize + 1);
            log.drain(..keep_from);
        }
    }
}

/// The test; see the module's doc.
#[test]
fn random_operations_deliver_what_the_reference_says_and_a_replica_follows() {
    // DQ_MODEL_SEED=n runs that seed alone (with DQ_MODEL_TRACE, to follow
    // a failure); DQ_MODEL_SEED=a..b runs seeds a to b (a sweep).
    if let Ok(seeds) = std::env::var("DQ_MODEL_SEED") {
        let (from, to) = seeds.split_once("..").unwrap_or((&seeds, &seeds));
        let (from, to): (u64, u64) = match (from.parse(), to.parse()) {
            (Ok(from), Ok(to)) => (from, to),
            _ => panic!("DQ_MODEL_SEED: n or a..b, not {seeds:?}"),
        };
        for seed in from..=to {
            run(seed, 700);
        }
        return;
    }
    let runs: usize = (1..=40u64).map(|seed| run(seed, 700)).sum();
    // The sequences do reach the schedules' runs, not only their setup.
    assert!(runs > 200, "only {runs} runs made");
}

/// Returns how many schedule runs it made.
fn run(seed: u64, steps: usize) -> usize {
    let mut next = xorshift(seed);
    let mut m = Model {
        seed,
        step: 0,
        now: 1_000_000,
        latest: 1_000_000,
        main: Side::new(),
        other: Side::new(),
        attempts: HashMap::new(),
        bounds: HashMap::new(),
        made: HashSet::new(),
        module_retain: if seed.is_multiple_of(3) {
            0
        } else {
            100 + seed * 37 % 2_000
        },
        results: HashMap::new(),
        from_events: None,
    };
    if seed % 4 == 1 {
        // Room for every event of a step: the whole history is read.
        let config = QueueConfig {
            events: Some(1_000),
            ..QueueConfig::NONE
        };
        m.main.q.set_config(m.now, config.clone());
        m.main.shadow.set_config(m.now, config);
        m.from_events = Some(Counters::default());
    }
    if seed % 4 == 2 {
        // ORDER FAIR from the start, with room for a few of each group.
        let mut config = m.main.q.config().clone();
        config.fair = true;
        config.group_limit = Some(2);
        m.set_group_config(config);
    }
    let mut previous_now = m.now;
    for step in 0..steps {
        m.step = step;
        // The clock: mostly on, sometimes still, now and then a leap (so
        // schedules fall due several times over) or a step back.
        m.now = match next(40) {
            0..=3 => m.now,
            4 => m.now + 2_000 + next(60_000),
            5 => m.now.saturating_sub(1 + next(2_000)),
            _ => m.now + 1 + next(40),
        };
        if m.now < previous_now {
            // Deliveries logged before the clock stepped back are at times
            // it has not shown since: GROUPRATE's windows count from here.
            m.main.group_log.clear();
        }
        previous_now = m.now;
        m.latest = m.latest.max(m.now);
        let now = m.now;
        for (_, seen) in m.main.group_pauses.values_mut() {
            *seen = (*seen).max(now);
        }
        let id = format!("m{}", next(25)).into_bytes();
        let before: HashSet<Vec<u8>> = [&m.main.q, &m.other.q]
            .iter()
            .flat_map(|q| q.messages.iter().map(|(_, r)| r.id().to_vec()))
            .collect();
        let mut may_leave: HashSet<Vec<u8>> = HashSet::new();
        // Done messages leave only by retention (a tick), RETAINMAX (a
        // finish or a config change), CANCEL, PURGE or a new version.
        let mut may_leave_done: HashSet<Vec<u8>> = HashSet::new();
        let done_before = done_ids(&m.main.q);
        let seq_before = m.main.q.journal().last_seq();
        let mut runs: Vec<Runs> = Vec::new();
        let p = policy_of(&m.main.q);
        let op = next(23);
        if std::env::var("DQ_MODEL_TRACE").is_ok() {
            eprintln!(
                "step {step} now {now} op {op} log {:?} / {:?} rate {:?}",
                Rare::of(&m.main.q.rare)
                    .flow
                    .log
                    .entries()
                    .collect::<Vec<_>>(),
                Rare::of(&m.main.shadow.rare)
                    .flow
                    .log
                    .entries()
                    .collect::<Vec<_>>(),
                m.main.q.config().rate
            );
            let c = m.main.q.config();
            let flows: Vec<_> = m
                .main
                .q
                .group_flows()
                .map(|(g, f)| {
                    (
                        String::from_utf8_lossy(g).into_owned(),
                        f.paused_until,
                        f.log.entries().collect::<Vec<_>>(),
                    )
                })
                .collect();
            let mut grouped: Vec<_> = m
                .main
                .q
                .messages
                .iter()
                .filter(|(_, r)| {
                    r.group().is_some() && !matches!(r.state, State::Done | State::Dead)
                })
                .map(|(_, r)| {
                    (
                        r.group().map(|g| String::from_utf8_lossy(g).into_owned()),
                        String::from_utf8_lossy(r.id()).into_owned(),
                        r.state,
                        r.holds_group,
                        r.due_at,
                        r.priority,
                    )
                })
                .collect();
            grouped.sort();
            eprintln!(
                "  groups limit {:?} rate {:?} fair {} flows {flows:?} wakes {:?} ring {:?} sure {} queue's ring {:?}\n  messages {grouped:?}",
                c.group_limit,
                c.group_rate,
                c.fair,
                Rare::of(&m.main.q.rare).wakes,
                m.main.ring,
                m.main.ring_sure,
                m.main
                    .q
                    .fair_ring()
                    .into_iter()
                    .map(|(g, n)| (g.map(|g| String::from_utf8_lossy(&g).into_owned()), n))
                    .collect::<Vec<_>>()
            );
            for (name, s) in m.main.q.schedules() {
                eprintln!(
                    "  schedule {} start {} next {:?} last {:?} runs {} missed {:?}",
                    String::from_utf8_lossy(name),
                    s.start,
                    s.next_run,
                    s.last_run,
                    s.runs,
                    s.missed
                );
            }
        }
        match op {
            0..=2 => {
                let generated = next(8) == 0;
                let mut req = request(&id, b"x", now + next(3) * next(60));
                if next(8) == 0 {
                    // AT in the past: ready at once.
                    req.due_at = now.saturating_sub(next(500));
                }
                req.id = (!generated).then_some(&id[..]);
                req.priority = next(3) as i32;
                // Three groups, and messages without one: groups are busy.
                req.group =
                    [None, None, Some(&b"g1"[..]), Some(b"g2"), Some(b"g3")][next(5) as usize];
                if next(6) == 0 {
                    req.expire_at = Some(now + 1 + next(300));
                }
                if next(5) == 0 {
                    req.max_attempts = Some(1 + next(4) as u32);
                }
                if next(3) == 0 {
                    req.retain_ms = Some([0, 1 + next(200), 1 + next(3_000)][next(3) as usize]);
                }
                let held = m.main.q.get(&id).is_some();
                req.backoff = match next(8) {
                    0 => Some(Backoff::Fixed(next(200))),
                    1 => Some(Backoff::Steps(vec![10, 50 + next(100), 400])),
                    _ => None,
                };
                if !generated {
                    req.mode = [AddMode::Upsert, AddMode::OnlyNew, AddMode::OnlyExisting]
                        [next(3) as usize];
                }
                let added = m.main.q.add(now, &req);
                // Idempotency: NX changes nothing while the id is held in
                // any state, done included.
                if req.mode == AddMode::OnlyNew && held {
                    assert_eq!(added, None, "{}: NX over a held id", m.at());
                }
                if let Some(made) = added {
                    may_leave_done.insert(made.clone());
                    let mut replayed = req.clone();
                    replayed.id = Some(&made);
                    assert!(m.main.shadow.add(now, &replayed).is_some(), "{}", m.at());
                }
            }
            3..=5 => {
                m.main.pop_on_shadow = next(3) == 0;
                m.pop(1 + next(4) as usize, now + 1 + next(200))
            }
            6 => {
                // ACK, or DONE with results; RETAINMAX may drop old ones.
                may_leave.insert(id.clone());
                let other = format!("m{}", next(25)).into_bytes();
                may_leave.insert(other.clone());
                may_leave.extend(done_ids(&m.main.q));
                may_leave_done.extend(done_ids(&m.main.q));
                let is_done = next(2) == 0;
                let result = |n: u64| is_done.then(|| format!("r{step}-{n}").into_bytes());
                // Mostly what is in flight: a random id seldom is.
                let inflight = m.main.q.peek(State::Inflight, usize::MAX);
                let id = match inflight.len() {
                    0 => id.clone(),
                    n => inflight[next(n as u64) as usize].id().to_vec(),
                };
                may_leave.insert(id.clone());
                let items = vec![(id, result(0)), (other, result(1))];
                m.finish(&items, is_done);
            }
            7 => {
                let fence = (next(2) == 0).then(|| 1 + next(4) as u32);
                let action = if next(5) == 0 {
                    NackAction::Dead
                } else {
                    NackAction::Retry((next(2) == 0).then(|| next(100)))
                };
                let error: Option<&[u8]> = (next(2) == 0).then_some(b"e");
                let mut placed = None;
                fenced(&mut m.main.q, &id, fence, (seed, step), |q| {
                    let r = q.nack(now, &id, action, fence, error, &p)?;
                    placed = r;
                    Ok(r.is_some())
                });
                // Propagated as the delay the backoff chose (0 for a death
                // by used-up attempts), or DEAD.
                if let Some(placed) = placed {
                    let replayed = match action {
                        NackAction::Dead => NackAction::Dead,
                        NackAction::Retry(_) => NackAction::Retry(Some(match placed.state {
                            State::Dead => 0,
                            _ => placed.due_at.saturating_sub(now),
                        })),
                    };
                    let sp = policy_of(&m.main.shadow);
                    let r = m.main.shadow.nack(now, &id, replayed, None, error, &sp);
                    assert!(matches!(r, Ok(Some(_))), "{}: {r:?}", m.at());
                }
            }
            8 => {
                let fence = (next(2) == 0).then(|| 1 + next(4) as u32);
                let deadline = now + next(300);
                let progress = (next(2) == 0).then(|| format!("p{step}").into_bytes());
                let mut given = None;
                fenced(&mut m.main.q, &id, fence, (seed, step), |q| {
                    given = q.touch(&id, deadline, fence)?;
                    Ok(given.is_some())
                });
                if let Some(deadline) = given {
                    assert_eq!(m.main.shadow.touch(&id, deadline, None), Ok(Some(deadline)));
                    if let Some(p) = &progress {
                        assert!(m.main.q.set_progress(now, &id, p), "{}", m.at());
                        assert!(m.main.shadow.set_progress(now, &id, p));
                        assert_eq!(m.main.q.get(&id).and_then(|r| r.progress()), Some(&p[..]));
                    }
                }
            }
            9 | 10 => {
                // Retention runs out in a tick.
                may_leave.extend(done_ids(&m.main.q));
                may_leave_done.extend(done_ids(&m.main.q));
                // A tick that does less than its budget has nothing more
                // due, but what its later phases made due for an earlier
                // one (a version installed by a lease's end whose TTL has
                // passed): the server's timer comes back at once for that,
                // and so does this loop, at most twice.
                let budget = 1 + next(8) as usize;
                // Now and then the timer comes back at once after a tick
                // that used its whole budget, as the server's does, until
                // all that is due is done (group wake-ups included).
                let drain = next(4) == 0;
                let mut short = 0;
                for round in 0..200 {
                    // A newer version installed in place of a message whose
                    // TTL ran out is ready at once, and may expire in the
                    // same round (`installs`). A waiting message whose TTL
                    // ran out may be let in by the place an earlier expiry
                    // of the round frees, and expire in the same round
                    // (`let_in`).
                    let (mut installs, mut let_in) = (false, false);
                    for (_, r) in m.main.q.messages.iter() {
                        if r.live_expiry().is_some_and(|at| at <= now) {
                            installs |= r.replacement().is_some();
                            let_in |= r.state == State::Waiting;
                        }
                    }
                    let work = m.main.q.tick(now, budget, &p);
                    runs.extend(work.runs.iter().cloned());
                    let passed = round > 0 || installs || (work.ttl_expired > 1 && let_in);
                    if work.ttl_expired > 0 && passed {
                        // A message made ready in an earlier round, by an
                        // install or by a freed place may have expired:
                        // its group may have joined ORDER FAIR's turn
                        // unseen, and a line emptied so keeps its place in
                        // the turn until a POP passes it.
                        m.main.ring_sure = false;
                    }
                    if std::env::var("DQ_MODEL_TRACE").is_ok() {
                        eprintln!("  tick {round}: {work:?}");
                    }
                    if !work.is_empty() {
                        let sp = policy_of(&m.main.shadow);
                        let done = m.main.shadow.replay_tick(now, &work, &sp);
                        assert_eq!(done, work, "{}: the replica's tick", m.at());
                    }
                    let left = m.main.q.next_due().filter(|&at| at <= now);
                    if left.is_none() || (work.done() == budget && !drain) {
                        break;
                    }
                    if work.done() < budget {
                        short += 1;
                        assert!(
                            short <= 2,
                            "{}: ticks that did less than their budget ({work:?} of {budget}) left {left:?} due",
                            m.at()
                        );
                    }
                }
            }
            11 => {
                // Flow control: limits change, pauses come and go.
                let mut config = m.main.q.config().clone();
                match next(6) {
                    0 => {
                        config.rate = (next(3) > 0).then(|| Rate {
                            limit: 1 + next(4),
                            window_ms: 50 + next(400),
                        })
                    }
                    1 => config.max_inflight = (next(3) > 0).then(|| 1 + next(4) as u32),
                    2 => match next(4) {
                        0 => config.backoff = (next(2) == 0).then(|| Backoff::Fixed(next(300))),
                        3 if m.from_events.is_none() => {
                            config.events = [None, Some(1), Some(3), Some(50)][next(4) as usize]
                        }
                        1 => {
                            config.retain_ms =
                                [None, Some(0), Some(1 + next(2_000))][next(3) as usize]
                        }
                        _ => {
                            config.retain_max = (next(2) == 0).then(|| 1 + next(4));
                            may_leave.extend(done_ids(&m.main.q));
                            may_leave_done.extend(done_ids(&m.main.q));
                        }
                    },
                    3 => {
                        let until = if next(2) == 0 {
                            FOREVER
                        } else {
                            now + next(300)
                        };
                        m.main.q.pause(now, until);
                        m.main.shadow.pause(now, until);
                        m.main.paused_until = Some(until);
                    }
                    _ => {
                        let (_, changed) = m.main.q.resume(now);
                        if changed {
                            m.main.shadow.resume(now);
                        }
                        m.main.paused_until = None;
                    }
                }
                if config != *m.main.q.config() {
                    if config.rate.is_none() {
                        m.main.deliveries.clear();
                    }
                    m.main.q.set_config(now, config.clone());
                    m.main.shadow.set_config(now, config);
                }
            }
            12 => {
                // Schedules: created, replaced, removed, taken over.
                let name = format!("s{}", next(3)).into_bytes();
                match next(6) {
                    0 => {
                        if m.main.q.unschedule(&[&name]) > 0 {
                            m.main.shadow.unschedule(&[&name]);
                        }
                    }
                    1 => {
                        runs = m.main.q.take_over(now);
                        if !runs.is_empty() {
                            let work = TickWork {
                                runs: runs.clone(),
                                ..TickWork::default()
                            };
                            m.main
                                .shadow
                                .replay_tick(now, &work, &policy_of(&m.main.shadow));
                        }
                    }
                    _ => {
                        let mut s =
                            schedule_every(1_000 + next(2_000), now.saturating_sub(next(5_000)));
                        s.end = (next(3) == 0).then(|| now + next(20_000));
                        s.limit = (next(3) == 0).then(|| 1 + next(5));
                        s.missed = [Missed::Skip, Missed::One, Missed::All][next(3) as usize];
                        s.overlap = [Overlap::Allow, Overlap::Skip][next(2) as usize];
                        let (limit, end) = (s.limit, s.end);
                        let only_new = next(4) == 0;
                        let put = m.main.q.put_schedule(now, &name, s.clone(), only_new);
                        if put.is_some() {
                            m.bounds.insert(name.clone(), (limit, end));
                            m.main.shadow.put_schedule(now, &name, s, only_new);
                        }
                    }
                }
            }
            13 => {
                may_leave_done.insert(id.clone());
                may_leave.insert(id.clone());
                if m.main.q.cancel(now, &[&id]) > 0 {
                    m.main.shadow.cancel(now, &[&id]);
                }
            }
            14 => {
                let other = format!("m{}", next(25)).into_bytes();
                let ids: [&[u8]; 2] = [&id, &other];
                let which = if next(2) == 0 {
                    Redrive::Oldest(1 + next(3) as usize)
                } else {
                    Redrive::Ids(&ids)
                };
                if m.main.q.redrive(now, which) > 0 {
                    m.main.shadow.redrive(now, which);
                }
            }
            15 => {
                may_leave_done.extend(done_ids(&m.main.q));
                if next(6) == 0 {
                    let state = [
                        None,
                        Some(State::Ready),
                        Some(State::Delayed),
                        Some(State::Inflight),
                        Some(State::Dead),
                    ][next(5) as usize];
                    may_leave.extend(before.iter().cloned());
                    let purged = m.main.q.purge(now, state);
                    if purged > 0 {
                        m.main.shadow.purge(now, state);
                    }
                    if state.is_none() && purged > 0 {
                        // A new value: ORDER FAIR's turn starts empty.
                        m.main.rebuild_ring(Vec::new(), false);
                        m.main.shadow_turn_same = true;
                    }
                }
            }
            18 => {
                // The second queue: messages come and go, limits change.
                let o = &mut m.other;
                let oid = format!("o{}", next(8)).into_bytes();
                match next(6) {
                    0 | 1 => {
                        let mut req = request(&oid, b"y", now + next(2) * next(40));
                        req.priority = next(2) as i32;
                        if o.q.add(now, &req).is_some() {
                            o.shadow.add(now, &req);
                        }
                    }
                    2 => {
                        let op = policy_of(&o.q);
                        let work = o.q.tick(now, 100, &op);
                        if !work.is_empty() {
                            o.shadow.replay_tick(now, &work, &policy_of(&o.shadow));
                        }
                    }
                    3 => {
                        let until = now + next(200);
                        o.q.pause(now, until);
                        o.shadow.pause(now, until);
                        o.paused_until = Some(until);
                    }
                    4 => {
                        let mut config = o.q.config().clone();
                        config.rate = (next(2) == 0).then(|| Rate {
                            limit: 1 + next(3),
                            window_ms: 50 + next(200),
                        });
                        config.max_inflight = (next(2) == 0).then(|| 1 + next(3) as u32);
                        if config.rate.is_none() {
                            o.deliveries.clear();
                        }
                        o.q.set_config(now, config.clone());
                        o.shadow.set_config(now, config);
                    }
                    _ => {
                        may_leave.insert(oid.clone());
                        if o.q.ack(now, &[&oid], 0) > 0 {
                            o.shadow.ack(now, &[&oid], 0);
                        }
                    }
                }
            }
            19 => m.mpop(next(2) == 0, 1 + next(4) as usize, now + 1 + next(200)),
            21 => {
                // Groups' limits and order.
                let mut config = m.main.q.config().clone();
                match next(3) {
                    // 12: more places than a group keeps in its array.
                    0 => {
                        config.group_limit =
                            [None, Some(1), Some(2), Some(3), Some(12)][next(5) as usize]
                    }
                    1 => {
                        config.group_rate = (next(3) > 0).then(|| Rate {
                            limit: 1 + next(3),
                            window_ms: 500 + next(2_500),
                        })
                    }
                    _ => config.fair = next(2) == 0,
                }
                m.set_group_config(config);
            }
            22 => {
                // A group paused (for a while or until resumed), resumed.
                let g = format!("g{}", 1 + next(4)).into_bytes();
                m.pause_or_resume_group(&g, next(2) == 0, &mut next);
            }
            _ => {
                // A full sync or a restart: the replica is saved and loaded
                // back, and so is the master now and then.
                m.main.shadow =
                    codec::copy(&m.main.shadow).unwrap_or_else(|e| panic!("{}: {e}", m.at()));
                if next(4) == 0 {
                    m.main.q = codec::copy(&m.main.q).unwrap_or_else(|e| panic!("{}: {e}", m.at()));
                    // A loaded queue's turn: its groups in the order of
                    // their first ready message.
                    let order = m.main.ready_groups_in_order();
                    m.main.rebuild_ring(order, false);
                    m.main.shadow_turn_same = true;
                } else {
                    m.main.shadow_turn_same = false;
                }
            }
        }
        for side in [&mut m.main, &mut m.other] {
            side.q.take_events();
            side.shadow.take_events();
        }
        if !matches!(op, 3..=5 | 19) {
            m.main.stretch = None;
        }
        m.main.sync_ring();
        check(&mut m, &before, &may_leave, &runs);
        check_groups(&mut m);
        check_outcomes(&mut m, &done_before, &may_leave_done);
        check_events(&mut m, seq_before);
    }
    m.made.len()
}

fn check(m: &mut Model, before: &HashSet<Vec<u8>>, may_leave: &HashSet<Vec<u8>>, runs: &[Runs]) {
    for (side, name) in [(&m.main, "main"), (&m.other, "other")] {
        if let Err(e) = side.q.check() {
            panic!("{}: {name}: {e}", m.at());
        }
        if let Err(e) = side.shadow.check() {
            panic!("{}: {name}'s replica: {e}", m.at());
        }
        assert_eq!(
            codec::sorted_digest(&side.shadow),
            codec::sorted_digest(&side.q),
            "{}: {name}'s replica differs",
            m.at()
        );
        assert_eq!(side.shadow.stats(), side.q.stats(), "{}: {name}", m.at());
        assert_eq!(
            Rare::of(&side.q.rare).flow.paused_until,
            side.paused_until,
            "{}: {name}'s pause",
            m.at()
        );
    }
    // A run time is made at most once, never early, never after END or
    // past LIMIT.
    for r in runs {
        let (limit, end) = m.bounds.get(&r.name).copied().unwrap_or((None, None));
        for &at in &r.made {
            assert!(at <= m.latest, "{}: run at {at}", m.at());
            assert!(end.is_none_or(|end| at <= end), "{}: after END", m.at());
            assert!(
                m.made.insert((r.name.clone(), at)),
                "{}: a run at {at} twice",
                m.at()
            );
        }
        if let (Some(limit), Some(s)) = (limit, m.main.q.schedule(&r.name)) {
            assert!(
                s.runs <= limit,
                "{}: {} runs, LIMIT {limit}",
                m.at(),
                s.runs
            );
        }
    }
    // MAXATTEMPTS counts from the last ADD, replacement or REDRIVE: a
    // message that used them all is dead, done, or in its last delivery.
    let p = policy_of(&m.main.q);
    for (_, r) in m.main.q.messages.iter() {
        let (max, _) = p.max_attempts_or(r.max_attempts());
        let used = r.attempts_used();
        assert!(
            matches!(r.state, State::Dead | State::Done)
                || used < max
                || (used == max && r.state == State::Inflight),
            "{}: {:?} used {used} of {max} in {:?}",
            m.at(),
            r.id(),
            r.state
        );
    }
    let inflight = m.main.q.peek(State::Inflight, usize::MAX);
    let distinct: HashSet<&[u8]> = inflight.iter().map(|r| r.id()).collect();
    assert_eq!(distinct.len(), inflight.len(), "{}", m.at());
    // Numbering is per stay in the queue: an id that left starts again.
    let held = |id: &[u8]| m.main.q.get(id).is_some() || m.other.q.get(id).is_some();
    m.attempts.retain(|id, _| held(id));
    for gone in before.iter().filter(|id| !held(id)) {
        assert!(may_leave.contains(gone), "{}: {gone:?} vanished", m.at());
    }
}

/// Every group (recomputed from the records): at most GROUPLIMIT places
/// taken (or as many as it held when the limit was lowered), nothing
/// ready while it is surely paused, nothing waiting for a place that is
/// free (no GROUPRATE, no pause), and DQ.GROUPS tells the same.
fn check_groups(m: &mut Model) {
    let at = m.at();
    let side = &mut m.main;
    let limit = side.q.config().group_limit() as usize;
    // Places, ready, in flight, waiting.
    let mut per: BTreeMap<Vec<u8>, [usize; 4]> = BTreeMap::new();
    for (_, r) in side.q.messages.iter() {
        let Some(g) = r.group() else {
            continue;
        };
        let c = per.entry(g.to_vec()).or_default();
        if matches!(r.state, State::Ready | State::Inflight) || r.holds_group {
            c[0] += 1;
        }
        match r.state {
            State::Ready => c[1] += 1,
            State::Inflight => c[2] += 1,
            State::Waiting => c[3] += 1,
            _ => {}
        }
    }
    let surely_paused = |g: &[u8]| {
        side.group_pauses
            .get(g)
            .filter(|&&(until, seen)| seen < until)
            .map(|p| p.0)
    };
    for (g, c) in &per {
        let cap = side.group_caps.get(g).copied().unwrap_or(0).max(limit);
        assert!(
            c[0] <= cap,
            "{at}: group {g:?} has {} places taken, GROUPLIMIT {limit} (cap {cap}; {c:?})",
            c[0]
        );
        if let Some(until) = surely_paused(g) {
            assert_eq!(
                c[1], 0,
                "{at}: group {g:?} paused until {until} has ready messages"
            );
        }
        if side.q.config().group_rate.is_none() && !side.group_pauses.contains_key(g) && c[3] > 0 {
            assert!(
                c[0] >= limit,
                "{at}: group {g:?} keeps {} waiting with {} of {limit} places taken",
                c[3],
                c[0]
            );
        }
    }
    // A lowered limit: the places above it go as their messages finish.
    side.group_caps = per
        .iter()
        .filter_map(|(g, c)| {
            let cap = side.group_caps.get(g).copied().unwrap_or(0).max(limit);
            let now_cap = c[0].min(cap);
            (now_cap > limit).then(|| (g.clone(), now_cap))
        })
        .collect();
    let (listed, more) = side.q.groups_from(b"", usize::MAX, |_| true);
    assert!(more.is_none(), "{at}");
    assert_eq!(listed.len(), side.q.group_count(), "{at}");
    for info in &listed {
        let c = per.get(info.name).copied().unwrap_or_default();
        assert_eq!(
            (info.ready, info.inflight, info.waiting),
            (c[1] as u64, c[2] as u64, c[3] as u64),
            "{at}: DQ.GROUPS of {:?}",
            info.name
        );
        if let Some(until) = surely_paused(info.name) {
            assert_eq!(
                info.paused_until,
                Some(until),
                "{at}: {:?}'s pause",
                info.name
            );
        }
    }
    for (g, c) in &per {
        if c[0] + c[3] > 0 || surely_paused(g).is_some() {
            assert!(
                listed.iter().any(|i| i.name == &g[..]),
                "{at}: group {g:?} ({c:?}) not listed"
            );
        }
    }
}

impl Model {
    /// GROUPLIMIT, GROUPRATE or ORDER set on master and replica.
    fn set_group_config(&mut self, config: QueueConfig) {
        let now = self.now;
        let side = &mut self.main;
        let old = side.q.config().clone();
        if (old.group_limit, old.group_rate, old.fair)
            == (config.group_limit, config.group_rate, config.fair)
        {
            return;
        }
        let mut places: HashMap<Vec<u8>, usize> = HashMap::new();
        for (_, r) in side.q.messages.iter() {
            if let Some(g) = r.group() {
                if matches!(r.state, State::Ready | State::Inflight) || r.holds_group {
                    *places.entry(g.to_vec()).or_default() += 1;
                }
            }
        }
        side.q.set_config(now, config.clone());
        side.shadow.set_config(now, config.clone());
        if old.group_rate != config.group_rate {
            side.group_log.clear();
        }
        if old.group_limit() != config.group_limit() {
            // Those already out finish; the limit holds from then on.
            let limit = config.group_limit() as usize;
            side.group_caps = places.into_iter().filter(|&(_, n)| n > limit).collect();
        }
        // The queue builds its turn again, from the ready order once the
        // new limits are applied.
        let order = side.ready_groups_in_order();
        side.rebuild_ring(order, false);
        side.shadow_turn_same = true;
    }

    /// PAUSE GROUP (always propagated) or RESUME GROUP (propagated when
    /// it changed something).
    fn pause_or_resume_group(&mut self, g: &[u8], pause: bool, next: &mut impl FnMut(u64) -> u64) {
        let (now, at) = (self.now, self.at());
        let side = &mut self.main;
        if pause {
            let until = match next(3) {
                0 => FOREVER,
                1 => now + 1 + next(300),
                _ => now + 1 + next(3_000),
            };
            side.q.pause_group(now, g, until);
            side.shadow.pause_group(now, g, until);
            side.group_pauses.insert(g.to_vec(), (until, now));
            return;
        }
        let known = side.group_pauses.remove(g);
        let (was, changed) = side.q.resume_group(now, g);
        if changed {
            side.shadow.resume_group(now, g);
        }
        match known {
            None => assert_eq!((was, changed), (false, false), "{at}: RESUME GROUP {g:?}"),
            Some((until, seen)) if seen < until => {
                assert_eq!((was, changed), (true, true), "{at}: RESUME GROUP {g:?}")
            }
            Some(_) => assert!(!was || changed, "{at}: RESUME GROUP {g:?}"),
        }
    }
}

/// A done message has one outcome, the one its ACK or DONE gave, for as
/// long as it stays done; it leaves `done` only by retention, RETAINMAX,
/// CANCEL, PURGE or a new version; every other message's outcome follows
/// its state.
fn check_outcomes(
    m: &mut Model,
    done_before: &HashSet<Vec<u8>>,
    may_leave_done: &HashSet<Vec<u8>>,
) {
    let done_now = done_ids(&m.main.q);
    for id in done_before.difference(&done_now) {
        assert!(
            may_leave_done.contains(id),
            "{}: {id:?} left done by a step that may not do that",
            m.at()
        );
    }
    m.results.retain(|id, _| done_now.contains(id));
    for (_, r) in m.main.q.messages.iter() {
        let outcome = m.main.q.outcome(r.id());
        match r.state {
            State::Done => {
                let expected = m.results.get(r.id()).unwrap_or_else(|| {
                    panic!(
                        "{}: {:?} is done, but no ACK or DONE made it so",
                        m.at(),
                        r.id()
                    )
                });
                assert_eq!(outcome, Outcome::Done(expected.as_deref()), "{}", m.at());
                assert!(
                    r.finished_at().is_some_and(|at| at <= m.latest),
                    "{}",
                    m.at()
                );
            }
            State::Dead => assert_eq!(outcome, Outcome::Dead(r.last_error()), "{}", m.at()),
            _ => assert_eq!(outcome, Outcome::Pending, "{}", m.at()),
        }
    }
    assert_eq!(m.main.q.outcome(b"never-added"), Outcome::Gone);
    if let Some(max) = m.main.q.config().retain_max {
        assert!(done_now.len() as u64 <= max, "{}: RETAINMAX {max}", m.at());
    }
}

/// The step's events (see the module's doc), and the counters they add up to.
fn check_events(m: &mut Model, seq_before: u64) {
    let (q, shadow) = (&m.main.q, &m.main.shadow);
    assert_eq!(
        shadow.journal(),
        q.journal(),
        "{}: the replica's events",
        m.at()
    );
    let journal = q.journal();
    assert!(journal.len() as u64 <= journal.max(), "{}", m.at());
    // A read behind what is kept is a gap, never a silent skip.
    let oldest = journal.oldest();
    match journal.read(0, 1) {
        Err(gap) => assert!(oldest > 1 && gap.oldest == oldest, "{}", m.at()),
        Ok(_) => assert_eq!(oldest, 1, "{}", m.at()),
    }
    let Some(mut counters) = m.from_events else {
        return;
    };
    let new: Vec<(u64, &Entry)> = journal
        .read(seq_before, usize::MAX)
        .unwrap_or_else(|gap| panic!("{}: events lost ({gap:?})", m.at()))
        .collect();
    assert_eq!(
        new.len() as u64,
        journal.last_seq() - seq_before,
        "{}: every event of the step is kept",
        m.at()
    );
    for (i, (seq, e)) in new.iter().enumerate() {
        assert_eq!(*seq, seq_before + 1 + i as u64, "{}", m.at());
        assert_eq!(e.at, m.now, "{}: {e:?}", m.at());
        let detail = e.detail().unwrap_or_default();
        let bump = |c: &mut Counters, counter: Counter, n: u64| {
            c.bump(counter, n);
        };
        match e.kind {
            Kind::Added => bump(&mut counters, Counter::Added, 1),
            Kind::Replaced => match detail {
                b"" if e.detail().is_none() => bump(&mut counters, Counter::Added, 1),
                b"nack" => bump(&mut counters, Counter::Nacked, 1),
                b"lease-expired" => bump(&mut counters, Counter::LeaseExpired, 1),
                b"expired" => {}
                other => panic!("{}: replaced {other:?}", m.at()),
            },
            Kind::Delivered => bump(&mut counters, Counter::Delivered, 1),
            Kind::Done => bump(&mut counters, Counter::Acked, 1),
            Kind::Retry => {
                bump(&mut counters, Counter::Retried, 1);
                match detail {
                    b"nack" => bump(&mut counters, Counter::Nacked, 1),
                    b"lease-expired" => bump(&mut counters, Counter::LeaseExpired, 1),
                    other => panic!("{}: retry {other:?}", m.at()),
                }
            }
            Kind::Dead => {
                bump(&mut counters, Counter::DeadLettered, 1);
                match detail {
                    b"nack" | b"permanent" => bump(&mut counters, Counter::Nacked, 1),
                    b"lease-expired" => bump(&mut counters, Counter::LeaseExpired, 1),
                    b"expired" => bump(&mut counters, Counter::Expired, 1),
                    other => panic!("{}: dead {other:?}", m.at()),
                }
            }
            Kind::Cancelled => bump(&mut counters, Counter::Cancelled, 1),
            Kind::Redriven => bump(&mut counters, Counter::Redriven, 1),
            Kind::Dropped => bump(&mut counters, Counter::Dropped, 1),
            Kind::Purged => {
                let n = std::str::from_utf8(detail)
                    .ok()
                    .and_then(|d| d.parse().ok());
                bump(&mut counters, Counter::Purged, n.expect("a purged count"));
            }
            Kind::Ready | Kind::Progress | Kind::Paused | Kind::Resumed => {}
        }
        assert_eq!(
            e.id().is_none(),
            matches!(e.kind, Kind::Purged | Kind::Paused | Kind::Resumed)
        );
    }
    // Throttles are no change of a message: not an event.
    counters.0[Counter::Throttled as usize] = q.counters().get(Counter::Throttled);
    assert_eq!(
        &counters,
        q.counters(),
        "{}: the counters the events tell",
        m.at()
    );
    m.from_events = Some(counters);
}
