//! Every record of a queue, by slot number and by id.
//!
//! Records live in a slab of fixed-size chunks, so growing a big queue
//! never moves (copies) the records already there: a million-message queue
//! grows by one 80 KiB chunk at a time instead of reallocating 80 MB on the
//! main thread. The first chunk alone grows from one record, doubling, so a
//! small queue holds what it needs and not a whole chunk (most queues are
//! small: one per topic, tenant or shard). The indexes refer to a record by
//! its `u32` slot. The id table holds slots only and hashes an id by
//! reading it from its record, so each id is stored once; a queue of at
//! most [`SMALL`] messages has no table and compares ids one by one.

use hashbrown::{DefaultHashBuilder, HashTable};
use std::hash::BuildHasher;
use std::mem::size_of;

use super::record::Record;
use crate::core::heap::alloc_size;
use crate::core::lazyfree;

/// Records per chunk: as many as fill 80 KiB. A chunk is one allocation
/// of the server's jemalloc, whose large sizes come four to a power of two
/// (64, 80, 96, 112, 128 KiB...): 1024 records of 72 bytes would ask for
/// 72 KiB and be given 80, an eighth more than they use.
const CHUNK: usize = 80 * 1024 / size_of::<Option<Record>>();

/// Chunks above which an emptied slab is freed off the main thread: a
/// chunk's drop reads every slot, some 10 µs for 1,166 cold records.
const LAZY_CHUNKS: usize = 8;

/// Messages a queue finds by comparing ids, without an id table: a table
/// for one message costs more than the message's slot.
const SMALL: usize = 8;

/// A record's place in the slab; stable while the record lives.
pub type Slot = u32;

/// A record `find_entry` found: its slot, and its bucket in the id table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Found {
    pub slot: Slot,
    bucket: Option<usize>,
}

#[derive(Default)]
pub struct Messages {
    chunks: Vec<Vec<Option<Record>>>,
    /// Slots freed by deletes, reused last-freed first.
    free: Vec<Slot>,
    /// Empty (no allocation) until the queue holds more than [`SMALL`].
    ids: HashTable<Slot>,
    hasher: DefaultHashBuilder,
    len: usize,
    /// What the records' id-and-payload allocations take, as the
    /// allocator sizes them (for MEMORY USAGE).
    data_heap: usize,
}

impl Messages {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether ids are found through the table (else by comparing them).
    fn has_table(&self) -> bool {
        self.ids.capacity() > 0
    }

    /// Heap bytes of the slab, the free list and the id table, and of the
    /// records' id-and-payload allocations, as the allocator sizes them.
    pub fn heap_bytes(&self) -> usize {
        let record = size_of::<Option<Record>>();
        let chunks: usize = self
            .chunks
            .iter()
            .map(|c| alloc_size(c.capacity() * record))
            .sum();
        // What the table allocated, whatever its churn left it counting
        // as room (deleted entries keep theirs).
        let table = alloc_size(self.ids.allocation_size());
        alloc_size(self.chunks.capacity() * size_of::<Vec<Option<Record>>>())
            + chunks
            + alloc_size(self.free.capacity() * size_of::<Slot>())
            + table
            + self.data_heap
    }

    fn hash(hasher: &DefaultHashBuilder, id: &[u8]) -> u64 {
        hasher.hash_one(id)
    }

    /// The record at a slot an index holds: present by the queue's
    /// invariants (every index entry points at a live record).
    pub fn at(&self, slot: Slot) -> &Record {
        record_in(&self.chunks, slot)
    }

    /// The record in `slot`, if the slot is used.
    pub fn get(&self, slot: Slot) -> Option<&Record> {
        let (chunk, index) = position(slot);
        self.chunks.get(chunk)?.get(index)?.as_ref()
    }

    pub fn at_mut(&mut self, slot: Slot) -> &mut Record {
        let (chunk, index) = position(slot);
        match self.chunks.get_mut(chunk).and_then(|c| c.get_mut(index)) {
            Some(Some(record)) => record,
            _ => unreachable!("no record in slot {slot}"),
        }
    }

    pub fn find(&self, id: &[u8]) -> Option<Slot> {
        self.find_entry(id).map(|found| found.slot)
    }

    /// As `find`, remembering where the table holds the id, so that
    /// `remove_found` need not hash and compare it again (ACK finds each
    /// id, then removes it).
    pub fn find_entry(&self, id: &[u8]) -> Option<Found> {
        if !self.has_table() {
            // At most SMALL records, all in the first chunk.
            let slot = self.iter().find(|(_, r)| r.id() == id).map(|(s, _)| s)?;
            return Some(Found { slot, bucket: None });
        }
        let hash = Self::hash(&self.hasher, id);
        let chunks = &self.chunks;
        let mut slot = 0;
        let bucket = self.ids.find_bucket_index(hash, |&s| {
            slot = s;
            record_in(chunks, s).id() == id
        })?;
        Some(Found {
            slot,
            bucket: Some(bucket),
        })
    }

    /// Stores a record whose id is not in the queue yet.
    pub fn insert(&mut self, record: Record) -> Slot {
        self.data_heap += alloc_size(record.data_len());
        let slot = match self.free.pop() {
            Some(slot) => {
                let (chunk, index) = position(slot);
                self.chunks[chunk][index] = Some(record);
                slot
            }
            None => {
                if self.chunks.last().is_none_or(|c| c.len() == CHUNK) {
                    // Later chunks are whole from the start: the queue is big.
                    let capacity = if self.chunks.is_empty() { 1 } else { CHUNK };
                    // The list of chunks grows exactly too: one chunk, one slot.
                    self.chunks.reserve_exact(self.chunks.len().max(1));
                    self.chunks.push(Vec::with_capacity(capacity));
                }
                let index = self.chunks.len() - 1;
                let chunk = &mut self.chunks[index];
                if chunk.len() == chunk.capacity() {
                    // Only the first chunk fills up before CHUNK: it doubles.
                    chunk.reserve_exact(chunk.len().min(CHUNK - chunk.len()));
                }
                chunk.push(Some(record));
                (index * CHUNK + chunk.len() - 1) as Slot
            }
        };
        self.len += 1;
        if self.has_table() {
            self.index_id(slot);
        } else if self.len > SMALL {
            self.ids = HashTable::with_capacity(self.len);
            let slots: Vec<Slot> = self.iter().map(|(s, _)| s).collect();
            for slot in slots {
                self.index_id(slot);
            }
        }
        slot
    }

    /// Puts a stored record's slot in the id table.
    fn index_id(&mut self, slot: Slot) {
        let (chunks, hasher) = (&self.chunks, &self.hasher);
        let hash = Self::hash(hasher, record_in(chunks, slot).id());
        self.ids.insert_unique(hash, slot, |&s| {
            Self::hash(hasher, record_in(chunks, s).id())
        });
    }

    /// Removes and returns the record at `slot`.
    pub fn remove(&mut self, slot: Slot) -> Record {
        self.remove_found(Found { slot, bucket: None })
    }

    /// Removes the record `find_entry` found. Its bucket is used only if
    /// it still holds the slot (the table may have changed since), else
    /// the id is looked up again.
    pub fn remove_found(&mut self, found: Found) -> Record {
        let slot = found.slot;
        if self.has_table() {
            let at_bucket = found
                .bucket
                .and_then(|b| self.ids.get_bucket_entry(b).ok())
                .filter(|entry| *entry.get() == slot);
            if let Some(entry) = at_bucket {
                entry.remove();
            } else {
                let hash = Self::hash(&self.hasher, self.at(slot).id());
                if let Ok(entry) = self.ids.find_entry(hash, |&s| s == slot) {
                    entry.remove();
                }
            }
        }
        let (chunk, index) = position(slot);
        let Some(record) = self.chunks[chunk][index].take() else {
            unreachable!("no record in slot {slot}");
        };
        self.data_heap -= alloc_size(record.data_len());
        self.len -= 1;
        if self.len == 0 {
            // An emptied queue gives its memory back: a big one on the
            // lazy-free thread (see `lazyfree`), so the command or tick
            // that took its last message does not pause for it.
            let hasher = std::mem::take(&mut self.hasher);
            let emptied = std::mem::replace(
                self,
                Messages {
                    hasher,
                    ..Messages::default()
                },
            );
            if emptied.chunks.len() > LAZY_CHUNKS {
                lazyfree::drop_later((emptied.chunks, emptied.free, emptied.ids));
            }
        } else {
            self.free.push(slot);
        }
        record
    }

    /// Changes a record's payload bytes (a replacement); keeps the totals.
    pub fn replace_data(&mut self, slot: Slot, change: impl FnOnce(&mut Record)) {
        let before = alloc_size(self.at(slot).data_len());
        change(self.at_mut(slot));
        self.data_heap = self.data_heap - before + alloc_size(self.at(slot).data_len());
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
        let data: usize = m.iter().map(|(_, r)| alloc_size(r.data_len())).sum();
        assert_eq!(m.data_heap, data);
        assert_eq!(m.iter_from(2990).count(), 10);
        for slot in m.iter().map(|(s, _)| s).collect::<Vec<_>>() {
            m.remove(slot);
        }
        assert!(m.is_empty());
        assert_eq!(m.heap_bytes(), 0);
    }

    #[test]
    fn a_found_record_is_removed_even_after_the_table_moved_it() {
        let mut m = Messages::default();
        for i in 0..100 {
            m.insert(record(&format!("m{i}")));
        }
        let found = m.find_entry(b"m7").unwrap();
        let kept = m.find_entry(b"m8").unwrap();
        // Growing the table moves entries: the bucket found is stale.
        for i in 100..5000 {
            m.insert(record(&format!("m{i}")));
        }
        assert_eq!(m.remove_found(found).id(), b"m7");
        assert_eq!(m.find(b"m7"), None);
        assert_eq!(m.find(b"m8"), Some(kept.slot));
        // Fresh from the table: its own bucket.
        let found = m.find_entry(b"m8").unwrap();
        assert!(found.bucket.is_some());
        assert_eq!(m.remove_found(found).id(), b"m8");
        assert_eq!((m.find(b"m8"), m.len()), (None, 4998));
        for i in 9..5000 {
            assert!(m.find(format!("m{i}").as_bytes()).is_some(), "m{i}");
        }
    }

    #[test]
    fn a_small_queue_has_no_table_and_a_first_chunk_of_its_size() {
        let mut m = Messages::default();
        let slot = m.insert(record("only"));
        assert_eq!(m.chunks[0].capacity(), 1);
        assert!(!m.has_table());
        assert_eq!(m.find(b"only"), Some(slot));
        assert_eq!(m.find(b"other"), None);
        for i in 1..SMALL {
            m.insert(record(&format!("m{i}")));
        }
        assert!(!m.has_table());
        assert_eq!(m.chunks[0].capacity(), SMALL);
        m.insert(record("one more"));
        assert!(m.has_table(), "past SMALL, ids are found through a table");
        for i in 1..SMALL {
            assert!(m.find(format!("m{i}").as_bytes()).is_some());
        }
        assert_eq!(m.find(b"one more"), Some(SMALL as Slot));
    }
}
