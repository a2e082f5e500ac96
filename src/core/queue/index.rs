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
//!
//! Most queues are small, so an index of at most `RUN` keys is one buffer
//! with no tree at all, grown from one key and given back as it empties;
//! it becomes runs under a tree when it outgrows one run, and one again
//! when removals leave a single run.
//!
//! Invariants (checked by `check`): a small index is one sorted buffer of
//! at most `RUN` keys; otherwise there are at least two runs, none empty,
//! each sorted with its keys at least its bound, every key of a run
//! smaller than the bound of the next run; `len` counts the keys.

use std::collections::{BTreeMap, VecDeque};

use crate::core::heap::alloc_size;

/// Keys a run holds at most, unless the index says otherwise (its `R`).
pub const RUN: usize = 128;

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
fn needs_tidying<K, const R: usize>(run: &VecDeque<K>) -> bool {
    run.len() < R / 4 || run.capacity() > 4 * run.len()
}

/// Gives back room a run no longer needs, keeping twice what it holds.
fn give_room_back<K>(run: &mut VecDeque<K>) {
    if run.is_empty() {
        *run = VecDeque::new();
    } else if run.capacity() > 4 * run.len() && run.capacity() > 8 {
        run.shrink_to(2 * run.len());
    }
}

#[derive(Debug, Clone)]
enum Layout<K> {
    /// At most [`RUN`] keys, in one buffer grown a key at a time from one:
    /// a B-tree leaf costs some 650 bytes, more than a small queue's
    /// messages, and most queues are small.
    Small(VecDeque<K>),
    /// More keys: runs under a B-tree of bounds (never fewer than two).
    /// Boxed, so that an index is no bigger than its small form.
    Runs(Box<Runs<K>>),
}

#[derive(Debug, Clone)]
struct Runs<K> {
    tree: BTreeMap<K, VecDeque<K>>,
    len: usize,
}

/// `R`: the keys a run holds at most ([`RUN`] unless said otherwise).
#[derive(Debug, Clone)]
pub struct SortedIndex<K, const R: usize = RUN> {
    layout: Layout<K>,
}

impl<K, const R: usize> Default for SortedIndex<K, R> {
    fn default() -> Self {
        SortedIndex::new()
    }
}

impl<K, const R: usize> SortedIndex<K, R> {
    pub const fn new() -> Self {
        SortedIndex {
            layout: Layout::Small(VecDeque::new()),
        }
    }
}

/// Puts `key` at `at` of a run with room: past the back, as a push (a
/// general insert works out which side of the ring buffer to move).
fn put_at<K>(run: &mut VecDeque<K>, at: usize, key: K) {
    if at == run.len() {
        run.push_back(key);
    } else {
        run.insert(at, key);
    }
}

/// Where `key` belongs in a sorted run: its index, or `None` when the run
/// has it already. Keys mostly arrive in order: past the back, no search.
fn slot_in<K: Ord>(run: &VecDeque<K>, key: &K) -> Option<usize> {
    match run.back() {
        Some(back) if back < key => Some(run.len()),
        _ => run.binary_search(key).err(),
    }
}

impl<K: Ord + Copy, const R: usize> SortedIndex<K, R> {
    pub fn len(&self) -> usize {
        match &self.layout {
            Layout::Small(run) => run.len(),
            Layout::Runs(runs) => runs.len,
        }
    }

    /// Which run holds `key` if any run does: the last one whose bound is
    /// not above it. The last and the first run are looked at first: keys
    /// mostly arrive at the end and leave from the front, and a range
    /// search costs two descents of the tree.
    fn place(tree: &BTreeMap<K, VecDeque<K>>, key: &K) -> Place {
        let Some((last, _)) = tree.last_key_value() else {
            return Place::Nowhere;
        };
        if last <= key {
            return Place::Last;
        }
        match tree.first_key_value() {
            Some((first, _)) if first > key => Place::Nowhere,
            Some((_, run)) if run.back().is_some_and(|back| key <= back) => Place::First,
            _ => Place::Between,
        }
    }

    /// The run that holds `key`, if any can.
    fn run_of(&self, key: &K) -> Option<&VecDeque<K>> {
        let tree = match &self.layout {
            Layout::Small(run) => return Some(run),
            Layout::Runs(runs) => &runs.tree,
        };
        let found = match Self::place(tree, key) {
            Place::Nowhere => None,
            Place::Last => tree.last_key_value(),
            Place::First => tree.first_key_value(),
            Place::Between => tree.range(..=key).next_back(),
        };
        found.map(|(_, run)| run)
    }

    fn run_of_mut<'r>(
        tree: &'r mut BTreeMap<K, VecDeque<K>>,
        key: &K,
    ) -> Option<(K, &'r mut VecDeque<K>)> {
        match Self::place(tree, key) {
            Place::Nowhere => None,
            Place::Last => tree.last_entry().map(|e| (*e.key(), e.into_mut())),
            Place::First => tree.first_entry().map(|e| (*e.key(), e.into_mut())),
            Place::Between => tree
                .range_mut(..=key)
                .next_back()
                .map(|(&bound, run)| (bound, run)),
        }
    }

    pub fn contains(&self, key: &K) -> bool {
        self.run_of(key)
            .is_some_and(|run| run.binary_search(key).is_ok())
    }

    pub fn first(&self) -> Option<&K> {
        match &self.layout {
            Layout::Small(run) => run.front(),
            Layout::Runs(runs) => runs.tree.first_key_value().and_then(|(_, run)| run.front()),
        }
    }

    /// The smallest key greater than `key`.
    pub fn first_after(&self, key: &K) -> Option<&K> {
        if let Some(run) = self.run_of(key) {
            let at = match run.binary_search(key) {
                Ok(i) => i + 1,
                Err(i) => i,
            };
            if let Some(next) = run.get(at) {
                return Some(next);
            }
        }
        use std::ops::Bound::{Excluded, Unbounded};
        match &self.layout {
            Layout::Small(_) => None,
            Layout::Runs(runs) => runs
                .tree
                .range((Excluded(key), Unbounded))
                .next()
                .and_then(|(_, run)| run.front()),
        }
    }

    pub fn iter(&self) -> impl Iterator<Item = &K> + '_ {
        let (small, runs) = match &self.layout {
            Layout::Small(run) => (Some(run), None),
            Layout::Runs(runs) => (None, Some(&runs.tree)),
        };
        small
            .into_iter()
            .flatten()
            .chain(runs.into_iter().flat_map(|r| r.values().flatten()))
    }

    /// Room for `n` more keys arriving together (a POP's leases): one
    /// allocation, where the small form would double up to them a key at
    /// a time. Runs grow as they do.
    pub fn reserve(&mut self, n: usize) {
        if let Layout::Small(run) = &mut self.layout {
            let want = run.len().saturating_add(n).min(R);
            if want > run.capacity() {
                run.reserve_exact(want - run.len());
            }
        }
    }

    /// Adds `key`; false when it was there already.
    pub fn insert(&mut self, key: K) -> bool {
        if let Layout::Small(run) = &mut self.layout {
            let Some(at) = slot_in(run, &key) else {
                return false;
            };
            if run.len() < R {
                if run.len() == run.capacity() {
                    // Doubling from one: a one-message queue holds one key.
                    run.reserve_exact(run.len().max(1));
                }
                put_at(run, at, key);
                return true;
            }
            // A full run: from now on, runs under a tree.
            let run = std::mem::take(run);
            let mut tree = BTreeMap::new();
            let len = run.len();
            if let Some(&first) = run.front() {
                tree.insert(first, run);
            }
            self.layout = Layout::Runs(Box::new(Runs { tree, len }));
        }
        let Layout::Runs(runs) = &mut self.layout else {
            unreachable!("a small layout was handled above");
        };
        let tree = &mut runs.tree;
        // Keys mostly arrive past the last one: one descent of the tree,
        // not the three of finding the run.
        if let Some(mut last) = tree.last_entry() {
            if last.get().back().is_some_and(|back| *back < key) {
                if last.get().len() < R {
                    last.get_mut().push_back(key);
                } else {
                    // Keys arriving in order fill it: its room at once, not
                    // by seven doublings. Only the last run is ever part
                    // empty this way.
                    let mut run = VecDeque::with_capacity(R);
                    run.push_back(key);
                    tree.insert(key, run);
                }
                runs.len += 1;
                return true;
            }
        }
        let Some((_, run)) = Self::run_of_mut(tree, &key) else {
            // Below every bound: the first run takes it under a new bound,
            // or, when full, a run of its own goes first (keys arriving in
            // descending order must not grow one run without limit).
            match tree.first_entry() {
                Some(first) if first.get().len() < R => {
                    let mut run = first.remove();
                    run.push_front(key);
                    Self::put_run(tree, run);
                }
                _ => {
                    tree.insert(key, VecDeque::from([key]));
                }
            }
            runs.len += 1;
            return true;
        };
        let Some(at) = slot_in(run, &key) else {
            return false;
        };
        if run.len() < R {
            put_at(run, at, key);
        } else if at == R {
            // Past the end of a full run: a new run, so that keys arriving
            // in order fill each run before the next starts.
            tree.insert(key, VecDeque::from([key]));
        } else {
            let mut upper = run.split_off(R / 2);
            if at <= R / 2 {
                run.insert(at, key);
            } else {
                upper.insert(at - R / 2, key);
            }
            Self::put_run(tree, upper);
        }
        runs.len += 1;
        true
    }

    /// Files a non-empty run under its first key.
    fn put_run(tree: &mut BTreeMap<K, VecDeque<K>>, run: VecDeque<K>) {
        if let Some(&first) = run.front() {
            tree.insert(first, run);
        }
    }

    /// Removes `key`; false when it was not there.
    pub fn remove(&mut self, key: &K) -> bool {
        // Keys mostly leave from the front: one descent of the tree.
        if self.pop_first_if(|first| first == key).is_some() {
            return true;
        }
        let (bound, run) = match &mut self.layout {
            Layout::Small(run) => (None, run),
            Layout::Runs(runs) => match Self::run_of_mut(&mut runs.tree, key) {
                Some((bound, run)) => (Some(bound), run),
                None => return false,
            },
        };
        // The front of a later run needs no search either.
        let at = match run.front() {
            Some(front) if front == key => 0,
            _ => match run.binary_search(key) {
                Ok(at) => at,
                Err(_) => return false,
            },
        };
        if at == 0 {
            run.pop_front();
        } else {
            run.remove(at);
        }
        match bound {
            None => give_room_back(run),
            Some(bound) => {
                let untidy = needs_tidying::<K, R>(run);
                if let Layout::Runs(runs) = &mut self.layout {
                    runs.len -= 1;
                }
                if untidy {
                    self.tidy(bound);
                }
            }
        }
        true
    }

    /// Takes the smallest key.
    pub fn pop_first(&mut self) -> Option<K> {
        self.pop_first_if(|_| true)
    }

    /// Takes the smallest key if `take` accepts it.
    fn pop_first_if(&mut self, take: impl FnOnce(&K) -> bool) -> Option<K> {
        let other = |run: &VecDeque<K>| !run.front().is_some_and(take);
        match &mut self.layout {
            Layout::Small(run) => {
                if other(run) {
                    return None;
                }
                let key = run.pop_front();
                give_room_back(run);
                key
            }
            Layout::Runs(runs) => {
                let mut entry = runs.tree.first_entry()?;
                let run = entry.get_mut();
                if other(run) {
                    return None;
                }
                let key = run.pop_front();
                if key.is_some() {
                    runs.len -= 1;
                }
                // The first run has no run before it to join (`tidy` would
                // look for one, three descents of the tree, on each of its
                // last keys): it gives room back as it drains, and goes
                // when empty.
                if run.is_empty() {
                    let bound = *entry.key();
                    self.tidy(bound);
                } else {
                    give_room_back(run);
                }
                key
            }
        }
    }

    /// After a removal from the run under `bound` that left it
    /// [`needs_tidying`]: an empty run goes; a
    /// small one joins the run before it when both fit in one, so that
    /// removals cannot leave many nearly empty runs; and a run holding far
    /// less than it has room for gives the room back. One run left makes
    /// the index small again.
    fn tidy(&mut self, bound: K) {
        let Layout::Runs(runs) = &mut self.layout else {
            return;
        };
        Self::tidy_runs(&mut runs.tree, bound);
        if runs.tree.len() <= 1 {
            let mut run = runs
                .tree
                .pop_first()
                .map(|(_, run)| run)
                .unwrap_or_default();
            give_room_back(&mut run);
            self.layout = Layout::Small(run);
        }
    }

    fn tidy_runs(tree: &mut BTreeMap<K, VecDeque<K>>, bound: K) {
        let Some(len) = tree.get(&bound).map(VecDeque::len) else {
            return;
        };
        if len == 0 {
            tree.remove(&bound);
            return;
        }
        if len < R / 4 {
            let fits = tree
                .range(..bound)
                .next_back()
                .is_some_and(|(_, previous)| previous.len() + len <= R);
            if fits {
                if let Some(run) = tree.remove(&bound) {
                    if let Some((_, previous)) = tree.range_mut(..bound).next_back() {
                        previous.extend(run);
                    }
                }
                return;
            }
        }
        if let Some(run) = tree.get_mut(&bound) {
            give_room_back(run);
        }
    }

    /// Bytes held beyond the queue value itself: the runs' buffers and the
    /// B-tree of bounds (for MEMORY USAGE), as the allocator sizes them.
    pub fn heap_bytes(&self) -> usize {
        let key = std::mem::size_of::<K>();
        let buffer = |run: &VecDeque<K>| match run.capacity() {
            0 => 0,
            n => alloc_size(n * key),
        };
        match &self.layout {
            Layout::Small(run) => buffer(run),
            Layout::Runs(runs) => {
                let entry = key + std::mem::size_of::<VecDeque<K>>();
                // B-tree leaves of 11 entries, about two thirds full.
                let tree = runs.tree.len() * entry * 3 / 2;
                alloc_size(std::mem::size_of::<Runs<K>>())
                    + tree
                    + runs.tree.values().map(buffer).sum::<usize>()
            }
        }
    }

    /// The invariants in the module comment.
    pub fn check(&self) -> Result<(), String> {
        let mut previous: Option<K> = None;
        let mut len = 0;
        let runs: Vec<(Option<&K>, &VecDeque<K>)> = match &self.layout {
            Layout::Small(run) => {
                if run.len() > R {
                    return Err("a small index over its size".into());
                }
                vec![(None, run)]
            }
            Layout::Runs(runs) => {
                if runs.tree.len() < 2 {
                    return Err("runs under a tree for a small index".into());
                }
                runs.tree
                    .iter()
                    .map(|(bound, run)| (Some(bound), run))
                    .collect()
            }
        };
        for (bound, run) in runs {
            if let Some(bound) = bound {
                if run.is_empty() {
                    return Err("an empty run".into());
                }
                if previous.is_some_and(|p| p >= *bound) {
                    return Err("a run's bound is not above the run before".into());
                }
                if run.front().is_some_and(|f| f < bound) {
                    return Err("a key below its run's bound".into());
                }
            }
            if run.len() > R {
                return Err(format!("a run of {} keys", run.len()));
            }
            if run.iter().zip(run.iter().skip(1)).any(|(a, b)| a >= b) {
                return Err("a run is not sorted".into());
            }
            previous = run.back().copied();
            len += run.len();
        }
        if len != self.len() {
            return Err(format!("{len} keys, counted {}", self.len()));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    impl<K> SortedIndex<K> {
        /// The runs, one for a small index.
        fn runs(&self) -> Vec<&VecDeque<K>> {
            match &self.layout {
                Layout::Small(run) => vec![run],
                Layout::Runs(runs) => runs.tree.values().collect(),
            }
        }
    }
    use std::collections::BTreeSet;

    /// Every operation against a BTreeSet, checked after each step.
    fn model<const R: usize>(seed: u64, steps: usize, spread: u64) {
        let mut next = crate::core::testing::xorshift(seed);
        let mut index = SortedIndex::<u64, R>::default();
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
            model::<RUN>(seed, 5_000, 50);
            model::<RUN>(seed, 5_000, 5_000);
            // Runs of another size (ORDER FAIR's lines use longer ones).
            model::<8>(seed, 5_000, 5_000);
            model::<1024>(seed, 20_000, 50_000);
        }
    }

    #[test]
    fn keys_in_order_fill_whole_runs() {
        let mut index: SortedIndex<u64> = SortedIndex::default();
        for k in 0..10 * RUN as u64 {
            index.insert(k);
        }
        assert_eq!(index.runs().len(), 10);
        assert!(index.runs().into_iter().all(|r| r.len() == RUN));
        // Taken from the front, runs go as they empty.
        for k in 0..5 * RUN as u64 {
            assert_eq!(index.pop_first(), Some(k));
        }
        assert_eq!(index.runs().len(), 5);
        index.check().unwrap();
    }

    #[test]
    fn removals_merge_small_runs_and_give_room_back() {
        let mut index: SortedIndex<u64> = SortedIndex::default();
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
        assert!(index.runs().len() <= 3, "{} runs", index.runs().len());
        let room: usize = index.runs().into_iter().map(VecDeque::capacity).sum();
        assert!(room <= 4 * index.len(), "room for {room}");
    }

    #[test]
    fn a_small_index_is_one_buffer_grown_from_one_key() {
        let mut index: SortedIndex<u64> = SortedIndex::default();
        assert_eq!(index.heap_bytes(), 0);
        index.insert(7u64);
        assert!(matches!(&index.layout, Layout::Small(run) if run.capacity() == 1));
        for k in 0..RUN as u64 - 1 {
            index.insert(100 + k);
        }
        assert!(matches!(index.layout, Layout::Small(_)));
        index.insert(1_000);
        assert!(matches!(index.layout, Layout::Runs(_)), "outgrew one run");
        index.check().unwrap();
        // Drained, it is small again and holds nothing.
        while index.pop_first().is_some() {}
        assert!(matches!(&index.layout, Layout::Small(run) if run.capacity() == 0));
        assert_eq!(index.heap_bytes(), 0);
    }

    #[test]
    fn keys_in_descending_order_fill_runs_of_bounded_size() {
        let mut index: SortedIndex<u64> = SortedIndex::default();
        let n = 10 * RUN as u64;
        for k in (0..n).rev() {
            assert!(index.insert(k));
        }
        index.check().unwrap();
        assert!(index.runs().iter().all(|r| r.len() <= RUN));
        assert!(index.iter().copied().eq(0..n));
    }
}
