//! A sorted set of small keys held as runs of up to [`RUN`] keys, each run
//! under a lower bound in a B-tree: the queue's delayed, ready, in-flight,
//! dead and TTL indexes.
//!
//! Why not `BTreeSet`: a queue's keys mostly arrive in order (due times of
//! messages added with the same DELAY, ready messages promoted in due
//! order) and leave from the front (promotion, POP, expiry). A B-tree split
//! on every append leaves its nodes about half full, so a 24-byte key costs
//! some 53 bytes; runs that fill up before a new one starts cost the key
//! itself, and taking the front of a run is O(1). Inserting into the middle
//! of a run moves at most `RUN` keys.
//!
//! Invariants (checked by `check`): no run is empty; each run is sorted
//! and its keys are at least its bound; every key of a run is smaller than
//! the bound of the next run; `len` counts the keys.

use std::collections::{BTreeMap, VecDeque};

/// Keys a run holds at most.
const RUN: usize = 128;

/// Where a key belongs, as [`SortedIndex::place`] finds it.
enum Place {
    /// Below every run.
    Nowhere,
    Last,
    First,
    /// In a run between the first and the last.
    Between,
}

/// A run that [`SortedIndex::tidy`] may change: empty, small enough to
/// join the run before, or holding room for four times its keys.
fn needs_tidying<K>(run: &VecDeque<K>) -> bool {
    run.len() < RUN / 4 || run.capacity() > 4 * run.len()
}

#[derive(Debug, Clone)]
pub struct SortedIndex<K> {
    runs: BTreeMap<K, VecDeque<K>>,
    len: usize,
}

impl<K> Default for SortedIndex<K> {
    fn default() -> Self {
        SortedIndex {
            runs: BTreeMap::new(),
            len: 0,
        }
    }
}

impl<K: Ord + Copy> SortedIndex<K> {
    pub fn len(&self) -> usize {
        self.len
    }

    /// Which run holds `key` if any run does: the last one whose bound is
    /// not above it. The last and the first run are looked at first: keys
    /// mostly arrive at the end and leave from the front, and a range
    /// search costs two descents of the tree.
    fn place(&self, key: &K) -> Place {
        let Some((last, _)) = self.runs.last_key_value() else {
            return Place::Nowhere;
        };
        if last <= key {
            return Place::Last;
        }
        match self.runs.first_key_value() {
            Some((first, _)) if first > key => Place::Nowhere,
            Some((_, run)) if run.back().is_some_and(|back| key <= back) => Place::First,
            _ => Place::Between,
        }
    }

    fn run_of(&self, key: &K) -> Option<(K, &VecDeque<K>)> {
        let found = match self.place(key) {
            Place::Nowhere => None,
            Place::Last => self.runs.last_key_value(),
            Place::First => self.runs.first_key_value(),
            Place::Between => self.runs.range(..=key).next_back(),
        };
        found.map(|(&bound, run)| (bound, run))
    }

    fn run_of_mut(&mut self, key: &K) -> Option<(K, &mut VecDeque<K>)> {
        match self.place(key) {
            Place::Nowhere => None,
            Place::Last => self.runs.last_entry().map(|e| (*e.key(), e.into_mut())),
            Place::First => self.runs.first_entry().map(|e| (*e.key(), e.into_mut())),
            Place::Between => self
                .runs
                .range_mut(..=key)
                .next_back()
                .map(|(&bound, run)| (bound, run)),
        }
    }

    pub fn contains(&self, key: &K) -> bool {
        self.run_of(key)
            .is_some_and(|(_, run)| run.binary_search(key).is_ok())
    }

    pub fn first(&self) -> Option<&K> {
        self.runs.first_key_value().and_then(|(_, run)| run.front())
    }

    /// The smallest key greater than `key`.
    pub fn first_after(&self, key: &K) -> Option<&K> {
        if let Some((_, run)) = self.run_of(key) {
            let at = match run.binary_search(key) {
                Ok(i) => i + 1,
                Err(i) => i,
            };
            if let Some(next) = run.get(at) {
                return Some(next);
            }
        }
        use std::ops::Bound::{Excluded, Unbounded};
        self.runs
            .range((Excluded(key), Unbounded))
            .next()
            .and_then(|(_, run)| run.front())
    }

    pub fn iter(&self) -> impl Iterator<Item = &K> + '_ {
        self.runs.values().flatten()
    }

    /// Adds `key`; false when it was there already.
    pub fn insert(&mut self, key: K) -> bool {
        let Some((_, run)) = self.run_of_mut(&key) else {
            // Below every bound: the first run takes it under a new bound.
            let mut run = self.runs.pop_first().map_or_else(VecDeque::new, |(_, r)| r);
            run.push_front(key);
            self.put_run(run);
            self.len += 1;
            return true;
        };
        // Keys mostly arrive in order: past the back, no search.
        let at = match run.back() {
            Some(back) if *back < key => run.len(),
            _ => match run.binary_search(&key) {
                Ok(_) => return false,
                Err(at) => at,
            },
        };
        if run.len() < RUN {
            run.insert(at, key);
        } else if at == RUN {
            // Past the end of a full run: a new run, so that keys arriving
            // in order fill each run before the next starts.
            self.runs.insert(key, VecDeque::from([key]));
        } else {
            let mut upper = run.split_off(RUN / 2);
            if at <= RUN / 2 {
                run.insert(at, key);
            } else {
                upper.insert(at - RUN / 2, key);
            }
            self.put_run(upper);
        }
        self.len += 1;
        true
    }

    /// Files a non-empty run under its first key.
    fn put_run(&mut self, run: VecDeque<K>) {
        if let Some(&first) = run.front() {
            self.runs.insert(first, run);
        }
    }

    /// Removes `key`; false when it was not there.
    pub fn remove(&mut self, key: &K) -> bool {
        let Some((bound, run)) = self.run_of_mut(key) else {
            return false;
        };
        // Keys mostly leave from the front: no search.
        let at = match run.front() {
            Some(front) if front == key => 0,
            _ => match run.binary_search(key) {
                Ok(at) => at,
                Err(_) => return false,
            },
        };
        run.remove(at);
        let untidy = needs_tidying(run);
        self.len -= 1;
        if untidy {
            self.tidy(bound);
        }
        true
    }

    /// Takes the smallest key.
    pub fn pop_first(&mut self) -> Option<K> {
        let mut entry = self.runs.first_entry()?;
        let key = entry.get_mut().pop_front();
        if key.is_some() {
            self.len -= 1;
        }
        if needs_tidying(entry.get()) {
            let bound = *entry.key();
            self.tidy(bound);
        }
        key
    }

    /// After a removal from the run under `bound` that left it
    /// [`needs_tidying`]: an empty run goes; a
    /// small one joins the run before it when both fit in one, so that
    /// removals cannot leave many nearly empty runs; and a run holding far
    /// less than it has room for gives the room back.
    fn tidy(&mut self, bound: K) {
        let Some(len) = self.runs.get(&bound).map(VecDeque::len) else {
            return;
        };
        if len == 0 {
            self.runs.remove(&bound);
            return;
        }
        if len < RUN / 4 {
            let fits = self
                .runs
                .range(..bound)
                .next_back()
                .is_some_and(|(_, previous)| previous.len() + len <= RUN);
            if fits {
                if let Some(run) = self.runs.remove(&bound) {
                    if let Some((_, previous)) = self.runs.range_mut(..bound).next_back() {
                        previous.extend(run);
                    }
                }
                return;
            }
        }
        if let Some(run) = self.runs.get_mut(&bound) {
            if run.capacity() > 4 * run.len() && run.capacity() > 8 {
                run.shrink_to(2 * run.len());
            }
        }
    }

    /// Bytes held beyond the queue value itself: the runs' buffers and the
    /// B-tree of bounds (for MEMORY USAGE).
    pub fn heap_bytes(&self) -> usize {
        let key = std::mem::size_of::<K>();
        let entry = key + std::mem::size_of::<VecDeque<K>>();
        // B-tree leaves of 11 entries, about two thirds full.
        let tree = self.runs.len() * entry * 3 / 2;
        tree + self
            .runs
            .values()
            .map(|r| r.capacity() * key)
            .sum::<usize>()
    }

    /// The invariants in the module comment.
    pub fn check(&self) -> Result<(), String> {
        let mut previous: Option<K> = None;
        let mut len = 0;
        for (bound, run) in &self.runs {
            if run.is_empty() {
                return Err("an empty run".into());
            }
            if previous.is_some_and(|p| p >= *bound) {
                return Err("a run's bound is not above the run before".into());
            }
            if run.iter().zip(run.iter().skip(1)).any(|(a, b)| a >= b) {
                return Err("a run is not sorted".into());
            }
            if run.front().is_some_and(|f| f < bound) {
                return Err("a key below its run's bound".into());
            }
            previous = run.back().copied();
            len += run.len();
        }
        if len != self.len {
            return Err(format!("{len} keys, counted {}", self.len));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    /// Every operation against a BTreeSet, checked after each step.
    fn model(seed: u64, steps: usize, spread: u64) {
        let mut next = crate::queue::tests::xorshift(seed);
        let mut index = SortedIndex::default();
        let mut set = BTreeSet::new();
        let mut ascending = 0u64;
        for step in 0..steps {
            match next(10) {
                0..=3 => {
                    let k = next(spread);
                    assert_eq!(index.insert(k), set.insert(k), "step {step}");
                }
                4 | 5 => {
                    ascending += 1 + next(3);
                    let k = spread + ascending;
                    assert_eq!(index.insert(k), set.insert(k), "step {step}");
                }
                6 | 7 => {
                    let k = next(spread + ascending + 1);
                    assert_eq!(index.remove(&k), set.remove(&k), "step {step}");
                }
                8 => assert_eq!(index.pop_first(), set.pop_first(), "step {step}"),
                _ => {
                    let k = next(spread + ascending + 1);
                    assert_eq!(index.contains(&k), set.contains(&k));
                    assert_eq!(
                        index.first_after(&k),
                        set.range(k + 1..).next(),
                        "step {step}"
                    );
                }
            }
            index
                .check()
                .unwrap_or_else(|e| panic!("seed {seed} step {step}: {e}"));
            assert_eq!(index.len(), set.len());
            assert_eq!(index.first(), set.first());
        }
        assert!(index.iter().eq(set.iter()));
    }

    #[test]
    fn behaves_as_a_sorted_set() {
        for seed in 1..=8 {
            model(seed, 5_000, 50);
            model(seed, 5_000, 5_000);
        }
    }

    #[test]
    fn keys_in_order_fill_whole_runs() {
        let mut index = SortedIndex::default();
        for k in 0..10 * RUN as u64 {
            index.insert(k);
        }
        assert_eq!(index.runs.len(), 10);
        assert!(index.runs.values().all(|r| r.len() == RUN));
        // Taken from the front, runs go as they empty.
        for k in 0..5 * RUN as u64 {
            assert_eq!(index.pop_first(), Some(k));
        }
        assert_eq!(index.runs.len(), 5);
        index.check().unwrap();
    }

    #[test]
    fn removals_merge_small_runs_and_give_room_back() {
        let mut index = SortedIndex::default();
        let n = 20 * RUN as u64;
        for k in 0..n {
            index.insert(k);
        }
        for k in (0..n).filter(|k| k % 16 != 0) {
            assert!(index.remove(&k));
        }
        index.check().unwrap();
        assert_eq!(index.len(), (n / 16) as usize);
        // 160 keys left: at most a few runs, not twenty nearly empty ones.
        assert!(index.runs.len() <= 3, "{} runs", index.runs.len());
        let room: usize = index.runs.values().map(VecDeque::capacity).sum();
        assert!(room <= 4 * index.len(), "room for {room}");
    }
}
