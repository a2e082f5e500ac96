//! Handles on a queue and on a sharded queue: DQ.ADD with every option,
//! the settling calls (ACK, DONE, NACK, TOUCH with its PROGRESS) for code
//! that pops by itself, DQ.WAIT for a message's outcome, and the event
//! reader (DQ.EVENTS) of a queue and of a sharded queue.

use std::time::Duration;

use futures_util::{Stream, StreamExt};
use redis::aio::ConnectionLike;
use redis::{Cmd, Value};

use crate::admin::{self, Entry, GroupInfo, JobOutcome, Message, QueueConfig, State, Stats};
use crate::args::{check_attempt, check_id, message_options, ms, require};
use crate::commands::{self, MAX_ERROR_BYTES};
use crate::error::Error;
use crate::events::{self, Event, EventsOptions};
use crate::outcome::NackState;
use crate::reply::{opt_bytes, query, uint};
use crate::schedule::{Schedule, ScheduleInfo};
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
    /// `RETAIN ms`: how long the message is kept as `done` (with its
    /// result) once an ACK or DONE finishes it, over the queue's RETAIN
    /// and the module's `dq.retain-ms`; `Some(Duration::ZERO)`: not kept.
    pub retain: Option<Duration>,
    /// Sharded queues only: the shard basis when there is no group (else
    /// the id is). Ignored by a plain queue.
    pub shard_key: Option<Vec<u8>>,
}

/// `DQ.ADD queue payload ...`; refused when the server would refuse it for
/// its shape (DELAY with AT, NX with XX, XX without an id, an empty id).
fn add_cmd(queue: &str, payload: &[u8], o: &AddOptions) -> Result<Cmd, Error> {
    require(o.delay.is_none() || o.at_ms.is_none(), || {
        "delay and at_ms cannot be used together".into()
    })?;
    require(!(o.nx && o.xx), || {
        "nx and xx cannot be used together".into()
    })?;
    require(!o.xx || o.id.is_some(), || "xx needs an id".into())?;
    if let Some(id) = &o.id {
        check_id("id", id)?;
    }
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
    let (backoff, group) = (o.backoff.as_deref(), o.group.as_deref());
    message_options(&mut cmd, o.priority, o.max_attempts, backoff, group, o.ttl)?;
    if let Some(r) = o.retain {
        cmd.arg("RETAIN").arg(ms(r));
    }
    Ok(cmd)
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
    /// [`Error::Config`], with nothing sent, for options the server would
    /// refuse: `delay` with `at_ms`, `nx` with `xx`, `xx` without an id, an
    /// id or group of 0 or over 1024 bytes, `max_attempts` 0, an empty
    /// `backoff`, a `ttl` under 1 ms.
    pub async fn add(
        &self,
        payload: &[u8],
        options: &AddOptions,
    ) -> Result<Option<Vec<u8>>, Error> {
        add(&mut self.con.clone(), &self.name, payload, options).await
    }

    /// DQ.ACK: how many of `ids` were in flight and are now finished
    /// (gone, or kept as `done` without a result while a RETAIN holds).
    pub async fn ack(&self, ids: &[&[u8]]) -> Result<u64, Error> {
        ack(&mut self.con.clone(), &self.name, ids).await
    }

    /// DQ.DONE: as [`Queue::ack`], and each message keeps its result (any
    /// bytes) while its retention (RETAIN) lasts, for [`Queue::wait`],
    /// [`Queue::get`] and the dashboard; without a retention it is gone as
    /// after an ACK. How many of the ids were in flight and are now
    /// finished; no pairs: 0, nothing sent. [`Error::Config`], with nothing
    /// sent, for an empty id or a result over
    /// [`MAX_RESULT_BYTES`](crate::admin::MAX_RESULT_BYTES).
    pub async fn done(&self, results: &[(&[u8], &[u8])]) -> Result<u64, Error> {
        admin::done(&mut self.con.clone(), self.name.as_bytes(), results).await
    }

    /// The message's outcome (DQ.WAIT): [`JobOutcome::Done`] with its
    /// result, [`JobOutcome::Dead`] with its last error, or
    /// [`JobOutcome::Gone`]; `None` when it has none after `timeout` (it is
    /// still delayed, ready or in flight). A `timeout` of 0 looks once;
    /// otherwise the server answers the moment the outcome exists, on a
    /// connection of its own (kept for the next wait), so the queue's
    /// shared connection is never held up. A retry or a replacement of the
    /// message is no outcome: it waits on for the next delivery or version.
    /// Without a retention (RETAIN) a finished message is `Gone`: set one
    /// on the queue, or the message's own [`AddOptions::retain`], to get
    /// results back. [`Error::Config`], with nothing sent, for an empty id.
    pub async fn wait(&self, id: &[u8], timeout: Duration) -> Result<Option<JobOutcome>, Error> {
        wait(&self.con, &self.name, id, timeout).await
    }

    /// The queue's events after seq `after` (`None`: from the oldest it
    /// keeps, or when it keeps none from the next one written), oldest
    /// first, for ever: a `Stream` that reads them with DQ.EVENTS ...
    /// BLOCK on a connection of its own (opened from the queue's, as
    /// [`Queue::wait`]'s), sent again and again, so each event comes the
    /// moment it is written and the queue's shared connection never waits
    /// behind it. Keep the `seq` of the last event you handled and pass
    /// it here to resume after a restart of your program.
    ///
    /// The queue keeps its last n events only when asked
    /// (`config_set(&[("EVENTS", "10000")])`): with none kept, the stream
    /// waits for events that never come. Nothing is skipped silently; the
    /// stream's last item is an error, and it ends after it:
    /// - [`Error::Gap`]`{ oldest, .. }`: the events after your seq were
    ///   trimmed before you read them (size EVENTS for the longest you
    ///   may fall behind). Resume with `Some(oldest - 1)` to go on with
    ///   what is kept, or rebuild your view from DQ.SCAN.
    /// - [`Error::EventLogRestarted`]: the queue's last seq is below yours —
    ///   the queue was deleted (or replaced by RESTORE) and its log
    ///   started over; resume with `Some(0)` for the new log's events.
    /// - a connection error ([`Error::is_transient`]): resume from your
    ///   last seq when the server is back.
    ///
    /// Dropping the stream closes its connection, which ends the blocked
    /// read on the server too. COUNT 100 a read, each read blocking at
    /// most 10 s before it is sent again: [`Queue::events_with`] changes
    /// either.
    ///
    /// ```no_run
    /// # async fn demo(queue: dq_client::Queue) -> Result<(), dq_client::Error> {
    /// use dq_client::{EventKind, StreamExt};
    /// let mut events = std::pin::pin!(queue.events(None));
    /// while let Some(event) = events.next().await {
    ///     let event = event?;
    ///     if event.kind == EventKind::Dead {
    ///         println!("{:?} died: {:?}", event.id_lossy(), event.detail_lossy());
    ///     }
    /// }
    /// # Ok(()) }
    /// ```
    pub fn events(
        &self,
        after: Option<u64>,
    ) -> impl Stream<Item = Result<Event, Error>> + Send + 'static {
        let options = EventsOptions::default();
        // The default options are valid: the reader cannot be refused.
        events::stream(self.con.clone(), self.name.clone(), after, options)
            .expect("the default COUNT is valid")
    }

    /// [`Queue::events`] with its COUNT and BLOCK of each read;
    /// [`Error::Config`] for a count of 0 or over 10000, nothing sent.
    pub fn events_with(
        &self,
        after: Option<u64>,
        options: EventsOptions,
    ) -> Result<impl Stream<Item = Result<Event, Error>> + Send + 'static, Error> {
        events::stream(self.con.clone(), self.name.clone(), after, options)
    }

    /// The newest seq the queue has written (0 for a queue that never
    /// wrote one): `queue.events(Some(queue.last_event_seq().await?))`
    /// reads the events written from now on.
    pub async fn last_event_seq(&self) -> Result<u64, Error> {
        let page = admin::events(&mut self.con.clone(), self.name.as_bytes(), None, 1).await?;
        Ok(page.last_seq)
    }

    /// DQ.NACK: the message's new state. [`Error::Config`], with nothing
    /// sent, for `delay` with `dead`, or `attempt` 0.
    pub async fn nack(&self, id: &[u8], options: &NackOptions) -> Result<NackState, Error> {
        nack(&mut self.con.clone(), &self.name, id, options).await
    }

    /// DQ.TOUCH: the new lease deadline (Unix ms). A lease under 1 ms is
    /// sent as 1 ms; [`Error::Config`], with nothing sent, for a lease of 0
    /// or `attempt` 0.
    pub async fn touch(
        &self,
        id: &[u8],
        lease: Option<Duration>,
        attempt: Option<u64>,
    ) -> Result<u64, Error> {
        touch(&mut self.con.clone(), &self.name, id, lease, attempt, None).await
    }

    /// DQ.TOUCH ... PROGRESS: records how far the delivery got (any bytes,
    /// at most 64 KiB), shown by [`Queue::get`] as `progress` until the
    /// next delivery starts (a done message keeps the last); a TOUCH, so
    /// it renews the lease too (by `lease`, else the queue's). With
    /// `attempt` it is fenced: [`Error::StaleDelivery`] once that delivery
    /// is over. A worker's handler calls [`Delivery::progress`] instead.
    /// The new lease deadline (Unix ms); [`Error::Config`], with nothing
    /// sent, for progress over 64 KiB, a lease of 0 or `attempt` 0.
    ///
    /// [`Delivery::progress`]: crate::Delivery::progress
    pub async fn progress(
        &self,
        id: &[u8],
        progress: &[u8],
        lease: Option<Duration>,
        attempt: Option<u64>,
    ) -> Result<u64, Error> {
        let con = &mut self.con.clone();
        touch(con, &self.name, id, lease, attempt, Some(progress)).await
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
    /// and the flow control: `("RATE", "100/1s")`, `("MAXINFLIGHT", "20")`
    /// (`"0"` removes a limit); the groups' limits and order:
    /// `("GROUPLIMIT", "5")` (at most 5 of each group out at once;
    /// `"DEFAULT"`: 1), `("GROUPRATE", "10/1s")` (each group at most 10
    /// deliveries a second; `"0"` removes it) and `("ORDER", "FAIR")`
    /// ([`Order`](crate::Order); `"DEFAULT"`: PRIORITY). The server checks
    /// every pair first: one bad pair changes nothing.
    pub async fn config_set(&self, pairs: &[(&str, &str)]) -> Result<(), Error> {
        admin::config_set(&mut self.con.clone(), self.name.as_bytes(), pairs).await
    }

    /// DQ.PAUSE: POP delivers nothing from the queue until [`Queue::resume`],
    /// or until `for_` has passed. ADD, the timer, leases and schedules go
    /// on; blocked POPs are served the moment the pause ends.
    pub async fn pause(&self, for_: Option<Duration>) -> Result<(), Error> {
        admin::pause(&mut self.con.clone(), self.name.as_bytes(), for_).await
    }

    /// DQ.RESUME: ends the pause; whether the queue was paused.
    pub async fn resume(&self) -> Result<bool, Error> {
        admin::resume(&mut self.con.clone(), self.name.as_bytes()).await
    }

    /// DQ.PAUSE ... GROUP: POP delivers nothing of `group` until
    /// [`Queue::resume_group`], or until `for_` has passed; the rest of the
    /// queue goes on. Its ready messages go back to waiting (keeping their
    /// places), those in flight finish as usual. [`Error::Config`], with
    /// nothing sent, for a group of 0 or over 1024 bytes, or a pause of 0.
    pub async fn pause_group(
        &self,
        group: impl AsRef<[u8]>,
        for_: Option<Duration>,
    ) -> Result<(), Error> {
        let (con, queue) = (&mut self.con.clone(), self.name.as_bytes());
        admin::pause_group(con, queue, group.as_ref(), for_).await
    }

    /// DQ.RESUME ... GROUP: ends the group's pause; whether it was paused.
    pub async fn resume_group(&self, group: impl AsRef<[u8]>) -> Result<bool, Error> {
        let (con, queue) = (&mut self.con.clone(), self.name.as_bytes());
        admin::resume_group(con, queue, group.as_ref()).await
    }

    /// Every group of the queue (those whose names match the glob
    /// `pattern`, when given), in name order, with its counts and pause:
    /// DQ.GROUPS page after page, each looking at `count` groups (1 to
    /// 10000), until the cursor comes back 0. A group exists while it has
    /// a message waiting, ready, in flight or delayed for a retry, or a
    /// pause. [`Queue::groups_page`] reads one page.
    pub async fn groups(
        &self,
        pattern: Option<&str>,
        count: usize,
    ) -> Result<Vec<GroupInfo>, Error> {
        let (con, queue) = (&mut self.con.clone(), self.name.as_bytes());
        admin::groups(con, queue, pattern.map(str::as_bytes), count).await
    }

    /// One DQ.GROUPS page: the next cursor (`"0"` at the end; start with
    /// `"0"`) and its groups.
    pub async fn groups_page(
        &self,
        cursor: &str,
        pattern: Option<&str>,
        count: usize,
    ) -> Result<(String, Vec<GroupInfo>), Error> {
        let (con, queue) = (&mut self.con.clone(), self.name.as_bytes());
        admin::groups_page(con, queue, cursor, pattern.map(str::as_bytes), count).await
    }

    /// DQ.SCHEDULE: creates or replaces the recurring schedule `name`, whose
    /// runs add `payload` as `spec` says. Returns the next run time (Unix
    /// ms), or `None` when no run is left — or when [`Schedule::nx`] left
    /// an existing schedule untouched. [`Error::Config`], with nothing sent,
    /// for what the server would refuse: an empty name or one over 1007
    /// bytes, EVERY under 1 s, an empty CRON, a TZ with EVERY, END before
    /// START, LIMIT 0, a bad message option.
    pub async fn schedule(
        &self,
        name: impl AsRef<[u8]>,
        payload: &[u8],
        spec: &Schedule,
    ) -> Result<Option<u64>, Error> {
        admin::schedule(
            &mut self.con.clone(),
            self.name.as_bytes(),
            name.as_ref(),
            payload,
            spec,
        )
        .await
    }

    /// DQ.UNSCHEDULE: how many of `names` existed. The messages their runs
    /// already made stay.
    pub async fn unschedule<N: AsRef<[u8]>>(&self, names: &[N]) -> Result<u64, Error> {
        let names: Vec<&[u8]> = names.iter().map(AsRef::as_ref).collect();
        admin::unschedule(&mut self.con.clone(), self.name.as_bytes(), &names).await
    }

    /// DQ.SCHEDULES: the queue's schedules, by name.
    pub async fn schedules(&self) -> Result<Vec<ScheduleInfo>, Error> {
        admin::schedules(&mut self.con.clone(), self.name.as_bytes()).await
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
        add(
            &mut self.con.clone(),
            self.shards.route(basis),
            payload,
            options,
        )
        .await
    }
}

/// An event of a sharded queue: which shard wrote it (its index in
/// [`Shards::names`]) and the event, whose `seq` is that shard's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShardEvent {
    pub shard: usize,
    pub event: Event,
}

/// Where a reader of a sharded queue is: one seq per shard, since each
/// shard is a queue of its own that numbers its events from 1 (seqs of
/// two shards say nothing about which event came first). `None` for a
/// shard: from the oldest event it keeps. Keep it up to date with
/// [`ShardSeqs::seen`] for each event handled, store
/// [`ShardSeqs::seqs`], and resume with [`ShardSeqs::from_seqs`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShardSeqs {
    seqs: Vec<Option<u64>>,
}

impl ShardSeqs {
    /// From the oldest event each of `shards` shards keeps.
    pub fn oldest(shards: usize) -> ShardSeqs {
        ShardSeqs {
            seqs: vec![None; shards],
        }
    }

    /// From the seqs a reader stored, one per shard in shard order.
    pub fn from_seqs(seqs: Vec<Option<u64>>) -> ShardSeqs {
        ShardSeqs { seqs }
    }

    /// The seq of each shard, in shard order.
    pub fn seqs(&self) -> &[Option<u64>] {
        &self.seqs
    }

    /// Moves the reader past `event` on its shard (an event of a shard
    /// this position does not have changes nothing).
    pub fn seen(&mut self, event: &ShardEvent) {
        if let Some(seq) = self.seqs.get_mut(event.shard) {
            *seq = Some(event.event.seq);
        }
    }

    /// Sets one shard's seq: after [`Error::Gap`] on it, `Some(oldest -
    /// 1)` goes on with what it keeps.
    pub fn set(&mut self, shard: usize, seq: Option<u64>) {
        if let Some(s) = self.seqs.get_mut(shard) {
            *s = seq;
        }
    }
}

impl ShardedQueue {
    /// The events of every shard, one reader per shard ([`Queue::events`]:
    /// each blocks on a connection of its own, to the master holding its
    /// shard), merged as they come: each shard's events in their order,
    /// the shards' interleaved as they are read. Each [`ShardEvent`] says
    /// its shard; `from` holds one seq per shard ([`ShardSeqs`]).
    ///
    /// A shard's error ([`Error::Gap`], [`Error::EventLogRestarted`], a
    /// lost connection) names the shard's queue and ends that shard's
    /// reader only: the others go on. To go on with it, resume the whole
    /// queue from your [`ShardSeqs`], with that shard's seq set as the
    /// error says. EVENTS is each shard's own: set through
    /// [`ShardedQueue::config_set`], every shard keeps its last n.
    /// [`Error::Config`], with nothing sent, when `from` does not have one
    /// seq per shard.
    pub fn events(
        &self,
        from: &ShardSeqs,
    ) -> Result<impl Stream<Item = Result<ShardEvent, Error>> + Send + 'static, Error> {
        self.events_with(from, EventsOptions::default())
    }

    /// [`ShardedQueue::events`] with each shard's reader's COUNT and BLOCK.
    pub fn events_with(
        &self,
        from: &ShardSeqs,
        options: EventsOptions,
    ) -> Result<impl Stream<Item = Result<ShardEvent, Error>> + Send + 'static, Error> {
        let names = self.shards.names();
        crate::args::require(from.seqs.len() == names.len(), || {
            format!(
                "a position of {} shards for a queue of {}: give one seq per shard",
                from.seqs.len(),
                names.len()
            )
        })?;
        let readers = names
            .iter()
            .zip(&from.seqs)
            .enumerate()
            .map(|(shard, (name, after))| {
                let reader = events::stream(self.con.clone(), name.clone(), *after, options)?;
                Ok(reader
                    .map(move |r| r.map(|event| ShardEvent { shard, event }))
                    .boxed())
            })
            .collect::<Result<Vec<_>, Error>>()?;
        Ok(futures_util::stream::select_all(readers))
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

    /// The shards' DQ.STATS summed (`groups` too: a group lives on one
    /// shard); `oldest-ready-age-ms` is the oldest
    /// shard's, `next-due-at` the earliest. The flow control is the whole
    /// queue's: paused when any shard is (`paused_until` the latest end,
    /// `None` when a paused shard waits for DQ.RESUME); RATE and
    /// MAXINFLIGHT the sums of the shards' (`"96/1s"`, `16`); shards whose
    /// RATEs were set apart show as their list (`"1/1m,12/1s,none,..."`).
    pub async fn stats(&self) -> Result<Stats, Error> {
        let mut sum = Stats::default();
        let mut flows = Vec::new();
        for shard in self.each() {
            let s = shard.stats().await?;
            sum.accumulate(&s);
            flows.push(Flow {
                paused: s.paused,
                paused_until: s.paused_until,
                rate: s.rate,
                max_inflight: s.max_inflight,
            });
        }
        let whole = Flow::of_whole_queue(flows);
        (sum.paused, sum.paused_until) = (whole.paused, whole.paused_until);
        (sum.rate, sum.max_inflight) = (whole.rate, whole.max_inflight);
        Ok(sum)
    }

    /// DQ.CONFIG of the sharded queue: the defaults of shard 0 (set through
    /// [`ShardedQueue::config_set`], every shard has the same), GROUPLIMIT,
    /// GROUPRATE and ORDER as shard 0 has them (every shard the same), the flow
    /// control of the whole queue as [`ShardedQueue::stats`] reads it, and
    /// RETAINMAX the sum of the shards' (`None` when no shard has one).
    pub async fn config(&self) -> Result<QueueConfig, Error> {
        let mut flows = Vec::new();
        let mut first: Option<QueueConfig> = None;
        let mut throttled = 0;
        let mut retain_max: Option<u64> = None;
        for shard in self.each() {
            let c = shard.config().await?;
            throttled += c.throttled;
            if let Some(n) = c.retain_max {
                retain_max = Some(retain_max.unwrap_or(0).saturating_add(n));
            }
            flows.push(Flow {
                paused: c.paused,
                paused_until: c.paused_until,
                rate: c.rate.clone(),
                max_inflight: c.max_inflight,
            });
            first.get_or_insert(c);
        }
        let mut config = first.unwrap_or_default();
        let whole = Flow::of_whole_queue(flows);
        (config.paused, config.paused_until) = (whole.paused, whole.paused_until);
        (config.rate, config.max_inflight) = (whole.rate, whole.max_inflight);
        config.throttled = throttled;
        config.retain_max = retain_max;
        Ok(config)
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

    /// [`Queue::wait`] on the shard that holds `id`: the shard of `basis`
    /// (the message's group or shard key) when given, else of `id` itself
    /// — where [`ShardedQueue::add`] put a message added without a group
    /// or shard key. A message on another shard is `Gone` there: give the
    /// basis it was added with.
    pub async fn wait(
        &self,
        id: &[u8],
        basis: Option<&[u8]>,
        timeout: Duration,
    ) -> Result<Option<JobOutcome>, Error> {
        let shard = self.shards.route(basis.unwrap_or(id));
        wait(&self.con, shard, id, timeout).await
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
    /// lease deadline, time of death, or when it finished), each with its
    /// shard's name.
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

    /// DQ.CONFIG SET on every shard (they share their settings). The
    /// limits stay exact for the whole queue: of k shards each gets
    /// `RATE floor(n/k)/d`, `MAXINFLIGHT floor(n/k)` and `RETAINMAX
    /// floor(n/k)`, so all together never deliver (or keep) more than n;
    /// an n smaller than k (but not 0, which removes the limit) is refused
    /// with [`Error::Config`] before anything is sent. EVENTS is not
    /// split: each shard keeps its own last n (a reader per shard,
    /// [`ShardedQueue::events`]). Nor are the groups' settings: each group
    /// lives on one shard ([`ShardedQueue::group_shard`]), so `GROUPLIMIT`,
    /// `GROUPRATE` and `ORDER` go to every shard as given and hold per
    /// group exactly (ORDER FAIR is fair within each shard). Every shard
    /// gets the same pairs, shard 0 first: a pair the server refuses stops
    /// the call there, having changed nothing.
    pub async fn config_set(&self, pairs: &[(&str, &str)]) -> Result<(), Error> {
        let split = split_limits(pairs, self.shards.names().len())?;
        let pairs: Vec<(&str, &str)> = split.iter().map(|(f, v)| (*f, v.as_str())).collect();
        for shard in self.each() {
            shard.config_set(&pairs).await?;
        }
        Ok(())
    }

    /// DQ.PAUSE on every shard.
    pub async fn pause(&self, for_: Option<Duration>) -> Result<(), Error> {
        for shard in self.each() {
            shard.pause(for_).await?;
        }
        Ok(())
    }

    /// DQ.RESUME on every shard: whether any shard was paused.
    pub async fn resume(&self) -> Result<bool, Error> {
        let mut was = false;
        for shard in self.each() {
            was |= shard.resume().await?;
        }
        Ok(was)
    }

    /// The shard that holds `group`: the one [`ShardedQueue::add`] sends
    /// every message of the group to (the same function in every dq
    /// library), so its limits and pause hold there exactly.
    pub fn group_shard(&self, group: &[u8]) -> &str {
        self.shards.route(group)
    }

    /// [`Queue::pause_group`] on the group's shard only
    /// ([`ShardedQueue::group_shard`]): the group's messages are all there.
    pub async fn pause_group(
        &self,
        group: impl AsRef<[u8]>,
        for_: Option<Duration>,
    ) -> Result<(), Error> {
        let group = group.as_ref();
        Queue::new(self.con.clone(), self.group_shard(group))
            .pause_group(group, for_)
            .await
    }

    /// [`Queue::resume_group`] on the group's shard only: whether the group
    /// was paused.
    pub async fn resume_group(&self, group: impl AsRef<[u8]>) -> Result<bool, Error> {
        let group = group.as_ref();
        Queue::new(self.con.clone(), self.group_shard(group))
            .resume_group(group)
            .await
    }

    /// [`Queue::groups`] of each shard in turn (`count` groups looked at a
    /// page), sorted by name: each group lives on one shard, so each is
    /// listed once.
    pub async fn groups(
        &self,
        pattern: Option<&str>,
        count: usize,
    ) -> Result<Vec<GroupInfo>, Error> {
        let mut all = Vec::new();
        for shard in self.each() {
            all.extend(shard.groups(pattern, count).await?);
        }
        all.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(all)
    }

    /// The shard that holds schedule `name`: the one a message whose basis
    /// is `name` goes to (the same function in every dq library).
    pub fn schedule_shard(&self, name: &[u8]) -> &str {
        self.shards.route(name)
    }

    /// DQ.SCHEDULE on the schedule's shard ([`ShardedQueue::schedule_shard`]),
    /// so its runs are made there, once; replies as [`Queue::schedule`].
    pub async fn schedule(
        &self,
        name: impl AsRef<[u8]>,
        payload: &[u8],
        spec: &Schedule,
    ) -> Result<Option<u64>, Error> {
        let name = name.as_ref();
        Queue::new(self.con.clone(), self.schedule_shard(name))
            .schedule(name, payload, spec)
            .await
    }

    /// DQ.UNSCHEDULE of each name on its shard: how many existed.
    pub async fn unschedule<N: AsRef<[u8]>>(&self, names: &[N]) -> Result<u64, Error> {
        let mut by_shard: Vec<(&str, Vec<&[u8]>)> = Vec::new();
        for name in names.iter().map(AsRef::as_ref) {
            let shard = self.schedule_shard(name);
            match by_shard.iter_mut().find(|(s, _)| *s == shard) {
                Some((_, names)) => names.push(name),
                None => by_shard.push((shard, vec![name])),
            }
        }
        let mut n = 0;
        for (shard, names) in by_shard {
            n += admin::unschedule(&mut self.con.clone(), shard.as_bytes(), &names).await?;
        }
        Ok(n)
    }

    /// The schedules of every shard, sorted by name.
    pub async fn schedules(&self) -> Result<Vec<ScheduleInfo>, Error> {
        let mut all = Vec::new();
        for shard in self.each() {
            all.extend(shard.schedules().await?);
        }
        all.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(all)
    }
}

/// One shard's flow control, as DQ.STATS or DQ.CONFIG show it.
#[derive(Clone)]
struct Flow {
    paused: bool,
    paused_until: Option<u64>,
    rate: Option<String>,
    max_inflight: Option<u64>,
}

impl Flow {
    /// The flow control of a sharded queue from its shards' (as
    /// [`ShardedQueue::config_set`] leaves them), read as the Python and
    /// Node.js libraries read it: paused when any shard is, until the
    /// latest end of those pauses (`None` when one lasts until DQ.RESUME);
    /// MAXINFLIGHT the shards' limits summed (`None` when no shard has
    /// one); RATE the shards' summed over their common window (`n/d`), or —
    /// shards set apart, with different windows or some without a rate —
    /// the shards' rates joined with `,` (`none` for a shard without);
    /// `None` when no shard has one.
    fn of_whole_queue(shards: Vec<Flow>) -> Flow {
        let paused: Vec<&Flow> = shards.iter().filter(|f| f.paused).collect();
        let paused_until = paused
            .iter()
            .map(|f| f.paused_until)
            .collect::<Option<Vec<u64>>>()
            .and_then(|ends| ends.into_iter().max());
        let max_inflight = shards
            .iter()
            .filter_map(|f| f.max_inflight)
            .reduce(|a, b| a.saturating_add(b));
        let rates: Vec<Option<&str>> = shards.iter().map(|f| f.rate.as_deref()).collect();
        let parsed: Option<Vec<(u64, &str)>> = rates
            .iter()
            .map(|r| {
                let (n, window) = r.as_ref()?.split_once('/')?;
                Some((n.parse::<u64>().ok()?, window))
            })
            .collect();
        let rate = match parsed {
            _ if rates.iter().all(Option::is_none) => None,
            Some(parts) if parts.iter().all(|(_, w)| *w == parts[0].1) => {
                let sum = parts
                    .iter()
                    .fold(0u64, |sum, (n, _)| sum.saturating_add(*n));
                Some(format!("{sum}/{}", parts[0].1))
            }
            _ => Some(
                rates
                    .iter()
                    .map(|r| r.unwrap_or("none"))
                    .collect::<Vec<_>>()
                    .join(","),
            ),
        };
        Flow {
            paused: !paused.is_empty(),
            paused_until,
            rate,
            max_inflight,
        }
    }
}

/// `pairs` with RATE and MAXINFLIGHT divided among `shards`, so that the
/// shards' limits together never exceed the queue's: `n` becomes
/// `floor(n / shards)`. `0` and `DEFAULT` (removing the limit), and values
/// that do not read as a limit (the server refuses those), go as given.
fn split_limits<'a>(
    pairs: &[(&'a str, &str)],
    shards: usize,
) -> Result<Vec<(&'a str, String)>, Error> {
    let k = shards as u64;
    let per_shard = |field: &str, n: u64| -> Result<u64, Error> {
        if n > 0 && n < k {
            return Err(Error::Config(format!(
                "{field} {n} cannot be split over {k} shards: each would get 0 (the limits stay exact for the whole queue); use 0 to remove it, or at least {k}"
            )));
        }
        Ok(n / k)
    };
    pairs
        .iter()
        .map(|&(field, value)| {
            let value = if field.eq_ignore_ascii_case("RATE") {
                match value
                    .split_once('/')
                    .and_then(|(n, d)| Some((n.parse::<u64>().ok()?, d)))
                {
                    Some((n, window)) if n > 0 => format!("{}/{window}", per_shard("RATE", n)?),
                    _ => value.to_owned(),
                }
            } else if field.eq_ignore_ascii_case("MAXINFLIGHT")
                || field.eq_ignore_ascii_case("RETAINMAX")
            {
                match value.parse::<u64>() {
                    Ok(n) if n > 0 => per_shard(&field.to_ascii_uppercase(), n)?.to_string(),
                    _ => value.to_owned(),
                }
            } else {
                value.to_owned()
            };
            Ok((field, value))
        })
        .collect()
}

pub(crate) async fn add<C: ConnectionLike + ?Sized>(
    con: &mut C,
    queue: &str,
    payload: &[u8],
    o: &AddOptions,
) -> Result<Option<Vec<u8>>, Error> {
    let cmd = add_cmd(queue, payload, o)?;
    opt_bytes("DQ.ADD", query(con, &cmd).await?)
}

pub(crate) async fn ack<C: ConnectionLike + ?Sized>(
    con: &mut C,
    queue: &str,
    ids: &[&[u8]],
) -> Result<u64, Error> {
    if ids.is_empty() {
        return Ok(0);
    }
    let mut cmd = redis::cmd("DQ.ACK");
    cmd.arg(queue);
    for id in ids {
        cmd.arg(*id);
    }
    uint("DQ.ACK", &query(con, &cmd).await?)
}

fn unknown(queue: &str, id: &[u8]) -> Error {
    Error::UnknownMessage {
        queue: queue.to_owned(),
        id: String::from_utf8_lossy(id).into_owned(),
    }
}

/// `DQ.NACK queue id [DELAY ms | DEAD] [ATTEMPT n] [ERROR text]`.
fn nack_cmd(queue: &str, id: &[u8], o: &NackOptions) -> Result<Cmd, Error> {
    check_id("id", id)?;
    require(o.delay.is_none() || !o.dead, || {
        "delay and dead cannot be used together".into()
    })?;
    check_attempt(o.attempt)?;
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
    Ok(cmd)
}

pub(crate) async fn nack<C: ConnectionLike + ?Sized>(
    con: &mut C,
    queue: &str,
    id: &[u8],
    o: &NackOptions,
) -> Result<NackState, Error> {
    let reply = query(con, &nack_cmd(queue, id, o)?).await?;
    commands::parse_nack(&reply)?.ok_or_else(|| unknown(queue, id))
}

/// `DQ.TOUCH queue id [LEASE ms] [ATTEMPT n] [PROGRESS value]`; a lease
/// under 1 ms is 1 ms, a lease of 0 is refused (the server refuses it
/// too), and progress over 64 KiB.
pub(crate) fn touch_cmd(
    queue: &str,
    id: &[u8],
    lease: Option<Duration>,
    attempt: Option<u64>,
    progress: Option<&[u8]>,
) -> Result<Cmd, Error> {
    check_id("id", id)?;
    if let Some(l) = lease {
        require(!l.is_zero(), || "lease must be longer than 0".into())?;
    }
    check_attempt(attempt)?;
    if let Some(p) = progress {
        commands::check_progress(p)?;
    }
    let mut cmd = redis::cmd("DQ.TOUCH");
    cmd.arg(queue).arg(id);
    if let Some(l) = lease {
        cmd.arg("LEASE").arg(ms(l).max(1));
    }
    if let Some(a) = attempt {
        cmd.arg("ATTEMPT").arg(a);
    }
    if let Some(p) = progress {
        cmd.arg("PROGRESS").arg(p);
    }
    Ok(cmd)
}

pub(crate) async fn touch<C: ConnectionLike + ?Sized>(
    con: &mut C,
    queue: &str,
    id: &[u8],
    lease: Option<Duration>,
    attempt: Option<u64>,
    progress: Option<&[u8]>,
) -> Result<u64, Error> {
    let cmd = touch_cmd(queue, id, lease, attempt, progress)?;
    parse_touch(queue, id, query(con, &cmd).await?)
}

/// TOUCH's reply: the new deadline, or nil when the id is not in flight.
pub(crate) fn parse_touch(queue: &str, id: &[u8], reply: Value) -> Result<u64, Error> {
    match reply {
        Value::Nil => Err(unknown(queue, id)),
        deadline => uint("DQ.TOUCH", &deadline),
    }
}

/// DQ.WAIT on `queue`: a look on the shared connection, or a blocking
/// wait on a connection of its own.
async fn wait(
    con: &Connection,
    queue: &str,
    id: &[u8],
    timeout: Duration,
) -> Result<Option<JobOutcome>, Error> {
    let cmd = admin::wait_cmd(queue.as_bytes(), id, timeout)?;
    let reply = if timeout.is_zero() {
        query(&mut con.clone(), &cmd).await?
    } else {
        con.blocking("DQ.WAIT", queue.as_bytes(), &cmd, timeout)
            .await?
    };
    admin::parse_wait(reply)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::args::sent as args;

    fn flow(paused: bool, until: Option<u64>, rate: Option<&str>, max: Option<u64>) -> Flow {
        Flow {
            paused,
            paused_until: until,
            rate: rate.map(str::to_owned),
            max_inflight: max,
        }
    }

    #[test]
    fn a_sharded_queue_reads_its_flow_control_from_its_shards() {
        let whole = Flow::of_whole_queue(vec![
            flow(false, None, Some("12/1s"), Some(2)),
            flow(true, Some(50), Some("12/1s"), Some(2)),
            flow(true, Some(70), Some("12/1s"), Some(2)),
        ]);
        assert!(whole.paused);
        assert_eq!(whole.paused_until, Some(70));
        assert_eq!(whole.rate.as_deref(), Some("36/1s"));
        assert_eq!(whole.max_inflight, Some(6));
        // A pause until DQ.RESUME has no end; shards set apart show apart.
        let whole = Flow::of_whole_queue(vec![
            flow(true, Some(50), Some("1/1m"), None),
            flow(true, None, None, Some(3)),
            flow(false, None, Some("12/1s"), None),
        ]);
        assert!(whole.paused);
        assert_eq!(whole.paused_until, None);
        assert_eq!(whole.rate.as_deref(), Some("1/1m,none,12/1s"));
        assert_eq!(whole.max_inflight, Some(3));
        let whole = Flow::of_whole_queue(vec![flow(false, None, None, None); 2]);
        assert!(!whole.paused);
        assert_eq!((whole.rate, whole.max_inflight), (None, None));
    }

    fn split(pairs: &[(&str, &str)], shards: usize) -> Result<Vec<(String, String)>, Error> {
        split_limits(pairs, shards).map(|v| v.into_iter().map(|(f, v)| (f.to_owned(), v)).collect())
    }

    #[test]
    fn limits_are_split_exactly_over_the_shards() {
        let pairs = [("rate", "100/1s"), ("MAXINFLIGHT", "20"), ("LEASE", "5000")];
        assert_eq!(
            split(&pairs, 8).unwrap(),
            [
                ("rate".to_string(), "12/1s".to_string()),
                ("MAXINFLIGHT".into(), "2".into()),
                ("LEASE".into(), "5000".into())
            ]
        );
        assert_eq!(split(&pairs, 1).unwrap()[0].1, "100/1s");
        // Removing a limit, or a value the server will refuse, goes as given.
        for value in ["0", "DEFAULT", "default", "x/1s", "10", "-3/1s"] {
            assert_eq!(split(&[("RATE", value)], 4).unwrap()[0].1, value);
        }
        for value in ["0", "DEFAULT", "lots", "-1"] {
            assert_eq!(split(&[("MaxInflight", value)], 4).unwrap()[0].1, value);
        }
        // Fewer than one per shard: refused, naming the field and the count.
        let e = split(&[("RATE", "3/1s")], 4).unwrap_err().to_string();
        assert!(e.contains("RATE 3") && e.contains("4 shards"), "{e}");
        let e = split(&[("LEASE", "1"), ("MAXINFLIGHT", "7")], 8)
            .unwrap_err()
            .to_string();
        assert!(e.contains("MAXINFLIGHT 7") && e.contains("8 shards"), "{e}");
        // RETAINMAX caps the whole queue's done messages the same way.
        let pairs = [("RETAIN", "1h"), ("retainmax", "1000")];
        assert_eq!(split(&pairs, 8).unwrap()[1].1, "125");
        assert_eq!(split(&pairs, 8).unwrap()[0].1, "1h");
        let e = split(&[("RETAINMAX", "3")], 4).unwrap_err().to_string();
        assert!(e.contains("RETAINMAX 3") && e.contains("4 shards"), "{e}");
        assert_eq!(split(&[("RETAINMAX", "0")], 4).unwrap()[0].1, "0");
        // The groups' settings go unsplit: a group lives on one shard.
        let pairs = [
            ("GROUPLIMIT", "2"),
            ("grouprate", "3/1s"),
            ("ORDER", "FAIR"),
        ];
        let got = split(&pairs, 8).unwrap();
        let want: Vec<(String, String)> = pairs
            .iter()
            .map(|(f, v)| ((*f).to_owned(), (*v).to_owned()))
            .collect();
        assert_eq!(got, want);
    }

    #[test]
    fn add_names_its_options_and_refuses_what_cannot_go_together() {
        // Every option, each case of it: tests/vectors/commands.json (vectors.rs).
        let o = AddOptions {
            delay: Some(Duration::from_secs(2)),
            id: Some(b"a".to_vec()),
            nx: true,
            priority: Some(-3),
            ttl: Some(Duration::from_millis(900)),
            retain: Some(Duration::from_secs(3600)),
            shard_key: Some(b"ignored".to_vec()),
            ..AddOptions::default()
        };
        assert_eq!(
            args(&add_cmd("q", b"p", &o).unwrap()),
            [
                "DQ.ADD", "q", "p", "DELAY", "2000", "ID", "a", "NX", "PRIORITY", "-3", "TTL",
                "900", "RETAIN", "3600000"
            ]
        );
        assert_eq!(
            args(&add_cmd("q", b"", &AddOptions::default()).unwrap()),
            ["DQ.ADD", "q", ""]
        );
        for bad in [
            AddOptions {
                at_ms: Some(5),
                ..o.clone()
            },
            AddOptions {
                xx: true,
                ..o.clone()
            },
        ] {
            let e = add_cmd("q", b"p", &bad).unwrap_err().to_string();
            assert!(e.contains("cannot be used together"), "{e}");
        }
    }
}
