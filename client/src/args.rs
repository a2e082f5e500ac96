//! Arguments several commands share: durations in milliseconds, and the
//! message options DQ.ADD and DQ.SCHEDULE both take (the module parses them
//! with one grammar too), so that the two commands cannot drift apart.

use std::time::Duration;

use redis::Cmd;

/// Whole milliseconds, saturating at `u64::MAX` (a duration that large
/// is the server's to refuse, not a panic here).
pub(crate) fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// The message options of DQ.ADD, or of each run of DQ.SCHEDULE:
/// `PRIORITY p MAXATTEMPTS n BACKOFF spec GROUP g TTL ms`, each only when
/// set, in the order both commands document.
pub(crate) fn message_options(
    cmd: &mut Cmd,
    priority: Option<i32>,
    max_attempts: Option<u32>,
    backoff: Option<&str>,
    group: Option<&[u8]>,
    ttl: Option<Duration>,
) {
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
        message_options(&mut cmd, None, None, None, None, None);
        assert_eq!(sent(&cmd), ["X"]);
        let ttl = Some(Duration::from_millis(5));
        message_options(
            &mut cmd,
            Some(-1),
            Some(2),
            Some("fixed:1s"),
            Some(b"g\xff"),
            ttl,
        );
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
