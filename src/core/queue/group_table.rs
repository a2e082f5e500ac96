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

    /// The message at `slot` took a place in the group at index `at`.
    pub fn note_holder(&mut self, slot: Slot, at: u32) {
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
        }
        Some((name, group))
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
}
