//! Recurring schedules: when a schedule runs, as pure arithmetic on Unix
//! milliseconds, cron patterns and time zones.
//!
//! `EVERY d` runs at `start + k × d`. `CRON expr` runs at each local time
//! the five-field pattern matches in its zone (`TZ`, UTC by default), read
//! as wall-clock times: the pattern is matched by croner against local
//! times without a zone, and each matching local time is then placed on
//! the time line by the IANA database compiled in (chrono-tz). Across a
//! daylight-saving change a cron run happens once per matching local
//! time: a local time the change skips runs at the first instant after
//! the gap, and a local time that happens twice runs at its first
//! occurrence only.

use std::str::FromStr;

use chrono::{DateTime, LocalResult, NaiveDateTime, TimeZone, Utc};
use chrono_tz::Tz;
use croner::parser::{CronParser, Seconds};
use croner::Cron;

use crate::core::backoff::{parse_duration, Backoff, Duration};
use crate::core::error::{printable, DqError, Result};
use crate::core::limits::{MAX_CRON_LEN, MAX_TIME_MS, MIN_EVERY_MS};

/// How a schedule's run times are laid out.
#[derive(Debug, Clone)]
pub enum Spec {
    /// Every this many ms from `start`.
    Every(u64),
    /// Boxed: a parsed pattern is some 300 bytes.
    Cron(Box<CronSpec>),
}

#[derive(Debug, Clone)]
pub struct CronSpec {
    /// The expression as given (trimmed): what DQ.SCHEDULES shows, and
    /// what the RDB stores and parses again.
    text: Box<str>,
    cron: Cron,
    tz: Tz,
}

impl PartialEq for Spec {
    fn eq(&self, other: &Spec) -> bool {
        match (self, other) {
            (Spec::Every(a), Spec::Every(b)) => a == b,
            (Spec::Cron(a), Spec::Cron(b)) => a.text == b.text && a.tz == b.tz,
            _ => false,
        }
    }
}

impl Eq for Spec {}

/// What MISSED says of run times that passed while no master held the
/// queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Missed {
    /// None of them runs.
    Skip = 0,
    /// One run, at the latest missed time.
    One = 1,
    /// One run per missed time, at most [`crate::core::limits::MAX_MISSED_RUNS`].
    All = 2,
}

/// What OVERLAP says of a run due while the previous run's message is
/// still delayed, ready or in flight.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Overlap {
    Allow = 0,
    Skip = 1,
}

impl Missed {
    pub const ALL: [Missed; 3] = [Missed::Skip, Missed::One, Missed::All];

    pub fn name(self) -> &'static str {
        match self {
            Missed::Skip => "skip",
            Missed::One => "one",
            Missed::All => "all",
        }
    }

    pub fn from_u8(v: u8) -> Option<Missed> {
        Missed::ALL.get(usize::from(v)).copied()
    }
}

impl Overlap {
    pub const ALL: [Overlap; 2] = [Overlap::Allow, Overlap::Skip];

    pub fn name(self) -> &'static str {
        match self {
            Overlap::Allow => "allow",
            Overlap::Skip => "skip",
        }
    }

    pub fn from_u8(v: u8) -> Option<Overlap> {
        Overlap::ALL.get(usize::from(v)).copied()
    }
}

/// What each run adds: the payload and the message options.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Template {
    pub payload: Box<[u8]>,
    pub priority: i32,
    pub max_attempts: Option<u32>,
    pub backoff: Option<Backoff>,
    pub group: Option<Box<[u8]>>,
    /// Each run's message must be acknowledged within this long of its
    /// run being made, else it dies with reason `expired`.
    pub ttl_ms: Option<u64>,
}

/// One schedule: its definition, and where it stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schedule {
    pub spec: Spec,
    /// No run before this time.
    pub start: u64,
    /// No run after this time.
    pub end: Option<u64>,
    /// No more runs once this many were made.
    pub limit: Option<u64>,
    pub missed: Missed,
    pub overlap: Overlap,
    pub template: Template,
    /// The next run time; `None` when the schedule has none left.
    pub next_run: Option<u64>,
    /// The time of the last run made.
    pub last_run: Option<u64>,
    /// Runs made, over every version of the schedule.
    pub runs: u64,
    /// Runs not made because the previous one was still out (OVERLAP SKIP).
    pub skipped: u64,
}

impl Spec {
    /// `EVERY d`: the backoff grammar's durations, at least a second.
    pub fn every(text: &[u8]) -> Result<Spec> {
        std::str::from_utf8(text)
            .ok()
            .and_then(parse_duration)
            .filter(|&ms| ms >= MIN_EVERY_MS)
            .map(Spec::Every)
            .ok_or(DqError::BadDuration {
                option: "EVERY",
                what: "a duration of at least 1s",
            })
    }

    /// `CRON expr [TZ zone]`.
    pub fn cron(expr: &[u8], tz: Option<&[u8]>) -> Result<Spec> {
        let bad = |why: &str| DqError::BadCron(format!("'{}': {why}", printable(expr)));
        if expr.len() > MAX_CRON_LEN {
            return Err(bad("too long"));
        }
        let text = std::str::from_utf8(expr)
            .map_err(|_| bad("not text"))?
            .trim();
        check_cron(text).map_err(|why| bad(&why))?;
        let cron = CronParser::builder()
            .seconds(Seconds::Disallowed)
            .build()
            .parse(text)
            .map_err(|e| bad(&e.to_string()))?;
        let tz = match tz {
            Some(name) => zone(name)?,
            None => Tz::UTC,
        };
        Ok(Spec::Cron(Box::new(CronSpec {
            text: text.into(),
            cron,
            tz,
        })))
    }

    /// What DQ.SCHEDULES shows: `every 5m` or `cron 0 8 * * *`.
    pub fn describe(&self) -> String {
        match self {
            Spec::Every(ms) => format!("every {}", Duration(*ms)),
            Spec::Cron(c) => format!("cron {}", c.text),
        }
    }

    /// The time zone's name (UTC for EVERY).
    pub fn tz_name(&self) -> &str {
        match self {
            Spec::Every(_) => "UTC",
            Spec::Cron(c) => c.tz.name(),
        }
    }

    /// The cron expression and zone, for the codec.
    pub fn cron_parts(&self) -> Option<(&str, &str)> {
        match self {
            Spec::Every(_) => None,
            Spec::Cron(c) => Some((&c.text, c.tz.name())),
        }
    }

    /// The first run time at or after `from`, not before `start`.
    pub fn first_from(&self, start: u64, from: u64) -> Option<u64> {
        let from = from.max(start);
        let at = match self {
            Spec::Every(every) => {
                let steps = (from - start).div_ceil(*every);
                steps.checked_mul(*every)?.checked_add(start)?
            }
            Spec::Cron(c) => c.first_from(from)?,
        };
        (at <= MAX_TIME_MS).then_some(at)
    }

    /// The run time after `at`.
    pub fn next_after(&self, start: u64, at: u64) -> Option<u64> {
        self.first_from(start, at.checked_add(1)?)
    }

    /// The latest run time at or before `until`, not before `start`.
    pub fn last_until(&self, start: u64, until: u64) -> Option<u64> {
        if until < start {
            return None;
        }
        match self {
            Spec::Every(every) => Some(start + (until - start) / every * every),
            Spec::Cron(c) => c.last_until(until).filter(|&at| at >= start),
        }
    }
}

/// An IANA zone name (`Europe/Berlin`, `UTC`), as the compiled-in
/// database knows it.
pub fn zone(name: &[u8]) -> Result<Tz> {
    std::str::from_utf8(name)
        .ok()
        .filter(|n| n.len() <= MAX_CRON_LEN)
        .and_then(|n| Tz::from_str(n).ok())
        .ok_or_else(|| DqError::UnknownZone(printable(name)))
}

/// Five fields of numbers, names, `*`, lists, ranges and steps, or one of
/// the nicknames: croner also takes seconds, `L`, `W`, `#` and `?`, which
/// the standard cron dq documents does not have.
fn check_cron(text: &str) -> std::result::Result<(), String> {
    if let Some(nick) = text.strip_prefix('@') {
        const NICKS: [&str; 5] = ["hourly", "daily", "weekly", "monthly", "yearly"];
        return match NICKS.iter().any(|n| n.eq_ignore_ascii_case(nick)) {
            true => Ok(()),
            false => Err("a nickname must be @hourly, @daily, @weekly, @monthly or @yearly".into()),
        };
    }
    let fields: Vec<&str> = text.split_whitespace().collect();
    if fields.len() != 5 {
        return Err(format!(
            "{} fields; a cron has five: minute hour day-of-month month day-of-week",
            fields.len()
        ));
    }
    const MONTHS: [&str; 12] = [
        "JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC",
    ];
    const DAYS: [&str; 7] = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"];
    const NAMES: [&str; 5] = ["minute", "hour", "day-of-month", "month", "day-of-week"];
    for (i, field) in fields.iter().enumerate() {
        let names: &[&str] = match i {
            3 => &MONTHS,
            4 => &DAYS,
            _ => &[],
        };
        for atom in field.split([',', '-', '/']) {
            let ok = atom == "*"
                || (!atom.is_empty() && atom.bytes().all(|b| b.is_ascii_digit()))
                || names.iter().any(|n| n.eq_ignore_ascii_case(atom));
            if !ok {
                return Err(format!("'{atom}' in the {} field", NAMES[i]));
            }
        }
    }
    Ok(())
}

impl CronSpec {
    /// The instant a wall-clock time of the zone stands for: itself when it
    /// happens once, its first occurrence when the clock goes back over
    /// it, the first instant after the gap when the clock jumps over it.
    fn place(&self, local: &NaiveDateTime) -> Option<u64> {
        let instant = match self.tz.from_local_datetime(local) {
            LocalResult::Single(t) | LocalResult::Ambiguous(t, _) => t.timestamp_millis(),
            LocalResult::None => self.end_of_gap(local)?,
        };
        u64::try_from(instant).ok()
    }

    /// The first instant whose wall-clock time is at or after `local`,
    /// which a gap skipped: a search over the day around it (a change
    /// moves the clock by hours at most).
    fn end_of_gap(&self, local: &NaiveDateTime) -> Option<i64> {
        let guess = local.and_utc().timestamp();
        let (mut lo, mut hi) = (guess - 26 * 3600, guess + 26 * 3600);
        let wall = |s: i64| {
            DateTime::from_timestamp(s, 0)
                .map(|t| self.tz.from_utc_datetime(&t.naive_utc()).naive_local())
        };
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if wall(mid)? >= *local {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        Some(lo * 1000)
    }

    /// The zone's wall-clock time at an instant.
    fn local(&self, ms: u64) -> Option<NaiveDateTime> {
        let utc = DateTime::<Utc>::from_timestamp_millis(i64::try_from(ms).ok()?)?;
        Some(self.tz.from_utc_datetime(&utc.naive_utc()).naive_local())
    }

    fn first_from(&self, from: u64) -> Option<u64> {
        // Local times are searched from the one just before `from`; each
        // is placed on the time line and the first at or after `from`
        // wins. A local time placed before `from` is one the clock went
        // back over, whose run was its first occurrence: it is passed.
        let mut local = self.local(from.checked_sub(1)?)?;
        for _ in 0..10_000 {
            local = self.cron.find_next_occurrence(&local, false).ok()?;
            let at = self.place(&local)?;
            if at >= from {
                return Some(at);
            }
        }
        None
    }

    fn last_until(&self, until: u64) -> Option<u64> {
        let mut local = self.local(until)?;
        let mut inclusive = true;
        for _ in 0..10_000 {
            local = self.cron.find_previous_occurrence(&local, inclusive).ok()?;
            inclusive = false;
            let at = self.place(&local)?;
            if at <= until {
                return Some(at);
            }
        }
        None
    }
}

impl Schedule {
    /// The next run at or after `from` that START, END and LIMIT allow.
    pub fn next_from(&self, from: u64) -> Option<u64> {
        if self.limit.is_some_and(|limit| self.runs >= limit) {
            return None;
        }
        self.spec
            .first_from(self.start, from)
            .filter(|&at| self.end.is_none_or(|end| at <= end))
    }

    /// The next run after a run at `at`.
    pub fn next_after(&self, at: u64) -> Option<u64> {
        self.next_from(at.checked_add(1)?)
    }

    /// The run times from the next one up to `now` that a new master makes
    /// of those it missed: MISSED SKIP none, ONE the latest, ALL each (the
    /// latest `cap` of them), never more than LIMIT allows. In time order.
    pub fn missed_runs(&self, now: u64, cap: usize) -> Vec<u64> {
        let Some(first) = self.next_run.filter(|&at| at <= now) else {
            return Vec::new();
        };
        let left = self
            .limit
            .map_or(usize::MAX, |l| l.saturating_sub(self.runs) as usize);
        let until = self.end.map_or(now, |end| end.min(now));
        let want = match self.missed {
            Missed::Skip => 0,
            Missed::One => 1,
            Missed::All => cap,
        }
        .min(left);
        let mut times = Vec::new();
        let mut at = self.spec.last_until(self.start, until);
        while let Some(t) = at.filter(|&t| t >= first && times.len() < want) {
            times.push(t);
            at = t
                .checked_sub(1)
                .and_then(|before| self.spec.last_until(self.start, before));
        }
        times.reverse();
        times
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::NaiveDate;

    fn ms(zone: &str, y: i32, mo: u32, d: u32, h: u32, mi: u32) -> u64 {
        let tz = Tz::from_str(zone).unwrap();
        let local = NaiveDate::from_ymd_opt(y, mo, d)
            .unwrap()
            .and_hms_opt(h, mi, 0)
            .unwrap();
        match tz.from_local_datetime(&local) {
            LocalResult::Single(t) | LocalResult::Ambiguous(t, _) => t.timestamp_millis() as u64,
            LocalResult::None => panic!("{local} does not exist in {zone}"),
        }
    }

    fn utc_ms(y: i32, mo: u32, d: u32, h: u32, mi: u32) -> u64 {
        ms("UTC", y, mo, d, h, mi)
    }

    fn cron(expr: &str, zone: &str) -> Spec {
        Spec::cron(expr.as_bytes(), Some(zone.as_bytes())).unwrap()
    }

    /// The run times from `from` on, `n` of them.
    fn runs(spec: &Spec, from: u64, n: usize) -> Vec<u64> {
        let mut out = Vec::new();
        let mut at = spec.first_from(0, from);
        while let Some(t) = at.filter(|_| out.len() < n) {
            out.push(t);
            at = spec.next_after(0, t);
        }
        out
    }

    const MIN: u64 = 60_000;
    const HOUR: u64 = 60 * MIN;

    #[test]
    fn every_runs_from_its_start() {
        let spec = Spec::every(b"5m").unwrap();
        assert_eq!(spec.first_from(1_000, 0), Some(1_000));
        assert_eq!(spec.first_from(1_000, 1_000), Some(1_000));
        assert_eq!(spec.first_from(1_000, 1_001), Some(1_000 + 5 * MIN));
        assert_eq!(spec.next_after(1_000, 1_000), Some(1_000 + 5 * MIN));
        assert_eq!(
            spec.last_until(1_000, 1_000 + 11 * MIN),
            Some(1_000 + 10 * MIN)
        );
        assert_eq!(spec.last_until(1_000, 999), None);
        assert_eq!(spec.describe(), "every 5m");
        assert!(Spec::every(b"999").is_err(), "at least a second");
        assert!(Spec::every(b"1s").is_ok());
        assert!(Spec::every(b"soon").is_err());
    }

    #[test]
    fn cron_grammar_is_the_standard_five_fields() {
        for good in [
            "* * * * *",
            "0 8 * * *",
            "*/15 9-17 * * MON-FRI",
            "0 0 1,15 * *",
            "30 6 * jan,jul sun",
            "@hourly",
            "@DAILY",
            "@weekly",
            "@monthly",
            "@yearly",
        ] {
            assert!(Spec::cron(good.as_bytes(), None).is_ok(), "{good}");
        }
        for bad in [
            "* * * *",
            "* * * * * *",
            "61 * * * *",
            "* 24 * * *",
            "0 0 L * *",
            "0 0 * * 5#3",
            "0 0 ? * *",
            "0 0 * FOO *",
            "@reboot",
            "",
        ] {
            let e = Spec::cron(bad.as_bytes(), None).unwrap_err().to_string();
            assert!(e.starts_with("ERR CRON "), "{bad}: {e}");
        }
        assert!(zone(b"Mars/Olympus").is_err());
        assert!(zone(b"Europe/Berlin").is_ok());
    }

    #[test]
    fn cron_in_utc_and_in_a_zone() {
        let daily = cron("0 8 * * *", "UTC");
        let from = utc_ms(2026, 5, 1, 9, 0);
        assert_eq!(
            runs(&daily, from, 2),
            [utc_ms(2026, 5, 2, 8, 0), utc_ms(2026, 5, 3, 8, 0)]
        );
        let kolkata = cron("0 8 * * *", "Asia/Kolkata");
        // 08:00 in Kolkata is 02:30 UTC.
        assert_eq!(kolkata.first_from(0, from), Some(utc_ms(2026, 5, 2, 2, 30)));
        let friday = cron("0 0 * * FRI", "UTC");
        // 2026-05-01 is a Friday.
        assert_eq!(friday.first_from(0, from), Some(utc_ms(2026, 5, 8, 0, 0)));
    }

    /// Spring forward: the local times the change skips run at the first
    /// instant after the gap, once.
    #[test]
    fn a_skipped_local_time_runs_right_after_the_gap() {
        for (zone, y, m, d, gap_h, gap_m, after_h, after_m) in [
            // 02:00 -> 03:00
            ("America/New_York", 2026, 3, 8, 2, 30, 3, 0),
            ("Europe/Berlin", 2026, 3, 29, 2, 30, 3, 0),
            // 02:00 -> 03:00 (southern spring, October)
            ("Australia/Sydney", 2026, 10, 4, 2, 30, 3, 0),
            // Lord Howe moves by half an hour: 02:00 -> 02:30
            ("Australia/Lord_Howe", 2026, 10, 4, 2, 15, 2, 30),
        ] {
            let spec = cron(&format!("{gap_m} {gap_h} * * *"), zone);
            let day_before = ms(zone, y, m, d - 1, 12, 0);
            let got = runs(&spec, day_before, 3);
            let after_gap = ms(zone, y, m, d, after_h, after_m);
            assert_eq!(got[0], after_gap, "{zone}");
            // The days around it run at the local time as usual.
            assert_eq!(got[1], ms(zone, y, m, d + 1, gap_h, gap_m), "{zone}");
            // Every minute: the skipped minutes all fall on the instant
            // after the gap (one run), then it goes on minute by minute.
            let minutely = cron("* * * * *", zone);
            let before = after_gap - 2 * MIN;
            let got = runs(&minutely, before, 4);
            assert_eq!(
                got,
                [before, before + MIN, after_gap, after_gap + MIN],
                "{zone}"
            );
        }
    }

    /// Fall back: a local time that happens twice runs at its first
    /// occurrence only.
    #[test]
    fn a_repeated_local_time_runs_once_at_its_first_occurrence() {
        for (zone, y, m, d, h, mi, shift) in [
            // 02:00 -> 01:00: 01:30 happens twice.
            ("America/New_York", 2026, 11, 1, 1, 30, HOUR),
            ("Europe/Berlin", 2026, 10, 25, 2, 30, HOUR),
            ("Australia/Sydney", 2026, 4, 5, 2, 30, HOUR),
            // 02:00 -> 01:30
            ("Australia/Lord_Howe", 2026, 4, 5, 1, 45, 30 * MIN),
        ] {
            let spec = cron(&format!("{mi} {h} * * *"), zone);
            let first = ms(zone, y, m, d, h, mi);
            let day_before = first - 20 * HOUR;
            let got = runs(&spec, day_before, 2);
            assert_eq!(got[0], first, "{zone}: the first occurrence");
            assert!(
                got[1] > first + 20 * HOUR,
                "{zone}: not again {shift} ms later"
            );
            // Every minute through the change: each local minute once, so
            // after the last minute before the clock goes back comes the
            // first minute after the repeated stretch.
            let minutely = cron("* * * * *", zone);
            let back = first + (60 - u64::from(mi)) * MIN; // the instant the clock goes back
            let got = runs(&minutely, back - MIN, 2);
            assert_eq!(got, [back - MIN, back + shift], "{zone}");
        }
    }

    #[test]
    fn a_zone_without_daylight_saving_is_steady() {
        let spec = cron("30 * * * *", "Asia/Kolkata");
        let from = ms("Asia/Kolkata", 2026, 3, 8, 0, 0);
        let got = runs(&spec, from, 48);
        assert!(got.windows(2).all(|w| w[1] - w[0] == HOUR));
    }

    fn schedule(spec: Spec) -> Schedule {
        Schedule {
            spec,
            start: 0,
            end: None,
            limit: None,
            missed: Missed::One,
            overlap: Overlap::Allow,
            template: Template::default(),
            next_run: None,
            last_run: None,
            runs: 0,
            skipped: 0,
        }
    }

    #[test]
    fn end_and_limit_bound_the_runs() {
        let mut s = schedule(Spec::every(b"1m").unwrap());
        s.end = Some(10 * MIN);
        assert_eq!(s.next_from(10 * MIN), Some(10 * MIN));
        assert_eq!(s.next_after(10 * MIN), None);
        s.limit = Some(3);
        s.runs = 3;
        assert_eq!(s.next_from(0), None);
    }

    #[test]
    fn missed_runs_follow_the_policy() {
        let mut s = schedule(Spec::every(b"1m").unwrap());
        s.next_run = Some(2 * MIN);
        let now = 10 * MIN + 5;
        s.missed = Missed::Skip;
        assert!(s.missed_runs(now, 1000).is_empty());
        s.missed = Missed::One;
        assert_eq!(s.missed_runs(now, 1000), [10 * MIN]);
        s.missed = Missed::All;
        assert_eq!(
            s.missed_runs(now, 1000),
            (2..=10).map(|k| k * MIN).collect::<Vec<_>>()
        );
        assert_eq!(s.missed_runs(now, 3), [8 * MIN, 9 * MIN, 10 * MIN]);
        s.limit = Some(5);
        s.runs = 3;
        assert_eq!(s.missed_runs(now, 1000), [9 * MIN, 10 * MIN]);
        s.limit = None;
        s.end = Some(4 * MIN);
        assert_eq!(s.missed_runs(now, 1000), [2 * MIN, 3 * MIN, 4 * MIN]);
        // Nothing due yet: nothing missed.
        s.next_run = Some(now + 1);
        assert!(s.missed_runs(now, 1000).is_empty());
        // Cron, across a day boundary.
        let mut c = schedule(cron("0 * * * *", "Europe/Berlin"));
        c.missed = Missed::All;
        let at = ms("Europe/Berlin", 2026, 6, 1, 22, 0);
        c.next_run = Some(at);
        assert_eq!(
            c.missed_runs(at + 3 * HOUR + 5, 1000),
            [at, at + HOUR, at + 2 * HOUR, at + 3 * HOUR]
        );
    }
}
