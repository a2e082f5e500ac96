//! A queue's event log (DQ.EVENTS, kept when `DQ.CONFIG queue SET EVENTS
//! n` asks for it): the typed [`Event`], the reply's parser, and the
//! reader behind [`Queue::events`](crate::Queue::events) — a `Stream` that
//! blocks for the next events on a connection of its own, again and
//! again, so that a caller holding the last seq it handled never misses
//! one silently: a trimmed event is [`Error::Gap`], a log that started
//! over is [`Error::EventLogRestarted`].

use std::collections::VecDeque;
use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use futures_util::Stream;
use redis::aio::ConnectionLike;
use redis::{Cmd, Value};

use crate::args::{check_count, ms};
use crate::error::Error;
use crate::reply::{array, bad, bytes, cmd, int, opt_bytes, opt_uint, query, uint};
use crate::server::Connection;

/// What an event reports, as DQ.EVENTS names it (docs/semantics.md,
/// Events, says when each is written).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum EventKind {
    /// A new id was added.
    Added,
    /// DQ.ADD replaced a held id; with detail `nack`, `lease-expired` or
    /// `expired`, a waiting new version took the place of the delivery
    /// that ended so.
    Replaced,
    /// A delayed message fell due, or became ready again.
    Ready,
    /// A POP or MPOP took it (one event per message).
    Delivered,
    /// ACK or DONE finished it.
    Done,
    /// A NACK or a lease running out scheduled another attempt (detail:
    /// `nack` or `lease-expired`).
    Retry,
    /// It died (detail: the dead reason).
    Dead,
    Cancelled,
    Redriven,
    /// A delivery reported progress (detail: the value).
    Progress,
    /// A done message's retention ran out, or RETAINMAX let it go.
    Dropped,
    /// Per queue, no id: a PURGE (detail: how many).
    Purged,
    /// No id: DQ.PAUSE; detail `None` for the queue's own pause, the
    /// group's name for DQ.PAUSE ... GROUP.
    Paused,
    /// No id: DQ.RESUME; detail `None` for the queue's own, the group's
    /// name for DQ.RESUME ... GROUP.
    Resumed,
    /// A type this client does not know (a newer module's), as sent.
    Other(String),
}

impl EventKind {
    /// Every type this client knows, in the order docs/commands.md lists
    /// them.
    pub const ALL: [EventKind; 14] = [
        EventKind::Added,
        EventKind::Replaced,
        EventKind::Ready,
        EventKind::Delivered,
        EventKind::Done,
        EventKind::Retry,
        EventKind::Dead,
        EventKind::Cancelled,
        EventKind::Redriven,
        EventKind::Progress,
        EventKind::Dropped,
        EventKind::Purged,
        EventKind::Paused,
        EventKind::Resumed,
    ];

    /// The type as the server names it: `added`, `lease-expired`, ...
    pub fn as_str(&self) -> &str {
        match self {
            EventKind::Added => "added",
            EventKind::Replaced => "replaced",
            EventKind::Ready => "ready",
            EventKind::Delivered => "delivered",
            EventKind::Done => "done",
            EventKind::Retry => "retry",
            EventKind::Dead => "dead",
            EventKind::Cancelled => "cancelled",
            EventKind::Redriven => "redriven",
            EventKind::Progress => "progress",
            EventKind::Dropped => "dropped",
            EventKind::Purged => "purged",
            EventKind::Paused => "paused",
            EventKind::Resumed => "resumed",
            EventKind::Other(name) => name,
        }
    }
}

impl fmt::Display for EventKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Any text reads: a name this client does not know is
/// [`EventKind::Other`], so that a newer module's events still come
/// through (a filter asking for one simply matches none of the known).
impl FromStr for EventKind {
    type Err = std::convert::Infallible;
    fn from_str(s: &str) -> Result<EventKind, Self::Err> {
        Ok(EventKind::ALL
            .into_iter()
            .find(|k| k.as_str() == s)
            .unwrap_or_else(|| EventKind::Other(s.to_owned())))
    }
}

/// One event of a queue's log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    /// Its number in the queue's log: from 1, one more per event, never
    /// reused (it lives in the queue's key). Resume after it.
    pub seq: u64,
    /// When it was written, Unix ms.
    pub at: u64,
    pub kind: EventKind,
    /// The message's id; `None` for the per-queue `purged`, `paused` and
    /// `resumed`.
    pub id: Option<Vec<u8>>,
    /// The message's deliveries so far, where one applies.
    pub attempt: Option<u64>,
    /// `retry`'s and `dead`'s reason, `progress`'s value, `purged`'s
    /// count, the group of a group's `paused` or `resumed`, ...; `None`
    /// where the type has none.
    pub detail: Option<Vec<u8>>,
}

impl Event {
    /// The id as text; bytes that are not UTF-8 become U+FFFD.
    pub fn id_lossy(&self) -> Option<std::borrow::Cow<'_, str>> {
        self.id.as_deref().map(String::from_utf8_lossy)
    }

    /// The detail as text; bytes that are not UTF-8 become U+FFFD.
    pub fn detail_lossy(&self) -> Option<std::borrow::Cow<'_, str>> {
        self.detail.as_deref().map(String::from_utf8_lossy)
    }
}

/// One DQ.EVENTS reply: the events read (oldest first) and the newest seq
/// the queue has written (0 when it never wrote one, or does not exist).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EventPage {
    pub last_seq: u64,
    pub events: Vec<Event>,
}

/// At most this many events in one DQ.EVENTS (COUNT's bound).
pub const MAX_EVENTS_COUNT: usize = 10_000;

/// `DQ.EVENTS queue [AFTER seq] COUNT n [BLOCK ms]`; refused before
/// sending for a count the server refuses.
pub(crate) fn events_cmd(
    queue: &[u8],
    after: Option<u64>,
    count: usize,
    block: Option<Duration>,
) -> Result<Cmd, Error> {
    check_count(count)?;
    let mut c = cmd("DQ.EVENTS", queue);
    if let Some(after) = after {
        c.arg("AFTER").arg(after);
    }
    c.arg("COUNT").arg(count);
    if let Some(block) = block {
        // BLOCK 0 would wait for ever: a moment is 1 ms.
        c.arg("BLOCK").arg(ms(block).max(1));
    }
    Ok(c)
}

/// The server's `GAP the oldest event kept is N` as [`Error::Gap`]; any
/// other error as it is.
pub(crate) fn gap(queue: &[u8], e: Error) -> Error {
    let oldest = match &e {
        Error::Redis(r) if r.code() == Some("GAP") => r
            .detail()
            .and_then(|d| d.rsplit(' ').next())
            .and_then(|n| n.parse::<u64>().ok()),
        _ => None,
    };
    match oldest {
        Some(oldest) => Error::Gap {
            queue: String::from_utf8_lossy(queue).into_owned(),
            oldest,
        },
        None => e,
    }
}

/// A reply whose last-seq is below the seq the reader asked after: the
/// log it followed is gone (the queue was deleted, or replaced by
/// RESTORE), and this one started over.
fn restarted(queue: &[u8], after: Option<u64>, page: &EventPage) -> Option<Error> {
    let after = after?;
    (page.last_seq < after).then(|| Error::EventLogRestarted {
        queue: String::from_utf8_lossy(queue).into_owned(),
        after,
        last_seq: page.last_seq,
    })
}

/// One DQ.EVENTS without BLOCK: [`admin::events`](crate::admin::events).
pub(crate) async fn read<C: ConnectionLike + ?Sized>(
    con: &mut C,
    queue: &[u8],
    after: Option<u64>,
    count: usize,
) -> Result<EventPage, Error> {
    let c = events_cmd(queue, after, count, None)?;
    let page = parse_events(query(con, &c).await.map_err(|e| gap(queue, e))?)?;
    match restarted(queue, after, &page) {
        Some(e) => Err(e),
        None => Ok(page),
    }
}

/// DQ.EVENTS's reply: `[last-seq, [[seq, at, type, id, attempt, detail],
/// ...]]`.
pub(crate) fn parse_events(v: Value) -> Result<EventPage, Error> {
    const C: &str = "DQ.EVENTS";
    let mut parts = array(C, v)?.into_iter();
    let (Some(last), Some(events), None) = (parts.next(), parts.next(), parts.next()) else {
        return Err(bad(C, "expected [last-seq, events]"));
    };
    let events = array(C, events)?
        .into_iter()
        .map(parse_event)
        .collect::<Result<Vec<_>, _>>()?;
    Ok(EventPage {
        last_seq: uint(C, &last)?,
        events,
    })
}

fn parse_event(v: Value) -> Result<Event, Error> {
    const C: &str = "DQ.EVENTS";
    let mut f = array(C, v)?.into_iter();
    let (Some(seq), Some(at), Some(kind), Some(id), Some(attempt), Some(detail)) =
        (f.next(), f.next(), f.next(), f.next(), f.next(), f.next())
    else {
        return Err(bad(C, "an event with fewer than 6 elements"));
    };
    let kind = String::from_utf8_lossy(&bytes(C, kind)?).into_owned();
    Ok(Event {
        seq: uint(C, &seq)?,
        at: u64::try_from(int(C, &at)?).map_err(|_| bad(C, "an event time below 0"))?,
        kind: kind.parse().unwrap_or(EventKind::Other(kind)),
        id: opt_bytes(C, id)?,
        attempt: opt_uint(C, &attempt)?,
        detail: opt_bytes(C, detail)?,
    })
}

/// How a reader reads: [`Queue::events_with`](crate::Queue::events_with).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EventsOptions {
    /// At most this many events a read (COUNT, 1 to 10000).
    pub count: usize,
    /// How long each blocked read waits before it is sent again (BLOCK):
    /// a reader waits for ever, this only bounds one command, so that a
    /// connection that died quietly is found within it.
    pub block: Duration,
}

impl Default for EventsOptions {
    fn default() -> EventsOptions {
        EventsOptions {
            count: 100,
            block: Duration::from_secs(10),
        }
    }
}

/// Where a reader is, and what it read but has not handed out yet.
struct Reader {
    con: Connection,
    queue: String,
    /// The last seq handed out (or known to be passed); `None` until the
    /// first read.
    after: Option<u64>,
    ready: VecDeque<Event>,
    options: EventsOptions,
    over: bool,
}

impl Reader {
    /// Reads the next events into `ready`; a blocked read that times out
    /// reads none and is sent again by the caller.
    async fn fill(&mut self) -> Result<(), Error> {
        let queue = self.queue.as_bytes();
        let Some(after) = self.after else {
            // From the oldest kept: one look without AFTER (no GAP there),
            // then on from what it saw — the last event read, or the log's
            // last seq when it keeps none — so that events written between
            // two reads are never skipped.
            let page = read(&mut self.con.clone(), queue, None, self.options.count).await?;
            self.after = Some(page.events.last().map_or(page.last_seq, |e| e.seq));
            self.ready.extend(page.events);
            return Ok(());
        };
        let c = events_cmd(
            queue,
            Some(after),
            self.options.count,
            Some(self.options.block),
        )?;
        let reply = self
            .con
            .blocking("DQ.EVENTS", queue, &c, self.options.block)
            .await
            .map_err(|e| gap(queue, e))?;
        if reply == Value::Nil {
            return Ok(());
        }
        let page = parse_events(reply)?;
        if let Some(e) = restarted(queue, Some(after), &page) {
            return Err(e);
        }
        let Some(last) = page.events.last() else {
            // The server answers a blocked read at once only with events,
            // GAP, or a last-seq below AFTER: anything else would make this
            // reader spin.
            return Err(bad(
                "DQ.EVENTS",
                format!(
                    "no events after {after} though the last seq is {}",
                    page.last_seq
                ),
            ));
        };
        self.after = Some(last.seq);
        self.ready.extend(page.events);
        Ok(())
    }
}

/// The events of `queue` after `after` (`None`: from the oldest kept), for
/// ever: see [`Queue::events`](crate::Queue::events).
pub(crate) fn stream(
    con: Connection,
    queue: String,
    after: Option<u64>,
    options: EventsOptions,
) -> Result<impl Stream<Item = Result<Event, Error>> + Send + 'static, Error> {
    check_count(options.count)?;
    let reader = Reader {
        con,
        queue,
        after,
        ready: VecDeque::new(),
        options,
        over: false,
    };
    Ok(futures_util::stream::unfold(reader, |mut r| async move {
        if r.over {
            return None;
        }
        loop {
            if let Some(event) = r.ready.pop_front() {
                return Some((Ok(event), r));
            }
            if let Err(e) = r.fill().await {
                // The reader's seq is the caller's: it resumes from the
                // last event it handled, once it has decided what the
                // error means.
                r.over = true;
                return Some((Err(e), r));
            }
        }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::args::sent;

    fn bulk(s: &[u8]) -> Value {
        Value::BulkString(s.to_vec())
    }

    fn event(seq: i64, kind: &[u8], id: Value, attempt: Value, detail: Value) -> Value {
        Value::Array(vec![
            Value::Int(seq),
            Value::Int(1_700_000_000_000),
            bulk(kind),
            id,
            attempt,
            detail,
        ])
    }

    #[test]
    fn events_replies_parse_into_typed_events() {
        let reply = Value::Array(vec![
            Value::Int(9),
            Value::Array(vec![
                event(7, b"retry", bulk(b"a\xff"), Value::Int(2), bulk(b"nack")),
                event(8, b"purged", Value::Nil, Value::Nil, bulk(b"3")),
                event(9, b"teleported", bulk(b"b"), Value::Nil, Value::Nil),
            ]),
        ]);
        let page = parse_events(reply).unwrap();
        assert_eq!(page.last_seq, 9);
        assert_eq!(
            page.events[0],
            Event {
                seq: 7,
                at: 1_700_000_000_000,
                kind: EventKind::Retry,
                id: Some(b"a\xff".to_vec()),
                attempt: Some(2),
                detail: Some(b"nack".to_vec()),
            }
        );
        assert_eq!(page.events[0].id_lossy().as_deref(), Some("a\u{fffd}"));
        assert_eq!(page.events[1].kind, EventKind::Purged);
        assert_eq!(page.events[1].id, None);
        assert_eq!(page.events[1].detail_lossy().as_deref(), Some("3"));
        // A group's pause and resume name the group; the queue's own none.
        let reply = Value::Array(vec![
            Value::Int(12),
            Value::Array(vec![
                event(10, b"paused", Value::Nil, Value::Nil, bulk(b"tenant-\xff")),
                event(11, b"resumed", Value::Nil, Value::Nil, bulk(b"tenant-\xff")),
                event(12, b"paused", Value::Nil, Value::Nil, Value::Nil),
            ]),
        ]);
        let groups = parse_events(reply).unwrap();
        let kinds: Vec<&EventKind> = groups.events.iter().map(|e| &e.kind).collect();
        assert_eq!(
            kinds,
            [&EventKind::Paused, &EventKind::Resumed, &EventKind::Paused]
        );
        assert_eq!(
            groups.events[0].detail.as_deref(),
            Some(&b"tenant-\xff"[..])
        );
        assert_eq!(
            groups.events[1].detail_lossy().as_deref(),
            Some("tenant-\u{fffd}")
        );
        assert_eq!(
            (groups.events[0].id.clone(), groups.events[2].detail.clone()),
            (None, None)
        );
        // A type a newer module writes still comes through.
        assert_eq!(page.events[2].kind, EventKind::Other("teleported".into()));
        assert_eq!(page.events[2].kind.to_string(), "teleported");
        let empty = parse_events(Value::Array(vec![Value::Int(0), Value::Array(vec![])]));
        assert_eq!(empty.unwrap(), EventPage::default());
        for bad in [
            Value::Int(1),
            Value::Array(vec![Value::Int(1)]),
            Value::Array(vec![
                Value::Int(1),
                Value::Array(vec![Value::Array(vec![Value::Int(1)])]),
            ]),
            Value::Array(vec![Value::Int(-1), Value::Array(vec![])]),
        ] {
            let e = parse_events(bad).unwrap_err();
            assert!(e.to_string().contains("DQ.EVENTS"), "{e}");
        }
    }

    #[test]
    fn kinds_read_and_print_as_the_server_names_them() {
        for kind in EventKind::ALL {
            assert_eq!(kind.as_str().parse::<EventKind>().unwrap(), kind);
        }
        assert_eq!(
            "Added".parse::<EventKind>().unwrap(),
            EventKind::Other("Added".into()),
            "the server's names are lower-case"
        );
    }

    #[test]
    fn events_send_after_count_and_block_and_refuse_a_bad_count() {
        assert_eq!(
            sent(&events_cmd(b"q", None, 100, None).unwrap()),
            ["DQ.EVENTS", "q", "COUNT", "100"]
        );
        assert_eq!(
            sent(&events_cmd(b"q", Some(0), 5, Some(Duration::from_micros(1))).unwrap()),
            ["DQ.EVENTS", "q", "AFTER", "0", "COUNT", "5", "BLOCK", "1"],
            "a moment, never BLOCK 0 (for ever)"
        );
        for count in [0, MAX_EVENTS_COUNT + 1] {
            assert!(matches!(
                events_cmd(b"q", None, count, None),
                Err(Error::Config(_))
            ));
        }
    }

    #[test]
    fn gap_and_a_restarted_log_are_typed() {
        let server_error =
            redis::make_extension_error("GAP".into(), Some("the oldest event kept is 6".into()));
        match gap(b"q", Error::from(server_error)) {
            Error::Gap { queue, oldest } => assert_eq!((queue.as_str(), oldest), ("q", 6)),
            other => panic!("{other:?}"),
        }
        let other = gap(b"q", Error::Config("x".into()));
        assert!(matches!(other, Error::Config(_)));
        let page = EventPage {
            last_seq: 0,
            events: vec![],
        };
        assert!(restarted(b"q", None, &page).is_none());
        assert!(restarted(b"q", Some(0), &page).is_none());
        match restarted(b"q", Some(4), &page) {
            Some(Error::EventLogRestarted {
                after, last_seq, ..
            }) => assert_eq!((after, last_seq), (4, 0)),
            other => panic!("{other:?}"),
        }
    }
}
