//! The multi-key layout (dq 0.1) kept queue `Q` in up to ten ZSET and HASH keys `dq:{T}:Q:<part>`
//! (see `keys.rs` and `message.rs`). A master that finds such keys — after
//! loading an RDB or AOF, on promotion, on MODULE LOAD — converts each
//! queue into its one key: every message with its state, attempt, lease,
//! group, TTL, death and pending replacement, and the queue's counters and
//! settings. It deletes the old keys, propagates `DEL` of each and one
//! `DQ.APPLY ... LOAD` of the new value (so replicas and the AOF follow),
//! and logs what it did. A record that cannot be read is left out, and
//! named in the log.
//!
//! A converted message keeps its attempt number, and its MAXATTEMPTS
//! budget counts from 0 as the multi-key build counted it (that build restarted the
//! numbering on a replace or REDRIVE, so the two agree).

pub mod frozen;
pub mod keys;
pub mod message;

use std::collections::{BTreeSet, HashMap};

use redis_module::{Context, RedisString, RedisValue};

use crate::core::error::printable;
use crate::core::policy::QueueConfig;
use crate::core::queue::{
    codec, Counter, Counters, Death, DeathReason, Options, Queue, Record, State, Terms, Version,
};
use crate::legacy::keys::{key_name, parse_key_name, Part};
use crate::legacy::message::Message;
use crate::server::events::Importer;
use crate::server::key::QueueKey;
use crate::server::replication::{self, Apply};

/// A queue of the multi-key layout as read from its keys.
#[derive(Debug, Default)]
pub struct MultiKey {
    pub messages: Vec<(Vec<u8>, Vec<u8>)>,
    /// Ids per index; ready and waiting members already reduced to ids.
    pub delayed: BTreeSet<Vec<u8>>,
    pub ready: BTreeSet<Vec<u8>>,
    pub inflight: BTreeSet<Vec<u8>>,
    pub dead: BTreeSet<Vec<u8>>,
    pub waiting: BTreeSet<Vec<u8>>,
    /// group -> holder id
    pub groups: HashMap<Vec<u8>, Vec<u8>>,
    pub counters: HashMap<Vec<u8>, Vec<u8>>,
    pub config: HashMap<Vec<u8>, Vec<u8>>,
}

/// What a conversion made, and what it had to leave out.
pub struct Converted {
    pub queue: Queue,
    /// Ids whose record could not be read, or that no index listed.
    pub left_out: Vec<(Vec<u8>, String)>,
}

/// Ready members are 8-byte due + 8-byte sequence + id.
fn id_of_ready(member: &[u8]) -> &[u8] {
    member.get(16..).unwrap_or_default()
}

/// Waiting members are 4-byte group length + group + 16 bytes + id.
fn id_of_waiting(member: &[u8]) -> &[u8] {
    let group_len = member.get(..4).map_or(0, |len| {
        u32::from_be_bytes([len[0], len[1], len[2], len[3]]) as usize
    });
    member.get(4 + group_len + 16..).unwrap_or_default()
}

/// The terms of a multi-key message or pending version: the fields both have.
macro_rules! terms {
    ($v:expr) => {
        Terms {
            priority: $v.priority,
            seq: $v.seq,
            due_at: $v.due_at,
            added_at: $v.added_at,
            options: Options {
                max_attempts: $v.max_attempts,
                backoff: $v.backoff.as_ref().map(Into::into),
                expire_at: $v.expire_at,
                group: $v.group.as_deref().map(Into::into),
                retain_ms: None,
            },
        }
    };
}

/// One multi-key message as a record in `state`.
pub fn record_of(id: &[u8], m: &Message, state: State, holds_group: bool) -> Record {
    let mut record = Record::new(id, &m.payload, terms!(m));
    record.state = state;
    record.holds_group = holds_group;
    record.attempt = m.attempt;
    if state == State::Inflight {
        // A record in flight always has a deadline (0 means none).
        record.lease_deadline = m.lease_deadline.unwrap_or(1).max(1);
    }
    let death = (state == State::Dead).then(|| {
        m.death.map_or(
            Death {
                reason: DeathReason::Nack,
                at: m.due_at,
            },
            Death::from,
        )
    });
    let replacement = m
        .replacement
        .as_deref()
        .filter(|_| state == State::Inflight)
        .map(|v| {
            Box::new(Version {
                terms: terms!(v),
                payload: v.payload.as_slice().into(),
            })
        });
    record.update_extra(|e| {
        e.death = death;
        e.replacement = replacement;
    });
    record
}

impl MultiKey {
    /// The queue these keys describe.
    pub fn convert(&self) -> Result<Converted, String> {
        let mut left_out = Vec::new();
        let mut records = Vec::with_capacity(self.messages.len());
        for (id, bytes) in &self.messages {
            // The multi-key build took ids from its parser too, but a hash edited by
            // hand may hold any field.
            if let Err(e) = crate::grammar::args::check_id(id) {
                left_out.push((id.clone(), e.to_string()));
                continue;
            }
            let m = match Message::decode(id, bytes) {
                Ok(m) => m,
                Err(e) => {
                    left_out.push((id.clone(), e.to_string()));
                    continue;
                }
            };
            // The multi-key build left a promoted message's record `Delayed`: the
            // indexes say where each message is.
            let state = if self.inflight.contains(id) {
                State::Inflight
            } else if self.dead.contains(id) {
                State::Dead
            } else if self.ready.contains(id) {
                State::Ready
            } else if self.waiting.contains(id) {
                State::Waiting
            } else if self.delayed.contains(id) {
                State::Delayed
            } else {
                left_out.push((id.clone(), "no index lists it".into()));
                continue;
            };
            let holds = m
                .group
                .as_ref()
                .is_some_and(|g| self.groups.get(g) == Some(id))
                && matches!(state, State::Ready | State::Inflight | State::Delayed);
            records.push(record_of(id, &m, state, holds));
        }
        let config = QueueConfig::from_fields(|field| self.config.get(field.as_bytes()).cloned())
            .unwrap_or_default();
        let mut counters = Counters::default();
        for counter in Counter::ALL {
            let value = self
                .counters
                .get(counter.name().as_bytes())
                .and_then(|v| std::str::from_utf8(v).ok()?.parse().ok())
                .unwrap_or(0);
            counters.bump(counter, value);
        }
        let queue = codec::assemble(config, counters, records).map_err(|e| e.0)?;
        Ok(Converted { queue, left_out })
    }
}

// ---- Redis glue ------------------------------------------------------------

fn bytes_of(v: &RedisValue) -> Vec<u8> {
    match v {
        RedisValue::SimpleString(s) | RedisValue::BulkString(s) => s.clone().into_bytes(),
        RedisValue::BulkRedisString(s) => s.as_slice().to_vec(),
        RedisValue::StringBuffer(b) => b.clone(),
        _ => Vec::new(),
    }
}

fn call_list(ctx: &Context, command: &str, key: &[u8], rest: &[&[u8]]) -> Vec<Vec<u8>> {
    let mut args: Vec<&[u8]> = vec![key];
    args.extend_from_slice(rest);
    match ctx.call(command, args.as_slice()) {
        Ok(RedisValue::Array(items)) => items.iter().map(bytes_of).collect(),
        _ => Vec::new(),
    }
}

fn hash(ctx: &Context, key: &[u8]) -> HashMap<Vec<u8>, Vec<u8>> {
    let flat = call_list(ctx, "HGETALL", key, &[]);
    flat.chunks_exact(2)
        .map(|pair| (pair[0].clone(), pair[1].clone()))
        .collect()
}

fn read(ctx: &Context, queue: &[u8]) -> MultiKey {
    let zset = |part| call_list(ctx, "ZRANGE", &key_name(queue, part), &[b"0", b"-1"]);
    let ids = |part| zset(part).into_iter().collect::<BTreeSet<_>>();
    MultiKey {
        messages: hash(ctx, &key_name(queue, Part::Messages))
            .into_iter()
            .collect(),
        delayed: ids(Part::Delayed),
        ready: zset(Part::Ready)
            .iter()
            .map(|m| id_of_ready(m).to_vec())
            .collect(),
        inflight: ids(Part::Inflight),
        dead: ids(Part::Dead),
        waiting: zset(Part::Waiting)
            .iter()
            .map(|m| id_of_waiting(m).to_vec())
            .collect(),
        groups: hash(ctx, &key_name(queue, Part::Groups)),
        counters: hash(ctx, &key_name(queue, Part::Meta)),
        config: hash(ctx, &key_name(queue, Part::Config)),
    }
}

/// The queue of the multi-key layout a key belongs to, if it is one of its keys.
pub fn multi_key_queue(name: &[u8]) -> Option<Vec<u8>> {
    parse_key_name(name).map(|(queue, _)| queue)
}

/// What the server's discovery of queues calls (see `server::events`).
pub static IMPORTER: Importer = Importer {
    queue_of: multi_key_queue,
    convert,
};

/// Converts queue `name` of the selected database, or leaves its keys as
/// they are and logs why.
pub fn convert(ctx: &Context, db: i32, name: &[u8]) {
    let label = format!("queue '{}' (db {db})", printable(name));
    let converted = match read(ctx, name).convert() {
        Ok(c) => c,
        Err(why) => {
            crate::server::guard::warn(
                Some(ctx),
                &format!(
                    "dq: cannot convert multi-key {label}: {why}; its keys are left as they are"
                ),
            );
            return;
        }
    };
    let key_name_rs = RedisString::create_from_slice(ctx.ctx, name);
    let mut key = match QueueKey::open(ctx, &key_name_rs) {
        Ok(key) => key,
        Err(_) => {
            crate::server::guard::warn(
                Some(ctx),
                &format!("dq: cannot convert multi-key {label}: the key '{}' holds something else; its keys are left as they are", printable(name)),
            );
            return;
        }
    };
    if key.queue().is_some() {
        crate::server::guard::warn(
            Some(ctx),
            &format!("dq: cannot convert multi-key {label}: a queue of that name exists; its keys are left as they are"),
        );
        return;
    }
    let messages = converted.queue.len();
    // The old keys go first, so a replica or the AOF applies the same order.
    for part in Part::ALL {
        let old = key_name(name, part);
        let deleted =
            matches!(ctx.call("DEL", &[old.as_slice()][..]), Ok(RedisValue::Integer(n)) if n > 0);
        if deleted {
            replication::delete(ctx, &old);
        }
    }
    let mut apply = Apply::new(
        ctx,
        &key_name_rs,
        0,
        crate::server::settings::max_attempts(),
        "LOAD",
    );
    apply.bytes(&codec::header(&converted.queue));
    codec::record_chunks(&converted.queue, |chunk| {
        apply.bytes(chunk);
    });
    if key.replace(converted.queue).is_err() {
        return;
    }
    apply.send();
    key.changed();
    let mut note = format!("dq: converted multi-key {label} into one key: {messages} messages");
    for (id, why) in &converted.left_out {
        note.push_str(&format!("; left out '{}': {why}", printable(id)));
    }
    crate::server::guard::warn(Some(ctx), &note);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::legacy::message::Message;

    fn message(seq: u64) -> Message {
        let mut m = crate::legacy::message::tests::sample();
        m.seq = seq;
        m.replacement = None;
        m.death = None;
        m.group = None;
        m.expire_at = None;
        m
    }

    fn member_ready(id: &[u8], m: &Message) -> Vec<u8> {
        [&m.due_at.to_be_bytes()[..], &m.seq.to_be_bytes(), id].concat()
    }

    #[test]
    fn states_come_from_the_indexes_and_everything_else_from_the_record() {
        let mut r = MultiKey::default();
        let mut add = |id: &str, m: Message| {
            r.messages.push((id.as_bytes().to_vec(), m.encode()));
            m
        };
        let promoted = add("promoted", message(1));
        let mut leased = message(2);
        leased.state = frozen::State::Inflight;
        leased.attempt = 3;
        leased.lease_deadline = Some(9_000);
        let leased = add("leased", leased);
        let mut dead = message(3);
        dead.state = frozen::State::Dead;
        dead.attempt = 1;
        dead.death = Some(frozen::Death {
            reason: frozen::DeathReason::LeaseExpired,
            at: 77,
        });
        add("dead", dead);
        r.messages
            .push((b"garbage".to_vec(), b"\x02xxxxx".to_vec()));
        r.ready
            .insert(id_of_ready(&member_ready(b"promoted", &promoted)).to_vec());
        r.delayed.insert(b"gone-from-msgs".to_vec());
        r.inflight.insert(b"leased".to_vec());
        r.dead.insert(b"dead".to_vec());
        r.counters.insert(b"added".to_vec(), b"41".to_vec());
        r.config.insert(b"max-attempts".to_vec(), b"7".to_vec());
        let converted = r.convert().unwrap();
        let q = &converted.queue;
        q.check().unwrap();
        assert_eq!(q.len(), 3);
        assert_eq!(q.get(b"promoted").unwrap().state, State::Ready);
        let l = q.get(b"leased").unwrap();
        assert_eq!(
            (l.state, l.attempt, l.lease_deadline),
            (State::Inflight, 3, 9_000)
        );
        assert_eq!(l.payload(), &leased.payload[..]);
        let d = q.get(b"dead").unwrap();
        assert_eq!(d.death().unwrap().at, 77);
        assert_eq!(q.counters().get(Counter::Added), 41);
        assert_eq!(q.config().max_attempts, Some(7));
        assert_eq!(converted.left_out.len(), 1);
        assert_eq!(converted.left_out[0].0, b"garbage");
    }

    #[test]
    fn member_encodings_give_back_the_id() {
        let m = message(5);
        assert_eq!(id_of_ready(&member_ready(b"x:1", &m)), b"x:1");
        let waiting = [&3u32.to_be_bytes()[..], b"grp", &[0; 16], b"id"].concat();
        assert_eq!(id_of_waiting(&waiting), b"id");
        assert_eq!(id_of_waiting(b"\x00"), b"");
    }
}
