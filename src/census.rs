//! How many queues this node holds and how many messages are in each state,
//! for INFO. Derived state, like the schedule: rebuilt from the keys on
//! load and promotion, updated by every command, replay and tick that
//! writes a queue, and by keyspace events when a queue's key changes any
//! other way (DEL, EXPIRE, RENAME, RESTORE, ...).

use std::cell::RefCell;

// hashbrown's default hasher, not std's SipHash: every write command
// updates its queue's entry, and the names are the server's own keys.
use hashbrown::HashMap;

/// Messages per state: delayed, ready, in flight, dead.
pub type Counts = [u64; 4];

#[derive(Debug, Default)]
pub struct Census {
    /// Per database, per queue name: looked up by borrowed name, so that
    /// updating a known queue (every write command) allocates nothing.
    queues: HashMap<i32, HashMap<Vec<u8>, Counts>>,
}

impl Census {
    /// `None`: the queue has no keys any more.
    pub fn set(&mut self, db: i32, name: &[u8], counts: Option<Counts>) {
        match counts {
            Some(counts) => {
                let queues = self.queues.entry(db).or_default();
                match queues.get_mut(name) {
                    Some(known) => *known = counts,
                    None => {
                        queues.insert(name.to_vec(), counts);
                    }
                }
            }
            None => {
                if let Some(queues) = self.queues.get_mut(&db) {
                    queues.remove(name);
                }
            }
        }
    }

    pub fn knows(&self, db: i32, name: &[u8]) -> bool {
        self.queues.get(&db).is_some_and(|q| q.contains_key(name))
    }

    /// Forgets one database, or all of them (`None`).
    pub fn clear(&mut self, db: Option<i32>) {
        match db {
            Some(db) => {
                self.queues.remove(&db);
            }
            None => self.queues.clear(),
        }
    }

    /// The names of database `db`'s queues, unordered.
    pub fn names(&self, db: i32) -> Vec<Vec<u8>> {
        self.queues
            .get(&db)
            .map_or_else(Vec::new, |q| q.keys().cloned().collect())
    }

    /// Number of queues, and messages per state across them.
    pub fn totals(&self) -> (usize, Counts) {
        let mut sum = [0; 4];
        let mut queues = 0;
        for counts in self.queues.values().flat_map(HashMap::values) {
            queues += 1;
            for (total, n) in sum.iter_mut().zip(counts) {
                *total += n;
            }
        }
        (queues, sum)
    }
}

thread_local! {
    // Main thread only, as everything Redis calls.
    static CENSUS: RefCell<Census> = RefCell::new(Census::default());
}

pub fn set(db: i32, name: &[u8], counts: Option<Counts>) {
    CENSUS.with(|c| c.borrow_mut().set(db, name, counts));
}

pub fn knows(db: i32, name: &[u8]) -> bool {
    CENSUS.with(|c| c.borrow().knows(db, name))
}

pub fn clear(db: Option<i32>) {
    CENSUS.with(|c| c.borrow_mut().clear(db));
}

pub fn names(db: i32) -> Vec<Vec<u8>> {
    CENSUS.with(|c| c.borrow().names(db))
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
        c.set(0, b"a", Some([1, 2, 3, 4]));
        c.set(0, b"b", Some([0, 0, 0, 0]));
        c.set(3, b"a", Some([10, 0, 0, 0]));
        assert_eq!(c.totals(), (3, [11, 2, 3, 4]));
        c.set(0, b"a", Some([0, 1, 0, 0]));
        assert_eq!(c.totals(), (3, [10, 1, 0, 0]));
        c.set(0, b"b", None);
        assert_eq!(c.totals().0, 2);
        c.clear(Some(3));
        assert_eq!(c.totals(), (1, [0, 1, 0, 0]));
        c.clear(None);
        assert_eq!(c.totals(), (0, [0; 4]));
    }
}
