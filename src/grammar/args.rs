//! Reading command arguments: keywords, numbers and the options grammar
//! shared by every command. Pure: it sees bytes, never Redis.

use crate::core::backoff::{parse_duration, Backoff};
use crate::core::error::{DqError, Result};
use crate::core::limits::{MAX_COUNT, MAX_ERROR_LEN, MAX_ID_LEN, MAX_TIME_MS};

/// Walks the arguments after the queue name.
pub struct ArgCursor<'a> {
    args: &'a [&'a [u8]],
    pos: usize,
}

impl<'a> ArgCursor<'a> {
    pub fn new(args: &'a [&'a [u8]]) -> Self {
        ArgCursor { args, pos: 0 }
    }

    pub fn next_arg(&mut self) -> Option<&'a [u8]> {
        let arg = self.args.get(self.pos)?;
        self.pos += 1;
        Some(arg)
    }

    /// The value that must follow `option`.
    pub fn value_of(&mut self, option: &'static str) -> Result<&'a [u8]> {
        self.next_arg().ok_or(DqError::MissingValue(option))
    }

    pub fn remaining(&self) -> &'a [&'a [u8]] {
        &self.args[self.pos..]
    }
}

/// Remembers which options a command line has used, to refuse repeats.
/// Inline: a command has at most a dozen options, and every DQ.ADD makes
/// one of these.
#[derive(Default)]
pub struct Seen {
    names: [&'static str; 16],
    len: usize,
}

impl Seen {
    pub fn mark(&mut self, option: &'static str) -> Result<()> {
        let seen = &self.names[..self.len];
        if seen.contains(&option) {
            return Err(DqError::RepeatedOption(option));
        }
        // Every command has fewer than 16 options, so there is room.
        if let Some(slot) = self.names.get_mut(self.len) {
            *slot = option;
            self.len += 1;
        }
        Ok(())
    }
}

/// Reads `KEYWORD [value]` options in any order, each at most once: the
/// loop every command's grammar shares.
///
/// ```text
/// let mut o = Options::new(rest);
/// while o.advance() {
///     if let Some(v) = o.value("COUNT")? { ... }
///     else if o.flag("NX")? { ... }
///     else { return Err(o.unknown()); }
/// }
/// ```
pub struct Options<'a> {
    cursor: ArgCursor<'a>,
    seen: Seen,
    word: &'a [u8],
}

impl<'a> Options<'a> {
    pub fn new(args: &'a [&'a [u8]]) -> Self {
        Options {
            cursor: ArgCursor::new(args),
            seen: Seen::default(),
            word: &[],
        }
    }

    /// Moves to the next option word; false at the end.
    pub fn advance(&mut self) -> bool {
        match self.cursor.next_arg() {
            Some(word) => {
                self.word = word;
                true
            }
            None => false,
        }
    }

    /// Whether the word is `keyword`, a flag (refused if given before).
    pub fn flag(&mut self, keyword: &'static str) -> Result<bool> {
        if !is_keyword(self.word, keyword) {
            return Ok(false);
        }
        self.seen.mark(keyword)?;
        Ok(true)
    }

    /// The value after the word when the word is `keyword` (refused if
    /// given before, or when no value follows).
    pub fn value(&mut self, keyword: &'static str) -> Result<Option<&'a [u8]>> {
        if !self.flag(keyword)? {
            return Ok(None);
        }
        self.value_after(keyword).map(Some)
    }

    /// The value after a word [`Options::flag`] took as `keyword`, for an
    /// option that checks conflicts before reading its value.
    pub fn value_after(&mut self, keyword: &'static str) -> Result<&'a [u8]> {
        self.cursor.value_of(keyword)
    }

    /// The error for a word no option of the command matched.
    pub fn unknown(&self) -> DqError {
        unknown_option(self.word)
    }
}

pub fn is_keyword(arg: &[u8], keyword: &str) -> bool {
    arg.eq_ignore_ascii_case(keyword.as_bytes())
}

pub fn unknown_option(arg: &[u8]) -> DqError {
    DqError::UnknownOption(crate::core::error::printable(arg))
}

/// Strict decimal: digits only, no sign, no spaces, no overflow.
fn parse_unsigned(arg: &[u8]) -> Option<u64> {
    if arg.is_empty() || !arg.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(arg).ok()?.parse().ok()
}

fn parse_signed(arg: &[u8]) -> Option<i64> {
    match arg.strip_prefix(b"-") {
        Some(digits) => {
            let magnitude = parse_unsigned(digits)?;
            0i64.checked_sub_unsigned(magnitude)
        }
        None => parse_unsigned(arg).and_then(|v| i64::try_from(v).ok()),
    }
}

/// A duration: a bare whole number of milliseconds (what every release
/// took) or a whole number with a unit (`30s`, `5m`, `7d`), 0 to
/// [`MAX_TIME_MS`] ms. DELAY, BLOCK and the like: 0 allowed.
pub fn parse_duration_arg(option: &'static str, arg: &[u8]) -> Result<u64> {
    duration(option, arg, 0, "a duration")
}

/// A duration of at least 1 ms (LEASE, TTL, FOR, RETAIN).
pub fn parse_positive_duration(option: &'static str, arg: &[u8]) -> Result<u64> {
    duration(option, arg, 1, "a positive duration")
}

/// A duration of at least `least` ms, which `what` says in the error.
pub fn duration(option: &'static str, arg: &[u8], least: u64, what: &'static str) -> Result<u64> {
    std::str::from_utf8(arg)
        .ok()
        .and_then(parse_duration)
        .filter(|&ms| ms >= least)
        .ok_or(DqError::BadDuration { option, what })
}

/// A time in milliseconds: 0 to [`MAX_TIME_MS`] (AT, START, END).
pub fn parse_ms(option: &'static str, expected: &'static str, arg: &[u8]) -> Result<u64> {
    parse_unsigned(arg)
        .filter(|&v| v <= MAX_TIME_MS)
        .ok_or(DqError::BadValue { option, expected })
}

/// An integer in `min..=max`.
pub fn parse_in_range(
    option: &'static str,
    expected: &'static str,
    arg: &[u8],
    min: i64,
    max: i64,
) -> Result<i64> {
    parse_signed(arg)
        .filter(|v| (min..=max).contains(v))
        .ok_or(DqError::BadValue { option, expected })
}

/// A lease deadline as CLAIM and TOUCH propagate it: a master's is always
/// after the Unix epoch, and 0 means "no lease" inside a record, so a
/// replayed 0 (a damaged AOF) would leave a lease the queue cannot see.
pub fn parse_deadline(arg: &[u8]) -> Result<u64> {
    let at = parse_in_range(
        "deadline",
        "a Unix time in ms after 0",
        arg,
        1,
        MAX_TIME_MS as i64,
    )?;
    Ok(at as u64)
}

/// `base + delta` as a time, refusing what does not fit a ZSET score exactly.
pub fn add_ms(option: &'static str, base: u64, delta: u64) -> Result<u64> {
    base.checked_add(delta)
        .filter(|&t| t <= MAX_TIME_MS)
        .ok_or(DqError::TimeOverflow(option))
}

/// The end of a lease of `lease_ms` from `now`. A lease longer than dq can
/// store just lasts until the latest storable time.
pub fn lease_deadline(now: u64, lease_ms: u64) -> u64 {
    now.saturating_add(lease_ms).min(MAX_TIME_MS)
}

/// A message id given by a client.
pub fn check_id(id: &[u8]) -> Result<&[u8]> {
    check_name("id", id)
}

/// A message id or a group name: non-empty and at most `MAX_ID_LEN` bytes.
pub fn check_name<'a>(what: &'static str, name: &'a [u8]) -> Result<&'a [u8]> {
    check_length(what, name, MAX_ID_LEN)
}

/// A name of 1 to `max` bytes.
pub fn check_length<'a>(what: &'static str, name: &'a [u8], max: usize) -> Result<&'a [u8]> {
    if name.is_empty() {
        return Err(DqError::Empty(what));
    }
    if name.len() > max {
        return Err(DqError::TooLong { what, max });
    }
    Ok(name)
}

/// MAXATTEMPTS: deliveries a message may have before it is dead.
pub fn parse_max_attempts(arg: &[u8]) -> Result<u32> {
    let n = parse_in_range(
        "MAXATTEMPTS",
        MAX_ATTEMPTS_EXPECTED,
        arg,
        1,
        i32::MAX.into(),
    )?;
    Ok(n as u32)
}

const MAX_ATTEMPTS_EXPECTED: &str = "an integer from 1 to 2147483647";

/// LEASE: how long a delivery stays invisible.
pub fn parse_lease(arg: &[u8]) -> Result<u64> {
    parse_positive_duration("LEASE", arg)
}

/// COUNT: how many messages one command handles, 1 to [`MAX_COUNT`].
pub fn parse_count(arg: &[u8]) -> Result<usize> {
    let n = parse_in_range("COUNT", COUNT_EXPECTED, arg, 1, MAX_COUNT as i64)?;
    Ok(n as usize)
}

const COUNT_EXPECTED: &str = "an integer from 1 to 10000";

/// A state name, as PEEK and PURGE take it.
pub fn parse_state(arg: &[u8]) -> Result<crate::core::queue::State> {
    use crate::core::queue::State;
    [
        State::Delayed,
        State::Ready,
        State::Inflight,
        State::Dead,
        State::Done,
    ]
    .into_iter()
    .find(|s| is_keyword(arg, s.name()))
    .ok_or(DqError::BadValue {
        option: "state",
        expected: "one of DELAYED, READY, INFLIGHT, DEAD, DONE",
    })
}

/// `queue` alone (STATS, SCHEDULES, RESUME).
pub fn parse_queue<'a>(command: &'static str, args: &'a [&'a [u8]]) -> Result<&'a [u8]> {
    match args {
        [queue] => Ok(queue),
        _ => Err(DqError::WrongArity(command)),
    }
}

/// `queue id options...`, the shape of NACK and TOUCH: the queue, the
/// checked id, and the options for the command to read.
pub fn parse_queue_and_id<'a>(
    command: &'static str,
    args: &'a [&'a [u8]],
) -> Result<(&'a [u8], &'a [u8], Options<'a>)> {
    let [queue, id, options @ ..] = args else {
        return Err(DqError::WrongArity(command));
    };
    Ok((queue, check_id(id)?, Options::new(options)))
}

/// ATTEMPT: the delivery a NACK or TOUCH is meant for, as POP numbered it.
pub fn parse_attempt(arg: &[u8]) -> Result<u32> {
    let n = parse_in_range("ATTEMPT", ATTEMPT_EXPECTED, arg, 1, u32::MAX.into())?;
    Ok(n as u32)
}

const ATTEMPT_EXPECTED: &str = "an integer from 1 to 4294967295";

/// NACK's ERROR text: non-empty and at most [`MAX_ERROR_LEN`] bytes.
pub fn check_error(text: &[u8]) -> Result<&[u8]> {
    if text.is_empty() {
        return Err(DqError::Empty("ERROR"));
    }
    if text.len() > MAX_ERROR_LEN {
        return Err(DqError::TooLong {
            what: "ERROR",
            max: MAX_ERROR_LEN,
        });
    }
    Ok(text)
}

/// `queue id [id ...]`, the shape of ACK and CANCEL.
pub fn parse_queue_and_ids<'a>(
    command: &'static str,
    args: &'a [&'a [u8]],
) -> Result<(&'a [u8], &'a [&'a [u8]])> {
    let [queue, ids @ ..] = args else {
        return Err(DqError::WrongArity(command));
    };
    if ids.is_empty() {
        return Err(DqError::WrongArity(command));
    }
    for id in ids {
        check_id(id)?;
    }
    Ok((queue, ids))
}

/// The options a message carries, as DQ.ADD and DQ.SCHEDULE take them.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MessageOptions<'a> {
    pub priority: i32,
    pub max_attempts: Option<u32>,
    pub backoff: Option<Backoff>,
    pub group: Option<&'a [u8]>,
    pub ttl_ms: Option<u64>,
}

const PRIORITY_EXPECTED: &str = "an integer from -2147483648 to 2147483647";

impl<'a> MessageOptions<'a> {
    /// Reads `PRIORITY p`, `MAXATTEMPTS n`, `BACKOFF spec`, `GROUP g` or
    /// `TTL ms` if the option word is one of them; false for any other.
    pub fn read(&mut self, o: &mut Options<'a>) -> Result<bool> {
        if let Some(value) = o.value("PRIORITY")? {
            let p = parse_in_range(
                "PRIORITY",
                PRIORITY_EXPECTED,
                value,
                i32::MIN.into(),
                i32::MAX.into(),
            )?;
            self.priority = p as i32;
        } else if let Some(value) = o.value("MAXATTEMPTS")? {
            self.max_attempts = Some(parse_max_attempts(value)?);
        } else if let Some(value) = o.value("BACKOFF")? {
            self.backoff = Some(Backoff::parse(value)?);
        } else if let Some(value) = o.value("TTL")? {
            self.ttl_ms = Some(parse_positive_duration("TTL", value)?);
        } else if let Some(value) = o.value("GROUP")? {
            self.group = Some(check_name("GROUP", value)?);
        } else {
            return Ok(false);
        }
        Ok(true)
    }
}

/// Arguments with a 'static lifetime, for parser unit tests.
#[cfg(test)]
pub fn leak_args(args: &[&str]) -> &'static [&'static [u8]] {
    let owned: Vec<&'static [u8]> = args
        .iter()
        .map(|a| &*Box::leak(a.as_bytes().to_vec().into_boxed_slice()))
        .collect();
    Box::leak(owned.into_boxed_slice())
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: &str = "a non-negative integer number of milliseconds";

    #[test]
    fn durations_take_bare_milliseconds_or_a_unit() {
        for (text, ms) in [
            ("0", 0),
            ("1500", 1500),
            ("250ms", 250),
            ("30s", 30_000),
            ("5m", 300_000),
            ("2h", 7_200_000),
            ("7d", 604_800_000),
            ("9007199254740991", MAX_TIME_MS),
        ] {
            assert_eq!(
                parse_duration_arg("DELAY", text.as_bytes()),
                Ok(ms),
                "{text}"
            );
        }
        let bad = DqError::BadDuration {
            option: "DELAY",
            what: "a duration",
        };
        for text in [
            "",
            "-1",
            "+1",
            " 1",
            "1 ",
            "1.5s",
            "5 s",
            "5S",
            "5sec",
            "s",
            "1e3",
            "0x10",
            "9007199254740992",
            "104249991375d",
        ] {
            assert_eq!(
                parse_duration_arg("DELAY", text.as_bytes()),
                Err(bad.clone()),
                "{text}"
            );
        }
        assert_eq!(parse_positive_duration("LEASE", b"1"), Ok(1));
        for zero in ["0", "0s", "0d"] {
            assert_eq!(
                parse_positive_duration("LEASE", zero.as_bytes()).map_err(|e| e.to_string()),
                Err(
                    "ERR LEASE must be a positive duration: whole milliseconds such as 1500, \
                     or a whole number with a unit ms, s, m, h or d such as 30s, 5m or 7d"
                        .into()
                )
            );
        }
    }

    #[test]
    fn unsigned_is_strict() {
        assert_eq!(parse_ms("DELAY", MS, b"0"), Ok(0));
        assert_eq!(parse_ms("DELAY", MS, b"1500"), Ok(1500));
        for bad in [
            &b""[..],
            b"-1",
            b"+1",
            b" 1",
            b"1 ",
            b"1.5",
            b"1e3",
            b"0x10",
            b"9007199254740992",
            b"18446744073709551616",
            b"99999999999999999999999",
        ] {
            assert_eq!(
                parse_ms("DELAY", MS, bad),
                Err(DqError::BadValue {
                    option: "DELAY",
                    expected: MS
                }),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
        assert_eq!(parse_ms("AT", MS, b"9007199254740991"), Ok(MAX_TIME_MS));
    }

    #[test]
    fn signed_range() {
        let p = |a: &[u8]| parse_in_range("PRIORITY", "x", a, -5, 5);
        assert_eq!(p(b"-5"), Ok(-5));
        assert_eq!(p(b"5"), Ok(5));
        assert_eq!(p(b"0"), Ok(0));
        assert!(p(b"6").is_err());
        assert!(p(b"-6").is_err());
        assert!(p(b"-").is_err());
        assert!(p(b"--1").is_err());
        assert!(p(b"-9223372036854775809").is_err());
        let wide = |a: &[u8]| parse_in_range("P", "x", a, i64::MIN, i64::MAX);
        assert_eq!(wide(b"-9223372036854775808"), Ok(i64::MIN));
        assert_eq!(wide(b"9223372036854775807"), Ok(i64::MAX));
        assert!(wide(b"9223372036854775808").is_err());
    }

    #[test]
    fn time_addition_refuses_overflow() {
        assert_eq!(add_ms("DELAY", 10, 5), Ok(15));
        assert_eq!(
            add_ms("DELAY", MAX_TIME_MS, 1),
            Err(DqError::TimeOverflow("DELAY"))
        );
        assert!(add_ms("DELAY", u64::MAX, u64::MAX).is_err());
    }

    #[test]
    fn ids_are_checked() {
        assert_eq!(check_id(b"a"), Ok(&b"a"[..]));
        assert_eq!(check_id(b""), Err(DqError::Empty("id")));
        assert!(check_id(&[b'x'; MAX_ID_LEN]).is_ok());
        assert!(check_id(&[b'x'; MAX_ID_LEN + 1]).is_err());
    }

    #[test]
    fn queue_and_ids() {
        let (q, ids) = parse_queue_and_ids("dq.ack", leak_args(&["q", "a", "b"])).unwrap();
        assert_eq!((q, ids.len()), (&b"q"[..], 2));
        let arity = Err(DqError::WrongArity("dq.ack"));
        assert_eq!(parse_queue_and_ids("dq.ack", leak_args(&["q"])), arity);
        assert_eq!(parse_queue_and_ids("dq.ack", leak_args(&[])), arity);
        assert_eq!(
            parse_queue_and_ids("dq.ack", leak_args(&["q", "a", ""])),
            Err(DqError::Empty("id"))
        );
    }

    #[test]
    fn repeated_options_are_refused() {
        let mut seen = Seen::default();
        assert!(seen.mark("DELAY").is_ok());
        assert!(seen.mark("ID").is_ok());
        assert_eq!(seen.mark("DELAY"), Err(DqError::RepeatedOption("DELAY")));
    }

    #[test]
    fn cursor_reports_missing_values() {
        let args: [&[u8]; 1] = [b"DELAY"];
        let mut c = ArgCursor::new(&args);
        assert_eq!(c.next_arg(), Some(&b"DELAY"[..]));
        assert_eq!(c.value_of("DELAY"), Err(DqError::MissingValue("DELAY")));
    }
}
