//! [`Store`] over a queue's Redis keys.
//!
//! Opening checks the type of every key of the queue first, so a command
//! either finds them all usable or fails before writing anything. Every
//! write goes through the key API and is recorded in [`Effects`];
//! [`RedisStore::finish`] replicates those effects, signals the keys that
//! changed (for WATCH and client tracking), wakes blocked consumers when
//! something became ready, and tells the timer about every due time, lease
//! deadline or TTL it wrote — so no command has to.

use redis_module::{Context, NotifyEvent, RedisString};

use crate::census;
use crate::effects::{Effects, Write};
use crate::error::{printable, DqError, Result};
use crate::keys::{key_name_from, key_prefix, Part};
use crate::message::Message;
use crate::migration;
use crate::policy::{Policy, QueueConfig};
use crate::rkey::{selected_db, signal_modified, signal_ready, Key, KeyKind};
use crate::settings;
use crate::store::{Counter, Event, Index, Store};
use crate::timer::note_due;

pub struct RedisStore<'c> {
    ctx: &'c Context,
    /// Indexed by `Part::index`.
    keys: Vec<Key>,
    effects: Effects,
    became_ready: bool,
    /// The earliest time written to a timed index: when the timer must look.
    wake_at: Option<u64>,
    /// The queue's name: keyspace notifications are about it.
    name: Vec<u8>,
    events: Vec<Event>,
}

fn expected_kind(part: Part) -> KeyKind {
    match part {
        Part::Messages | Part::Meta | Part::Config | Part::Groups => KeyKind::Hash,
        Part::Delayed
        | Part::Ready
        | Part::Inflight
        | Part::Dead
        | Part::Expiry
        | Part::Waiting => KeyKind::Zset,
    }
}

fn part_of(index: Index) -> Part {
    match index {
        Index::Delayed => Part::Delayed,
        Index::Ready => Part::Ready,
        Index::Inflight => Part::Inflight,
        Index::Dead => Part::Dead,
        Index::Expiry => Part::Expiry,
        Index::Waiting => Part::Waiting,
    }
}

impl<'c> RedisStore<'c> {
    /// Opens the queue in the context's selected database.
    /// While the queue's cluster slot is moving it is refused (see
    /// `migration.rs`).
    pub fn open(ctx: &'c Context, queue: &[u8], writable: bool) -> Result<Self> {
        if migration::is_moving(ctx, queue) {
            return Err(DqError::Migrating(printable(queue)));
        }
        let prefix = key_prefix(queue);
        let mut keys = Vec::with_capacity(Part::ALL.len());
        for part in Part::ALL {
            let key = Key::open(ctx, &key_name_from(&prefix, part), writable);
            let kind = key.kind();
            if kind != KeyKind::Empty && kind != expected_kind(part) {
                return Err(DqError::WrongType(printable(key.name().as_slice())));
            }
            keys.push(key);
        }
        Ok(RedisStore {
            ctx,
            keys,
            effects: Effects::default(),
            became_ready: false,
            wake_at: None,
            name: queue.to_vec(),
            events: Vec::new(),
        })
    }

    /// The lease, attempts and backoff in force for this queue. A config
    /// hash edited into something unreadable falls back to the module
    /// settings (with a warning) rather than stopping the queue.
    pub fn policy(&mut self) -> Policy {
        let config = self.queue_config().unwrap_or_else(|e| {
            self.ctx
                .log_warning(&format!("dq: using module settings: {e}"));
            QueueConfig::default()
        });
        config.resolve(&settings::current())
    }

    /// Deletes one key of the queue; a missing key is not a write.
    fn delete_key(&mut self, part: Part) {
        if self.key(part).value_length() > 0 {
            self.key(part).delete();
            self.effects.record(part, Write::Del);
        }
    }

    fn key(&mut self, part: Part) -> &mut Key {
        &mut self.keys[part.index()]
    }

    /// Messages per state, or `None` when the queue has no keys at all.
    pub fn counts(&self) -> Option<census::Counts> {
        if self.keys.iter().all(|k| k.value_length() == 0) {
            return None;
        }
        let len = |part: Part| self.keys[part.index()].value_length();
        // Messages held back by their group count as delayed.
        Some([
            len(Part::Delayed) + len(Part::Waiting),
            len(Part::Ready),
            len(Part::Inflight),
            len(Part::Dead),
        ])
    }

    /// Counts the queue again for INFO.
    pub fn update_census(&self) {
        census::set((selected_db(self.ctx), self.name.clone()), self.counts());
    }

    /// Replicates what changed, wakes consumers blocked on the queue and
    /// schedules the timer.
    pub fn finish(self) {
        if !self.effects.is_empty() {
            self.update_census();
        }
        let RedisStore {
            ctx,
            keys,
            effects,
            became_ready,
            wake_at,
            name,
            events,
        } = self;
        for part in effects.parts() {
            signal_modified(ctx, keys[part.index()].name());
        }
        for command in effects.into_commands() {
            let mut args: Vec<&[u8]> = Vec::with_capacity(command.args.len() + 1);
            args.push(keys[command.part.index()].name().as_slice());
            args.extend(command.args.iter().map(Vec::as_slice));
            ctx.replicate(command.name, &args[..]);
        }
        if became_ready {
            signal_ready(ctx, keys[Part::Ready.index()].name());
        }
        if !events.is_empty() {
            let queue = RedisString::create_from_slice(ctx.ctx, &name);
            for event in events {
                ctx.notify_keyspace_event(NotifyEvent::GENERIC, event.name(), &queue);
            }
        }
        if let Some(at) = wake_at {
            note_due(ctx, &name, at);
        }
    }
}

impl Store for RedisStore<'_> {
    fn message(&mut self, id: &[u8]) -> Result<Option<Message>> {
        self.key(Part::Messages)
            .hash_get(id)
            .map(|bytes| Message::decode(id, &bytes))
            .transpose()
    }

    fn message_exists(&mut self, id: &[u8]) -> Result<bool> {
        Ok(self.key(Part::Messages).hash_exists(id))
    }

    fn put_message(&mut self, id: &[u8], message: &Message) -> Result<()> {
        let value = message.encode();
        self.key(Part::Messages).hash_set(id, &value);
        self.effects.record(
            Part::Messages,
            Write::HSet {
                field: id.to_vec(),
                value,
            },
        );
        Ok(())
    }

    fn delete_message(&mut self, id: &[u8]) -> Result<()> {
        self.key(Part::Messages).hash_delete(id);
        self.effects
            .record(Part::Messages, Write::HDel { field: id.to_vec() });
        Ok(())
    }

    fn index_add(&mut self, index: Index, score: f64, member: &[u8]) -> Result<()> {
        let part = part_of(index);
        self.key(part).zset_add(score, member);
        // Scores are whole milliseconds or priorities, exact in an i64.
        self.effects.record(
            part,
            Write::ZAdd {
                score: score as i64,
                member: member.to_vec(),
            },
        );
        self.became_ready |= index == Index::Ready;
        if matches!(index, Index::Delayed | Index::Inflight | Index::Expiry) {
            let at = score as u64;
            self.wake_at = Some(self.wake_at.map_or(at, |w| w.min(at)));
        }
        Ok(())
    }

    fn index_remove(&mut self, index: Index, member: &[u8]) -> Result<()> {
        let part = part_of(index);
        self.key(part).zset_remove(member);
        self.effects.record(
            part,
            Write::ZRem {
                member: member.to_vec(),
            },
        );
        Ok(())
    }

    fn index_range(
        &mut self,
        index: Index,
        max_score: f64,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, f64)>> {
        Ok(self.key(part_of(index)).zset_range(max_score, limit))
    }

    fn index_len(&mut self, index: Index) -> Result<u64> {
        Ok(self.key(part_of(index)).value_length())
    }

    fn index_score_heads(&mut self, index: Index, limit: usize) -> Result<Vec<(Vec<u8>, f64)>> {
        let key = self.key(part_of(index));
        let mut heads: Vec<(Vec<u8>, f64)> = Vec::new();
        while heads.len() < limit {
            let after = heads.last().map(|(_, score)| *score);
            match key.zset_first_from(after.unwrap_or(f64::NEG_INFINITY), after.is_some()) {
                Some(head) => heads.push(head),
                None => break,
            }
        }
        Ok(heads)
    }

    fn index_first_from(&mut self, index: Index, min: &[u8]) -> Result<Option<Vec<u8>>> {
        Ok(self.key(part_of(index)).zset_first_from_lex(min))
    }

    fn group_holder(&mut self, group: &[u8]) -> Result<Option<Vec<u8>>> {
        Ok(self.key(Part::Groups).hash_get(group))
    }

    fn set_group_holder(&mut self, group: &[u8], holder: Option<&[u8]>) -> Result<()> {
        let field = group.to_vec();
        match holder {
            Some(id) => {
                self.key(Part::Groups).hash_set(group, id);
                let value = id.to_vec();
                self.effects
                    .record(Part::Groups, Write::HSet { field, value });
            }
            None => {
                self.key(Part::Groups).hash_delete(group);
                self.effects.record(Part::Groups, Write::HDel { field });
            }
        }
        Ok(())
    }

    fn clear_groups(&mut self) -> Result<()> {
        self.delete_key(Part::Groups);
        Ok(())
    }

    fn has_groups(&mut self) -> Result<bool> {
        Ok(self.key(Part::Groups).value_length() > 0)
    }

    fn clear_index(&mut self, index: Index) -> Result<()> {
        self.delete_key(part_of(index));
        Ok(())
    }

    fn message_count(&mut self) -> Result<u64> {
        Ok(self.key(Part::Messages).value_length())
    }

    fn clear_messages(&mut self) -> Result<()> {
        self.delete_key(Part::Messages);
        Ok(())
    }

    fn queue_config(&mut self) -> Result<QueueConfig> {
        let key = self.key(Part::Config);
        QueueConfig::from_fields(|field| key.hash_get(field.as_bytes()))
    }

    fn set_queue_config(&mut self, config: &QueueConfig) -> Result<()> {
        for (field, value) in config.to_fields() {
            let field = field.as_bytes().to_vec();
            match value {
                Some(value) => {
                    let value = value.into_bytes();
                    self.key(Part::Config).hash_set(&field, &value);
                    self.effects
                        .record(Part::Config, Write::HSet { field, value });
                }
                None => {
                    if self.key(Part::Config).hash_get(&field).is_some() {
                        self.key(Part::Config).hash_delete(&field);
                        self.effects.record(Part::Config, Write::HDel { field });
                    }
                }
            }
        }
        Ok(())
    }

    fn counter(&mut self, counter: Counter) -> Result<u64> {
        Ok(self
            .key(Part::Meta)
            .hash_get(counter.name().as_bytes())
            .and_then(|v| std::str::from_utf8(&v).ok()?.parse().ok())
            .unwrap_or(0))
    }

    fn set_aside(&mut self, id: &[u8], problem: &DqError) {
        self.ctx.log_warning(&format!(
            "dq: set aside unreadable message '{}': {problem}",
            printable(id)
        ));
    }

    fn event(&mut self, event: Event) {
        if !self.events.contains(&event) {
            self.events.push(event);
        }
    }

    fn add_to_counter(&mut self, counter: Counter, n: u64) -> Result<u64> {
        let value = self.counter(counter)?.saturating_add(n);
        let text = value.to_string().into_bytes();
        let field = counter.name().as_bytes();
        self.key(Part::Meta).hash_set(field, &text);
        self.effects.record(
            Part::Meta,
            Write::HSet {
                field: field.to_vec(),
                value: text,
            },
        );
        Ok(value)
    }
}
