//! Sharded queues: the names of a queue's shards and which shard a message
//! goes to, exactly as docs/sharding.md fixes them for all three client
//! libraries (tests/vectors/sharding.json checks the arithmetic).

use crate::error::Error;

/// Slots of a Redis Cluster.
const SLOTS: u16 = 16384;
/// The most shards a queue may have: each keeps a segment of at least 16 slots.
pub const MAX_SHARDS: u32 = 1024;

/// CRC-16/XMODEM, the hash of Redis Cluster key slots.
fn crc16(data: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &byte in data {
        crc ^= u16::from(byte) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc
}

/// The cluster slot of a key that holds no hash tag (shard names never do).
pub fn key_slot(name: &[u8]) -> u16 {
    crc16(name) % SLOTS
}

/// The cluster slot of any key, as Redis computes it: of the key's hash
/// tag — the bytes between its first `{` and the first `}` after it — when
/// that is not empty, else of the whole key. Keys of one slot can go in one
/// command (DQ.MPOP).
pub fn hash_slot(key: &[u8]) -> u16 {
    let tag = key.iter().position(|&b| b == b'{').and_then(|open| {
        let rest = &key[open + 1..];
        let close = rest.iter().position(|&b| b == b'}')?;
        (close > 0).then(|| &rest[..close])
    });
    key_slot(tag.unwrap_or(key))
}

/// The shard a message with this basis (its group, else its shard key,
/// else its id) goes to among `shards`.
pub fn shard_of(basis: &[u8], shards: u32) -> u32 {
    crc32fast::hash(basis) % shards
}

/// A sharded queue's layout: its name, shard count and shard names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shards {
    name: String,
    names: Vec<String>,
}

impl Shards {
    /// The `shards` shard names of queue `name`: `name~<i>of<N>~<k>`, with
    /// `k` the first number that puts shard `i` in its segment of the slots.
    pub fn new(name: &str, shards: u32) -> Result<Shards, Error> {
        if !shards.is_power_of_two() || shards > MAX_SHARDS {
            return Err(Error::Config(format!(
                "a sharded queue has a power of two of shards from 1 to {MAX_SHARDS}, not {shards}"
            )));
        }
        if name.contains(['{', '}']) {
            return Err(Error::Config(format!(
                "sharded queue name '{name}' must not contain '{{' or '}}': a hash tag would put every shard in one slot"
            )));
        }
        let width = u32::from(SLOTS) / shards;
        let names = (0..shards)
            .map(|i| {
                let segment = i * width..(i + 1) * width;
                (0u64..)
                    .map(|k| format!("{name}~{i}of{shards}~{k}"))
                    .find(|n| segment.contains(&u32::from(key_slot(n.as_bytes()))))
                    .unwrap_or_default() // (0u64..) never ends: about `shards` tries find one
            })
            .collect();
        Ok(Shards {
            name: name.to_owned(),
            names,
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The shard queues' names, shard 0 first.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// The shard queue a message with this basis goes to.
    pub fn route(&self, basis: &[u8]) -> &str {
        let n = self.names.len() as u32; // at most MAX_SHARDS
        &self.names[shard_of(basis, n) as usize]
    }
}

/// A fresh message id for a sharded queue: 32 lowercase hex digits of
/// random bytes, unique across shards (the server's own ids are unique
/// within one queue only).
pub fn random_id() -> Result<String, Error> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes)
        .map_err(|e| Error::Config(format!("no randomness for a message id: {e}")))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    fn vectors() -> Value {
        serde_json::from_str(include_str!("../../tests/vectors/sharding.json"))
            .expect("tests/vectors/sharding.json is JSON")
    }

    fn text<'a>(v: &'a Value, field: &str) -> &'a str {
        v[field]
            .as_str()
            .unwrap_or_else(|| panic!("{field} in {v}"))
    }

    fn num(v: &Value, field: &str) -> u64 {
        v[field]
            .as_u64()
            .unwrap_or_else(|| panic!("{field} in {v}"))
    }

    #[test]
    fn crc32_and_shards_match_the_shared_vectors() {
        let doc = vectors();
        let cases = doc["crc32"].as_array().expect("crc32 cases");
        assert!(!cases.is_empty());
        for case in cases {
            let basis = text(case, "basis").as_bytes();
            assert_eq!(u64::from(crc32fast::hash(basis)), num(case, "crc32"));
            let shards = case["shard"].as_object().expect("shard map");
            for (n, shard) in shards {
                let n: u32 = n.parse().expect("a shard count");
                assert_eq!(
                    Some(u64::from(shard_of(basis, n))),
                    shard.as_u64(),
                    "{case}"
                );
            }
        }
    }

    #[test]
    fn shard_names_and_slots_match_the_shared_vectors() {
        let doc = vectors();
        let cases = doc["names"].as_array().expect("name cases");
        assert!(!cases.is_empty());
        for case in cases {
            let shards = Shards::new(text(case, "queue"), num(case, "shards") as u32)
                .expect("a valid layout");
            let name = &shards.names()[num(case, "shard") as usize];
            assert_eq!(name, text(case, "name"));
            assert_eq!(u64::from(key_slot(name.as_bytes())), num(case, "slot"));
        }
    }

    #[test]
    fn routes_match_the_shared_vectors() {
        let doc = vectors();
        let cases = doc["routes"].as_array().expect("route cases");
        assert!(!cases.is_empty());
        for case in cases {
            let basis = ["group", "shard_key", "id"]
                .iter()
                .find_map(|f| case[*f].as_str())
                .expect("a basis");
            let n = num(case, "shards") as u32;
            assert_eq!(
                u64::from(shard_of(basis.as_bytes(), n)),
                num(case, "shard"),
                "{case}"
            );
        }
    }

    #[test]
    fn every_shard_keeps_to_its_own_segment() {
        let shards = Shards::new("orders", 8).unwrap();
        for (i, name) in shards.names().iter().enumerate() {
            assert_eq!(usize::from(key_slot(name.as_bytes()) / 2048), i, "{name}");
        }
    }

    #[test]
    fn hash_slots_follow_hash_tags() {
        // CRC-16/XMODEM's check value: "123456789" is 0x31C3.
        assert_eq!(key_slot(b"123456789"), 0x31C3);
        assert_eq!(hash_slot(b"123456789"), 0x31C3);
        assert_eq!(hash_slot(b"{123456789}urgent"), 0x31C3);
        assert_eq!(hash_slot(b"bulk{123456789}"), 0x31C3);
        assert_eq!(hash_slot(b"{123456789}{x}"), 0x31C3);
        // An empty tag, or none closed, hashes the whole key.
        assert_eq!(hash_slot(b"{}123456789"), key_slot(b"{}123456789"));
        assert_eq!(hash_slot(b"{123456789"), key_slot(b"{123456789"));
        assert_eq!(hash_slot(b"a{{b}}"), key_slot(b"{b"));
    }

    #[test]
    fn bad_layouts_are_refused() {
        for n in [0, 3, 12, 2048] {
            let e = Shards::new("q", n).unwrap_err().to_string();
            assert!(e.contains("power of two"), "{e}");
        }
        let e = Shards::new("a{b}", 2).unwrap_err().to_string();
        assert!(e.contains("must not contain"), "{e}");
    }

    #[test]
    fn random_ids_are_32_hex_digits_and_differ() {
        let a = random_id().unwrap();
        let b = random_id().unwrap();
        assert_eq!(a.len(), 32);
        assert!(a
            .bytes()
            .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()));
        assert_ne!(a, b);
    }
}
