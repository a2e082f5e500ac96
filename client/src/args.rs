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
