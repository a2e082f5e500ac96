//! Recurring schedules (DQ.SCHEDULE, DQ.UNSCHEDULE, DQ.SCHEDULES): the
//! [`Schedule`] builder of the command and the [`ScheduleInfo`] records of
//! its listing. Built and parsed without a server, so tested at unit speed.

use std::time::Duration;

use redis::{Cmd, Value};

use crate::args::{message_options, ms, require};
use crate::error::Error;
use crate::reply::{
    array, bad, field_name, fields, opt_bytes, opt_int, opt_text, opt_uint, text, uint,
};

/// Which run times a master makes when it takes over a queue whose runs
/// fell due while no master held it (`MISSED`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Missed {
    /// None of them.
    Skip,
    /// One run, at the latest missed time (the server's default).
    One,
    /// One run per missed time, the latest 1000 at most.
    All,
}

impl Missed {
    /// The argument of DQ.SCHEDULE, as DQ.SCHEDULES spells it: `skip`,
    /// `one` or `all`.
    pub fn as_str(self) -> &'static str {
        match self {
            Missed::Skip => "skip",
            Missed::One => "one",
            Missed::All => "all",
        }
    }
}

/// Whether a run is made while the previous run's message is still
/// delayed, ready or in flight (`OVERLAP`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Overlap {
    /// Always add (the server's default).
    Allow,
    /// Skip the run, counted in `skipped`.
    Skip,
}

impl Overlap {
    /// The argument of DQ.SCHEDULE, as DQ.SCHEDULES spells it: `allow` or
    /// `skip`.
    pub fn as_str(self) -> &'static str {
        match self {
            Overlap::Allow => "allow",
            Overlap::Skip => "skip",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Repeat {
    Every(Duration),
    Cron(String),
}

/// What DQ.SCHEDULE makes: when the runs fall (`EVERY` or `CRON`, and the
/// options that bound them) and what each run adds. Pass it to
/// [`Queue::schedule`](crate::Queue::schedule) or
/// [`ShardedQueue::schedule`](crate::ShardedQueue::schedule).
///
/// ```
/// use std::time::Duration;
/// use dq_client::{Missed, Schedule};
///
/// let hourly = Schedule::every(Duration::from_secs(3600)).missed(Missed::Skip);
/// let digest = Schedule::cron("0 8 * * MON-FRI").tz("Europe/Berlin").max_attempts(3);
/// # let _ = (hourly, digest);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Schedule {
    repeat: Repeat,
    tz: Option<String>,
    start: Option<u64>,
    end: Option<u64>,
    limit: Option<u64>,
    missed: Option<Missed>,
    overlap: Option<Overlap>,
    nx: bool,
    priority: Option<i32>,
    max_attempts: Option<u32>,
    backoff: Option<String>,
    group: Option<Vec<u8>>,
    ttl: Option<Duration>,
}

impl Schedule {
    fn new(repeat: Repeat) -> Schedule {
        Schedule {
            repeat,
            tz: None,
            start: None,
            end: None,
            limit: None,
            missed: None,
            overlap: None,
            nx: false,
            priority: None,
            max_attempts: None,
            backoff: None,
            group: None,
            ttl: None,
        }
    }

    /// `EVERY`: a run every `interval` (at least 1 s, else refused; sent in
    /// whole milliseconds), from START — by default the moment of the command,
    /// so the first run is at once.
    pub fn every(interval: Duration) -> Schedule {
        Schedule::new(Repeat::Every(interval))
    }

    /// `CRON`: the five standard fields (`minute hour day-of-month month
    /// day-of-week`) or `@hourly`, `@daily`, ...; see docs/commands.md.
    pub fn cron(expr: impl Into<String>) -> Schedule {
        Schedule::new(Repeat::Cron(expr.into()))
    }

    /// `TZ`: the IANA zone a cron expression is read in (default `UTC`).
    /// A schedule with EVERY and a zone is refused (an interval has none).
    pub fn tz(mut self, zone: impl Into<String>) -> Schedule {
        self.tz = Some(zone.into());
        self
    }

    /// `START`: no run before this Unix time (ms); EVERY counts its runs
    /// from it.
    pub fn start(mut self, unix_ms: u64) -> Schedule {
        self.start = Some(unix_ms);
        self
    }

    /// `END`: no run after this Unix time (ms).
    pub fn end(mut self, unix_ms: u64) -> Schedule {
        self.end = Some(unix_ms);
        self
    }

    /// `LIMIT`: no more runs once `runs` were made (at least 1).
    pub fn limit(mut self, runs: u64) -> Schedule {
        self.limit = Some(runs);
        self
    }

    /// `MISSED`: see [`Missed`].
    pub fn missed(mut self, missed: Missed) -> Schedule {
        self.missed = Some(missed);
        self
    }

    /// `OVERLAP`: see [`Overlap`].
    pub fn overlap(mut self, overlap: Overlap) -> Schedule {
        self.overlap = Some(overlap);
        self
    }

    /// `NX`: leave a schedule of the same name untouched (then
    /// `schedule` replies `None`).
    pub fn nx(mut self) -> Schedule {
        self.nx = true;
        self
    }

    /// `PRIORITY` of each run's message.
    pub fn priority(mut self, priority: i32) -> Schedule {
        self.priority = Some(priority);
        self
    }

    /// `MAXATTEMPTS` of each run's message.
    pub fn max_attempts(mut self, n: u32) -> Schedule {
        self.max_attempts = Some(n);
        self
    }

    /// `BACKOFF` of each run's message: `exp:1s:1h`, `fixed:30s`, `15s,3m,1h`.
    pub fn backoff(mut self, spec: impl Into<String>) -> Schedule {
        self.backoff = Some(spec.into());
        self
    }

    /// `GROUP` of each run's message.
    pub fn group(mut self, group: impl Into<Vec<u8>>) -> Schedule {
        self.group = Some(group.into());
        self
    }

    /// `TTL` of each run's message, counted from the moment the run is made.
    pub fn ttl(mut self, ttl: Duration) -> Schedule {
        self.ttl = Some(ttl);
        self
    }
}

/// The longest schedule name: a run's id `name@T` must fit an id (1024 bytes).
const MAX_NAME_BYTES: usize = 1007;

/// `DQ.SCHEDULE queue name payload ...`; refused when the server would
/// refuse it for its shape (an empty name, EVERY under 1 s, an empty CRON,
/// TZ with EVERY, END before START, LIMIT 0, a bad message option).
pub(crate) fn schedule_cmd(
    queue: &[u8],
    name: &[u8],
    payload: &[u8],
    s: &Schedule,
) -> Result<Cmd, Error> {
    require((1..=MAX_NAME_BYTES).contains(&name.len()), || {
        format!(
            "a schedule's name must be 1 to {MAX_NAME_BYTES} bytes (its runs' ids are name@time), not {}",
            name.len()
        )
    })?;
    match &s.repeat {
        Repeat::Every(interval) => {
            require(ms(*interval) >= 1000, || {
                format!("every must be at least 1 s, not {interval:?}")
            })?;
            require(s.tz.is_none(), || {
                "tz needs cron: an interval (every) has no time zone".into()
            })?;
        }
        Repeat::Cron(expr) => require(!expr.trim().is_empty(), || {
            "cron must not be empty: five fields such as 0 8 * * *, or @daily".into()
        })?,
    }
    if let (Some(start), Some(end)) = (s.start, s.end) {
        require(start <= end, || {
            format!("start must not be after end ({start} > {end})")
        })?;
    }
    require(s.limit != Some(0), || "limit must be at least 1".into())?;
    let mut cmd = redis::cmd("DQ.SCHEDULE");
    cmd.arg(queue).arg(name).arg(payload);
    match &s.repeat {
        Repeat::Every(interval) => cmd.arg("EVERY").arg(ms(*interval)),
        Repeat::Cron(expr) => cmd.arg("CRON").arg(expr),
    };
    if let Some(tz) = &s.tz {
        cmd.arg("TZ").arg(tz);
    }
    if let Some(start) = s.start {
        cmd.arg("START").arg(start);
    }
    if let Some(end) = s.end {
        cmd.arg("END").arg(end);
    }
    if let Some(limit) = s.limit {
        cmd.arg("LIMIT").arg(limit);
    }
    if let Some(missed) = s.missed {
        cmd.arg("MISSED").arg(missed.as_str().to_ascii_uppercase());
    }
    if let Some(overlap) = s.overlap {
        cmd.arg("OVERLAP")
            .arg(overlap.as_str().to_ascii_uppercase());
    }
    if s.nx {
        cmd.arg("NX");
    }
    let (backoff, group) = (s.backoff.as_deref(), s.group.as_deref());
    message_options(&mut cmd, s.priority, s.max_attempts, backoff, group, s.ttl)?;
    Ok(cmd)
}

/// DQ.SCHEDULE's reply: the next run time, or nil.
pub(crate) fn parse_next_run(v: Value) -> Result<Option<u64>, Error> {
    opt_uint("DQ.SCHEDULE", &v)
}

/// A schedule as DQ.SCHEDULES lists it; `None` where the server says nil.
/// Times are Unix ms.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ScheduleInfo {
    /// Its name: each run's message id is `name@T`.
    pub name: Vec<u8>,
    /// `every 5m` or `cron 0 8 * * *`.
    pub spec: String,
    /// The zone (`UTC` for EVERY).
    pub tz: String,
    /// The next run; `None` when none is left.
    pub next_run: Option<u64>,
    /// The last run made; `None` before the first.
    pub last_run: Option<u64>,
    /// Runs made.
    pub runs: u64,
    /// Runs skipped by OVERLAP SKIP.
    pub skipped: u64,
    /// LIMIT: at most this many runs; `None` when unbounded.
    pub limit: Option<u64>,
    /// START: no run before it.
    pub start: Option<u64>,
    /// END: no run after it.
    pub end: Option<u64>,
    /// `skip`, `one` or `all` (text, so that a value a newer module adds
    /// still reads).
    pub missed: String,
    /// `allow` or `skip`.
    pub overlap: String,
    /// What each run adds: its payload and message options.
    pub payload: Vec<u8>,
    /// PRIORITY of each run's message.
    pub priority: Option<i64>,
    /// MAXATTEMPTS of each run's message.
    pub max_attempts: Option<u64>,
    /// BACKOFF of each run's message.
    pub backoff: Option<String>,
    /// GROUP of each run's message.
    pub group: Option<Vec<u8>>,
    /// TTL of each run's message.
    pub ttl: Option<Duration>,
}

impl ScheduleInfo {
    /// The name for logs; bytes that are not UTF-8 become U+FFFD.
    pub fn name_lossy(&self) -> std::borrow::Cow<'_, str> {
        String::from_utf8_lossy(&self.name)
    }
}

/// DQ.SCHEDULES's reply: an array of records, RESP2 or RESP3.
pub(crate) fn parse_schedules(v: Value) -> Result<Vec<ScheduleInfo>, Error> {
    const C: &str = "DQ.SCHEDULES";
    array(C, v)?
        .into_iter()
        .map(|item| {
            let mut s = ScheduleInfo::default();
            let mut seen_name = false;
            for (field, value) in fields(C, item)? {
                match field_name(C, &field)? {
                    b"name" => {
                        s.name = opt_bytes(C, value)?.unwrap_or_default();
                        seen_name = true;
                    }
                    b"spec" => s.spec = text(C, &value)?,
                    b"tz" => s.tz = opt_text(C, value)?.unwrap_or_default(),
                    b"next-run" => s.next_run = opt_uint(C, &value)?,
                    b"last-run" => s.last_run = opt_uint(C, &value)?,
                    b"runs" => s.runs = uint(C, &value)?,
                    b"skipped" => s.skipped = uint(C, &value)?,
                    b"limit" => s.limit = opt_uint(C, &value)?,
                    b"start" => s.start = opt_uint(C, &value)?,
                    b"end" => s.end = opt_uint(C, &value)?,
                    b"missed" => s.missed = text(C, &value)?,
                    b"overlap" => s.overlap = text(C, &value)?,
                    b"payload" => s.payload = opt_bytes(C, value)?.unwrap_or_default(),
                    b"priority" => s.priority = opt_int(C, &value)?,
                    b"max-attempts" => s.max_attempts = opt_uint(C, &value)?,
                    b"backoff" => s.backoff = opt_text(C, value)?,
                    b"group" => s.group = opt_bytes(C, value)?,
                    b"ttl" => s.ttl = opt_uint(C, &value)?.map(Duration::from_millis),
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
    use crate::args::sent as args;

    #[test]
    fn every_option_is_named() {
        let s = Schedule::cron("0 8 * * *")
            .tz("Europe/Berlin")
            .start(1)
            .end(2)
            .limit(3)
            .missed(Missed::All)
            .overlap(Overlap::Skip)
            .nx()
            .priority(-4)
            .max_attempts(5)
            .backoff("fixed:1s")
            .group("g")
            .ttl(Duration::from_millis(600));
        assert_eq!(
            args(&schedule_cmd(b"q", b"digest", b"p", &s).unwrap()),
            [
                "DQ.SCHEDULE",
                "q",
                "digest",
                "p",
                "CRON",
                "0 8 * * *",
                "TZ",
                "Europe/Berlin",
                "START",
                "1",
                "END",
                "2",
                "LIMIT",
                "3",
                "MISSED",
                "ALL",
                "OVERLAP",
                "SKIP",
                "NX",
                "PRIORITY",
                "-4",
                "MAXATTEMPTS",
                "5",
                "BACKOFF",
                "fixed:1s",
                "GROUP",
                "g",
                "TTL",
                "600"
            ]
        );
        assert_eq!(
            args(
                &schedule_cmd(b"q", b"n", b"", &Schedule::every(Duration::from_secs(300))).unwrap()
            ),
            ["DQ.SCHEDULE", "q", "n", "", "EVERY", "300000"]
        );
    }

    fn bulk(s: &[u8]) -> Value {
        Value::BulkString(s.to_vec())
    }
    fn simple(s: &str) -> Value {
        Value::SimpleString(s.into())
    }

    fn fields() -> Vec<(Value, Value)> {
        vec![
            (simple("name"), bulk(b"s\xff")),
            (simple("spec"), bulk(b"cron 0 8 * * *")),
            (simple("tz"), bulk(b"Europe/Berlin")),
            (simple("next-run"), Value::Int(200)),
            (simple("last-run"), Value::Nil),
            (simple("runs"), Value::Int(0)),
            (simple("skipped"), Value::Int(2)),
            (simple("limit"), Value::Int(3)),
            (simple("start"), Value::Int(100)),
            (simple("end"), Value::Nil),
            (simple("missed"), simple("all")),
            (simple("overlap"), simple("skip")),
            (simple("payload"), bulk(b"\x00x")),
            (simple("priority"), Value::Int(-1)),
            (simple("max-attempts"), Value::Nil),
            (simple("backoff"), bulk(b"fixed:1s")),
            (simple("group"), bulk(b"g")),
            (simple("ttl"), Value::Int(1000)),
            (simple("a-future-field"), Value::Int(1)),
        ]
    }

    #[test]
    fn records_from_resp2_and_resp3_agree() {
        let flat = Value::Array(fields().into_iter().flat_map(|(k, v)| [k, v]).collect());
        let resp2 = parse_schedules(Value::Array(vec![flat])).unwrap();
        let resp3 = parse_schedules(Value::Array(vec![Value::Map(fields())])).unwrap();
        assert_eq!(resp2, resp3);
        let s = &resp2[0];
        assert_eq!(s.name, b"s\xff");
        assert_eq!(s.spec, "cron 0 8 * * *");
        assert_eq!(s.tz, "Europe/Berlin");
        assert_eq!((s.next_run, s.last_run), (Some(200), None));
        assert_eq!((s.runs, s.skipped, s.limit), (0, 2, Some(3)));
        assert_eq!((s.start, s.end), (Some(100), None));
        assert_eq!((s.missed.as_str(), s.overlap.as_str()), ("all", "skip"));
        assert_eq!(s.payload, b"\x00x");
        assert_eq!((s.priority, s.max_attempts), (Some(-1), None));
        assert_eq!(s.backoff.as_deref(), Some("fixed:1s"));
        assert_eq!(s.group.as_deref(), Some(&b"g"[..]));
        assert_eq!(s.ttl, Some(Duration::from_secs(1)));
        assert!(parse_schedules(Value::Array(vec![])).unwrap().is_empty());
    }

    #[test]
    fn malformed_listings_are_errors() {
        assert!(parse_schedules(Value::Int(1)).is_err());
        assert!(parse_schedules(Value::Array(vec![Value::Int(1)])).is_err());
        let nameless = Value::Array(vec![simple("runs"), Value::Int(1)]);
        assert!(parse_schedules(Value::Array(vec![nameless])).is_err());
        let negative = Value::Array(vec![
            simple("name"),
            bulk(b"a"),
            simple("runs"),
            Value::Int(-1),
        ]);
        assert!(parse_schedules(Value::Array(vec![negative])).is_err());
        assert_eq!(parse_next_run(Value::Nil).unwrap(), None);
        assert_eq!(parse_next_run(Value::Int(5)).unwrap(), Some(5));
        assert!(parse_next_run(simple("OK")).is_err());
    }
}
