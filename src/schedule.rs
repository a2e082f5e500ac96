//! When each queue next needs the timer: the earliest due time or lease
//! deadline per queue, across all databases.
//!
//! It is derived state, rebuilt from the keys after a restart or failover.
//! Commands only ever make an entry earlier; a tick recomputes the exact
//! value from the keys. An entry that turns out early (the message was
//! cancelled) costs one tick that finds nothing, never a missed delivery.

use std::collections::{BTreeSet, HashMap};

/// A queue: its database and name.
pub type QueueRef = (i32, Vec<u8>);

#[derive(Debug, Default)]
pub struct Schedule {
    by_time: BTreeSet<(u64, QueueRef)>,
    by_queue: HashMap<QueueRef, u64>,
}

impl Schedule {
    /// The queue has work at `at` (or earlier, if already known).
    pub fn note(&mut self, queue: QueueRef, at: u64) {
        match self.by_queue.get(&queue) {
            Some(&known) if known <= at => {}
            _ => self.set(queue, Some(at)),
        }
    }

    /// The queue's exact next time, or `None` when it has nothing timed.
    pub fn set(&mut self, queue: QueueRef, at: Option<u64>) {
        if let Some(old) = self.by_queue.remove(&queue) {
            self.by_time.remove(&(old, queue.clone()));
        }
        if let Some(at) = at {
            self.by_time.insert((at, queue.clone()));
            self.by_queue.insert(queue, at);
        }
    }

    pub fn earliest(&self) -> Option<u64> {
        self.by_time.first().map(|(at, _)| *at)
    }

    /// Removes and returns the queues due at `now` with their times,
    /// earliest first.
    pub fn take_due(&mut self, now: u64) -> Vec<(u64, QueueRef)> {
        let mut due = Vec::new();
        while self.by_time.first().is_some_and(|(at, _)| *at <= now) {
            if let Some((at, queue)) = self.by_time.pop_first() {
                self.by_queue.remove(&queue);
                due.push((at, queue));
            }
        }
        due
    }

    pub fn clear(&mut self) {
        self.by_time.clear();
        self.by_queue.clear();
    }

    /// Forgets the queues of one database (FLUSHDB), or all (`None`).
    pub fn forget_db(&mut self, db: Option<i32>) {
        let Some(db) = db else {
            return self.clear();
        };
        self.by_time.retain(|(_, (q_db, _))| *q_db != db);
        self.by_queue.retain(|(q_db, _), _| *q_db != db);
    }

    pub fn len(&self) -> usize {
        self.by_queue.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_queue.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(name: &str) -> QueueRef {
        (0, name.as_bytes().to_vec())
    }

    #[test]
    fn note_keeps_the_earliest_and_set_overrides() {
        let mut s = Schedule::default();
        s.note(q("a"), 50);
        s.note(q("a"), 70);
        assert_eq!(s.earliest(), Some(50));
        s.note(q("a"), 20);
        assert_eq!(s.earliest(), Some(20));
        s.set(q("a"), Some(90));
        assert_eq!(s.earliest(), Some(90));
        s.set(q("a"), None);
        assert!(s.is_empty());
        assert_eq!(s.earliest(), None);
    }

    #[test]
    fn take_due_is_in_time_order_and_leaves_the_rest() {
        let mut s = Schedule::default();
        s.note(q("late"), 30);
        s.note(q("b"), 10);
        s.note((1, b"b".to_vec()), 5);
        s.note(q("c"), 20);
        assert_eq!(
            s.take_due(20),
            vec![(5, (1, b"b".to_vec())), (10, q("b")), (20, q("c"))]
        );
        assert_eq!(s.len(), 1);
        assert_eq!(s.earliest(), Some(30));
        assert!(s.take_due(29).is_empty());
    }

    #[test]
    fn forget_db_leaves_other_databases() {
        let mut s = Schedule::default();
        s.note(q("a"), 10);
        s.note((3, b"a".to_vec()), 20);
        s.forget_db(Some(0));
        assert_eq!((s.len(), s.earliest()), (1, Some(20)));
        s.forget_db(None);
        assert!(s.is_empty());
    }
}
