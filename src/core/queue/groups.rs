//! Groups: the unit of fairness and of per-tenant limits.
//!
//! A due message of a group becomes ready only through its group's gate:
//! it takes one of the group's GROUPLIMIT places (held while it is ready,
//! in flight or delayed for a retry of its delivery), and goes out only
//! while the group is not paused and its GROUPRATE allows (ready messages
//! plus deliveries in the window stay within the rate, so a ready message
//! can always be delivered). A message the gate holds back waits in its
//! group's line, reported as delayed: first those holding a place (a
//! retry the rate or pause held back), then by due time, then ADD order.
//! The ready index then holds only messages that may go, so POP never
//! skips anything and a group over its limit holds back only its own.
//!
//! The gate opens again when a place frees (ACK, DONE, dead, cancel), on
//! RESUME GROUP, and when time passes (a pause's end, the rate's window
//! moving on): the timer wakes the group then (`wake_groups`, a phase of
//! the tick replayed by count on a replica, as the others are).
//!
//! ORDER FAIR keeps, instead of the ready index, each group's ready
//! messages in a line (messages without a group form one more group) and
//! a ring of the groups that have some: POP serves the group at the front
//! and puts it at the back. A group keeps its line's index, so POP and ACK
//! find the line without looking a name up; a group forgotten while the
//! ring holds its (empty) line and coming back before its turn takes that
//! place again.
//! The ring is not saved: a reload starts the turn from the groups' first
//! ready messages, in ready order. A replica replaying POP's claims
//! turns its ring the same way, so it stays in step with its master: POP
//! takes no more turns than there are ready messages, since a turn that
//! finds nothing drops groups from the ring and a replica has no such
//! turn to replay.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::hash::BuildHasher;

use hashbrown::{DefaultHashBuilder, HashTable};

use super::index::SortedIndex;
use super::journal::Kind;
use super::messages::Messages;
use super::{Event, Queue, Rare, ReadyKey, Slot, State, TimeKey, FOREVER};
use crate::core::flow::DeliveryLog;

/// A group's entry is kept small, since a queue may hold one per tenant:
/// 40 bytes, with a place holder and an empty line inline.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(super) struct Group {
    /// The messages holding one of the group's places, in the order they
    /// took them.
    pub holders: Holders,
    /// Of those, how many are ready (GROUPRATE's gate counts them).
    pub ready: u32,
    /// Its ORDER FAIR line (in the room `ready` leaves).
    pub line: LineRef,
    /// Due messages the gate holds back (see the module's doc for the
    /// order).
    pub waiting: Line,
    /// A pause and GROUPRATE's recent deliveries: most groups have none.
    pub flow: Option<Box<GroupFlow>>,
}

/// Holders a group keeps in one boxed array: the limits users set per
/// tenant are mostly small ("5 exports at once").
const FEW: usize = 8;

/// The messages holding a group's places: under the default GROUPLIMIT 1,
/// one, kept inline; up to [`FEW`] in one allocation; more in a vector.
#[derive(Default, Clone, Eq)]
pub(super) enum Holders {
    #[default]
    None,
    One(Slot),
    /// 2..=FEW holders, the first `len` of the array: one allocation
    /// where a box and a vector are two, and no regrowth on the way up.
    Few(u32, Box<[Slot; FEW]>),
    // Boxed: a pointer keeps the entry at 40 bytes; a Vec would be 24.
    #[allow(clippy::box_collection)]
    Many(Box<Vec<Slot>>),
}

/// The same holders in the same order, whichever form holds them (a
/// vector shrunk back to a few, or loaded as a few, is the same group).
impl PartialEq for Holders {
    fn eq(&self, other: &Holders) -> bool {
        self.as_slice() == other.as_slice()
    }
}

/// The holders, not the array's unused entries.
impl std::fmt::Debug for Holders {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.as_slice()).finish()
    }
}

impl Holders {
    pub fn as_slice(&self) -> &[Slot] {
        match self {
            Holders::None => &[],
            Holders::One(slot) => std::slice::from_ref(slot),
            Holders::Few(len, slots) => &slots[..*len as usize],
            Holders::Many(slots) => slots,
        }
    }

    pub fn len(&self) -> usize {
        self.as_slice().len()
    }

    pub fn is_empty(&self) -> bool {
        matches!(self, Holders::None)
    }

    pub fn first(&self) -> Option<Slot> {
        self.as_slice().first().copied()
    }

    pub fn iter(&self) -> impl Iterator<Item = Slot> + '_ {
        self.as_slice().iter().copied()
    }

    pub fn push(&mut self, slot: Slot) {
        *self = match std::mem::take(self) {
            Holders::None => Holders::One(slot),
            Holders::One(first) => {
                let mut slots = Box::new([0; FEW]);
                slots[..2].copy_from_slice(&[first, slot]);
                Holders::Few(2, slots)
            }
            Holders::Few(len, mut slots) if (len as usize) < FEW => {
                slots[len as usize] = slot;
                Holders::Few(len + 1, slots)
            }
            Holders::Few(_, slots) => {
                let mut many = Vec::with_capacity(2 * FEW);
                many.extend_from_slice(&slots[..]);
                many.push(slot);
                Holders::Many(Box::new(many))
            }
            Holders::Many(mut slots) => {
                slots.push(slot);
                Holders::Many(slots)
            }
        };
    }

    /// Takes `slot` out, keeping the others' order.
    pub fn remove(&mut self, slot: Slot) {
        match self {
            Holders::One(first) if *first == slot => *self = Holders::None,
            Holders::Few(len, slots) => {
                let n = *len as usize;
                if let Some(at) = slots[..n].iter().position(|&s| s == slot) {
                    slots.copy_within(at + 1..n, at);
                    *len -= 1;
                }
                if *len == 1 {
                    *self = Holders::One(slots[0]);
                }
            }
            Holders::Many(slots) => {
                if let Some(at) = slots.iter().position(|&s| s == slot) {
                    slots.remove(at);
                }
                match slots.len() {
                    0 => *self = Holders::None,
                    1 => *self = Holders::One(slots[0]),
                    _ => {}
                }
            }
            _ => {}
        }
    }

    /// Heap bytes (MEMORY USAGE).
    fn heap_bytes(&self) -> usize {
        use crate::core::heap::alloc_size;
        use std::mem::size_of;
        match self {
            Holders::Few(..) => alloc_size(size_of::<[Slot; FEW]>()),
            Holders::Many(slots) => {
                alloc_size(size_of::<Vec<Slot>>())
                    + alloc_size(slots.capacity() * size_of::<Slot>())
            }
            _ => 0,
        }
    }
}

/// A group's waiting line: most groups have none, so an empty one costs a
/// pointer.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
#[allow(clippy::box_collection)] // 8 bytes in the entry, not 24
pub(super) struct Line(Option<Box<BTreeSet<TimeKey>>>);

impl Line {
    pub fn is_empty(&self) -> bool {
        self.0.is_none()
    }

    pub fn len(&self) -> usize {
        self.0.as_deref().map_or(0, BTreeSet::len)
    }

    pub fn first(&self) -> Option<&TimeKey> {
        self.0.as_deref().and_then(BTreeSet::first)
    }

    pub fn contains(&self, key: &TimeKey) -> bool {
        self.0.as_deref().is_some_and(|line| line.contains(key))
    }

    pub fn iter(&self) -> impl Iterator<Item = &TimeKey> + '_ {
        self.0.as_deref().into_iter().flatten()
    }

    pub fn insert(&mut self, key: TimeKey) -> bool {
        self.0.get_or_insert_with(Box::default).insert(key)
    }

    pub fn remove(&mut self, key: &TimeKey) -> bool {
        let Some(line) = self.0.as_deref_mut() else {
            return false;
        };
        let removed = line.remove(key);
        if line.is_empty() {
            self.0 = None;
        }
        removed
    }
}

#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct GroupFlow {
    /// Paused until (`FOREVER`: until RESUME GROUP); `None`: not paused.
    pub paused_until: Option<u64>,
    /// Deliveries GROUPRATE's window still counts.
    pub log: DeliveryLog,
    /// When the timer looks at the group again (its entry in `wakes`).
    wake_at: Option<u64>,
}

impl GroupFlow {
    fn is_empty(&self) -> bool {
        self.paused_until.is_none() && self.log.is_empty()
    }
}

static NO_FLOW: GroupFlow = GroupFlow {
    paused_until: None,
    log: DeliveryLog::new(),
    wake_at: None,
};

impl Group {
    fn flow(&self) -> &GroupFlow {
        self.flow.as_deref().unwrap_or(&NO_FLOW)
    }

    fn is_unused(&self) -> bool {
        self.holders.is_empty()
            && self.waiting.is_empty()
            && self.flow.as_deref().is_none_or(GroupFlow::is_empty)
    }
}

/// What DQ.GROUPS shows of one group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupInfo<'a> {
    pub name: &'a [u8],
    pub waiting: u64,
    pub ready: u64,
    pub inflight: u64,
    /// `FOREVER` when paused until RESUME GROUP.
    pub paused_until: Option<u64>,
}

/// ORDER FAIR's turn (see the module's doc).
#[derive(Debug, Default, Clone)]
pub(super) struct Fair {
    /// The groups' lines, each named by its index ([`LineRef`]), which its
    /// group keeps (`Group::line`): POP finds a line without looking its
    /// group up by name.
    lines: Vec<FairLine>,
    /// Indexes of `lines` free for reuse.
    free: Vec<u32>,
    /// The messages without a group: one more line.
    ungrouped: FairLine,
    /// Lines in turn.
    ring: VecDeque<LineRef>,
    /// Lines the ring holds whose groups were forgotten, found by the name
    /// each keeps (`FairLine::orphan`): a group of that name coming back
    /// takes its line's place in the turn again, as if it had never left.
    /// Only looked up, never walked, so its order is nobody's concern.
    orphans: HashTable<LineRef>,
    hasher: DefaultHashBuilder,
    /// Ready messages the lines hold: under ORDER FAIR they are the ready
    /// index (see `Queue::ready`).
    count: usize,
}

/// A line of ORDER FAIR: an index into `Fair::lines`, or one of the two
/// values below.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct LineRef(u32);

impl LineRef {
    /// A group with no line (ORDER PRIORITY, or nothing ready yet).
    pub const NONE: LineRef = LineRef(u32::MAX);
    /// The messages without a group.
    const UNGROUPED: LineRef = LineRef(u32::MAX - 1);
}

impl Default for LineRef {
    fn default() -> LineRef {
        LineRef::NONE
    }
}

/// Keys a line's run holds at most: eight times the ready index's, so
/// that a group of up to 1024 ready messages keeps them in one buffer.
/// POP reads the first key of a different line each time, which then is
/// in no cache: behind the line's runs (a box, a tree node, the run) it
/// cost three more cache misses a message than the one ready index
/// ORDER PRIORITY reads from the front.
const LINE_RUN: usize = 1024;

#[derive(Debug, Default, Clone)]
struct FairLine {
    /// Runs of sorted keys, as the ready index: a group's ready messages
    /// mostly arrive in order and leave from the front.
    ready: SortedIndex<ReadyKey, LINE_RUN>,
    /// In the ring (maybe with no ready message left: the ring drops it
    /// when it comes round).
    in_ring: bool,
    /// Its group's name, when the group was forgotten while the ring held
    /// the line: the ring frees it when it drops it (see `orphans`).
    orphan: Option<Box<[u8]>>,
}

/// The key of a waiting message in its group's line: those holding a
/// place first.
pub(super) fn line_key(holds_group: bool, due_at: u64, seq: u64, slot: Slot) -> TimeKey {
    (if holds_group { 0 } else { due_at }, seq, slot)
}

impl Fair {
    /// The line, if it exists.
    fn get_line(&self, line: LineRef) -> Option<&FairLine> {
        match line {
            LineRef::UNGROUPED => Some(&self.ungrouped),
            LineRef(at) => self.lines.get(at as usize),
        }
    }

    fn line(&self, line: LineRef) -> &FairLine {
        match self.get_line(line) {
            Some(l) => l,
            None => unreachable!("a group or the ring names a line that is gone"),
        }
    }

    /// Whether `line` holds `key`; false for a line that does not exist
    /// (`check`, which must not panic on a broken invariant).
    fn holds(&self, line: LineRef, key: &ReadyKey) -> bool {
        self.get_line(line).is_some_and(|l| l.ready.contains(key))
    }

    fn line_mut(&mut self, line: LineRef) -> &mut FairLine {
        match line {
            LineRef::UNGROUPED => &mut self.ungrouped,
            LineRef(at) => &mut self.lines[at as usize],
        }
    }

    /// The line of a group that has none: the one it left in the ring, if
    /// it was forgotten since, or a new, empty one.
    fn line_for(&mut self, name: &[u8]) -> LineRef {
        if !self.orphans.is_empty() {
            let hash = self.hasher.hash_one(name);
            let lines = &self.lines;
            let found = self.orphans.find_entry(hash, |&l| {
                lines[l.0 as usize].orphan.as_deref() == Some(name)
            });
            if let Ok(entry) = found {
                let (line, _) = entry.remove();
                self.line_mut(line).orphan = None;
                self.let_orphans_go();
                return line;
            }
        }
        self.new_line()
    }

    /// An emptied table of orphans gives its room back: a hash table does
    /// not shrink as entries leave, and a burst of forgotten groups would
    /// keep it at its largest for as long as ORDER FAIR stays on.
    fn let_orphans_go(&mut self) {
        if self.orphans.is_empty() {
            self.orphans = HashTable::new();
        }
    }

    fn new_line(&mut self) -> LineRef {
        match self.free.pop() {
            Some(at) => LineRef(at),
            None => {
                self.lines.push(FairLine::default());
                LineRef(self.lines.len() as u32 - 1)
            }
        }
    }

    fn free_line(&mut self, line: LineRef) {
        if line != LineRef::UNGROUPED && line != LineRef::NONE {
            self.lines[line.0 as usize] = FairLine::default();
            self.free.push(line.0);
        }
    }

    /// The group `name` of this line is forgotten (it has nothing ready):
    /// the line goes now, or when the ring drops it.
    fn release(&mut self, line: LineRef, name: impl FnOnce() -> Box<[u8]>) {
        if line == LineRef::NONE {
            return;
        }
        if self.line(line).in_ring {
            let name = name();
            let hash = self.hasher.hash_one(&name[..]);
            let (lines, hasher) = (&self.lines, &self.hasher);
            self.orphans.insert_unique(hash, line, |&l| {
                let name = lines[l.0 as usize].orphan.as_deref();
                hasher.hash_one(name.expect("an orphan line keeps its name"))
            });
            self.line_mut(line).orphan = Some(name);
        } else {
            self.free_line(line);
        }
    }

    fn add(&mut self, line: LineRef, key: ReadyKey) {
        let l = self.line_mut(line);
        let added = l.ready.insert(key);
        if !l.in_ring {
            l.in_ring = true;
            self.ring.push_back(line);
        }
        self.count += usize::from(added);
    }

    /// Takes a key out of a line; true when the line is left empty and out
    /// of the ring (its group may let it go).
    fn remove(&mut self, line: LineRef, key: &ReadyKey) -> bool {
        let l = self.line_mut(line);
        let removed = l.ready.remove(key);
        let spent = l.ready.len() == 0 && !l.in_ring;
        self.count -= usize::from(removed);
        spent
    }

    /// Takes the line at the front out of the ring: it has nothing ready.
    fn drop_front(&mut self) {
        if let Some(line) = self.ring.pop_front() {
            let l = self.line_mut(line);
            l.in_ring = false;
            if let Some(name) = l.orphan.take() {
                let hash = self.hasher.hash_one(&name[..]);
                if let Ok(entry) = self.orphans.find_entry(hash, |&l| l == line) {
                    entry.remove();
                }
                self.let_orphans_go();
                self.free_line(line);
            }
        }
    }

    /// Drops the lines at the front that have nothing ready any more.
    fn drop_spent(&mut self) {
        while let Some(&front) = self.ring.front() {
            if self.line(front).ready.len() > 0 {
                return;
            }
            self.drop_front();
        }
    }

    /// Takes the next message in turn out of its line, which goes to the
    /// back of the ring (and so stays there, even if left empty).
    fn take_next(&mut self) -> Option<ReadyKey> {
        loop {
            let front = *self.ring.front()?;
            if let Some(key) = self.line_mut(front).ready.pop_first() {
                self.count -= 1;
                // rotate_left(1), without its general shuffle.
                self.ring.pop_front();
                self.ring.push_back(front);
                return Some(key);
            }
            self.drop_front();
        }
    }

    /// A replayed POP took a message of `line`: the turn moves on as the
    /// master's did.
    fn turn(&mut self, line: LineRef) {
        self.drop_spent();
        if self.ring.front() == Some(&line) {
            self.ring.rotate_left(1);
        }
    }

    /// The ring, the lines and the orphans agree (`check_groups`); the
    /// groups' own lines are `group_lines`.
    fn check(&self, group_lines: impl Iterator<Item = LineRef>) -> std::result::Result<(), String> {
        let mut seen = vec![false; self.lines.len() + 1];
        for &line in &self.ring {
            let at = match line {
                LineRef::UNGROUPED => self.lines.len(),
                LineRef(at) if (at as usize) < self.lines.len() => at as usize,
                _ => return Err("ORDER FAIR's ring names no line".into()),
            };
            if std::mem::replace(&mut seen[at], true) || !self.line(line).in_ring {
                return Err("ORDER FAIR's ring and its lines disagree".into());
            }
        }
        let in_ring =
            self.lines.iter().filter(|l| l.in_ring).count() + usize::from(self.ungrouped.in_ring);
        if in_ring != self.ring.len() {
            return Err("an ORDER FAIR line says it is in the ring and is not".into());
        }
        let mut orphans = 0;
        for (at, l) in self.lines.iter().enumerate() {
            let Some(name) = l.orphan.as_deref() else {
                continue;
            };
            orphans += 1;
            let hash = self.hasher.hash_one(name);
            let found = self.orphans.find(hash, |&o| o.0 as usize == at).is_some();
            if !l.in_ring || !found {
                return Err("an ORDER FAIR orphan line is lost".into());
            }
        }
        if orphans != self.orphans.len() {
            return Err("ORDER FAIR keeps stray orphans".into());
        }
        for line in group_lines.filter(|&l| l != LineRef::NONE) {
            if self
                .lines
                .get(line.0 as usize)
                .is_none_or(|l| l.orphan.is_some())
            {
                return Err("a group's ORDER FAIR line is missing or an orphan's".into());
            }
        }
        for line in self.all_lines() {
            line.ready.check()?;
        }
        if self.all_lines().map(|l| l.ready.len()).sum::<usize>() != self.count {
            return Err("ORDER FAIR's count of ready messages is off".into());
        }
        Ok(())
    }

    /// Ready messages the lines hold.
    pub(super) fn len(&self) -> usize {
        self.count
    }

    /// The lines, the ungrouped one first (in no particular order).
    fn all_lines(&self) -> impl Iterator<Item = &FairLine> + '_ {
        std::iter::once(&self.ungrouped).chain(&self.lines)
    }

    /// Every ready message, in the order POPs would take them: the ring's
    /// lines in turn, each giving its next message, a line leaving the
    /// turn once it has none. Lazy: the first `n` cost `n` steps and one
    /// more for each spent line the ring still holds before them (the
    /// ring drops a spent line when its turn comes), however many lines
    /// there are; it stops at the last ready message.
    pub(super) fn iter_turns(&self) -> impl Iterator<Item = &ReadyKey> + '_ {
        let mut ring = self.ring.iter();
        // Lines already seen this far, with what they have left, in turn.
        let mut later = VecDeque::new();
        let mut left = self.count;
        std::iter::from_fn(move || loop {
            if left == 0 {
                return None;
            }
            let mut keys = match ring.next() {
                Some(&line) => self.line(line).ready.iter(),
                None => later.pop_front()?,
            };
            if let Some(key) = keys.next() {
                later.push_back(keys);
                left -= 1;
                return Some(key);
            }
        })
    }

    /// Every ready message, in ready order (a change of ORDER, a PURGE).
    pub(super) fn sorted_keys(&self) -> Vec<ReadyKey> {
        let mut keys: Vec<ReadyKey> = self
            .all_lines()
            .flat_map(|l| l.ready.iter().copied())
            .collect();
        keys.sort_unstable();
        keys
    }

    /// The first ready message of each priority, highest first, at most
    /// `max` of them: each line's, the earliest of each priority kept.
    /// Only the ring's lines hold ready messages.
    pub(super) fn priority_heads(&self, max: usize) -> Vec<ReadyKey> {
        let mut heads: BTreeMap<Reverse<i32>, ReadyKey> = BTreeMap::new();
        for line in self.ring.iter().map(|&l| self.line(l)) {
            for key in super::priority_heads(&line.ready).take(max) {
                heads
                    .entry(key.0)
                    .and_modify(|head| *head = (*head).min(*key))
                    .or_insert(*key);
            }
        }
        heads.into_values().take(max).collect()
    }

    /// Heap bytes (MEMORY USAGE).
    fn heap_bytes(&self) -> usize {
        use crate::core::heap::alloc_size;
        use std::mem::size_of;
        alloc_size(size_of::<Fair>())
            + alloc_size(self.lines.capacity() * size_of::<FairLine>())
            + self
                .lines
                .iter()
                .map(|l| l.ready.heap_bytes())
                .sum::<usize>()
            + self.ungrouped.ready.heap_bytes()
            + alloc_size(self.free.capacity() * size_of::<u32>())
            + alloc_size(self.ring.capacity() * size_of::<LineRef>())
            + alloc_size(self.orphans.allocation_size())
            + self
                .lines
                .iter()
                .filter_map(|l| l.orphan.as_deref())
                .map(|name| alloc_size(name.len()))
                .sum::<usize>()
    }
}

/// Forgets a group nothing keeps, with its ORDER FAIR line.
fn forget_group(rare: &mut Rare, records: &Messages, name: &[u8]) {
    if let Some((group, kept)) = rare.groups.remove(name, records) {
        if let Some(fair) = rare.fair.as_deref_mut() {
            fair.release(group.line, || kept.unwrap_or_else(|| name.into()));
        }
    }
}

impl Queue {
    /// Makes the message ready if its group lets it: it takes a place if
    /// it holds none (and nobody waits before it), and the gate must be
    /// open. True when it may be ready.
    pub(super) fn admit(&mut self, slot: Slot, now: u64) -> bool {
        let record = self.messages.at(slot);
        let Some(name) = record.group() else {
            return true;
        };
        let (limit, group_rate) = (
            self.config().group_limit() as usize,
            self.config().group_rate,
        );
        let holds = record.holds_group;
        let rare = Rare::make(&mut self.rare);
        let groups = &mut rare.groups;
        if holds {
            // A retry of a lone group's one message: its gate, without
            // giving the group an entry.
            if let Some(group) = groups.lone_of_holder(slot) {
                return gate_open(&group, now, group_rate);
            }
        }
        let at = match groups.entry(name, &self.messages) {
            Some(at) => at,
            // The first message of a group, where ORDER FAIR does not need
            // its line, makes a lone group (see `group_table.rs`), if a
            // group with nothing in it lets it in.
            None if !holds
                && rare.fair.is_none()
                && gate_open(&Group::default(), now, group_rate)
                && limit > 0
                && groups.hold_lone(name, slot, &self.messages) =>
            {
                self.messages.at_mut(slot).holds_group = true;
                return true;
            }
            None => groups.index_of(name, &self.messages),
        };
        let group = groups.at_mut(at);
        let open = gate_open(group, now, group_rate);
        if holds {
            return open;
        }
        if !open || group.holders.len() >= limit || !group.waiting.is_empty() {
            return false;
        }
        groups.hold(at, slot);
        self.messages.at_mut(slot).holds_group = true;
        true
    }

    /// The message gives up the place it holds: false when it held none.
    /// (Its group's list of holders is the caller's to update.)
    #[inline]
    fn vacate(&mut self, slot: Slot) -> bool {
        let record = self.messages.at_mut(slot);
        std::mem::replace(&mut record.holds_group, false)
    }

    /// Frees the place the message holds, if any; returns its group, for
    /// the caller to hand on.
    pub(super) fn free_group(&mut self, slot: Slot) -> Option<Box<[u8]>> {
        if !self.vacate(slot) {
            return None;
        }
        let name: Box<[u8]> = self.messages.at(slot).group()?.into();
        if let Some(group) =
            Rare::make(&mut self.rare)
                .groups
                .of_holder(slot, &name, &self.messages)
        {
            group.holders.remove(slot);
        }
        Some(name)
    }

    /// The message leaves its group: its place goes to whoever waits.
    /// (`free_group` then `hand_on`, looking the group up once when
    /// nobody waits, as in most groups most of the time.)
    #[inline]
    pub(super) fn release_group(&mut self, slot: Slot, now: u64) {
        // Most messages hold no place: nothing more to read for them.
        if self.vacate(slot) {
            self.release_place(slot, now);
        }
    }

    /// `release_group` of a message that held a place.
    fn release_place(&mut self, slot: Slot, now: u64) {
        let group_rate = self.config().group_rate;
        let Some(name) = self.messages.at(slot).group() else {
            return;
        };
        let Some(rare) = self.rare.as_deref_mut() else {
            return;
        };
        if rare.groups.holds_lone(slot) {
            // Its only message leaves a group of one: nothing else keeps it.
            forget_group(rare, &self.messages, name);
            Rare::tidy(&mut self.rare);
            return;
        }
        let Some(group) = rare.groups.of_holder(slot, name, &self.messages) else {
            return;
        };
        group.holders.remove(slot);
        if group.waiting.is_empty() {
            if settle(group, &mut rare.wakes, name, now, group_rate) {
                forget_group(rare, &self.messages, name);
                Rare::tidy(&mut self.rare);
            }
            return;
        }
        let name: Box<[u8]> = name.into();
        self.hand_on(&name, now);
    }

    /// Lets the group's waiting messages out, first in line first, while
    /// the gate and the places allow; then forgets the group if nothing
    /// keeps it, or sets when the timer looks at it again.
    pub(super) fn hand_on(&mut self, name: &[u8], now: u64) {
        let limit = self.config().group_limit() as usize;
        let group_rate = self.config().group_rate;
        loop {
            let Some(rare) = self.rare.as_deref_mut() else {
                return;
            };
            let Some(at) = rare.groups.entry(name, &self.messages) else {
                return;
            };
            let group = rare.groups.at_mut(at);
            let next = group.waiting.first().map(|&(_, _, next)| next);
            let next = next.map(|next| (next, self.messages.at(next).holds_group));
            let Some((next, holds)) = next.filter(|&(_, holds)| {
                gate_open(group, now, group_rate) && (holds || group.holders.len() < limit)
            }) else {
                if settle(group, &mut rare.wakes, name, now, group_rate) {
                    forget_group(rare, &self.messages, name);
                    Rare::tidy(&mut self.rare);
                }
                return;
            };
            if !holds {
                rare.groups.hold(at, next);
            }
            self.unindex(next);
            if !holds {
                self.messages.at_mut(next).holds_group = true;
            }
            // It was due when it began to wait, whatever the clock says now
            // (a promoted replica's clock may be behind).
            let due_at = self.messages.at(next).due_at;
            if self.place(next, now.max(due_at)).state == State::Ready {
                self.note(now, Kind::Ready, next, None);
            }
        }
    }

    /// Forgets a group nothing keeps, or moves its wake-up (see `settle`).
    fn settle_group(&mut self, name: &[u8], now: u64) {
        let group_rate = self.config().group_rate;
        let Some(rare) = self.rare.as_deref_mut() else {
            return;
        };
        let Some(group) = rare.groups.get_mut(name, &self.messages) else {
            return;
        };
        if settle(group, &mut rare.wakes, name, now, group_rate) {
            forget_group(rare, &self.messages, name);
            Rare::tidy(&mut self.rare);
        }
    }

    /// Looks again at up to `limit` groups whose wake-up time has come (a
    /// pause ended, the rate's window moved on). Returns them, in order.
    pub fn wake_groups(&mut self, now: u64, limit: usize) -> Vec<Box<[u8]>> {
        let mut woken = Vec::new();
        while woken.len() < limit {
            let Some((at, name)) = Rare::of(&self.rare).wakes.first().cloned() else {
                break;
            };
            if at > now {
                break;
            }
            self.wake_group(&name, now);
            woken.push(name);
        }
        woken
    }

    /// Wakes the groups a master's tick woke, in its order (the replay).
    pub fn wake_named_groups(&mut self, now: u64, names: &[Box<[u8]>]) -> Vec<Box<[u8]>> {
        for name in names {
            self.wake_group(name, now);
        }
        names.to_vec()
    }

    fn wake_group(&mut self, name: &[u8], now: u64) {
        let Some(rare) = self.rare.as_deref_mut() else {
            return;
        };
        if let Some(group) = rare.groups.get_mut(name, &self.messages) {
            set_wake(&mut rare.wakes, name, group, None);
        }
        self.hand_on(name, now);
    }

    /// A delivery of a grouped message: GROUPRATE's log counts it.
    pub(super) fn log_group_delivery(&mut self, slot: Slot, now: u64) {
        let Some(rate) = self.config().group_rate else {
            return;
        };
        let Some(name) = self.messages.at(slot).group() else {
            return;
        };
        let Some(group) = self
            .rare
            .as_deref_mut()
            .and_then(|r| r.groups.of_holder(slot, name, &self.messages))
        else {
            return;
        };
        let flow = group.flow.get_or_insert_with(Box::default);
        flow.log.prune(now, &rate);
        flow.log.record(now, 1);
        let waits = !group.waiting.is_empty() && flow.wake_at.is_none();
        if waits {
            let name: Box<[u8]> = name.into();
            self.settle_group(&name, now);
        }
    }

    /// Keeps a group's count of ready messages and ORDER FAIR's lines as a
    /// message enters (`+1`) or leaves (`-1`) the ready index.
    pub(super) fn count_ready(&mut self, slot: Slot, key: &ReadyKey, entering: bool) {
        let name = self.messages.at(slot).group();
        let Some(rare) = self.rare.as_deref_mut() else {
            return;
        };
        let fair = rare.fair.as_deref_mut();
        match (name, fair) {
            (Some(name), fair) => {
                // A lone group counts its holder ready by its mark.
                if fair.is_none() && rare.groups.mark_lone_ready(slot, entering) {
                    return;
                }
                // A ready message holds a place: its group exists.
                let Some(group) = rare.groups.of_holder(slot, name, &self.messages) else {
                    return;
                };
                if entering {
                    group.ready += 1;
                } else {
                    group.ready -= 1;
                }
                let Some(fair) = fair else {
                    return;
                };
                if entering {
                    if group.line == LineRef::NONE {
                        group.line = fair.line_for(name);
                    }
                    fair.add(group.line, *key);
                } else if group.line != LineRef::NONE && fair.remove(group.line, key) {
                    fair.free_line(group.line);
                    group.line = LineRef::NONE;
                }
            }
            (None, Some(fair)) => {
                if entering {
                    fair.add(LineRef::UNGROUPED, *key);
                } else {
                    fair.remove(LineRef::UNGROUPED, key);
                }
            }
            (None, None) => {}
        }
    }

    /// Takes the ready message POP delivers next out of the ready index
    /// or ORDER FAIR's lines: the first in ready order (one step at the
    /// index's front, where a look then a removal by key searched twice),
    /// or under ORDER FAIR the next group's first. The caller leases it.
    pub(super) fn take_next_ready(&mut self) -> Option<Slot> {
        let Some(fair) = self.rare.as_deref_mut().and_then(|r| r.fair.as_deref_mut()) else {
            let key = self.ready.pop_first()?;
            self.left_ready(&key);
            return Some(key.3);
        };
        // The line gave its key up already: only the group's count is left
        // to update.
        let key = fair.take_next()?;
        let slot = key.3;
        if let Some(name) = self.messages.at(slot).group() {
            if let Some(group) = self
                .rare
                .as_deref_mut()
                .and_then(|r| r.groups.of_holder(slot, name, &self.messages))
            {
                group.ready -= 1;
            }
        }
        Some(slot)
    }

    /// A message entered the ready index: its group counts it in, and
    /// ORDER FAIR's line takes it.
    pub(super) fn entered_ready(&mut self, key: &ReadyKey) {
        if self.ready_counted(key.3) {
            self.count_ready(key.3, key, true);
        }
    }

    /// A message left the ready index: its group counts it out, and ORDER
    /// FAIR's line lets it go.
    pub(super) fn left_ready(&mut self, key: &ReadyKey) {
        if self.ready_counted(key.3) {
            self.count_ready(key.3, key, false);
        }
    }

    /// ORDER FAIR's lines, when the queue keeps them (and then no ready
    /// index beside them).
    pub(super) fn fair(&self) -> Option<&Fair> {
        self.rare.as_deref().and_then(|r| r.fair.as_deref())
    }

    /// Ready messages: in the ready index, or ORDER FAIR's lines.
    pub(super) fn ready_len(&self) -> usize {
        self.fair().map_or(self.ready.len(), Fair::len)
    }

    /// Whether the ready message at `slot` is where it belongs: in the
    /// ready index, or its group's ORDER FAIR line (`check`).
    pub(super) fn ready_holds(&self, slot: Slot, key: &ReadyKey) -> bool {
        let Some(fair) = self.fair() else {
            return self.ready.contains(key);
        };
        let line = match self.messages.at(slot).group() {
            None => LineRef::UNGROUPED,
            Some(name) => match Rare::of(&self.rare).groups.get(name, &self.messages) {
                Some(group) if group.line != LineRef::NONE => group.line,
                _ => return false,
            },
        };
        fair.holds(line, key)
    }

    /// Whether anything but the ready index counts the message while it is
    /// ready (its group, ORDER FAIR's lines): most queues have neither.
    fn ready_counted(&self, slot: Slot) -> bool {
        self.messages.at(slot).group().is_some()
            || self.rare.as_deref().is_some_and(|r| r.fair.is_some())
    }

    /// A replayed POP takes the message at `slot`: ORDER FAIR's turn moves
    /// as the master's did.
    pub(super) fn turn_fair(&mut self, slot: Slot) {
        let name = self.messages.at(slot).group();
        let Some(rare) = self.rare.as_deref_mut() else {
            return;
        };
        let line = match name {
            None => LineRef::UNGROUPED,
            Some(_) => rare.groups.holder_line(slot),
        };
        if let Some(fair) = rare.fair.as_deref_mut() {
            fair.turn(line);
        }
    }

    /// Builds ORDER FAIR's lines from the ready messages (ORDER FAIR set,
    /// or a load), or puts them back in the ready index (ORDER PRIORITY).
    pub(super) fn rebuild_fair(&mut self) {
        let on = self.config().fair;
        let fair = self.rare.as_deref_mut().and_then(|r| r.fair.take());
        if let Some(rare) = self.rare.as_deref_mut() {
            rare.groups
                .for_each_entry_mut(|_, group| group.line = LineRef::NONE);
        }
        if fair.is_none() && !on {
            // ORDER PRIORITY stays: the ready index is as it should be.
            return;
        }
        // Every ready message, in ready order, out of wherever it is kept.
        let keys: Vec<ReadyKey> = match fair {
            Some(fair) => fair.sorted_keys(),
            None => std::mem::take(&mut self.ready).iter().copied().collect(),
        };
        if !on {
            // In order: each one past the last, no search.
            for key in keys {
                self.ready.insert(key);
            }
            return;
        }
        let rare = Rare::make(&mut self.rare);
        let mut fair = Fair::default();
        for key in keys {
            let line = match self.messages.at(key.3).group() {
                None => LineRef::UNGROUPED,
                Some(name) => match rare.groups.get_mut(name, &self.messages) {
                    Some(group) => {
                        if group.line == LineRef::NONE {
                            group.line = fair.new_line();
                        }
                        group.line
                    }
                    // A ready message holds a place: its group exists
                    // (`check_groups` would say otherwise).
                    None => continue,
                },
            };
            fair.add(line, key);
        }
        rare.fair = Some(Box::new(fair));
    }

    /// GROUPLIMIT, GROUPRATE or ORDER changed: every group's gate is
    /// looked at again (what the new limits no longer allow goes back to
    /// its line, what they now allow comes out), then ORDER FAIR's turn
    /// starts again from the ready order.
    pub(super) fn regroup(&mut self, now: u64) {
        let names: Vec<Box<[u8]>> = Rare::of(&self.rare)
            .groups
            .names(&self.messages)
            .map(Box::from)
            .collect();
        for name in names {
            if self.config().group_rate.is_none() {
                if let Some(flow) = Rare::make(&mut self.rare)
                    .groups
                    .get_mut(&name, &self.messages)
                    .and_then(|g| g.flow.as_deref_mut())
                {
                    flow.log = DeliveryLog::default();
                }
            }
            self.hold_back_excess(&name, now);
            self.hand_on(&name, now);
        }
        self.rebuild_fair();
        self.make_groups_lone();
    }

    /// Groups of one that got an entry go back to lone (see
    /// `group_table.rs`): after a load, or a change of limits that looked
    /// at every group.
    fn make_groups_lone(&mut self) {
        if let Some(rare) = self.rare.as_deref_mut() {
            rare.groups.make_lone();
        }
    }

    /// After GROUPLIMIT or GROUPRATE was lowered: the group's ready
    /// messages beyond what the new limits allow go back to its line, the
    /// last in ready order first — giving up their places when over
    /// GROUPLIMIT, keeping them when over GROUPRATE. Those in flight finish.
    fn hold_back_excess(&mut self, name: &[u8], now: u64) {
        let (limit, group_rate) = (self.config().group_limit(), self.config().group_rate);
        loop {
            let Some(group) = Rare::of(&self.rare).groups.get(name, &self.messages) else {
                return;
            };
            let over_limit = group.holders.len() > limit as usize;
            let over_rate = group_rate.is_some_and(|rate| {
                u64::from(group.ready) > group.flow().log.allowance(now, &rate)
            });
            if !over_limit && !over_rate {
                return;
            }
            let last = group
                .holders
                .iter()
                .filter(|&s| self.messages.at(s).state == State::Ready)
                .max_by_key(|&s| {
                    let r = self.messages.at(s);
                    (Reverse(r.priority), r.due_at, r.seq)
                });
            let Some(slot) = last else {
                return;
            };
            self.send_back(slot, over_limit);
        }
    }

    /// A ready message goes back to its group's line, giving up its place
    /// (GROUPLIMIT lowered) or keeping it (a group pause, GROUPRATE
    /// lowered).
    fn send_back(&mut self, slot: Slot, give_up_place: bool) {
        self.unindex(slot);
        if give_up_place {
            self.free_group(slot);
        }
        self.messages.at_mut(slot).state = State::Waiting;
        self.index(slot);
    }

    /// Pauses one group until `until` (`FOREVER`: until RESUME GROUP): its
    /// ready messages go back to its line, holding their places.
    pub fn pause_group(&mut self, now: u64, name: &[u8], until: u64) {
        let rare = Rare::make(&mut self.rare);
        let group = rare.groups.get_or_default(name, &self.messages);
        group.flow.get_or_insert_with(Box::default).paused_until = Some(until);
        let ready: Vec<Slot> = group
            .holders
            .iter()
            .filter(|&slot| self.messages.at(slot).state == State::Ready)
            .collect();
        for slot in ready {
            self.send_back(slot, false);
        }
        self.settle_group(name, now);
        self.note_queue(now, Kind::Paused, Some(name));
        self.events.add(Event::Pause);
    }

    /// Ends one group's pause: whether it was paused at `now`, and
    /// whether anything changed (a pause whose time had passed is
    /// forgotten too).
    pub fn resume_group(&mut self, now: u64, name: &[u8]) -> (bool, bool) {
        let Some(flow) = self
            .rare
            .as_deref_mut()
            .and_then(|r| r.groups.get_mut(name, &self.messages))
            .and_then(|g| g.flow.as_deref_mut())
        else {
            return (false, false);
        };
        let was = flow.paused_until.is_some_and(|until| now < until);
        let changed = flow.paused_until.take().is_some();
        if changed {
            // Not otherwise: what is not propagated must change nothing.
            self.hand_on(name, now);
        }
        if was {
            self.note_queue(now, Kind::Resumed, Some(name));
            self.events.add(Event::Resume);
        }
        (was, changed)
    }

    /// Puts back a group's stored pause and rate log (the codec); false
    /// when the group has one already.
    pub(super) fn restore_group_flow(
        &mut self,
        name: &[u8],
        paused_until: Option<u64>,
        log: DeliveryLog,
    ) -> bool {
        let group = Rare::make(&mut self.rare)
            .groups
            .get_or_default(name, &self.messages);
        if group.flow.is_some() {
            return false;
        }
        group.flow = Some(Box::new(GroupFlow {
            paused_until,
            log,
            wake_at: None,
        }));
        true
    }

    /// A loaded queue's groups, indexed: each one's wake-up, and ORDER
    /// FAIR's turn from the ready order. (Nothing is handed on: a loaded
    /// value is as it was saved, and the timer wakes the groups whose
    /// time has come.)
    pub(super) fn settle_loaded_groups(&mut self) {
        let group_rate = self.config().group_rate;
        if let Some(rare) = self.rare.as_deref_mut() {
            let wakes = &mut rare.wakes;
            rare.groups.for_each_entry_mut(|name, group| {
                let Some(flow) = group.flow.as_deref() else {
                    return;
                };
                // The earliest time anything could change; the timer looks
                // then, and again as the group needs.
                let pause_end = flow.paused_until.filter(|&u| u != FOREVER);
                let log_end = group_rate.and_then(|rate| {
                    flow.log
                        .entries()
                        .next()
                        .map(|(at, _)| at.saturating_add(rate.window_ms))
                });
                let wake = pause_end.into_iter().chain(log_end).min();
                set_wake(wakes, name, group, wake);
            });
        }
        self.rebuild_fair();
        self.make_groups_lone();
    }

    /// ORDER FAIR's ring as group names, front first (`None`: the
    /// ungrouped line; an orphan line shows its old name), for the model's
    /// trace.
    #[cfg(test)]
    pub(super) fn fair_ring(&self) -> Vec<(Option<Vec<u8>>, usize)> {
        let rare = Rare::of(&self.rare);
        let Some(fair) = rare.fair.as_deref() else {
            return Vec::new();
        };
        fair.ring
            .iter()
            .map(|&line| {
                let ready = fair.line(line).ready.len();
                if line == LineRef::UNGROUPED {
                    return (None, ready);
                }
                let name = rare
                    .groups
                    .iter(&self.messages)
                    .find(|(_, g)| g.line == line)
                    .map(|(n, _)| n.to_vec())
                    .or_else(|| fair.line(line).orphan.as_deref().map(<[u8]>::to_vec));
                (name, ready)
            })
            .collect()
    }

    /// Each group's stored pause and rate log (the codec), by name.
    pub fn group_flows(&self) -> impl Iterator<Item = (&[u8], &GroupFlow)> + '_ {
        Rare::of(&self.rare)
            .groups
            .with_entries()
            .filter_map(|(name, g)| {
                g.flow
                    .as_deref()
                    .filter(|f| !f.is_empty())
                    .map(|f| (name, f))
            })
    }

    /// Heap bytes of the groups (MEMORY USAGE): the table of groups (see
    /// `GroupTable::heap_bytes`), each group's holders and flow; the
    /// wake-ups; ORDER FAIR's lines.
    pub(super) fn groups_heap_bytes(&self) -> usize {
        use crate::core::heap::alloc_size;
        use std::mem::size_of;
        let rare = Rare::of(&self.rare);
        let groups: usize = rare.groups.heap_bytes()
            + rare
                .groups
                .values()
                .map(|g| {
                    g.holders.heap_bytes()
                        + if g.waiting.is_empty() {
                            0
                        } else {
                            // The line's own box; its keys are counted with
                            // the other indexes.
                            alloc_size(size_of::<BTreeSet<TimeKey>>())
                        }
                        + g.flow.as_deref().map_or(0, |f| {
                            alloc_size(size_of::<GroupFlow>()) + f.log.heap_bytes()
                        })
                })
                .sum::<usize>();
        let wakes: usize = rare
            .wakes
            .iter()
            .map(|(_, name)| size_of::<(u64, Box<[u8]>)>() * 3 / 2 + alloc_size(name.len()))
            .sum();
        let fair = rare.fair.as_deref().map_or(0, Fair::heap_bytes);
        groups + wakes + fair
    }

    /// How many groups exist now (DQ.STATS).
    pub fn group_count(&self) -> usize {
        Rare::of(&self.rare).groups.len()
    }

    /// Groups from `from` on (by name), at most `count` looked at, those
    /// `keep` accepts; and the name to go on from, if any is left.
    pub fn groups_from(
        &self,
        from: &[u8],
        count: usize,
        mut keep: impl FnMut(&[u8]) -> bool,
    ) -> (Vec<GroupInfo<'_>>, Option<&[u8]>) {
        let mut range = Rare::of(&self.rare).groups.iter_from(from, &self.messages);
        let mut found = Vec::new();
        for (name, group) in range.by_ref().take(count.max(1)) {
            if !keep(name) {
                continue;
            }
            let inflight = group
                .holders
                .iter()
                .filter(|&s| self.messages.at(s).state == State::Inflight)
                .count();
            let paused = group.flow().paused_until;
            found.push(GroupInfo {
                name,
                waiting: group.waiting.len() as u64,
                ready: u64::from(group.ready),
                inflight: inflight as u64,
                paused_until: paused,
            });
        }
        (found, range.next().map(|(name, _)| name))
    }

    /// The earliest message holding `group`'s first place, if any (DQ.GET's
    /// `waiting-for`).
    pub fn group_holder(&self, group: &[u8]) -> Option<&super::Record> {
        let slot = Rare::of(&self.rare)
            .groups
            .get(group, &self.messages)?
            .holders
            .first()?;
        Some(self.messages.at(slot))
    }

    /// Checks the groups against the records (see `Queue::check`).
    pub(super) fn check_groups(&self) -> std::result::Result<(), String> {
        use crate::core::error::printable;
        let rare = Rare::of(&self.rare);
        rare.groups.check(&self.messages)?;
        let mut holders = 0;
        for (name, group) in rare.groups.iter(&self.messages) {
            let fail = |what: &str| Err(format!("group '{}' {what}", printable(name)));
            if group.is_unused() {
                return fail("is kept with nothing in it");
            }
            let mut ready = 0;
            for slot in group.holders.iter() {
                let Some(record) = self.messages.get(slot) else {
                    return fail("names a holder that is gone");
                };
                if !record.holds_group || record.group() != Some(name) {
                    return fail("names a stray holder");
                }
                if !rare.groups.holder_matches(slot, name, &self.messages) {
                    return fail("is not its holder's group in the table");
                }
                ready += u32::from(record.state == State::Ready);
            }
            if ready != group.ready {
                return fail("miscounts its ready messages");
            }
            holders += group.holders.len();
            if let Some(at) = group.flow().wake_at {
                if !rare.wakes.contains(&(at, name.into())) {
                    return fail("lacks its wake-up");
                }
            }
        }
        let held = self.messages.iter().filter(|(_, r)| r.holds_group).count();
        if held != holders {
            return Err(format!(
                "{held} messages hold places, the groups know {holders}"
            ));
        }
        if rare.wakes.len()
            != rare
                .groups
                .values()
                .filter(|g| g.flow().wake_at.is_some())
                .count()
        {
            return Err("stray group wake-ups".into());
        }
        if let Some(fair) = rare.fair.as_deref() {
            if self.ready.len() != 0 {
                return Err("a ready index beside ORDER FAIR's lines".into());
            }
            fair.check(rare.groups.values().map(|g| g.line))?;
        } else if self.config().fair {
            return Err("ORDER FAIR without its lines".into());
        }
        Ok(())
    }
}

/// Moves a group's wake-up to when its gate next opens by itself (a
/// pause's end, the rate's window moving on) or, with nothing else left,
/// when its rate log runs out; forgets a pause that has ended. True when
/// nothing keeps the group any more: the caller forgets it.
fn settle(
    group: &mut Group,
    wakes: &mut BTreeSet<(u64, Box<[u8]>)>,
    name: &[u8],
    now: u64,
    group_rate: Option<crate::core::flow::Rate>,
) -> bool {
    // Most groups have neither a pause nor GROUPRATE's log: no wake-up to
    // move, nothing to prune.
    if group.flow.is_none() {
        return group.is_unused();
    }
    if let (Some(flow), Some(rate)) = (group.flow.as_deref_mut(), group_rate) {
        flow.log.prune(now, &rate);
    }
    let wake = match group.flow.as_deref() {
        None => None,
        Some(flow) => match flow.paused_until {
            Some(until) if until > now => (until != FOREVER).then_some(until),
            _ => match group_rate {
                // Held back by the rate: look again when the oldest
                // delivery in the window leaves it.
                Some(rate)
                    if !group.waiting.is_empty()
                        && u64::from(group.ready) >= flow.log.allowance(now, &rate) =>
                {
                    flow.log.next_leaves(now, &rate)
                }
                // Nothing left but the log: forget it when it runs out.
                Some(rate) if group.waiting.is_empty() && group.holders.is_empty() => {
                    flow.log.entries().last().map(|(at, _)| at + rate.window_ms)
                }
                _ => None,
            },
        },
    }
    .map(|at| at.max(now + 1).min(crate::core::limits::MAX_TIME_MS));
    set_wake(wakes, name, group, wake);
    if let Some(flow) = group.flow.as_deref_mut() {
        if flow.paused_until.is_some_and(|until| until <= now) {
            flow.paused_until = None;
        }
        if flow.is_empty() && wake.is_none() {
            group.flow = None;
        }
    }
    group.is_unused()
}

/// Moves a group's entry in the timer's wake-ups to `wake`.
fn set_wake(
    wakes: &mut BTreeSet<(u64, Box<[u8]>)>,
    name: &[u8],
    group: &mut Group,
    wake: Option<u64>,
) {
    let old = group.flow.as_deref().and_then(|f| f.wake_at);
    if old == wake {
        return;
    }
    if let Some(at) = old {
        wakes.remove(&(at, name.into()));
    }
    if let Some(flow) = group.flow.as_deref_mut() {
        flow.wake_at = wake;
        if let Some(at) = wake {
            wakes.insert((at, name.into()));
        }
    }
}

/// Whether the group's gate lets one more message be ready at `now`.
fn gate_open(group: &Group, now: u64, rate: Option<crate::core::flow::Rate>) -> bool {
    let flow = group.flow();
    if flow.paused_until.is_some_and(|until| now < until) {
        return false;
    }
    match rate {
        Some(rate) => u64::from(group.ready) < flow.log.allowance(now, &rate),
        None => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_group_entry_stays_small() {
        assert_eq!(std::mem::size_of::<Group>(), 40);
    }

    #[test]
    fn holders_keep_their_order_and_go_back_inline() {
        let mut h = Holders::default();
        assert!(h.is_empty());
        h.push(7);
        assert_eq!((h.first(), h.len(), h.heap_bytes()), (Some(7), 1, 0));
        h.push(3);
        h.push(9);
        assert_eq!(h.as_slice(), &[7, 3, 9]);
        h.remove(3);
        h.remove(4);
        assert_eq!(h.as_slice(), &[7, 9]);
        h.remove(7);
        assert!(matches!(h, Holders::One(9)) && h.heap_bytes() == 0);
        h.remove(9);
        assert!(h.is_empty());
    }

    #[test]
    fn holders_past_a_few_move_to_a_vector_in_order() {
        let mut h = Holders::default();
        for slot in 0..FEW as Slot {
            h.push(slot);
        }
        assert!(matches!(h, Holders::Few(..)));
        assert_eq!(h.heap_bytes(), crate::core::heap::alloc_size(4 * FEW));
        h.push(100);
        assert!(matches!(h, Holders::Many(_)));
        let mut want: Vec<Slot> = (0..FEW as Slot).chain([100]).collect();
        assert_eq!(h.as_slice(), want.as_slice());
        for slot in [0, 5, 100] {
            h.remove(slot);
            want.retain(|&s| s != slot);
            assert_eq!(h.as_slice(), want.as_slice());
        }
        // The same holders held as a few compare equal.
        let mut few = Holders::default();
        want.iter().for_each(|&s| few.push(s));
        assert!(matches!(few, Holders::Few(..)) && few == h);
        for &slot in &want[..want.len() - 1] {
            few.remove(slot);
        }
        assert!(matches!(few, Holders::One(s) if Some(&s) == want.last()));
        assert_eq!(few.heap_bytes(), 0);
        // The vector goes back inline at one holder, and to none.
        for &slot in &want[..want.len() - 1] {
            h.remove(slot);
        }
        assert!(matches!(h, Holders::One(s) if Some(&s) == want.last()));
        assert_eq!(h.heap_bytes(), 0);
        h.remove(*want.last().unwrap());
        assert!(matches!(h, Holders::None));
    }

    #[test]
    fn an_emptied_line_frees_its_box() {
        let mut line = Line::default();
        assert!(line.insert((5, 1, 2)) && !line.insert((5, 1, 2)));
        assert!(line.contains(&(5, 1, 2)) && line.len() == 1);
        assert!(line.remove(&(5, 1, 2)) && !line.remove(&(5, 1, 2)));
        assert!(line.is_empty() && line.0.is_none());
    }
}
