//! Sharded queues (docs/sharding.md): one logical queue `Q` spread over `N`
//! ordinary queues, its shards, named `Q~<i>of<N>~<k>`. The server knows
//! nothing of them; the client libraries name and route the shards. The
//! dashboard recognises a shard by its name — the exact name dq-client's
//! `Shards` gives shard `i` of `Q` — so that a shard's page can show the
//! schedules of every shard and pause or resume the whole queue, as the
//! libraries' `ShardedQueue.pause()` does, rather than one shard of it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use dq_client::{admin, Shards};

/// A name that reads as shard `index` of `count` of queue `base`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShardName {
    pub base: String,
    pub index: u32,
    pub count: u32,
}

/// A decimal number as the shard names write them: no sign, no padding.
fn decimal(text: &str) -> Option<u32> {
    let unpadded = text == "0" || !text.starts_with('0');
    let digits = !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit());
    (unpadded && digits).then(|| text.parse().ok()).flatten()
}

/// What the name says, before checking it is the name the libraries give
/// that shard (see [`Layouts::shard`]).
pub fn parse(name: &[u8]) -> Option<ShardName> {
    let name = std::str::from_utf8(name).ok()?;
    let (rest, k) = name.rsplit_once('~')?;
    let (base, position) = rest.rsplit_once('~')?;
    let (index, count) = position.split_once("of")?;
    decimal(k)?;
    let (index, count) = (decimal(index)?, decimal(count)?);
    let plausible = count.is_power_of_two()
        && count <= dq_client::MAX_SHARDS
        && index < count
        && !base.contains(['{', '}']);
    plausible.then(|| ShardName {
        base: base.to_string(),
        index,
        count,
    })
}

/// The DQ.QUEUES MATCH pattern of every shard name of `base` with `count`
/// shards (and perhaps a few other names, which the caller drops).
pub fn pattern(base: &str, count: u32) -> Vec<u8> {
    let mut p = admin::glob_escape(base.as_bytes());
    p.extend_from_slice(format!("~*of{count}~*").as_bytes());
    p
}

/// The shard names of the queues met so far. Computing them takes about
/// `count²` CRC16s (1,024 shards: a million, some 0.1 s), so each layout
/// is computed once, off the async threads, and kept.
#[derive(Default)]
pub struct Layouts {
    known: Mutex<HashMap<(String, u32), Arc<Shards>>>,
}

/// Layouts kept at most; past it the cache starts again (a dashboard
/// looks at a handful of sharded queues, not thousands).
const KEPT: usize = 256;

impl Layouts {
    /// The layout of the sharded queue `name` is a shard of, when it is
    /// one: its name is exactly the one the libraries give that shard.
    pub async fn shard(&self, name: &[u8]) -> Option<(ShardName, Arc<Shards>)> {
        let shard = parse(name)?;
        let key = (shard.base.clone(), shard.count);
        let known = self.known.lock().ok().and_then(|k| k.get(&key).cloned());
        let shards = match known {
            Some(s) => s,
            None => {
                let (base, count) = key.clone();
                let made = tokio::task::spawn_blocking(move || Shards::new(&base, count))
                    .await
                    .ok()?
                    .ok()?;
                let made = Arc::new(made);
                if let Ok(mut k) = self.known.lock() {
                    if k.len() >= KEPT {
                        k.clear();
                    }
                    k.insert(key, made.clone());
                }
                made
            }
        };
        let exact = shards
            .names()
            .get(shard.index as usize)
            .is_some_and(|n| n.as_bytes() == name);
        exact.then_some((shard, shards))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shard_names_parse_and_others_do_not() {
        assert_eq!(
            parse(b"orders~3of8~43"),
            Some(ShardName {
                base: "orders".into(),
                index: 3,
                count: 8
            })
        );
        assert_eq!(parse(b"a~b~0of1~0").map(|s| s.base), Some("a~b".into()));
        assert_eq!(parse(b"~0of2~1").map(|s| s.base), Some(String::new()));
        for not in [
            &b"orders"[..],
            b"orders~3of8",
            b"orders~3of6~1",
            b"orders~8of8~1",
            b"orders~03of8~1",
            b"orders~3of8~01",
            b"orders~3of2048~1",
            b"orders~-1of8~1",
            b"orders~3of8~x",
            b"{tag}~0of1~0",
            b"\xff~0of1~0",
        ] {
            assert_eq!(parse(not), None, "{}", String::from_utf8_lossy(not));
        }
    }

    #[tokio::test]
    async fn only_the_libraries_exact_names_are_shards() {
        let layouts = Layouts::default();
        let shards = Shards::new("orders", 8).unwrap();
        for (i, name) in shards.names().iter().enumerate() {
            let (shard, layout) = layouts.shard(name.as_bytes()).await.unwrap();
            assert_eq!(
                (shard.base.as_str(), shard.index, shard.count),
                ("orders", i as u32, 8)
            );
            assert_eq!(layout.names(), shards.names());
        }
        // Right shape, wrong k: a queue of its own, not a shard.
        let (_, k) = shards.names()[3].rsplit_once('~').unwrap();
        let other = format!("orders~3of8~{}", k.parse::<u32>().unwrap() + 1);
        assert!(layouts.shard(other.as_bytes()).await.is_none());
        assert!(layouts.shard(b"orders").await.is_none());
    }

    #[test]
    fn the_pattern_finds_the_shards_and_escapes_the_base() {
        let p = pattern("a*b", 8);
        assert_eq!(p, b"a\\*b~*of8~*");
        for name in Shards::new("a*b", 8).unwrap().names() {
            assert!(dq_glob::matches(&p, name.as_bytes()), "{name}");
        }
        assert!(!dq_glob::matches(&p, b"axb~0of8~1"));
        assert!(!dq_glob::matches(&p, b"a*b~0of4~1"));
    }
}
