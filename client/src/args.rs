//! Arguments several commands share: durations in milliseconds, ids, and
//! the message options DQ.ADD and DQ.SCHEDULE both take (the module parses
//! them with one grammar too), so that the two commands cannot drift apart.
//!
//! What the server would refuse for its shape (an empty id, a count of 0,
//! DELAY with AT) is refused here before anything is sent, with
//! [`Error::Config`], as the Python and Node.js libraries refuse it
//! (tests/vectors/commands.json lists those calls).

use std::time::Duration;

use redis::Cmd;

use crate::error::Error;

/// The longest id the server takes.
pub(crate) const MAX_ID_BYTES: usize = 1024;

/// Whole milliseconds, saturating at `u64::MAX` (a duration that large
/// is the server's to refuse, not a panic here).
pub(crate) fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// The longest duration the server takes: 2^53 - 1 ms.
pub(crate) const MAX_DURATION_MS: u64 = (1 << 53) - 1;

/// A duration written as the dq module reads every duration argument
/// (DELAY, LEASE, TTL, BLOCK, FOR, EVERY, ...): a whole number of
/// milliseconds (`"1500"`), or a whole number with a unit `ms`, `s`, `m`,
/// `h` or `d` (`"250ms"`, `"30s"`, `"5m"`, `"2h"`, `"7d"`), up to 2^53 − 1
/// ms; no fractions, signs, spaces or upper-case units.
///
/// The library's options take a [`Duration`]; this reads one from text
/// (a configuration file, an environment variable) with the same grammar
/// as the server and the Python and Node.js libraries, and refuses what
/// the server would refuse with [`Error::Config`]. Bounds that depend on
/// the option (a lease of at least 1 ms, EVERY of at least 1 s) are
/// checked where the duration is used.
///
/// ```
/// use std::time::Duration;
/// use dq_client::{parse_duration, Schedule};
///
/// assert_eq!(parse_duration("30s")?, Duration::from_secs(30));
/// assert_eq!(parse_duration("1500")?, Duration::from_millis(1500));
/// assert!(parse_duration("1.5s").is_err());
/// let every_5_minutes = Schedule::every(parse_duration("5m")?);
/// # let _ = every_5_minutes;
/// # Ok::<(), dq_client::Error>(())
/// ```
pub fn parse_duration(text: &str) -> Result<Duration, Error> {
    let digits_end = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (digits, unit) = text.split_at(digits_end);
    let scale: u64 = match unit {
        "" | "ms" => 1,
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ => 0,
    };
    let ms = (!digits.is_empty() && scale > 0)
        .then(|| digits.parse::<u64>().ok()?.checked_mul(scale))
        .flatten()
        .filter(|&ms| ms <= MAX_DURATION_MS);
    ms.map(Duration::from_millis).ok_or_else(|| {
        refuse(format!(
            "{text:?} is not a duration: a whole number of milliseconds, or a whole number with \
             a unit ms, s, m, h or d, such as 1500, 250ms, 30s, 5m, 2h, 7d (no fractions, signs, \
             spaces or upper-case units; at most 2^53 - 1 ms)"
        ))
    })
}

/// A refusal before sending: `what` was wrong.
pub(crate) fn refuse(what: impl Into<String>) -> Error {
    Error::Config(what.into())
}

/// `Err` unless `ok`: the call is refused, `what` says why.
pub(crate) fn require(ok: bool, what: impl FnOnce() -> String) -> Result<(), Error> {
    if ok {
        Ok(())
    } else {
        Err(refuse(what()))
    }
}

/// An id (or a group): 1 to 1024 bytes.
pub(crate) fn check_id(what: &str, id: &[u8]) -> Result<(), Error> {
    require((1..=MAX_ID_BYTES).contains(&id.len()), || {
        format!("{what} must be 1 to {MAX_ID_BYTES} bytes, not {}", id.len())
    })
}

/// A COUNT: 1 to 10000, as every command that takes one reads it.
pub(crate) fn check_count(count: usize) -> Result<(), Error> {
    require((1..=10_000).contains(&count), || {
        format!("count must be from 1 to 10000, not {count}")
    })
}

/// A duration the server reads in whole milliseconds and refuses at 0
/// (LEASE, TTL, FOR): at least 1 ms.
pub(crate) fn check_positive(what: &str, d: Duration) -> Result<(), Error> {
    require(ms(d) >= 1, || {
        format!("{what} must be at least 1 ms, not {d:?}")
    })
}

/// ATTEMPT: deliveries count from 1.
pub(crate) fn check_attempt(attempt: Option<u64>) -> Result<(), Error> {
    require(attempt != Some(0), || {
        "attempt counts from 1: there is no delivery 0".into()
    })
}

/// The message options of DQ.ADD, or of each run of DQ.SCHEDULE:
/// `PRIORITY p MAXATTEMPTS n BACKOFF spec GROUP g TTL ms`, each only when
/// set, in the order both commands document; refused when the server
/// would refuse one (MAXATTEMPTS 0, an empty BACKOFF or GROUP, TTL 0).
pub(crate) fn message_options(
    cmd: &mut Cmd,
    priority: Option<i32>,
    max_attempts: Option<u32>,
    backoff: Option<&str>,
    group: Option<&[u8]>,
    ttl: Option<Duration>,
) -> Result<(), Error> {
    require(max_attempts != Some(0), || {
        "max_attempts must be at least 1".into()
    })?;
    require(backoff != Some(""), || {
        "backoff must not be empty: give a spec such as exp:1s:1h".into()
    })?;
    if let Some(g) = group {
        check_id("group", g)?;
    }
    if let Some(t) = ttl {
        check_positive("ttl", t)?;
    }
    if let Some(p) = priority {
        cmd.arg("PRIORITY").arg(p);
    }
    if let Some(n) = max_attempts {
        cmd.arg("MAXATTEMPTS").arg(n);
    }
    if let Some(b) = backoff {
        cmd.arg("BACKOFF").arg(b);
    }
    if let Some(g) = group {
        cmd.arg("GROUP").arg(g);
    }
    if let Some(t) = ttl {
        cmd.arg("TTL").arg(ms(t));
    }
    Ok(())
}

/// A command's arguments as text, for tests that check what is sent.
#[cfg(test)]
pub(crate) fn sent(cmd: &Cmd) -> Vec<String> {
    cmd.args_iter()
        .map(|a| match a {
            redis::Arg::Simple(b) => String::from_utf8_lossy(b).into_owned(),
            _ => "<not a plain argument>".into(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_in_whole_milliseconds() {
        assert_eq!(ms(Duration::from_micros(1999)), 1);
        assert_eq!(ms(Duration::from_secs(2)), 2000);
        assert_eq!(ms(Duration::MAX), u64::MAX);
    }

    #[test]
    fn durations_from_text_in_the_servers_grammar() {
        for (text, ms) in [
            ("0", 0),
            ("1500", 1500),
            ("250ms", 250),
            ("30s", 30_000),
            ("5m", 300_000),
            ("2h", 7_200_000),
            ("7d", 604_800_000),
            ("007s", 7_000),
            ("9007199254740991", MAX_DURATION_MS),
            ("104249991d", 104_249_991 * 86_400_000),
        ] {
            assert_eq!(
                parse_duration(text).unwrap(),
                Duration::from_millis(ms),
                "{text}"
            );
        }
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
            "ms",
            "1e3",
            "0x10",
            "1h30m",
            "\u{ff15}s",
            "9007199254740992",
            "104249992d",
            "99999999999999999999999",
        ] {
            match parse_duration(text) {
                Err(Error::Config(why)) => assert!(why.contains("not a duration"), "{why}"),
                other => panic!("{text:?}: {other:?}"),
            }
        }
    }

    #[test]
    fn message_options_only_when_set_in_one_order() {
        let mut cmd = redis::cmd("X");
        message_options(&mut cmd, None, None, None, None, None).unwrap();
        assert_eq!(sent(&cmd), ["X"]);
        let ttl = Some(Duration::from_millis(5));
        message_options(
            &mut cmd,
            Some(-1),
            Some(2),
            Some("fixed:1s"),
            Some(b"g\xff"),
            ttl,
        )
        .unwrap();
        assert_eq!(
            sent(&cmd),
            [
                "X",
                "PRIORITY",
                "-1",
                "MAXATTEMPTS",
                "2",
                "BACKOFF",
                "fixed:1s",
                "GROUP",
                "g\u{fffd}",
                "TTL",
                "5"
            ]
        );
    }
}
