//! The queue value as bytes: what RDB, DUMP/RESTORE, the AOF rewrite and
//! DEBUG DIGEST carry.
//!
//! A queue is a header (settings, counters, how many messages) and then its
//! records (delivery fields, id, payload, terms, then a mask of the rarer
//! fields and those present), each self-delimiting, packed into chunks of at most
//! [`CHUNK_BYTES`] so that neither side ever holds a whole big queue as one
//! buffer. Only records are stored: every index, group and line is rebuilt
//! from them on load and then checked, so a stored value cannot describe
//! an inconsistent queue. Integers are LEB128 varints; every length and
//! enum read is checked against the bytes present and the limits a command
//! would enforce, because RESTORE hands us whatever a client sends.
//!
//! Encoding versions (the module type's encver):
//! - 1: header and records.
//! - 2: the header may carry RATE and MAXINFLIGHT (bits 0x08, 0x10 of its
//!   first byte), the flow state (0x40: a pause, the delivery log) and the
//!   queue's schedules (0x80), and counts up to as many counters as this
//!   build has (a header with fewer reads the rest as 0). The bits say what
//!   is there, so a LOAD in an AOF, which has no encver, reads both
//!   versions; a queue using none of it is written as version 1 wrote it,
//!   but for its counters.
//! - 3: the header's 0x20 bit says a second mask follows (a varint) for
//!   round 4's settings: RETAIN (bit 0), RETAINMAX (bit 1), EVENTS (bit 2)
//!   and the event log (bit 3: its last seq and how many events follow the
//!   records, in chunks of their own); records may
//!   be `done` (state 5: finished at their lease field, dropped at their
//!   due time), with a result (record bit 0x10) and a PROGRESS (0x08), and
//!   a message's own RETAIN (options bit 0x10). Again a value using none
//!   of it is written as version 2 wrote it.
//! - 4: the second mask may carry GROUPLIMIT (bit 4), GROUPRATE (bit 5),
//!   ORDER FAIR (bit 6, no value) and the groups' flow state (bit 7: after
//!   the schedules, each paused or rate-counted group's name, pause and
//!   delivery log). A value using none of it is written as version 3
//!   wrote it.

use std::collections::VecDeque;

use super::journal::{Entry, Journal, Kind};
use super::{
    Counter, Death, DeathReason, Flow, Options, Queue, Rare, Record, State, Terms, Version,
};
use crate::core::backoff::Backoff;
use crate::core::flow::{DeliveryLog, Rate};
use crate::core::limits::{
    MAX_CRON_LEN, MAX_EVENTS, MAX_GROUP_LIMIT, MAX_ID_LEN, MAX_PAYLOAD, MAX_PROGRESS_LEN, MAX_RATE,
    MAX_RETAIN_MAX, MAX_SCHEDULE_NAME_LEN, MAX_STEPS, MAX_TIME_MS, MIN_EVERY_MS,
};
use crate::core::policy::QueueConfig;
use crate::core::schedule::{Missed, Overlap, Schedule, Spec, Template};

/// The encoding this build writes.
pub const ENCODING_VERSION: i32 = 4;

/// Every encoding this build reads.
pub const READABLE_VERSIONS: [i32; 4] = [1, 2, 3, 4];

/// Header bits: RATE, MAXINFLIGHT, the second mask, the flow state, the
/// schedules.
const HAS_RATE: u8 = 0x08;
const HAS_MAX_INFLIGHT: u8 = 0x10;
const HAS_MORE: u8 = 0x20;
const HAS_FLOW: u8 = 0x40;
const HAS_SCHEDULES: u8 = 0x80;

/// Second-mask bits (version 3).
const MORE_RETAIN: u64 = 0x01;
const MORE_RETAIN_MAX: u64 = 0x02;
const MORE_EVENTS: u64 = 0x04;
const MORE_JOURNAL: u64 = 0x08;
/// Version 4.
const MORE_GROUP_LIMIT: u64 = 0x10;
const MORE_GROUP_RATE: u64 = 0x20;
const MORE_FAIR: u64 = 0x40;
const MORE_GROUP_FLOWS: u64 = 0x80;
const MORE_KNOWN: u64 = MORE_RETAIN
    | MORE_RETAIN_MAX
    | MORE_EVENTS
    | MORE_JOURNAL
    | MORE_GROUP_LIMIT
    | MORE_GROUP_RATE
    | MORE_FAIR
    | MORE_GROUP_FLOWS;

/// Record bits beyond a death, an error and a replacement (version 3).
const RECORD_PROGRESS: u8 = 0x08;
const RECORD_RESULT: u8 = 0x10;

/// Records are emitted in chunks of about this many bytes (one record may
/// make a chunk larger).
pub const CHUNK_BYTES: usize = 64 * 1024;

/// Why stored bytes could not become a queue.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("dq: cannot load a queue: {0}")]
pub struct CodecError(pub String);

fn bad(why: impl Into<String>) -> CodecError {
    CodecError(why.into())
}

type Decoded<T> = std::result::Result<T, CodecError>;

// ---- writing ---------------------------------------------------------------

fn put_uint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    put_uint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

fn put_i32(out: &mut Vec<u8>, v: i32) {
    put_uint(out, u64::from(((v << 1) ^ (v >> 31)) as u32));
}

fn put_backoff(out: &mut Vec<u8>, backoff: &Backoff) {
    match backoff {
        Backoff::Exponential { base, max } => {
            out.push(0);
            put_uint(out, *base);
            put_uint(out, *max);
        }
        Backoff::Fixed(delay) => {
            out.push(1);
            put_uint(out, *delay);
        }
        Backoff::Steps(steps) => {
            out.push(2);
            put_uint(out, steps.len() as u64);
            for step in steps {
                put_uint(out, *step);
            }
        }
    }
}

/// Settings, counters and the number of records.
pub fn header(queue: &Queue) -> Vec<u8> {
    let mut out = Vec::with_capacity(64);
    let config = queue.config();
    let has_schedules = queue.schedule_count() > 0;
    let flow = queue.flow();
    let has_flow = !flow.is_empty();
    let bit = |present: bool, bit: u8| if present { bit } else { 0 };
    let more_bit = |present: bool, bit: u64| if present { bit } else { 0 };
    let journal = queue.journal();
    let more = more_bit(config.retain_ms.is_some(), MORE_RETAIN)
        | more_bit(config.retain_max.is_some(), MORE_RETAIN_MAX)
        | more_bit(config.events.is_some(), MORE_EVENTS)
        | more_bit(!journal.is_empty(), MORE_JOURNAL)
        | more_bit(config.group_limit.is_some(), MORE_GROUP_LIMIT)
        | more_bit(config.group_rate.is_some(), MORE_GROUP_RATE)
        | more_bit(config.fair, MORE_FAIR)
        | more_bit(queue.group_flows().next().is_some(), MORE_GROUP_FLOWS);
    let mask = u8::from(config.lease_ms.is_some())
        | u8::from(config.max_attempts.is_some()) << 1
        | u8::from(config.backoff.is_some()) << 2
        | bit(config.rate.is_some(), HAS_RATE)
        | bit(config.max_inflight.is_some(), HAS_MAX_INFLIGHT)
        | bit(more != 0, HAS_MORE)
        | bit(has_flow, HAS_FLOW)
        | bit(has_schedules, HAS_SCHEDULES);
    out.push(mask);
    if let Some(ms) = config.lease_ms {
        put_uint(&mut out, ms);
    }
    if let Some(n) = config.max_attempts {
        put_uint(&mut out, n.into());
    }
    if let Some(b) = &config.backoff {
        put_backoff(&mut out, b);
    }
    if let Some(rate) = config.rate {
        put_uint(&mut out, rate.limit);
        put_uint(&mut out, rate.window_ms);
    }
    if let Some(n) = config.max_inflight {
        put_uint(&mut out, n.into());
    }
    if more != 0 {
        put_uint(&mut out, more);
        for v in [config.retain_ms, config.retain_max, config.events]
            .into_iter()
            .flatten()
        {
            put_uint(&mut out, v);
        }
        if !journal.is_empty() {
            put_uint(&mut out, journal.last_seq());
            put_uint(&mut out, journal.len() as u64);
        }
        if let Some(n) = config.group_limit {
            put_uint(&mut out, n.into());
        }
        if let Some(rate) = config.group_rate {
            put_uint(&mut out, rate.limit);
            put_uint(&mut out, rate.window_ms);
        }
    }
    put_uint(&mut out, Counter::ALL.len() as u64);
    for value in queue.counters().0 {
        put_uint(&mut out, value);
    }
    put_uint(&mut out, queue.len() as u64);
    if has_flow {
        put_pause_and_log(&mut out, flow.paused_until, &flow.log);
    }
    if has_schedules {
        put_uint(&mut out, queue.schedule_count() as u64);
        for (name, schedule) in queue.schedules() {
            put_schedule(&mut out, name, schedule);
        }
    }
    if more & MORE_GROUP_FLOWS != 0 {
        put_uint(&mut out, queue.group_flows().count() as u64);
        for (name, flow) in queue.group_flows() {
            put_bytes(&mut out, name);
            put_pause_and_log(&mut out, flow.paused_until, &flow.log);
        }
    }
    out
}

/// A pause (flag, then its end) and a delivery log (length, then each
/// entry's time and count): the queue's flow state and a group's.
fn put_pause_and_log(out: &mut Vec<u8>, paused_until: Option<u64>, log: &DeliveryLog) {
    match paused_until {
        Some(until) => {
            out.push(1);
            put_uint(out, until);
        }
        None => out.push(0),
    }
    put_uint(out, log.entries().count() as u64);
    for (at, n) in log.entries() {
        put_uint(out, at);
        put_uint(out, n);
    }
}

/// One schedule: name, spec, bounds, policies, what its runs add, and
/// where it stands.
fn put_schedule(out: &mut Vec<u8>, name: &[u8], s: &Schedule) {
    put_bytes(out, name);
    match s.spec.cron_parts() {
        None => {
            out.push(0);
            if let Spec::Every(ms) = s.spec {
                put_uint(out, ms);
            }
        }
        Some((text, tz)) => {
            out.push(1);
            put_bytes(out, text.as_bytes());
            put_bytes(out, tz.as_bytes());
        }
    }
    put_uint(out, s.start);
    let t = &s.template;
    let mask = u8::from(s.end.is_some())
        | u8::from(s.limit.is_some()) << 1
        | u8::from(s.next_run.is_some()) << 2
        | u8::from(s.last_run.is_some()) << 3
        | u8::from(t.max_attempts.is_some()) << 4
        | u8::from(t.backoff.is_some()) << 5
        | u8::from(t.group.is_some()) << 6
        | u8::from(t.ttl_ms.is_some()) << 7;
    out.push(mask);
    for v in [s.end, s.limit, s.next_run, s.last_run]
        .into_iter()
        .flatten()
    {
        put_uint(out, v);
    }
    out.push(s.missed as u8);
    out.push(s.overlap as u8);
    put_uint(out, s.runs);
    put_uint(out, s.skipped);
    put_bytes(out, &t.payload);
    put_i32(out, t.priority);
    if let Some(n) = t.max_attempts {
        put_uint(out, n.into());
    }
    if let Some(b) = &t.backoff {
        put_backoff(out, b);
    }
    if let Some(g) = &t.group {
        put_bytes(out, g);
    }
    if let Some(ttl) = t.ttl_ms {
        put_uint(out, ttl);
    }
}

/// A message's own options: a presence mask, then each one present. The
/// group is passed apart: a record keeps it outside its options.
fn put_options(out: &mut Vec<u8>, o: &Options, group: Option<&[u8]>) {
    let mask = u8::from(o.max_attempts.is_some())
        | u8::from(o.backoff.is_some()) << 1
        | u8::from(o.expire_at.is_some()) << 2
        | u8::from(group.is_some()) << 3
        | u8::from(o.retain_ms.is_some()) << 4;
    out.push(mask);
    if let Some(n) = o.max_attempts {
        put_uint(out, n.into());
    }
    if let Some(b) = &o.backoff {
        put_backoff(out, b);
    }
    if let Some(at) = o.expire_at {
        put_uint(out, at);
    }
    if let Some(g) = group {
        put_bytes(out, g);
    }
    if let Some(ms) = o.retain_ms {
        put_uint(out, ms);
    }
}

/// What a version sets: priority, sequence, due and add times, options.
fn put_terms(
    out: &mut Vec<u8>,
    priority: i32,
    seq: u64,
    due_at: u64,
    added_at: u64,
    options: &Options,
    group: Option<&[u8]>,
) {
    put_i32(out, priority);
    put_uint(out, seq);
    put_uint(out, due_at);
    put_uint(out, added_at);
    put_options(out, options, group);
}

const NO_OPTIONS: Options = Options {
    max_attempts: None,
    backoff: None,
    expire_at: None,
    group: None,
    retain_ms: None,
};

/// Appends one record: its delivery fields, id and payload, its terms, and
/// then whichever of a death, a last error and a pending replacement it has.
pub fn put_record(out: &mut Vec<u8>, r: &Record) {
    out.push(r.state as u8);
    out.push(u8::from(r.holds_group));
    put_uint(out, r.attempt.into());
    put_uint(out, r.attempt_base.into());
    put_uint(out, r.lease_deadline);
    put_bytes(out, r.id());
    put_bytes(out, r.payload());
    let extra = r.extra();
    let options = extra.map_or(&NO_OPTIONS, |e| &e.options);
    put_terms(
        out,
        r.priority,
        r.seq,
        r.due_at,
        r.added_at,
        options,
        r.group(),
    );
    let (death, last_error, replacement, progress) = match extra {
        Some(e) => (
            e.death,
            e.last_error.as_deref(),
            e.replacement.as_deref(),
            e.progress.as_deref(),
        ),
        None => (None, None, None, None),
    };
    let result = r.result();
    out.push(
        u8::from(death.is_some())
            | u8::from(last_error.is_some()) << 1
            | u8::from(replacement.is_some()) << 2
            | if progress.is_some() {
                RECORD_PROGRESS
            } else {
                0
            }
            | if result.is_some() { RECORD_RESULT } else { 0 },
    );
    if let Some(d) = death {
        out.push(d.reason as u8);
        put_uint(out, d.at);
    }
    if let Some(text) = last_error {
        put_bytes(out, text);
    }
    if let Some(v) = replacement {
        let t = &v.terms;
        let group = t.options.group.as_deref();
        put_terms(
            out, t.priority, t.seq, t.due_at, t.added_at, &t.options, group,
        );
        put_bytes(out, &v.payload);
    }
    if let Some(p) = progress {
        put_bytes(out, p);
    }
    if let Some(r) = result {
        put_bytes(out, r);
    }
}

/// Calls `emit` with each chunk of records, in slot order, and then of
/// the events kept, oldest first.
pub fn record_chunks(queue: &Queue, mut emit: impl FnMut(&[u8])) {
    let mut chunk = Vec::with_capacity(CHUNK_BYTES + 256);
    let mut flush = |chunk: &mut Vec<u8>, last: bool| {
        if chunk.len() >= CHUNK_BYTES || (last && !chunk.is_empty()) {
            emit(chunk);
            chunk.clear();
        }
    };
    for (_, record) in queue.messages.iter() {
        put_record(&mut chunk, record);
        flush(&mut chunk, false);
    }
    for entry in queue.journal().entries() {
        put_entry(&mut chunk, entry);
        flush(&mut chunk, false);
    }
    flush(&mut chunk, true);
}

/// One event: its kind, time, attempt, id (empty for a queue-wide one) and
/// detail (a 0 or 1 flag, then the bytes).
fn put_entry(out: &mut Vec<u8>, e: &Entry) {
    out.push(e.kind.code());
    put_uint(out, e.at);
    put_uint(out, e.attempt.into());
    put_bytes(out, e.id().unwrap_or_default());
    match e.detail() {
        Some(detail) => {
            out.push(1);
            put_bytes(out, detail);
        }
        None => out.push(0),
    }
}

// ---- reading ---------------------------------------------------------------

struct Reader<'a> {
    bytes: &'a [u8],
}

impl<'a> Reader<'a> {
    fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    fn byte(&mut self, what: &str) -> Decoded<u8> {
        let (&b, rest) = self
            .bytes
            .split_first()
            .ok_or_else(|| bad(format!("{what} is missing")))?;
        self.bytes = rest;
        Ok(b)
    }

    fn uint(&mut self, what: &str) -> Decoded<u64> {
        let mut value: u64 = 0;
        for shift in (0..64).step_by(7) {
            let b = self.byte(what)?;
            let part = u64::from(b & 0x7f);
            if shift == 63 && part > 1 {
                return Err(bad(format!("{what} overflows")));
            }
            value |= part << shift;
            if b & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(bad(format!("{what} overflows")))
    }

    fn bounded(&mut self, what: &str, max: u64) -> Decoded<u64> {
        let v = self.uint(what)?;
        if v > max {
            return Err(bad(format!("{what} {v} is out of range")));
        }
        Ok(v)
    }

    fn time(&mut self, what: &str) -> Decoded<u64> {
        self.bounded(what, MAX_TIME_MS)
    }

    fn u32(&mut self, what: &str) -> Decoded<u32> {
        Ok(self.bounded(what, u32::MAX.into())? as u32)
    }

    fn i32(&mut self, what: &str) -> Decoded<i32> {
        let z = self.u32(what)?;
        Ok(((z >> 1) as i32) ^ -((z & 1) as i32))
    }

    fn bytes(&mut self, what: &str, max: usize) -> Decoded<&'a [u8]> {
        let len = self.uint(what)?;
        if len > max as u64 {
            return Err(bad(format!("{what} is longer than {max} bytes")));
        }
        if len > self.bytes.len() as u64 {
            return Err(bad(format!("{what} runs past the end")));
        }
        let (taken, rest) = self.bytes.split_at(len as usize);
        self.bytes = rest;
        Ok(taken)
    }

    /// RATE or GROUPRATE: a limit and a window, neither 0.
    fn rate(&mut self, what: &str) -> Decoded<Rate> {
        let limit = self.bounded(&format!("{what} limit"), MAX_RATE)?;
        let window_ms = self.time(&format!("{what} window"))?;
        if limit == 0 || window_ms == 0 {
            return Err(bad(format!("{what} is empty")));
        }
        Ok(Rate { limit, window_ms })
    }

    /// See `put_pause_and_log`.
    fn pause_and_log(&mut self) -> Decoded<(Option<u64>, DeliveryLog)> {
        let paused_until = match self.byte("pause")? {
            0 => None,
            1 => Some(self.uint("paused until")?),
            _ => return Err(bad("bad pause flag")),
        };
        let n = self.bounded("delivery log length", MAX_RATE)?;
        let mut entries = Vec::new();
        for _ in 0..n {
            entries.push((self.time("delivery time")?, self.uint("deliveries")?));
        }
        let log = DeliveryLog::from_entries(entries).ok_or_else(|| bad("a bad delivery log"))?;
        Ok((paused_until, log))
    }

    fn name(&mut self, what: &str) -> Decoded<&'a [u8]> {
        let name = self.bytes(what, MAX_ID_LEN)?;
        if name.is_empty() {
            return Err(bad(format!("{what} is empty")));
        }
        Ok(name)
    }

    fn backoff(&mut self) -> Decoded<Backoff> {
        let backoff = match self.byte("backoff kind")? {
            0 => {
                let base = self.time("backoff base")?;
                let max = self.time("backoff max")?;
                if base == 0 || max < base {
                    return Err(bad("backoff bounds are invalid"));
                }
                Backoff::Exponential { base, max }
            }
            1 => Backoff::Fixed(self.time("backoff delay")?),
            2 => {
                let n = self.bounded("backoff steps", MAX_STEPS as u64)?;
                let steps = (0..n)
                    .map(|_| self.time("backoff step"))
                    .collect::<Decoded<Vec<u64>>>()?;
                Backoff::Steps(steps)
            }
            kind => return Err(bad(format!("unknown backoff kind {kind}"))),
        };
        Ok(backoff)
    }

    fn max_attempts(&mut self) -> Decoded<u32> {
        let n = self.bounded("max attempts", i32::MAX as u64)?;
        if n == 0 {
            return Err(bad("max attempts is 0"));
        }
        Ok(n as u32)
    }

    fn options(&mut self) -> Decoded<Options> {
        let mask = self.byte("options")?;
        if mask & !0x1f != 0 {
            return Err(bad("unknown options"));
        }
        Ok(Options {
            max_attempts: (mask & 1 != 0).then(|| self.max_attempts()).transpose()?,
            backoff: (mask & 2 != 0).then(|| self.backoff()).transpose()?,
            expire_at: (mask & 4 != 0).then(|| self.time("TTL")).transpose()?,
            group: (mask & 8 != 0)
                .then(|| self.name("group").map(Into::into))
                .transpose()?,
            retain_ms: (mask & 16 != 0).then(|| self.time("RETAIN")).transpose()?,
        })
    }

    fn terms(&mut self) -> Decoded<Terms> {
        Ok(Terms {
            priority: self.i32("priority")?,
            seq: self.uint("seq")?,
            due_at: self.time("due time")?,
            added_at: self.time("add time")?,
            options: self.options()?,
        })
    }

    fn schedule(&mut self) -> Decoded<(Box<[u8]>, Schedule)> {
        let name = self.name("schedule name")?;
        if name.len() > MAX_SCHEDULE_NAME_LEN {
            return Err(bad("a schedule name is too long"));
        }
        let spec = match self.byte("schedule kind")? {
            0 => {
                let ms = self.time("EVERY")?;
                if ms < MIN_EVERY_MS {
                    return Err(bad("EVERY is under a second"));
                }
                Spec::Every(ms)
            }
            1 => {
                let text = self.bytes("cron", MAX_CRON_LEN)?;
                let tz = self.bytes("time zone", MAX_CRON_LEN)?;
                Spec::cron(text, Some(tz)).map_err(|e| bad(e.to_string()))?
            }
            kind => return Err(bad(format!("unknown schedule kind {kind}"))),
        };
        let start = self.time("START")?;
        let mask = self.byte("schedule fields")?;
        let mut field = |bit: u8, what: &str| -> Decoded<Option<u64>> {
            (mask & bit != 0).then(|| self.time(what)).transpose()
        };
        let end = field(1, "END")?;
        let limit = field(2, "LIMIT")?;
        let next_run = field(4, "next run")?;
        let last_run = field(8, "last run")?;
        if limit == Some(0) {
            return Err(bad("LIMIT is 0"));
        }
        if end.is_some_and(|end| end < start) {
            return Err(bad("END is before START"));
        }
        let missed = self.byte("MISSED")?;
        let missed =
            Missed::from_u8(missed).ok_or_else(|| bad(format!("unknown MISSED {missed}")))?;
        let overlap = self.byte("OVERLAP")?;
        let overlap =
            Overlap::from_u8(overlap).ok_or_else(|| bad(format!("unknown OVERLAP {overlap}")))?;
        let runs = self.uint("runs")?;
        let skipped = self.uint("skipped")?;
        let template = Template {
            payload: self.bytes("schedule payload", MAX_PAYLOAD)?.into(),
            priority: self.i32("priority")?,
            max_attempts: (mask & 16 != 0).then(|| self.max_attempts()).transpose()?,
            backoff: (mask & 32 != 0).then(|| self.backoff()).transpose()?,
            group: (mask & 64 != 0)
                .then(|| self.name("group").map(Into::into))
                .transpose()?,
            ttl_ms: (mask & 128 != 0).then(|| self.time("TTL")).transpose()?,
        };
        if template.ttl_ms == Some(0) {
            return Err(bad("a schedule's TTL is 0"));
        }
        let schedule = Schedule {
            spec,
            start,
            end,
            limit,
            missed,
            overlap,
            template,
            next_run,
            last_run,
            runs,
            skipped,
        };
        Ok((name.into(), schedule))
    }

    fn entry(&mut self) -> Decoded<Entry> {
        let code = self.byte("event type")?;
        let kind =
            Kind::from_code(code).ok_or_else(|| bad(format!("unknown event type {code}")))?;
        let at = self.time("event time")?;
        let attempt = self.u32("event attempt")?;
        let id = self.bytes("event id", MAX_ID_LEN)?;
        let queue_wide = matches!(kind, Kind::Purged | Kind::Paused | Kind::Resumed);
        if id.is_empty() != queue_wide {
            return Err(bad(format!("a {} event with a wrong id", kind.name())));
        }
        let detail = match self.byte("event detail flag")? {
            0 => None,
            1 => Some(self.bytes("event detail", MAX_PROGRESS_LEN)?),
            _ => return Err(bad("bad event detail flag")),
        };
        Ok(Entry::new(at, kind, id, attempt, detail))
    }

    fn record(&mut self) -> Decoded<Record> {
        let state = self.byte("state")?;
        let state = State::from_u8(state).ok_or_else(|| bad(format!("unknown state {state}")))?;
        let holds_group = match self.byte("group flag")? {
            flag @ (0 | 1) => flag == 1,
            _ => return Err(bad("bad group flag")),
        };
        let attempt = self.u32("attempt")?;
        let attempt_base = self.u32("attempt base")?;
        let lease_deadline = self.time("lease deadline")?;
        let id = self.name("id")?;
        let payload = self.bytes("payload", MAX_PAYLOAD)?;
        let mut record = Record::new(id, payload, self.terms()?);
        record.state = state;
        record.holds_group = holds_group;
        record.attempt = attempt;
        record.attempt_base = attempt_base;
        record.lease_deadline = lease_deadline;
        let mask = self.byte("record fields")?;
        if mask & !0x1f != 0 {
            return Err(bad("unknown record fields"));
        }
        let death = if mask & 1 != 0 {
            let reason = self.byte("death reason")?;
            let reason = DeathReason::from_u8(reason)
                .ok_or_else(|| bad(format!("unknown death reason {reason}")))?;
            let at = self.time("time of death")?;
            Some(Death { reason, at })
        } else {
            None
        };
        let last_error = (mask & 2 != 0)
            .then(|| self.bytes("last error", MAX_PAYLOAD).map(Into::into))
            .transpose()?;
        let replacement = if mask & 4 != 0 {
            let terms = self.terms()?;
            let payload = self.bytes("payload", MAX_PAYLOAD)?.into();
            Some(Box::new(Version { terms, payload }))
        } else {
            None
        };
        let progress = (mask & RECORD_PROGRESS != 0)
            .then(|| self.bytes("progress", MAX_PROGRESS_LEN).map(Into::into))
            .transpose()?;
        let result = (mask & RECORD_RESULT != 0)
            .then(|| self.bytes("result", MAX_PAYLOAD))
            .transpose()?;
        if mask & 0x0f != 0 {
            record.update_extra(|e| {
                e.death = death;
                e.last_error = last_error;
                e.replacement = replacement;
                e.progress = progress;
            });
        }
        match (state, result) {
            // Done: finished at its lease field, dropped at its due time.
            (State::Done, result) => {
                let (finished, drop_at) = (record.lease_deadline, record.due_at);
                record.state = State::Delayed;
                record.finish(finished, drop_at, result);
            }
            (_, Some(_)) => return Err(bad("a result on a message that is not done")),
            (_, None) => {}
        }
        Ok(record)
    }
}

/// Builds a queue from a header and then record chunks, checking each
/// step; nothing of a refused value reaches a key.
pub struct Loader {
    queue: Queue,
    expected: u64,
    /// The event log's last seq, and the events still to come.
    last_seq: u64,
    events_expected: u64,
    events: VecDeque<Entry>,
}

impl Loader {
    pub fn new(header: &[u8]) -> Decoded<Loader> {
        let mut r = Reader { bytes: header };
        let mask = r.byte("settings")?;
        let lease_ms = match mask & 1 != 0 {
            true => match r.time("lease")? {
                0 => return Err(bad("lease is 0")),
                ms => Some(ms),
            },
            false => None,
        };
        let max_attempts = (mask & 2 != 0).then(|| r.max_attempts()).transpose()?;
        let backoff = (mask & 4 != 0).then(|| r.backoff()).transpose()?;
        let rate = (mask & HAS_RATE != 0).then(|| r.rate("RATE")).transpose()?;
        let max_inflight = (mask & HAS_MAX_INFLIGHT != 0)
            .then(|| r.bounded("MAXINFLIGHT", u32::MAX.into()))
            .transpose()?;
        if max_inflight == Some(0) {
            return Err(bad("MAXINFLIGHT is 0"));
        }
        let max_inflight = max_inflight.map(|n| n as u32);
        let (mut retain_ms, mut retain_max, mut events) = (None, None, None);
        let (mut last_seq, mut events_expected) = (0, 0);
        let (mut group_limit, mut group_rate, mut fair, mut has_group_flows) =
            (None, None, false, false);
        if mask & HAS_MORE != 0 {
            let more = r.uint("more settings")?;
            if more == 0 || more & !MORE_KNOWN != 0 {
                return Err(bad("unknown settings"));
            }
            if more & MORE_RETAIN != 0 {
                retain_ms = Some(r.time("RETAIN")?);
            }
            if more & MORE_RETAIN_MAX != 0 {
                retain_max = Some(r.bounded("RETAINMAX", MAX_RETAIN_MAX)?);
            }
            if more & MORE_EVENTS != 0 {
                events = Some(r.bounded("EVENTS", MAX_EVENTS)?);
            }
            if more & MORE_JOURNAL != 0 {
                last_seq = r.uint("last event seq")?;
                events_expected = r.bounded("event count", last_seq.min(MAX_EVENTS))?;
                if last_seq == 0 && events.unwrap_or(0) == 0 {
                    return Err(bad("an empty event log"));
                }
            }
            if more & MORE_GROUP_LIMIT != 0 {
                match r.bounded("GROUPLIMIT", MAX_GROUP_LIMIT)? {
                    0 => return Err(bad("GROUPLIMIT is 0")),
                    n => group_limit = Some(n as u32),
                }
            }
            if more & MORE_GROUP_RATE != 0 {
                group_rate = Some(r.rate("GROUPRATE")?);
            }
            fair = more & MORE_FAIR != 0;
            has_group_flows = more & MORE_GROUP_FLOWS != 0;
        }
        // Older encodings have fewer counters: the rest start at 0.
        let n = r.uint("counter count")?;
        if n > Counter::ALL.len() as u64 {
            return Err(bad(format!(
                "{n} counters, this build has {}",
                Counter::ALL.len()
            )));
        }
        let mut queue = Queue::default();
        for i in 0..n as usize {
            queue.counters.0[i] = r.uint("counter")?;
        }
        let expected = r.uint("message count")?;
        let mut flow = Flow::default();
        if mask & HAS_FLOW != 0 {
            (flow.paused_until, flow.log) = r.pause_and_log()?;
            if flow.is_empty() {
                return Err(bad("an empty flow section"));
            }
        }
        let mut schedules = Vec::new();
        if mask & HAS_SCHEDULES != 0 {
            let n = r.uint("schedule count")?;
            if n == 0 {
                return Err(bad("a schedule section without schedules"));
            }
            for _ in 0..n {
                // Each holds at least a few bytes: a forged count runs out.
                schedules.push(r.schedule()?);
            }
        }
        let mut group_flows = Vec::new();
        if has_group_flows {
            let n = r.uint("group count")?;
            if n == 0 {
                return Err(bad("a group section without groups"));
            }
            for _ in 0..n {
                let name = r.name("group name")?;
                let (paused_until, log) = r.pause_and_log()?;
                if paused_until.is_none() && log.is_empty() {
                    return Err(bad("a group with no flow state"));
                }
                group_flows.push((name, paused_until, log));
            }
        }
        if !r.is_empty() {
            return Err(bad("trailing bytes after the header"));
        }
        queue.set_config(
            0,
            QueueConfig {
                lease_ms,
                max_attempts,
                backoff,
                rate,
                max_inflight,
                retain_ms,
                retain_max,
                events,
                group_limit,
                group_rate,
                fair,
            },
        );
        queue.restore_flow(flow);
        for (name, paused_until, log) in group_flows {
            if !queue.restore_group_flow(name, paused_until, log) {
                return Err(bad("a group appears twice"));
            }
        }
        for (name, schedule) in schedules {
            if !queue.restore_schedule(name, schedule) {
                return Err(bad("a schedule name appears twice"));
            }
        }
        Ok(Loader {
            queue,
            expected,
            last_seq,
            events_expected,
            events: VecDeque::new(),
        })
    }

    fn records_remaining(&self) -> u64 {
        self.expected.saturating_sub(self.queue.len() as u64)
    }

    /// How many records and events are still to come.
    pub fn remaining(&self) -> u64 {
        // Saturating: the counts come from the header, which a crafted
        // RESTORE payload sets as it likes.
        let events = self
            .events_expected
            .saturating_sub(self.events.len() as u64);
        self.records_remaining().saturating_add(events)
    }

    pub fn add_chunk(&mut self, chunk: &[u8]) -> Decoded<()> {
        let mut r = Reader { bytes: chunk };
        if r.is_empty() {
            return Err(bad("an empty chunk"));
        }
        while !r.is_empty() {
            if self.records_remaining() > 0 {
                let record = r.record()?;
                if self.queue.messages.find(record.id()).is_some() {
                    return Err(bad("an id appears twice"));
                }
                self.queue.messages.insert(record);
            } else if self.remaining() > 0 {
                self.events.push_back(r.entry()?);
            } else {
                return Err(bad("more messages or events than the header says"));
            }
        }
        Ok(())
    }

    /// Indexes every record and checks the whole value.
    pub fn finish(mut self) -> Decoded<Queue> {
        if self.remaining() != 0 {
            return Err(bad("fewer messages or events than the header says"));
        }
        let q = &mut self.queue;
        let max = q.config().events.unwrap_or(0);
        let events = std::mem::take(&mut self.events);
        let journal = Journal::restore(self.last_seq, max, events)
            .ok_or_else(|| bad("more events than EVENTS keeps"))?;
        Rare::make(&mut q.rare).journal = journal;
        let slots: Vec<_> = q.messages.iter().map(|(slot, _)| slot).collect();
        for &slot in &slots {
            let record = q.messages.at(slot);
            if record.holds_group {
                let Some(name) = record.group() else {
                    return Err(bad("a message without a group holds one"));
                };
                let groups = &mut Rare::make(&mut q.rare).groups;
                let at = groups.index_of(name, &q.messages);
                groups.hold(at, slot);
            }
        }
        for slot in slots {
            q.index(slot);
        }
        q.settle_loaded_groups();
        q.check().map_err(bad)?;
        Ok(self.queue)
    }
}

/// Builds a queue from records made elsewhere (the importer of the
/// multi-key layout), indexed and checked exactly as a loaded one.
pub fn assemble(
    config: QueueConfig,
    counters: super::Counters,
    records: Vec<Record>,
) -> Decoded<Queue> {
    let mut queue = Queue {
        counters,
        ..Queue::default()
    };
    queue.set_config(0, config);
    let mut loader = Loader {
        queue,
        expected: records.len() as u64,
        last_seq: 0,
        events_expected: 0,
        events: VecDeque::new(),
    };
    for record in records {
        if loader.queue.messages.find(record.id()).is_some() {
            return Err(bad("an id appears twice"));
        }
        loader.queue.messages.insert(record);
    }
    loader.finish()
}

/// Decodes a whole value from its header and chunks.
pub fn load<'a>(header: &[u8], chunks: impl IntoIterator<Item = &'a [u8]>) -> Decoded<Queue> {
    let mut loader = Loader::new(header)?;
    for chunk in chunks {
        loader.add_chunk(chunk)?;
    }
    loader.finish()
}

/// The value as one sequence of byte strings whose combination does not
/// depend on slot order: the header, then one encoded record each, then
/// each event kept with its seq. Fed to DEBUG DIGEST, one sequence per
/// item.
pub fn digest_items(queue: &Queue, mut item: impl FnMut(&[u8])) {
    item(&header(queue));
    let mut buf = Vec::new();
    for (_, record) in queue.messages.iter() {
        buf.clear();
        put_record(&mut buf, record);
        item(&buf);
    }
    let journal = queue.journal();
    for (i, entry) in journal.entries().enumerate() {
        buf.clear();
        put_uint(&mut buf, journal.oldest() + i as u64);
        put_entry(&mut buf, entry);
        item(&buf);
    }
}

/// Saves a queue and loads it back, as a restart or a replica's full sync
/// does: COPY, and the tests.
pub fn copy(queue: &Queue) -> Decoded<Queue> {
    let mut chunks = Vec::new();
    record_chunks(queue, |c| chunks.push(c.to_vec()));
    load(&header(queue), chunks.iter().map(Vec::as_slice))
}

/// The digest items in a canonical order, to compare two queues (tests
/// and the fuzz target; the server combines them without an order).
#[cfg(any(test, fuzzing))]
pub fn sorted_digest(queue: &Queue) -> Vec<Vec<u8>> {
    let mut items = Vec::new();
    digest_items(queue, |b| items.push(b.to_vec()));
    items.sort();
    items
}
