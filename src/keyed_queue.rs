//! The queue state machine: every transition of a message, over a [`Store`].
//!
//! ```text
//!   ADD ──► delayed ──(due: timer)──► ready ──POP──► inflight ──ACK──► gone
//!    └────────(due now)──────────────►  ▲  ▲            │
//!               ▲                       │  └(lease ends)┤
//!               └────────(NACK: backoff)┼───────────────┤
//!                                       │               ▼ attempts used up
//!                                       └──REDRIVE──── dead
//! ```
//! CANCEL removes a message from any state, PURGE a whole state.
//!
//! GROUP: a message of a group becomes ready only by taking its group; the
//! group stays taken through its delivery and retries until that message is
//! acknowledged, dead, cancelled or replaced. Meanwhile the group's other
//! due messages wait (state `Waiting`, reported as delayed) in group, due,
//! insertion order, and the first of them is ready the moment the group is
//! free. A lease that runs out leaves the group with its holder, so the
//! holder is redelivered before anything behind it. Nothing
//! here knows about Redis, clocks or replication: callers pass `now` and
//! the policy in force, and the store records effects.

use crate::args::MAX_TIME_MS;
use crate::error::{DqError, Result};
use crate::message::{Death, DeathReason, Message, State, Version};
use crate::policy::Policy;
use crate::store::{Counter, Event, Index, Store};

// The request and reply types are the native queue's (`crate::queue`),
// so the commands speak one language while they move over to it.
use crate::queue::distinct;
pub use crate::queue::{AddMode, AddRequest, Delivery, Redrive};

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Stats {
    pub delayed: u64,
    pub ready: u64,
    pub inflight: u64,
    pub dead: u64,
    pub counters: Vec<(Counter, u64)>,
    /// Since when the earliest-due ready message has been waiting: its due
    /// time, or its ADD when it was added already due.
    pub oldest_ready_since: Option<u64>,
    /// Due time of the earliest delayed message.
    pub next_due_at: Option<u64>,
}

/// The ready index orders by score = -priority, then by this member:
/// due time and insertion sequence big-endian (so byte order is numeric
/// order), then the id.
pub fn ready_member(id: &[u8], message: &Message) -> Vec<u8> {
    let mut member = Vec::with_capacity(16 + id.len());
    member.extend_from_slice(&message.due_at.to_be_bytes());
    member.extend_from_slice(&message.seq.to_be_bytes());
    member.extend_from_slice(id);
    member
}

fn id_of_ready_member(member: &[u8]) -> &[u8] {
    member.get(16..).unwrap_or_default()
}

/// The waiting index (all scores 0) orders by this member: the group,
/// length-prefixed so that no two groups' members interleave, then due time
/// and insertion sequence big-endian, then the id. A group's first waiting
/// message is the first member at or after [`group_prefix`].
pub fn waiting_member(id: &[u8], message: &Message) -> Vec<u8> {
    let mut member = group_prefix(message.group.as_deref().unwrap_or_default());
    member.extend_from_slice(&message.due_at.to_be_bytes());
    member.extend_from_slice(&message.seq.to_be_bytes());
    member.extend_from_slice(id);
    member
}

fn group_prefix(group: &[u8]) -> Vec<u8> {
    let mut prefix = Vec::with_capacity(4 + group.len() + 16);
    // Group names are bounded far below 4 GiB by the argument parser.
    prefix.extend_from_slice(&(group.len() as u32).to_be_bytes());
    prefix.extend_from_slice(group);
    prefix
}

fn id_of_waiting_member(member: &[u8]) -> &[u8] {
    let group_len = member.get(..4).map_or(0, |len| {
        u32::from_be_bytes([len[0], len[1], len[2], len[3]]) as usize
    });
    member.get(4 + group_len + 16..).unwrap_or_default()
}

fn ready_score(priority: i32) -> f64 {
    // Through i64 so that priority 0 scores 0, not -0.
    -i64::from(priority) as f64
}

/// Adds or replaces a message. Returns its id, or `None` when the mode
/// said to leave things as they are.
pub fn add(store: &mut impl Store, now: u64, req: &AddRequest) -> Result<Option<Vec<u8>>> {
    let existing = match req.id {
        Some(id) => store.message(id)?,
        None => None,
    };
    match (req.mode, &existing) {
        (AddMode::OnlyNew, Some(_)) | (AddMode::OnlyExisting, None) => return Ok(None),
        _ => {}
    }
    let mut seq = store.add_to_counter(Counter::Added, 1)?;
    let id = match req.id {
        Some(id) => id.to_vec(),
        None => loop {
            // Time first makes ids readable and unique even if the counter
            // is ever reset; the loop only matters if a client chose an id
            // of the same shape.
            let candidate = format!("{now}-{seq}").into_bytes();
            if store.message(&candidate)?.is_none() {
                break candidate;
            }
            seq = store.add_to_counter(Counter::Added, 1)?;
        },
    };
    let fresh = Version {
        priority: req.priority,
        seq,
        due_at: req.due_at,
        added_at: now,
        max_attempts: req.max_attempts,
        backoff: req.backoff.clone(),
        expire_at: req.expire_at,
        group: req.group.map(<[u8]>::to_vec),
        payload: req.payload.to_vec(),
    };
    match existing {
        Some(mut current) if current.state == State::Inflight => {
            current.replacement = Some(Box::new(fresh));
            store.put_message(&id, &current)?;
        }
        Some(current) => {
            unindex(store, &id, &current)?;
            sync_expiry(store, &id, live_expiry(&current), fresh.expire_at)?;
            // The new version queues up in its group like a new message;
            // a group the old one held goes to the earliest-due of the new
            // version and the group's waiting messages.
            let freed = free_group(store, &id, &current)?;
            place(store, now, &id, fresh.into_message())?;
            if let Some(group) = freed {
                hand_on(store, now, group)?;
            }
        }
        None => {
            sync_expiry(store, &id, None, fresh.expire_at)?;
            place(store, now, &id, fresh.into_message())?;
        }
    }
    store.event(Event::Add);
    Ok(Some(id))
}

/// Takes up to `count` ready messages, leasing each until `lease_deadline`.
pub fn pop(store: &mut impl Store, count: usize, lease_deadline: u64) -> Result<Vec<Delivery>> {
    let mut deliveries = Vec::new();
    for (member, _) in store.index_range(Index::Ready, f64::INFINITY, count)? {
        let id = id_of_ready_member(&member);
        let message = load_or_set_aside(store, id)?;
        // The entry goes in every case: delivered, or pointing at nothing valid.
        store.index_remove(Index::Ready, &member)?;
        let Some(mut message) = message else {
            continue;
        };
        if !message.is_scheduled() || ready_member(id, &message) != member {
            continue; // a stale entry: the message is indexed elsewhere
        }
        message.state = State::Inflight;
        message.attempt = message.attempt.saturating_add(1);
        message.lease_deadline = Some(lease_deadline);
        store.index_add(Index::Inflight, lease_deadline as f64, id)?;
        store.put_message(id, &message)?;
        deliveries.push(Delivery {
            id: id.to_vec(),
            attempt: message.attempt,
            payload: message.payload,
        });
    }
    if !deliveries.is_empty() {
        store.add_to_counter(Counter::Delivered, deliveries.len() as u64)?;
        store.event(Event::Pop);
    }
    Ok(deliveries)
}

/// Ends deliveries successfully. Returns how many of the ids were in
/// flight. Every id is read before anything is written, so an unreadable
/// record fails the command without a change.
pub fn ack(store: &mut impl Store, now: u64, ids: &[&[u8]]) -> Result<u64> {
    let mut inflight: Vec<(&[u8], Message)> = Vec::new();
    for id in distinct(ids) {
        if let Some(message) = store.message(id)? {
            if message.state == State::Inflight {
                inflight.push((id, message));
            }
        }
    }
    for (id, message) in &mut inflight {
        store.index_remove(Index::Inflight, id)?;
        release_group(store, now, id, message)?;
        match message.replacement.take() {
            Some(newer) => {
                install(store, now, id, message.expire_at, *newer)?;
            }
            None => {
                sync_expiry(store, id, message.expire_at, None)?;
                store.delete_message(id)?;
            }
        }
    }
    let count = inflight.len() as u64;
    if count > 0 {
        store.add_to_counter(Counter::Acked, count)?;
        store.event(Event::Ack);
    }
    Ok(count)
}

/// Deletes messages in any state. Returns how many existed. A record that
/// cannot be read is deleted too: CANCEL is how an operator clears it.
pub fn cancel(store: &mut impl Store, now: u64, ids: &[&[u8]]) -> Result<u64> {
    let mut found: Vec<(&[u8], Option<Message>)> = Vec::new();
    for id in distinct(ids) {
        match store.message(id) {
            Ok(Some(message)) => found.push((id, Some(message))),
            Ok(None) => {}
            Err(DqError::Corrupt { .. }) => found.push((id, None)),
            Err(e) => return Err(e),
        }
    }
    for (id, message) in &found {
        match message {
            Some(message) => {
                unindex(store, id, message)?;
                sync_expiry(store, id, live_expiry(message), None)?;
            }
            None => {
                // Its ready or waiting entry, if any, cannot be named without
                // the record; POP and the group drop it as pointing at nothing.
                for index in [Index::Delayed, Index::Inflight, Index::Dead, Index::Expiry] {
                    store.index_remove(index, id)?;
                }
            }
        }
        store.delete_message(id)?;
    }
    // Only once all are gone, so that a freed group is not handed to a
    // message this same command cancels.
    for (id, message) in &found {
        if let Some(message) = message {
            release_group(store, now, id, message)?;
        }
    }
    let cancelled = found.len() as u64;
    if cancelled > 0 {
        store.add_to_counter(Counter::Cancelled, cancelled)?;
        store.event(Event::Cancel);
    }
    Ok(cancelled)
}

/// Moves up to `limit` delayed messages whose time has come to ready.
/// Returns how many index entries it handled.
pub fn promote_due(store: &mut impl Store, now: u64, limit: usize) -> Result<usize> {
    let due = store.index_range(Index::Delayed, now as f64, limit)?;
    for (id, _) in &due {
        let message = load_or_set_aside(store, id)?;
        store.index_remove(Index::Delayed, id)?;
        match message.filter(|m| m.state == State::Delayed) {
            // The common case, made cheap: the record stays as it is (its
            // state still says delayed; see `get`), only the index moves.
            Some(message) if message.group.is_none() => {
                let member = ready_member(id, &message);
                store.index_add(Index::Ready, ready_score(message.priority), &member)?;
                store.event(Event::Ready);
            }
            Some(message) => {
                place(store, now, id, message)?;
            }
            None => {}
        }
    }
    Ok(due.len())
}

/// Ends up to `limit` leases that ran out. Each is a failed attempt: the
/// message is ready again at once (the next POP delivers it with the next
/// attempt number), or dead when it has used its attempts. A newer version
/// written while it was in flight takes its place instead. Returns how many
/// index entries it handled.
pub fn expire_leases(
    store: &mut impl Store,
    now: u64,
    limit: usize,
    policy: &Policy,
) -> Result<usize> {
    let expired = store.index_range(Index::Inflight, now as f64, limit)?;
    let mut count = 0;
    for (id, _) in &expired {
        let message = load_or_set_aside(store, id)?;
        store.index_remove(Index::Inflight, id)?;
        let Some(message) = message.filter(|m| m.state == State::Inflight) else {
            continue;
        };
        // Ready at once, keeping its place among ready messages.
        let retry_at = message.due_at;
        fail_delivery(
            store,
            now,
            id,
            message,
            policy,
            DeathReason::LeaseExpired,
            retry_at,
        )?;
        count += 1;
    }
    if count > 0 {
        store.add_to_counter(Counter::LeaseExpired, count)?;
        store.event(Event::LeaseExpired);
    }
    Ok(expired.len())
}

/// NACK: the delivery failed. The next attempt is due after `delay`, or
/// after the message's backoff for the attempt that failed; with no
/// attempts left the message is dead. Returns where the message went, or
/// `None` when the id was not in flight.
pub fn nack(
    store: &mut impl Store,
    now: u64,
    id: &[u8],
    delay: Option<u64>,
    policy: &Policy,
) -> Result<Option<Placed>> {
    let Some(message) = store.message(id)? else {
        return Ok(None);
    };
    if message.state != State::Inflight {
        return Ok(None);
    }
    store.index_remove(Index::Inflight, id)?;
    let wait = delay.unwrap_or_else(|| policy.backoff_for(&message).0.delay(message.attempt));
    let retry_at = now.saturating_add(wait).min(MAX_TIME_MS);
    let placed = fail_delivery(store, now, id, message, policy, DeathReason::Nack, retry_at)?;
    store.add_to_counter(Counter::Nacked, 1)?;
    store.event(Event::Nack);
    Ok(Some(placed))
}

/// A delivery ended without ACK: a waiting newer version takes the
/// message's place; else it is retried at `retry_at`, or dies when its
/// attempts are used up. Returns the resulting state.
fn fail_delivery(
    store: &mut impl Store,
    now: u64,
    id: &[u8],
    mut message: Message,
    policy: &Policy,
    reason: DeathReason,
    retry_at: u64,
) -> Result<Placed> {
    if let Some(newer) = message.replacement.take() {
        release_group(store, now, id, &message)?;
        return install(store, now, id, message.expire_at, *newer);
    }
    let (max_attempts, _) = policy.max_attempts_for(&message);
    if message.attempt >= max_attempts {
        return bury(store, now, id, message, reason);
    }
    // It keeps its group: the retry goes before the group's next message.
    message.due_at = retry_at;
    let placed = place(store, now, id, message)?;
    store.add_to_counter(Counter::Retried, 1)?;
    Ok(placed)
}

/// A newer version takes the place of `old`, whose delivery ended.
fn install(
    store: &mut impl Store,
    now: u64,
    id: &[u8],
    old_expiry: Option<u64>,
    newer: Version,
) -> Result<Placed> {
    sync_expiry(store, id, old_expiry, newer.expire_at)?;
    place(store, now, id, newer.into_message())
}

/// Makes a message, already out of its state's index, dead, freeing its
/// group.
fn bury(
    store: &mut impl Store,
    now: u64,
    id: &[u8],
    mut message: Message,
    reason: DeathReason,
) -> Result<Placed> {
    sync_expiry(store, id, message.expire_at, None)?;
    message.state = State::Dead;
    message.lease_deadline = None;
    message.death = Some(Death { reason, at: now });
    store.index_add(Index::Dead, now as f64, id)?;
    store.put_message(id, &message)?;
    release_group(store, now, id, &message)?;
    store.add_to_counter(Counter::DeadLettered, 1)?;
    store.event(Event::Dead);
    Ok(Placed {
        state: State::Dead,
        due_at: message.due_at,
    })
}

/// Dead-letters up to `limit` messages whose TTL ran out, in any state but
/// dead, with reason `expired`. A newer version waiting behind an expired
/// in-flight message takes its place instead. Returns how many index
/// entries it handled.
pub fn expire_ttl(store: &mut impl Store, now: u64, limit: usize) -> Result<usize> {
    let due = store.index_range(Index::Expiry, now as f64, limit)?;
    for (id, _) in &due {
        let message = load_or_set_aside(store, id)?;
        store.index_remove(Index::Expiry, id)?;
        let Some(mut message) = message else {
            continue;
        };
        if message.state == State::Dead || message.expire_at.is_none_or(|at| at > now) {
            continue; // a stale entry
        }
        unindex(store, id, &message)?;
        message.expire_at = None; // its entry is gone already
        match message.replacement.take() {
            Some(newer) => {
                release_group(store, now, id, &message)?;
                install(store, now, id, None, *newer)?;
            }
            None => {
                bury(store, now, id, message, DeathReason::Expired)?;
                store.add_to_counter(Counter::Expired, 1)?;
            }
        }
    }
    Ok(due.len())
}

/// Moves a lease deadline. Returns the new deadline, or `None` when the id
/// is not in flight.
pub fn touch(store: &mut impl Store, id: &[u8], lease_deadline: u64) -> Result<Option<u64>> {
    let Some(mut message) = store.message(id)? else {
        return Ok(None);
    };
    if message.state != State::Inflight {
        return Ok(None);
    }
    message.lease_deadline = Some(lease_deadline);
    store.index_add(Index::Inflight, lease_deadline as f64, id)?;
    store.put_message(id, &message)?;
    store.event(Event::Touch);
    Ok(Some(lease_deadline))
}

/// Dead messages back to ready, with fresh attempts, as if added now.
/// Returns how many moved.
pub fn redrive(store: &mut impl Store, now: u64, which: Redrive) -> Result<u64> {
    let ids: Vec<Vec<u8>> = match which {
        Redrive::Oldest(n) => store
            .index_range(Index::Dead, f64::INFINITY, n)?
            .into_iter()
            .map(|(id, _)| id)
            .collect(),
        Redrive::Ids(ids) => ids.iter().map(|id| id.to_vec()).collect(),
    };
    // Read everything before writing; an unreadable record stays where it
    // is (DQ.CANCEL removes it) and the others move.
    let mut dead: Vec<(Vec<u8>, Message)> = Vec::new();
    for id in distinct(&ids) {
        if let Ok(Some(message)) = store.message(id) {
            if message.state == State::Dead {
                dead.push((id.to_vec(), message));
            }
        }
    }
    for (id, mut message) in dead.iter().cloned() {
        store.index_remove(Index::Dead, &id)?;
        message.attempt = 0;
        message.death = None;
        message.due_at = now;
        // Its TTL counted from an ADD long past: a redriven message has none.
        message.expire_at = None;
        place(store, now, &id, message)?;
    }
    let count = dead.len() as u64;
    if count > 0 {
        store.add_to_counter(Counter::Redriven, count)?;
        store.event(Event::Redrive);
    }
    Ok(count)
}

/// Looks at up to `count` messages of one state, in the order they would
/// leave it. Unreadable records are left out.
pub fn peek(store: &mut impl Store, state: State, count: usize) -> Result<Vec<(Vec<u8>, Message)>> {
    let mut found = Vec::new();
    for index in indexes_of(state) {
        for (member, _) in store.index_range(index, f64::INFINITY, count - found.len())? {
            let id = id_of_member(index, &member);
            if let Ok(Some(mut message)) = store.message(id) {
                if index == Index::Ready {
                    message.state = State::Ready; // see `get`
                }
                found.push((id.to_vec(), message));
            }
        }
    }
    Ok(found)
}

/// Deletes every message of one state, or of the whole queue. Counters and
/// settings stay. Returns how many messages were deleted.
pub fn purge(store: &mut impl Store, now: u64, state: Option<State>) -> Result<u64> {
    let count = match state {
        None => {
            let count = store.message_count()?;
            for index in Index::ALL {
                store.clear_index(index)?;
            }
            store.clear_messages()?;
            store.clear_groups()?;
            count
        }
        Some(state) => {
            let has_ttls = store.index_len(Index::Expiry)? > 0;
            let has_groups = store.has_groups()?;
            let mut grouped = Vec::new();
            let mut count = 0;
            for index in indexes_of(state) {
                let members = store.index_range(index, f64::INFINITY, usize::MAX)?;
                for (member, _) in &members {
                    let id = id_of_member(index, member);
                    if has_ttls {
                        store.index_remove(Index::Expiry, id)?;
                    }
                    if has_groups {
                        if let Ok(Some(m)) = store.message(id) {
                            grouped.extend(m.group.is_some().then(|| (id.to_vec(), m)));
                        }
                    }
                    store.delete_message(id)?;
                }
                store.clear_index(index)?;
                count += members.len() as u64;
            }
            // Groups whose holder went are handed on only now, so that what
            // becomes ready is not purged with the rest.
            for (id, message) in &grouped {
                release_group(store, now, id, message)?;
            }
            count
        }
    };
    if count > 0 {
        store.add_to_counter(Counter::Purged, count)?;
        store.event(Event::Purge);
    }
    Ok(count)
}

/// The indexes that hold the messages reported in `state`, in leaving
/// order: messages held back by their group are already due, so they come
/// before the delayed ones.
fn indexes_of(state: State) -> Vec<Index> {
    match state {
        State::Delayed | State::Waiting => vec![Index::Waiting, Index::Delayed],
        state => vec![index_of(state)],
    }
}

/// The message id in an index member.
fn id_of_member(index: Index, member: &[u8]) -> &[u8] {
    match index {
        Index::Ready => id_of_ready_member(member),
        Index::Waiting => id_of_waiting_member(member),
        _ => member,
    }
}

/// The index that holds messages in `state`.
fn index_of(state: State) -> Index {
    match state {
        State::Delayed => Index::Delayed,
        State::Ready => Index::Ready,
        State::Inflight => Index::Inflight,
        State::Dead => Index::Dead,
        State::Waiting => Index::Waiting,
    }
}

/// The earliest time the timer has work in this queue: a delayed message
/// falling due, a lease ending or a TTL running out.
pub fn next_due(store: &mut impl Store) -> Result<Option<u64>> {
    let mut earliest = None;
    for index in [Index::Delayed, Index::Inflight, Index::Expiry] {
        if let Some((_, score)) = store.index_range(index, f64::INFINITY, 1)?.first() {
            // A score written by hand may be anything; keep it a valid time.
            let at = score.clamp(0.0, MAX_TIME_MS as f64) as u64;
            earliest = Some(earliest.map_or(at, |e: u64| e.min(at)));
        }
    }
    Ok(earliest)
}

/// Priorities looked at to find the oldest ready message.
const MAX_PRIORITY_GROUPS: usize = 1024;

pub fn stats(store: &mut impl Store) -> Result<Stats> {
    let mut counters = Vec::with_capacity(Counter::ALL.len());
    for counter in Counter::ALL {
        counters.push((counter, store.counter(counter)?));
    }
    // Within one priority, ready members start with their due time, so the
    // head of each priority is that priority's earliest-due message.
    let mut oldest_ready_since: Option<u64> = None;
    for (member, _) in store.index_score_heads(Index::Ready, MAX_PRIORITY_GROUPS)? {
        if let Ok(Some(m)) = store.message(id_of_ready_member(&member)) {
            let since = m.due_at.max(m.added_at);
            oldest_ready_since = Some(oldest_ready_since.map_or(since, |o| o.min(since)));
        }
    }
    let next_due_at = store
        .index_range(Index::Delayed, f64::INFINITY, 1)?
        .first()
        .map(|(_, score)| score.clamp(0.0, MAX_TIME_MS as f64) as u64);
    Ok(Stats {
        delayed: store.index_len(Index::Delayed)? + store.index_len(Index::Waiting)?,
        ready: store.index_len(Index::Ready)?,
        inflight: store.index_len(Index::Inflight)?,
        dead: store.index_len(Index::Dead)?,
        counters,
        oldest_ready_since,
        next_due_at,
    })
}

/// Indexes a message that is not in flight: delayed until due; then ready,
/// unless another message holds its group, in which case it waits.
fn place(store: &mut impl Store, now: u64, id: &[u8], mut message: Message) -> Result<Placed> {
    message.lease_deadline = None;
    message.death = None;
    if message.due_at > now {
        message.state = State::Delayed;
        store.index_add(Index::Delayed, message.due_at as f64, id)?;
    } else if take_group(store, id, &message)? {
        message.state = State::Ready;
        store.index_add(
            Index::Ready,
            ready_score(message.priority),
            &ready_member(id, &message),
        )?;
        store.event(Event::Ready);
    } else {
        message.state = State::Waiting;
        store.index_add(Index::Waiting, 0.0, &waiting_member(id, &message))?;
    }
    store.put_message(id, &message)?;
    if let (State::Waiting, Some(group)) = (message.state, &message.group) {
        hand_on(store, now, group)?; // when the group was free
    }
    Ok(Placed {
        state: message.state,
        due_at: message.due_at,
    })
}

/// Where a message went: delayed or ready, due when.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Placed {
    pub state: State,
    pub due_at: u64,
}

/// Makes `id` the holder of its message's group if it may have it. True
/// when the message may be ready (it has no group, or holds it now).
fn take_group(store: &mut impl Store, id: &[u8], message: &Message) -> Result<bool> {
    let Some(group) = message.group.as_deref() else {
        return Ok(true);
    };
    match store.group_holder(group)? {
        Some(holder) if holder == id => return Ok(true),
        Some(holder) if store.message_exists(&holder)? => return Ok(false),
        // Only hand edits leave a holder without a record: it must not
        // block the group forever.
        Some(_) => store.set_group_holder(group, None)?,
        None => {}
    }
    // A free group goes to the earliest-due of those who want it: this
    // message joins the line if others are already in it (`place` then
    // hands the group on).
    if first_waiting(store, group)?.is_some() {
        return Ok(false);
    }
    store.set_group_holder(group, Some(id))?;
    Ok(true)
}

/// The group's earliest-due waiting member, if any.
fn first_waiting(store: &mut impl Store, group: &[u8]) -> Result<Option<Vec<u8>>> {
    let prefix = group_prefix(group);
    Ok(store
        .index_first_from(Index::Waiting, &prefix)?
        .filter(|member| member.starts_with(&prefix)))
}

/// Frees `message`'s group if it (as it was) held it; returns the group,
/// which the caller must hand on.
fn free_group<'m>(
    store: &mut impl Store,
    id: &[u8],
    message: &'m Message,
) -> Result<Option<&'m [u8]>> {
    let Some(group) = message.group.as_deref() else {
        return Ok(None);
    };
    if store.group_holder(group)?.as_deref() != Some(id) {
        return Ok(None);
    }
    store.set_group_holder(group, None)?;
    Ok(Some(group))
}

/// `message` (as it was) leaves its group: if it held the group, the
/// group's first waiting message becomes ready and holds it.
fn release_group(store: &mut impl Store, now: u64, id: &[u8], message: &Message) -> Result<()> {
    if let Some(group) = free_group(store, id, message)? {
        hand_on(store, now, group)?;
    }
    Ok(())
}

/// A free group goes to its earliest-due waiting message, which is ready.
fn hand_on(store: &mut impl Store, now: u64, group: &[u8]) -> Result<()> {
    if store.group_holder(group)?.is_some() {
        return Ok(());
    }
    while let Some(member) = first_waiting(store, group)? {
        store.index_remove(Index::Waiting, &member)?;
        let next_id = id_of_waiting_member(&member);
        let next = load_or_set_aside(store, next_id)?;
        // Entries not backed by a waiting record are dropped on the way.
        let Some(next) = next.filter(|m| m.state == State::Waiting) else {
            continue;
        };
        if waiting_member(next_id, &next) == member {
            store.set_group_holder(group, Some(next_id))?;
            // It was due when it began to wait, whatever the clock says
            // now (a promoted replica's clock may be behind).
            let due = now.max(next.due_at);
            place(store, due, next_id, next)?;
            break;
        }
    }
    Ok(())
}

/// One message as clients see it: a record the timer promoted still says
/// `Delayed` (promotion moves only the index entry, the cheapest move a
/// burst can make), so a delayed record that has left the delayed index is
/// ready.
pub fn get(store: &mut impl Store, id: &[u8]) -> Result<Option<Message>> {
    let Some(mut message) = store.message(id)? else {
        return Ok(None);
    };
    if message.state == State::Delayed && !store.index_has(Index::Delayed, id)? {
        message.state = State::Ready;
    }
    Ok(Some(message))
}

/// Reads a message for a batch transition. A record that cannot be decoded
/// is reported through the store and skipped, so one bad record cannot stop
/// a queue or make the timer spin on it.
fn load_or_set_aside(store: &mut impl Store, id: &[u8]) -> Result<Option<Message>> {
    match store.message(id) {
        Err(problem @ DqError::Corrupt { .. }) => {
            store.set_aside(id, &problem);
            Ok(None)
        }
        other => other,
    }
}

/// The TTL deadline a message has an expiry entry for: dead ones have none.
fn live_expiry(message: &Message) -> Option<u64> {
    message.expire_at.filter(|_| message.state != State::Dead)
}

/// Moves a message's expiry entry from `old` to `new`.
fn sync_expiry(
    store: &mut impl Store,
    id: &[u8],
    old: Option<u64>,
    new: Option<u64>,
) -> Result<()> {
    if old == new {
        return Ok(());
    }
    match new {
        Some(at) => store.index_add(Index::Expiry, at as f64, id),
        None => store.index_remove(Index::Expiry, id),
    }
}

fn unindex(store: &mut impl Store, id: &[u8], message: &Message) -> Result<()> {
    match message.state {
        // Promoted without a rewrite, or not yet: one of the two is a no-op.
        State::Delayed => {
            store.index_remove(Index::Delayed, id)?;
            store.index_remove(Index::Ready, &ready_member(id, message))
        }
        State::Ready => store.index_remove(Index::Ready, &ready_member(id, message)),
        State::Waiting => store.index_remove(Index::Waiting, &waiting_member(id, message)),
        state => store.index_remove(index_of(state), id),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backoff::Backoff;
    use crate::store::MemoryStore;

    const LEASE: u64 = 30_000;

    /// An upsert of `id` due at `due_at` with priority `priority`.
    fn request<'a>(id: &'a [u8], payload: &'a [u8], due_at: u64, priority: i32) -> AddRequest<'a> {
        AddRequest {
            id: Some(id),
            payload,
            due_at,
            priority,
            mode: AddMode::Upsert,
            max_attempts: None,
            backoff: None,
            expire_at: None,
            group: None,
        }
    }

    fn add_at(s: &mut MemoryStore, now: u64, id: &str, due_at: u64) -> Option<Vec<u8>> {
        add(
            s,
            now,
            &AddRequest {
                id: Some(id.as_bytes()),
                payload: format!("p-{id}").as_bytes(),
                due_at,
                priority: 0,
                mode: AddMode::Upsert,
                max_attempts: None,
                backoff: None,
                expire_at: None,
                group: None,
            },
        )
        .unwrap()
    }

    fn ids(ds: &[Delivery]) -> Vec<String> {
        ds.iter()
            .map(|d| String::from_utf8(d.id.clone()).unwrap())
            .collect()
    }

    fn state(s: &mut MemoryStore, id: &str) -> Option<State> {
        get(s, id.as_bytes()).unwrap().map(|m| m.state)
    }

    #[test]
    fn promotion_moves_only_the_index_entry_and_the_message_reads_as_ready() {
        let mut s = MemoryStore::default();
        for id in ["a", "b", "c"] {
            add_at(&mut s, 100, id, 200);
        }
        let record = s.messages[b"a".as_slice()].clone();
        assert_eq!(promote_due(&mut s, 200, 10).unwrap(), 3);
        assert_eq!(
            s.messages[b"a".as_slice()],
            record,
            "the record is not rewritten"
        );
        assert_eq!(state(&mut s, "a"), Some(State::Ready));
        let peeked = peek(&mut s, State::Ready, 10).unwrap();
        assert!(peeked.iter().all(|(_, m)| m.state == State::Ready));
        // Every path that leaves the ready state finds it there.
        assert_eq!(cancel(&mut s, 200, &[b"b"]).unwrap(), 1);
        add_at(&mut s, 200, "c", 900); // replaced: delayed again
        assert_eq!(state(&mut s, "c"), Some(State::Delayed));
        assert_eq!(s.index(Index::Ready).members().count(), 1);
        assert_eq!(ids(&pop(&mut s, 10, 9_000).unwrap()), ["a"]);
        assert_eq!(state(&mut s, "a"), Some(State::Inflight));
        assert_eq!(s.index(Index::Ready).members().count(), 0);
    }

    #[test]
    fn due_now_is_ready_at_once_and_later_waits() {
        let mut s = MemoryStore::default();
        add_at(&mut s, 100, "now", 100);
        add_at(&mut s, 100, "past", 5);
        add_at(&mut s, 100, "later", 101);
        assert_eq!(state(&mut s, "now"), Some(State::Ready));
        assert_eq!(state(&mut s, "past"), Some(State::Ready));
        assert_eq!(state(&mut s, "later"), Some(State::Delayed));
        assert_eq!(next_due(&mut s).unwrap(), Some(101));
    }

    #[test]
    fn transitions_are_announced() {
        let mut s = MemoryStore::default();
        add_at(&mut s, 0, "later", 10);
        assert_eq!(s.events, [Event::Add]);
        promote_due(&mut s, 10, 10).unwrap();
        pop(&mut s, 1, LEASE).unwrap();
        ack(&mut s, 0, &[b"later"]).unwrap();
        assert_eq!(s.events, [Event::Add, Event::Ready, Event::Pop, Event::Ack]);
        s.events.clear();
        assert!(pop(&mut s, 1, LEASE).unwrap().is_empty());
        ack(&mut s, 0, &[b"nothing"]).unwrap();
        assert!(s.events.is_empty(), "no transition, no event");
    }

    #[test]
    fn never_early_promotion() {
        let mut s = MemoryStore::default();
        add_at(&mut s, 0, "a", 1000);
        assert_eq!(promote_due(&mut s, 999, 10).unwrap(), 0);
        assert!(pop(&mut s, 1, 999 + LEASE).unwrap().is_empty());
        assert_eq!(promote_due(&mut s, 1000, 10).unwrap(), 1);
        assert_eq!(ids(&pop(&mut s, 1, 1000 + LEASE).unwrap()), ["a"]);
    }

    #[test]
    fn pop_order_is_priority_then_due_then_insertion() {
        let mut s = MemoryStore::default();
        let mut put = |id: &str, due: u64, prio: i32| {
            add(&mut s, 50, &request(id.as_bytes(), b"", due, prio)).unwrap();
        };
        put("z-late", 20, 0);
        put("y-early", 10, 0);
        put("b-first", 20, 0);
        put("a-second", 20, 0);
        put("high", 40, 5);
        put("low", 1, -1);
        let got = pop(&mut s, 10, LEASE).unwrap();
        assert_eq!(
            ids(&got),
            ["high", "y-early", "z-late", "b-first", "a-second", "low"]
        );
        assert!(got.iter().all(|d| d.attempt == 1));
    }

    #[test]
    fn lease_expiry_redelivers_with_the_next_attempt() {
        let mut s = MemoryStore::default();
        add_at(&mut s, 0, "a", 0);
        let first = pop(&mut s, 1, 100).unwrap();
        assert_eq!(first[0].attempt, 1);
        assert!(
            pop(&mut s, 1, 100).unwrap().is_empty(),
            "invisible while leased"
        );
        assert_eq!(next_due(&mut s).unwrap(), Some(100));
        assert_eq!(
            expire_leases(&mut s, 99, 10, &Policy::default()).unwrap(),
            0
        );
        assert_eq!(
            expire_leases(&mut s, 100, 10, &Policy::default()).unwrap(),
            1
        );
        let again = pop(&mut s, 1, 200).unwrap();
        assert_eq!((ids(&again), again[0].attempt), (vec!["a".into()], 2));
        assert_eq!(s.counter(Counter::LeaseExpired).unwrap(), 1);
    }

    #[test]
    fn ack_counts_only_inflight_messages() {
        let mut s = MemoryStore::default();
        add_at(&mut s, 0, "a", 0);
        add_at(&mut s, 0, "b", 0);
        add_at(&mut s, 0, "later", 10);
        pop(&mut s, 1, LEASE).unwrap();
        assert_eq!(
            ack(&mut s, 0, &[b"a", b"a", b"b", b"later", b"nope"]).unwrap(),
            1
        );
        assert_eq!(state(&mut s, "a"), None);
        assert_eq!(state(&mut s, "b"), Some(State::Ready));
        assert_eq!(state(&mut s, "later"), Some(State::Delayed));
        assert_eq!(next_due(&mut s).unwrap(), Some(10));
    }

    #[test]
    fn cancel_removes_from_every_state() {
        let mut s = MemoryStore::default();
        add_at(&mut s, 0, "delayed", 10);
        add_at(&mut s, 0, "ready", 0);
        add_at(&mut s, 0, "inflight", 0);
        // Replacing "ready" gives it a new place behind "inflight".
        add_at(&mut s, 0, "ready", 0);
        let popped = pop(&mut s, 1, LEASE).unwrap();
        assert_eq!(ids(&popped), ["inflight"]);
        assert_eq!(
            cancel(&mut s, 0, &[b"delayed", b"ready", b"inflight", b"unknown"]).unwrap(),
            3
        );
        let st = stats(&mut s).unwrap();
        assert_eq!((st.delayed, st.ready, st.inflight), (0, 0, 0));
        assert!(s.messages.is_empty());
        assert_eq!(next_due(&mut s).unwrap(), None);
    }

    #[test]
    fn nx_and_xx() {
        let mut s = MemoryStore::default();
        let req = |mode, payload: &'static [u8]| AddRequest {
            id: Some(b"m"),
            payload,
            due_at: 0,
            priority: 0,
            mode,
            max_attempts: None,
            backoff: None,
            expire_at: None,
            group: None,
        };
        assert_eq!(
            add(&mut s, 0, &req(AddMode::OnlyExisting, b"x")).unwrap(),
            None
        );
        assert!(s.messages.is_empty());
        assert!(add(&mut s, 0, &req(AddMode::OnlyNew, b"v1"))
            .unwrap()
            .is_some());
        assert_eq!(add(&mut s, 0, &req(AddMode::OnlyNew, b"v2")).unwrap(), None);
        assert!(add(&mut s, 0, &req(AddMode::OnlyExisting, b"v3"))
            .unwrap()
            .is_some());
        let got = pop(&mut s, 5, LEASE).unwrap();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].payload, b"v3");
        assert_eq!(s.counter(Counter::Added).unwrap(), 2);
    }

    #[test]
    fn replace_moves_between_delayed_and_ready() {
        let mut s = MemoryStore::default();
        add_at(&mut s, 0, "m", 50);
        add_at(&mut s, 0, "m", 0);
        assert_eq!(state(&mut s, "m"), Some(State::Ready));
        assert_eq!(s.index(Index::Delayed).members().count(), 0);
        add_at(&mut s, 0, "m", 70);
        assert_eq!(s.index(Index::Ready).members().count(), 0);
        assert_eq!(next_due(&mut s).unwrap(), Some(70));
    }

    #[test]
    fn replace_while_inflight_waits_for_the_delivery_to_end() {
        let mut s = MemoryStore::default();
        add_at(&mut s, 0, "m", 0);
        pop(&mut s, 1, 100).unwrap();
        add(&mut s, 1, &request(b"m", b"v2", 1, 0)).unwrap();
        assert!(
            pop(&mut s, 1, 100).unwrap().is_empty(),
            "no concurrent delivery"
        );
        assert_eq!(ack(&mut s, 2, &[b"m"]).unwrap(), 1);
        assert_eq!(
            next_due(&mut s).unwrap(),
            None,
            "v2 is ready, nothing timed"
        );
        let next = pop(&mut s, 1, 200).unwrap();
        assert_eq!(
            (next[0].payload.as_slice(), next[0].attempt),
            (&b"v2"[..], 1)
        );

        // The same when the first delivery's lease runs out instead.
        add_at(&mut s, 3, "m", 3); // replaces v2 (in flight) again
        assert_eq!(
            expire_leases(&mut s, 200, 10, &Policy::default()).unwrap(),
            1
        );
        let next = pop(&mut s, 1, 300).unwrap();
        assert_eq!(
            (next[0].payload.as_slice(), next[0].attempt),
            (&b"p-m"[..], 1)
        );
    }

    #[test]
    fn generated_ids_are_unique_and_avoid_taken_ones() {
        let mut s = MemoryStore::default();
        // A client takes the id the generator would make next.
        add_at(&mut s, 7, "7-2", 0);
        let mut seen = std::collections::HashSet::new();
        for _ in 0..50 {
            let id = add(
                &mut s,
                7,
                &AddRequest {
                    id: None,
                    payload: b"x",
                    due_at: 0,
                    priority: 0,
                    mode: AddMode::Upsert,
                    max_attempts: None,
                    backoff: None,
                    expire_at: None,
                    group: None,
                },
            )
            .unwrap()
            .unwrap();
            assert!(seen.insert(id));
        }
        assert_eq!(s.messages.len(), 51);
    }

    #[test]
    fn an_unreadable_record_is_set_aside_and_the_queue_keeps_moving() {
        let mut s = MemoryStore::default();
        add_at(&mut s, 0, "bad-delayed", 10);
        add_at(&mut s, 0, "good-delayed", 10);
        add_at(&mut s, 0, "bad-ready", 0);
        add_at(&mut s, 0, "good-ready", 0);
        for id in ["bad-delayed", "bad-ready"] {
            s.messages
                .insert(id.as_bytes().to_vec(), b"garbage".to_vec());
        }
        assert_eq!(ids(&pop(&mut s, 10, LEASE).unwrap()), ["good-ready"]);
        assert_eq!(promote_due(&mut s, 10, 10).unwrap(), 2);
        assert_eq!(ids(&pop(&mut s, 10, LEASE).unwrap()), ["good-delayed"]);
        assert_eq!(
            s.set_aside,
            [b"bad-ready".to_vec(), b"bad-delayed".to_vec()]
        );
        // Nothing timed is left pointing at the bad records: no busy timer.
        assert_eq!(next_due(&mut s).unwrap(), Some(LEASE));
        // CANCEL clears what is left of them.
        assert_eq!(
            cancel(&mut s, 0, &[b"bad-delayed", b"bad-ready"]).unwrap(),
            2
        );
        assert!(!s.messages.contains_key(&b"bad-ready"[..]));
    }

    fn with_ttl<'a>(id: &'a [u8], due_at: u64, expire_at: u64) -> AddRequest<'a> {
        AddRequest {
            expire_at: Some(expire_at),
            ..request(id, b"p", due_at, 0)
        }
    }

    #[test]
    fn ttl_dead_letters_never_popped_and_popped_but_unacked_messages() {
        let mut s = MemoryStore::default();
        add(&mut s, 0, &with_ttl(b"waiting", 500, 100)).unwrap();
        add(&mut s, 0, &with_ttl(b"popped", 0, 100)).unwrap();
        add(&mut s, 0, &with_ttl(b"acked", 0, 100)).unwrap();
        pop(&mut s, 2, 10_000).unwrap();
        ack(&mut s, 0, &[b"acked"]).unwrap();
        assert_eq!(next_due(&mut s).unwrap(), Some(100));
        assert_eq!(expire_ttl(&mut s, 99, 10).unwrap(), 0);
        assert_eq!(expire_ttl(&mut s, 100, 10).unwrap(), 2);
        for id in ["waiting", "popped"] {
            let m = s.message(id.as_bytes()).unwrap().unwrap();
            assert_eq!(m.state, State::Dead, "{id}");
            assert_eq!(m.death.map(|d| d.reason), Some(DeathReason::Expired));
        }
        assert_eq!(s.index(Index::Inflight).members().count(), 0);
        assert_eq!(s.index(Index::Delayed).members().count(), 0);
        assert_eq!(s.index(Index::Expiry).members().count(), 0);
        assert_eq!(s.counter(Counter::Expired).unwrap(), 2);
        assert_eq!(next_due(&mut s).unwrap(), None);
        // Redriven, it has no TTL any more.
        redrive(&mut s, 200, Redrive::Oldest(10)).unwrap();
        assert_eq!(s.message(b"popped").unwrap().unwrap().expire_at, None);
        assert_eq!(next_due(&mut s).unwrap(), None);
    }

    #[test]
    fn ttl_follows_the_version_and_a_waiting_replacement_survives() {
        let mut s = MemoryStore::default();
        add(&mut s, 0, &with_ttl(b"m", 0, 100)).unwrap();
        // Replaced before delivery: the new version's TTL counts.
        add(&mut s, 10, &with_ttl(b"m", 0, 300)).unwrap();
        assert_eq!(expire_ttl(&mut s, 150, 10).unwrap(), 0);
        pop(&mut s, 1, 10_000).unwrap();
        // Replaced while in flight, without TTL: when the current version's
        // TTL ends, the newer one takes its place.
        add(&mut s, 20, &request(b"m", b"v3", 0, 0)).unwrap();
        assert_eq!(expire_ttl(&mut s, 300, 10).unwrap(), 1);
        let m = s.message(b"m").unwrap().unwrap();
        assert_eq!(
            (m.state, m.payload.as_slice(), m.expire_at),
            (State::Ready, &b"v3"[..], None)
        );
        assert_eq!(s.index(Index::Expiry).members().count(), 0);
    }

    #[test]
    fn cancel_clears_an_unreadable_dead_record_from_the_dead_index() {
        let mut s = MemoryStore::default();
        add_at(&mut s, 0, "m", 0);
        pop(&mut s, 1, LEASE).unwrap();
        nack(&mut s, 0, b"m", None, &policy(1, "1s")).unwrap();
        s.messages.insert(b"m".to_vec(), b"garbage".to_vec());
        assert_eq!(cancel(&mut s, 0, &[b"m"]).unwrap(), 1);
        assert_eq!(stats(&mut s).unwrap().dead, 0);
    }

    #[test]
    fn ack_with_an_unreadable_id_changes_nothing() {
        let mut s = MemoryStore::default();
        add_at(&mut s, 0, "a", 0);
        add_at(&mut s, 0, "b", 0);
        pop(&mut s, 2, LEASE).unwrap();
        s.messages.insert(b"b".to_vec(), b"garbage".to_vec());
        let before = s.messages.clone();
        assert!(matches!(
            ack(&mut s, 0, &[b"a", b"b"]),
            Err(DqError::Corrupt { .. })
        ));
        assert_eq!(s.messages, before);
        assert_eq!(s.index(Index::Inflight).members().count(), 2);
    }

    #[test]
    fn a_hand_written_huge_score_stays_a_valid_time() {
        let mut s = MemoryStore::default();
        s.index_add(Index::Inflight, 1e300, b"ghost").unwrap();
        assert_eq!(next_due(&mut s).unwrap(), Some(MAX_TIME_MS));
    }

    fn policy(max_attempts: u32, backoff: &str) -> Policy {
        crate::policy::QueueConfig {
            max_attempts: Some(max_attempts),
            backoff: Some(Backoff::parse(backoff.as_bytes()).unwrap()),
            lease_ms: None,
        }
        .resolve(&crate::policy::Settings::default())
    }

    #[test]
    fn nack_follows_the_backoff_then_dead_letters() {
        let mut s = MemoryStore::default();
        let p = policy(3, "15s,3m");
        add_at(&mut s, 0, "m", 0);
        let mut now = 0;
        let mut dues = Vec::new();
        for _ in 0..2 {
            pop(&mut s, 1, now + LEASE).unwrap();
            let placed = nack(&mut s, now, b"m", None, &p).unwrap().unwrap();
            assert_eq!(placed.state, State::Delayed);
            dues.push(placed.due_at - now);
            now = placed.due_at;
            promote_due(&mut s, now, 10).unwrap();
        }
        assert_eq!(dues, [15_000, 180_000]);
        let third = pop(&mut s, 1, now + LEASE).unwrap();
        assert_eq!(third[0].attempt, 3);
        let placed = nack(&mut s, now, b"m", None, &p).unwrap().unwrap();
        assert_eq!(placed.state, State::Dead);
        let m = s.message(b"m").unwrap().unwrap();
        assert_eq!(
            m.death,
            Some(Death {
                reason: DeathReason::Nack,
                at: now
            })
        );
        assert_eq!(
            next_due(&mut s).unwrap(),
            None,
            "dead messages need no timer"
        );
        assert_eq!(
            nack(&mut s, now, b"m", None, &p).unwrap(),
            None,
            "not in flight"
        );
        let st = stats(&mut s).unwrap();
        assert_eq!(st.dead, 1);
    }

    #[test]
    fn nack_with_delay_overrides_the_backoff_and_zero_is_ready_now() {
        let mut s = MemoryStore::default();
        let p = policy(5, "1h");
        add_at(&mut s, 0, "m", 0);
        pop(&mut s, 1, LEASE).unwrap();
        let placed = nack(&mut s, 10, b"m", Some(0), &p).unwrap().unwrap();
        assert_eq!((placed.state, placed.due_at), (State::Ready, 10));
        pop(&mut s, 1, LEASE).unwrap();
        let placed = nack(&mut s, 10, b"m", Some(500), &p).unwrap().unwrap();
        assert_eq!((placed.state, placed.due_at), (State::Delayed, 510));
    }

    #[test]
    fn lease_expiry_spends_attempts_and_dead_letters_too() {
        let mut s = MemoryStore::default();
        let p = policy(2, "1s");
        add_at(&mut s, 0, "m", 0);
        pop(&mut s, 1, 10).unwrap();
        expire_leases(&mut s, 10, 10, &p).unwrap();
        assert_eq!(state(&mut s, "m"), Some(State::Ready));
        pop(&mut s, 1, 20).unwrap();
        expire_leases(&mut s, 20, 10, &p).unwrap();
        let m = s.message(b"m").unwrap().unwrap();
        assert_eq!(m.state, State::Dead);
        assert_eq!(m.death.map(|d| d.reason), Some(DeathReason::LeaseExpired));
        assert_eq!(s.counter(Counter::DeadLettered).unwrap(), 1);
        assert_eq!(s.counter(Counter::Retried).unwrap(), 1);
    }

    #[test]
    fn message_options_beat_the_queue_policy() {
        let mut s = MemoryStore::default();
        add(
            &mut s,
            0,
            &AddRequest {
                id: Some(b"m"),
                payload: b"",
                due_at: 0,
                priority: 0,
                mode: AddMode::Upsert,
                max_attempts: Some(1),
                backoff: Some(Backoff::Fixed(7)),
                expire_at: None,
                group: None,
            },
        )
        .unwrap();
        pop(&mut s, 1, LEASE).unwrap();
        let placed = nack(&mut s, 0, b"m", None, &policy(10, "1h"))
            .unwrap()
            .unwrap();
        assert_eq!(placed.state, State::Dead, "MAXATTEMPTS 1 on the message");
    }

    #[test]
    fn redrive_by_count_and_by_id_gives_fresh_attempts() {
        let mut s = MemoryStore::default();
        let p = policy(1, "1s");
        for (i, id) in ["a", "b", "c"].iter().enumerate() {
            add_at(&mut s, i as u64, id, i as u64);
            pop(&mut s, 1, LEASE).unwrap();
            nack(&mut s, 100 + i as u64, id.as_bytes(), None, &p).unwrap();
        }
        assert_eq!(stats(&mut s).unwrap().dead, 3);
        assert_eq!(redrive(&mut s, 200, Redrive::Oldest(2)).unwrap(), 2);
        assert_eq!(
            state(&mut s, "c"),
            Some(State::Dead),
            "the newest death stays"
        );
        assert_eq!(
            redrive(&mut s, 200, Redrive::Ids(&[b"c", b"a", b"zzz"])).unwrap(),
            1
        );
        let got = pop(&mut s, 10, 300 + LEASE).unwrap();
        assert_eq!(got.len(), 3);
        assert!(got.iter().all(|d| d.attempt == 1));
        assert_eq!(s.counter(Counter::Redriven).unwrap(), 3);
    }

    #[test]
    fn purge_one_state_or_everything() {
        let mut s = MemoryStore::default();
        add_at(&mut s, 0, "d1", 50);
        add_at(&mut s, 0, "d2", 60);
        add_at(&mut s, 0, "r", 0);
        add_at(&mut s, 0, "i", 0);
        pop(&mut s, 1, LEASE).unwrap(); // r
        assert_eq!(purge(&mut s, 0, Some(State::Delayed)).unwrap(), 2);
        assert_eq!(state(&mut s, "d1"), None);
        assert_eq!(state(&mut s, "i"), Some(State::Ready));
        assert_eq!(purge(&mut s, 0, Some(State::Ready)).unwrap(), 1);
        assert_eq!(purge(&mut s, 0, Some(State::Dead)).unwrap(), 0);
        assert_eq!(purge(&mut s, 0, None).unwrap(), 1);
        assert!(s.messages.is_empty());
        assert_eq!(s.counter(Counter::Purged).unwrap(), 4);
        assert_eq!(s.counter(Counter::Added).unwrap(), 4, "counters stay");
    }

    #[test]
    fn touch_moves_the_lease_of_inflight_messages_only() {
        let mut s = MemoryStore::default();
        add_at(&mut s, 0, "m", 0);
        add_at(&mut s, 0, "r", 0);
        pop(&mut s, 1, 100).unwrap();
        assert_eq!(touch(&mut s, b"m", 500).unwrap(), Some(500));
        assert_eq!(touch(&mut s, b"r", 500).unwrap(), None);
        assert_eq!(touch(&mut s, b"nope", 500).unwrap(), None);
        assert_eq!(
            expire_leases(&mut s, 499, 10, &Policy::default()).unwrap(),
            0
        );
        assert_eq!(
            expire_leases(&mut s, 500, 10, &Policy::default()).unwrap(),
            1
        );
    }

    #[test]
    fn peek_shows_each_state_in_leaving_order() {
        let mut s = MemoryStore::default();
        add_at(&mut s, 0, "late", 90);
        add_at(&mut s, 0, "soon", 80);
        add_at(&mut s, 0, "r1", 0);
        add_at(&mut s, 0, "r2", 0);
        let ids = |v: Vec<(Vec<u8>, Message)>| {
            v.into_iter()
                .map(|(id, _)| String::from_utf8(id).unwrap())
                .collect::<Vec<_>>()
        };
        assert_eq!(
            ids(peek(&mut s, State::Delayed, 10).unwrap()),
            ["soon", "late"]
        );
        assert_eq!(ids(peek(&mut s, State::Ready, 1).unwrap()), ["r1"]);
        assert!(peek(&mut s, State::Dead, 10).unwrap().is_empty());
        assert_eq!(stats(&mut s).unwrap().ready, 2, "peek takes nothing");
    }

    #[test]
    fn stats_find_the_oldest_ready_across_priorities() {
        let mut s = MemoryStore::default();
        let mut put = |id: &str, due: u64, prio: i32| {
            add(&mut s, 1000, &request(id.as_bytes(), b"", due, prio)).unwrap();
        };
        put("hi", 500, 9);
        put("lo-old", 100, 0);
        put("lo-new", 700, 0);
        put("later", 5000, 0);
        let st = stats(&mut s).unwrap();
        assert_eq!(
            st.oldest_ready_since,
            Some(1000),
            "added at 1000, already due"
        );
        assert_eq!(st.next_due_at, Some(5000));
    }

    /// Long random sequences against the invariants: every message is in
    /// exactly the index its state names; no id is leased twice; attempts
    /// never shrink; a message only disappears by ACK or CANCEL.
    /// An upsert due at `due_at` in group `group`.
    fn grouped<'a>(id: &'a str, group: &'a str, due_at: u64) -> AddRequest<'a> {
        AddRequest {
            group: Some(group.as_bytes()),
            ..request(id.as_bytes(), b"", due_at, 0)
        }
    }

    fn pop_ids(s: &mut MemoryStore, count: usize) -> Vec<String> {
        ids(&pop(s, count, 1_000_000).unwrap())
    }

    #[test]
    fn a_group_delivers_one_at_a_time_and_others_flow_past() {
        let mut s = MemoryStore::default();
        for (id, group) in [("a1", "A"), ("a2", "A"), ("b1", "B"), ("a3", "A")] {
            add(&mut s, 10, &grouped(id, group, 10)).unwrap();
        }
        add(&mut s, 10, &request(b"free", b"", 10, 0)).unwrap();
        assert_eq!(state(&mut s, "a2"), Some(State::Waiting));
        assert_eq!(State::Waiting.name(), "delayed");
        assert_eq!(pop_ids(&mut s, 10), ["a1", "b1", "free"]);
        assert_eq!(stats(&mut s).unwrap().delayed, 2);
        assert!(pop_ids(&mut s, 10).is_empty(), "A is out");
        assert_eq!(ack(&mut s, 20, &[b"a1"]).unwrap(), 1);
        assert_eq!(pop_ids(&mut s, 10), ["a2"]);
        assert_eq!(ack(&mut s, 30, &[b"a2"]).unwrap(), 1);
        assert_eq!(pop_ids(&mut s, 10), ["a3"]);
        ack(&mut s, 40, &[b"a3", b"b1"]).unwrap();
        assert!(s.groups.is_empty(), "a group no one holds is forgotten");
    }

    #[test]
    fn a_group_keeps_due_order_not_add_order() {
        let mut s = MemoryStore::default();
        add(&mut s, 100, &grouped("first", "A", 100)).unwrap();
        add(&mut s, 100, &grouped("late", "A", 90)).unwrap();
        add(&mut s, 100, &grouped("early", "A", 50)).unwrap();
        add(&mut s, 100, &grouped("later", "A", 500)).unwrap();
        assert_eq!(pop_ids(&mut s, 10), ["first"]);
        let order: Vec<String> = peek(&mut s, State::Delayed, 10)
            .unwrap()
            .into_iter()
            .map(|(id, _)| String::from_utf8(id).unwrap())
            .collect();
        assert_eq!(
            order,
            ["early", "late", "later"],
            "waiting first, then delayed"
        );
        ack(&mut s, 600, &[b"first"]).unwrap();
        promote_due(&mut s, 600, 10).unwrap();
        assert_eq!(pop_ids(&mut s, 10), ["early"]);
        ack(&mut s, 600, &[b"early"]).unwrap();
        assert_eq!(pop_ids(&mut s, 10), ["late"]);
        ack(&mut s, 600, &[b"late"]).unwrap();
        assert_eq!(pop_ids(&mut s, 10), ["later"]);
    }

    #[test]
    fn a_group_stays_with_its_message_through_lease_expiry_and_retries() {
        let mut s = MemoryStore::default();
        let retry = policy(2, "fixed:100");
        add(&mut s, 0, &grouped("a1", "A", 0)).unwrap();
        add(&mut s, 0, &grouped("a2", "A", 0)).unwrap();
        assert_eq!(ids(&pop(&mut s, 10, 50).unwrap()), ["a1"]);
        expire_leases(&mut s, 50, 10, &retry).unwrap();
        let again = pop(&mut s, 10, 1000).unwrap();
        assert_eq!((ids(&again), again[0].attempt), (vec!["a1".into()], 2));
        // Its last attempt fails: dead, and the group moves on.
        nack(&mut s, 60, b"a1", None, &retry).unwrap();
        assert_eq!(state(&mut s, "a1"), Some(State::Dead));
        assert_eq!(pop_ids(&mut s, 10), ["a2"]);
        // A NACKed holder keeps the group until its retry is delivered.
        add(&mut s, 60, &grouped("a3", "A", 0)).unwrap();
        let placed = nack(&mut s, 70, b"a2", None, &retry).unwrap().unwrap();
        assert_eq!((placed.state, placed.due_at), (State::Delayed, 170));
        assert!(pop_ids(&mut s, 10).is_empty(), "a3 waits for a2's retry");
        promote_due(&mut s, 170, 10).unwrap();
        assert_eq!(pop_ids(&mut s, 10), ["a2"]);
        ack(&mut s, 180, &[b"a2"]).unwrap();
        assert_eq!(pop_ids(&mut s, 10), ["a3"]);
    }

    #[test]
    fn cancel_ttl_and_purge_hand_the_group_on() {
        let mut s = MemoryStore::default();
        for id in ["a1", "a2", "a3", "a4"] {
            add(&mut s, 0, &grouped(id, "A", 0)).unwrap();
        }
        // Cancelling the holder and the next in one command skips both.
        assert_eq!(cancel(&mut s, 5, &[b"a1", b"a2"]).unwrap(), 2);
        assert_eq!(state(&mut s, "a3"), Some(State::Ready));
        assert_eq!(purge(&mut s, 5, Some(State::Ready)).unwrap(), 1);
        assert_eq!(
            state(&mut s, "a4"),
            Some(State::Ready),
            "not purged with a3"
        );
        let mut ttl = grouped("t", "T", 0);
        ttl.expire_at = Some(10);
        add(&mut s, 0, &ttl).unwrap();
        add(&mut s, 0, &grouped("t2", "T", 0)).unwrap();
        expire_ttl(&mut s, 10, 10).unwrap();
        assert_eq!(state(&mut s, "t"), Some(State::Dead));
        assert_eq!(state(&mut s, "t2"), Some(State::Ready));
        assert_eq!(purge(&mut s, 20, None).unwrap(), 3);
        assert!(s.groups.is_empty() && s.index(Index::Waiting).members().count() == 0);
    }

    #[test]
    fn a_replaced_holder_queues_up_again_behind_its_group() {
        let mut s = MemoryStore::default();
        add(&mut s, 0, &grouped("a1", "A", 0)).unwrap();
        add(&mut s, 0, &grouped("a2", "A", 0)).unwrap();
        assert_eq!(pop_ids(&mut s, 10), ["a1"]);
        add(&mut s, 5, &grouped("a1", "A", 5)).unwrap();
        assert_eq!(ack(&mut s, 6, &[b"a1"]).unwrap(), 1);
        // a2 was due first; the newer a1 is delivered after it.
        assert_eq!(pop_ids(&mut s, 10), ["a2"]);
        ack(&mut s, 7, &[b"a2"]).unwrap();
        let d = pop(&mut s, 10, 1000).unwrap();
        assert_eq!((ids(&d), d[0].attempt), (vec!["a1".into()], 1));
        // Moving a waiting message to another group frees it at once.
        add(&mut s, 8, &grouped("a3", "A", 0)).unwrap();
        add(&mut s, 8, &grouped("a3", "B", 0)).unwrap();
        assert_eq!(pop_ids(&mut s, 10), ["a3"]);
    }

    /// Only hand edits can leave a group held by a message that is gone;
    /// the group must not stay blocked, and must still go in due order.
    #[test]
    fn a_vanished_holder_does_not_block_its_group() {
        let mut s = MemoryStore::default();
        add(&mut s, 0, &grouped("a1", "A", 0)).unwrap();
        add(&mut s, 5, &grouped("a2", "A", 5)).unwrap();
        assert_eq!(state(&mut s, "a2"), Some(State::Waiting));
        s.messages.remove(&b"a1"[..]);
        // The next message of the group finds the holder gone; the one
        // that was waiting, due first, goes first.
        add(&mut s, 10, &grouped("a3", "A", 10)).unwrap();
        assert_eq!(pop_ids(&mut s, 10), ["a2"]);
        ack(&mut s, 20, &[b"a2"]).unwrap();
        assert_eq!(pop_ids(&mut s, 10), ["a3"]);
    }

    /// A replaced holder competes with its group's waiting messages by due
    /// time, as a new message would.
    #[test]
    fn a_replaced_holder_due_earlier_than_the_waiters_goes_first() {
        let mut s = MemoryStore::default();
        add(&mut s, 300, &grouped("h", "A", 100)).unwrap();
        add(&mut s, 300, &grouped("w", "A", 200)).unwrap();
        add(&mut s, 300, &grouped("h", "A", 50)).unwrap();
        assert_eq!(state(&mut s, "w"), Some(State::Waiting));
        assert_eq!(pop_ids(&mut s, 10), ["h"]);
        // Due later than the waiter, it goes behind it.
        add(&mut s, 300, &grouped("x", "A", 300)).unwrap();
        ack(&mut s, 300, &[b"h"]).unwrap();
        add(&mut s, 300, &grouped("w", "A", 250)).unwrap();
        assert_eq!(pop_ids(&mut s, 10), ["w"]);
    }

    #[test]
    fn random_operations_keep_the_invariants() {
        let mut rng = 0x2545_f491_4f6c_dd1du64;
        let mut next = move |n: u64| {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng % n
        };
        let mut s = MemoryStore::default();
        let retry = policy(3, "exp:10:40");
        let mut now = 0;
        // id -> (lease deadline, group) of each delivery a consumer holds.
        let mut leased: std::collections::HashMap<Vec<u8>, (u64, Option<Vec<u8>>)> =
            Default::default();
        const GROUPS: [&[u8]; 3] = [b"g0", b"g1", b"g2"];
        let mut group_waits = 0;
        let mut attempts: std::collections::HashMap<Vec<u8>, u32> = Default::default();
        for _ in 0..20_000 {
            now += next(20);
            let id = format!("m{}", next(40)).into_bytes();
            match next(8) {
                0 => {
                    let mut req = request(&id, b"p", now + next(100), next(3) as i32);
                    req.expire_at = (next(3) == 0).then(|| now + next(400));
                    req.group = (next(2) == 0).then(|| GROUPS[next(3) as usize]);
                    add(&mut s, now, &req).unwrap();
                }
                1 => {
                    let deadline = now + next(200) + 1;
                    for d in pop(&mut s, next(4) as usize + 1, deadline).unwrap() {
                        if let Some((until, _)) = leased.get(&d.id) {
                            assert!(*until <= now, "{:?} delivered while leased", d.id);
                        }
                        let group = s.message(&d.id).unwrap().unwrap().group;
                        if let Some(g) = &group {
                            // The group is out only if its lease ran out
                            // (and the timer has not yet caught up).
                            let busy = leased.iter().any(|(other, (until, og))| {
                                other != &d.id && og.as_ref() == Some(g) && *until > now
                            });
                            assert!(!busy, "{:?} delivered while its group is out", d.id);
                        }
                        leased.insert(d.id.clone(), (deadline, group));
                        let before = attempts.insert(d.id.clone(), d.attempt);
                        assert!(before.is_none_or(|b| d.attempt >= b || d.attempt == 1));
                    }
                }
                2 => {
                    if ack(&mut s, now, &[&id]).unwrap() == 1 {
                        leased.remove(&id);
                    }
                }
                3 => {
                    cancel(&mut s, now, &[&id]).unwrap();
                    leased.remove(&id);
                    attempts.remove(&id);
                }
                5 => {
                    if nack(&mut s, now, &id, Some(next(50)), &retry)
                        .unwrap()
                        .is_some()
                    {
                        leased.remove(&id);
                    }
                }
                6 => {
                    redrive(&mut s, now, Redrive::Oldest(2)).unwrap();
                }
                _ => {
                    for (id, _) in s.index_range(Index::Expiry, now as f64, 1000).unwrap() {
                        leased.remove(&id);
                    }
                    expire_ttl(&mut s, now, 1000).unwrap();
                    let expired = s.index_range(Index::Inflight, now as f64, 1000).unwrap();
                    expire_leases(&mut s, now, 1000, &retry).unwrap();
                    promote_due(&mut s, now, 1000).unwrap();
                    for (id, _) in expired {
                        leased.remove(&id);
                    }
                }
            }
            // Each stored message is indexed exactly once, where its state says.
            let delayed = s.index(Index::Delayed);
            let ready = s.index(Index::Ready);
            let inflight = s.index(Index::Inflight);
            let dead = s.index(Index::Dead);
            let waiting = s.index(Index::Waiting);
            let indexed = delayed.members().count()
                + ready.members().count()
                + inflight.members().count()
                + dead.members().count()
                + waiting.members().count();
            group_waits += waiting.members().count();
            assert_eq!(indexed, s.messages.len());
            for id in s.messages.keys().cloned().collect::<Vec<_>>() {
                let id = &id;
                let m = get(&mut s, id).unwrap().unwrap();
                let found = match m.state {
                    State::Delayed => delayed
                        .members()
                        .any(|(x, sc)| x == id && sc as u64 == m.due_at),
                    State::Ready => ready.members().any(|(x, _)| x == ready_member(id, &m)),
                    State::Inflight => inflight
                        .members()
                        .any(|(x, sc)| x == id && Some(sc as u64) == m.lease_deadline),
                    State::Dead => dead.members().any(|(x, _)| x == id),
                    State::Waiting => waiting.members().any(|(x, _)| x == waiting_member(id, &m)),
                };
                // Ready and in-flight messages of a group hold it; a waiting
                // one has a holder to wait for.
                if let Some(g) = &m.group {
                    let holder = s.groups.get(g);
                    match m.state {
                        State::Ready | State::Inflight => assert_eq!(holder, Some(id)),
                        State::Waiting => assert!(holder.is_some_and(|h| h != id)),
                        _ => {}
                    }
                }
                assert!(found, "{m:?}");
                if m.state == State::Inflight {
                    assert!(leased.contains_key(id));
                }
                // A live message with a TTL has its expiry entry; a dead one has none.
                let entry = s
                    .index(Index::Expiry)
                    .members()
                    .find(|(x, _)| x == id)
                    .map(|(_, sc)| sc as u64);
                assert_eq!(entry, live_expiry(&m), "{m:?}");
            }
            assert!(s.index(Index::Expiry).members().count() <= s.messages.len());
            // Every held group is held by a live message of that group.
            for (g, holder) in &s.groups {
                let m = Message::decode(holder, &s.messages[holder]).unwrap();
                assert_eq!(m.group.as_ref(), Some(g));
                assert!(matches!(
                    m.state,
                    State::Ready | State::Inflight | State::Delayed
                ));
            }
        }
        assert!(group_waits > 0, "no message ever waited for its group");
        // The run went through every transition.
        for counter in [
            Counter::DeadLettered,
            Counter::Redriven,
            Counter::Nacked,
            Counter::LeaseExpired,
            Counter::Expired,
        ] {
            assert!(
                s.counter(counter).unwrap() > 0,
                "{counter:?} never happened"
            );
        }
    }
}
