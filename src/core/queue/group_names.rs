//! Groups in name order, each named by a 4-byte reference that the group
//! table resolves to a name (`GroupTable`): a lone group's is its holder's
//! slot, whose record holds the name; another's is its entry, which keeps
//! the name. Sorted runs of up to [`RUN`] references follow each other in a
//! vector, each under a lower bound (a copy of a name), as [`super::index`]
//! keeps the queue's keys; there are few runs, so the vector is small and
//! a binary search over it costs less than a B-tree.
//!
//! Why not a `BTreeMap` of names: a tenant's group of one message cost
//! about 33 bytes of tree node (its leaves about two-thirds full, names
//! arriving from several connections interleaved) and 16 for its own copy
//! of the name, which its message already holds. Here it costs its
//! reference and its name's first 8 bytes, 12 bytes in a run, about 17
//! with the runs' room. The prefix settles most comparisons without
//! reading the name where it lives; without it, removing a group cost
//! about 770 instructions against the B-tree's 500, with it about 600.
//!
//! Every call takes `names`, the table's resolver: the index keeps no
//! name but its bounds' copies, so a reference's name must not change
//! while it is filed (the table files a lone group's holder only while it
//! holds the place, and its record's group does not change then).
//!
//! Invariants (checked by `check`): an empty index has no run; otherwise
//! no run is empty or longer than `RUN`, the first bound is the empty
//! name, bounds rise, and each run is sorted with its names at least its
//! bound and below the next run's; `len` counts the references.

use std::cmp::Ordering;

use crate::core::heap::alloc_size;

/// References a run holds at most: one and a half kilobytes.
const RUN: usize = if cfg!(test) { 8 } else { 128 };

/// A reference as filed: with its name's first 8 bytes, which order most
/// names without reading them where they live (each such read is a
/// pointer to follow and a call to `memcmp`; numbers, UUIDs and other
/// names that differ early are told apart here).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Filed {
    /// `prefix` of the name, in two halves: 12 bytes in all, not 16.
    prefix: [u32; 2],
    value: u32,
}

type Run = Vec<Filed>;

/// A run's lower bound: a copy of a name, with its prefix.
#[derive(Debug, Default)]
struct Bound {
    prefix: [u32; 2],
    name: Box<[u8]>,
}

impl Bound {
    fn new(name: &[u8]) -> Bound {
        Bound {
            prefix: prefix(name),
            name: name.into(),
        }
    }
}

#[derive(Debug, Default)]
pub(super) struct GroupNames {
    /// Runs in name order, each under its lower bound.
    runs: Vec<(Bound, Run)>,
    len: usize,
}

/// A name's first 8 bytes, zeros after its end, as two big-endian
/// numbers. Where two names' prefixes differ they order the names as
/// their bytes do (a name that ends first has a zero where the other has
/// a byte, and is its prefix so far: it comes first either way); where
/// they are equal, the names decide.
fn prefix(name: &[u8]) -> [u32; 2] {
    let mut bytes = [0u8; 8];
    for (to, from) in bytes.iter_mut().zip(name) {
        *to = *from;
    }
    let value = u64::from_be_bytes(bytes);
    [(value >> 32) as u32, value as u32]
}

/// A name to look for, its prefix computed once.
struct Wanted<'a> {
    name: &'a [u8],
    prefix: [u32; 2],
}

impl<'a> Wanted<'a> {
    fn new(name: &'a [u8]) -> Wanted<'a> {
        Wanted {
            name,
            prefix: prefix(name),
        }
    }

    /// How a filed reference's name compares to the one wanted.
    #[inline]
    fn cmp<'n>(&self, filed: &Filed, names: &impl Fn(u32) -> &'n [u8]) -> Ordering {
        match filed.prefix.cmp(&self.prefix) {
            Ordering::Equal => names(filed.value).cmp(self.name),
            unequal => unequal,
        }
    }

    /// Whether a run's bound is not above the name wanted.
    #[inline]
    fn above(&self, bound: &Bound) -> bool {
        match bound.prefix.cmp(&self.prefix) {
            Ordering::Equal => &bound.name[..] <= self.name,
            unequal => unequal.is_lt(),
        }
    }
}

/// Where `name` is in a sorted run: `Ok(at)`, or where it would go.
fn search<'n>(
    run: &[Filed],
    name: &Wanted,
    names: &impl Fn(u32) -> &'n [u8],
) -> Result<usize, usize> {
    run.binary_search_by(|f| name.cmp(f, names))
}

/// `search` for a name to file: names mostly arrive in order, so the end
/// is looked at first.
fn search_end<'n>(
    run: &[Filed],
    name: &Wanted,
    names: &impl Fn(u32) -> &'n [u8],
) -> Result<usize, usize> {
    match run.last() {
        Some(last) if name.cmp(last, names).is_lt() => Err(run.len()),
        _ => search(run, name, names),
    }
}

/// Gives back room a run no longer needs, keeping twice what it holds.
fn give_room_back(run: &mut Run) {
    if run.capacity() > 4 * run.len() && run.capacity() > 8 {
        run.shrink_to(2 * run.len());
    }
}

impl GroupNames {
    pub const fn new() -> GroupNames {
        GroupNames {
            runs: Vec::new(),
            len: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The run that holds `name` if any does: the last whose bound is not
    /// above it. `None` when there is no run.
    fn run_of(&self, name: &Wanted) -> Option<usize> {
        // The first bound is the empty name, not above any name.
        let after = self.runs.partition_point(|(bound, _)| name.above(bound));
        after.checked_sub(1)
    }

    /// `run_of` for a name to file: the last run looked at first, as
    /// names mostly arrive in order.
    fn run_of_end(&self, name: &Wanted) -> Option<usize> {
        let (last, _) = self.runs.last()?;
        if name.above(last) {
            return Some(self.runs.len() - 1);
        }
        self.run_of(name)
    }

    /// The reference filed under `name`.
    pub fn get<'n>(&self, name: &[u8], names: impl Fn(u32) -> &'n [u8]) -> Option<u32> {
        let wanted = Wanted::new(name);
        let run = &self.runs[self.run_of(&wanted)?].1;
        let at = search(run, &wanted, &names).ok()?;
        Some(run[at].value)
    }

    /// The reference filed under `name`, to change for another of the
    /// same name.
    pub fn get_mut<'n>(
        &mut self,
        name: &[u8],
        names: impl Fn(u32) -> &'n [u8],
    ) -> Option<&mut u32> {
        let wanted = Wanted::new(name);
        let r = self.run_of(&wanted)?;
        let run = &mut self.runs[r].1;
        let at = search(run, &wanted, &names).ok()?;
        run.get_mut(at).map(|f| &mut f.value)
    }

    /// Files `value`, whose name is `name` and which the index does not
    /// hold yet.
    pub fn insert<'n>(&mut self, name: &[u8], value: u32, names: impl Fn(u32) -> &'n [u8]) {
        let wanted = Wanted::new(name);
        let filed = Filed {
            prefix: wanted.prefix,
            value,
        };
        let Some(r) = self.run_of_end(&wanted) else {
            // The first: one run, holding one (a queue of one group).
            self.runs = vec![(Bound::default(), vec![filed])];
            self.len = 1;
            return;
        };
        let last = r == self.runs.len() - 1;
        let run = &mut self.runs[r].1;
        let Err(at) = search_end(run, &wanted, &names) else {
            debug_assert!(false, "a name filed twice");
            return;
        };
        self.len += 1;
        if run.len() < RUN {
            if run.len() == run.capacity() && run.len() < RUN / 2 {
                // A small run doubles from one, as a queue of few groups
                // holds few.
                run.reserve_exact(run.len());
            }
            run.insert(at, filed);
            return;
        }
        if last && at == run.len() {
            // Names arriving in order fill a new last run: its room at
            // once, and the full one stays full.
            let mut next = Vec::with_capacity(RUN);
            next.push(filed);
            self.runs.push((Bound::new(name), next));
            return;
        }
        // A full run elsewhere: split in two, then file the reference.
        let mut upper = run.split_off(RUN / 2);
        if at <= RUN / 2 {
            run.insert(at, filed);
        } else {
            upper.insert(at - RUN / 2, filed);
        }
        let bound = Bound::new(names(upper[0].value));
        self.runs.insert(r + 1, (bound, upper));
    }

    /// Takes out the reference filed under `name`.
    pub fn remove<'n>(&mut self, name: &[u8], names: impl Fn(u32) -> &'n [u8]) -> Option<u32> {
        let wanted = Wanted::new(name);
        let r = self.run_of(&wanted)?;
        let run = &mut self.runs[r].1;
        let at = search(run, &wanted, &names).ok()?;
        let value = run.remove(at).value;
        self.len -= 1;
        if run.len() >= RUN / 4 {
            give_room_back(run);
        } else {
            self.tidy(r);
        }
        Some(value)
    }

    /// After a removal left run `r` small: joins it to the run before (or
    /// the run after to it) when they fit in one, drops it when empty, and
    /// gives all back when nothing is left.
    fn tidy(&mut self, r: usize) {
        let this = self.runs[r].1.len();
        if r > 0 && self.runs[r - 1].1.len() + this <= RUN {
            let (_, mut run) = self.runs.remove(r);
            self.runs[r - 1].1.append(&mut run);
        } else if r + 1 < self.runs.len() && self.runs[r + 1].1.len() + this <= RUN {
            let (_, mut next) = self.runs.remove(r + 1);
            self.runs[r].1.append(&mut next);
        } else if this == 0 {
            // The first run's bound is the empty name: the next one's
            // bound becomes it.
            let (bound, _) = self.runs.remove(r);
            if r == 0 {
                if let Some(first) = self.runs.first_mut() {
                    first.0 = bound;
                }
            }
        } else {
            give_room_back(&mut self.runs[r].1);
        }
        if self.len == 0 {
            self.runs = Vec::new();
        } else if self.runs.capacity() > 4 * self.runs.len() && self.runs.capacity() > 8 {
            self.runs.shrink_to(2 * self.runs.len());
        }
    }

    /// Every reference, in name order.
    pub fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.runs
            .iter()
            .flat_map(|(_, run)| run.iter().map(|f| f.value))
    }

    /// The references whose names are `from` or after, in name order.
    pub fn iter_from<'a, 'n>(
        &'a self,
        from: &[u8],
        names: impl Fn(u32) -> &'n [u8],
    ) -> impl Iterator<Item = u32> + 'a {
        let wanted = Wanted::new(from);
        let r = self.run_of(&wanted).unwrap_or(0);
        let runs = self.runs.get(r..).unwrap_or_default();
        let start = runs.first().map_or(0, |(_, run)| {
            run.partition_point(|f| wanted.cmp(f, &names).is_lt())
        });
        runs.iter()
            .flat_map(|(_, run)| run.iter().map(|f| f.value))
            .skip(start)
    }

    /// Every reference, in name order, to change for another of the same
    /// name.
    pub fn values_mut(&mut self) -> impl Iterator<Item = &mut u32> + '_ {
        self.runs
            .iter_mut()
            .flat_map(|(_, run)| run.iter_mut().map(|f| &mut f.value))
    }

    /// Heap bytes: the runs' room, their bounds and the vector of them.
    pub fn heap_bytes(&self) -> usize {
        use std::mem::size_of;
        alloc_size(self.runs.capacity() * size_of::<(Bound, Run)>())
            + self
                .runs
                .iter()
                .map(|(bound, run)| {
                    alloc_size(bound.name.len()) + alloc_size(run.capacity() * size_of::<Filed>())
                })
                .sum::<usize>()
    }

    /// Checks the invariants (see the module's doc) with the names the
    /// references have now (`Queue::check`, which must not panic).
    pub fn check<'n>(&self, names: impl Fn(u32) -> &'n [u8]) -> Result<(), String> {
        if self
            .runs
            .first()
            .is_some_and(|(bound, _)| !bound.name.is_empty())
        {
            return Err("the groups' names: the first run has a bound".into());
        }
        let mut count = 0;
        for (r, (bound, run)) in self.runs.iter().enumerate() {
            if bound.prefix != prefix(&bound.name) {
                return Err("the groups' names: a bound's prefix is wrong".into());
            }
            let bound = &bound.name;
            let next = self.runs.get(r + 1).map(|(b, _)| &b.name[..]);
            let sorted = run
                .windows(2)
                .all(|w| names(w[0].value) < names(w[1].value));
            let fits = run.iter().all(|f| {
                let name = names(f.value);
                name >= &bound[..] && next.is_none_or(|b| name < b) && f.prefix == prefix(name)
            });
            if run.is_empty() || run.len() > RUN || !sorted || !fits {
                return Err("the groups' names are out of order".into());
            }
            count += run.len();
        }
        if count != self.len {
            return Err(format!("the groups' names: len {} for {count}", self.len));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    /// References name themselves, as `t` and three digits.
    fn name(r: u32) -> Vec<u8> {
        format!("t{r:03}").into_bytes()
    }

    struct Names(Vec<Vec<u8>>);

    impl Names {
        fn new(n: u32) -> Names {
            Names((0..n).map(name).collect())
        }

        fn of<'a>(&'a self) -> impl Fn(u32) -> &'a [u8] + 'a {
            |r| self.0[r as usize].as_slice()
        }
    }

    #[test]
    fn random_inserts_and_removals_match_a_btree() {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        let names = Names::new(1000);
        for round in 0..200 {
            let mut index = GroupNames::new();
            let mut reference = BTreeMap::new();
            let span = 4 + next(60) as u32;
            for step in 0..300 {
                let r = next(u64::from(span)) as u32;
                if next(3) > 0 {
                    if let std::collections::btree_map::Entry::Vacant(e) = reference.entry(name(r))
                    {
                        e.insert(r);
                        index.insert(&name(r), r, names.of());
                    }
                } else {
                    let want = reference.remove(&name(r));
                    assert_eq!(
                        index.remove(&name(r), names.of()),
                        want,
                        "round {round} step {step}"
                    );
                }
                index
                    .check(names.of())
                    .unwrap_or_else(|e| panic!("round {round} step {step}: {e}"));
                assert_eq!(index.len(), reference.len());
                let probe = name(next(u64::from(span)) as u32);
                assert_eq!(
                    index.get(&probe, names.of()),
                    reference.get(&probe).copied()
                );
                let from: Vec<u32> = index.iter_from(&probe, names.of()).collect();
                let want: Vec<u32> = reference.range(probe.clone()..).map(|(_, &v)| v).collect();
                assert_eq!(from, want, "round {round} step {step} from {probe:?}");
            }
            let all: Vec<u32> = reference.values().copied().collect();
            assert_eq!(index.iter().collect::<Vec<_>>(), all);
        }
    }

    #[test]
    fn names_in_order_fill_their_runs() {
        let n = 10 * RUN as u32;
        let names = Names::new(n);
        let mut index = GroupNames::new();
        for r in 0..n {
            index.insert(&name(r), r, names.of());
        }
        index.check(names.of()).unwrap();
        assert_eq!(index.runs.len(), 10);
        assert!(index.runs.iter().all(|(_, run)| run.len() == RUN));
        assert_eq!(index.get_mut(&name(7), names.of()).copied(), Some(7));
        assert_eq!(index.get_mut(b"s", names.of()), None);
        assert_eq!(index.values_mut().count(), n as usize);
        for r in 0..n {
            assert_eq!(index.remove(&name(r), names.of()), Some(r));
            index.check(names.of()).unwrap();
        }
        assert!(index.is_empty() && index.runs.capacity() == 0);
    }

    #[test]
    fn prefixes_order_names_as_their_bytes_do() {
        let names: [&[u8]; 13] = [
            b"",
            b"\0",
            b"a",
            b"a\0",
            b"a\0\x01",
            b"ab",
            b"abcdefgh",
            b"abcdefgh\0",
            b"abcdefghi",
            b"abcdefgi",
            b"tenant-000123",
            b"\xff",
            b"\xff\xff\xff\xff\xff\xff\xff\xff\xff",
        ];
        let own = |r: u32| names[r as usize];
        for (r, a) in names.iter().enumerate() {
            let filed = Filed {
                prefix: prefix(a),
                value: r as u32,
            };
            for b in names {
                let got = Wanted::new(b).cmp(&filed, &own);
                assert_eq!(got, a.cmp(&b), "{a:?} against {b:?}");
            }
        }
    }

    #[test]
    fn a_name_out_of_place_is_reported() {
        let mut names = Names::new(3);
        let mut index = GroupNames::new();
        for r in 0..3 {
            index.insert(&name(r), r, names.of());
        }
        names.0[0] = b"z".to_vec();
        assert!(index.check(names.of()).is_err());
    }
}
