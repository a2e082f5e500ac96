//! The few storage operations the queue state machine needs.
//!
//! `queue.rs` is written against this trait only, so the whole lifecycle runs
//! in unit tests on [`MemoryStore`]; `redis_store.rs` implements it over the
//! queue's Redis keys and replicates every write as its effect.

use crate::error::{DqError, Result};
use crate::message::Message;
use crate::policy::QueueConfig;

/// The sorted indexes of a queue; a message is in exactly one of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Index {
    /// Score: due time. Member: id.
    Delayed,
    /// Score: -priority. Member: the ready ordering key (see `queue::ready_member`).
    Ready,
    /// Score: lease deadline. Member: id.
    Inflight,
    /// Score: time of death. Member: id.
    Dead,
    /// Not a state: score TTL deadline, member id, for live messages with
    /// a TTL, beside their state's index.
    Expiry,
    /// Score 0. Member: the group ordering key (see `queue::waiting_member`).
    Waiting,
}

impl Index {
    pub const ALL: [Index; 6] = [
        Index::Delayed,
        Index::Ready,
        Index::Inflight,
        Index::Dead,
        Index::Expiry,
        Index::Waiting,
    ];
}

pub use crate::queue::{Counter, Event};

pub trait Store {
    fn message(&mut self, id: &[u8]) -> Result<Option<Message>>;
    /// Whether a record exists for `id`, without reading it.
    fn message_exists(&mut self, id: &[u8]) -> Result<bool>;
    fn put_message(&mut self, id: &[u8], message: &Message) -> Result<()>;
    fn delete_message(&mut self, id: &[u8]) -> Result<()>;

    /// Adds `member` or moves it to `score`.
    fn index_add(&mut self, index: Index, score: f64, member: &[u8]) -> Result<()>;
    fn index_remove(&mut self, index: Index, member: &[u8]) -> Result<()>;
    fn index_has(&mut self, index: Index, member: &[u8]) -> Result<bool>;
    /// Up to `limit` members with score <= `max_score`, lowest score first and
    /// equal scores in byte order of the member (the ZSET order).
    fn index_range(
        &mut self,
        index: Index,
        max_score: f64,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, f64)>>;
    fn index_len(&mut self, index: Index) -> Result<u64>;
    /// The first member of each distinct score, lowest score first, at most
    /// `limit` of them (the head of every priority in the ready index).
    fn index_score_heads(&mut self, index: Index, limit: usize) -> Result<Vec<(Vec<u8>, f64)>>;
    /// The first member, in byte order, that is >= `min`, of an index whose
    /// scores are all equal (the waiting index).
    fn index_first_from(&mut self, index: Index, min: &[u8]) -> Result<Option<Vec<u8>>>;

    /// The message that holds `group`, if any.
    fn group_holder(&mut self, group: &[u8]) -> Result<Option<Vec<u8>>>;
    /// Makes `holder` the holder of `group`, or frees the group (`None`).
    fn set_group_holder(&mut self, group: &[u8], holder: Option<&[u8]>) -> Result<()>;
    /// Frees every group.
    fn clear_groups(&mut self) -> Result<()>;
    /// Whether any group is held.
    fn has_groups(&mut self) -> Result<bool>;
    /// Deletes the whole index.
    fn clear_index(&mut self, index: Index) -> Result<()>;
    fn message_count(&mut self) -> Result<u64>;
    /// Deletes every message record.
    fn clear_messages(&mut self) -> Result<()>;

    fn queue_config(&mut self) -> Result<QueueConfig>;
    fn set_queue_config(&mut self, config: &QueueConfig) -> Result<()>;

    fn counter(&mut self, counter: Counter) -> Result<u64>;
    /// Adds `n` and returns the new value.
    fn add_to_counter(&mut self, counter: Counter, n: u64) -> Result<u64>;

    /// A record that cannot be decoded was taken out of its index so the
    /// queue keeps moving; the record stays for inspection (DQ.GET names the
    /// problem, DQ.CANCEL removes it). The store reports it.
    fn set_aside(&mut self, id: &[u8], problem: &DqError);

    /// Something happened to the queue; announced once per kind per command.
    fn event(&mut self, event: Event);
}

#[cfg(test)]
pub use memory::MemoryStore;

#[cfg(test)]
mod memory {
    use std::collections::{BTreeSet, HashMap};

    use super::*;

    /// ZSET-like: ordered by (score, member), plus member -> score.
    #[derive(Default, Clone, Debug)]
    pub struct SortedSet {
        order: BTreeSet<(OrdF64, Vec<u8>)>,
        scores: HashMap<Vec<u8>, f64>,
    }

    #[derive(Clone, Copy, Debug, PartialEq, PartialOrd)]
    struct OrdF64(f64);
    impl Eq for OrdF64 {}
    #[allow(clippy::derive_ord_xor_partial_ord)]
    impl Ord for OrdF64 {
        fn cmp(&self, other: &Self) -> std::cmp::Ordering {
            self.0.total_cmp(&other.0)
        }
    }

    impl SortedSet {
        fn add(&mut self, score: f64, member: &[u8]) {
            self.remove(member);
            self.order.insert((OrdF64(score), member.to_vec()));
            self.scores.insert(member.to_vec(), score);
        }
        fn remove(&mut self, member: &[u8]) {
            if let Some(old) = self.scores.remove(member) {
                self.order.remove(&(OrdF64(old), member.to_vec()));
            }
        }
        pub fn members(&self) -> impl Iterator<Item = (&[u8], f64)> {
            self.order.iter().map(|(s, m)| (m.as_slice(), s.0))
        }
    }

    /// The in-memory store behind the state machine's unit tests.
    #[derive(Default, Clone, Debug)]
    pub struct MemoryStore {
        pub messages: HashMap<Vec<u8>, Vec<u8>>,
        pub indexes: HashMap<Index, SortedSet>,
        pub counters: HashMap<&'static str, u64>,
        pub set_aside: Vec<Vec<u8>>,
        pub config: QueueConfig,
        pub events: Vec<Event>,
        pub groups: HashMap<Vec<u8>, Vec<u8>>,
    }

    impl MemoryStore {
        pub fn index(&self, index: Index) -> SortedSet {
            self.indexes.get(&index).cloned().unwrap_or_default()
        }
    }

    impl Store for MemoryStore {
        fn message(&mut self, id: &[u8]) -> Result<Option<Message>> {
            self.messages
                .get(id)
                .map(|bytes| Message::decode(id, bytes))
                .transpose()
        }
        fn message_exists(&mut self, id: &[u8]) -> Result<bool> {
            Ok(self.messages.contains_key(id))
        }
        fn put_message(&mut self, id: &[u8], message: &Message) -> Result<()> {
            self.messages.insert(id.to_vec(), message.encode());
            Ok(())
        }
        fn delete_message(&mut self, id: &[u8]) -> Result<()> {
            self.messages.remove(id);
            Ok(())
        }
        fn index_add(&mut self, index: Index, score: f64, member: &[u8]) -> Result<()> {
            self.indexes.entry(index).or_default().add(score, member);
            Ok(())
        }
        fn index_remove(&mut self, index: Index, member: &[u8]) -> Result<()> {
            self.indexes.entry(index).or_default().remove(member);
            Ok(())
        }
        fn index_has(&mut self, index: Index, member: &[u8]) -> Result<bool> {
            Ok(self
                .indexes
                .get(&index)
                .is_some_and(|set| set.scores.contains_key(member)))
        }
        fn index_range(
            &mut self,
            index: Index,
            max_score: f64,
            limit: usize,
        ) -> Result<Vec<(Vec<u8>, f64)>> {
            Ok(self
                .index(index)
                .members()
                .take_while(|(_, s)| *s <= max_score)
                .take(limit)
                .map(|(m, s)| (m.to_vec(), s))
                .collect())
        }
        fn index_len(&mut self, index: Index) -> Result<u64> {
            Ok(self.index(index).scores.len() as u64)
        }
        fn index_score_heads(&mut self, index: Index, limit: usize) -> Result<Vec<(Vec<u8>, f64)>> {
            let mut heads: Vec<(Vec<u8>, f64)> = Vec::new();
            for (member, score) in self.index(index).members() {
                if heads.last().is_none_or(|(_, last)| *last != score) {
                    heads.push((member.to_vec(), score));
                }
            }
            heads.truncate(limit);
            Ok(heads)
        }
        fn index_first_from(&mut self, index: Index, min: &[u8]) -> Result<Option<Vec<u8>>> {
            Ok(self
                .index(index)
                .members()
                .map(|(m, _)| m)
                .find(|m| *m >= min)
                .map(<[u8]>::to_vec))
        }
        fn group_holder(&mut self, group: &[u8]) -> Result<Option<Vec<u8>>> {
            Ok(self.groups.get(group).cloned())
        }
        fn set_group_holder(&mut self, group: &[u8], holder: Option<&[u8]>) -> Result<()> {
            match holder {
                Some(id) => self.groups.insert(group.to_vec(), id.to_vec()),
                None => self.groups.remove(group),
            };
            Ok(())
        }
        fn clear_groups(&mut self) -> Result<()> {
            self.groups.clear();
            Ok(())
        }
        fn has_groups(&mut self) -> Result<bool> {
            Ok(!self.groups.is_empty())
        }
        fn clear_index(&mut self, index: Index) -> Result<()> {
            self.indexes.remove(&index);
            Ok(())
        }
        fn message_count(&mut self) -> Result<u64> {
            Ok(self.messages.len() as u64)
        }
        fn clear_messages(&mut self) -> Result<()> {
            self.messages.clear();
            Ok(())
        }
        fn queue_config(&mut self) -> Result<QueueConfig> {
            Ok(self.config.clone())
        }
        fn set_queue_config(&mut self, config: &QueueConfig) -> Result<()> {
            self.config = config.clone();
            Ok(())
        }
        fn counter(&mut self, counter: Counter) -> Result<u64> {
            Ok(self.counters.get(counter.name()).copied().unwrap_or(0))
        }
        fn add_to_counter(&mut self, counter: Counter, n: u64) -> Result<u64> {
            let value = self.counters.entry(counter.name()).or_insert(0);
            *value += n;
            Ok(*value)
        }
        fn set_aside(&mut self, id: &[u8], _problem: &DqError) {
            self.set_aside.push(id.to_vec());
        }
        fn event(&mut self, event: Event) {
            self.events.push(event);
        }
    }
}
