//! A queue's groups: by name, and by the message holding a place.
//!
//! DQ.GROUPS, PEEK and SCAN go through the groups in name order, and ADD
//! finds a group by its name. But POP and ACK reach a group through a
//! message holding one of its places, once per message: looking its name
//! up cost about 500 instructions (a dozen name comparisons), twice a
//! message. So each group sits at a fixed index in a table, the name index
//! (`group_names.rs`) files that index in name order, and the table
//! remembers, by slot, the index of each holder's group.
//!
//! Most groups of a queue of many tenants are groups of one: one message
//! holding the one place, nothing waiting, no pause, no rate log, no ORDER
//! FAIR line. Such a group is kept *lone*, without an entry (56 bytes in a
//! vector grown by doubling, about 73 a group, and a copy of its name): the
//! name index files its holder's slot, whose record holds the name, and
//! the holder's mark in `holder_group` says whether that message is ready.
//! A lone group gets an entry the moment anything changes it but its
//! holder becoming ready or not, or leaving (which forgets it); it goes
//! back to lone after a load or a change of limits.

use std::borrow::Cow;

use super::group_names::GroupNames;
use super::groups::{Group, Holders, LineRef};
use super::messages::Messages;
use super::Slot;

/// Forgotten groups' entries are given back when there are more than
/// this many, and twice as many as groups left.
const COMPACT_AT: usize = if cfg!(test) { 4 } else { 64 };

/// Set in a lone group's reference: the rest is its holder's slot.
const LONE: u32 = 1 << 31;
/// `holder_group`'s marks for the holder of a lone group, ready or not.
/// (Entry indexes stay below `LONE`: there are fewer groups than slots.)
const LONE_READY: u32 = u32::MAX - 1;
const LONE_IDLE: u32 = u32::MAX - 2;
/// `holder_group` where no message holds a place.
const NO_GROUP: u32 = u32::MAX;

/// A group with an entry, and its name.
#[derive(Debug, Default)]
struct Entry {
    name: Box<[u8]>,
    group: Group,
}

#[derive(Debug, Default)]
pub(super) struct GroupTable {
    /// Each group's reference, in name order: its index in `entries`, or
    /// `LONE` and its holder's slot.
    by_name: GroupNames,
    /// The groups that are not lone; an index in `free` holds an empty
    /// entry.
    entries: Vec<Entry>,
    free: Vec<u32>,
    /// By slot, the index of the group of the message holding a place
    /// there, or a lone mark; read only while a message holds a place at
    /// that slot, so a place given up leaves its stale entry behind
    /// harmlessly.
    holder_group: Vec<u32>,
}

/// Whether a `holder_group` value marks a lone group's holder.
fn is_lone_mark(at: u32) -> bool {
    at == LONE_READY || at == LONE_IDLE
}

/// The name of a group's reference: its entry's, or its holder's group.
fn name_of<'a>(entries: &'a [Entry], records: &'a Messages, value: u32) -> &'a [u8] {
    if value & LONE == 0 {
        entries.get(value as usize).map_or(&[], |e| &e.name[..])
    } else {
        // A lone group's holder holds its place, so it exists; were it
        // gone, `check_groups` finds it so (an empty name here).
        records
            .get(value & !LONE)
            .and_then(|r| r.group())
            .unwrap_or_default()
    }
}

/// Resolves references to names, for `by_name`.
macro_rules! names {
    ($entries:expr, $records:expr) => {{
        let (entries, records) = (&$entries[..], $records);
        move |value| name_of(entries, records, value)
    }};
}

impl GroupTable {
    pub const fn new() -> GroupTable {
        GroupTable {
            by_name: GroupNames::new(),
            entries: Vec::new(),
            free: Vec::new(),
            holder_group: Vec::new(),
        }
    }

    pub fn len(&self) -> usize {
        self.by_name.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }

    /// The group a reference names: its entry, or a lone group as an
    /// entry would hold it.
    fn view(&self, value: u32) -> Cow<'_, Group> {
        if value & LONE == 0 {
            return Cow::Borrowed(&self.entries[value as usize].group);
        }
        Cow::Owned(self.lone(value & !LONE))
    }

    /// The lone group whose holder is at `slot`, as an entry would hold it.
    fn lone(&self, slot: Slot) -> Group {
        let ready = self.holder_group.get(slot as usize) == Some(&LONE_READY);
        Group {
            holders: Holders::One(slot),
            ready: u32::from(ready),
            ..Group::default()
        }
    }

    /// The group of the message holding a place at `slot`, if it is lone
    /// (to read: it keeps no entry).
    pub fn lone_of_holder(&self, slot: Slot) -> Option<Group> {
        self.holds_lone(slot).then(|| self.lone(slot))
    }

    pub fn get(&self, name: &[u8], records: &Messages) -> Option<Cow<'_, Group>> {
        let value = self.by_name.get(name, names!(self.entries, records))?;
        Some(self.view(value))
    }

    /// The group, given an entry if it was lone: the caller changes it.
    pub fn get_mut(&mut self, name: &[u8], records: &Messages) -> Option<&mut Group> {
        let at = self.entry(name, records)?;
        Some(&mut self.entries[at as usize].group)
    }

    /// A new entry for `group`, named `name`.
    fn new_entry(&mut self, name: &[u8], group: Group) -> u32 {
        let entry = Entry {
            name: name.into(),
            group,
        };
        match self.free.pop() {
            Some(at) => {
                self.entries[at as usize] = entry;
                at
            }
            None => {
                self.entries.push(entry);
                // Groups are fewer than messages, and slots are u32.
                (self.entries.len() - 1) as u32
            }
        }
    }

    /// The group's entry index, giving it one if it was lone.
    pub fn entry(&mut self, name: &[u8], records: &Messages) -> Option<u32> {
        let value = self.by_name.get(name, names!(self.entries, records))?;
        if value & LONE == 0 {
            return Some(value);
        }
        let slot = value & !LONE;
        let at = self.new_entry(name, self.lone(slot));
        if let Some(value) = self.by_name.get_mut(name, names!(self.entries, records)) {
            *value = at;
        }
        self.holder_group[slot as usize] = at;
        Some(at)
    }

    /// The group's index, made (empty, with an entry) if it does not
    /// exist.
    pub fn index_of(&mut self, name: &[u8], records: &Messages) -> u32 {
        if let Some(at) = self.entry(name, records) {
            return at;
        }
        let at = self.new_entry(name, Group::default());
        self.by_name.insert(name, at, names!(self.entries, records));
        at
    }

    /// The group, made (empty) if it does not exist.
    pub fn get_or_default(&mut self, name: &[u8], records: &Messages) -> &mut Group {
        let at = self.index_of(name, records);
        &mut self.entries[at as usize].group
    }

    pub fn at_mut(&mut self, at: u32) -> &mut Group {
        &mut self.entries[at as usize].group
    }

    /// The message at `slot` takes a place in the group at index `at`.
    pub fn hold(&mut self, at: u32, slot: Slot) {
        self.entries[at as usize].group.holders.push(slot);
        self.note_holder(slot, at);
    }

    /// The message at `slot`, of the group `name` (its record says so),
    /// which does not exist, makes it and holds its one place, not ready
    /// yet: a lone group. False when the slot is too high to be named so
    /// (the caller makes an entry).
    pub fn hold_lone(&mut self, name: &[u8], slot: Slot, records: &Messages) -> bool {
        if slot & LONE != 0 {
            return false;
        }
        self.by_name
            .insert(name, LONE | slot, names!(self.entries, records));
        self.note_holder(slot, LONE_IDLE);
        true
    }

    /// The message at `slot` holds a place in the group at index `at` (or
    /// a lone mark).
    fn note_holder(&mut self, slot: Slot, at: u32) {
        let slot = slot as usize;
        if slot >= self.holder_group.len() {
            self.holder_group.resize(slot + 1, NO_GROUP);
        }
        self.holder_group[slot] = at;
    }

    /// Whether the message holding a place at `slot` is a lone group's.
    pub fn holds_lone(&self, slot: Slot) -> bool {
        self.holder_group
            .get(slot as usize)
            .is_some_and(|&at| is_lone_mark(at))
    }

    /// The holder of a lone group became ready or stopped being: its mark
    /// counts it. False, and nothing done, when its group is not lone.
    pub fn mark_lone_ready(&mut self, slot: Slot, ready: bool) -> bool {
        match self.holder_group.get_mut(slot as usize) {
            Some(at) if is_lone_mark(*at) => {
                *at = if ready { LONE_READY } else { LONE_IDLE };
                true
            }
            _ => false,
        }
    }

    /// The group `name` of the message holding a place at `slot`, given an
    /// entry if it was lone: the caller changes it. (Only for a message
    /// holding a place: `None` would be a broken invariant.)
    pub fn of_holder(&mut self, slot: Slot, name: &[u8], records: &Messages) -> Option<&mut Group> {
        let at = *self.holder_group.get(slot as usize)?;
        let at = if is_lone_mark(at) {
            self.entry(name, records)?
        } else {
            at
        };
        self.entries.get_mut(at as usize).map(|e| &mut e.group)
    }

    /// ORDER FAIR's line of the group of the message holding a place at
    /// `slot` (a lone group has none).
    pub fn holder_line(&self, slot: Slot) -> LineRef {
        match self.holder_group.get(slot as usize) {
            Some(&at) if !is_lone_mark(at) => self
                .entries
                .get(at as usize)
                .map_or(LineRef::NONE, |e| e.group.line),
            _ => LineRef::NONE,
        }
    }

    /// Whether the table finds the group `name` from its holder at `slot`
    /// (`Queue::check`).
    pub fn holder_matches(&self, slot: Slot, name: &[u8], records: &Messages) -> bool {
        let value = self.by_name.get(name, names!(self.entries, records));
        let (Some(value), Some(&at)) = (value, self.holder_group.get(slot as usize)) else {
            return false;
        };
        if value & LONE != 0 {
            value & !LONE == slot && is_lone_mark(at)
        } else {
            value == at
        }
    }

    /// Takes the group out, with the copy of its name its entry kept (a
    /// lone group's was its holder's).
    pub fn remove(
        &mut self,
        name: &[u8],
        records: &Messages,
    ) -> Option<(Group, Option<Box<[u8]>>)> {
        let value = self.by_name.remove(name, names!(self.entries, records))?;
        let removed = if value & LONE == 0 {
            self.free.push(value);
            let entry = std::mem::take(&mut self.entries[value as usize]);
            (entry.group, Some(entry.name))
        } else {
            (self.view(value).into_owned(), None)
        };
        if self.by_name.is_empty() {
            // The last group gone: give the memory back.
            *self = GroupTable::new();
        } else if self.should_compact() {
            self.compact();
        }
        Some(removed)
    }

    /// Entries in use.
    fn entries_kept(&self) -> usize {
        self.entries.len() - self.free.len()
    }

    /// Whether forgotten entries are many, more than twice the entries
    /// left, and at least a quarter of the groups left: `compact` walks
    /// every group, lone ones too, so that its cost stays within four
    /// steps for each entry it gives back (a queue of many lone groups
    /// whose few entries come and go reuses them instead).
    fn should_compact(&self) -> bool {
        let free = self.free.len();
        free > COMPACT_AT && free > 2 * self.entries_kept() && 4 * free >= self.len()
    }

    /// Every group that can be lone becomes lone, giving its entry back
    /// (after a load, or a change of limits that gave each one an entry).
    /// A group's name does not change, so neither does its place in
    /// `by_name`.
    pub fn make_lone(&mut self) {
        let entries = &mut self.entries;
        let mut freed = Vec::new();
        for value in self.by_name.values_mut() {
            if *value & LONE != 0 {
                continue;
            }
            let group = &entries[*value as usize].group;
            let slot = match group.holders {
                Holders::One(slot) if slot & LONE == 0 => slot,
                _ => continue,
            };
            if !group.waiting.is_empty() || group.flow.is_some() || group.line != LineRef::NONE {
                continue;
            }
            let mark = if group.ready > 0 {
                LONE_READY
            } else {
                LONE_IDLE
            };
            entries[*value as usize] = Entry::default();
            freed.push(*value);
            self.holder_group[slot as usize] = mark;
            *value = LONE | slot;
        }
        self.free.extend(freed);
        if self.should_compact() {
            self.compact();
        }
    }

    /// Gives back the room of forgotten groups' entries once they far
    /// outnumber the entries left (a queue that had a million tenants and
    /// has a few now; see `should_compact`): the entries left move to the
    /// front, their references and holders' marks with them. It walks
    /// every group and its holders, at most four steps for each entry it
    /// gives back. Moving the entries in place instead, looking each one's
    /// name up, cost more where most groups have entries (about 600
    /// instructions an entry against about 100 a group).
    fn compact(&mut self) {
        let mut entries = Vec::with_capacity(self.entries_kept());
        let mut last_holder: Option<Slot> = None;
        for at in self.by_name.values_mut() {
            if *at & LONE != 0 {
                last_holder = last_holder.max(Some(*at & !LONE));
                continue;
            }
            let entry = std::mem::take(&mut self.entries[*at as usize]);
            let moved = entries.len() as u32;
            for slot in entry.group.holders.iter() {
                self.holder_group[slot as usize] = moved;
                last_holder = last_holder.max(Some(slot));
            }
            entries.push(entry);
            *at = moved;
        }
        self.entries = entries;
        self.free = Vec::new();
        self.holder_group
            .truncate(last_holder.map_or(0, |slot| slot as usize + 1));
        self.holder_group.shrink_to_fit();
    }

    /// In name order.
    pub fn iter<'a>(
        &'a self,
        records: &'a Messages,
    ) -> impl Iterator<Item = (&'a [u8], Cow<'a, Group>)> + 'a {
        self.by_name
            .iter()
            .map(move |value| (name_of(&self.entries, records, value), self.view(value)))
    }

    /// From `from` on, in name order.
    pub fn iter_from<'a>(
        &'a self,
        from: &[u8],
        records: &'a Messages,
    ) -> impl Iterator<Item = (&'a [u8], Cow<'a, Group>)> + 'a {
        self.by_name
            .iter_from(from, names!(self.entries, records))
            .map(move |value| (name_of(&self.entries, records, value), self.view(value)))
    }

    /// The groups that have an entry, in name order: those a lone group
    /// lacks (a pause, a rate log, waiting messages, a line) are there.
    pub fn with_entries(&self) -> impl Iterator<Item = (&[u8], &Group)> + '_ {
        self.by_name
            .iter()
            .filter(|&value| value & LONE == 0)
            .map(|at| {
                let entry = &self.entries[at as usize];
                (&entry.name[..], &entry.group)
            })
    }

    pub fn values(&self) -> impl Iterator<Item = Cow<'_, Group>> + '_ {
        self.by_name.iter().map(|value| self.view(value))
    }

    pub fn names<'a>(&'a self, records: &'a Messages) -> impl Iterator<Item = &'a [u8]> + 'a {
        self.iter(records).map(|(name, _)| name)
    }

    /// Calls `f` on each group that has an entry, in name order: a lone
    /// group has nothing `f` may change (see `with_entries`).
    pub fn for_each_entry_mut(&mut self, mut f: impl FnMut(&[u8], &mut Group)) {
        for at in self.by_name.iter() {
            if at & LONE == 0 {
                let entry = &mut self.entries[at as usize];
                f(&entry.name, &mut entry.group);
            }
        }
    }

    /// Checks that the names are in order (`Queue::check`).
    pub fn check(&self, records: &Messages) -> Result<(), String> {
        self.by_name.check(names!(self.entries, records))
    }

    /// Heap bytes of the table itself (not of what the groups hold).
    pub fn heap_bytes(&self) -> usize {
        use crate::core::heap::alloc_size;
        use std::mem::size_of;
        let names: usize = self.entries.iter().map(|e| alloc_size(e.name.len())).sum();
        self.by_name.heap_bytes()
            + names
            + alloc_size(self.entries.capacity() * size_of::<Entry>())
            + alloc_size(self.free.capacity() * 4)
            + alloc_size(self.holder_group.capacity() * 4)
    }
}

#[cfg(test)]
mod tests {
    use super::super::record::{Options, Record, Terms};
    use super::*;

    /// Records at slots 0, 1, ... in the groups named, in that order.
    fn records(groups: &[&str]) -> Messages {
        let mut m = Messages::default();
        for (i, group) in groups.iter().enumerate() {
            let terms = Terms {
                priority: 0,
                seq: i as u64,
                due_at: 0,
                added_at: 0,
                options: Options {
                    group: Some(group.as_bytes().into()),
                    ..Options::default()
                },
            };
            let slot = m.insert(Record::new(format!("m{i}").as_bytes(), b"", terms));
            assert_eq!(slot, i as Slot);
        }
        m
    }

    #[test]
    fn a_group_keeps_its_index_and_a_freed_one_is_reused() {
        let m = records(&[]);
        let mut t = GroupTable::new();
        let a = t.index_of(b"a", &m);
        let b = t.index_of(b"b", &m);
        assert_ne!(a, b);
        assert_eq!(t.index_of(b"a", &m), a);
        t.note_holder(7, b);
        t.at_mut(b).ready = 3;
        assert_eq!(t.of_holder(7, b"b", &m).map(|g| g.ready), Some(3));
        assert!(t.remove(b"a", &m).is_some());
        assert_eq!(t.index_of(b"c", &m), a, "a's entry is reused");
        assert_eq!(t.get(b"b", &m).map(|g| g.ready), Some(3));
        let names: Vec<_> = t.names(&m).map(<[u8]>::to_vec).collect();
        assert_eq!(names, [b"b".to_vec(), b"c".to_vec()]);
        assert!(t.remove(b"b", &m).is_some() && t.remove(b"c", &m).is_some());
        assert!(t.is_empty() && t.entries.is_empty() && t.holder_group.is_empty());
    }

    #[test]
    fn forgotten_groups_give_their_room_back() {
        let m = records(&[]);
        let mut t = GroupTable::new();
        let names: Vec<Vec<u8>> = (0..100).map(|i| format!("g{i:03}").into_bytes()).collect();
        for (slot, name) in names.iter().enumerate() {
            let at = t.index_of(name, &m);
            t.hold(at, slot as Slot);
        }
        // Keep g010 and g050; forget the rest.
        for (slot, name) in names.iter().enumerate() {
            if slot != 10 && slot != 50 {
                let at = t.entry(name, &m).unwrap();
                t.at_mut(at).holders.remove(slot as Slot);
                assert!(t.remove(name, &m).is_some());
            }
        }
        assert_eq!(t.len(), 2);
        assert!(t.entries.len() < 10, "{} entries kept", t.entries.len());
        for slot in [10, 50] {
            let name = format!("g{slot:03}").into_bytes();
            assert!(t.holder_matches(slot, &name, &m), "slot {slot}");
            assert_eq!(
                t.of_holder(slot, &name, &m).and_then(|g| g.holders.first()),
                Some(slot)
            );
        }
        t.check(&m).unwrap();
    }

    #[test]
    fn a_lone_group_has_no_entry_until_it_needs_one() {
        let m = records(&["x", "a", "c", "b"]);
        let mut t = GroupTable::new();
        assert!(t.hold_lone(b"a", 1, &m));
        assert!(t.entries.is_empty());
        assert!(t.holds_lone(1) && t.holder_matches(1, b"a", &m));
        assert!(t.mark_lone_ready(1, true));
        let a = t.get(b"a", &m).map(Cow::into_owned);
        let a = a.as_ref().map(|g| (g.holders.as_slice(), g.ready));
        assert_eq!(a, Some((&[1][..], 1)));
        assert!(matches!(t.get(b"a", &m), Some(Cow::Owned(_))));
        // Changing it gives it an entry, with what its mark said.
        assert_eq!(t.of_holder(1, b"a", &m).map(|g| g.ready), Some(1));
        assert_eq!(t.entries.len(), 1);
        assert!(!t.holds_lone(1) && !t.mark_lone_ready(1, false));
        assert!(t.holder_matches(1, b"a", &m));
        assert!(matches!(t.get(b"a", &m), Some(Cow::Borrowed(_))));
        // Back to lone, its entry free for the next group.
        t.make_lone();
        assert!(t.holds_lone(1) && t.holder_matches(1, b"a", &m));
        assert_eq!(t.get(b"a", &m).map(|g| g.ready), Some(1));
        assert_eq!(t.free, [0]);
        assert_eq!(t.index_of(b"b", &m), 0);
        // A group with more than its holder stays an entry.
        t.hold(0, 3);
        t.at_mut(0).waiting.insert((0, 1, 11));
        t.make_lone();
        assert!(!t.holds_lone(3));
        // Names in order, wherever they are kept.
        assert!(t.hold_lone(b"c", 2, &m));
        let names: Vec<_> = t.names(&m).map(<[u8]>::to_vec).collect();
        assert_eq!(names, [b"a".to_vec(), b"b".to_vec(), b"c".to_vec()]);
        let from: Vec<_> = t.iter_from(b"b", &m).map(|(n, _)| n.to_vec()).collect();
        assert_eq!(from, [b"b".to_vec(), b"c".to_vec()]);
        let kept: Vec<_> = t.with_entries().map(|(n, _)| n.to_vec()).collect();
        assert_eq!(kept, [b"b".to_vec()]);
        t.check(&m).unwrap();
        // A lone group taken out says what it held.
        let (group, kept) = t.remove(b"a", &m).unwrap();
        assert_eq!((group.holders.as_slice(), kept), (&[1][..], None));
        assert_eq!(t.len(), 2);
        // A slot too high to be named with the mark is refused.
        assert!(!t.hold_lone(b"d", LONE | 1, &m));
        assert_eq!(t.len(), 2);
    }

    #[test]
    fn compacting_keeps_lone_holders_marks() {
        let mut groups = vec!["lone"];
        let names: Vec<String> = (0..40).map(|i| format!("e{i:02}")).collect();
        groups.extend(names.iter().map(String::as_str));
        let m = records(&groups);
        let mut t = GroupTable::new();
        for (i, name) in names.iter().enumerate() {
            let at = t.index_of(name.as_bytes(), &m);
            t.hold(at, i as Slot + 1);
        }
        assert!(t.hold_lone(b"lone", 0, &m));
        assert!(t.mark_lone_ready(0, true));
        // Keep e05 and e30 (slots 6 and 31); forget the rest.
        for (i, name) in names.iter().enumerate() {
            if i != 5 && i != 30 {
                let at = t.entry(name.as_bytes(), &m).unwrap();
                t.at_mut(at).holders.remove(i as Slot + 1);
                assert!(t.remove(name.as_bytes(), &m).is_some());
            }
        }
        assert!(t.entries.len() < 10, "{} entries kept", t.entries.len());
        assert!(t.holds_lone(0) && t.holder_matches(0, b"lone", &m));
        assert_eq!(t.get(b"lone", &m).map(|g| g.ready), Some(1));
        for (slot, name) in [(6, &b"e05"[..]), (31, b"e30")] {
            assert!(t.holder_matches(slot, name, &m), "slot {slot}");
            let holder = t.of_holder(slot, name, &m).and_then(|g| g.holders.first());
            assert_eq!(holder, Some(slot));
        }
        t.check(&m).unwrap();
        let listed: Vec<_> = t.names(&m).map(<[u8]>::to_vec).collect();
        assert_eq!(listed, [b"e05".to_vec(), b"e30".to_vec(), b"lone".to_vec()]);
    }
}
