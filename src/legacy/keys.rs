//! Where a queue lives: the names of its Redis keys.
//!
//! Every key of queue `Q` is `dq:{T}:Q:<part>`, where `T` is a short
//! alphanumeric tag chosen so that `T` hashes to the same Redis Cluster slot
//! as the name `Q` itself. A client routes `DQ.* Q ...` by the slot of `Q`
//! (honouring any `{...}` in it), so the module's keys are always local to
//! the node that receives the command, whatever characters `Q` contains:
//! wrapping `Q` itself in braces would break for names such as `}{` or `a{b}c`.
//!
//! The tag table is part of the on-disk format: it is computed the same way
//! on every node and must never change.

use std::sync::OnceLock;

pub const PREFIX: &[u8] = b"dq:{";
pub const SLOTS: usize = 16384;

/// The keys that make up one queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Part {
    /// HASH: message id -> encoded message envelope.
    Messages,
    /// ZSET: due time (ms) -> id, for messages waiting for their time.
    Delayed,
    /// ZSET: -priority -> ordering member (due, seq, id), for messages ready to pop.
    Ready,
    /// ZSET: lease deadline (ms) -> id, for messages handed to a consumer.
    Inflight,
    /// ZSET: time of death (ms) -> id, for messages out of attempts.
    Dead,
    /// ZSET: TTL deadline (ms) -> id, for live messages added with TTL.
    Expiry,
    /// HASH: lifetime counters of the queue.
    Meta,
    /// HASH: the queue's DQ.CONFIG settings.
    Config,
    /// HASH: group -> id of the one message of that group that is out
    /// (ready, in flight, or waiting for its retry).
    Groups,
    /// ZSET, all scores 0: due messages held back by their group, ordered
    /// by group, then due time, then insertion (see `queue::waiting_member`).
    Waiting,
}

impl Part {
    pub const ALL: [Part; 10] = [
        Part::Messages,
        Part::Delayed,
        Part::Ready,
        Part::Inflight,
        Part::Dead,
        Part::Expiry,
        Part::Meta,
        Part::Config,
        Part::Groups,
        Part::Waiting,
    ];

    /// Position in [`Part::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }

    pub fn suffix(self) -> &'static str {
        match self {
            Part::Messages => "msgs",
            Part::Delayed => "delayed",
            Part::Ready => "ready",
            Part::Inflight => "inflight",
            Part::Dead => "dead",
            Part::Expiry => "expiry",
            Part::Meta => "meta",
            Part::Config => "config",
            Part::Groups => "groups",
            Part::Waiting => "waiting",
        }
    }

    fn from_suffix(s: &[u8]) -> Option<Part> {
        Part::ALL.into_iter().find(|p| p.suffix().as_bytes() == s)
    }
}

/// CRC16/XMODEM, the checksum Redis Cluster uses for key slots.
pub fn crc16(bytes: &[u8]) -> u16 {
    const TABLE: [u16; 256] = {
        let mut table = [0u16; 256];
        let mut i = 0;
        while i < 256 {
            let mut crc = (i as u16) << 8;
            let mut bit = 0;
            while bit < 8 {
                crc = if crc & 0x8000 != 0 {
                    (crc << 1) ^ 0x1021
                } else {
                    crc << 1
                };
                bit += 1;
            }
            table[i] = crc;
            i += 1;
        }
        table
    };
    bytes.iter().fold(0u16, |crc, &b| {
        (crc << 8) ^ TABLE[(((crc >> 8) as u8) ^ b) as usize]
    })
}

/// The cluster slot of a key name, with Redis' hash-tag rule: the first `{`
/// and the first `}` after it enclose the hashed part when that is non-empty.
pub fn slot(key: &[u8]) -> u16 {
    let hashed = key
        .iter()
        .position(|&b| b == b'{')
        .and_then(|open| {
            let rest = &key[open + 1..];
            rest.iter()
                .position(|&b| b == b'}')
                .filter(|&close| close > 0)
                .map(|close| &rest[..close])
        })
        .unwrap_or(key);
    crc16(hashed) % SLOTS as u16
}

const TAG_ALPHABET: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// For every slot, the first alphanumeric string (shortest first, then in
/// alphabet order) that hashes to it.
fn tag_table() -> &'static [Vec<u8>] {
    static TABLE: OnceLock<Vec<Vec<u8>>> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut table: Vec<Vec<u8>> = vec![Vec::new(); SLOTS];
        let mut missing = SLOTS;
        let mut len = 1;
        while missing > 0 {
            let mut digits = vec![0usize; len];
            'strings: loop {
                let candidate: Vec<u8> = digits.iter().map(|&d| TAG_ALPHABET[d]).collect();
                let entry = &mut table[slot(&candidate) as usize];
                if entry.is_empty() {
                    *entry = candidate;
                    missing -= 1;
                }
                // Advance the odometer; stop after the last string of this length.
                for d in digits.iter_mut().rev() {
                    *d += 1;
                    if *d < TAG_ALPHABET.len() {
                        continue 'strings;
                    }
                    *d = 0;
                }
                break;
            }
            len += 1;
        }
        table
    })
}

/// The tag that puts a queue's keys in the queue name's slot.
pub fn tag(queue: &[u8]) -> &'static [u8] {
    &tag_table()[slot(queue) as usize]
}

/// The name of one key of a queue.
pub fn key_name(queue: &[u8], part: Part) -> Vec<u8> {
    key_name_from(&key_prefix(queue), part)
}

/// `dq:{T}:Q:`, shared by every key of the queue: the slot hash is computed
/// once for all of them.
pub fn key_prefix(queue: &[u8]) -> Vec<u8> {
    let tag = tag(queue);
    let mut prefix = Vec::with_capacity(PREFIX.len() + tag.len() + queue.len() + 3);
    prefix.extend_from_slice(PREFIX);
    prefix.extend_from_slice(tag);
    prefix.extend_from_slice(b"}:");
    prefix.extend_from_slice(queue);
    prefix.push(b':');
    prefix
}

/// The name of one key of the queue whose [`key_prefix`] is `prefix`.
pub fn key_name_from(prefix: &[u8], part: Part) -> Vec<u8> {
    [prefix, part.suffix().as_bytes()].concat()
}

/// The queue and part a key belongs to, when it is one of dq's keys.
/// Used to find queues again after a restart or a failover.
pub fn parse_key_name(key: &[u8]) -> Option<(Vec<u8>, Part)> {
    let rest = key.strip_prefix(PREFIX)?;
    let close = rest.iter().position(|&b| b == b'}')?;
    let (tag_part, rest) = rest.split_at(close);
    let rest = rest.strip_prefix(b"}:")?;
    let colon = rest.iter().rposition(|&b| b == b':')?;
    let (queue, suffix) = (&rest[..colon], &rest[colon + 1..]);
    let part = Part::from_suffix(suffix)?;
    (tag(queue) == tag_part).then(|| (queue.to_vec(), part))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc16_matches_the_redis_cluster_reference_vector() {
        // From the Redis Cluster specification.
        assert_eq!(crc16(b"123456789"), 0x31C3);
    }

    #[test]
    fn slot_follows_the_hash_tag_rule() {
        assert_eq!(slot(b"{user1000}.following"), slot(b"user1000"));
        // An empty tag: the whole key is hashed.
        assert_eq!(slot(b"foo{}{bar}"), crc16(b"foo{}{bar}") % 16384);
        assert_ne!(slot(b"foo{}{bar}"), slot(b"bar"));
        assert_eq!(slot(b"foo{{bar}}zap"), slot(b"{bar"));
        assert_eq!(slot(b"foo{bar}{zap}"), slot(b"bar"));
        assert_eq!(slot(b"x{"), crc16(b"x{") % 16384);
    }

    #[test]
    fn every_slot_has_a_tag_that_hashes_to_it() {
        for (s, tag) in tag_table().iter().enumerate() {
            assert!(!tag.is_empty() && tag.len() <= 4, "slot {s}");
            assert!(tag.iter().all(u8::is_ascii_alphanumeric));
            assert_eq!(slot(tag) as usize, s);
        }
    }

    #[test]
    fn every_key_of_any_queue_is_in_the_queue_slot() {
        let names: [&[u8]; 10] = [
            b"orders",
            b"{tag}name",
            b"a{b}c",
            b"{}x",
            b"x{",
            b"}{",
            b"",
            "заказы-⏰".as_bytes(),
            b"with:colons:inside",
            &[b'q'; 3000],
        ];
        for name in names {
            for part in Part::ALL {
                let key = key_name(name, part);
                assert_eq!(
                    slot(&key),
                    slot(name),
                    "{:?}",
                    String::from_utf8_lossy(name)
                );
                assert_eq!(parse_key_name(&key), Some((name.to_vec(), part)));
            }
        }
    }

    #[test]
    fn part_index_is_the_position_in_all() {
        for (i, part) in Part::ALL.into_iter().enumerate() {
            assert_eq!(part.index(), i);
        }
    }

    #[test]
    fn key_names_are_readable() {
        let key = key_name(b"orders", Part::Delayed);
        let tag = String::from_utf8(tag(b"orders").to_vec()).unwrap();
        assert_eq!(
            String::from_utf8(key).unwrap(),
            format!("dq:{{{tag}}}:orders:delayed")
        );
    }

    #[test]
    fn foreign_keys_are_not_mistaken_for_queues() {
        assert_eq!(parse_key_name(b"orders"), None);
        assert_eq!(parse_key_name(b"dq:{zz}:orders:delayed"), None); // wrong tag
        assert_eq!(parse_key_name(b"dq:{x}:orders:other"), None);
        let mut key = key_name(b"orders", Part::Meta);
        key.push(b'x');
        assert_eq!(parse_key_name(&key), None);
    }
}
