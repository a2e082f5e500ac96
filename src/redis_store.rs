//! [`Store`] over a queue's Redis keys.
//!
//! Opening checks the type of every key of the queue first, so a command
//! either finds them all usable or fails before writing anything. Every
//! write goes through the key API and is recorded in [`Effects`];
//! [`RedisStore::finish`] replicates those effects, signals the keys that
//! changed (for WATCH and client tracking), wakes blocked consumers when
//! something became ready, and tells the timer about every due time, lease
//! deadline or TTL it wrote — so no command has to.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::io::Write as _;
use std::ptr;
use std::rc::Rc;

use redis_module::{raw, Context, NotifyEvent, RedisString};

use crate::census;
use crate::effects::{Effects, Write};
use crate::error::{printable, DqError, Result};
use crate::keys::{key_prefix, Part};
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
    names: Rc<KeyNames>,
    effects: Effects<RedisString>,
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
        let names = key_names(queue);
        let mut keys = Vec::with_capacity(Part::ALL.len());
        for part in Part::ALL {
            let name = names.of(part);
            let key = Key::open(ctx, name, writable);
            let kind = key.kind();
            if kind != KeyKind::Empty && kind != expected_kind(part) {
                return Err(DqError::WrongType(printable(name.as_slice())));
            }
            keys.push(key);
        }
        Ok(RedisStore {
            ctx,
            keys,
            names,
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
            crate::guard::warn(Some(self.ctx), &format!("dq: using module settings: {e}"));
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

    fn string(&self, bytes: &[u8]) -> RedisString {
        RedisString::create_from_slice(self.ctx.ctx, bytes)
    }

    fn hash_set(&mut self, part: Part, field: &[u8], value: &[u8]) {
        let (field, value) = (self.string(field), self.string(value));
        self.key(part).hash_set(&field, &value);
        self.effects.record(part, Write::HSet { field, value });
    }

    fn hash_delete(&mut self, part: Part, field: &[u8]) {
        let field = self.string(field);
        self.key(part).hash_delete(&field);
        self.effects.record(part, Write::HDel { field });
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
        census::set(selected_db(self.ctx), &self.name, self.counts());
    }

    /// Replicates what changed, wakes consumers blocked on the queue and
    /// schedules the timer. Dropping the store does the same, so that a
    /// command stopped half-way by a panic still replicates what it wrote;
    /// calling it says where a command's writes end.
    pub fn finish(mut self) {
        self.flush();
    }

    /// Idempotent: it takes what it hands on.
    fn flush(&mut self) {
        if !self.effects.is_empty() {
            self.update_census();
        }
        let ctx = self.ctx;
        let names = &self.names;
        let effects = std::mem::take(&mut self.effects);
        let became_ready = std::mem::take(&mut self.became_ready);
        let wake_at = self.wake_at.take();
        let events = std::mem::take(&mut self.events);
        let name = &self.name;
        for part in effects.parts() {
            signal_modified(ctx, names.of(part));
        }
        // Straight through the C API: the strings given to the key API are
        // passed on as they are (Redis only takes a reference).
        let mut argv: Vec<*mut raw::RedisModuleString> = Vec::new();
        for command in effects.into_commands(|n| decimal(ctx, n)) {
            argv.clear();
            argv.extend(command.args.iter().map(|arg| arg.inner));
            let key = names.of(command.part);
            // SAFETY: main thread, live context; "sv" takes the key string
            // and then (array, length), all valid for the call.
            unsafe {
                raw::RedisModule_Replicate.unwrap()(
                    ctx.ctx,
                    command.name.as_ptr(),
                    c"sv".as_ptr(),
                    key.inner,
                    argv.as_mut_ptr(),
                    argv.len(),
                );
            }
        }
        if became_ready {
            signal_ready(ctx, names.of(Part::Ready));
        }
        if !events.is_empty() {
            let queue = RedisString::create_from_slice(ctx.ctx, name);
            for event in events {
                // SAFETY: main thread, live context, string and C string.
                unsafe {
                    raw::RedisModule_NotifyKeyspaceEvent.unwrap()(
                        ctx.ctx,
                        NotifyEvent::GENERIC.bits(),
                        event.name().as_ptr(),
                        queue.inner,
                    );
                }
            }
        }
        if let Some(at) = wake_at {
            note_due(ctx, name, at);
        }
    }
}

impl Drop for RedisStore<'_> {
    fn drop(&mut self) {
        self.flush();
    }
}

impl Store for RedisStore<'_> {
    fn message(&mut self, id: &[u8]) -> Result<Option<Message>> {
        self.key(Part::Messages)
            .hash_get_string(id)
            .map(|bytes| Message::decode(id, bytes.as_slice()))
            .transpose()
    }

    fn message_exists(&mut self, id: &[u8]) -> Result<bool> {
        Ok(self.key(Part::Messages).hash_exists(id))
    }

    fn put_message(&mut self, id: &[u8], message: &Message) -> Result<()> {
        self.hash_set(Part::Messages, id, &message.encode());
        Ok(())
    }

    fn delete_message(&mut self, id: &[u8]) -> Result<()> {
        self.hash_delete(Part::Messages, id);
        Ok(())
    }

    fn index_add(&mut self, index: Index, score: f64, member: &[u8]) -> Result<()> {
        let part = part_of(index);
        let member = self.string(member);
        self.key(part).zset_add(score, &member);
        // Scores are whole milliseconds or priorities, exact in an i64.
        let score = score as i64;
        self.effects.record(part, Write::ZAdd { score, member });
        self.became_ready |= index == Index::Ready;
        if matches!(index, Index::Delayed | Index::Inflight | Index::Expiry) {
            let at = score as u64;
            self.wake_at = Some(self.wake_at.map_or(at, |w| w.min(at)));
        }
        Ok(())
    }

    fn index_remove(&mut self, index: Index, member: &[u8]) -> Result<()> {
        let part = part_of(index);
        let member = self.string(member);
        if self.key(part).zset_remove(&member) {
            self.effects.record(part, Write::ZRem { member });
        }
        Ok(())
    }

    fn index_has(&mut self, index: Index, member: &[u8]) -> Result<bool> {
        let member = self.string(member);
        Ok(self.key(part_of(index)).zset_has(&member))
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
        match holder {
            Some(id) => self.hash_set(Part::Groups, group, id),
            None => self.hash_delete(Part::Groups, group),
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
            let field = field.as_bytes();
            match value {
                Some(value) => self.hash_set(Part::Config, field, value.as_bytes()),
                None => {
                    if self.key(Part::Config).hash_exists(field) {
                        self.hash_delete(Part::Config, field);
                    }
                }
            }
        }
        Ok(())
    }

    fn counter(&mut self, counter: Counter) -> Result<u64> {
        Ok(self
            .key(Part::Meta)
            .hash_get_string(counter.name().as_bytes())
            .and_then(|v| std::str::from_utf8(v.as_slice()).ok()?.parse().ok())
            .unwrap_or(0))
    }

    fn set_aside(&mut self, id: &[u8], problem: &DqError) {
        crate::guard::warn(
            Some(self.ctx),
            &format!(
                "dq: set aside unreadable message '{}': {problem}",
                printable(id)
            ),
        );
    }

    fn event(&mut self, event: Event) {
        if !self.events.contains(&event) {
            self.events.push(event);
        }
    }

    fn add_to_counter(&mut self, counter: Counter, n: u64) -> Result<u64> {
        let value = self.counter(counter)?.saturating_add(n);
        let field = self.string(counter.name().as_bytes());
        let text = decimal(self.ctx, value);
        self.key(Part::Meta).hash_set(&field, &text);
        self.effects
            .record(Part::Meta, Write::HSet { field, value: text });
        Ok(value)
    }
}

/// The names of a queue's keys as Redis strings. Recently used queues keep
/// theirs: making ten names costs a command more than its own writes do.
pub struct KeyNames {
    queue: Vec<u8>,
    /// Indexed by `Part::index`.
    names: Vec<RedisString>,
}

impl KeyNames {
    fn new(queue: &[u8]) -> KeyNames {
        let mut name = key_prefix(queue);
        let prefix_len = name.len();
        let names = Part::ALL
            .iter()
            .map(|part| {
                name.truncate(prefix_len);
                name.extend_from_slice(part.suffix().as_bytes());
                // No context: the string outlives the command.
                RedisString::create_from_slice(ptr::null_mut(), &name)
            })
            .collect();
        KeyNames {
            queue: queue.to_vec(),
            names,
        }
    }

    pub fn of(&self, part: Part) -> &RedisString {
        &self.names[part.index()]
    }
}

/// How many queues keep their key names.
const NAMED_QUEUES: usize = 64;

thread_local! {
    // Main thread only, as everything Redis calls. Most recent first.
    static NAMES: RefCell<VecDeque<Rc<KeyNames>>> = const { RefCell::new(VecDeque::new()) };
}

fn key_names(queue: &[u8]) -> Rc<KeyNames> {
    NAMES.with(|cache| {
        let mut cache = cache.borrow_mut();
        if let Some(at) = cache.iter().position(|n| n.queue == queue) {
            if let Some(names) = cache.remove(at) {
                cache.push_front(names);
            }
        } else {
            cache.push_front(Rc::new(KeyNames::new(queue)));
            cache.truncate(NAMED_QUEUES);
        }
        Rc::clone(&cache[0])
    })
}

/// A number as a Redis string, spelled without a heap buffer of our own.
fn decimal(ctx: &Context, n: impl std::fmt::Display) -> RedisString {
    let mut buf = [0u8; 24];
    let mut out = &mut buf[..];
    // 24 bytes hold any i64 or u64.
    let _ = write!(out, "{n}");
    let len = 24 - out.len();
    RedisString::create_from_slice(ctx.ctx, &buf[..len])
}
