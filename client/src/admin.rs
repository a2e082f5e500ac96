//! Typed admin calls: the read and maintenance commands an operator's tool
//! (the dashboard, a script) sends — DQ.QUEUES, STATS, GET, PEEK, SCAN,
//! CONFIG, REDRIVE, CANCEL, PURGE, PAUSE, RESUME (of a queue or of one of
//! its groups), GROUPS, SCHEDULE, UNSCHEDULE, SCHEDULES — and `INFO dq`; the outcome calls DQ.DONE and DQ.WAIT; and
//! one read of a queue's event log, DQ.EVENTS.
//!
//! Every function takes any async connection (`redis::aio::ConnectionLike`:
//! a multiplexed connection, a `ConnectionManager`, a cluster connection)
//! and the queue name as bytes (any byte string is a valid queue name).
//! Records (DQ.GET, STATS, CONFIG, SCHEDULES) are read by field name from a RESP2 flat
//! array or a RESP3 map, so fields a newer module adds are ignored.
//! Replies are parsed by pure functions, tested without a server.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use redis::aio::ConnectionLike;
use redis::Value;

use crate::args::{check_count, check_id, ms, require};
use crate::error::Error;
use crate::events::EventPage;
use crate::reply::{
    array, bad, bytes, cmd, field_name, fields, int, ok, opt_bytes, opt_int, opt_text, opt_uint,
    pairs, query, text, uint,
};
use crate::schedule::{Schedule, ScheduleInfo};

/// The state of a message, as DQ.PEEK, SCAN and PURGE name it.
///
/// 0.x change: `Done` is new (a finished message kept by RETAIN), and
/// [`State::ALL`] has five states.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum State {
    Delayed,
    Ready,
    Inflight,
    Dead,
    /// Finished by DQ.ACK or DQ.DONE and kept for its retention (RETAIN),
    /// with its result.
    Done,
}

impl State {
    pub const ALL: [State; 5] = [
        State::Delayed,
        State::Ready,
        State::Inflight,
        State::Dead,
        State::Done,
    ];

    /// The argument of DQ.PEEK, SCAN and PURGE.
    pub fn keyword(self) -> &'static str {
        match self {
            State::Delayed => "DELAYED",
            State::Ready => "READY",
            State::Inflight => "INFLIGHT",
            State::Dead => "DEAD",
            State::Done => "DONE",
        }
    }

    /// As DQ.GET and DQ.STATS spell it: `delayed`, `ready`, `inflight`,
    /// `dead`, `done`.
    pub fn as_str(self) -> &'static str {
        match self {
            State::Delayed => "delayed",
            State::Ready => "ready",
            State::Inflight => "inflight",
            State::Dead => "dead",
            State::Done => "done",
        }
    }
}

impl fmt::Display for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The state names are case-insensitive.
impl FromStr for State {
    type Err = String;
    fn from_str(s: &str) -> Result<State, String> {
        State::ALL
            .into_iter()
            .find(|st| st.as_str().eq_ignore_ascii_case(s))
            .ok_or_else(|| {
                format!("unknown state '{s}': use delayed, ready, inflight, dead or done")
            })
    }
}

/// DQ.STATS: messages per state now, lifetime counters, lag.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    pub delayed: u64,
    pub ready: u64,
    pub inflight: u64,
    pub dead: u64,
    /// Finished messages kept by RETAIN (DQ.DONE, or ACK under RETAIN).
    pub done: u64,
    pub added: u64,
    pub delivered: u64,
    pub acked: u64,
    pub nacked: u64,
    pub retried: u64,
    pub lease_expired: u64,
    pub dead_lettered: u64,
    pub expired: u64,
    pub redriven: u64,
    pub cancelled: u64,
    pub purged: u64,
    /// POPs that delivered fewer messages than they asked for (and than
    /// were ready) because of a pause, RATE or MAXINFLIGHT.
    pub throttled: u64,
    /// Done messages dropped when their retention ran out or by RETAINMAX.
    pub dropped: u64,
    /// How long the earliest-due ready message has been due; None when
    /// nothing is ready.
    pub oldest_ready_age_ms: Option<u64>,
    /// When the earliest delayed message is due (Unix ms); None when none.
    pub next_due_at: Option<u64>,
    /// Recurring schedules the queue holds (DQ.SCHEDULE).
    pub schedules: u64,
    /// Groups that exist now: with a message waiting, ready, in flight or
    /// delayed for a retry, or a pause ([`admin::groups`](crate::admin::groups)
    /// lists them). 0 from a module without groups' limits.
    pub groups: u64,
    /// Whether DQ.PAUSE holds the queue.
    pub paused: bool,
    /// Until when (Unix ms); None when not paused or paused until DQ.RESUME.
    pub paused_until: Option<u64>,
    /// The queue's RATE (`100/1s`); None when none.
    pub rate: Option<String>,
    /// The queue's MAXINFLIGHT; None when none.
    pub max_inflight: Option<u64>,
}

impl Stats {
    /// Messages in `state` now.
    pub fn count(&self, state: State) -> u64 {
        match state {
            State::Delayed => self.delayed,
            State::Ready => self.ready,
            State::Inflight => self.inflight,
            State::Dead => self.dead,
            State::Done => self.done,
        }
    }

    /// Every message of the queue now, the done ones it keeps included.
    pub fn total(&self) -> u64 {
        self.delayed + self.ready + self.inflight + self.dead + self.done
    }

    /// The lifetime counters, by their DQ.STATS field names, in its order.
    pub fn counters(&self) -> [(&'static str, u64); 13] {
        [
            ("added", self.added),
            ("delivered", self.delivered),
            ("acked", self.acked),
            ("nacked", self.nacked),
            ("retried", self.retried),
            ("lease-expired", self.lease_expired),
            ("dead-lettered", self.dead_lettered),
            ("expired", self.expired),
            ("redriven", self.redriven),
            ("cancelled", self.cancelled),
            ("purged", self.purged),
            ("throttled", self.throttled),
            ("dropped", self.dropped),
        ]
    }

    /// [`Stats::rate`] read: None when the queue has no RATE (or one this
    /// client cannot read).
    pub fn rate_limit(&self) -> Option<Rate> {
        self.rate.as_deref().and_then(Rate::parse)
    }

    /// Adds another queue's numbers to these, as a total over many queues
    /// (a server's, a sharded queue's): the counts per state, the lifetime
    /// counters, `throttled`, `schedules` and `groups` summed (saturating); the
    /// oldest ready age the largest, the next due time the earliest. The
    /// flow control (`paused`, `rate`, ...) is left as it is: what a sum of
    /// limits means is the caller's to say.
    pub fn accumulate(&mut self, other: &Stats) {
        for (sum, part) in [
            (&mut self.delayed, other.delayed),
            (&mut self.ready, other.ready),
            (&mut self.inflight, other.inflight),
            (&mut self.dead, other.dead),
            (&mut self.done, other.done),
            (&mut self.added, other.added),
            (&mut self.delivered, other.delivered),
            (&mut self.acked, other.acked),
            (&mut self.nacked, other.nacked),
            (&mut self.retried, other.retried),
            (&mut self.lease_expired, other.lease_expired),
            (&mut self.dead_lettered, other.dead_lettered),
            (&mut self.expired, other.expired),
            (&mut self.redriven, other.redriven),
            (&mut self.cancelled, other.cancelled),
            (&mut self.purged, other.purged),
            (&mut self.throttled, other.throttled),
            (&mut self.dropped, other.dropped),
            (&mut self.schedules, other.schedules),
            (&mut self.groups, other.groups),
        ] {
            *sum = sum.saturating_add(part);
        }
        self.oldest_ready_age_ms = self.oldest_ready_age_ms.max(other.oldest_ready_age_ms);
        self.next_due_at = match (self.next_due_at, other.next_due_at) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
    }
}

/// A queue's RATE: at most `deliveries` deliveries (first or repeated) in
/// any window of `window`. Displayed as the server prints it, `100/1s`:
/// the window in its largest exact unit (`ms`, `s`, `m`, `h`, `d`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Rate {
    pub deliveries: u64,
    pub window: Duration,
}

/// The units of a RATE window, largest first.
const UNITS: [(&str, u64); 5] = [
    ("d", 86_400_000),
    ("h", 3_600_000),
    ("m", 60_000),
    ("s", 1_000),
    ("ms", 1),
];

impl Rate {
    /// RATE as DQ.STATS and DQ.CONFIG print it (`100/1s`, `5000/1h`,
    /// `10/1500ms`; a window without a unit is milliseconds). None for
    /// anything else, and for a window of 0, which no server prints.
    pub fn parse(text: &str) -> Option<Rate> {
        let (n, window) = text.split_once('/')?;
        if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let deliveries = n.parse::<u64>().ok()?;
        let digits_end = window
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(window.len());
        let (digits, unit) = window.split_at(digits_end);
        let scale = match unit {
            "" => 1,
            _ => UNITS.iter().find(|(name, _)| *name == unit)?.1,
        };
        let window_ms = digits.parse::<u64>().ok()?.checked_mul(scale)?;
        (window_ms > 0).then(|| Rate {
            deliveries,
            window: Duration::from_millis(window_ms),
        })
    }
}

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ms = u64::try_from(self.window.as_millis()).unwrap_or(u64::MAX);
        let (unit, scale) = UNITS
            .iter()
            .find(|(_, scale)| ms > 0 && ms.is_multiple_of(*scale))
            .copied()
            .unwrap_or(("ms", 1));
        write!(f, "{}/{}{unit}", self.deliveries, ms / scale)
    }
}

/// DQ.GET: one message and all that is known about it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Message {
    pub id: Vec<u8>,
    /// `delayed`, `ready`, `inflight`, `dead` or `done`; kept as text so
    /// that a state a newer module adds is still shown.
    pub state: String,
    pub payload: Vec<u8>,
    pub priority: i64,
    pub attempt: u64,
    pub due_at: Option<u64>,
    pub lease_deadline: Option<u64>,
    pub added_at: Option<u64>,
    pub replacement_pending: bool,
    pub max_attempts: Option<u64>,
    pub max_attempts_from: Option<String>,
    pub backoff: Option<String>,
    pub backoff_from: Option<String>,
    pub dead_reason: Option<String>,
    pub died_at: Option<u64>,
    pub expires_at: Option<u64>,
    pub group: Option<Vec<u8>>,
    pub waiting_for: Option<Vec<u8>>,
    pub attempts_left: Option<u64>,
    pub last_error: Option<Vec<u8>>,
    /// What DQ.DONE kept (any bytes; empty is a result); `None` unless done
    /// by DONE (a plain ACK keeps none).
    pub result: Option<Vec<u8>>,
    /// When the ACK or DONE that finished it ran (Unix ms); `None` unless done.
    pub finished_at: Option<u64>,
    /// When its retention runs out and it is dropped (Unix ms); `None`
    /// unless done.
    pub retained_until: Option<u64>,
    /// The last progress its delivery reported (DQ.TOUCH ... PROGRESS):
    /// the running delivery's, or once done the last one's; `None` when
    /// none was.
    pub progress: Option<Vec<u8>>,
}

impl Message {
    /// The state as a [`State`], when it is one of the five.
    pub fn state(&self) -> Option<State> {
        self.state.parse().ok()
    }
}

/// An entry of DQ.PEEK or DQ.SCAN.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Entry {
    pub id: Vec<u8>,
    pub payload: Vec<u8>,
    pub attempt: u64,
    /// The due time, the lease deadline (in flight), the time of death
    /// (dead) or when it finished (done), Unix ms.
    pub time: u64,
    pub last_error: Option<Vec<u8>>,
}

/// DQ.CONFIG: the queue's defaults in force and where each comes from
/// (`queue` or `module`), and its flow control.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct QueueConfig {
    pub lease_ms: u64,
    pub lease_ms_from: String,
    pub max_attempts: u64,
    pub max_attempts_from: String,
    pub backoff: String,
    pub backoff_from: String,
    /// `RATE` (`100/1s`); None when none.
    pub rate: Option<String>,
    /// `MAXINFLIGHT`; None when none.
    pub max_inflight: Option<u64>,
    /// Whether DQ.PAUSE holds the queue.
    pub paused: bool,
    /// Until when (Unix ms); None when not paused or paused until DQ.RESUME.
    pub paused_until: Option<u64>,
    /// POPs a limit made deliver less (as DQ.STATS's `throttled`).
    pub throttled: u64,
    /// How long a message finished by ACK or DONE is kept as `done`, in ms
    /// (0: not kept); messages with their own RETAIN keep theirs.
    pub retain_ms: u64,
    /// `queue` or `module`: where `retain_ms` comes from.
    pub retain_ms_from: String,
    /// RETAINMAX: at most this many done messages, the earliest finished
    /// dropped first; `None`: no cap.
    pub retain_max: Option<u64>,
    /// EVENTS: how many of its last events the queue keeps for DQ.EVENTS
    /// (0: none, the default); set with `config_set(&[("EVENTS", "10000")])`.
    pub events: u64,
    /// GROUPLIMIT: at most this many messages of each group ready, in
    /// flight or delayed for a retry at once (1, the default, makes each
    /// group's work serial); set with `config_set(&[("GROUPLIMIT", "5")])`.
    /// 0 from a module without groups' limits.
    pub group_limit: u32,
    /// GROUPRATE (`10/1s`): each group at most n deliveries in any window
    /// of that length; None when none. [`QueueConfig::group_rate_limit`]
    /// reads it as a [`Rate`].
    pub group_rate: Option<String>,
    /// ORDER, as the server spells it: `priority` (the default) or `fair`
    /// (POP serves the groups with a ready message in turn); kept as text
    /// so that an order a newer module adds is still shown, empty from a
    /// module without it. [`QueueConfig::order`] reads it as an [`Order`].
    pub order: String,
}

impl QueueConfig {
    /// [`QueueConfig::rate`] read: None when the queue has no RATE (or one
    /// this client cannot read).
    pub fn rate_limit(&self) -> Option<Rate> {
        self.rate.as_deref().and_then(Rate::parse)
    }

    /// [`QueueConfig::group_rate`] read: None when the queue has no
    /// GROUPRATE (or one this client cannot read).
    pub fn group_rate_limit(&self) -> Option<Rate> {
        self.group_rate.as_deref().and_then(Rate::parse)
    }

    /// The order as an [`Order`], when it is one this client knows.
    pub fn order(&self) -> Option<Order> {
        self.order.parse().ok()
    }
}

/// The order in which POP takes a queue's ready messages (DQ.CONFIG
/// `ORDER`): set with `config_set(&[("ORDER", Order::Fair.keyword())])`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Order {
    /// Highest priority, then earliest due, then first added, across
    /// groups (the default).
    #[default]
    Priority,
    /// The groups that have a ready message in turn, round-robin (the
    /// messages without a group form one more group); within a group:
    /// priority, due time, ADD order.
    Fair,
}

impl Order {
    /// The value of DQ.CONFIG SET ORDER: `PRIORITY` or `FAIR`.
    pub fn keyword(self) -> &'static str {
        match self {
            Order::Priority => "PRIORITY",
            Order::Fair => "FAIR",
        }
    }

    /// As DQ.CONFIG replies it: `priority` or `fair`.
    pub fn as_str(self) -> &'static str {
        match self {
            Order::Priority => "priority",
            Order::Fair => "fair",
        }
    }
}

impl fmt::Display for Order {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `priority` or `fair`, case-insensitively.
impl FromStr for Order {
    type Err = String;
    fn from_str(s: &str) -> Result<Order, String> {
        [Order::Priority, Order::Fair]
            .into_iter()
            .find(|o| o.as_str().eq_ignore_ascii_case(s))
            .ok_or_else(|| format!("unknown order '{s}': use priority or fair"))
    }
}

/// One group of a queue, as DQ.GROUPS shows it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GroupInfo {
    /// The group's name (any bytes, as given to `GROUP`).
    pub name: Vec<u8>,
    /// Due messages its GROUPLIMIT, GROUPRATE or pause holds back
    /// (reported `delayed` by DQ.STATS and DQ.GET).
    pub waiting: u64,
    pub ready: u64,
    pub inflight: u64,
    /// Whether DQ.PAUSE ... GROUP holds the group.
    pub paused: bool,
    /// Until when (Unix ms); None when not paused or paused until
    /// DQ.RESUME.
    pub paused_until: Option<u64>,
}

impl GroupInfo {
    /// The name as text; bytes that are not UTF-8 become U+FFFD.
    pub fn name_lossy(&self) -> std::borrow::Cow<'_, str> {
        String::from_utf8_lossy(&self.name)
    }
}

/// `INFO dq`: the fields of the module's section, without the `dq_` prefix,
/// as text (every one is an integer today).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct InfoDq {
    pub fields: Vec<(String, String)>,
}

impl InfoDq {
    /// An integer field, by its name without `dq_` (e.g. `timer_ticks`).
    pub fn int(&self, name: &str) -> Option<u64> {
        self.fields
            .iter()
            .find(|(k, _)| k == name)
            .and_then(|(_, v)| v.trim().parse().ok())
    }
}

/// What became of a message, as DQ.WAIT tells it: the outcome a caller
/// waits for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum JobOutcome {
    /// Finished by DQ.DONE (its result: any bytes, empty included) or by a
    /// plain DQ.ACK (`None`), and kept by its retention.
    Done(Option<Vec<u8>>),
    /// Dead (its last attempt failed, NACK DEAD, its lease ran out on the
    /// last attempt, its TTL): its last error, `None` when it has none.
    Dead(Option<Vec<u8>>),
    /// The queue does not hold the id: never added, cancelled, purged, or
    /// finished with no retention to keep it (or past it).
    Gone,
}

impl JobOutcome {
    /// The state's name as DQ.WAIT replies it: "done", "dead" or "gone".
    pub fn state(&self) -> &'static str {
        match self {
            JobOutcome::Done(_) => "done",
            JobOutcome::Dead(_) => "dead",
            JobOutcome::Gone => "gone",
        }
    }

    /// The result of a done message, the last error of a dead one.
    pub fn value(&self) -> Option<&[u8]> {
        match self {
            JobOutcome::Done(v) | JobOutcome::Dead(v) => v.as_deref(),
            JobOutcome::Gone => None,
        }
    }
}

/// The longest result DQ.DONE keeps (the server's payload limit, 512 MiB).
pub const MAX_RESULT_BYTES: usize = 512 * 1024 * 1024;

// --- commands ---------------------------------------------------------------

/// DQ.QUEUES: the queues of the connection's database (on this node, in a
/// cluster), sorted by bytes.
pub async fn queues<C: ConnectionLike + ?Sized>(con: &mut C) -> Result<Vec<Vec<u8>>, Error> {
    let v = query(con, &redis::cmd("DQ.QUEUES")).await?;
    parse_queues(v)
}

/// DQ.QUEUES MATCH pattern: the names matching a glob-style `pattern` (as
/// SCAN MATCH: `*`, `?`, `[a-z]`, `[^x]`, `\x`), sorted by bytes.
/// [`glob_escape`] makes a pattern matching one name only.
pub async fn queues_matching<C: ConnectionLike + ?Sized>(
    con: &mut C,
    pattern: &[u8],
) -> Result<Vec<Vec<u8>>, Error> {
    let mut c = redis::cmd("DQ.QUEUES");
    c.arg("MATCH").arg(pattern);
    parse_queues(query(con, &c).await?)
}

/// DQ.QUEUES [MATCH pattern] WITHSTATS: every queue of the node (those
/// matching `pattern`, when given) with its DQ.STATS, sorted by bytes. One
/// call, however many queues: what a dashboard or an exporter should send
/// instead of one DQ.STATS per queue.
pub async fn queues_with_stats<C: ConnectionLike + ?Sized>(
    con: &mut C,
    pattern: Option<&[u8]>,
) -> Result<Vec<(Vec<u8>, Stats)>, Error> {
    let mut c = redis::cmd("DQ.QUEUES");
    if let Some(pattern) = pattern {
        c.arg("MATCH").arg(pattern);
    }
    c.arg("WITHSTATS");
    parse_queues_with_stats(query(con, &c).await?)
}

/// A DQ.QUEUES MATCH pattern that matches exactly `name`: every character
/// a glob gives a meaning to is escaped with a backslash.
pub fn glob_escape(name: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(name.len() + 2);
    for &b in name {
        if matches!(b, b'*' | b'?' | b'[' | b']' | b'\\') {
            out.push(b'\\');
        }
        out.push(b);
    }
    out
}

/// DQ.STATS.
pub async fn stats<C: ConnectionLike + ?Sized>(con: &mut C, queue: &[u8]) -> Result<Stats, Error> {
    parse_stats(query(con, &cmd("DQ.STATS", queue)).await?)
}

/// DQ.GET: None for an unknown id.
pub async fn get<C: ConnectionLike + ?Sized>(
    con: &mut C,
    queue: &[u8],
    id: &[u8],
) -> Result<Option<Message>, Error> {
    check_id("id", id)?;
    let mut c = cmd("DQ.GET", queue);
    c.arg(id);
    parse_message(query(con, &c).await?)
}

/// DQ.WAIT: the message's outcome, or `None` when it has none yet (it is
/// delayed, ready or in flight). With a `timeout` of 0 it looks once;
/// otherwise the server waits up to `timeout` for the outcome (`BLOCK`,
/// whole milliseconds, at least 1) — holding the connection it is sent on
/// that long, so send it on a connection of its own ([`Queue::wait`]
/// does). [`Error::Config`], with nothing sent, for an id of 0 or over
/// 1024 bytes.
///
/// [`Queue::wait`]: crate::Queue::wait
pub async fn wait<C: ConnectionLike + ?Sized>(
    con: &mut C,
    queue: &[u8],
    id: &[u8],
    timeout: Duration,
) -> Result<Option<JobOutcome>, Error> {
    parse_wait(query(con, &wait_cmd(queue, id, timeout)?).await?)
}

/// `DQ.WAIT queue id [BLOCK ms]`.
pub(crate) fn wait_cmd(queue: &[u8], id: &[u8], timeout: Duration) -> Result<redis::Cmd, Error> {
    check_id("id", id)?;
    let mut c = cmd("DQ.WAIT", queue);
    c.arg(id);
    if !timeout.is_zero() {
        // BLOCK 0 would wait for ever: a moment is 1 ms.
        c.arg("BLOCK").arg(ms(timeout).max(1));
    }
    Ok(c)
}

/// DQ.EVENTS, one read without BLOCK: up to `count` (1 to 10000) of the
/// queue's events after seq `after`, oldest first (`None`: from the
/// oldest it keeps), and the newest seq it has written (`last_seq`; 0
/// for a queue that never wrote one or does not exist). Read on with
/// `after` = the last event's seq. [`Error::Gap`] when events after
/// `after` were trimmed; [`Error::EventLogRestarted`] when `last_seq` is
/// below `after` (the log started over). To wait for events, use
/// [`Queue::events`], which blocks on a connection of its own.
/// [`Error::Config`], with nothing sent, for a count of 0 or over 10000.
///
/// [`Queue::events`]: crate::Queue::events
pub async fn events<C: ConnectionLike + ?Sized>(
    con: &mut C,
    queue: &[u8],
    after: Option<u64>,
    count: usize,
) -> Result<EventPage, Error> {
    crate::events::read(con, queue, after, count).await
}

/// DQ.DONE: as DQ.ACK, and each message keeps its result (any bytes,
/// empty included, at most [`MAX_RESULT_BYTES`]) while its retention
/// lasts. Replies how many of the ids were in flight and are now finished.
/// No pairs: 0, and nothing sent. [`Error::Config`], with nothing sent,
/// for an id of 0 or over 1024 bytes or a result over the limit (the
/// server would refuse the whole command).
pub async fn done<C: ConnectionLike + ?Sized>(
    con: &mut C,
    queue: &[u8],
    results: &[(&[u8], &[u8])],
) -> Result<u64, Error> {
    if results.is_empty() {
        return Ok(0);
    }
    parse_count("DQ.DONE", query(con, &done_cmd(queue, results)?).await?)
}

/// `DQ.DONE queue id result [id result ...]`.
pub(crate) fn done_cmd(queue: &[u8], results: &[(&[u8], &[u8])]) -> Result<redis::Cmd, Error> {
    let mut c = cmd("DQ.DONE", queue);
    for (id, result) in results {
        check_id("id", id)?;
        check_result(result)?;
        c.arg(*id).arg(*result);
    }
    Ok(c)
}

/// A result DQ.DONE keeps: at most [`MAX_RESULT_BYTES`].
pub(crate) fn check_result(result: &[u8]) -> Result<(), Error> {
    require(result.len() <= MAX_RESULT_BYTES, || {
        format!(
            "a result is at most {MAX_RESULT_BYTES} bytes (the server's limit), not {}",
            result.len()
        )
    })
}

/// DQ.PEEK: up to `count` (1 to 10000) messages of `state`, in the order
/// they will leave it.
pub async fn peek<C: ConnectionLike + ?Sized>(
    con: &mut C,
    queue: &[u8],
    state: State,
    count: usize,
) -> Result<Vec<Entry>, Error> {
    check_count(count)?;
    let mut c = cmd("DQ.PEEK", queue);
    c.arg(state.keyword()).arg("COUNT").arg(count);
    parse_entries("DQ.PEEK", query(con, &c).await?)
}

/// DQ.SCAN: one page from `cursor` (0 to start); the next cursor is 0 at
/// the end. `state` None scans every state.
pub async fn scan_page<C: ConnectionLike + ?Sized>(
    con: &mut C,
    queue: &[u8],
    state: Option<State>,
    cursor: u64,
    count: usize,
) -> Result<(u64, Vec<Entry>), Error> {
    check_count(count)?;
    let mut c = cmd("DQ.SCAN", queue);
    c.arg(cursor);
    if let Some(state) = state {
        c.arg("STATE").arg(state.keyword());
    }
    c.arg("COUNT").arg(count);
    parse_scan(query(con, &c).await?)
}

/// DQ.CONFIG (the read form).
pub async fn config<C: ConnectionLike + ?Sized>(
    con: &mut C,
    queue: &[u8],
) -> Result<QueueConfig, Error> {
    parse_config(query(con, &cmd("DQ.CONFIG", queue)).await?)
}

/// DQ.REDRIVE with `COUNT count`: the `count` (1 to 10000) oldest dead
/// messages back to ready. Returns how many moved.
pub async fn redrive_count<C: ConnectionLike + ?Sized>(
    con: &mut C,
    queue: &[u8],
    count: usize,
) -> Result<u64, Error> {
    check_count(count)?;
    let mut c = cmd("DQ.REDRIVE", queue);
    c.arg("COUNT").arg(count);
    parse_count("DQ.REDRIVE", query(con, &c).await?)
}

/// Every dead message back to ready: DQ.REDRIVE repeated until it moves
/// none (each call moves at most 10000). Returns how many moved.
pub async fn redrive_all<C: ConnectionLike + ?Sized>(
    con: &mut C,
    queue: &[u8],
) -> Result<u64, Error> {
    let mut total = 0;
    loop {
        let moved = parse_count("DQ.REDRIVE", query(con, &cmd("DQ.REDRIVE", queue)).await?)?;
        total += moved;
        // Fewer than a full batch: the dead set is empty now (or holds only
        // messages that died meanwhile, which a caller did not see).
        if moved < 10_000 {
            return Ok(total);
        }
    }
}

/// DQ.CONFIG queue SET field value ...: the queue's own LEASE, MAXATTEMPTS
/// or BACKOFF (value `DEFAULT` removes it), its flow control: `RATE`
/// (`100/1s`) and `MAXINFLIGHT` (`0` or `DEFAULT` removes either), and
/// what it keeps of finished messages: `RETAIN` (a duration, `1h`; `0`
/// keeps none, `DEFAULT` follows the module's `dq.retain-ms`) and
/// `RETAINMAX` (a count; `0` or `DEFAULT`: no cap); its event log:
/// `EVENTS` (keep the last n events; `0` or `DEFAULT`: none); its groups
/// (docs/commands.md, "Groups: limits, fair order, pauses"):
/// `GROUPLIMIT` (at most n of each group out at once, 1 to 1000000;
/// `DEFAULT`: 1), `GROUPRATE` (each group at most n deliveries a window,
/// `10/1s`; `0` or `DEFAULT` removes it) and `ORDER` (`PRIORITY` or
/// `FAIR`, see [`Order`]; `DEFAULT`: PRIORITY); all pairs or none.
pub async fn config_set<C: ConnectionLike + ?Sized>(
    con: &mut C,
    queue: &[u8],
    pairs: &[(&str, &str)],
) -> Result<(), Error> {
    if pairs.is_empty() {
        return Ok(());
    }
    let mut c = cmd("DQ.CONFIG", queue);
    c.arg("SET");
    for (field, value) in pairs {
        c.arg(*field).arg(*value);
    }
    ok("DQ.CONFIG", query(con, &c).await?)
}

/// DQ.PAUSE: POP delivers nothing from the queue until DQ.RESUME, or
/// until `for_` has passed (rounded up to whole milliseconds; a pause of 0
/// is refused, as the server refuses `FOR 0`). Pausing again replaces the
/// pause's end; pausing a queue that does not exist makes it.
pub async fn pause<C: ConnectionLike + ?Sized>(
    con: &mut C,
    queue: &[u8],
    for_: Option<Duration>,
) -> Result<(), Error> {
    ok(
        "DQ.PAUSE",
        query(con, &pause_cmd(queue, for_, None)?).await?,
    )
}

/// DQ.PAUSE ... GROUP: POP delivers nothing of `group` until
/// [`resume_group`], or until `for_` has passed (as [`pause`]); the rest of
/// the queue goes on. The group's ready messages go back to waiting,
/// keeping their places; those in flight finish as usual. A paused group
/// exists ([`groups_page`]) even with no message. [`Error::Config`], with
/// nothing sent, for a group of 0 or over 1024 bytes, or a pause of 0.
pub async fn pause_group<C: ConnectionLike + ?Sized>(
    con: &mut C,
    queue: &[u8],
    group: &[u8],
    for_: Option<Duration>,
) -> Result<(), Error> {
    ok(
        "DQ.PAUSE",
        query(con, &pause_cmd(queue, for_, Some(group))?).await?,
    )
}

/// `DQ.PAUSE queue [FOR ms] [GROUP g]`.
pub(crate) fn pause_cmd(
    queue: &[u8],
    for_: Option<Duration>,
    group: Option<&[u8]>,
) -> Result<redis::Cmd, Error> {
    if let Some(g) = group {
        check_id("group", g)?;
    }
    let mut c = cmd("DQ.PAUSE", queue);
    if let Some(d) = for_ {
        require(!d.is_zero(), || {
            "a pause for 0 would end at once: give a length, or None to pause until resumed".into()
        })?;
        // A pause shorter than a millisecond means "a moment" (FOR 1),
        // not "until resumed".
        let ms = u64::try_from(d.as_nanos().div_ceil(1_000_000)).unwrap_or(u64::MAX);
        c.arg("FOR").arg(ms);
    }
    if let Some(g) = group {
        c.arg("GROUP").arg(g);
    }
    Ok(c)
}

/// DQ.RESUME: whether the queue was paused.
pub async fn resume<C: ConnectionLike + ?Sized>(con: &mut C, queue: &[u8]) -> Result<bool, Error> {
    Ok(parse_count("DQ.RESUME", query(con, &cmd("DQ.RESUME", queue)).await?)? != 0)
}

/// DQ.RESUME ... GROUP: ends the group's pause (not the queue's); whether
/// the group was paused. [`Error::Config`], with nothing sent, for a group
/// of 0 or over 1024 bytes.
pub async fn resume_group<C: ConnectionLike + ?Sized>(
    con: &mut C,
    queue: &[u8],
    group: &[u8],
) -> Result<bool, Error> {
    check_id("group", group)?;
    let mut c = cmd("DQ.RESUME", queue);
    c.arg("GROUP").arg(group);
    Ok(parse_count("DQ.RESUME", query(con, &c).await?)? != 0)
}

/// DQ.GROUPS: one page of the queue's groups, in name order, from `cursor`
/// (`"0"` to start; then the cursor the last page gave, opaque text); the
/// next cursor is `"0"` at the end. `count` (1 to 10000) bounds the groups
/// looked at and `pattern` (a glob, as DQ.QUEUES MATCH) keeps the names
/// that match, so a page may hold fewer groups — even none — with a cursor
/// that is not `"0"`. Every group present for the whole iteration is
/// returned exactly once. [`Error::Config`], with nothing sent, for a
/// count of 0 or over 10000.
pub async fn groups_page<C: ConnectionLike + ?Sized>(
    con: &mut C,
    queue: &[u8],
    cursor: &str,
    pattern: Option<&[u8]>,
    count: usize,
) -> Result<(String, Vec<GroupInfo>), Error> {
    parse_groups(query(con, &groups_cmd(queue, cursor, pattern, count)?).await?)
}

/// Every group of the queue (those matching `pattern`, when given), in
/// name order: DQ.GROUPS page after page, `count` groups looked at a
/// page, until the cursor comes back `"0"`.
pub async fn groups<C: ConnectionLike + ?Sized>(
    con: &mut C,
    queue: &[u8],
    pattern: Option<&[u8]>,
    count: usize,
) -> Result<Vec<GroupInfo>, Error> {
    let mut all = Vec::new();
    let mut cursor = String::from("0");
    loop {
        let (next, page) = groups_page(con, queue, &cursor, pattern, count).await?;
        all.extend(page);
        if next == "0" {
            return Ok(all);
        }
        cursor = next;
    }
}

/// `DQ.GROUPS queue cursor [MATCH pattern] COUNT n`.
pub(crate) fn groups_cmd(
    queue: &[u8],
    cursor: &str,
    pattern: Option<&[u8]>,
    count: usize,
) -> Result<redis::Cmd, Error> {
    check_count(count)?;
    require(!cursor.is_empty(), || {
        "a DQ.GROUPS cursor is \"0\" to start, then the one the last page gave".into()
    })?;
    let mut c = cmd("DQ.GROUPS", queue);
    c.arg(cursor);
    if let Some(p) = pattern {
        c.arg("MATCH").arg(p);
    }
    c.arg("COUNT").arg(count);
    Ok(c)
}

/// DQ.SCHEDULE: creates or replaces the queue's schedule `name`. Returns
/// the next run time (Unix ms), or `None` when the schedule has no run
/// left — or when [`Schedule::nx`] left an existing one untouched.
pub async fn schedule<C: ConnectionLike + ?Sized>(
    con: &mut C,
    queue: &[u8],
    name: &[u8],
    payload: &[u8],
    spec: &Schedule,
) -> Result<Option<u64>, Error> {
    let c = crate::schedule::schedule_cmd(queue, name, payload, spec)?;
    crate::schedule::parse_next_run(query(con, &c).await?)
}

/// DQ.UNSCHEDULE: how many of `names` existed (a name given twice counts
/// once). The messages their runs made stay.
pub async fn unschedule<C: ConnectionLike + ?Sized>(
    con: &mut C,
    queue: &[u8],
    names: &[&[u8]],
) -> Result<u64, Error> {
    count_of_each(con, "DQ.UNSCHEDULE", queue, None, names).await
}

/// DQ.SCHEDULES: every schedule of the queue, by name.
pub async fn schedules<C: ConnectionLike + ?Sized>(
    con: &mut C,
    queue: &[u8],
) -> Result<Vec<ScheduleInfo>, Error> {
    crate::schedule::parse_schedules(query(con, &cmd("DQ.SCHEDULES", queue)).await?)
}

/// DQ.REDRIVE ID ...: those of `ids` that are dead back to ready. Returns
/// how many moved.
pub async fn redrive_ids<C: ConnectionLike + ?Sized>(
    con: &mut C,
    queue: &[u8],
    ids: &[&[u8]],
) -> Result<u64, Error> {
    count_of_each(con, "DQ.REDRIVE", queue, Some("ID"), ids).await
}

/// DQ.CANCEL: deletes those messages in any state. Returns how many existed.
pub async fn cancel<C: ConnectionLike + ?Sized>(
    con: &mut C,
    queue: &[u8],
    ids: &[&[u8]],
) -> Result<u64, Error> {
    count_of_each(con, "DQ.CANCEL", queue, None, ids).await
}

/// `command queue [keyword] item ...` and its count: what DQ.CANCEL, DQ.REDRIVE
/// ID and DQ.UNSCHEDULE have in common. No items: 0, and nothing sent (the
/// server would refuse the call).
async fn count_of_each<C: ConnectionLike + ?Sized>(
    con: &mut C,
    command: &'static str,
    queue: &[u8],
    keyword: Option<&str>,
    items: &[&[u8]],
) -> Result<u64, Error> {
    if items.is_empty() {
        return Ok(0);
    }
    let mut c = cmd(command, queue);
    if let Some(keyword) = keyword {
        c.arg(keyword);
    }
    for item in items {
        c.arg(*item);
    }
    parse_count(command, query(con, &c).await?)
}

/// DQ.PURGE: deletes every message of `state`, or of the queue when None.
/// Returns how many were deleted.
pub async fn purge<C: ConnectionLike + ?Sized>(
    con: &mut C,
    queue: &[u8],
    state: Option<State>,
) -> Result<u64, Error> {
    let mut c = cmd("DQ.PURGE", queue);
    if let Some(state) = state {
        c.arg(state.keyword());
    }
    parse_count("DQ.PURGE", query(con, &c).await?)
}

/// `INFO dq`.
pub async fn info_dq<C: ConnectionLike + ?Sized>(con: &mut C) -> Result<InfoDq, Error> {
    let mut c = redis::cmd("INFO");
    c.arg("dq");
    let v = query(con, &c).await?;
    Ok(parse_info_dq(&text("INFO", &v)?))
}

// --- parsing -----------------------------------------------------------------

pub(crate) fn parse_queues(v: Value) -> Result<Vec<Vec<u8>>, Error> {
    array("DQ.QUEUES", v)?
        .into_iter()
        .map(|q| bytes("DQ.QUEUES", q))
        .collect()
}

/// RESP2: `[name, record, name, record, ...]`; RESP3: a map of name to
/// record. Each record is DQ.STATS's, parsed by the same code.
pub(crate) fn parse_queues_with_stats(v: Value) -> Result<Vec<(Vec<u8>, Stats)>, Error> {
    const C: &str = "DQ.QUEUES";
    if v == Value::Nil {
        return Ok(Vec::new());
    }
    pairs(C, v, "WITHSTATS: a queue name without its record")?
        .into_iter()
        .map(|(name, record)| Ok((bytes(C, name)?, stats_record(C, record)?)))
        .collect()
}

pub(crate) fn parse_stats(v: Value) -> Result<Stats, Error> {
    stats_record("DQ.STATS", v)
}

fn stats_record(command: &'static str, v: Value) -> Result<Stats, Error> {
    let mut s = Stats::default();
    for (name, value) in fields(command, v)? {
        let slot = match field_name(command, &name)? {
            b"delayed" => &mut s.delayed,
            b"ready" => &mut s.ready,
            b"inflight" => &mut s.inflight,
            b"dead" => &mut s.dead,
            b"done" => &mut s.done,
            b"added" => &mut s.added,
            b"delivered" => &mut s.delivered,
            b"acked" => &mut s.acked,
            b"nacked" => &mut s.nacked,
            b"retried" => &mut s.retried,
            b"lease-expired" => &mut s.lease_expired,
            b"dead-lettered" => &mut s.dead_lettered,
            b"expired" => &mut s.expired,
            b"redriven" => &mut s.redriven,
            b"cancelled" => &mut s.cancelled,
            b"purged" => &mut s.purged,
            b"throttled" => &mut s.throttled,
            b"dropped" => &mut s.dropped,
            b"schedules" => &mut s.schedules,
            b"groups" => &mut s.groups,
            b"paused" => {
                s.paused = opt_uint(command, &value)?.unwrap_or(0) != 0;
                continue;
            }
            b"paused-until" => {
                s.paused_until = opt_uint(command, &value)?;
                continue;
            }
            b"rate" => {
                s.rate = opt_text(command, value)?;
                continue;
            }
            b"max-inflight" => {
                s.max_inflight = opt_uint(command, &value)?;
                continue;
            }
            b"oldest-ready-age-ms" => {
                s.oldest_ready_age_ms = opt_uint(command, &value)?;
                continue;
            }
            b"next-due-at" => {
                s.next_due_at = opt_uint(command, &value)?;
                continue;
            }
            _ => continue,
        };
        *slot = opt_uint(command, &value)?.unwrap_or(0);
    }
    Ok(s)
}

pub(crate) fn parse_message(v: Value) -> Result<Option<Message>, Error> {
    const C: &str = "DQ.GET";
    if v == Value::Nil {
        return Ok(None);
    }
    let mut m = Message::default();
    let mut seen_id = false;
    for (name, value) in fields(C, v)? {
        match field_name(C, &name)? {
            b"id" => {
                m.id = bytes(C, value)?;
                seen_id = true;
            }
            b"state" => m.state = text(C, &value)?,
            b"payload" => m.payload = bytes(C, value)?,
            b"priority" => m.priority = int(C, &value)?,
            b"attempt" => m.attempt = uint(C, &value)?,
            b"due-at" => m.due_at = opt_uint(C, &value)?,
            b"lease-deadline" => m.lease_deadline = opt_uint(C, &value)?,
            b"added-at" => m.added_at = opt_uint(C, &value)?,
            b"replacement-pending" => m.replacement_pending = opt_uint(C, &value)? == Some(1),
            b"max-attempts" => m.max_attempts = opt_uint(C, &value)?,
            b"max-attempts-from" => m.max_attempts_from = opt_text(C, value)?,
            b"backoff" => m.backoff = opt_text(C, value)?,
            b"backoff-from" => m.backoff_from = opt_text(C, value)?,
            b"dead-reason" => m.dead_reason = opt_text(C, value)?,
            b"died-at" => m.died_at = opt_uint(C, &value)?,
            b"expires-at" => m.expires_at = opt_uint(C, &value)?,
            b"group" => m.group = opt_bytes(C, value)?,
            b"waiting-for" => m.waiting_for = opt_bytes(C, value)?,
            b"attempts-left" => m.attempts_left = opt_uint(C, &value)?,
            b"last-error" => m.last_error = opt_bytes(C, value)?,
            b"result" => m.result = opt_bytes(C, value)?,
            b"finished-at" => m.finished_at = opt_uint(C, &value)?,
            b"retained-until" => m.retained_until = opt_uint(C, &value)?,
            b"progress" => m.progress = opt_bytes(C, value)?,
            _ => {}
        }
    }
    if !seen_id {
        return Err(bad(C, "a record without an id"));
    }
    Ok(Some(m))
}

fn parse_entry(command: &'static str, v: Value) -> Result<Entry, Error> {
    let mut items = array(command, v)?.into_iter();
    let (Some(id), Some(payload), Some(attempt)) = (items.next(), items.next(), items.next())
    else {
        return Err(bad(command, "an entry with fewer than 3 elements"));
    };
    let time = items.next().map(|t| uint(command, &t)).transpose()?;
    let last_error = items.next().map(|e| opt_bytes(command, e)).transpose()?;
    Ok(Entry {
        id: bytes(command, id)?,
        payload: bytes(command, payload)?,
        attempt: uint(command, &attempt)?,
        time: time.unwrap_or(0),
        last_error: last_error.flatten(),
    })
}

pub(crate) fn parse_entries(command: &'static str, v: Value) -> Result<Vec<Entry>, Error> {
    array(command, v)?
        .into_iter()
        .map(|e| parse_entry(command, e))
        .collect()
}

pub(crate) fn parse_scan(v: Value) -> Result<(u64, Vec<Entry>), Error> {
    const C: &str = "DQ.SCAN";
    let mut items = array(C, v)?.into_iter();
    let (Some(cursor), Some(entries), None) = (items.next(), items.next(), items.next()) else {
        return Err(bad(C, "expected [cursor, entries]"));
    };
    Ok((uint(C, &cursor)?, parse_entries(C, entries)?))
}

pub(crate) fn parse_config(v: Value) -> Result<QueueConfig, Error> {
    const C: &str = "DQ.CONFIG";
    let mut c = QueueConfig::default();
    for (name, value) in fields(C, v)? {
        match field_name(C, &name)? {
            b"lease-ms" => c.lease_ms = uint(C, &value)?,
            b"lease-ms-from" => c.lease_ms_from = text(C, &value)?,
            b"max-attempts" => c.max_attempts = uint(C, &value)?,
            b"max-attempts-from" => c.max_attempts_from = text(C, &value)?,
            b"backoff" => c.backoff = text(C, &value)?,
            b"backoff-from" => c.backoff_from = text(C, &value)?,
            b"rate" => c.rate = opt_text(C, value)?,
            b"max-inflight" => c.max_inflight = opt_uint(C, &value)?,
            b"paused" => c.paused = opt_uint(C, &value)?.unwrap_or(0) != 0,
            b"paused-until" => c.paused_until = opt_uint(C, &value)?,
            b"throttled" => c.throttled = opt_uint(C, &value)?.unwrap_or(0),
            b"retain-ms" => c.retain_ms = opt_uint(C, &value)?.unwrap_or(0),
            b"retain-ms-from" => c.retain_ms_from = opt_text(C, value)?.unwrap_or_default(),
            b"retain-max" => c.retain_max = opt_uint(C, &value)?.filter(|&n| n > 0),
            b"events" => c.events = opt_uint(C, &value)?.unwrap_or(0),
            b"group-limit" => {
                let n = opt_uint(C, &value)?.unwrap_or(0);
                c.group_limit = u32::try_from(n)
                    .map_err(|_| bad(C, format!("a group-limit of {n}, over 2^32 - 1")))?;
            }
            b"group-rate" => c.group_rate = opt_text(C, value)?,
            b"order" => c.order = opt_text(C, value)?.unwrap_or_default(),
            _ => {}
        }
    }
    Ok(c)
}

/// DQ.GROUPS's reply: `[next-cursor, [[group, waiting, ready, inflight,
/// paused-until], ...]]`, paused-until nil (not paused), -1 (until
/// DQ.RESUME) or Unix ms.
pub(crate) fn parse_groups(v: Value) -> Result<(String, Vec<GroupInfo>), Error> {
    const C: &str = "DQ.GROUPS";
    let mut items = array(C, v)?.into_iter();
    let (Some(cursor), Some(groups), None) = (items.next(), items.next(), items.next()) else {
        return Err(bad(C, "expected [cursor, groups]"));
    };
    let cursor = String::from_utf8(bytes(C, cursor)?).map_err(|_| bad(C, "a cursor not UTF-8"))?;
    let groups = array(C, groups)?
        .into_iter()
        .map(|g| {
            let mut f = array(C, g)?.into_iter();
            let (Some(name), Some(waiting), Some(ready), Some(inflight), Some(until)) =
                (f.next(), f.next(), f.next(), f.next(), f.next())
            else {
                return Err(bad(C, "a group with fewer than 5 elements"));
            };
            let until = opt_int(C, &until)?;
            Ok(GroupInfo {
                name: bytes(C, name)?,
                waiting: uint(C, &waiting)?,
                ready: uint(C, &ready)?,
                inflight: uint(C, &inflight)?,
                paused: until.is_some(),
                paused_until: match until {
                    None | Some(-1) => None,
                    Some(ms) => Some(
                        u64::try_from(ms).map_err(|_| bad(C, format!("a paused-until of {ms}")))?,
                    ),
                },
            })
        })
        .collect::<Result<Vec<_>, Error>>()?;
    Ok((cursor, groups))
}

/// DQ.WAIT's reply: nil (no outcome yet), or `[state, value]`.
pub(crate) fn parse_wait(v: Value) -> Result<Option<JobOutcome>, Error> {
    const C: &str = "DQ.WAIT";
    if v == Value::Nil {
        return Ok(None);
    }
    let mut items = array(C, v)?.into_iter();
    let (Some(state), Some(value), None) = (items.next(), items.next(), items.next()) else {
        return Err(bad(C, "expected [state, value]"));
    };
    let state = bytes(C, state)?;
    Ok(Some(match state.as_slice() {
        b"done" => JobOutcome::Done(opt_bytes(C, value)?),
        b"dead" => JobOutcome::Dead(opt_bytes(C, value)?),
        b"gone" => JobOutcome::Gone,
        other => {
            return Err(bad(
                C,
                format!(
                    "an outcome '{}' this client does not know",
                    String::from_utf8_lossy(other)
                ),
            ))
        }
    }))
}

pub(crate) fn parse_count(command: &'static str, v: Value) -> Result<u64, Error> {
    uint(command, &v)
}

/// The `dq_*` lines of an INFO reply, prefix removed.
pub fn parse_info_dq(info: &str) -> InfoDq {
    let fields = info
        .lines()
        .filter_map(|line| line.trim_end().split_once(':'))
        .filter_map(|(k, v)| Some((k.strip_prefix("dq_")?.to_string(), v.to_string())))
        .collect();
    InfoDq { fields }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bulk(s: &[u8]) -> Value {
        Value::BulkString(s.to_vec())
    }
    fn simple(s: &str) -> Value {
        Value::SimpleString(s.to_string())
    }

    fn stats_fields() -> Vec<(Value, Value)> {
        let mut f = Vec::new();
        // The module's own order (the test kit's list, which the module's
        // tests check its reply against).
        for (i, name) in dq_testkit::STATS_COUNTERS.iter().enumerate() {
            f.push((simple(name), Value::Int(i as i64 + 1)));
        }
        f.push((simple("oldest-ready-age-ms"), Value::Int(1500)));
        f.push((simple("next-due-at"), Value::Nil));
        f.push((simple("schedules"), Value::Int(2)));
        f.push((simple("groups"), Value::Int(4)));
        f.push((simple("paused"), Value::Int(1)));
        f.push((simple("paused-until"), Value::Nil));
        f.push((simple("rate"), bulk(b"100/1s")));
        f.push((simple("max-inflight"), Value::Int(20)));
        f.push((simple("a-future-field"), Value::Int(7)));
        f
    }

    #[test]
    fn stats_from_resp2_and_resp3_agree() {
        let fields = stats_fields();
        let flat = Value::Array(
            fields
                .iter()
                .flat_map(|(k, v)| [k.clone(), v.clone()])
                .collect(),
        );
        let resp2 = parse_stats(flat).unwrap();
        let resp3 = parse_stats(Value::Map(fields)).unwrap();
        assert_eq!(resp2, resp3);
        assert_eq!(resp2.delayed, 1);
        assert_eq!(resp2.dead, 4);
        assert_eq!(resp2.done, 5);
        assert_eq!(resp2.lease_expired, 11);
        assert_eq!(resp2.purged, 16);
        assert_eq!(resp2.throttled, 17);
        assert_eq!(resp2.dropped, 18);
        assert_eq!(resp2.total(), 1 + 2 + 3 + 4 + 5, "the done ones too");
        assert_eq!(resp2.count(State::Done), 5);
        assert_eq!(resp2.oldest_ready_age_ms, Some(1500));
        assert_eq!(resp2.next_due_at, None);
        assert_eq!(resp2.schedules, 2);
        assert_eq!(resp2.groups, 4);
        assert!(resp2.paused);
        assert_eq!(resp2.paused_until, None);
        assert_eq!(resp2.rate.as_deref(), Some("100/1s"));
        assert_eq!(resp2.max_inflight, Some(20));
        assert_eq!(resp2.counters()[5], ("lease-expired", 11));
        assert_eq!(resp2.counters()[11], ("throttled", 17));
        assert_eq!(resp2.counters()[12], ("dropped", 18));
        assert_eq!(resp2.count(State::Inflight), 3);
    }

    #[test]
    fn queues_with_stats_from_resp2_and_resp3_agree() {
        let record2 = |ready: i64| {
            let mut fields = stats_fields();
            fields[1].1 = Value::Int(ready);
            Value::Array(fields.into_iter().flat_map(|(k, v)| [k, v]).collect())
        };
        let record3 = |ready: i64| {
            let mut fields = stats_fields();
            fields[1].1 = Value::Int(ready);
            Value::Map(fields)
        };
        let resp2 = parse_queues_with_stats(Value::Array(vec![
            bulk(b"a\xff"),
            record2(5),
            bulk(b"b"),
            record2(0),
        ]))
        .unwrap();
        let resp3 = parse_queues_with_stats(Value::Map(vec![
            (bulk(b"a\xff"), record3(5)),
            (bulk(b"b"), record3(0)),
        ]))
        .unwrap();
        assert_eq!(resp2, resp3);
        assert_eq!(resp2.len(), 2);
        assert_eq!(resp2[0].0, b"a\xff");
        assert_eq!(resp2[0].1.ready, 5);
        assert_eq!(resp2[1].1.ready, 0);
        // The same record as DQ.STATS gives: one parser for both.
        assert_eq!(resp2[0].1.dead, parse_stats(record2(5)).unwrap().dead);
        assert_eq!(resp2[0].1.oldest_ready_age_ms, Some(1500));
        assert!(parse_queues_with_stats(Value::Array(vec![]))
            .unwrap()
            .is_empty());
        assert!(parse_queues_with_stats(Value::Map(vec![]))
            .unwrap()
            .is_empty());
        assert!(parse_queues_with_stats(Value::Nil).unwrap().is_empty());
    }

    #[test]
    fn queues_with_stats_that_are_malformed_are_errors() {
        // A name without its record, a record that is not one, a name that
        // is not a string, a count that is not a number: errors, no panic.
        assert!(parse_queues_with_stats(Value::Array(vec![bulk(b"a")])).is_err());
        assert!(parse_queues_with_stats(Value::Array(vec![bulk(b"a"), Value::Int(1)])).is_err());
        assert!(
            parse_queues_with_stats(Value::Map(vec![(Value::Int(1), Value::Map(vec![]))])).is_err()
        );
        assert!(parse_queues_with_stats(Value::Array(vec![
            bulk(b"a"),
            Value::Array(vec![simple("ready"), bulk(b"x")])
        ]))
        .is_err());
        assert!(parse_queues_with_stats(Value::Int(3)).is_err());
        let err = parse_queues_with_stats(Value::Array(vec![bulk(b"a")])).unwrap_err();
        assert!(err.to_string().contains("DQ.QUEUES"), "{err}");
    }

    #[test]
    fn rates_as_the_server_prints_them() {
        let rate = |n, ms| Rate {
            deliveries: n,
            window: Duration::from_millis(ms),
        };
        for (text, n, ms) in [
            ("100/1s", 100, 1_000),
            ("5000/1h", 5000, 3_600_000),
            ("10/1500ms", 10, 1_500),
            ("7/90s", 7, 90_000),
            ("2/1m", 2, 60_000),
            ("10/1d", 10, 86_400_000),
        ] {
            assert_eq!(Rate::parse(text), Some(rate(n, ms)), "{text}");
            assert_eq!(rate(n, ms).to_string(), text);
        }
        // A bare window is milliseconds; shown in its largest exact unit.
        assert_eq!(Rate::parse("3/250"), Some(rate(3, 250)));
        assert_eq!(
            Rate::parse("3/2000").map(|r| r.to_string()),
            Some("3/2s".into())
        );
        for bad in [
            "", "100", "x/1s", "1/s", "1/0s", "1/1w", "-1/1s", "+1/1s", "1/1h30m", "/1s",
        ] {
            assert_eq!(Rate::parse(bad), None, "{bad}");
        }
        let mut s = Stats::default();
        assert_eq!(s.rate_limit(), None);
        s.rate = Some("100/1s".into());
        assert_eq!(s.rate_limit(), Some(rate(100, 1_000)));
        let c = QueueConfig {
            rate: Some("5/1m".into()),
            ..QueueConfig::default()
        };
        assert_eq!(c.rate_limit(), Some(rate(5, 60_000)));
    }

    #[test]
    fn stats_accumulate_into_a_total() {
        let mut total = Stats::default();
        let a = parse_stats(Value::Map(stats_fields())).unwrap();
        let b = Stats {
            ready: 10,
            throttled: 1,
            schedules: 1,
            groups: 2,
            oldest_ready_age_ms: Some(99_999),
            next_due_at: Some(7),
            purged: u64::MAX,
            ..Stats::default()
        };
        total.accumulate(&a);
        total.accumulate(&b);
        assert_eq!(
            (total.ready, total.dead, total.done, total.added),
            (12, 4, 5, 6)
        );
        assert_eq!((total.throttled, total.schedules), (18, 3));
        assert_eq!(total.groups, 4 + 2);
        assert_eq!(total.purged, u64::MAX, "saturates");
        assert_eq!(total.oldest_ready_age_ms, Some(99_999));
        assert_eq!(total.next_due_at, Some(7));
        // Flow control is not summed: it stays the caller's.
        assert!(!total.paused);
        assert_eq!((total.rate, total.max_inflight), (None, None));
        let mut one = Stats::default();
        one.accumulate(&Stats {
            next_due_at: Some(5),
            ..Stats::default()
        });
        assert_eq!(one.next_due_at, Some(5));
        assert_eq!(one.oldest_ready_age_ms, None);
    }

    #[test]
    fn glob_escape_quotes_every_special_character() {
        assert_eq!(glob_escape(b"orders"), b"orders");
        assert_eq!(glob_escape(b"a*b?c[d]e\\f"), b"a\\*b\\?c\\[d\\]e\\\\f");
        assert_eq!(glob_escape(b""), b"");
    }

    #[test]
    fn records_that_are_not_records_are_errors() {
        assert!(parse_stats(Value::Array(vec![simple("ready")])).is_err());
        assert!(parse_stats(Value::Int(3)).is_err());
        assert!(parse_stats(Value::Array(vec![simple("ready"), bulk(b"x")])).is_err());
        assert!(parse_stats(Value::Array(vec![simple("ready"), Value::Int(-1)])).is_err());
    }

    #[test]
    fn message_dead_with_error_and_binary_fields() {
        let v = Value::Array(vec![
            simple("id"),
            bulk(b"a\xffb"),
            simple("state"),
            simple("dead"),
            simple("payload"),
            bulk(b"\x00<script>"),
            simple("priority"),
            Value::Int(-5),
            simple("attempt"),
            Value::Int(3),
            simple("due-at"),
            Value::Int(100),
            simple("lease-deadline"),
            Value::Nil,
            simple("replacement-pending"),
            Value::Int(0),
            simple("dead-reason"),
            simple("permanent"),
            simple("died-at"),
            Value::Int(200),
            simple("group"),
            Value::Nil,
            simple("last-error"),
            bulk(b"boom"),
        ]);
        let m = parse_message(v).unwrap().unwrap();
        assert_eq!(m.id, b"a\xffb");
        assert_eq!(m.state(), Some(State::Dead));
        assert_eq!(m.payload, b"\x00<script>");
        assert_eq!(m.priority, -5);
        assert_eq!(m.attempt, 3);
        assert_eq!(m.lease_deadline, None);
        assert_eq!(m.dead_reason.as_deref(), Some("permanent"));
        assert_eq!(m.died_at, Some(200));
        assert_eq!(m.last_error.as_deref(), Some(&b"boom"[..]));
        assert!(!m.replacement_pending);
        assert_eq!(parse_message(Value::Nil).unwrap(), None);
        assert!(parse_message(Value::Array(vec![simple("state"), simple("dead")])).is_err());
    }

    #[test]
    fn scan_pages_and_peek_entries() {
        let entry = |id: &[u8], err: Value| {
            Value::Array(vec![
                bulk(id),
                bulk(b"p"),
                Value::Int(2),
                Value::Int(99),
                err,
            ])
        };
        let v = Value::Array(vec![
            bulk(b"2113"),
            Value::Array(vec![entry(b"a", Value::Nil), entry(b"b", bulk(b"e"))]),
        ]);
        let (cursor, entries) = parse_scan(v).unwrap();
        assert_eq!(cursor, 2113);
        assert_eq!(entries.len(), 2);
        assert_eq!(entries[0].last_error, None);
        assert_eq!(entries[1].last_error.as_deref(), Some(&b"e"[..]));
        assert_eq!(entries[1].time, 99);
        let (cursor, entries) =
            parse_scan(Value::Array(vec![bulk(b"0"), Value::Array(vec![])])).unwrap();
        assert_eq!((cursor, entries.len()), (0, 0));
        assert!(parse_scan(Value::Array(vec![bulk(b"x"), Value::Array(vec![])])).is_err());
        assert!(parse_scan(Value::Array(vec![bulk(b"0")])).is_err());
        assert!(parse_entries(
            "DQ.PEEK",
            Value::Array(vec![Value::Array(vec![bulk(b"a")])])
        )
        .is_err());
    }

    #[test]
    fn config_and_queues_and_counts() {
        let v = Value::Map(vec![
            (simple("lease-ms"), Value::Int(30000)),
            (simple("lease-ms-from"), simple("module")),
            (simple("max-attempts"), Value::Int(16)),
            (simple("max-attempts-from"), simple("queue")),
            (simple("backoff"), bulk(b"exp:1s:1h")),
            (simple("backoff-from"), simple("module")),
            (simple("rate"), Value::Nil),
            (simple("max-inflight"), Value::Int(7)),
            (simple("paused"), Value::Int(1)),
            (simple("paused-until"), Value::Int(1234)),
            (simple("throttled"), Value::Int(3)),
        ]);
        let c = parse_config(v).unwrap();
        assert_eq!(c.lease_ms, 30000);
        assert_eq!(c.max_attempts_from, "queue");
        assert_eq!(c.backoff, "exp:1s:1h");
        assert_eq!((c.rate, c.max_inflight), (None, Some(7)));
        assert_eq!(
            (c.paused, c.paused_until, c.throttled),
            (true, Some(1234), 3)
        );
        let q = parse_queues(Value::Array(vec![bulk(b""), bulk(b"\xff")])).unwrap();
        assert_eq!(q, vec![b"".to_vec(), b"\xff".to_vec()]);
        assert_eq!(parse_count("DQ.PURGE", Value::Int(4)).unwrap(), 4);
        assert!(parse_count("DQ.PURGE", Value::Nil).is_err());
    }

    #[test]
    fn groups_settings_and_pages_read() {
        let config = Value::Array(vec![
            simple("events"),
            Value::Int(0),
            simple("group-limit"),
            Value::Int(5),
            simple("group-rate"),
            bulk(b"10/1s"),
            simple("order"),
            bulk(b"fair"),
        ]);
        let c = parse_config(config).unwrap();
        assert_eq!(c.group_limit, 5);
        assert_eq!(c.group_rate.as_deref(), Some("10/1s"));
        assert_eq!(
            c.group_rate_limit(),
            Some(Rate {
                deliveries: 10,
                window: Duration::from_secs(1)
            })
        );
        assert_eq!((c.order.as_str(), c.order()), ("fair", Some(Order::Fair)));
        let none = parse_config(Value::Map(vec![
            (simple("group-limit"), Value::Int(1)),
            (simple("group-rate"), Value::Nil),
            (simple("order"), simple("priority")),
        ]))
        .unwrap();
        assert_eq!((none.group_limit, none.group_rate.as_deref()), (1, None));
        assert_eq!(none.order(), Some(Order::Priority));
        // A module without the fields: zero, none, empty; a newer order kept.
        let old = parse_config(Value::Map(vec![])).unwrap();
        assert_eq!((old.group_limit, old.order()), (0, None));
        let newer = parse_config(Value::Map(vec![(simple("order"), bulk(b"weighted"))]));
        assert_eq!(newer.unwrap().order, "weighted");
        assert!(parse_config(Value::Map(vec![(
            simple("group-limit"),
            Value::Int(1 << 40)
        )]))
        .is_err());
        assert_eq!("FAIR".parse::<Order>(), Ok(Order::Fair));
        assert_eq!(Order::default().keyword(), "PRIORITY");
        assert_eq!(Order::Fair.to_string(), "fair");
        assert!("random".parse::<Order>().is_err());

        let group = |name: &[u8], until: Value| {
            Value::Array(vec![
                bulk(name),
                Value::Int(12),
                Value::Int(1),
                Value::Int(5),
                until,
            ])
        };
        let (cursor, groups) = parse_groups(Value::Array(vec![
            bulk(b"74656e616e742d3939"),
            Value::Array(vec![
                group(b"t\xff", Value::Nil),
                group(b"u", Value::Int(-1)),
                group(b"v", Value::Int(1_700_000_000_000)),
            ]),
        ]))
        .unwrap();
        assert_eq!(cursor, "74656e616e742d3939");
        assert_eq!(
            groups[0],
            GroupInfo {
                name: b"t\xff".to_vec(),
                waiting: 12,
                ready: 1,
                inflight: 5,
                paused: false,
                paused_until: None,
            }
        );
        assert_eq!(groups[0].name_lossy(), "t\u{fffd}");
        assert_eq!((groups[1].paused, groups[1].paused_until), (true, None));
        assert_eq!(
            (groups[2].paused, groups[2].paused_until),
            (true, Some(1_700_000_000_000))
        );
        let (cursor, groups) =
            parse_groups(Value::Array(vec![bulk(b"0"), Value::Array(vec![])])).unwrap();
        assert_eq!((cursor.as_str(), groups.len()), ("0", 0));
        for bad in [
            Value::Array(vec![bulk(b"0")]),
            Value::Array(vec![
                bulk(b"0"),
                Value::Array(vec![Value::Array(vec![bulk(b"g")])]),
            ]),
            Value::Array(vec![
                bulk(b"0"),
                Value::Array(vec![group(b"g", Value::Int(-2))]),
            ]),
            Value::Int(0),
        ] {
            let e = parse_groups(bad).unwrap_err();
            assert!(e.to_string().contains("DQ.GROUPS"), "{e}");
        }
    }

    #[test]
    fn group_commands_send_what_the_server_takes_and_refuse_the_rest() {
        use crate::args::sent;
        assert_eq!(
            sent(&pause_cmd(b"q", None, Some(b"t1")).unwrap()),
            ["DQ.PAUSE", "q", "GROUP", "t1"]
        );
        assert_eq!(
            sent(&pause_cmd(b"q", Some(Duration::from_micros(1500)), Some(b"t1")).unwrap()),
            ["DQ.PAUSE", "q", "FOR", "2", "GROUP", "t1"]
        );
        assert_eq!(
            sent(&pause_cmd(b"q", None, None).unwrap()),
            ["DQ.PAUSE", "q"]
        );
        for group in [&b""[..], &[b'g'; 1025][..]] {
            assert!(matches!(
                pause_cmd(b"q", None, Some(group)),
                Err(Error::Config(_))
            ));
        }
        assert!(matches!(
            pause_cmd(b"q", Some(Duration::ZERO), Some(b"g")),
            Err(Error::Config(_))
        ));
        assert_eq!(
            sent(&groups_cmd(b"q", "0", None, 7).unwrap()),
            ["DQ.GROUPS", "q", "0", "COUNT", "7"]
        );
        assert_eq!(
            sent(&groups_cmd(b"q", "7a", Some(b"t-*"), 100).unwrap()),
            ["DQ.GROUPS", "q", "7a", "MATCH", "t-*", "COUNT", "100"]
        );
        for (cursor, count) in [("0", 0), ("0", 10_001), ("", 10)] {
            assert!(matches!(
                groups_cmd(b"q", cursor, None, count),
                Err(Error::Config(_))
            ));
        }
    }

    #[test]
    fn info_section() {
        let info =
            parse_info_dq("# dq\r\ndq_queues:3\r\ndq_timer_ticks:42\r\ndq_lateness_ms:0\r\n");
        assert_eq!(info.int("timer_ticks"), Some(42));
        assert_eq!(info.int("queues"), Some(3));
        assert_eq!(info.int("missing"), None);
    }

    #[test]
    fn states_parse_case_insensitively() {
        assert_eq!("DEAD".parse::<State>(), Ok(State::Dead));
        assert_eq!("inflight".parse::<State>(), Ok(State::Inflight));
        assert_eq!("Done".parse::<State>(), Ok(State::Done));
        assert_eq!(State::Done.keyword(), "DONE");
        let e = "finished".parse::<State>().unwrap_err();
        assert!(e.contains("dead or done"), "{e}");
        assert_eq!(State::Ready.keyword(), "READY");
    }

    #[test]
    fn wait_replies_parse() {
        let outcome = |state: &[u8], value: Value| Value::Array(vec![bulk(state), value]);
        assert_eq!(parse_wait(Value::Nil).unwrap(), None);
        assert_eq!(
            parse_wait(outcome(b"done", bulk(b"r"))).unwrap(),
            Some(JobOutcome::Done(Some(b"r".to_vec())))
        );
        assert_eq!(
            parse_wait(Value::Array(vec![simple("done"), Value::Nil])).unwrap(),
            Some(JobOutcome::Done(None))
        );
        let dead = parse_wait(outcome(b"dead", bulk(b"HTTP 410"))).unwrap();
        assert_eq!(dead, Some(JobOutcome::Dead(Some(b"HTTP 410".to_vec()))));
        assert_eq!(dead.as_ref().map(JobOutcome::state), Some("dead"));
        assert_eq!(
            dead.as_ref().and_then(JobOutcome::value),
            Some(&b"HTTP 410"[..])
        );
        assert_eq!(
            parse_wait(outcome(b"gone", Value::Nil)).unwrap(),
            Some(JobOutcome::Gone)
        );
        for bad in [
            outcome(b"later", Value::Nil),
            Value::Array(vec![bulk(b"done")]),
            Value::Int(1),
        ] {
            let e = parse_wait(bad).unwrap_err();
            assert!(e.to_string().contains("DQ.WAIT"), "{e}");
        }
    }

    #[test]
    fn wait_and_done_send_what_the_server_takes_and_refuse_the_rest() {
        use crate::args::sent;
        let ms = Duration::from_millis;
        assert_eq!(
            sent(&wait_cmd(b"q", b"a", Duration::ZERO).unwrap()),
            ["DQ.WAIT", "q", "a"]
        );
        assert_eq!(
            sent(&wait_cmd(b"q", b"a", Duration::from_micros(10)).unwrap()),
            ["DQ.WAIT", "q", "a", "BLOCK", "1"],
            "a moment, never BLOCK 0 (for ever)"
        );
        assert_eq!(
            sent(&wait_cmd(b"q", b"a", ms(2500)).unwrap()),
            ["DQ.WAIT", "q", "a", "BLOCK", "2500"]
        );
        assert!(matches!(wait_cmd(b"q", b"", ms(1)), Err(Error::Config(_))));
        let pairs: [(&[u8], &[u8]); 2] = [(b"a", b"r"), (b"b", b"")];
        assert_eq!(
            sent(&done_cmd(b"q", &pairs).unwrap()),
            ["DQ.DONE", "q", "a", "r", "b", ""]
        );
        assert!(matches!(
            done_cmd(b"q", &[(b"", b"r")]),
            Err(Error::Config(_))
        ));
        assert!(check_result(&[]).is_ok());
        let e = check_result(&vec![0; MAX_RESULT_BYTES + 1]).unwrap_err();
        assert!(e.to_string().contains("536870912"), "{e}");
    }

    #[test]
    fn a_done_message_and_the_retention_settings_read() {
        let record = Value::Array(vec![
            simple("id"),
            bulk(b"a"),
            simple("state"),
            bulk(b"done"),
            simple("result"),
            bulk(b""),
            simple("finished-at"),
            Value::Int(10),
            simple("retained-until"),
            Value::Int(20),
            simple("progress"),
            bulk(b"3/4"),
        ]);
        let m = parse_message(record).unwrap().unwrap();
        assert_eq!(m.state(), Some(State::Done));
        assert_eq!(
            m.result.as_deref(),
            Some(&b""[..]),
            "an empty result is one"
        );
        assert_eq!((m.finished_at, m.retained_until), (Some(10), Some(20)));
        assert_eq!(m.progress.as_deref(), Some(&b"3/4"[..]));
        let config = Value::Map(vec![
            (simple("retain-ms"), Value::Int(3_600_000)),
            (simple("retain-ms-from"), simple("queue")),
            (simple("retain-max"), Value::Nil),
            (simple("events"), Value::Int(10_000)),
        ]);
        let c = parse_config(config).unwrap();
        assert_eq!(c.events, 10_000);
        assert_eq!(
            (c.retain_ms, c.retain_ms_from.as_str()),
            (3_600_000, "queue")
        );
        assert_eq!(c.retain_max, None);
    }
}
