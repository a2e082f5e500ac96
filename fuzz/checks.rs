//! The properties the fuzz targets check, shared with the unit test that
//! replays the seeds and past findings (`src/regressions.rs`), which
//! includes this file too. The includer names the dq crate `dq`.
//!
//! `args`: the first byte picks a parser; the rest, split on 0x00, is the
//! argument list after the command name (for BACKOFF, durations and key
//! names: the rest as one value). Below 128 the byte picks one of twelve
//! parsers whose results have documented bounds to check; from 128 on it
//! picks a command of `commands::ALL` (`(byte - 128) % ALL.len()`), whose
//! declared grammar runs: so every command a client can send is fuzzed,
//! new ones included. Beyond "no panic": values within their documented
//! bounds, errors shaped as a single reply line with an upper-case code,
//! backoff arithmetic that never overflows and a canonical spec that
//! parses back to the same value, key names that name their queue back.
//!
//! `glob`: DQ.QUEUES MATCH's matcher (and the dashboard's) agrees with a
//! plain recursive reading of Redis' glob rules on every pattern and name:
//! the input, split at its first 0x00, is the pattern and the name.
//!
//! `replay`: whatever a replication stream or an AOF hands DQ.APPLY (the
//! input, split on 0x00, is its argument list after the command name),
//! replaying it on a queue holding messages in every state either fails
//! with a clean error or leaves a queue that passes its own check and
//! saves and loads back to the same value.
//!
//! `queue`: whatever a DUMP payload or an RDB holds for a queue key, the
//! loader returns a clean error or a queue that passes its own invariant
//! check, and a loaded queue saves and loads back to the same value. The
//! input is frames of a 2-byte little-endian length and that many bytes:
//! the header, then record chunks.
//!
//! `envelope`: whatever bytes a messages hash holds (written by hand, by an
//! older build, or damaged), decoding returns a message or a clean error,
//! and a decoded message encodes and decodes back to itself. Each input is
//! tried as it is and with its checksum fixed, so the body decoder is
//! reached too, not only the CRC check.

// Each fuzz target uses one of the two entry points.
#![allow(dead_code)]

use super::dq::commands::{add, apply, config, nack, peek, pop, purge, redrive, touch, ALL};
use super::dq::core::backoff::{parse_duration, Backoff};
use super::dq::core::error::{DqError, Result};
use super::dq::core::limits::{
    MAX_COUNT, MAX_ERROR_LEN, MAX_EVENTS, MAX_ID_LEN, MAX_STEPS, MAX_TIME_MS,
};
use super::dq::core::policy::{Policy, QueueConfig};
use super::dq::core::queue::codec;
use super::dq::core::queue::{AddMode, AddRequest, NackAction, Queue, Redrive};
use super::dq::grammar::args::parse_queue_and_ids;
use super::dq::grammar::glob::matches as glob_matches;
use super::dq::grammar::settings::load_values;
use super::dq::legacy::keys::{key_name, parse_key_name, slot, Part};
use super::dq::legacy::message::Message;

pub fn args(data: &[u8]) {
    let Some((&which, rest)) = data.split_first() else {
        return;
    };
    let args = split(rest);
    if which >= 128 {
        let command = ALL[usize::from(which - 128) % ALL.len()];
        return checked((command.grammar)(&args), |_| {});
    }
    match which % 12 {
        0 => checked(add::parse(&args), |a| {
            assert!(args.len() >= 2);
            if let add::When::Delay(ms) | add::When::At(ms) = a.when {
                assert!(ms <= MAX_TIME_MS);
            }
            for now in [0, 1_700_000_000_000, MAX_TIME_MS] {
                match a.when.due_at(now) {
                    Ok(due) => assert!(due <= MAX_TIME_MS),
                    Err(e) => assert_eq!(e, DqError::TimeOverflow("DELAY")),
                }
            }
            let o = &a.options;
            a.id.into_iter().chain(o.group).for_each(name_bounds);
            assert!(o
                .max_attempts
                .is_none_or(|n| (1..=i32::MAX as u32).contains(&n)));
            assert!(o.ttl_ms.is_none_or(|t| (1..=MAX_TIME_MS).contains(&t)));
            if a.mode == AddMode::OnlyExisting {
                assert!(a.id.is_some(), "XX without ID");
            }
            if let Some(b) = &o.backoff {
                backoff_properties(b);
            }
        }),
        1 => checked(pop::parse(&args), |p| {
            assert!((1..=MAX_COUNT).contains(&p.options.count));
            assert!(p.options.block.is_none_or(|b| b <= MAX_TIME_MS));
            assert!(p
                .options
                .lease_ms
                .is_none_or(|l| (1..=MAX_TIME_MS).contains(&l)));
        }),
        2 => checked(nack::parse(&args), |n| {
            name_bounds(n.id);
            if let NackAction::Retry(Some(delay)) = n.action {
                assert!(delay <= MAX_TIME_MS);
            }
            assert!(n.attempt.is_none_or(|a| a >= 1));
            assert!(n
                .error
                .is_none_or(|e| !e.is_empty() && e.len() <= MAX_ERROR_LEN));
        }),
        3 => checked(touch::parse(&args), |t| {
            name_bounds(t.id);
            assert!(t.lease_ms.is_none_or(|l| (1..=MAX_TIME_MS).contains(&l)));
            assert!(t.attempt.is_none_or(|a| a >= 1));
        }),
        4 => checked(config::parse(&args), |(_, changes)| {
            // Show (no arguments after the queue) or SET with pairs.
            assert_eq!(changes.is_empty(), args.len() == 1);
            for change in changes {
                match change {
                    config::Change::Lease(l) => {
                        assert!(l.is_none_or(|l| (1..=MAX_TIME_MS).contains(&l)))
                    }
                    config::Change::MaxAttempts(n) => assert!(n.is_none_or(|n| n >= 1)),
                    config::Change::Backoff(b) => b.iter().for_each(backoff_properties),
                    config::Change::Rate(r) => {
                        assert!(r.is_none_or(|r| r.limit >= 1 && r.window_ms >= 1))
                    }
                    config::Change::MaxInflight(n) => assert!(n.is_none_or(|n| n >= 1)),
                    config::Change::Retain(ms) => assert!(ms.is_none_or(|ms| ms <= MAX_TIME_MS)),
                    config::Change::RetainMax(n) => assert!(n.is_none_or(|n| n >= 1)),
                    config::Change::Events(n) => {
                        assert!(n.is_none_or(|n| (1..=MAX_EVENTS).contains(&n)))
                    }
                    config::Change::GroupLimit(n) => {
                        assert!(n.is_none_or(|n| (1..=1_000_000).contains(&n)))
                    }
                    config::Change::GroupRate(r) => {
                        assert!(r.is_none_or(|r| r.limit >= 1 && r.window_ms >= 1))
                    }
                    config::Change::Fair(_) => {}
                }
            }
        }),
        5 => checked(redrive::parse(&args), |(_, which)| match which {
            Redrive::Oldest(n) => assert!((1..=MAX_COUNT).contains(n)),
            Redrive::Ids(ids) => {
                assert!(!ids.is_empty());
                ids.iter().copied().for_each(name_bounds);
            }
        }),
        6 => checked(peek::parse(&args), |(_, _, count)| {
            assert!((1..=MAX_COUNT).contains(count));
        }),
        7 => checked(purge::parse(&args), |_| {
            assert!(matches!(args.len(), 1 | 2))
        }),
        8 => checked(parse_queue_and_ids("dq.ack", &args), |(_, ids)| {
            assert!(!ids.is_empty());
            ids.iter().copied().for_each(name_bounds);
        }),
        9 => checked(Backoff::parse(rest), backoff_properties),
        10 => checked(load_values(&args), |v| {
            assert!(v.lease_ms >= 1 && v.lease_ms as u64 <= MAX_TIME_MS);
            assert!(v.max_attempts >= 1 && v.max_attempts <= i32::MAX.into());
            // The start value of dq.backoff is handed to Redis as a string
            // that must itself be accepted.
            assert!(
                Backoff::parse(v.backoff.as_bytes()).is_ok(),
                "{}",
                v.backoff
            );
        }),
        _ => {
            if let Ok(text) = std::str::from_utf8(rest) {
                assert!(parse_duration(text).is_none_or(|ms| ms <= MAX_TIME_MS));
            }
            key_naming(rest);
        }
    }
}

pub fn glob(data: &[u8]) {
    let (pattern, name) = match data.iter().position(|&b| b == 0) {
        Some(at) => (&data[..at], &data[at + 1..]),
        None => (data, &b""[..]),
    };
    // The oracle is exponential in the stars: keep its inputs small.
    if pattern.len() > 40 || name.len() > 40 || pattern.iter().filter(|&&b| b == b'*').count() > 5 {
        return;
    }
    assert_eq!(
        glob_matches(pattern, name),
        oracle(pattern, name),
        "pattern {:?} name {:?}",
        String::from_utf8_lossy(pattern),
        String::from_utf8_lossy(name)
    );
}

/// Redis' glob (util.c's stringmatchlen, case-sensitive), read plainly:
/// `*` tries every split, `?` one byte, `[...]` a set with `^`, ranges in
/// either order and `\` escapes, an unclosed set ending the pattern; `\x`
/// the byte x, a `\` at the very end itself.
fn oracle(p: &[u8], n: &[u8]) -> bool {
    match p.first() {
        None => n.is_empty(),
        Some(b'*') => (0..=n.len()).any(|i| oracle(&p[1..], &n[i..])),
        Some(_) if n.is_empty() => false,
        Some(b'?') => oracle(&p[1..], &n[1..]),
        Some(b'[') => {
            let mut i = 1;
            let negate = p.get(i) == Some(&b'^');
            if negate {
                i += 1;
            }
            let mut hit = false;
            loop {
                match p.get(i) {
                    None => break,
                    Some(b']') => {
                        i += 1;
                        break;
                    }
                    Some(b'\\') if i + 1 < p.len() => {
                        hit |= p[i + 1] == n[0];
                        i += 2;
                    }
                    Some(&lo) if p.get(i + 1) == Some(&b'-') && i + 2 < p.len() => {
                        let hi = p[i + 2];
                        hit |= (lo.min(hi)..=lo.max(hi)).contains(&n[0]);
                        i += 3;
                    }
                    Some(&c) => {
                        hit |= c == n[0];
                        i += 1;
                    }
                }
            }
            hit != negate && oracle(&p[i.min(p.len())..], &n[1..])
        }
        Some(b'\\') if p.len() >= 2 => p[1] == n[0] && oracle(&p[2..], &n[1..]),
        Some(&c) => c == n[0] && oracle(&p[1..], &n[1..]),
    }
}

/// An argument list: the bytes split on 0x00 (none when empty).
fn split(bytes: &[u8]) -> Vec<&[u8]> {
    if bytes.is_empty() {
        Vec::new()
    } else {
        bytes.split(|&b| b == 0).collect()
    }
}

/// A queue with messages in every state a replay can act on: ready,
/// delayed, grouped (one holding its group, one waiting), in flight and
/// dead.
fn sample_queue(now: u64) -> Queue {
    let mut queue = Queue::new();
    // A short event log, so that replays write events and trim them too.
    queue.set_config(
        now,
        QueueConfig {
            events: Some(8),
            ..QueueConfig::default()
        },
    );
    for (id, delay, group) in [
        ("r1", 0, None),
        ("r2", 0, None),
        ("d1", 60_000, None),
        ("g1", 0, Some(&b"g"[..])),
        ("g2", 0, Some(&b"g"[..])),
        ("f1", 0, None),
    ] {
        queue.add(
            now,
            &AddRequest {
                id: Some(id.as_bytes()),
                payload: b"p",
                due_at: now + delay,
                priority: 0,
                mode: AddMode::Upsert,
                max_attempts: Some(1),
                backoff: None,
                expire_at: None,
                group,
                retain_ms: None,
            },
        );
    }
    queue.pop(now, 2, now + 30_000);
    let _ = queue.nack(now, b"r1", NackAction::Dead, None, None, &Policy::default());
    queue.take_events();
    queue
}

pub fn replay(data: &[u8]) {
    let args = split(data);
    let Ok(parsed) = apply::parse(&args) else {
        return;
    };
    let mut queue = sample_queue(1_700_000_000_000);
    checked(
        apply::replay(&mut queue, parsed.verb, &parsed.replayed),
        |_| {},
    );
    if let Err(e) = queue.check() {
        panic!("a replay leaves a queue that fails its check: {e}");
    }
    let again = codec::copy(&queue).expect("a replayed queue saves and loads");
    assert_eq!(codec::sorted_digest(&again), codec::sorted_digest(&queue));
}

/// Runs `ok` on a success; checks the shape of an error reply otherwise.
fn checked<T>(parsed: Result<T>, ok: impl FnOnce(&T)) {
    match parsed {
        Ok(value) => ok(&value),
        Err(e) => {
            let text = e.to_string();
            let code = text.split(' ').next().unwrap_or_default();
            assert!(
                !code.is_empty() && code.bytes().all(|b| b.is_ascii_uppercase()),
                "error without an upper-case code: {text:?}"
            );
            // An error reply is one line: a CR or LF would break RESP.
            assert!(!text.contains(['\r', '\n']), "multi-line error: {text:?}");
        }
    }
}

fn name_bounds(name: &[u8]) {
    assert!(!name.is_empty() && name.len() <= MAX_ID_LEN);
}

fn backoff_properties(b: &Backoff) {
    let attempts = (0..=80).chain([1000, u32::MAX / 2, u32::MAX - 1, u32::MAX]);
    let mut previous = 0;
    for attempt in attempts {
        let delay = b.delay(attempt);
        assert!(delay <= MAX_TIME_MS, "{b:?} attempt {attempt}: {delay}");
        match b {
            Backoff::Exponential { base, max } => {
                assert!(*base >= 1 && base <= max);
                assert!((*base..=*max).contains(&delay), "{b:?} {attempt}");
                assert!(delay >= previous, "{b:?} shrinks at attempt {attempt}");
            }
            Backoff::Fixed(d) => assert_eq!(delay, *d),
            Backoff::Steps(steps) => {
                assert!((1..=MAX_STEPS).contains(&steps.len()));
                assert!(steps.contains(&delay));
            }
        }
        previous = delay;
    }
    // What DQ.CONFIG and CONFIG GET show must be accepted as input.
    let shown = b.to_string();
    assert_eq!(Backoff::parse(shown.as_bytes()).as_ref(), Ok(b), "{shown}");
}

/// Every key of any queue is in the queue name's slot and names it back;
/// a key that parses as a dq key is exactly the name dq makes for it.
fn key_naming(bytes: &[u8]) {
    for part in Part::ALL {
        let key = key_name(bytes, part);
        assert_eq!(slot(&key), slot(bytes));
        assert_eq!(parse_key_name(&key), Some((bytes.to_vec(), part)));
    }
    if let Some((queue, part)) = parse_key_name(bytes) {
        assert_eq!(key_name(&queue, part), bytes);
    }
}

/// Format byte, then the CRC32 of the body (little-endian).
const HEADER_LEN: usize = 5;

pub fn envelope(data: &[u8]) {
    round_trip(data);
    if data.len() >= HEADER_LEN {
        let mut fixed = data.to_vec();
        let crc = crc32fast::hash(&data[HEADER_LEN..]);
        fixed[1..HEADER_LEN].copy_from_slice(&crc.to_le_bytes());
        round_trip(&fixed);
    }
}

fn round_trip(bytes: &[u8]) {
    let message = match Message::decode(b"fuzz", bytes) {
        Ok(message) => message,
        Err(e) => {
            let text = e.to_string();
            assert!(
                text.starts_with("ERR message 'fuzz' is corrupt: "),
                "{text:?}"
            );
            assert!(!text.contains(['\r', '\n']), "multi-line error: {text:?}");
            return;
        }
    };
    let encoded = message.encode();
    let again = Message::decode(b"fuzz", &encoded).expect("a re-encoded message decodes");
    assert_eq!(again, message);
    // Encoding is a function of the message: the same bytes every time.
    assert_eq!(again.encode(), encoded);
    // Whatever a decoded message holds, its retry arithmetic must not
    // panic once imported.
    if let Some(backoff) = message.backoff.as_ref().map(Backoff::from) {
        for attempt in [0, 1, 2, 63, 64, 65, message.attempt, u32::MAX] {
            backoff.delay(attempt);
        }
        let _ = backoff.to_string();
    }
}

/// The frames of a `queue` input: 2-byte little-endian length, bytes.
pub fn frames(mut data: &[u8]) -> Vec<&[u8]> {
    let mut frames = Vec::new();
    while let [lo, hi, rest @ ..] = data {
        let len = usize::from(u16::from_le_bytes([*lo, *hi])).min(rest.len());
        frames.push(&rest[..len]);
        data = &rest[len..];
    }
    frames
}

pub fn queue(data: &[u8]) {
    let frames = frames(data);
    let Some((header, chunks)) = frames.split_first() else {
        return;
    };
    let Ok(queue) = codec::load(header, chunks.iter().copied()) else {
        return;
    };
    if let Err(e) = queue.check() {
        panic!("a loaded queue fails its check: {e}");
    }
    let again = codec::copy(&queue).expect("a saved queue loads");
    assert_eq!(codec::sorted_digest(&again), codec::sorted_digest(&queue));
}
