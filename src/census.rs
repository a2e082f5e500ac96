//! How many queues this node holds and how many messages are in each state,
//! for INFO. Derived state, like the schedule: rebuilt from the keys on
//! load and promotion, updated by every command and tick that writes a
//! queue, and by keyspace events when a queue's keys change any other way
//! (replicated writes on a replica, DEL, EXPIRE, RESTORE, ...).

use std::cell::RefCell;
use std::collections::HashMap;

use crate::schedule::QueueRef;

/// Messages per state: delayed, ready, in flight, dead.
pub type Counts = [u64; 4];

#[derive(Debug, Default)]
pub struct Census {
    queues: HashMap<QueueRef, Counts>,
}

impl Census {
    /// `None`: the queue has no keys any more.
    pub fn set(&mut self, queue: QueueRef, counts: Option<Counts>) {
        match counts {
            Some(counts) => {
                self.queues.insert(queue, counts);
            }
            None => {
                self.queues.remove(&queue);
            }
        }
    }

    /// Forgets one database, or all of them (`None`).
    pub fn clear(&mut self, db: Option<i32>) {
        match db {
            Some(db) => self.queues.retain(|(q_db, _), _| *q_db != db),
            None => self.queues.clear(),
        }
    }

    /// Number of queues, and messages per state across them.
    pub fn totals(&self) -> (usize, Counts) {
        let mut sum = [0; 4];
        for counts in self.queues.values() {
            for (total, n) in sum.iter_mut().zip(counts) {
                *total += n;
            }
        }
        (self.queues.len(), sum)
    }
}

thread_local! {
    // Main thread only, as everything Redis calls.
    static CENSUS: RefCell<Census> = RefCell::new(Census::default());
}

pub fn set(queue: QueueRef, counts: Option<Counts>) {
    CENSUS.with(|c| c.borrow_mut().set(queue, counts));
}

pub fn clear(db: Option<i32>) {
    CENSUS.with(|c| c.borrow_mut().clear(db));
}

pub fn totals() -> (usize, Counts) {
    CENSUS.with(|c| c.borrow().totals())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn totals_follow_updates_removals_and_clears() {
        let mut c = Census::default();
        c.set((0, b"a".to_vec()), Some([1, 2, 3, 4]));
        c.set((0, b"b".to_vec()), Some([0, 0, 0, 0]));
        c.set((3, b"a".to_vec()), Some([10, 0, 0, 0]));
        assert_eq!(c.totals(), (3, [11, 2, 3, 4]));
        c.set((0, b"a".to_vec()), Some([0, 1, 0, 0]));
        assert_eq!(c.totals(), (3, [10, 1, 0, 0]));
        c.set((0, b"b".to_vec()), None);
        assert_eq!(c.totals().0, 2);
        c.clear(Some(3));
        assert_eq!(c.totals(), (1, [0, 1, 0, 0]));
        c.clear(None);
        assert_eq!(c.totals(), (0, [0; 4]));
    }
}
