//! One message as the multi-key layout stored it: the envelope in the
//! queue's messages hash. Read only, to import it.
//!
//! Layout: one format byte, a CRC32 of the body, then the body encoded with
//! bincode (varint integers). The CRC turns a value overwritten by hand or by
//! a bug into a clean "corrupt" error instead of a wrong message; the format
//! byte lets a later version read what an earlier one wrote: format 1 (before
//! GROUP) is still read, and rewritten as format 2 on its next change.

use serde::{Deserialize, Serialize};

use crate::core::error::{printable, DqError, Result};

const FORMAT_V1: u8 = 1;
const FORMAT_V2: u8 = 2;
const HEADER_LEN: usize = 5;

// In this format a record the timer promoted keeps state `Delayed`: the
// delayed index tells that it is ready.
pub use super::frozen::{Backoff, Death, DeathReason, State};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Message {
    pub state: State,
    /// Higher pops first.
    pub priority: i32,
    /// Insertion order within the queue: the FIFO tie-break.
    pub seq: u64,
    /// Unix ms at which the message is (or was) due.
    pub due_at: u64,
    /// Unix ms of the ADD that wrote this version.
    pub added_at: u64,
    /// Deliveries so far; the first POP makes it 1.
    pub attempt: u32,
    /// Unix ms at which the current lease ends, while in flight.
    pub lease_deadline: Option<u64>,
    /// MAXATTEMPTS given on ADD; `None` follows the queue and module.
    pub max_attempts: Option<u32>,
    /// BACKOFF given on ADD; `None` follows the queue and module.
    pub backoff: Option<Backoff>,
    /// Why and when it died, while dead.
    pub death: Option<Death>,
    /// Unix ms by which it must be acknowledged (ADD's TTL), else it dies.
    pub expire_at: Option<u64>,
    /// GROUP given on ADD: at most one message of a group is out at a time.
    pub group: Option<Vec<u8>>,
    /// A newer version written by ADD while this one was in flight; it takes
    /// this one's place when the delivery ends, so the two never overlap.
    /// A `Version` has no replacement of its own: records cannot nest.
    pub replacement: Option<Box<Version>>,
    /// Kept last so a future reader can decode the small fields alone.
    #[serde(with = "bytes")]
    pub payload: Vec<u8>,
}

/// What ADD writes: the part of a message a newer version replaces.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Version {
    pub priority: i32,
    pub seq: u64,
    pub due_at: u64,
    pub added_at: u64,
    pub max_attempts: Option<u32>,
    pub backoff: Option<Backoff>,
    pub expire_at: Option<u64>,
    pub group: Option<Vec<u8>>,
    #[serde(with = "bytes")]
    pub payload: Vec<u8>,
}

impl Message {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(HEADER_LEN + 40 + self.payload.len());
        out.push(FORMAT_V2);
        out.extend_from_slice(&[0; 4]);
        // Writing into a Vec cannot fail, and every field type is encodable.
        if let Err(e) = bincode::serde::encode_into_std_write(self, &mut out, config()) {
            unreachable!("encoding a message into memory failed: {e}");
        }
        let crc = crc32fast::hash(&out[HEADER_LEN..]);
        out[1..HEADER_LEN].copy_from_slice(&crc.to_le_bytes());
        out
    }

    /// Decodes an envelope; `id` only names the message in the error.
    pub fn decode(id: &[u8], bytes: &[u8]) -> Result<Message> {
        let corrupt = |why: &str| DqError::Corrupt {
            id: printable(id),
            why: why.to_string(),
        };
        if bytes.len() < HEADER_LEN {
            return Err(corrupt("the record is too short"));
        }
        let crc = u32::from_le_bytes([bytes[1], bytes[2], bytes[3], bytes[4]]);
        let body = &bytes[HEADER_LEN..];
        if crc32fast::hash(body) != crc {
            return Err(corrupt("checksum mismatch"));
        }
        match bytes[0] {
            FORMAT_V2 => decode_body(body).map_err(|why| corrupt(&why)),
            FORMAT_V1 => decode_body::<v1::Message>(body)
                .map(Message::from)
                .map_err(|why| corrupt(&why)),
            _ => Err(corrupt("unknown record format")),
        }
    }
}

/// Borrowed decoding checks every length against the bytes present before
/// copying, so a forged length cannot make us allocate.
fn decode_body<'a, T: Deserialize<'a>>(body: &'a [u8]) -> std::result::Result<T, String> {
    match bincode::serde::borrow_decode_from_slice(body, config()) {
        Ok((value, used)) if used == body.len() => Ok(value),
        Ok(_) => Err("trailing bytes after the record".to_string()),
        Err(e) => Err(e.to_string()),
    }
}

/// Format 1: the record before GROUP existed. Read only.
mod v1 {
    use serde::Deserialize;

    use super::{Backoff, Death, State};

    #[derive(Deserialize)]
    pub struct Message {
        state: State,
        priority: i32,
        seq: u64,
        due_at: u64,
        added_at: u64,
        attempt: u32,
        lease_deadline: Option<u64>,
        max_attempts: Option<u32>,
        backoff: Option<Backoff>,
        death: Option<Death>,
        expire_at: Option<u64>,
        replacement: Option<Box<Version>>,
        #[serde(with = "super::bytes")]
        payload: Vec<u8>,
    }

    #[derive(Deserialize)]
    pub struct Version {
        priority: i32,
        seq: u64,
        due_at: u64,
        added_at: u64,
        max_attempts: Option<u32>,
        backoff: Option<Backoff>,
        expire_at: Option<u64>,
        #[serde(with = "super::bytes")]
        payload: Vec<u8>,
    }

    impl From<Version> for super::Version {
        fn from(v: Version) -> Self {
            super::Version {
                priority: v.priority,
                seq: v.seq,
                due_at: v.due_at,
                added_at: v.added_at,
                max_attempts: v.max_attempts,
                backoff: v.backoff,
                expire_at: v.expire_at,
                group: None,
                payload: v.payload,
            }
        }
    }

    impl From<Message> for super::Message {
        fn from(m: Message) -> Self {
            super::Message {
                state: m.state,
                priority: m.priority,
                seq: m.seq,
                due_at: m.due_at,
                added_at: m.added_at,
                attempt: m.attempt,
                lease_deadline: m.lease_deadline,
                max_attempts: m.max_attempts,
                backoff: m.backoff,
                death: m.death,
                expire_at: m.expire_at,
                group: None,
                replacement: m.replacement.map(|v| Box::new((*v).into())),
                payload: m.payload,
            }
        }
    }
}

fn config() -> bincode::config::Configuration {
    bincode::config::standard()
}

/// Serializes a byte vector as one length-prefixed blob rather than a
/// sequence of separately encoded integers.
mod bytes {
    use serde::{de, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(v)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        struct Visitor;
        impl<'de> de::Visitor<'de> for Visitor {
            type Value = Vec<u8>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("bytes")
            }
            fn visit_bytes<E: de::Error>(self, v: &[u8]) -> Result<Vec<u8>, E> {
                Ok(v.to_vec())
            }
            fn visit_borrowed_bytes<E: de::Error>(self, v: &'de [u8]) -> Result<Vec<u8>, E> {
                Ok(v.to_vec())
            }
        }
        d.deserialize_bytes(Visitor)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn sample() -> Message {
        Message {
            state: State::Inflight,
            priority: -7,
            seq: 42,
            due_at: 1_732_000_000_000,
            added_at: 1_731_999_000_000,
            attempt: 3,
            lease_deadline: Some(1_732_000_030_000),
            max_attempts: Some(5),
            backoff: Some(Backoff::Steps(vec![15_000, 180_000])),
            death: Some(Death {
                reason: DeathReason::Nack,
                at: 1_732_000_040_000,
            }),
            expire_at: Some(1_732_000_050_000),
            group: Some(b"customer-7".to_vec()),
            replacement: None,
            payload: b"{\"order\":42}\0\xff".to_vec(),
        }
    }

    #[test]
    fn round_trips() {
        let m = sample();
        assert_eq!(Message::decode(b"id", &m.encode()), Ok(m));
    }

    #[test]
    fn replacement_round_trips() {
        let mut m = sample();
        m.replacement = Some(Box::new(Version {
            priority: 1,
            seq: 9,
            due_at: 5,
            added_at: 4,
            max_attempts: None,
            backoff: Some(Backoff::Fixed(3)),
            expire_at: None,
            group: Some(b"g".to_vec()),
            payload: b"v2".to_vec(),
        }));
        assert_eq!(Message::decode(b"id", &m.encode()), Ok(m));
    }

    /// Bytes written by the format-1 encoder (the build before GROUP), for
    /// `sample()` with a replacement: still read, with no group.
    #[test]
    fn format_1_records_are_still_read() {
        const V1: &str = "0149df66b8020d2afd00a83e4393010000fdc0652f43930100000301fd301d3f\
                          43930100000105010202fb983afc20bf02000100fd40443f439301000001fd50\
                          6b3f4393010000010209050400010103014d0276320e7b226f72646572223a34\
                          327d00ff";
        let bytes: Vec<u8> = (0..V1.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&V1[i..i + 2], 16).unwrap())
            .collect();
        let mut expected = sample();
        expected.group = None;
        expected.replacement = Some(Box::new(Version {
            priority: 1,
            seq: 9,
            due_at: 5,
            added_at: 4,
            max_attempts: None,
            backoff: Some(Backoff::Fixed(3)),
            expire_at: Some(77),
            group: None,
            payload: b"v2".to_vec(),
        }));
        let decoded = Message::decode(b"m", &bytes).unwrap();
        assert_eq!(decoded, expected);
        // Written back, it is format 2.
        assert_eq!(decoded.encode()[0], FORMAT_V2);
        assert_eq!(Message::decode(b"m", &decoded.encode()), Ok(expected));
    }

    /// A record with a valid checksum whose payload length claims far more
    /// bytes than exist must be refused without trying to allocate them.
    #[test]
    fn forged_lengths_are_corrupt_not_allocations() {
        let mut body = sample().encode()[HEADER_LEN..].to_vec();
        // The payload is last: replace its length prefix and bytes with a
        // varint length of 2^62 (bincode: 0xFD marker + u64 little-endian).
        let payload_len = sample().payload.len();
        body.truncate(body.len() - payload_len - 1);
        body.push(0xFD);
        body.extend_from_slice(&(1u64 << 62).to_le_bytes());
        let mut forged = vec![FORMAT_V2];
        forged.extend_from_slice(&crc32fast::hash(&body).to_le_bytes());
        forged.extend_from_slice(&body);
        assert!(matches!(
            Message::decode(b"m", &forged),
            Err(DqError::Corrupt { .. })
        ));
    }

    #[test]
    fn large_payload_round_trips() {
        let mut m = sample();
        m.payload = (0..4 * 1024 * 1024).map(|i| (i % 251) as u8).collect();
        let bytes = m.encode();
        assert!(bytes.len() < m.payload.len() + 128);
        assert_eq!(Message::decode(b"id", &bytes), Ok(m));
    }

    #[test]
    fn envelope_overhead_is_small() {
        let mut m = sample();
        (m.max_attempts, m.backoff, m.death, m.expire_at, m.group) = (None, None, None, None, None);
        m.payload = vec![b'x'; 64];
        assert!(m.encode().len() <= 64 + 48, "{}", m.encode().len());
    }

    #[test]
    fn any_flipped_byte_is_reported_as_corrupt() {
        let bytes = sample().encode();
        for i in 0..bytes.len() {
            let mut bad = bytes.clone();
            bad[i] ^= 0x55;
            match Message::decode(b"m1", &bad) {
                Err(DqError::Corrupt { id, .. }) => assert_eq!(id, "m1"),
                other => panic!("byte {i}: {other:?}"),
            }
        }
    }

    #[test]
    fn garbage_and_truncation_are_corrupt_not_panics() {
        let bytes = sample().encode();
        for len in 0..bytes.len() {
            assert!(Message::decode(b"m", &bytes[..len]).is_err());
        }
        assert!(Message::decode(b"m", b"hello world").is_err());
        let mut long = bytes.clone();
        long.push(0);
        assert!(Message::decode(b"m", &long).is_err());
    }
}
