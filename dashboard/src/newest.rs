//! The done tab's order: a queue's done messages newest finished first, a
//! page at a time.
//!
//! The server lists done messages earliest finished first (DQ.PEEK DONE,
//! the order RETAINMAX drops them in, at most 10,000 a call) or in storage
//! order (DQ.SCAN STATE DONE); neither starts from the newest. So a page
//! is picked here from every done message read once, keeping only the
//! page's rows: the `size` nearest the page's bound, in a heap, whatever
//! the number read (memory for one page, not for the done set).
//!
//! Pages are bounded by a message, not numbered: the next older page is
//! "older than the last row of this one", the next newer "newer than its
//! first row" (keyset paging). A page number would move under the reader:
//! every message finished meanwhile pushes each page one row older, so
//! "page 2" would repeat rows of page 1 or skip some, and a deep page
//! would cost as much to find as the whole set. A bound stays put: the
//! rows older than a given message are the same however many finish
//! after it.

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;

use dq_client::Entry;

/// A done message's place in the order: when it finished (Unix ms), then
/// its id, so that messages finished in the same millisecond keep one
/// order from page to page.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Key {
    pub finished: u64,
    pub id: Vec<u8>,
}

impl Key {
    fn of(e: &Entry) -> Key {
        Key {
            finished: e.time,
            id: e.id.clone(),
        }
    }

    /// The key as a query value, before percent-encoding: the finished
    /// time, `:` and the id (any bytes: the id is last, so a `:` in it
    /// is only the id's).
    pub fn to_param(&self) -> Vec<u8> {
        let mut out = format!("{}:", self.finished).into_bytes();
        out.extend_from_slice(&self.id);
        out
    }

    /// [`Key::to_param`] read back (the query already percent-decoded).
    pub fn from_param(value: &[u8]) -> Option<Key> {
        let colon = value.iter().position(|&b| b == b':')?;
        let (time, id) = (&value[..colon], &value[colon + 1..]);
        let digits = !time.is_empty() && time.iter().all(u8::is_ascii_digit);
        let finished = std::str::from_utf8(time).ok()?.parse().ok()?;
        (digits && !id.is_empty()).then(|| Key {
            finished,
            id: id.to_vec(),
        })
    }
}

/// Which page of the done tab: the newest, or the one just older or just
/// newer than a message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Bound {
    Newest,
    /// The messages finished before this one (the next page down).
    Older(Key),
    /// The messages finished after this one (the next page up).
    Newer(Key),
}

impl Bound {
    /// The page the query's `older` or `newer` names (neither: the newest).
    pub fn from_query(older: Option<&[u8]>, newer: Option<&[u8]>) -> Result<Bound, String> {
        let key = |name: &str, value: &[u8]| {
            Key::from_param(value).ok_or_else(|| {
                format!(
                    "{name} must be a finished time in Unix ms, ':' and a message id, as the \
                     done tab's links give it (e.g. {name}=1763900000000:order-17)"
                )
            })
        };
        match (older, newer) {
            (None, None) => Ok(Bound::Newest),
            (Some(v), None) => key("older", v).map(Bound::Older),
            (None, Some(v)) => key("newer", v).map(Bound::Newer),
            (Some(_), Some(_)) => Err("give older or newer, not both".into()),
        }
    }

    /// The query's field for this page (none for the newest).
    pub fn to_query(&self) -> Option<(&'static str, Vec<u8>)> {
        match self {
            Bound::Newest => None,
            Bound::Older(k) => Some(("older", k.to_param())),
            Bound::Newer(k) => Some(("newer", k.to_param())),
        }
    }
}

/// An entry ordered by its [`Key`], compared without copying the id.
struct ByKey(Entry);

impl ByKey {
    fn key(&self) -> (u64, &[u8]) {
        (self.0.time, &self.0.id)
    }
}

impl PartialEq for ByKey {
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key()
    }
}
impl Eq for ByKey {}
impl PartialOrd for ByKey {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for ByKey {
    fn cmp(&self, other: &Self) -> Ordering {
        self.key().cmp(&other.key())
    }
}

/// A page being picked from done messages offered one by one, in any
/// order, each once.
pub struct Pick {
    bound: Bound,
    size: usize,
    /// Newest and Older: the `size` newest candidates so far, the oldest
    /// of them on top (the one a newer candidate replaces).
    newest: BinaryHeap<Reverse<ByKey>>,
    /// Newer: the `size` oldest candidates so far, the newest on top.
    oldest: BinaryHeap<ByKey>,
    total: usize,
    /// Offered messages at or above the bound (Older), or above it
    /// (Newer): newer than every candidate.
    above: usize,
}

/// A picked page and where it lies among the done messages read.
#[derive(Debug, PartialEq, Eq)]
pub struct Page {
    /// Newest first.
    pub rows: Vec<Entry>,
    /// Done messages read.
    pub total: usize,
    /// Of those, how many finished after the first row: the rows are
    /// numbers `newer + 1` to `newer + rows.len()` of `total`.
    pub newer: usize,
    /// The page above: the newest when the newer messages fit on it (so
    /// that it is full), else the page up from the first row; None when
    /// nothing is newer.
    pub newer_page: Option<Bound>,
    /// The page below, from the last row; None when nothing is older.
    pub older_page: Option<Bound>,
}

impl Pick {
    pub fn new(bound: Bound, size: usize) -> Pick {
        Pick {
            bound,
            size: size.max(1),
            newest: BinaryHeap::new(),
            oldest: BinaryHeap::new(),
            total: 0,
            above: 0,
        }
    }

    pub fn offer(&mut self, e: Entry) {
        self.total += 1;
        let e = ByKey(e);
        fn bound(k: &Key) -> (u64, &[u8]) {
            (k.finished, &k.id)
        }
        match &self.bound {
            Bound::Older(k) if e.key() >= bound(k) => self.above += 1,
            Bound::Newer(k) if e.key() <= bound(k) => {}
            Bound::Newest | Bound::Older(_) => {
                if self.newest.len() < self.size {
                    self.newest.push(Reverse(e));
                } else if self.newest.peek().is_some_and(|Reverse(min)| *min < e) {
                    self.newest.pop();
                    self.newest.push(Reverse(e));
                }
            }
            Bound::Newer(_) => {
                self.above += 1;
                if self.oldest.len() < self.size {
                    self.oldest.push(e);
                } else if self.oldest.peek().is_some_and(|max| *max > e) {
                    self.oldest.pop();
                    self.oldest.push(e);
                }
            }
        }
    }

    pub fn finish(self) -> Page {
        let mut rows: Vec<Entry> = match self.bound {
            Bound::Newer(_) => self.oldest.into_iter().map(|e| e.0).collect(),
            _ => self.newest.into_iter().map(|Reverse(e)| e.0).collect(),
        };
        rows.sort_by(|a, b| (b.time, &b.id).cmp(&(a.time, &a.id)));
        // Newer counted every candidate; those picked are the rows.
        let newer = match self.bound {
            Bound::Newer(_) => self.above - rows.len(),
            _ => self.above,
        };
        let older = self.total - newer - rows.len();
        let (newer_page, older_page) = match (rows.first(), rows.last()) {
            (Some(first), Some(last)) => (
                match newer {
                    0 => None,
                    n if n <= self.size => Some(Bound::Newest),
                    _ => Some(Bound::Newer(Key::of(first))),
                },
                (older > 0).then(|| Bound::Older(Key::of(last))),
            ),
            // Nothing past the bound (dropped, purged since the link was
            // made): the way back is the newest page.
            _ => ((self.total > 0).then_some(Bound::Newest), None),
        };
        Page {
            rows,
            total: self.total,
            newer,
            newer_page,
            older_page,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(time: u64, id: &str) -> Entry {
        Entry {
            id: id.as_bytes().to_vec(),
            time,
            ..Entry::default()
        }
    }

    /// 23 done messages, finished in pairs of one millisecond (ties broken
    /// by id), offered in an order that is neither.
    fn done() -> Vec<Entry> {
        let mut all: Vec<Entry> = (0..23u64)
            .map(|i| entry(1000 + i / 2, &format!("m{:02}", (i * 7) % 23)))
            .collect();
        all.rotate_left(9);
        all.swap(2, 17);
        all
    }

    /// The order the tab must show: newest first, the larger id first.
    fn expected() -> Vec<Vec<u8>> {
        let mut all = done();
        all.sort_by(|a, b| (b.time, &b.id).cmp(&(a.time, &a.id)));
        all.into_iter().map(|e| e.id).collect()
    }

    fn pick(bound: Bound) -> Page {
        let mut p = Pick::new(bound, 5);
        for e in done() {
            p.offer(e);
        }
        p.finish()
    }

    fn ids(p: &Page) -> Vec<Vec<u8>> {
        p.rows.iter().map(|e| e.id.clone()).collect()
    }

    #[test]
    fn pages_down_and_up_cover_every_message_once_newest_first() {
        let want = expected();
        let mut seen = Vec::new();
        let mut page = pick(Bound::Newest);
        assert_eq!((page.newer, page.newer_page.clone()), (0, None));
        loop {
            assert_eq!(page.total, 23);
            assert_eq!(page.newer, seen.len(), "the rows' place");
            seen.extend(ids(&page));
            match page.older_page.clone() {
                Some(b) => page = pick(b),
                None => break,
            }
        }
        assert_eq!(seen, want);
        assert_eq!(page.rows.len(), 3, "23 = 4 pages of 5 and 3");
        // And back up from the last page: 5 at a time, then the newest
        // page, full, once the newer ones fit on it.
        let mut up = Vec::new();
        while let Some(b) = page.newer_page.clone() {
            page = pick(b);
            up.push((page.newer, ids(&page)));
        }
        assert_eq!(
            up,
            [
                (15, want[15..20].to_vec()),
                (10, want[10..15].to_vec()),
                (5, want[5..10].to_vec()),
                (0, want[..5].to_vec()),
            ]
        );
    }

    #[test]
    fn a_page_bounded_by_a_message_stays_put_as_newer_ones_finish() {
        let first = pick(Bound::Newest);
        let below = first.older_page.clone().unwrap();
        // Three newer messages finish, and the bound message itself is
        // dropped: the page below is the same rows.
        let mut p = Pick::new(below.clone(), 5);
        let gone = first.rows.last().unwrap().id.clone();
        for e in done().into_iter().filter(|e| e.id != gone) {
            p.offer(e);
        }
        for i in 0..3 {
            p.offer(entry(5000 + i, &format!("new{i}")));
        }
        let page = p.finish();
        assert_eq!(ids(&page), expected()[5..10].to_vec());
        assert_eq!(
            (page.total, page.newer),
            (25, 7),
            "4 kept of the 5 above, and 3 new"
        );
        // Up from there: past the five it came from, the 3 new are above
        // too, so not the newest page yet.
        let up = pick_with_new(page.newer_page.clone().unwrap());
        assert_eq!(ids(&up), expected()[..5].to_vec());
        assert_eq!(up.newer, 3);
        assert_eq!(up.newer_page, Some(Bound::Newest));
    }

    fn pick_with_new(bound: Bound) -> Page {
        let mut p = Pick::new(bound, 5);
        for e in done() {
            p.offer(e);
        }
        for i in 0..3 {
            p.offer(entry(5000 + i, &format!("new{i}")));
        }
        p.finish()
    }

    #[test]
    fn nothing_past_the_bound_leads_back_to_the_newest() {
        let page = pick(Bound::Older(Key {
            finished: 0,
            id: b"a".to_vec(),
        }));
        assert!(page.rows.is_empty());
        assert_eq!(
            (page.newer, page.newer_page, page.older_page),
            (23, Some(Bound::Newest), None)
        );
        let empty = Pick::new(Bound::Newest, 5).finish();
        assert_eq!(
            (empty.total, empty.newer_page, empty.older_page),
            (0, None, None)
        );
    }

    #[test]
    fn keys_travel_in_the_query_whatever_the_id() {
        let k = Key {
            finished: 1_763_900_000_000,
            id: b"a:b&c=\xff".to_vec(),
        };
        assert_eq!(k.to_param(), b"1763900000000:a:b&c=\xff");
        assert_eq!(Key::from_param(&k.to_param()), Some(k.clone()));
        let older = Bound::Older(k.clone());
        let (field, value) = older.to_query().unwrap();
        assert_eq!(field, "older");
        assert_eq!(Bound::from_query(Some(&value), None), Ok(older));
        assert_eq!(Bound::from_query(None, Some(&value)), Ok(Bound::Newer(k)));
        assert_eq!(Bound::from_query(None, None), Ok(Bound::Newest));
        assert_eq!(Bound::Newest.to_query(), None);
        for bad in [
            &b"5"[..],
            b":a",
            b"x:a",
            b"-1:a",
            b"5:",
            b"+5:a",
            b"99999999999999999999:a",
        ] {
            let e = Bound::from_query(Some(bad), None).unwrap_err();
            assert!(
                e.starts_with("older must be a finished time"),
                "{bad:?}: {e}"
            );
        }
        assert_eq!(
            Bound::from_query(Some(b"1:a"), Some(b"1:a")),
            Err("give older or newer, not both".into())
        );
    }
}
