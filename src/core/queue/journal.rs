//! A queue's event log (DQ.CONFIG SET EVENTS n, DQ.EVENTS): one entry per
//! change of a message's state, and a few per queue, numbered from 1 by a
//! `seq` that only grows and is kept with the queue, so a reader resumes
//! after the last seq it saw. Only the last `max` entries are kept; a reader
//! asking for trimmed ones is told so (see [`Journal::read`]).
//!
//! Entries are written by the queue's own transitions (`Queue::note`), the
//! same code a command, the timer, a replica and an AOF replay run, so
//! every copy of a queue holds the same entries.

use std::collections::VecDeque;

use crate::core::heap::alloc_size;

/// What happened. The names are DQ.EVENTS' `type` field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Added,
    Replaced,
    Ready,
    Delivered,
    Done,
    Retry,
    Dead,
    Cancelled,
    Redriven,
    Progress,
    Dropped,
    Purged,
    Paused,
    Resumed,
}

impl Kind {
    pub const ALL: [Kind; 14] = [
        Kind::Added,
        Kind::Replaced,
        Kind::Ready,
        Kind::Delivered,
        Kind::Done,
        Kind::Retry,
        Kind::Dead,
        Kind::Cancelled,
        Kind::Redriven,
        Kind::Progress,
        Kind::Dropped,
        Kind::Purged,
        Kind::Paused,
        Kind::Resumed,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Kind::Added => "added",
            Kind::Replaced => "replaced",
            Kind::Ready => "ready",
            Kind::Delivered => "delivered",
            Kind::Done => "done",
            Kind::Retry => "retry",
            Kind::Dead => "dead",
            Kind::Cancelled => "cancelled",
            Kind::Redriven => "redriven",
            Kind::Progress => "progress",
            Kind::Dropped => "dropped",
            Kind::Purged => "purged",
            Kind::Paused => "paused",
            Kind::Resumed => "resumed",
        }
    }

    /// The stored code (its place in [`Kind::ALL`]).
    pub fn code(self) -> u8 {
        self as u8
    }

    pub fn from_code(code: u8) -> Option<Kind> {
        Kind::ALL.get(usize::from(code)).copied()
    }
}

/// One event. 32 bytes, and one allocation holding its id and detail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Unix ms of the change.
    pub at: u64,
    /// The message's delivery number; 0 when it has none (never
    /// delivered, or a queue-wide event).
    pub attempt: u32,
    pub kind: Kind,
    has_detail: bool,
    id_len: u16,
    /// The id (empty for a queue-wide event), then the detail.
    data: Box<[u8]>,
}

impl Entry {
    pub fn new(at: u64, kind: Kind, id: &[u8], attempt: u32, detail: Option<&[u8]>) -> Entry {
        let detail_bytes = detail.unwrap_or_default();
        let mut data = Vec::with_capacity(id.len() + detail_bytes.len());
        data.extend_from_slice(id);
        data.extend_from_slice(detail_bytes);
        Entry {
            at,
            attempt,
            kind,
            has_detail: detail.is_some(),
            // Ids are at most MAX_ID_LEN bytes, checked by every caller.
            id_len: id.len() as u16,
            data: data.into_boxed_slice(),
        }
    }

    /// The message's id; `None` for a queue-wide event.
    pub fn id(&self) -> Option<&[u8]> {
        (self.id_len > 0).then(|| &self.data[..usize::from(self.id_len)])
    }

    pub fn detail(&self) -> Option<&[u8]> {
        self.has_detail
            .then(|| &self.data[usize::from(self.id_len)..])
    }

    /// Makes this entry another of the same id and detail length, in its
    /// own allocation.
    fn refill(&mut self, at: u64, kind: Kind, id: &[u8], attempt: u32, detail: Option<&[u8]>) {
        let (id_part, detail_part) = self.data.split_at_mut(id.len());
        id_part.copy_from_slice(id);
        detail_part.copy_from_slice(detail.unwrap_or_default());
        self.at = at;
        self.attempt = attempt;
        self.kind = kind;
        self.has_detail = detail.is_some();
        self.id_len = id.len() as u16;
    }

    fn heap_bytes(&self) -> usize {
        alloc_size(self.data.len())
    }
}

const _: () = assert!(std::mem::size_of::<Entry>() == 32);

/// The log: the newest seq written, and the last `max` entries.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Journal {
    /// The newest seq written (0: none yet). Kept when entries are not.
    last_seq: u64,
    /// How many entries are kept (DQ.CONFIG SET EVENTS; 0: none written).
    max: u64,
    entries: VecDeque<Entry>,
}

/// Why a read has nothing to return.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gap {
    /// The oldest seq still kept (the next to be written when none is).
    pub oldest: u64,
}

impl Journal {
    pub const fn new() -> Journal {
        Journal {
            last_seq: 0,
            max: 0,
            entries: VecDeque::new(),
        }
    }

    /// A loaded log: `entries` are the ones up to `last_seq`.
    pub fn restore(last_seq: u64, max: u64, entries: VecDeque<Entry>) -> Option<Journal> {
        (entries.len() as u64 <= max.min(last_seq)).then_some(Journal {
            last_seq,
            max,
            entries,
        })
    }

    /// Whether events are written.
    pub fn is_on(&self) -> bool {
        self.max > 0
    }

    /// Nothing to keep: no seq was ever written, and none will be.
    pub fn is_empty(&self) -> bool {
        self.last_seq == 0 && self.max == 0
    }

    pub fn last_seq(&self) -> u64 {
        self.last_seq
    }

    pub fn max(&self) -> u64 {
        self.max
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// The seq of the oldest entry kept; when none is, the next one.
    pub fn oldest(&self) -> u64 {
        self.last_seq + 1 - self.entries.len() as u64
    }

    /// Keeps at most `max` entries from now on, dropping the oldest beyond.
    pub fn set_max(&mut self, max: u64) {
        self.max = max;
        self.trim();
        if max == 0 {
            self.entries = VecDeque::new();
        }
    }

    fn trim(&mut self) {
        while self.entries.len() as u64 > self.max {
            self.entries.pop_front();
        }
    }

    /// Writes one event (the caller checked [`Journal::is_on`]).
    pub fn push(&mut self, entry: Entry) {
        self.last_seq += 1;
        if self.entries.len() as u64 >= self.max {
            self.entries.pop_front();
        }
        self.entries.push_back(entry);
    }

    /// Writes one event from its parts (the caller checked
    /// [`Journal::is_on`]). A full log reuses the allocation of the entry it
    /// drops when it has the same size, as it mostly has (ids of one
    /// length, no detail): a full log then writes without allocating.
    pub fn write(&mut self, at: u64, kind: Kind, id: &[u8], attempt: u32, detail: Option<&[u8]>) {
        let size = id.len() + detail.map_or(0, <[u8]>::len);
        let dropped = if self.entries.len() as u64 >= self.max {
            self.entries.pop_front()
        } else {
            None
        };
        let entry = match dropped {
            Some(mut old) if old.data.len() == size => {
                old.refill(at, kind, id, attempt, detail);
                old
            }
            _ => Entry::new(at, kind, id, attempt, detail),
        };
        self.last_seq += 1;
        self.entries.push_back(entry);
    }

    /// The entries with seq above `after`, oldest first, at most `count`,
    /// each with its seq. `after` below what is kept is a [`Gap`]; above the
    /// newest seq, nothing.
    pub fn read(
        &self,
        after: u64,
        count: usize,
    ) -> Result<impl Iterator<Item = (u64, &Entry)>, Gap> {
        let oldest = self.oldest();
        if after + 1 < oldest {
            return Err(Gap { oldest });
        }
        let skip = (after + 1 - oldest).min(self.entries.len() as u64) as usize;
        Ok(self
            .entries
            .iter()
            .enumerate()
            .skip(skip)
            .take(count)
            .map(move |(i, e)| (oldest + i as u64, e)))
    }

    /// Every entry kept, oldest first.
    pub fn entries(&self) -> impl Iterator<Item = &Entry> {
        self.entries.iter()
    }

    /// Heap bytes: the ring and each entry's allocation.
    pub fn mem_usage(&self) -> usize {
        alloc_size(self.entries.capacity() * std::mem::size_of::<Entry>())
            + self.entries.iter().map(Entry::heap_bytes).sum::<usize>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(n: u64) -> Entry {
        Entry::new(n, Kind::Added, format!("m{n}").as_bytes(), 0, None)
    }

    fn seqs(j: &Journal, after: u64, count: usize) -> Result<Vec<u64>, Gap> {
        j.read(after, count).map(|it| it.map(|(s, _)| s).collect())
    }

    #[test]
    fn keeps_the_last_max_and_says_where_a_reader_fell_behind() {
        let mut j = Journal::default();
        assert!(!j.is_on());
        assert_eq!(seqs(&j, 0, 10), Ok(vec![]));
        j.set_max(3);
        for n in 1..=5 {
            j.push(entry(n));
        }
        assert_eq!((j.last_seq(), j.len(), j.oldest()), (5, 3, 3));
        assert_eq!(seqs(&j, 2, 10), Ok(vec![3, 4, 5]));
        assert_eq!(seqs(&j, 3, 1), Ok(vec![4]));
        assert_eq!(seqs(&j, 5, 10), Ok(vec![]));
        assert_eq!(seqs(&j, 9, 10), Ok(vec![]), "a seq not written yet");
        assert_eq!(seqs(&j, 1, 10), Err(Gap { oldest: 3 }));
        assert_eq!(seqs(&j, 0, 10), Err(Gap { oldest: 3 }));
        // Fewer kept trims at once; none kept keeps the seq.
        j.set_max(1);
        assert_eq!(seqs(&j, 4, 10), Ok(vec![5]));
        j.set_max(0);
        assert_eq!((j.last_seq(), j.len(), j.oldest()), (5, 0, 6));
        assert_eq!(seqs(&j, 5, 10), Ok(vec![]));
        assert_eq!(seqs(&j, 4, 10), Err(Gap { oldest: 6 }));
        assert!(!j.is_empty());
    }

    #[test]
    fn a_full_log_writes_into_the_entry_it_drops_and_keeps_what_push_keeps() {
        // (id, detail, kind, attempt)
        type Write = (&'static [u8], Option<&'static [u8]>, Kind, u32);
        let writes: [Write; 7] = [
            (b"aa", None, Kind::Added, 0),
            (b"bb", None, Kind::Delivered, 1),
            (b"aa", Some(b"x"), Kind::Retry, 1),
            (b"cc", None, Kind::Done, 3),
            (b"", Some(b"12"), Kind::Purged, 0),
            (b"dddd", None, Kind::Added, 0),
            (b"ee", Some(b""), Kind::Progress, 2),
        ];
        let (mut written, mut pushed) = (Journal::new(), Journal::new());
        written.set_max(2);
        pushed.set_max(2);
        for (n, (id, detail, kind, attempt)) in writes.into_iter().enumerate() {
            written.write(n as u64, kind, id, attempt, detail);
            pushed.push(Entry::new(n as u64, kind, id, attempt, detail));
            assert_eq!(written, pushed, "after write {n}");
        }
        // The sizes that matched reused the dropped allocation.
        let first = written.entries().next().map(|e| e.data.as_ptr());
        written.write(9, Kind::Added, b"zzzz", 0, None);
        assert_eq!(written.entries().last().map(|e| e.data.as_ptr()), first);
    }

    #[test]
    fn an_entry_holds_its_id_and_detail_in_one_allocation() {
        let e = Entry::new(7, Kind::Retry, b"job", 2, Some(b"nack"));
        assert_eq!(
            (e.id(), e.detail()),
            (Some(&b"job"[..]), Some(&b"nack"[..]))
        );
        let q = Entry::new(7, Kind::Purged, b"", 0, Some(b"12"));
        assert_eq!((q.id(), q.detail()), (None, Some(&b"12"[..])));
        let none = Entry::new(7, Kind::Added, b"job", 0, None);
        assert_eq!(none.detail(), None);
        for kind in Kind::ALL {
            assert_eq!(Kind::from_code(kind.code()), Some(kind));
        }
        assert_eq!(Kind::from_code(Kind::ALL.len() as u8), None);
    }
}
