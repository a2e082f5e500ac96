//! Glob-style patterns for DQ.QUEUES MATCH, as Redis matches them (KEYS,
//! SCAN MATCH): the workspace's one matcher, the `dq-glob` crate (glob/),
//! which the dashboard uses too, so that the queues it picks for
//! `/metrics` are exactly those the server's MATCH picks. Its tests live
//! there.

pub use dq_glob::matches;

#[cfg(test)]
mod tests {
    use super::matches;

    /// DQ.QUEUES MATCH's contract, as docs/commands.md states it: the
    /// matcher behind it is Redis' glob on bytes.
    #[test]
    fn queues_match_is_redis_glob() {
        assert!(matches(b"orders-*", b"orders-eu"));
        assert!(matches(b"tenant-[0-9]", b"tenant-7"));
        assert!(!matches(b"Orders", b"orders"));
        assert!(matches(b"a\\*b", b"a*b"));
        assert!(matches(b"\xff?", b"\xff\x00"));
    }
}
