//! A queue's groups: by name, and by the message holding a place.
//!
//! DQ.GROUPS, PEEK and SCAN go through the groups in name order, and ADD
//! finds a group by its name. But POP and ACK reach a group through a
//! message holding one of its places, once per message: looking its name
//! up in the B-tree cost about 500 instructions (a dozen name comparisons),
//! twice a message. So each group sits at a fixed index in a table, the
//! B-tree maps a name to that index, and the table remembers, by slot, the
//! index of each holder's group.

use std::collections::BTreeMap;
use std::ops::Bound;

use super::groups::Group;
use super::Slot;

/// Forgotten groups' entries are given back when there are more than
/// this many, and twice as many as groups left.
const COMPACT_AT: usize = if cfg!(test) { 4 } else { 64 };

#[derive(Debug, Default)]
pub(super) struct GroupTable {
    /// Each group's index in `entries`, by name.
    by_name: BTreeMap<Box<[u8]>, u32>,
    /// The groups; an index in `free` holds an empty entry.
    entries: Vec<Group>,
    free: Vec<u32>,
    /// By slot, the index of the group of the message holding a place
    /// there; read only while a message holds a place at that slot, so a
    /// place given up leaves its stale entry behind harmlessly.
    holder_group: Vec<u32>,
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

    pub fn get(&self, name: &[u8]) -> Option<&Group> {
        self.by_name.get(name).map(|&at| &self.entries[at as usize])
    }

    pub fn get_mut(&mut self, name: &[u8]) -> Option<&mut Group> {
        self.by_name
            .get(name)
            .map(|&at| &mut self.entries[at as usize])
    }

    /// The group's index, made (empty) if it does not exist.
    pub fn index_of(&mut self, name: &[u8]) -> u32 {
        if let Some(&at) = self.by_name.get(name) {
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

    /// The message at `slot` holds a place in the group at index `at`.
    fn note_holder(&mut self, slot: Slot, at: u32) {
        let slot = slot as usize;
        if slot >= self.holder_group.len() {
            self.holder_group.resize(slot + 1, u32::MAX);
        }
        self.holder_group[slot] = at;
    }

    /// The group of the message holding a place at `slot`. (Only for a
    /// message holding a place: `None` would be a broken invariant.)
    pub fn of_holder(&mut self, slot: Slot) -> Option<&mut Group> {
        let at = *self.holder_group.get(slot as usize)?;
        self.entries.get_mut(at as usize)
    }

    /// The index `of_holder` reads for `slot` (`Queue::check`).
    pub fn holder_index(&self, slot: Slot) -> Option<u32> {
        self.holder_group.get(slot as usize).copied()
    }

    pub fn index(&self, name: &[u8]) -> Option<u32> {
        self.by_name.get(name).copied()
    }

    /// Takes the group out, with its name.
    pub fn remove(&mut self, name: &[u8]) -> Option<(Box<[u8]>, Group)> {
        let (name, at) = self.by_name.remove_entry(name)?;
        let group = std::mem::take(&mut self.entries[at as usize]);
        if self.by_name.is_empty() {
            // The last group gone: give the memory back.
            *self = GroupTable::new();
        } else {
            self.free.push(at);
            if self.free.len() > COMPACT_AT && self.free.len() > 2 * self.by_name.len() {
                self.compact();
            }
        }
        Some((name, group))
    }

    /// Gives back the room of forgotten groups once they far outnumber
    /// the groups left (a queue that had a million tenants and has a few
    /// now): the groups left move to the front, their holders' indexes
    /// with them. It costs as much as the groups left and their holders,
    /// fewer than the removals since the last time.
    fn compact(&mut self) {
        let mut entries = Vec::with_capacity(self.by_name.len());
        let mut last_holder: Option<Slot> = None;
        for at in self.by_name.values_mut() {
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
    pub fn iter(&self) -> impl Iterator<Item = (&Box<[u8]>, &Group)> + '_ {
        self.by_name
            .iter()
            .map(|(name, &at)| (name, &self.entries[at as usize]))
    }

    /// From `from` on, in name order.
    pub fn iter_from<'a>(
        &'a self,
        from: &[u8],
    ) -> impl Iterator<Item = (&'a Box<[u8]>, &'a Group)> + 'a {
        self.by_name
            .range::<[u8], _>((Bound::Included(from), Bound::Unbounded))
            .map(|(name, &at)| (name, &self.entries[at as usize]))
    }

    pub fn values(&self) -> impl Iterator<Item = &Group> + '_ {
        self.iter().map(|(_, group)| group)
    }

    pub fn names(&self) -> impl Iterator<Item = &Box<[u8]>> + '_ {
        self.by_name.keys()
    }

    /// Calls `f` on each group, in name order.
    pub fn for_each_mut(&mut self, mut f: impl FnMut(&[u8], &mut Group)) {
        for (name, &at) in &self.by_name {
            f(name, &mut self.entries[at as usize]);
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
        assert_eq!(t.of_holder(7).map(|g| g.ready), Some(3));
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
                t.at_mut(t.index(name).unwrap())
                    .holders
                    .remove(slot as Slot);
                assert!(t.remove(name).is_some());
            }
        }
        assert_eq!(t.len(), 2);
        assert!(t.entries.len() < 10, "{} entries kept", t.entries.len());
        for slot in [10, 50] {
            let name = format!("g{slot:03}").into_bytes();
            assert_eq!(t.holder_index(slot), t.index(&name), "slot {slot}");
            assert_eq!(
                t.of_holder(slot).and_then(|g| g.holders.first()),
                Some(slot)
            );
        }
    }
}
