//! A queue's groups: by name, and by the message holding a place.
//!
//! DQ.GROUPS, PEEK and SCAN go through the groups in name order, and ADD
//! finds a group by its name. But POP and ACK reach a group through a
//! message holding one of its places, once per message: looking its name
//! up in the B-tree cost about 500 instructions (a dozen name comparisons),
//! twice a message. So each group sits at a fixed index in a table, the
//! B-tree maps a name to that index, and the table remembers, by slot, the
//! index of each holder's group.
//!
//! Most groups of a queue of many tenants are groups of one: one message
//! holding the one place, nothing waiting, no pause, no rate log, no ORDER
//! FAIR line. Such a group is kept *lone*, without an entry (40 bytes in a
//! vector grown by doubling, about 52 a group): the B-tree maps its name to
//! its holder's slot, and its holder's mark in `holder_group` says whether
//! that message is ready. A lone group gets an entry the moment anything
//! changes it but its holder becoming ready or not, or leaving (which
//! forgets it); it goes back to lone after a load or a change of limits.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::ops::Bound;

use super::groups::{Group, Holders, LineRef};
use super::Slot;

/// Forgotten groups' entries are given back when there are more than
/// this many, and twice as many as groups left.
const COMPACT_AT: usize = if cfg!(test) { 4 } else { 64 };

/// Set in `by_name`'s value of a lone group: the rest is its holder's slot.
const LONE: u32 = 1 << 31;
/// `holder_group`'s marks for the holder of a lone group, ready or not.
/// (Entry indexes stay below `LONE`: there are fewer groups than slots.)
const LONE_READY: u32 = u32::MAX - 1;
const LONE_IDLE: u32 = u32::MAX - 2;
/// `holder_group` where no message holds a place.
const NO_GROUP: u32 = u32::MAX;

#[derive(Debug, Default)]
pub(super) struct GroupTable {
    /// Each group's index in `entries`, or `LONE` and its holder's slot,
    /// by name.
    by_name: BTreeMap<Box<[u8]>, u32>,
    /// The groups that are not lone; an index in `free` holds an empty
    /// entry.
    entries: Vec<Group>,
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

impl GroupTable {
    pub const fn new() -> GroupTable {
        GroupTable {
            by_name: BTreeMap::new(),
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

    /// The group a `by_name` value names: its entry, or a lone group as
    /// an entry would hold it.
    fn view(&self, value: u32) -> Cow<'_, Group> {
        if value & LONE == 0 {
            return Cow::Borrowed(&self.entries[value as usize]);
        }
        let slot = value & !LONE;
        let ready = self.holder_group.get(slot as usize) == Some(&LONE_READY);
        Cow::Owned(Group {
            holders: Holders::One(slot),
            ready: u32::from(ready),
            ..Group::default()
        })
    }

    pub fn get(&self, name: &[u8]) -> Option<Cow<'_, Group>> {
        self.by_name.get(name).map(|&value| self.view(value))
    }

    /// The group, given an entry if it was lone: the caller changes it.
    pub fn get_mut(&mut self, name: &[u8]) -> Option<&mut Group> {
        let at = self.entry(name)?;
        Some(&mut self.entries[at as usize])
    }

    /// The group's entry index, giving it one if it was lone.
    pub fn entry(&mut self, name: &[u8]) -> Option<u32> {
        let value = self.by_name.get_mut(name)?;
        if *value & LONE == 0 {
            return Some(*value);
        }
        let slot = *value & !LONE;
        let ready = self.holder_group[slot as usize] == LONE_READY;
        let group = Group {
            holders: Holders::One(slot),
            ready: u32::from(ready),
            ..Group::default()
        };
        let at = match self.free.pop() {
            Some(at) => {
                self.entries[at as usize] = group;
                at
            }
            None => {
                self.entries.push(group);
                (self.entries.len() - 1) as u32
            }
        };
        *value = at;
        self.holder_group[slot as usize] = at;
        Some(at)
    }

    /// The group's index, made (empty, with an entry) if it does not
    /// exist.
    pub fn index_of(&mut self, name: &[u8]) -> u32 {
        if let Some(at) = self.entry(name) {
            return at;
        }
        let at = match self.free.pop() {
            Some(at) => at,
            None => {
                self.entries.push(Group::default());
                // Groups are fewer than messages, and slots are u32.
                (self.entries.len() - 1) as u32
            }
        };
        self.by_name.insert(name.into(), at);
        at
    }

    /// The group, made (empty) if it does not exist.
    pub fn get_or_default(&mut self, name: &[u8]) -> &mut Group {
        let at = self.index_of(name);
        &mut self.entries[at as usize]
    }

    pub fn at_mut(&mut self, at: u32) -> &mut Group {
        &mut self.entries[at as usize]
    }

    /// The message at `slot` takes a place in the group at index `at`.
    pub fn hold(&mut self, at: u32, slot: Slot) {
        self.entries[at as usize].holders.push(slot);
        self.note_holder(slot, at);
    }

    /// The message at `slot`, not ready yet, makes the group `name`, which
    /// does not exist, and holds its one place: a lone group. False when
    /// the slot is too high to be named so (the caller makes an entry).
    pub fn hold_lone(&mut self, name: &[u8], slot: Slot) -> bool {
        if slot & LONE != 0 {
            return false;
        }
        self.by_name.insert(name.into(), LONE | slot);
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
    pub fn of_holder(&mut self, slot: Slot, name: &[u8]) -> Option<&mut Group> {
        let at = *self.holder_group.get(slot as usize)?;
        let at = if is_lone_mark(at) {
            self.entry(name)?
        } else {
            at
        };
        self.entries.get_mut(at as usize)
    }

    /// ORDER FAIR's line of the group of the message holding a place at
    /// `slot` (a lone group has none).
    pub fn holder_line(&self, slot: Slot) -> LineRef {
        match self.holder_group.get(slot as usize) {
            Some(&at) if !is_lone_mark(at) => self
                .entries
                .get(at as usize)
                .map_or(LineRef::NONE, |g| g.line),
            _ => LineRef::NONE,
        }
    }

    /// Whether the table finds the group `name` from its holder at `slot`
    /// (`Queue::check`).
    pub fn holder_matches(&self, slot: Slot, name: &[u8]) -> bool {
        let (Some(&value), Some(&at)) =
            (self.by_name.get(name), self.holder_group.get(slot as usize))
        else {
            return false;
        };
        if value & LONE != 0 {
            value & !LONE == slot && is_lone_mark(at)
        } else {
            value == at
        }
    }

    /// Takes the group out, with its name.
    pub fn remove(&mut self, name: &[u8]) -> Option<(Box<[u8]>, Group)> {
        let (name, value) = self.by_name.remove_entry(name)?;
        let group = if value & LONE == 0 {
            self.free.push(value);
            std::mem::take(&mut self.entries[value as usize])
        } else {
            self.view(value).into_owned()
        };
        if self.by_name.is_empty() {
            // The last group gone: give the memory back.
            *self = GroupTable::new();
        } else if self.free.len() > COMPACT_AT && self.free.len() > 2 * self.entries_kept() {
            self.compact();
        }
        Some((name, group))
    }

    /// Entries in use.
    fn entries_kept(&self) -> usize {
        self.entries.len() - self.free.len()
    }

    /// Every group that can be lone becomes lone, giving its entry back
    /// (after a load, or a change of limits that gave each one an entry).
    pub fn make_lone(&mut self) {
        let entries = &mut self.entries;
        let mut freed = Vec::new();
        for value in self.by_name.values_mut() {
            if *value & LONE != 0 {
                continue;
            }
            let group = &entries[*value as usize];
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
            entries[*value as usize] = Group::default();
            freed.push(*value);
            self.holder_group[slot as usize] = mark;
            *value = LONE | slot;
        }
        self.free.extend(freed);
        if self.free.len() > COMPACT_AT && self.free.len() > 2 * self.entries_kept() {
            self.compact();
        }
    }

    /// Gives back the room of forgotten groups once they far outnumber
    /// the groups left (a queue that had a million tenants and has a few
    /// now): the groups left move to the front, their holders' indexes
    /// with them. It costs as much as the groups left and their holders,
    /// fewer than the removals since the last time.
    fn compact(&mut self) {
        let mut entries = Vec::with_capacity(self.entries_kept());
        let mut last_holder: Option<Slot> = None;
        for at in self.by_name.values_mut() {
            if *at & LONE != 0 {
                last_holder = last_holder.max(Some(*at & !LONE));
                continue;
            }
            let group = std::mem::take(&mut self.entries[*at as usize]);
            let moved = entries.len() as u32;
            for slot in group.holders.iter() {
                self.holder_group[slot as usize] = moved;
                last_holder = last_holder.max(Some(slot));
            }
            entries.push(group);
            *at = moved;
        }
        self.entries = entries;
        self.free = Vec::new();
        self.holder_group
            .truncate(last_holder.map_or(0, |slot| slot as usize + 1));
        self.holder_group.shrink_to_fit();
    }

    /// In name order.
    pub fn iter(&self) -> impl Iterator<Item = (&Box<[u8]>, Cow<'_, Group>)> + '_ {
        self.by_name
            .iter()
            .map(|(name, &value)| (name, self.view(value)))
    }

    /// From `from` on, in name order.
    pub fn iter_from<'a>(
        &'a self,
        from: &[u8],
    ) -> impl Iterator<Item = (&'a Box<[u8]>, Cow<'a, Group>)> + 'a {
        self.by_name
            .range::<[u8], _>((Bound::Included(from), Bound::Unbounded))
            .map(|(name, &value)| (name, self.view(value)))
    }

    /// The groups that have an entry, in name order: those a lone group
    /// lacks (a pause, a rate log, waiting messages, a line) are there.
    pub fn with_entries(&self) -> impl Iterator<Item = (&Box<[u8]>, &Group)> + '_ {
        self.by_name
            .iter()
            .filter(|(_, &value)| value & LONE == 0)
            .map(|(name, &at)| (name, &self.entries[at as usize]))
    }

    pub fn values(&self) -> impl Iterator<Item = Cow<'_, Group>> + '_ {
        self.iter().map(|(_, group)| group)
    }

    pub fn names(&self) -> impl Iterator<Item = &Box<[u8]>> + '_ {
        self.by_name.keys()
    }

    /// Calls `f` on each group that has an entry, in name order: a lone
    /// group has nothing `f` may change (see `with_entries`).
    pub fn for_each_entry_mut(&mut self, mut f: impl FnMut(&[u8], &mut Group)) {
        for (name, &at) in &self.by_name {
            if at & LONE == 0 {
                f(name, &mut self.entries[at as usize]);
            }
        }
    }

    /// Heap bytes of the table itself (not of what the groups hold): a
    /// B-tree node holds up to 11 entries, about two-thirds full.
    pub fn heap_bytes(&self) -> usize {
        use crate::core::heap::alloc_size;
        use std::mem::size_of;
        let names: usize = self
            .by_name
            .keys()
            .map(|name| (size_of::<Box<[u8]>>() + 4) * 3 / 2 + 8 + alloc_size(name.len()))
            .sum();
        names
            + alloc_size(self.entries.capacity() * size_of::<Group>())
            + alloc_size(self.free.capacity() * 4)
            + alloc_size(self.holder_group.capacity() * 4)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_group_keeps_its_index_and_a_freed_one_is_reused() {
        let mut t = GroupTable::new();
        let a = t.index_of(b"a");
        let b = t.index_of(b"b");
        assert_ne!(a, b);
        assert_eq!(t.index_of(b"a"), a);
        t.note_holder(7, b);
        t.at_mut(b).ready = 3;
        assert_eq!(t.of_holder(7, b"b").map(|g| g.ready), Some(3));
        assert!(t.remove(b"a").is_some());
        assert_eq!(t.index_of(b"c"), a, "a's entry is reused");
        assert_eq!(t.get(b"b").map(|g| g.ready), Some(3));
        let names: Vec<_> = t.names().map(|n| n.to_vec()).collect();
        assert_eq!(names, [b"b".to_vec(), b"c".to_vec()]);
        assert!(t.remove(b"b").is_some() && t.remove(b"c").is_some());
        assert!(t.is_empty() && t.entries.is_empty() && t.holder_group.is_empty());
    }

    #[test]
    fn forgotten_groups_give_their_room_back() {
        let mut t = GroupTable::new();
        let names: Vec<Vec<u8>> = (0..100).map(|i| format!("g{i:03}").into_bytes()).collect();
        for (slot, name) in names.iter().enumerate() {
            let at = t.index_of(name);
            t.hold(at, slot as Slot);
        }
        // Keep g010 and g050; forget the rest.
        for (slot, name) in names.iter().enumerate() {
            if slot != 10 && slot != 50 {
                let at = t.entry(name).unwrap();
                t.at_mut(at).holders.remove(slot as Slot);
                assert!(t.remove(name).is_some());
            }
        }
        assert_eq!(t.len(), 2);
        assert!(t.entries.len() < 10, "{} entries kept", t.entries.len());
        for slot in [10, 50] {
            let name = format!("g{slot:03}").into_bytes();
            assert!(t.holder_matches(slot, &name), "slot {slot}");
            assert_eq!(
                t.of_holder(slot, &name).and_then(|g| g.holders.first()),
                Some(slot)
            );
        }
    }

    #[test]
    fn a_lone_group_has_no_entry_until_it_needs_one() {
        let mut t = GroupTable::new();
        assert!(t.hold_lone(b"a", 5));
        assert!(t.entries.is_empty());
        assert!(t.holds_lone(5) && t.holder_matches(5, b"a"));
        assert!(t.mark_lone_ready(5, true));
        let a = t.get(b"a").map(Cow::into_owned);
        assert_eq!(
            a.as_ref().map(|g| (g.holders.as_slice(), g.ready)),
            Some((&[5][..], 1))
        );
        assert!(matches!(t.get(b"a"), Some(Cow::Owned(_))));
        // Changing it gives it an entry, with what its mark said.
        assert_eq!(t.of_holder(5, b"a").map(|g| g.ready), Some(1));
        assert_eq!(t.entries.len(), 1);
        assert!(!t.holds_lone(5) && !t.mark_lone_ready(5, false));
        assert!(t.holder_matches(5, b"a"));
        assert!(matches!(t.get(b"a"), Some(Cow::Borrowed(_))));
        // Back to lone, its entry free for the next group.
        t.make_lone();
        assert!(t.holds_lone(5) && t.holder_matches(5, b"a"));
        assert_eq!(t.get(b"a").map(|g| g.ready), Some(1));
        assert_eq!(t.free, [0]);
        assert_eq!(t.index_of(b"b"), 0);
        // A group with more than its holder stays an entry.
        t.hold(0, 9);
        t.at_mut(0).waiting.insert((0, 1, 11));
        t.make_lone();
        assert!(!t.holds_lone(9));
        // A lone group taken out says what it held.
        let (name, group) = t.remove(b"a").unwrap();
        assert_eq!((&name[..], group.holders.as_slice()), (&b"a"[..], &[5][..]));
        assert_eq!(t.with_entries().count(), 1);
        // A slot too high to be named with the mark is refused.
        assert!(!t.hold_lone(b"c", LONE | 1));
    }

    #[test]
    fn compacting_keeps_lone_holders_marks() {
        let mut t = GroupTable::new();
        for i in 0..40u32 {
            let name = format!("e{i:02}").into_bytes();
            let at = t.index_of(&name);
            t.hold(at, i);
        }
        assert!(t.hold_lone(b"lone", 100));
        assert!(t.mark_lone_ready(100, true));
        for i in 0..40u32 {
            let name = format!("e{i:02}").into_bytes();
            assert!(t.remove(&name).is_some());
        }
        assert!(t.entries.len() < 10, "{} entries kept", t.entries.len());
        assert!(t.holds_lone(100) && t.holder_matches(100, b"lone"));
        assert_eq!(t.get(b"lone").map(|g| g.ready), Some(1));
    }
}
