//! Flow control as pure arithmetic: a queue's RATE (at most n deliveries
//! in any window of a given length) and the log of its recent deliveries
//! that makes the rate exact.
//!
//! The log keeps, for the last window, when deliveries happened and how
//! many (one entry per POP, however many messages it took), so a POP at
//! time t may deliver `n − (deliveries in (t − window, t])`: no window of
//! the rate's length ever sees more than n, whatever the number of
//! consumers. It is part of the queue's value, written by POP on the
//! master and by its replay (CLAIM, at the master's time) on a replica.

use std::collections::VecDeque;
use std::fmt;

use crate::core::backoff::{parse_duration, Duration};
use crate::core::error::{DqError, Result};
use crate::core::limits::{MAX_RATE, MAX_TIME_MS};

/// At most `limit` deliveries in any window of `window_ms`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rate {
    pub limit: u64,
    pub window_ms: u64,
}

const RATE_EXPECTED: &str =
    "n/duration with n from 0 to 1000000 and a duration of at least 1ms, such as 100/1s or 5000/1h (0 removes the limit)";

impl Rate {
    /// `n/duration` (`100/1s`, `5000/1h`); `0` or `0/...` removes the
    /// limit (`None`).
    pub fn parse(text: &[u8]) -> Result<Option<Rate>> {
        Rate::parse_for("RATE", text)
    }

    /// As [`Rate::parse`], for the option named `option` (GROUPRATE).
    pub fn parse_for(option: &'static str, text: &[u8]) -> Result<Option<Rate>> {
        let bad = DqError::BadValue {
            option,
            expected: RATE_EXPECTED,
        };
        let text = std::str::from_utf8(text).map_err(|_| bad.clone())?;
        let (limit, window) = match text.split_once('/') {
            Some(parts) => parts,
            None if text == "0" => return Ok(None),
            None => return Err(bad),
        };
        if limit.is_empty() || !limit.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad);
        }
        let limit: u64 = limit.parse().map_err(|_| bad.clone())?;
        let window_ms = parse_duration(window)
            .filter(|&ms| ms >= 1)
            .ok_or(bad.clone())?;
        if limit > MAX_RATE {
            return Err(bad);
        }
        Ok((limit > 0).then_some(Rate { limit, window_ms }))
    }
}

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "{}/{}", self.limit, Duration(self.window_ms))
    }
}

/// Recent deliveries: (time, how many), oldest first, and their total.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeliveryLog {
    entries: VecDeque<(u64, u64)>,
    total: u64,
}

impl DeliveryLog {
    pub const fn new() -> DeliveryLog {
        DeliveryLog {
            entries: VecDeque::new(),
            total: 0,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn entries(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.entries.iter().copied()
    }

    /// Rebuilds a log from stored entries (the codec): times not
    /// decreasing, counts positive.
    pub fn from_entries(entries: Vec<(u64, u64)>) -> Option<DeliveryLog> {
        let ordered = entries.windows(2).all(|w| w[0].0 <= w[1].0);
        let positive = entries.iter().all(|&(at, n)| n > 0 && at <= MAX_TIME_MS);
        let total = entries
            .iter()
            .try_fold(0u64, |sum, &(_, n)| sum.checked_add(n))?;
        (ordered && positive).then(|| DeliveryLog {
            entries: entries.into(),
            total,
        })
    }

    /// Forgets deliveries that no window ending at `now` or later holds.
    pub fn prune(&mut self, now: u64, rate: &Rate) {
        let since = now.saturating_sub(rate.window_ms);
        while let Some(&(_, n)) = self.entries.front().filter(|(at, _)| *at <= since) {
            self.entries.pop_front();
            self.total -= n;
        }
    }

    /// The deliveries in the window that ends at `now`, oldest first.
    fn in_window(&self, now: u64, rate: &Rate) -> impl Iterator<Item = (u64, u64)> + '_ {
        let since = now.saturating_sub(rate.window_ms);
        self.entries
            .iter()
            .copied()
            .skip_while(move |(at, _)| *at <= since)
    }

    /// How many more deliveries the rate allows at `now`. (It reads; only
    /// POP and its replay `prune`, at the same time on every server.)
    pub fn allowance(&self, now: u64, rate: &Rate) -> u64 {
        let since = now.saturating_sub(rate.window_ms);
        let gone: u64 = self
            .entries
            .iter()
            .take_while(|(at, _)| *at <= since)
            .map(|(_, n)| n)
            .sum();
        rate.limit.saturating_sub(self.total - gone)
    }

    /// Logs `count` deliveries at `now`, or at the last one's time if the
    /// clock has stepped back since: the log stays in time order (a saved
    /// queue's log must be, and pruning relies on it), and a delivery
    /// logged a little late stays in the window longer, never shorter.
    pub fn record(&mut self, now: u64, count: u64) {
        if count == 0 {
            return;
        }
        match self.entries.back_mut() {
            Some((at, n)) if *at >= now => *n += count,
            _ => self.entries.push_back((now, count)),
        }
        self.total += count;
    }

    /// When the rate next allows a delivery, if it allows none at `now`:
    /// when the oldest delivery in the window leaves it.
    pub fn reopens_at(&self, now: u64, rate: &Rate) -> Option<u64> {
        if self.allowance(now, rate) > 0 {
            return Some(now);
        }
        self.in_window(now, rate)
            .next()
            .map(|(at, _)| at.saturating_add(rate.window_ms))
    }

    /// When the oldest delivery the window ending at `now` holds leaves
    /// it, if it holds any.
    pub fn next_leaves(&self, now: u64, rate: &Rate) -> Option<u64> {
        self.in_window(now, rate)
            .next()
            .map(|(at, _)| at.saturating_add(rate.window_ms))
    }

    /// Bytes it holds beyond itself, as the allocator sizes them.
    pub fn heap_bytes(&self) -> usize {
        match self.entries.capacity() {
            0 => 0,
            n => crate::core::heap::alloc_size(n * std::mem::size_of::<(u64, u64)>()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_grammar() {
        assert_eq!(
            Rate::parse(b"100/1s").unwrap(),
            Some(Rate {
                limit: 100,
                window_ms: 1000
            })
        );
        assert_eq!(
            Rate::parse(b"5000/1h").unwrap().unwrap().to_string(),
            "5000/1h"
        );
        assert_eq!(Rate::parse(b"3/250").unwrap().unwrap().window_ms, 250);
        assert_eq!(Rate::parse(b"0").unwrap(), None);
        assert_eq!(Rate::parse(b"0/1s").unwrap(), None);
        for bad in [
            "5/0s",
            "abc",
            "5",
            "/1s",
            "5/",
            "-5/1s",
            "5/1x",
            "1000001/1s",
            "5/1s/2",
        ] {
            assert!(Rate::parse(bad.as_bytes()).is_err(), "{bad}");
        }
    }

    /// Deliveries at random times, each taking what the log allows: no
    /// window of the rate's length holds more than the limit.
    #[test]
    fn no_window_ever_holds_more_than_the_limit() {
        let rate = Rate {
            limit: 7,
            window_ms: 100,
        };
        let mut next = crate::core::testing::xorshift(3);
        let mut log = DeliveryLog::default();
        let mut all = Vec::new();
        let mut now = 0;
        for _ in 0..20_000 {
            now += next(15);
            let want = next(5);
            let take = want.min(log.allowance(now, &rate));
            log.prune(now, &rate);
            log.record(now, take);
            all.extend(std::iter::repeat_n(now, take as usize));
            // Once throttled, the log says when the next one may go.
            if log.allowance(now, &rate) == 0 {
                let at = log.reopens_at(now, &rate).unwrap();
                assert!(log.allowance(at, &rate) > 0);
                if at > now + 1 {
                    assert_eq!(log.allowance(at - 1, &rate), 0, "not earlier than it says");
                }
            }
        }
        for (i, &t) in all.iter().enumerate() {
            let in_window = all[i..]
                .iter()
                .take_while(|&&u| u < t + rate.window_ms)
                .count();
            assert!(
                in_window as u64 <= rate.limit,
                "{in_window} in the window from {t}"
            );
        }
        // And the rate is used: about limit per window over the run.
        assert!(all.len() as u64 > now / rate.window_ms * rate.limit / 2);
    }

    #[test]
    fn stored_logs_are_checked() {
        assert!(DeliveryLog::from_entries(vec![(1, 2), (3, 1)]).is_some());
        assert!(DeliveryLog::from_entries(vec![(3, 2), (1, 1)]).is_none());
        assert!(DeliveryLog::from_entries(vec![(1, 0)]).is_none());
        assert!(DeliveryLog::from_entries(vec![(1, u64::MAX), (2, 1)]).is_none());
    }
}
