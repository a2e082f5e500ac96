//! Every queue this node holds, across databases: its messages per state
//! (for INFO and DQ.QUEUES) and, on a master, when it next needs the timer
//! (its earliest due time, lease deadline or TTL).
//!
//! Derived state: rebuilt from the keys on load, promotion and SWAPDB,
//! kept by every command, replay and tick that writes a queue, and by
//! keyspace events when a key changes any other way (DEL, EXPIRE, RENAME,
//! RESTORE, ...). Commands only ever make a due time earlier; a tick
//! recomputes it from the key. A due time that turns out early (the message
//! was cancelled) costs one tick that finds nothing, never a missed
//! delivery.
//!
//! Thousands of queues are common, so an entry is small: each name is kept
//! once, in a slab of entries found by a table of handles (which hashes the
//! name read from the entry) and ordered in time by `(due, handle)` pairs.

use std::collections::BTreeSet;
use std::hash::BuildHasher;
use std::mem::size_of;

use hashbrown::{DefaultHashBuilder, HashTable};

/// Messages per state: delayed, ready, in flight, dead.
pub type Counts = [u64; 5];

/// A queue: its database and name.
pub type QueueRef = (i32, Vec<u8>);

type Handle = u32;

/// `next_due` of a queue with no timed work (or on a replica).
const NEVER: u64 = u64::MAX;

struct Entry {
    name: Box<[u8]>,
    counts: Counts,
    next_due: u64,
    db: i32,
}

#[derive(Default)]
pub struct Registry {
    entries: Vec<Option<Entry>>,
    /// Handles of emptied entries, reused first.
    free: Vec<Handle>,
    by_name: HashTable<Handle>,
    hasher: DefaultHashBuilder,
    /// The timer's schedule: queues with timed work, earliest first.
    by_time: BTreeSet<(u64, Handle)>,
    /// Messages per state across every queue.
    totals: Counts,
}

impl Registry {
    fn hash(hasher: &DefaultHashBuilder, db: i32, name: &[u8]) -> u64 {
        hasher.hash_one((db, name))
    }

    fn entry(&self, handle: Handle) -> &Entry {
        match self.entries.get(handle as usize) {
            Some(Some(entry)) => entry,
            _ => unreachable!("no queue under handle {handle}"),
        }
    }

    fn find(&self, db: i32, name: &[u8]) -> Option<Handle> {
        let hash = Self::hash(&self.hasher, db, name);
        self.by_name
            .find(hash, |&h| {
                let e = self.entry(h);
                e.db == db && *e.name == *name
            })
            .copied()
    }

    /// The queue's handle, made (with no messages and no timed work) if
    /// it is new.
    fn find_or_add(&mut self, db: i32, name: &[u8]) -> Handle {
        if let Some(handle) = self.find(db, name) {
            return handle;
        }
        let entry = Entry {
            name: name.into(),
            counts: [0; 5],
            next_due: NEVER,
            db,
        };
        let handle = match self.free.pop() {
            Some(handle) => {
                self.entries[handle as usize] = Some(entry);
                handle
            }
            None => {
                self.entries.push(Some(entry));
                (self.entries.len() - 1) as Handle
            }
        };
        let (entries, hasher) = (&self.entries, &self.hasher);
        let hash = Self::hash(hasher, db, name);
        self.by_name
            .insert_unique(hash, handle, |&h| match &entries[h as usize] {
                Some(e) => Self::hash(hasher, e.db, &e.name),
                None => 0,
            });
        handle
    }

    fn remove(&mut self, handle: Handle) {
        let Some(entry) = self.entries[handle as usize].take() else {
            return;
        };
        let hash = Self::hash(&self.hasher, entry.db, &entry.name);
        if let Ok(found) = self.by_name.find_entry(hash, |&h| h == handle) {
            found.remove();
        }
        self.by_time.remove(&(entry.next_due, handle));
        for (total, n) in self.totals.iter_mut().zip(entry.counts) {
            *total -= n;
        }
        if self.by_name.is_empty() {
            // The last queue went: give the memory back.
            *self = Registry {
                hasher: std::mem::take(&mut self.hasher),
                ..Registry::default()
            };
        } else {
            self.free.push(handle);
        }
    }

    /// A queue holds `counts` messages per state now; `None`: the queue
    /// is gone (its timed work with it).
    pub fn set_counts(&mut self, db: i32, name: &[u8], counts: Option<Counts>) {
        let Some(counts) = counts else {
            if let Some(handle) = self.find(db, name) {
                self.remove(handle);
            }
            return;
        };
        let handle = self.find_or_add(db, name);
        let Some(entry) = self.entries[handle as usize].as_mut() else {
            return;
        };
        for ((total, old), new) in self.totals.iter_mut().zip(entry.counts).zip(counts) {
            *total = *total - old + new;
        }
        entry.counts = counts;
    }

    pub fn knows(&self, db: i32, name: &[u8]) -> bool {
        self.find(db, name).is_some()
    }

    /// The queues of database `db`, unordered.
    pub fn names(&self, db: i32) -> Vec<Vec<u8>> {
        self.entries
            .iter()
            .flatten()
            .filter(|e| e.db == db)
            .map(|e| e.name.to_vec())
            .collect()
    }

    /// Number of queues, and messages per state across them.
    pub fn totals(&self) -> (usize, Counts) {
        (self.by_name.len(), self.totals)
    }

    /// Forgets one database's queues (FLUSHDB), or every queue (`None`).
    pub fn clear(&mut self, db: Option<i32>) {
        let Some(db) = db else {
            *self = Registry {
                hasher: std::mem::take(&mut self.hasher),
                ..Registry::default()
            };
            return;
        };
        let gone: Vec<Handle> = (0..self.entries.len() as Handle)
            .filter(|&h| {
                self.entries[h as usize]
                    .as_ref()
                    .is_some_and(|e| e.db == db)
            })
            .collect();
        for handle in gone {
            self.remove(handle);
        }
    }

    /// The queue has timed work at `at` (or earlier, if already known).
    pub fn note_due(&mut self, db: i32, name: &[u8], at: u64) {
        let handle = self.find_or_add(db, name);
        if at < self.entry(handle).next_due {
            self.reschedule(handle, at);
        }
    }

    /// The queue's exact next time, or `None` when it has nothing timed.
    pub fn set_due(&mut self, db: i32, name: &[u8], at: Option<u64>) {
        let handle = match at {
            Some(_) => self.find_or_add(db, name),
            None => match self.find(db, name) {
                Some(handle) => handle,
                None => return,
            },
        };
        self.reschedule(handle, at.unwrap_or(NEVER));
    }

    fn reschedule(&mut self, handle: Handle, at: u64) {
        let Some(entry) = self.entries[handle as usize].as_mut() else {
            return;
        };
        if entry.next_due != NEVER {
            self.by_time.remove(&(entry.next_due, handle));
        }
        entry.next_due = at;
        if at != NEVER {
            self.by_time.insert((at, handle));
        }
    }

    /// The earliest timed work of any queue.
    pub fn earliest(&self) -> Option<u64> {
        self.by_time.first().map(|&(at, _)| at)
    }

    /// Takes the queues due at `now` off the schedule, earliest first,
    /// with their times: the caller serves each and sets its next time.
    pub fn take_due(&mut self, now: u64) -> Vec<(u64, QueueRef)> {
        let mut due = Vec::new();
        while let Some(&(at, handle)) = self.by_time.first().filter(|&&(at, _)| at <= now) {
            self.by_time.pop_first();
            if let Some(entry) = self.entries[handle as usize].as_mut() {
                entry.next_due = NEVER;
                due.push((at, (entry.db, entry.name.to_vec())));
            }
        }
        due
    }

    /// Queues with timed work.
    pub fn scheduled(&self) -> usize {
        self.by_time.len()
    }

    /// Forgets every queue's timed work (a replica runs no timer).
    pub fn clear_due(&mut self) {
        for (_, handle) in std::mem::take(&mut self.by_time) {
            if let Some(entry) = self.entries[handle as usize].as_mut() {
                entry.next_due = NEVER;
            }
        }
    }

    /// Heap bytes one queue costs here with a name of `name_len` bytes,
    /// on average (MEMORY USAGE adds it to the queue's own): its entry
    /// (slab room grows by doubling), a handle in the table (at most
    /// seven eighths full), a place in the schedule (B-tree leaves about
    /// two thirds full) and its name.
    pub fn bytes_per_queue(name_len: usize) -> usize {
        let entry = size_of::<Option<Entry>>() * 3 / 2;
        let handle = (size_of::<Handle>() + 1) * 3 / 2;
        let scheduled = size_of::<(u64, Handle)>() * 3 / 2;
        entry + handle + scheduled + crate::core::heap::alloc_size(name_len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(name: &str) -> QueueRef {
        (0, name.as_bytes().to_vec())
    }

    #[test]
    fn counts_and_totals_follow_updates_removals_and_clears() {
        let mut r = Registry::default();
        r.set_counts(0, b"a", Some([1, 2, 3, 4, 5]));
        r.set_counts(0, b"b", Some([0, 0, 0, 0, 0]));
        r.set_counts(3, b"a", Some([10, 0, 0, 0, 0]));
        assert_eq!(r.totals(), (3, [11, 2, 3, 4, 5]));
        r.set_counts(0, b"a", Some([0, 1, 0, 0, 0]));
        assert_eq!(r.totals(), (3, [10, 1, 0, 0, 0]));
        r.set_counts(0, b"b", None);
        assert_eq!(r.totals().0, 2);
        assert!(!r.knows(0, b"b"));
        let mut names = r.names(0);
        names.sort();
        assert_eq!(names, [b"a".to_vec()]);
        r.clear(Some(3));
        assert_eq!(r.totals(), (1, [0, 1, 0, 0, 0]));
        assert!(r.knows(0, b"a") && !r.knows(3, b"a"));
        r.clear(None);
        assert_eq!(r.totals(), (0, [0; 5]));
    }

    #[test]
    fn note_keeps_the_earliest_and_set_overrides() {
        let mut r = Registry::default();
        r.note_due(0, b"a", 50);
        r.note_due(0, b"a", 70);
        assert_eq!(r.earliest(), Some(50));
        r.note_due(0, b"a", 20);
        assert_eq!(r.earliest(), Some(20));
        r.set_due(0, b"a", Some(90));
        assert_eq!(r.earliest(), Some(90));
        r.set_due(0, b"a", None);
        assert_eq!((r.scheduled(), r.earliest()), (0, None));
        assert!(
            r.knows(0, b"a"),
            "a queue with nothing timed is still known"
        );
        r.set_due(0, b"unknown", None);
        assert!(!r.knows(0, b"unknown"));
    }

    #[test]
    fn take_due_is_in_time_order_and_leaves_the_rest() {
        let mut r = Registry::default();
        r.note_due(0, b"late", 30);
        r.note_due(0, b"b", 10);
        r.note_due(1, b"b", 5);
        r.note_due(0, b"c", 20);
        assert_eq!(
            r.take_due(20),
            vec![(5, (1, b"b".to_vec())), (10, q("b")), (20, q("c"))]
        );
        assert_eq!(r.scheduled(), 1);
        assert_eq!(r.earliest(), Some(30));
        assert!(r.take_due(29).is_empty());
        // Taken off the schedule, not forgotten.
        assert_eq!(r.totals().0, 4);
        r.note_due(0, b"b", 40);
        assert_eq!(r.scheduled(), 2);
    }

    #[test]
    fn clearing_a_database_or_the_schedule_leaves_the_rest() {
        let mut r = Registry::default();
        r.note_due(0, b"a", 10);
        r.note_due(3, b"a", 20);
        r.clear(Some(0));
        assert_eq!((r.scheduled(), r.earliest()), (1, Some(20)));
        r.clear_due();
        assert_eq!((r.scheduled(), r.totals().0), (0, 1));
        r.clear(None);
        assert_eq!(r.totals().0, 0);
    }

    #[test]
    fn handles_are_reused_and_names_found_after_churn() {
        let mut r = Registry::default();
        for i in 0..1000 {
            r.set_counts(
                i % 4,
                format!("q{i}").as_bytes(),
                Some([i as u64, 0, 0, 0, 0]),
            );
            r.note_due(i % 4, format!("q{i}").as_bytes(), i as u64);
        }
        for i in (0..1000).step_by(2) {
            r.set_counts(i % 4, format!("q{i}").as_bytes(), None);
        }
        assert_eq!(r.totals().0, 500);
        assert_eq!(r.scheduled(), 500);
        for i in 0..1000 {
            r.set_counts(7, format!("n{i}").as_bytes(), Some([1, 0, 0, 0, 0]));
        }
        assert!(r.entries.len() <= 1500, "freed handles are reused");
        for i in 0..1000 {
            let name = format!("q{i}");
            assert_eq!(r.knows(i % 4, name.as_bytes()), i % 2 == 1, "{name}");
        }
        assert_eq!(r.totals().1[0], (1..1000).step_by(2).sum::<u64>() + 1000);
        assert_eq!(r.take_due(u64::MAX - 1).len(), 500);
    }
}
