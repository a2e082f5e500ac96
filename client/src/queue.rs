//! Handles on a queue and on a sharded queue: DQ.ADD with every option,
//! and the settling calls (ACK, NACK, TOUCH) for code that pops by itself.

use std::time::Duration;

use redis::{Cmd, Value};

use crate::admin::{self, Entry, Message, QueueConfig, State, Stats};
use crate::commands::{self, MAX_ERROR_BYTES};
use crate::delivery::NackState;
use crate::error::Error;
use crate::server::Connection;
use crate::shard::{random_id, Shards};

/// DQ.ADD's options; `Default` is a message ready at once with the
/// queue's settings.
#[derive(Clone, Debug, Default)]
pub struct AddOptions {
    /// `DELAY ms`: due this long from now.
    pub delay: Option<Duration>,
    /// `AT unix-ms`: due at this time.
    pub at_ms: Option<u64>,
    /// `ID id`: your id (1 to 1024 bytes); without it the server (or, for
    /// a sharded queue, this library) makes one.
    pub id: Option<Vec<u8>>,
    /// `NX`: only add; an existing id is left as it is.
    pub nx: bool,
    /// `XX`: only replace an existing id.
    pub xx: bool,
    pub priority: Option<i32>,
    pub max_attempts: Option<u32>,
    /// A backoff spec: `exp:1s:1h`, `fixed:30s`, `15s,3m,1h`.
    pub backoff: Option<String>,
    pub group: Option<Vec<u8>>,
    /// `TTL ms`: dead with reason `expired` unless acknowledged in time.
    pub ttl: Option<Duration>,
    /// Sharded queues only: the shard basis when there is no group (else
    /// the id is). Ignored by a plain queue.
    pub shard_key: Option<Vec<u8>>,
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

fn add_cmd(queue: &str, payload: &[u8], o: &AddOptions) -> Cmd {
    let mut cmd = redis::cmd("DQ.ADD");
    cmd.arg(queue).arg(payload);
    if let Some(d) = o.delay {
        cmd.arg("DELAY").arg(ms(d));
    }
    if let Some(at) = o.at_ms {
        cmd.arg("AT").arg(at);
    }
    if let Some(id) = &o.id {
        cmd.arg("ID").arg(id.as_slice());
    }
    if o.nx {
        cmd.arg("NX");
    }
    if o.xx {
        cmd.arg("XX");
    }
    if let Some(p) = o.priority {
        cmd.arg("PRIORITY").arg(p);
    }
    if let Some(n) = o.max_attempts {
        cmd.arg("MAXATTEMPTS").arg(n);
    }
    if let Some(b) = &o.backoff {
        cmd.arg("BACKOFF").arg(b);
    }
    if let Some(g) = &o.group {
        cmd.arg("GROUP").arg(g.as_slice());
    }
    if let Some(t) = o.ttl {
        cmd.arg("TTL").arg(ms(t));
    }
    cmd
}

/// DQ.NACK's options.
#[derive(Clone, Debug, Default)]
pub struct NackOptions {
    /// Ready again after this long; else the message's backoff decides.
    pub delay: Option<Duration>,
    /// The failure is permanent: dead now.
    pub dead: bool,
    /// The delivery this NACK is for; a later one gets
    /// [`Error::StaleDelivery`] and changes nothing.
    pub attempt: Option<u64>,
    /// Why it failed, kept as the message's last error (cut to 4096 bytes).
    pub error: Option<String>,
}

/// One dq queue.
#[derive(Clone)]
pub struct Queue {
    con: Connection,
    name: String,
}

impl Queue {
    pub fn new(con: Connection, name: impl Into<String>) -> Queue {
        Queue {
            con,
            name: name.into(),
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// DQ.ADD: the message's id, or `None` when NX found the id or XX did not.
    pub async fn add(
        &self,
        payload: &[u8],
        options: &AddOptions,
    ) -> Result<Option<Vec<u8>>, Error> {
        add(&self.con, &self.name, payload, options).await
    }

    /// DQ.ACK: how many of `ids` were in flight and are now gone.
    pub async fn ack(&self, ids: &[&[u8]]) -> Result<u64, Error> {
        ack(&self.con, &self.name, ids).await
    }

    /// DQ.NACK: the message's new state.
    pub async fn nack(&self, id: &[u8], options: &NackOptions) -> Result<NackState, Error> {
        nack(&self.con, &self.name, id, options).await
    }

    /// DQ.TOUCH: the new lease deadline (Unix ms).
    pub async fn touch(
        &self,
        id: &[u8],
        lease: Option<Duration>,
        attempt: Option<u64>,
    ) -> Result<u64, Error> {
        touch(&self.con, &self.name, id, lease, attempt).await
    }

    pub async fn stats(&self) -> Result<Stats, Error> {
        admin::stats(&mut self.con.clone(), self.name.as_bytes()).await
    }

    /// DQ.GET: `None` for an unknown id.
    pub async fn get(&self, id: &[u8]) -> Result<Option<Message>, Error> {
        admin::get(&mut self.con.clone(), self.name.as_bytes(), id).await
    }

    /// DQ.PEEK: up to `count` messages of `state` in the order they leave it.
    pub async fn peek(&self, state: State, count: usize) -> Result<Vec<Entry>, Error> {
        admin::peek(&mut self.con.clone(), self.name.as_bytes(), state, count).await
    }

    /// One DQ.SCAN page: the next cursor (0 at the end) and its entries.
    pub async fn scan_page(
        &self,
        state: Option<State>,
        cursor: u64,
        count: usize,
    ) -> Result<(u64, Vec<Entry>), Error> {
        admin::scan_page(
            &mut self.con.clone(),
            self.name.as_bytes(),
            state,
            cursor,
            count,
        )
        .await
    }

    /// Every dead message back to ready; how many moved.
    pub async fn redrive_all(&self) -> Result<u64, Error> {
        admin::redrive_all(&mut self.con.clone(), self.name.as_bytes()).await
    }

    /// Those of `ids` that are dead back to ready; how many moved.
    pub async fn redrive(&self, ids: &[&[u8]]) -> Result<u64, Error> {
        admin::redrive_ids(&mut self.con.clone(), self.name.as_bytes(), ids).await
    }

    /// DQ.CANCEL: how many of `ids` existed.
    pub async fn cancel(&self, ids: &[&[u8]]) -> Result<u64, Error> {
        admin::cancel(&mut self.con.clone(), self.name.as_bytes(), ids).await
    }

    /// DQ.PURGE of one state, or of every message.
    pub async fn purge(&self, state: Option<State>) -> Result<u64, Error> {
        admin::purge(&mut self.con.clone(), self.name.as_bytes(), state).await
    }

    pub async fn config(&self) -> Result<QueueConfig, Error> {
        admin::config(&mut self.con.clone(), self.name.as_bytes()).await
    }

    /// DQ.CONFIG SET: `("LEASE", "30000")`, `("BACKOFF", "DEFAULT")`, ...
    pub async fn config_set(&self, pairs: &[(&str, &str)]) -> Result<(), Error> {
        admin::config_set(&mut self.con.clone(), self.name.as_bytes(), pairs).await
    }
}

/// A queue spread over shards (docs/sharding.md): each message goes to the
/// shard of its group, else of its shard key, else of its id.
#[derive(Clone)]
pub struct ShardedQueue {
    con: Connection,
    shards: Shards,
}

impl ShardedQueue {
    pub fn new(con: Connection, name: &str, shards: u32) -> Result<ShardedQueue, Error> {
        Ok(ShardedQueue {
            con,
            shards: Shards::new(name, shards)?,
        })
    }

    pub fn shards(&self) -> &Shards {
        &self.shards
    }

    /// DQ.ADD on the message's shard, with an id made here when none is
    /// given; replies as [`Queue::add`] does.
    pub async fn add(
        &self,
        payload: &[u8],
        options: &AddOptions,
    ) -> Result<Option<Vec<u8>>, Error> {
        let mut made;
        let options = match options.id {
            Some(_) => options,
            None => {
                made = options.clone();
                made.id = Some(random_id()?.into_bytes());
                &made
            }
        };
        let basis = [&options.group, &options.shard_key, &options.id]
            .into_iter()
            .find_map(|b| b.as_deref())
            .unwrap_or_default();
        add(&self.con, self.shards.route(basis), payload, options).await
    }
}

/// Admin calls over every shard.
impl ShardedQueue {
    fn each(&self) -> impl Iterator<Item = Queue> + '_ {
        self.shards
            .names()
            .iter()
            .map(|n| Queue::new(self.con.clone(), n.clone()))
    }

    /// The shards' DQ.STATS summed; `oldest-ready-age-ms` is the oldest
    /// shard's, `next-due-at` the earliest.
    pub async fn stats(&self) -> Result<Stats, Error> {
        let mut sum = Stats::default();
        for shard in self.each() {
            let s = shard.stats().await?;
            for (total, part) in [
                (&mut sum.delayed, s.delayed),
                (&mut sum.ready, s.ready),
                (&mut sum.inflight, s.inflight),
                (&mut sum.dead, s.dead),
                (&mut sum.added, s.added),
                (&mut sum.delivered, s.delivered),
                (&mut sum.acked, s.acked),
                (&mut sum.nacked, s.nacked),
                (&mut sum.retried, s.retried),
                (&mut sum.lease_expired, s.lease_expired),
                (&mut sum.dead_lettered, s.dead_lettered),
                (&mut sum.expired, s.expired),
                (&mut sum.redriven, s.redriven),
                (&mut sum.cancelled, s.cancelled),
                (&mut sum.purged, s.purged),
            ] {
                *total += part;
            }
            sum.oldest_ready_age_ms = sum.oldest_ready_age_ms.max(s.oldest_ready_age_ms);
            sum.next_due_at = match (sum.next_due_at, s.next_due_at) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
        }
        Ok(sum)
    }

    /// DQ.GET on the shard that holds `id`, with that shard's name: the
    /// shard of `basis` when given (its group or shard key), else every
    /// shard in turn.
    pub async fn get(
        &self,
        id: &[u8],
        basis: Option<&[u8]>,
    ) -> Result<Option<(String, Message)>, Error> {
        for shard in self.candidates(basis) {
            if let Some(m) = shard.get(id).await? {
                return Ok(Some((shard.name, m)));
            }
        }
        Ok(None)
    }

    /// DQ.CANCEL of `ids` where they are (see [`ShardedQueue::get`]).
    pub async fn cancel(&self, ids: &[&[u8]], basis: Option<&[u8]>) -> Result<u64, Error> {
        let mut n = 0;
        for shard in self.candidates(basis) {
            n += shard.cancel(ids).await?;
        }
        Ok(n)
    }

    fn candidates(&self, basis: Option<&[u8]>) -> Vec<Queue> {
        match basis {
            Some(b) => vec![Queue::new(self.con.clone(), self.shards.route(b))],
            None => self.each().collect(),
        }
    }

    /// Up to `count` messages of `state` over all shards, by time (due time,
    /// lease deadline or time of death), each with its shard's name.
    pub async fn peek(&self, state: State, count: usize) -> Result<Vec<(String, Entry)>, Error> {
        let mut all = Vec::new();
        for shard in self.each() {
            let entries = shard.peek(state, count).await?;
            all.extend(entries.into_iter().map(|e| (shard.name.clone(), e)));
        }
        all.sort_by_key(|(_, e)| e.time);
        all.truncate(count);
        Ok(all)
    }

    /// Every dead message of every shard back to ready; how many moved.
    pub async fn redrive_all(&self) -> Result<u64, Error> {
        let mut n = 0;
        for shard in self.each() {
            n += shard.redrive_all().await?;
        }
        Ok(n)
    }

    /// DQ.PURGE on every shard; how many were deleted.
    pub async fn purge(&self, state: Option<State>) -> Result<u64, Error> {
        let mut n = 0;
        for shard in self.each() {
            n += shard.purge(state).await?;
        }
        Ok(n)
    }

    /// DQ.CONFIG SET on every shard (they share their settings).
    pub async fn config_set(&self, pairs: &[(&str, &str)]) -> Result<(), Error> {
        for shard in self.each() {
            shard.config_set(pairs).await?;
        }
        Ok(())
    }
}

async fn add(
    con: &Connection,
    queue: &str,
    payload: &[u8],
    o: &AddOptions,
) -> Result<Option<Vec<u8>>, Error> {
    let reply: Value = add_cmd(queue, payload, o)
        .query_async(&mut con.clone())
        .await?;
    match reply {
        Value::Nil => Ok(None),
        Value::BulkString(id) => Ok(Some(id)),
        other => Err(Error::Reply {
            command: "DQ.ADD",
            detail: format!("{other:?}"),
        }),
    }
}

async fn ack(con: &Connection, queue: &str, ids: &[&[u8]]) -> Result<u64, Error> {
    if ids.is_empty() {
        return Ok(0);
    }
    let mut cmd = redis::cmd("DQ.ACK");
    cmd.arg(queue);
    for id in ids {
        cmd.arg(*id);
    }
    Ok(cmd.query_async(&mut con.clone()).await?)
}

fn unknown(queue: &str, id: &[u8]) -> Error {
    Error::UnknownMessage {
        queue: queue.to_owned(),
        id: String::from_utf8_lossy(id).into_owned(),
    }
}

async fn nack(
    con: &Connection,
    queue: &str,
    id: &[u8],
    o: &NackOptions,
) -> Result<NackState, Error> {
    let mut cmd = redis::cmd("DQ.NACK");
    cmd.arg(queue).arg(id);
    if let Some(d) = o.delay {
        cmd.arg("DELAY").arg(ms(d));
    }
    if o.dead {
        cmd.arg("DEAD");
    }
    if let Some(a) = o.attempt {
        cmd.arg("ATTEMPT").arg(a);
    }
    if let Some(e) = o
        .error
        .as_deref()
        .map(|e| commands::truncate_error(e, MAX_ERROR_BYTES))
    {
        if !e.is_empty() {
            cmd.arg("ERROR").arg(e);
        }
    }
    let reply: Value = cmd.query_async(&mut con.clone()).await?;
    commands::parse_nack(&reply)?.ok_or_else(|| unknown(queue, id))
}

async fn touch(
    con: &Connection,
    queue: &str,
    id: &[u8],
    lease: Option<Duration>,
    attempt: Option<u64>,
) -> Result<u64, Error> {
    let mut cmd = redis::cmd("DQ.TOUCH");
    cmd.arg(queue).arg(id);
    if let Some(l) = lease {
        cmd.arg("LEASE").arg(ms(l).max(1));
    }
    if let Some(a) = attempt {
        cmd.arg("ATTEMPT").arg(a);
    }
    match cmd.query_async(&mut con.clone()).await? {
        Value::Int(deadline) => Ok(u64::try_from(deadline).unwrap_or_default()),
        Value::Nil => Err(unknown(queue, id)),
        other => Err(Error::Reply {
            command: "DQ.TOUCH",
            detail: format!("{other:?}"),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(cmd: &Cmd) -> Vec<String> {
        cmd.args_iter()
            .map(|a| match a {
                redis::Arg::Simple(b) => String::from_utf8_lossy(b).into_owned(),
                _ => "<not a plain argument>".into(),
            })
            .collect()
    }

    #[test]
    fn add_names_every_option() {
        let o = AddOptions {
            delay: Some(Duration::from_secs(2)),
            at_ms: Some(5),
            id: Some(b"a".to_vec()),
            nx: true,
            xx: true,
            priority: Some(-3),
            max_attempts: Some(4),
            backoff: Some("fixed:1s".into()),
            group: Some(b"g".to_vec()),
            ttl: Some(Duration::from_millis(900)),
            shard_key: Some(b"ignored".to_vec()),
        };
        assert_eq!(
            args(&add_cmd("q", b"p", &o)),
            [
                "DQ.ADD",
                "q",
                "p",
                "DELAY",
                "2000",
                "AT",
                "5",
                "ID",
                "a",
                "NX",
                "XX",
                "PRIORITY",
                "-3",
                "MAXATTEMPTS",
                "4",
                "BACKOFF",
                "fixed:1s",
                "GROUP",
                "g",
                "TTL",
                "900"
            ]
        );
        assert_eq!(
            args(&add_cmd("q", b"", &AddOptions::default())),
            ["DQ.ADD", "q", ""]
        );
    }
}
