//! The admin calls of the dashboard that dq-client 0.1 has no typed
//! function for yet: a queue's flow control (DQ.PAUSE, DQ.RESUME and the
//! `paused`, `paused-until`, `rate`, `max-inflight`, `throttled` fields
//! of DQ.STATS), its schedules (DQ.SCHEDULES, DQ.UNSCHEDULE, the
//! `schedules` count), and DQ.QUEUES WITHSTATS read with those fields.
//!
//! dq-client's `Stats` drops the fields it does not know, and a second
//! DQ.QUEUES WITHSTATS per read would double the one call that costs the
//! server anything at 10,000 queues; so the WITHSTATS and DQ.STATS
//! records are parsed here, once, into dq-client's `Stats` and a [`Flow`].
//! Records are read by field name from a RESP2 flat array or a RESP3 map,
//! so fields a newer module adds are ignored, as dq-client does. The
//! parsers are pure functions, tested without a server.

use dq_client::{Error, Stats};
use redis::aio::ConnectionLike;
use redis::{Cmd, Value};

/// A queue's flow control and schedules, as DQ.STATS reports them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Flow {
    pub paused: bool,
    /// When a DQ.PAUSE FOR ends (Unix ms); None while paused until
    /// DQ.RESUME, or not paused.
    pub paused_until: Option<u64>,
    /// RATE as the server prints it (`100/1s`), None when none.
    pub rate: Option<String>,
    /// MAXINFLIGHT, None when none.
    pub max_inflight: Option<u64>,
    /// POPs that delivered fewer than they asked (and than were ready)
    /// because of a pause, RATE or MAXINFLIGHT: a lifetime counter.
    pub throttled: u64,
    /// Recurring schedules the queue holds.
    pub schedules: u64,
}

/// A RATE's two numbers: at most `deliveries` in any window of
/// `window_ms`. The server prints it as `n/duration` with the duration in
/// its shortest exact unit (`5000/1h`, `10/1500ms`, a bare number being ms).
pub fn rate_parts(rate: &str) -> Option<(u64, u64)> {
    let (n, window) = rate.split_once('/')?;
    let deliveries = n.parse::<u64>().ok()?;
    let digits_end = window
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(window.len());
    let (digits, unit) = window.split_at(digits_end);
    let scale = match unit {
        "" | "ms" => 1,
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ => return None,
    };
    let window_ms = digits.parse::<u64>().ok()?.checked_mul(scale)?;
    (window_ms > 0).then_some((deliveries, window_ms))
}

/// DQ.STATS' lifetime counters, by field name: dq-client's list, and
/// `throttled` from the flow-control fields (whether or not the dq-client
/// in use lists it: it is counted once).
pub fn counters(stats: &Stats, flow: &Flow) -> Vec<(&'static str, u64)> {
    let mut all: Vec<(&'static str, u64)> = stats
        .counters()
        .into_iter()
        .filter(|(name, _)| *name != "throttled")
        .collect();
    all.push(("throttled", flow.throttled));
    all
}

/// One queue of a DQ.QUEUES WITHSTATS reply.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct QueueInfo {
    pub name: Vec<u8>,
    pub stats: Stats,
    pub flow: Flow,
}

/// One record of DQ.SCHEDULES.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Schedule {
    pub name: Vec<u8>,
    /// `every 5m` or `cron 0 8 * * *`.
    pub spec: String,
    /// The zone of a cron schedule (`UTC` for EVERY).
    pub tz: String,
    /// Unix ms; None when no run is left.
    pub next_run: Option<u64>,
    /// Unix ms; None before the first run.
    pub last_run: Option<u64>,
    pub runs: u64,
    /// Runs skipped by OVERLAP SKIP.
    pub skipped: u64,
    pub limit: Option<u64>,
    pub start: Option<u64>,
    pub end: Option<u64>,
    /// `skip`, `one` or `all`.
    pub missed: String,
    /// `allow` or `skip`.
    pub overlap: String,
    pub payload: Vec<u8>,
    pub priority: i64,
    pub max_attempts: Option<u64>,
    pub backoff: Option<String>,
    pub group: Option<Vec<u8>>,
    pub ttl: Option<u64>,
}

// --- commands ---------------------------------------------------------------

async fn query<C: ConnectionLike + ?Sized>(con: &mut C, c: &Cmd) -> Result<Value, Error> {
    // redis' ConnectionManager may hand the server's refusal back as a
    // value rather than an error: an error here, so that a refused
    // DQ.PAUSE FOR reads as the server's words, not as an odd reply.
    match con.req_packed_command(c).await? {
        Value::ServerError(e) => Err(Error::from(redis::RedisError::from(e))),
        v => Ok(v),
    }
}

fn cmd(name: &str, queue: &[u8]) -> Cmd {
    let mut c = redis::cmd(name);
    c.arg(queue);
    c
}

/// DQ.QUEUES [MATCH pattern] WITHSTATS: every queue of the node (those
/// matching `pattern`) with its counts and flow control, in one call.
pub async fn queues_with_stats<C: ConnectionLike + ?Sized>(
    con: &mut C,
    pattern: Option<&[u8]>,
) -> Result<Vec<QueueInfo>, Error> {
    let mut c = redis::cmd("DQ.QUEUES");
    if let Some(pattern) = pattern {
        c.arg("MATCH").arg(pattern);
    }
    c.arg("WITHSTATS");
    parse_queues_with_stats(query(con, &c).await?)
}

/// DQ.STATS, with the flow-control fields.
pub async fn stats<C: ConnectionLike + ?Sized>(
    con: &mut C,
    queue: &[u8],
) -> Result<(Stats, Flow), Error> {
    stats_record("DQ.STATS", query(con, &cmd("DQ.STATS", queue)).await?)
}

/// DQ.SCHEDULES: the queue's schedules, by name.
pub async fn schedules<C: ConnectionLike + ?Sized>(
    con: &mut C,
    queue: &[u8],
) -> Result<Vec<Schedule>, Error> {
    parse_schedules(query(con, &cmd("DQ.SCHEDULES", queue)).await?)
}

/// DQ.UNSCHEDULE queue name: 1 if the schedule existed, else 0.
pub async fn unschedule<C: ConnectionLike + ?Sized>(
    con: &mut C,
    queue: &[u8],
    name: &[u8],
) -> Result<u64, Error> {
    let mut c = cmd("DQ.UNSCHEDULE", queue);
    c.arg(name);
    uint("DQ.UNSCHEDULE", &query(con, &c).await?)
}

/// DQ.PAUSE queue [FOR ms]: until DQ.RESUME when `for_ms` is None.
pub async fn pause<C: ConnectionLike + ?Sized>(
    con: &mut C,
    queue: &[u8],
    for_ms: Option<u64>,
) -> Result<(), Error> {
    let mut c = cmd("DQ.PAUSE", queue);
    if let Some(ms) = for_ms {
        c.arg("FOR").arg(ms);
    }
    match query(con, &c).await? {
        Value::Okay => Ok(()),
        Value::SimpleString(s) if s == "OK" => Ok(()),
        other => Err(bad("DQ.PAUSE", format!("expected OK, got {other:?}"))),
    }
}

/// DQ.RESUME: whether the queue was paused.
pub async fn resume<C: ConnectionLike + ?Sized>(con: &mut C, queue: &[u8]) -> Result<bool, Error> {
    Ok(uint("DQ.RESUME", &query(con, &cmd("DQ.RESUME", queue)).await?)? == 1)
}

// --- parsing -----------------------------------------------------------------

fn bad(command: &'static str, detail: impl Into<String>) -> Error {
    Error::Reply {
        command,
        detail: detail.into(),
    }
}

fn bytes(command: &'static str, v: Value) -> Result<Vec<u8>, Error> {
    match v {
        Value::BulkString(b) => Ok(b),
        Value::SimpleString(s) => Ok(s.into_bytes()),
        Value::VerbatimString { text, .. } => Ok(text.into_bytes()),
        Value::Okay => Ok(b"OK".to_vec()),
        other => Err(bad(command, format!("expected a string, got {other:?}"))),
    }
}

fn opt_bytes(command: &'static str, v: Value) -> Result<Option<Vec<u8>>, Error> {
    match v {
        Value::Nil => Ok(None),
        v => bytes(command, v).map(Some),
    }
}

fn opt_text(command: &'static str, v: Value) -> Result<Option<String>, Error> {
    Ok(opt_bytes(command, v)?.map(|b| String::from_utf8_lossy(&b).into_owned()))
}

fn int(command: &'static str, v: &Value) -> Result<i64, Error> {
    match v {
        Value::Int(n) => Ok(*n),
        Value::BulkString(b) => std::str::from_utf8(b)
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| bad(command, "expected an integer")),
        Value::SimpleString(s) => s.parse().map_err(|_| bad(command, "expected an integer")),
        other => Err(bad(command, format!("expected an integer, got {other:?}"))),
    }
}

fn uint(command: &'static str, v: &Value) -> Result<u64, Error> {
    let n = int(command, v)?;
    u64::try_from(n).map_err(|_| bad(command, format!("expected a non-negative integer, got {n}")))
}

fn opt_uint(command: &'static str, v: &Value) -> Result<Option<u64>, Error> {
    match v {
        Value::Nil => Ok(None),
        v => uint(command, v).map(Some),
    }
}

/// RESP3 map or RESP2 flat array of alternating keys and values, as pairs.
fn pairs(command: &'static str, v: Value) -> Result<Vec<(Value, Value)>, Error> {
    match v {
        Value::Map(pairs) => Ok(pairs),
        Value::Array(items) => {
            if items.len() % 2 != 0 {
                return Err(bad(command, "a record with an odd number of elements"));
            }
            let mut it = items.into_iter();
            let mut pairs = Vec::with_capacity(it.len() / 2);
            while let (Some(k), Some(v)) = (it.next(), it.next()) {
                pairs.push((k, v));
            }
            Ok(pairs)
        }
        other => Err(bad(command, format!("expected a record, got {other:?}"))),
    }
}

/// A field name as bytes, without copying: a WITHSTATS reply has some
/// twenty of them per queue, and a node may hold many thousand queues.
fn field_name<'a>(command: &'static str, k: &'a Value) -> Result<&'a [u8], Error> {
    match k {
        Value::BulkString(b) => Ok(b),
        Value::SimpleString(s) => Ok(s.as_bytes()),
        Value::VerbatimString { text, .. } => Ok(text.as_bytes()),
        other => Err(bad(
            command,
            format!("expected a field name, got {other:?}"),
        )),
    }
}

/// RESP2: `[name, record, name, record, ...]`; RESP3: a map of name to
/// record. Each record is DQ.STATS's, parsed by the same code.
pub fn parse_queues_with_stats(v: Value) -> Result<Vec<QueueInfo>, Error> {
    const C: &str = "DQ.QUEUES";
    if v == Value::Nil {
        return Ok(Vec::new());
    }
    pairs(C, v)?
        .into_iter()
        .map(|(name, record)| {
            let (stats, flow) = stats_record(C, record)?;
            Ok(QueueInfo {
                name: bytes(C, name)?,
                stats,
                flow,
            })
        })
        .collect()
}

/// A DQ.STATS record: the counts into dq-client's `Stats`, flow control
/// and schedules into a [`Flow`].
pub fn stats_record(command: &'static str, v: Value) -> Result<(Stats, Flow), Error> {
    let mut s = Stats::default();
    let mut f = Flow::default();
    for (name, value) in pairs(command, v)? {
        let slot = match field_name(command, &name)? {
            b"delayed" => &mut s.delayed,
            b"ready" => &mut s.ready,
            b"inflight" => &mut s.inflight,
            b"dead" => &mut s.dead,
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
            b"throttled" => &mut f.throttled,
            b"schedules" => &mut f.schedules,
            b"oldest-ready-age-ms" => {
                s.oldest_ready_age_ms = opt_uint(command, &value)?;
                continue;
            }
            b"next-due-at" => {
                s.next_due_at = opt_uint(command, &value)?;
                continue;
            }
            b"paused" => {
                f.paused = opt_uint(command, &value)? == Some(1);
                continue;
            }
            b"paused-until" => {
                f.paused_until = opt_uint(command, &value)?;
                continue;
            }
            b"rate" => {
                f.rate = opt_text(command, value)?;
                continue;
            }
            b"max-inflight" => {
                f.max_inflight = opt_uint(command, &value)?;
                continue;
            }
            _ => continue,
        };
        *slot = opt_uint(command, &value)?.unwrap_or(0);
    }
    Ok((s, f))
}

pub fn parse_schedules(v: Value) -> Result<Vec<Schedule>, Error> {
    const C: &str = "DQ.SCHEDULES";
    let items = match v {
        Value::Array(items) | Value::Set(items) => items,
        Value::Nil => Vec::new(),
        other => return Err(bad(C, format!("expected an array, got {other:?}"))),
    };
    items
        .into_iter()
        .map(|record| {
            let mut s = Schedule::default();
            let mut seen_name = false;
            for (k, value) in pairs(C, record)? {
                match field_name(C, &k)? {
                    b"name" => {
                        s.name = bytes(C, value)?;
                        seen_name = true;
                    }
                    b"spec" => s.spec = opt_text(C, value)?.unwrap_or_default(),
                    b"tz" => s.tz = opt_text(C, value)?.unwrap_or_default(),
                    b"next-run" => s.next_run = opt_uint(C, &value)?,
                    b"last-run" => s.last_run = opt_uint(C, &value)?,
                    b"runs" => s.runs = opt_uint(C, &value)?.unwrap_or(0),
                    b"skipped" => s.skipped = opt_uint(C, &value)?.unwrap_or(0),
                    b"limit" => s.limit = opt_uint(C, &value)?,
                    b"start" => s.start = opt_uint(C, &value)?,
                    b"end" => s.end = opt_uint(C, &value)?,
                    b"missed" => s.missed = opt_text(C, value)?.unwrap_or_default(),
                    b"overlap" => s.overlap = opt_text(C, value)?.unwrap_or_default(),
                    b"payload" => s.payload = opt_bytes(C, value)?.unwrap_or_default(),
                    b"priority" => s.priority = int(C, &value)?,
                    b"max-attempts" => s.max_attempts = opt_uint(C, &value)?,
                    b"backoff" => s.backoff = opt_text(C, value)?,
                    b"group" => s.group = opt_bytes(C, value)?,
                    b"ttl" => s.ttl = opt_uint(C, &value)?,
                    _ => {}
                }
            }
            if !seen_name {
                return Err(bad(C, "a schedule without a name"));
            }
            Ok(s)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(s: &str) -> Value {
        Value::BulkString(s.as_bytes().to_vec())
    }

    fn ss(s: &str) -> Value {
        Value::SimpleString(s.to_string())
    }

    /// A STATS record as the module sends it, field names as simple
    /// strings; RESP3 as a map.
    fn record(fields: Vec<(&str, Value)>, resp3: bool) -> Value {
        if resp3 {
            Value::Map(fields.into_iter().map(|(k, v)| (ss(k), v)).collect())
        } else {
            Value::Array(fields.into_iter().flat_map(|(k, v)| [ss(k), v]).collect())
        }
    }

    fn paused_record(resp3: bool) -> Value {
        record(
            vec![
                ("delayed", Value::Int(1)),
                ("ready", Value::Int(2)),
                ("inflight", Value::Int(3)),
                ("dead", Value::Int(4)),
                ("added", Value::Int(10)),
                ("purged", Value::Int(5)),
                ("throttled", Value::Int(7)),
                ("oldest-ready-age-ms", Value::Int(1500)),
                ("next-due-at", Value::Nil),
                ("schedules", Value::Int(2)),
                ("paused", Value::Int(1)),
                ("paused-until", Value::Int(1_795_621_457_079)),
                ("rate", b("100/1s")),
                ("max-inflight", Value::Int(20)),
                ("a-future-field", b("ignored")),
            ],
            resp3,
        )
    }

    #[test]
    fn stats_records_with_flow_control_in_resp2_and_resp3() {
        for resp3 in [false, true] {
            let (s, f) = stats_record("DQ.STATS", paused_record(resp3)).unwrap();
            assert_eq!((s.delayed, s.ready, s.inflight, s.dead), (1, 2, 3, 4));
            assert_eq!((s.added, s.purged), (10, 5));
            assert_eq!(s.oldest_ready_age_ms, Some(1500));
            assert_eq!(s.next_due_at, None);
            assert_eq!(
                f,
                Flow {
                    paused: true,
                    paused_until: Some(1_795_621_457_079),
                    rate: Some("100/1s".into()),
                    max_inflight: Some(20),
                    throttled: 7,
                    schedules: 2,
                }
            );
        }
        // A queue without limits: nils and zeros.
        let (_, f) = stats_record(
            "DQ.STATS",
            record(
                vec![
                    ("paused", Value::Int(0)),
                    ("paused-until", Value::Nil),
                    ("rate", Value::Nil),
                    ("max-inflight", Value::Nil),
                ],
                false,
            ),
        )
        .unwrap();
        assert_eq!(f, Flow::default());
        // An odd record is an error, not a guess.
        assert!(stats_record("DQ.STATS", Value::Array(vec![ss("ready")])).is_err());
        assert!(stats_record("DQ.STATS", record(vec![("paused", b("yes"))], false)).is_err());
    }

    #[test]
    fn queues_with_stats_in_resp2_and_resp3() {
        let resp2 = Value::Array(vec![
            b("a"),
            paused_record(false),
            b("b"),
            record(vec![("ready", Value::Int(9))], false),
        ]);
        let resp3 = Value::Map(vec![
            (b("a"), paused_record(true)),
            (b("b"), record(vec![("ready", Value::Int(9))], true)),
        ]);
        for reply in [resp2, resp3] {
            let queues = parse_queues_with_stats(reply).unwrap();
            assert_eq!(queues.len(), 2);
            assert_eq!(queues[0].name, b"a");
            assert!(queues[0].flow.paused);
            assert_eq!(queues[0].stats.dead, 4);
            assert_eq!(queues[1].name, b"b");
            assert_eq!(queues[1].stats.ready, 9);
            assert_eq!(queues[1].flow, Flow::default());
        }
        assert!(parse_queues_with_stats(Value::Nil).unwrap().is_empty());
        assert!(parse_queues_with_stats(Value::Array(vec![b("a")])).is_err());
    }

    fn schedule_record(resp3: bool) -> Value {
        record(
            vec![
                ("name", b("digest")),
                ("spec", b("cron 0 8 * * *")),
                ("tz", b("Europe/Berlin")),
                ("next-run", Value::Int(1_795_676_400_000)),
                ("last-run", Value::Nil),
                ("runs", Value::Int(0)),
                ("skipped", Value::Int(0)),
                ("limit", Value::Int(5)),
                ("start", Value::Int(1_795_620_857_032)),
                ("end", Value::Nil),
                ("missed", ss("one")),
                ("overlap", ss("allow")),
                ("payload", b("x")),
                ("priority", Value::Int(-3)),
                ("max-attempts", Value::Nil),
                ("backoff", Value::Nil),
                ("group", b("g")),
                ("ttl", Value::Nil),
            ],
            resp3,
        )
    }

    #[test]
    fn schedules_in_resp2_and_resp3() {
        for resp3 in [false, true] {
            let got = parse_schedules(Value::Array(vec![schedule_record(resp3)])).unwrap();
            assert_eq!(
                got,
                vec![Schedule {
                    name: b"digest".to_vec(),
                    spec: "cron 0 8 * * *".into(),
                    tz: "Europe/Berlin".into(),
                    next_run: Some(1_795_676_400_000),
                    last_run: None,
                    runs: 0,
                    skipped: 0,
                    limit: Some(5),
                    start: Some(1_795_620_857_032),
                    end: None,
                    missed: "one".into(),
                    overlap: "allow".into(),
                    payload: b"x".to_vec(),
                    priority: -3,
                    max_attempts: None,
                    backoff: None,
                    group: Some(b"g".to_vec()),
                    ttl: None,
                }]
            );
        }
        assert!(parse_schedules(Value::Array(vec![])).unwrap().is_empty());
        assert!(parse_schedules(Value::Array(vec![record(
            vec![("spec", b("every 1h"))],
            false
        )]))
        .is_err());
        assert!(parse_schedules(Value::Int(1)).is_err());
    }

    #[test]
    fn rates_as_the_server_prints_them() {
        assert_eq!(rate_parts("100/1s"), Some((100, 1_000)));
        assert_eq!(rate_parts("5000/1h"), Some((5000, 3_600_000)));
        assert_eq!(rate_parts("10/1500ms"), Some((10, 1_500)));
        assert_eq!(rate_parts("7/90s"), Some((7, 90_000)));
        assert_eq!(rate_parts("2/1m"), Some((2, 60_000)));
        assert_eq!(rate_parts("10/1d"), Some((10, 86_400_000)));
        assert_eq!(rate_parts("3/250"), Some((3, 250)));
        for bad in ["", "100", "x/1s", "1/s", "1/0s", "1/1w", "-1/1s", "1/1h30m"] {
            assert_eq!(rate_parts(bad), None, "{bad}");
        }
    }
}
