//! Ids packed in one argument: how DQ.POP propagates the ids it leased.
//! One string for a batch instead of one per id: the module API makes an
//! object of each argument it propagates, and the replication stream and
//! the AOF frame each one. Each id follows its length as an unsigned
//! LEB128 varint (ids are at most `MAX_ID_LEN` bytes: two bytes at most).

use crate::core::error::{DqError, Result};
use crate::core::limits::MAX_ID_LEN;

/// Appends `ids`, packed, to `out`.
pub fn pack_ids<'a>(ids: impl ExactSizeIterator<Item = &'a [u8]>, out: &mut Vec<u8>) {
    // Room for ids of typical length at once: one pass over the ids (each
    // read from its record), and growing at most once or twice for long
    // ones, where measuring them first read each twice.
    out.reserve(ids.len() * TYPICAL_PACKED);
    for id in ids {
        let mut len = id.len();
        loop {
            let low = (len & 0x7f) as u8;
            len >>= 7;
            if len == 0 {
                out.push(low);
                break;
            }
            out.push(low | 0x80);
        }
        out.extend_from_slice(id);
    }
}

/// Bytes reserved per id: a length and an id up to a UUID's 36 bytes
/// (longer ones grow the vector, by doubling).
const TYPICAL_PACKED: usize = 40;

/// The ids `packed` holds, in order; an error for anything `pack_ids`
/// would not have written.
pub fn unpack_ids(mut packed: &[u8]) -> Result<Vec<&[u8]>> {
    let bad = |why: &str| DqError::BadApply(format!("packed ids: {why}"));
    let mut ids = Vec::new();
    while !packed.is_empty() {
        let mut len = 0usize;
        let mut shift = 0;
        loop {
            let [byte, rest @ ..] = packed else {
                return Err(bad("a length cut short"));
            };
            packed = rest;
            len |= usize::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                break;
            }
            shift += 7;
            if shift > 14 {
                return Err(bad("a length too long"));
            }
        }
        if len == 0 || len > MAX_ID_LEN {
            return Err(bad("an id of a length no id has"));
        }
        if len > packed.len() {
            return Err(bad("an id cut short"));
        }
        let (id, rest) = packed.split_at(len);
        ids.push(id);
        packed = rest;
    }
    Ok(ids)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_of_any_length_read_back_in_order() {
        let long = vec![b'x'; MAX_ID_LEN];
        let ids: Vec<&[u8]> = vec![b"a", b"order-42", &long[..127], &long[..128], &long];
        let mut packed = Vec::new();
        pack_ids(ids.iter().copied(), &mut packed);
        assert_eq!(
            packed.len(),
            (1 + 1) + (1 + 8) + (1 + 127) + (2 + 128) + (2 + MAX_ID_LEN)
        );
        assert_eq!(unpack_ids(&packed).unwrap(), ids);
        assert_eq!(unpack_ids(b"").unwrap(), Vec::<&[u8]>::new());
    }

    #[test]
    fn what_pack_ids_never_writes_is_refused() {
        for bad in [
            &b"\x05abc"[..],     // cut short
            b"\x00",             // empty id
            b"\x81",             // length cut short
            b"\x81\x80\x80\x01", // length too long
            b"\x81\x08",         // 1025 bytes: beyond MAX_ID_LEN
        ] {
            assert!(
                matches!(unpack_ids(bad), Err(DqError::BadApply(_))),
                "{bad:?}"
            );
        }
    }
}
