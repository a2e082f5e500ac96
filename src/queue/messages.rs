//! Every record of a queue, by slot number and by id.
//!
//! Records live in a slab of fixed-size chunks, so growing the queue never
//! moves (copies) the records already there: a million-message queue grows
//! by one 80 KiB chunk at a time instead of reallocating 80 MB on the main
//! thread. The indexes refer to a record by its `u32` slot. The id table
//! holds slots only and hashes an id by reading it from its record, so each
//! id is stored once.

use hashbrown::{DefaultHashBuilder, HashTable};
use std::hash::BuildHasher;

use super::record::Record;

/// Records per chunk: as many as fill 80 KiB. A chunk is one allocation
/// of the server's jemalloc, whose large sizes come four to a power of two
/// (64, 80, 96, 112, 128 KiB...): 1024 records of 72 bytes would ask for
/// 72 KiB and be given 80, an eighth more than they use.
const CHUNK: usize = 80 * 1024 / std::mem::size_of::<Option<Record>>();

/// A record's place in the slab; stable while the record lives.
pub type Slot = u32;

#[derive(Default)]
pub struct Messages {
    chunks: Vec<Vec<Option<Record>>>,
    /// Slots freed by deletes, reused last-freed first.
    free: Vec<Slot>,
    ids: HashTable<Slot>,
    hasher: DefaultHashBuilder,
    len: usize,
    /// Sum of the records' id-and-payload bytes (for MEMORY USAGE).
    data_bytes: usize,
}

impl Messages {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn data_bytes(&self) -> usize {
        self.data_bytes
    }

    /// Slots the slab has room for (used or free).
    pub fn capacity(&self) -> usize {
        self.chunks.len() * CHUNK
    }

    pub fn id_table_capacity(&self) -> usize {
        self.ids.capacity()
    }

    fn hash(hasher: &DefaultHashBuilder, id: &[u8]) -> u64 {
        hasher.hash_one(id)
    }

    /// The record at a slot an index holds: present by the queue's
    /// invariants (every index entry points at a live record).
    pub fn at(&self, slot: Slot) -> &Record {
        record_in(&self.chunks, slot)
    }

    pub fn at_mut(&mut self, slot: Slot) -> &mut Record {
        let (chunk, index) = position(slot);
        match self.chunks.get_mut(chunk).and_then(|c| c.get_mut(index)) {
            Some(Some(record)) => record,
            _ => unreachable!("no record in slot {slot}"),
        }
    }

    pub fn find(&self, id: &[u8]) -> Option<Slot> {
        let hash = Self::hash(&self.hasher, id);
        let chunks = &self.chunks;
        self.ids
            .find(hash, |&slot| record_in(chunks, slot).id() == id)
            .copied()
    }

    /// Stores a record whose id is not in the queue yet.
    pub fn insert(&mut self, record: Record) -> Slot {
        let hash = Self::hash(&self.hasher, record.id());
        self.data_bytes += record.data_len();
        let slot = match self.free.pop() {
            Some(slot) => {
                let (chunk, index) = position(slot);
                self.chunks[chunk][index] = Some(record);
                slot
            }
            None => {
                if self.chunks.last().is_none_or(|c| c.len() == CHUNK) {
                    self.chunks.push(Vec::with_capacity(CHUNK));
                }
                let index = self.chunks.len() - 1;
                let chunk = &mut self.chunks[index];
                chunk.push(Some(record));
                (index * CHUNK + chunk.len() - 1) as Slot
            }
        };
        let (chunks, hasher) = (&self.chunks, &self.hasher);
        self.ids.insert_unique(hash, slot, |&s| {
            Self::hash(hasher, record_in(chunks, s).id())
        });
        self.len += 1;
        slot
    }

    /// Removes and returns the record at `slot`.
    pub fn remove(&mut self, slot: Slot) -> Record {
        let hash = Self::hash(&self.hasher, self.at(slot).id());
        if let Ok(entry) = self.ids.find_entry(hash, |&s| s == slot) {
            entry.remove();
        }
        let (chunk, index) = position(slot);
        let Some(record) = self.chunks[chunk][index].take() else {
            unreachable!("no record in slot {slot}");
        };
        self.data_bytes -= record.data_len();
        self.len -= 1;
        if self.len == 0 {
            // An emptied queue gives its memory back.
            *self = Messages {
                hasher: std::mem::take(&mut self.hasher),
                ..Messages::default()
            };
        } else {
            self.free.push(slot);
        }
        record
    }

    /// Changes a record's payload bytes (a replacement); keeps the totals.
    pub fn replace_data(&mut self, slot: Slot, change: impl FnOnce(&mut Record)) {
        let before = self.at(slot).data_len();
        change(self.at_mut(slot));
        self.data_bytes = self.data_bytes - before + self.at(slot).data_len();
    }

    /// Every record with its slot, in slot order.
    pub fn iter(&self) -> impl Iterator<Item = (Slot, &Record)> {
        self.iter_from(0)
    }

    /// The records from slot `from` on, in slot order (SCAN's cursor).
    pub fn iter_from(&self, from: Slot) -> impl Iterator<Item = (Slot, &Record)> {
        let (first_chunk, first_index) = position(from);
        self.chunks
            .iter()
            .enumerate()
            .skip(first_chunk)
            .flat_map(move |(c, chunk)| {
                let skip = if c == first_chunk { first_index } else { 0 };
                chunk
                    .iter()
                    .enumerate()
                    .skip(skip)
                    .filter_map(move |(i, r)| Some(((c * CHUNK + i) as Slot, r.as_ref()?)))
            })
    }

    /// One past the highest slot in use (or once used).
    pub fn slot_end(&self) -> Slot {
        self.chunks
            .last()
            .map_or(0, |c| ((self.chunks.len() - 1) * CHUNK + c.len()) as Slot)
    }
}

/// A slot's chunk and its place in that chunk.
fn position(slot: Slot) -> (usize, usize) {
    (slot as usize / CHUNK, slot as usize % CHUNK)
}

/// The record in `slot`, which the caller knows to be used (an index or
/// the id table holds it).
fn record_in(chunks: &[Vec<Option<Record>>], slot: Slot) -> &Record {
    let (chunk, index) = position(slot);
    match chunks.get(chunk).and_then(|c| c.get(index)) {
        Some(Some(record)) => record,
        _ => unreachable!("no record in slot {slot}"),
    }
}

#[cfg(test)]
mod tests {
    use super::super::record::{Options, Terms};
    use super::*;

    fn record(id: &str) -> Record {
        let terms = Terms {
            priority: 0,
            seq: 0,
            due_at: 0,
            added_at: 0,
            options: Options::default(),
        };
        Record::new(id.as_bytes(), b"payload", terms)
    }

    #[test]
    fn slots_are_stable_and_reused() {
        let mut m = Messages::default();
        let slots: Vec<Slot> = (0..3000)
            .map(|i| m.insert(record(&format!("m{i}"))))
            .collect();
        assert_eq!(m.len(), 3000);
        assert_eq!(m.find(b"m2999"), Some(slots[2999]));
        assert_eq!(m.at(slots[1500]).id(), b"m1500");
        let gone = m.remove(slots[10]);
        assert_eq!(gone.id(), b"m10");
        assert_eq!(m.find(b"m10"), None);
        let again = m.insert(record("new"));
        assert_eq!(again, slots[10], "a freed slot is reused");
        assert_eq!(m.find(b"new"), Some(again));
        assert_eq!(m.iter().count(), 3000);
        let total: usize = m.iter().map(|(_, r)| r.data_len()).sum();
        assert_eq!(m.data_bytes(), total);
        assert_eq!(m.iter_from(2990).count(), 10);
        for slot in m.iter().map(|(s, _)| s).collect::<Vec<_>>() {
            m.remove(slot);
        }
        assert!(m.is_empty());
        assert_eq!((m.capacity(), m.data_bytes()), (0, 0));
    }
}
