//! One message as the queue value holds it.
//!
//! The fields every message uses sit inline; the options few messages carry
//! (their own retry policy, a TTL, a death, a last error, a newer version
//! waiting for the current delivery to end) sit behind one pointer, so a
//! plain message costs one 72-byte slot and one allocation holding its id
//! and payload together. A GROUP name sits in that allocation too, between
//! the id and the payload: groups are how thousands of tenants share a
//! queue, and a pointer to rare fields holding only a name would cost more
//! than the message.

use crate::core::backoff::Backoff;

/// Where a message is in its life. `Waiting` is reported as `delayed`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum State {
    /// Waiting for `due_at`.
    Delayed = 0,
    /// Due and waiting for a consumer.
    Ready = 1,
    /// Handed to a consumer until `lease_deadline`.
    Inflight = 2,
    /// Out of attempts; kept until REDRIVE, CANCEL or PURGE.
    Dead = 3,
    /// Due, but another message of its GROUP holds the group (its delivery
    /// is delayed by the group).
    Waiting = 4,
    /// Finished by ACK or DONE and kept for its retention (RETAIN), with
    /// its result: `lease_deadline` holds when it finished, `due_at` when
    /// its retention runs out.
    Done = 5,
}

impl State {
    pub const ALL: [State; 6] = [
        State::Delayed,
        State::Ready,
        State::Inflight,
        State::Dead,
        State::Waiting,
        State::Done,
    ];

    /// The name clients see.
    pub fn name(self) -> &'static str {
        match self {
            State::Delayed | State::Waiting => "delayed",
            State::Ready => "ready",
            State::Inflight => "inflight",
            State::Dead => "dead",
            State::Done => "done",
        }
    }

    pub fn from_u8(v: u8) -> Option<State> {
        State::ALL.get(usize::from(v)).copied()
    }

    /// The state clients are told: waiting for a group is delayed.
    pub fn reported(self) -> State {
        match self {
            State::Waiting => State::Delayed,
            state => state,
        }
    }
}

/// Why a message became dead.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum DeathReason {
    /// NACK of its last allowed attempt.
    Nack = 0,
    /// The lease of its last allowed attempt ended without ACK.
    LeaseExpired = 1,
    /// Not acknowledged within the TTL of its ADD.
    Expired = 2,
    /// NACK DEAD: the consumer declared the failure permanent.
    Permanent = 3,
}

impl DeathReason {
    pub fn name(self) -> &'static str {
        match self {
            DeathReason::Nack => "nack",
            DeathReason::LeaseExpired => "lease-expired",
            DeathReason::Expired => "expired",
            DeathReason::Permanent => "permanent",
        }
    }

    pub fn from_u8(v: u8) -> Option<DeathReason> {
        [
            DeathReason::Nack,
            DeathReason::LeaseExpired,
            DeathReason::Expired,
            DeathReason::Permanent,
        ]
        .get(usize::from(v))
        .copied()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Death {
    pub reason: DeathReason,
    /// Unix ms.
    pub at: u64,
}

/// A message's own retry policy, TTL and group: what ADD may set besides
/// its time, priority and payload.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Options {
    /// MAXATTEMPTS given on ADD; `None` follows the queue and module.
    pub max_attempts: Option<u32>,
    /// BACKOFF given on ADD; `None` follows the queue and module.
    pub backoff: Option<Backoff>,
    /// Unix ms by which it must be acknowledged (ADD's TTL), else it dies.
    pub expire_at: Option<u64>,
    /// GROUP given on ADD: at most one message of a group is out at a time.
    /// A record keeps it in its data (`Record::group`), so in its rare
    /// fields this is always `None`.
    pub group: Option<Box<[u8]>>,
    /// RETAIN given on ADD: how long it is kept once done (0: not kept);
    /// `None` follows the queue and module.
    pub retain_ms: Option<u64>,
}

/// What an ADD sets besides the payload: the part of a message a newer
/// version replaces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Terms {
    pub priority: i32,
    pub seq: u64,
    pub due_at: u64,
    pub added_at: u64,
    pub options: Options,
}

/// A newer version written by ADD while the message was in flight.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Version {
    pub terms: Terms,
    pub payload: Box<[u8]>,
}

/// The fields few messages carry.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Extra {
    pub options: Options,
    /// Why and when it died, while dead.
    pub death: Option<Death>,
    /// The ERROR text of the last NACK.
    pub last_error: Option<Box<[u8]>>,
    /// A newer version that takes this one's place when the delivery ends,
    /// so the two never overlap.
    pub replacement: Option<Box<Version>>,
    /// The last PROGRESS a consumer reported for the current (or, once
    /// done, the last) delivery.
    pub progress: Option<Box<[u8]>>,
}

impl Extra {
    fn is_empty(&self) -> bool {
        *self == Extra::default()
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// The id, then (with [`GROUPED`] set in `id_len`) the group name after
    /// its length as 2 bytes (little-endian), then the payload: one
    /// allocation. A done message's holds its
    /// result after the payload, then a trailer saying its length (see
    /// [`trailer`]), so that keeping a result costs no field in every
    /// record, and a short one a single byte more.
    data: Box<[u8]>,
    /// Ids are at most `args::MAX_ID_LEN` bytes (checked by the parser,
    /// the codec and the importer), so two bytes hold the length, and the
    /// record fits 72 bytes instead of 80; the top bit is [`GROUPED`].
    id_len: u16,
    pub state: State,
    /// This message holds its group (see `Queue::take_group`): set while it is
    /// ready, in flight, or delayed for a retry of its delivery.
    pub holds_group: bool,
    /// Higher pops first.
    pub priority: i32,
    /// Deliveries of this id so far; the first POP makes it 1. It only
    /// grows while the id is in the queue, so (id, attempt) names one
    /// delivery.
    pub attempt: u32,
    /// `attempt` when the message was last added, replaced or redriven:
    /// MAXATTEMPTS and the backoff count from here.
    pub attempt_base: u32,
    /// Insertion order: the FIFO tie-break; unique among live messages.
    pub seq: u64,
    /// Unix ms at which the message is (or was) due.
    pub due_at: u64,
    /// Unix ms of the ADD that wrote this version.
    pub added_at: u64,
    /// Unix ms at which the current lease ends; 0 unless in flight.
    pub lease_deadline: u64,
    extra: Option<Box<Extra>>,
}

/// `id_len`'s flag: a group name follows the id.
const GROUPED: u16 = 0x8000;

const _: () = assert!(crate::core::limits::MAX_ID_LEN < GROUPED as usize);

/// `id_len` of an id (with or without a group).
fn id_len(id: &[u8], group: Option<&[u8]>) -> u16 {
    debug_assert!(
        id.len() <= crate::core::limits::MAX_ID_LEN
            && group.is_none_or(|g| g.len() <= crate::core::limits::MAX_ID_LEN),
        "an unchecked id or group"
    );
    id.len() as u16 | if group.is_some() { GROUPED } else { 0 }
}

/// The last byte of a done message's data: the result's length when below
/// [`LONG_RESULT`]; `LONG_RESULT` after the length as 4 bytes
/// (little-endian); [`NO_RESULT`] when it has none (a plain ACK).
const LONG_RESULT: u8 = 0xFE;
const NO_RESULT: u8 = 0xFF;

/// The trailer that follows a result of `len` bytes (`None`: no result):
/// its bytes, of which the first `n` count.
fn trailer(len: Option<usize>) -> ([u8; 5], usize) {
    match len {
        None => ([NO_RESULT, 0, 0, 0, 0], 1),
        Some(len) if len < LONG_RESULT as usize => ([len as u8, 0, 0, 0, 0], 1),
        Some(len) => {
            // Results are at most the payload limit, far below u32::MAX.
            let [a, b, c, d] = (len as u32).to_le_bytes();
            ([a, b, c, d, LONG_RESULT], 5)
        }
    }
}

/// The id, group and payload as one allocation.
fn joined(id: &[u8], group: Option<&[u8]>, payload: &[u8]) -> Box<[u8]> {
    let group_len = group.map_or(0, |g| 2 + g.len());
    let mut data = Vec::with_capacity(id.len() + group_len + payload.len());
    data.extend_from_slice(id);
    if let Some(g) = group {
        // Group names are at most MAX_ID_LEN bytes: two bytes hold the length.
        data.extend_from_slice(&(g.len() as u16).to_le_bytes());
        data.extend_from_slice(g);
    }
    data.extend_from_slice(payload);
    data.into_boxed_slice()
}

impl Record {
    /// A fresh, undelivered message, not yet placed.
    pub fn new(id: &[u8], payload: &[u8], mut terms: Terms) -> Record {
        let group = terms.options.group.take();
        let mut record = Record {
            data: joined(id, group.as_deref(), payload),
            id_len: id_len(id, group.as_deref()),
            state: State::Delayed,
            holds_group: false,
            priority: 0,
            attempt: 0,
            attempt_base: 0,
            seq: 0,
            due_at: 0,
            added_at: 0,
            lease_deadline: 0,
            extra: None,
        };
        record.set_terms(terms);
        record
    }

    /// This record becomes a newer version of itself: delivery numbering
    /// goes on, the attempt budget starts again, a death, error, result or
    /// progress is forgotten.
    pub fn install(&mut self, payload: &[u8], mut terms: Terms) {
        let group = terms.options.group.take();
        self.data = joined(self.id(), group.as_deref(), payload);
        self.id_len = id_len(self.id(), group.as_deref());
        self.state = State::Delayed;
        self.lease_deadline = 0;
        self.attempt_base = self.attempt;
        self.set_terms(terms);
    }

    /// Sets the terms but the group, which the caller put in `data`.
    fn set_terms(&mut self, terms: Terms) {
        let Terms {
            priority,
            seq,
            due_at,
            added_at,
            options,
        } = terms;
        self.priority = priority;
        self.seq = seq;
        self.due_at = due_at;
        self.added_at = added_at;
        let extra = Extra {
            options,
            ..Extra::default()
        };
        self.extra = (!extra.is_empty()).then(|| Box::new(extra));
    }

    fn id_end(&self) -> usize {
        usize::from(self.id_len & !GROUPED)
    }

    /// Where the group name is in `data`, if the message has one.
    fn group_at(&self) -> Option<(usize, usize)> {
        if self.id_len & GROUPED == 0 {
            return None;
        }
        let at = self.id_end();
        let len = u16::from_le_bytes([self.data[at], self.data[at + 1]]);
        Some((at + 2, usize::from(len)))
    }

    pub fn id(&self) -> &[u8] {
        &self.data[..self.id_end()]
    }

    pub fn payload(&self) -> &[u8] {
        let start = self.group_at().map_or(self.id_end(), |(at, len)| at + len);
        let end = match self.state {
            State::Done => self.result_at().0,
            _ => self.data.len(),
        };
        &self.data[start..end]
    }

    /// A done message's data: where its result starts and its length
    /// (`None`: no result).
    fn result_at(&self) -> (usize, Option<usize>) {
        let last = self.data.len() - 1;
        match self.data[last] {
            NO_RESULT => (last, None),
            LONG_RESULT => {
                let l = &self.data[last - 4..last];
                let len = u32::from_le_bytes([l[0], l[1], l[2], l[3]]) as usize;
                (last - 4 - len, Some(len))
            }
            len => (last - len as usize, Some(len as usize)),
        }
    }

    /// A done message's result; `None` when it has none (a plain ACK) or
    /// is not done.
    pub fn result(&self) -> Option<&[u8]> {
        if self.state != State::Done {
            return None;
        }
        let (start, len) = self.result_at();
        len.map(|len| &self.data[start..start + len])
    }

    /// When a done message finished (Unix ms).
    pub fn finished_at(&self) -> Option<u64> {
        (self.state == State::Done).then_some(self.lease_deadline)
    }

    /// The message is finished at `now` and kept until `drop_at`, with its
    /// result. Not indexed: the caller indexes it as done.
    pub fn finish(&mut self, now: u64, drop_at: u64, result: Option<&[u8]>) {
        let (trailer, n) = trailer(result.map(<[u8]>::len));
        let result = result.unwrap_or_default();
        let mut data = Vec::with_capacity(self.data.len() + result.len() + n);
        data.extend_from_slice(&self.data);
        data.extend_from_slice(result);
        data.extend_from_slice(&trailer[..n]);
        self.data = data.into_boxed_slice();
        self.state = State::Done;
        self.lease_deadline = now;
        self.due_at = drop_at;
    }

    /// Bytes of the id-and-payload allocation.
    pub fn data_len(&self) -> usize {
        self.data.len()
    }

    pub fn extra(&self) -> Option<&Extra> {
        self.extra.as_deref()
    }

    /// Changes the rare fields; an emptied set frees its allocation.
    pub fn update_extra(&mut self, change: impl FnOnce(&mut Extra)) {
        let extra = self.extra.get_or_insert_with(Box::default);
        change(extra);
        if extra.is_empty() {
            self.extra = None;
        }
    }

    fn options(&self) -> Option<&Options> {
        self.extra().map(|e| &e.options)
    }

    pub fn max_attempts(&self) -> Option<u32> {
        self.options().and_then(|o| o.max_attempts)
    }
    pub fn backoff(&self) -> Option<&Backoff> {
        self.options().and_then(|o| o.backoff.as_ref())
    }
    pub fn expire_at(&self) -> Option<u64> {
        self.options().and_then(|o| o.expire_at)
    }
    /// GROUP given on ADD (kept in `data`, not in the rare fields).
    pub fn group(&self) -> Option<&[u8]> {
        self.group_at().map(|(at, len)| &self.data[at..at + len])
    }
    pub fn death(&self) -> Option<Death> {
        self.extra().and_then(|e| e.death)
    }
    pub fn last_error(&self) -> Option<&[u8]> {
        self.extra().and_then(|e| e.last_error.as_deref())
    }
    pub fn replacement(&self) -> Option<&Version> {
        self.extra().and_then(|e| e.replacement.as_deref())
    }
    pub fn progress(&self) -> Option<&[u8]> {
        self.extra().and_then(|e| e.progress.as_deref())
    }
    pub fn retain_ms(&self) -> Option<u64> {
        self.options().and_then(|o| o.retain_ms)
    }

    /// Deliveries since the last ADD, replacement or REDRIVE.
    pub fn attempts_used(&self) -> u32 {
        self.attempt.saturating_sub(self.attempt_base)
    }

    /// The deadline the expiry index holds for this message: its TTL while
    /// it is live, when its retention runs out once done; dead messages
    /// have none.
    pub fn live_expiry(&self) -> Option<u64> {
        match self.state {
            State::Dead => None,
            State::Done => Some(self.due_at),
            _ => self.expire_at(),
        }
    }

    /// Its key in the ready index, living at `slot`.
    pub(super) fn ready_key(&self, slot: super::Slot) -> super::ReadyKey {
        (
            std::cmp::Reverse(self.priority),
            self.due_at,
            self.seq,
            slot,
        )
    }

    /// Since when a ready message has been waiting for a consumer: its due
    /// time, or its ADD when it was added already due.
    pub fn ready_since(&self) -> u64 {
        self.due_at.max(self.added_at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn terms() -> Terms {
        Terms {
            priority: 3,
            seq: 7,
            due_at: 100,
            added_at: 50,
            options: Options::default(),
        }
    }

    #[test]
    fn a_result_of_any_length_reads_back_with_the_payload() {
        for len in [
            None,
            Some(0),
            Some(1),
            Some(253),
            Some(254),
            Some(255),
            Some(70_000),
        ] {
            let mut r = Record::new(b"id-1", b"hello", terms());
            let result = len.map(|n| vec![0xFE_u8; n]);
            r.finish(10, 20, result.as_deref());
            assert_eq!(r.payload(), b"hello", "{len:?}");
            assert_eq!(r.result(), result.as_deref(), "{len:?}");
            let trailer = if len.is_some_and(|n| n >= 254) { 5 } else { 1 };
            assert_eq!(r.data_len(), 9 + len.unwrap_or(0) + trailer, "{len:?}");
            assert_eq!((r.finished_at(), r.due_at), (Some(10), 20));
        }
    }

    #[test]
    fn a_plain_message_is_one_slot_and_one_allocation() {
        assert_eq!(std::mem::size_of::<Option<Record>>(), 72);
        let r = Record::new(b"id-1", b"hello", terms());
        assert_eq!((r.id(), r.payload()), (&b"id-1"[..], &b"hello"[..]));
        assert!(r.extra().is_none());
        assert_eq!(r.data_len(), 9);
    }

    #[test]
    fn install_keeps_numbering_and_restarts_the_budget() {
        let mut r = Record::new(b"a", b"one", terms());
        r.attempt = 4;
        r.update_extra(|e| e.last_error = Some(b"boom".as_slice().into()));
        assert_eq!(r.attempts_used(), 4);
        let mut newer = terms();
        newer.options.group = Some(b"g".as_slice().into());
        r.install(b"two", newer);
        assert_eq!((r.attempt, r.attempts_used()), (4, 0));
        assert_eq!((r.id(), r.payload()), (&b"a"[..], &b"two"[..]));
        assert_eq!(r.last_error(), None);
        assert_eq!(r.group(), Some(&b"g"[..]));
        // The group sits in the data allocation, not in the rare fields.
        assert!(r.extra().is_none());
        assert_eq!(r.data_len(), 1 + 2 + 1 + 3);
        r.finish(1, 2, Some(b"ok"));
        assert_eq!((r.payload(), r.result()), (&b"two"[..], Some(&b"ok"[..])));
        assert_eq!(r.group(), Some(&b"g"[..]));
        let mut plain = terms();
        plain.options.group = None;
        r.install(b"three", plain);
        assert_eq!(
            (r.id(), r.payload(), r.group()),
            (&b"a"[..], &b"three"[..], None)
        );
    }

    #[test]
    fn emptied_extras_free_their_allocation() {
        let mut r = Record::new(b"a", b"", terms());
        r.update_extra(|e| e.options.expire_at = Some(5));
        assert_eq!(r.live_expiry(), Some(5));
        r.state = State::Dead;
        assert_eq!(r.live_expiry(), None);
        r.update_extra(|e| e.options.expire_at = None);
        assert!(r.extra().is_none());
    }
}
