//! The consume loop: one popper task per queue (or one DQ.MPOP popper for
//! queues served in order), one task per delivery.

use std::sync::Arc;
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::AsyncConnectionConfig;
use std::collections::HashMap;

use tokio::sync::{mpsc, OwnedSemaphorePermit, Semaphore};
use tokio::time::{sleep, sleep_until, Instant};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::admin;
use crate::commands::{self, Popped};
use crate::delivery::{Delivery, Handler, LostReason, Outcome, Reporter, Settlement};
use crate::error::Error;
use crate::queue::{Queue, ShardedQueue};
use crate::server::{Connection, Node, Server};
use crate::shard::{hash_slot, Shards};

/// How a [`Consumer`] takes and holds messages.
#[derive(Clone, Debug)]
pub struct ConsumerConfig {
    /// Deliveries handled at once per queue (per sharded queue: for all
    /// its shards together). A popper asks for no more than the free slots;
    /// only a message its blocking POP brings while every slot is taken
    /// waits here, its lease renewed.
    pub concurrency: usize,
    /// At most this many messages per POP (`COUNT`), 1 to 10000.
    pub batch: usize,
    /// How long one POP waits for a message (`BLOCK`). Shutdown does not
    /// wait for it: the popper is unblocked with `CLIENT UNBLOCK` (when the
    /// user may run it; else the POP ends by itself).
    pub block: Duration,
    /// The lease each POP takes and each TOUCH renews (`LEASE`).
    pub lease: Duration,
    /// How often a running delivery's lease is renewed; `None`: a third
    /// of the lease, so that two TOUCHes can fail before it runs out.
    pub touch_every: Option<Duration>,
    /// How long a non-blocking command (ACK, NACK, TOUCH) may take before
    /// it counts as failed and is tried again.
    pub response_timeout: Duration,
}

impl Default for ConsumerConfig {
    fn default() -> Self {
        ConsumerConfig {
            concurrency: 64,
            batch: 64,
            block: Duration::from_secs(5),
            lease: Duration::from_secs(30),
            touch_every: None,
            response_timeout: Duration::from_secs(5),
        }
    }
}

/// Consumes dq queues with a [`Handler`]; see the crate documentation.
pub struct Consumer {
    server: Server,
    pools: Vec<Pool>,
    config: ConsumerConfig,
}

/// Queues that share one pool of `concurrency` slots: each queue of
/// [`Consumer::new`] alone, a sharded queue's shards together, every queue
/// of [`Consumer::over`] together.
#[derive(Clone, Debug)]
struct Pool {
    queues: Vec<String>,
    /// One DQ.MPOP takes from them, in their order; else one popper each.
    mpop: bool,
}

impl Pool {
    fn single(queue: String) -> Pool {
        Pool {
            queues: vec![queue],
            mpop: false,
        }
    }
}

/// A queue a [`Consumer::over`] consumes: a plain queue, or every shard of
/// a sharded queue. `From` makes one of a name, a [`Queue`], a
/// [`ShardedQueue`] or its [`Shards`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// A plain queue, by name.
    Queue(String),
    /// Every shard of a sharded queue: always one popper per shard.
    Sharded(Shards),
}

impl From<&str> for Source {
    fn from(name: &str) -> Source {
        Source::Queue(name.to_owned())
    }
}

impl From<String> for Source {
    fn from(name: String) -> Source {
        Source::Queue(name)
    }
}

impl From<&String> for Source {
    fn from(name: &String) -> Source {
        Source::Queue(name.clone())
    }
}

impl From<&Queue> for Source {
    fn from(queue: &Queue) -> Source {
        Source::Queue(queue.name().to_owned())
    }
}

impl From<Shards> for Source {
    fn from(shards: Shards) -> Source {
        Source::Sharded(shards)
    }
}

impl From<&Shards> for Source {
    fn from(shards: &Shards) -> Source {
        Source::Sharded(shards.clone())
    }
}

impl From<&ShardedQueue> for Source {
    fn from(queue: &ShardedQueue) -> Source {
        Source::Sharded(queue.shards().clone())
    }
}

/// What every task of one `run` shares.
struct Shared<H> {
    handler: Arc<H>,
    config: ConsumerConfig,
    touch_every: Duration,
    /// ACK, NACK, TOUCH and CLIENT UNBLOCK from every task, pipelined on
    /// shared sockets; it reconnects by itself.
    commands: Connection,
    server: Server,
    shutdown: CancellationToken,
    deliveries: TaskTracker,
    /// Each queue's acker: the ACKs (and DONEs) of the deliveries that
    /// finished while its last DQ.ACK (DQ.DONE) was on its way go in its
    /// next one.
    ackers: HashMap<String, mpsc::UnboundedSender<Option<Finished>>>,
}

impl Consumer {
    /// Consumes `queues` independently, each with its own popper and up
    /// to `concurrency` deliveries at once (the relay's per-queue
    /// concurrency). [`Consumer::over`] serves several queues from one
    /// pool, in order.
    pub fn new(
        server: impl Into<Server>,
        queues: Vec<String>,
        config: ConsumerConfig,
    ) -> Result<Consumer, Error> {
        let pools = queues.into_iter().map(Pool::single).collect();
        Consumer::with_pools(server.into(), pools, config)
    }

    /// Consumes every shard of a sharded queue, up to `concurrency`
    /// deliveries at once in all. Each shard has its own blocking POP, and
    /// the shards take free slots in turn, so none starves another.
    pub fn sharded(
        server: impl Into<Server>,
        shards: &Shards,
        config: ConsumerConfig,
    ) -> Result<Consumer, Error> {
        let pool = Pool {
            queues: shards.names().to_vec(),
            mpop: false,
        };
        Consumer::with_pools(server.into(), vec![pool], config)
    }

    /// Consumes several queues (one works too) with one pool of
    /// `concurrency` slots: the Worker over several queues of every dq
    /// library.
    ///
    /// - When one DQ.MPOP can serve them all — plain queues on a single
    ///   server, or on a cluster with every name in one hash slot (a
    ///   common `{tag}`: `{jobs}urgent`, `{jobs}bulk`) — one popper sends
    ///   `DQ.MPOP n q1 .. qn COUNT free BLOCK ms`, which takes from the
    ///   first queue, in the order given, that can deliver: strict
    ///   priority, as BLMPOP has over lists. A paused or throttled queue
    ///   is passed over.
    /// - Otherwise — names in several slots, or a sharded queue among them
    ///   (its shards are in several slots by design) — one popper per
    ///   queue (per shard), taking free slots in turn: no queue starves
    ///   another, and there is no order.
    ///
    /// [`Consumer::polls_in_order`] says which. Each delivery's ACK, NACK
    /// and TOUCH go to the queue it came from. A queue given twice is an
    /// error.
    pub fn over<S: Into<Source>>(
        server: impl Into<Server>,
        sources: impl IntoIterator<Item = S>,
        config: ConsumerConfig,
    ) -> Result<Consumer, Error> {
        let server = server.into();
        let sources: Vec<Source> = sources.into_iter().map(Into::into).collect();
        let mut queues: Vec<String> = Vec::new();
        let mut any_sharded = false;
        for source in sources {
            let names = match source {
                Source::Queue(name) => vec![name],
                Source::Sharded(shards) => {
                    any_sharded = true;
                    shards.names().to_vec()
                }
            };
            for name in names {
                if queues.contains(&name) {
                    return Err(Error::Config(format!(
                        "queue '{name}' is given more than once"
                    )));
                }
                queues.push(name);
            }
        }
        let one_slot = || {
            let mut slots = queues.iter().map(|q| hash_slot(q.as_bytes()));
            let first = slots.next();
            slots.all(|slot| Some(slot) == first)
        };
        let mpop = queues.len() > 1 && !any_sharded && (!server.is_cluster() || one_slot());
        let pools = if queues.is_empty() {
            Vec::new()
        } else {
            vec![Pool { queues, mpop }]
        };
        Consumer::with_pools(server, pools, config)
    }

    /// Whether the queues are polled with one DQ.MPOP, in the order given
    /// (see [`Consumer::over`]).
    pub fn polls_in_order(&self) -> bool {
        self.pools.iter().any(|pool| pool.mpop)
    }

    fn with_pools(
        server: Server,
        pools: Vec<Pool>,
        config: ConsumerConfig,
    ) -> Result<Consumer, Error> {
        if pools.is_empty() {
            return Err(Error::Config("no queue to consume".into()));
        }
        if config.concurrency == 0 {
            return Err(Error::Config("concurrency must be at least 1".into()));
        }
        if !(1..=10_000).contains(&config.batch) {
            return Err(Error::Config("batch must be from 1 to 10000".into()));
        }
        if config.lease < Duration::from_millis(3) {
            return Err(Error::Config("the lease must be at least 3 ms".into()));
        }
        if config.block.is_zero() {
            // BLOCK 0 waits forever: a dead server would never be noticed.
            return Err(Error::Config("block must be positive".into()));
        }
        if config
            .touch_every
            .is_some_and(|t| t.is_zero() || t >= config.lease)
        {
            return Err(Error::Config(
                "touch_every must be positive and shorter than the lease".into(),
            ));
        }
        Ok(Consumer {
            server,
            pools,
            config,
        })
    }

    /// Consumes until `shutdown` is cancelled, then settles every delivery
    /// it holds and returns. Fails only when the first connection cannot be
    /// made; later connection trouble is logged and retried.
    pub async fn run<H: Handler>(
        &self,
        handler: Arc<H>,
        shutdown: CancellationToken,
    ) -> Result<(), Error> {
        let commands = self.server.connect(self.config.response_timeout).await?;
        let mut ackers = HashMap::new();
        let mut acker_tasks = Vec::new();
        for queue in self.pools.iter().flat_map(|pool| &pool.queues) {
            let (tx, rx) = mpsc::unbounded_channel();
            ackers.insert(queue.clone(), tx);
            acker_tasks.push(tokio::spawn(acker(
                commands.clone(),
                queue.clone(),
                rx,
                Arc::clone(&handler),
            )));
        }
        let shared = Arc::new(Shared {
            handler,
            touch_every: self
                .config
                .touch_every
                .unwrap_or(self.config.lease / 3)
                .max(Duration::from_millis(1)),
            config: self.config.clone(),
            commands,
            server: self.server.clone(),
            shutdown,
            deliveries: TaskTracker::new(),
            ackers,
        });
        let mut poppers = Vec::new();
        for pool in &self.pools {
            let slots = Arc::new(Semaphore::new(self.config.concurrency));
            if pool.mpop {
                // The pool's only popper: every free slot is its.
                let share = self.config.concurrency.clamp(1, self.config.batch);
                let popper = popper(
                    Arc::clone(&shared),
                    pool.queues.clone(),
                    Arc::clone(&slots),
                    share,
                    true,
                );
                poppers.push(tokio::spawn(popper));
                continue;
            }
            // tokio's semaphore is fair (first come, first served), and a
            // popper of a pool of n asks for at most its share of slots at
            // once, so with work everywhere every queue of it gets its turn.
            let share = self
                .config
                .concurrency
                .div_ceil(pool.queues.len())
                .clamp(1, self.config.batch);
            for queue in &pool.queues {
                let popper = popper(
                    Arc::clone(&shared),
                    vec![queue.clone()],
                    Arc::clone(&slots),
                    share,
                    pool.queues.len() == 1,
                );
                poppers.push(tokio::spawn(popper));
            }
        }
        for popper in poppers {
            if let Err(e) = popper.await {
                tracing::error!(error = %e, "a popper task failed");
            }
        }
        // Every popper has stopped, so no delivery starts any more.
        shared.deliveries.close();
        shared.deliveries.wait().await;
        // No delivery is running: each acker sends what it holds and ends.
        for acker in shared.ackers.values() {
            let _ = acker.send(None);
        }
        for task in acker_tasks {
            if let Err(e) = task.await {
                tracing::error!(error = %e, "an acker task failed");
            }
        }
        Ok(())
    }
}

/// A popper's own connection (a blocked connection serves nobody else),
/// the node it is on in a cluster, and its CLIENT ID for CLIENT UNBLOCK.
struct PopConnection {
    con: MultiplexedConnection,
    client_id: Option<i64>,
}

async fn pop_connection(
    shared: &Shared<impl Handler>,
    node: Option<&Node>,
) -> Result<PopConnection, Error> {
    let config = AsyncConnectionConfig::new()
        .set_connection_timeout(Some(shared.config.response_timeout))
        .set_response_timeout(Some(shared.config.block + shared.config.response_timeout));
    let mut con = shared.server.dedicated(node, &config).await?;
    let client_id = redis::cmd("CLIENT")
        .arg("ID")
        .query_async::<i64>(&mut con)
        .await
        .ok();
    Ok(PopConnection { con, client_id })
}

/// Runs one POP; on shutdown a blocking one is ended with CLIENT UNBLOCK
/// rather than dropped, since dropping it could lose what it is about to
/// take (until the lease runs out).
async fn pop_once(
    shared: &Shared<impl Handler>,
    pc: &mut PopConnection,
    node: Option<&Node>,
    cmd: redis::Cmd,
) -> redis::RedisResult<redis::Value> {
    let pop = cmd.query_async::<redis::Value>(&mut pc.con);
    tokio::pin!(pop);
    tokio::select! {
        reply = &mut pop => reply,
        _ = shared.shutdown.cancelled() => {
            let Some(id) = pc.client_id else {
                return pop.await;
            };
            // The UNBLOCK travels on another connection and may overtake
            // a POP just sent, finding nothing to unblock: so it is sent
            // again until the POP ends.
            loop {
                let unblock = redis::cmd("CLIENT").arg("UNBLOCK").arg(id).to_owned();
                if let Err(e) = shared.commands.clone().on_node(unblock, node).await {
                    tracing::debug!(error = %e, "CLIENT UNBLOCK failed; waiting for the POP to end");
                    return pop.await;
                }
                tokio::select! {
                    reply = &mut pop => return reply,
                    _ = sleep(Duration::from_millis(50)) => {}
                }
            }
        }
    }
}

/// Takes messages from one queue — or, given several, from the first of
/// them that can deliver, with DQ.MPOP — while slots of its pool are free.
///
/// With a free slot it takes what is ready (up to `share`). When nothing
/// is, it waits in a blocking POP: alone in its pool, for as many messages
/// as it holds slots; else it gives its slots back — another queue of the
/// pool may have work — and waits for one message, which then waits for a
/// slot, its lease kept alive meanwhile. So an idle queue holds no slot
/// another queue could use, and a worker holds at most one message per
/// idle queue beyond its concurrency.
async fn popper<H: Handler>(
    shared: Arc<Shared<H>>,
    queues: Vec<String>,
    slots: Arc<Semaphore>,
    share: usize,
    alone: bool,
) {
    let queue = queues.join(" ");
    let pop = |count: usize, block: Option<Duration>| match queues.as_slice() {
        [one] => commands::pop(one, count, block, Some(shared.config.lease)),
        many => commands::mpop(many, count, block, Some(shared.config.lease)),
    };
    let mut conn: Option<PopConnection> = None;
    let mut node: Option<Node> = None;
    let mut retry_in = Duration::from_millis(100);
    tracing::info!(queue = %queue, "consuming");
    while !shared.shutdown.is_cancelled() {
        let first = tokio::select! {
            permit = Arc::clone(&slots).acquire_owned() => match permit {
                Ok(permit) => permit,
                Err(_) => break, // the semaphore is never closed
            },
            _ = shared.shutdown.cancelled() => break,
        };
        let mut permits = vec![first];
        if share > 1 {
            // Handlers finishing now free their slots too: let them run,
            // then one POP asks for every free slot.
            tokio::task::yield_now().await;
        }
        while permits.len() < share {
            match Arc::clone(&slots).try_acquire_owned() {
                Ok(permit) => permits.push(permit),
                Err(_) => break,
            }
        }
        if conn.is_none() {
            match pop_connection(&shared, node.as_ref()).await {
                Ok(c) => conn = Some(c),
                Err(e) => {
                    tracing::warn!(queue = %queue, error = %e, "cannot connect for POP; retrying");
                    pause(&shared.shutdown, &mut retry_in).await;
                    continue;
                }
            }
        }
        let Some(pc) = conn.as_mut() else {
            continue;
        };
        let mut leased_at = std::time::Instant::now();
        let mut reply = pop_once(&shared, pc, node.as_ref(), pop(permits.len(), None)).await;
        if matches!(&reply, Ok(redis::Value::Nil)) && !shared.shutdown.is_cancelled() {
            // Alone in its pool, the popper keeps its slots while it waits:
            // no other queue could use them, and a burst that falls due
            // comes in one reply.
            if !alone {
                permits.clear();
            }
            leased_at = std::time::Instant::now();
            let count = permits.len().max(1);
            let wait = pop(count, Some(shared.config.block));
            reply = pop_once(&shared, pc, node.as_ref(), wait).await;
        }
        let popped = match reply {
            Ok(reply) if queues.len() == 1 => commands::parse_pop(reply).map(|p| (0, p)),
            Ok(reply) => commands::parse_mpop(reply, &queues),
            Err(e) if e.redirect_node().is_some() => {
                // MOVED (the queue's slot is on another master) or ASK (it
                // is moving): go there; an ASK is asked again until the
                // move ends and MOVED says where the queue now lives.
                // `redirect_node` is (host:port, slot).
                let to = e
                    .redirect_node()
                    .and_then(|(addr, _)| addr.rsplit_once(':'));
                if let Some((host, port)) = to.and_then(|(h, p)| Some((h, p.parse::<u16>().ok()?)))
                {
                    // An empty host means the one this connection went to.
                    let host = match host {
                        "" => shared.server.host_of(node.as_ref()),
                        host => host.trim_matches(['[', ']']).to_owned(),
                    };
                    tracing::info!(queue = %queue, node = %format!("{host}:{port}"), "the queue is on another node");
                    node = Some((host, port));
                }
                conn = None;
                if e.code() != Some("MOVED") {
                    pause(&shared.shutdown, &mut retry_in).await;
                }
                continue;
            }
            Err(e) => Err(Error::from(e)),
        };
        let (from, popped) = match popped {
            Ok(popped) => popped,
            Err(e) => {
                tracing::warn!(queue = %queue, error = %e, "DQ.POP failed; retrying");
                conn = None;
                pause(&shared.shutdown, &mut retry_in).await;
                continue;
            }
        };
        retry_in = Duration::from_millis(100);
        // Unused slots go back as `permits` drops; a message of the
        // blocking POP gets its slot when one is free.
        let mut permits = permits.into_iter();
        for entry in popped {
            let Popped {
                id,
                payload,
                attempt,
            } = entry;
            let delivery = Delivery::leased(queues[from].clone(), id, payload, attempt, leased_at)
                .reporting(Reporter {
                    commands: shared.commands.clone(),
                    lease: shared.config.lease,
                });
            let slot = match permits.next() {
                Some(permit) => Slot::Held(permit),
                None => Slot::Wait(Arc::clone(&slots)),
            };
            shared
                .deliveries
                .spawn(deliver(Arc::clone(&shared), delivery, slot));
        }
    }
    tracing::info!(queue = %queue, "stopped taking messages");
}

/// Waits `retry_in` (or until shutdown), doubling it up to 5 s.
async fn pause(shutdown: &CancellationToken, retry_in: &mut Duration) {
    tokio::select! {
        _ = sleep(*retry_in) => {}
        _ = shutdown.cancelled() => {}
    }
    *retry_in = (*retry_in * 2).min(Duration::from_secs(5));
}

/// A delivery's place among the pool's `concurrency`.
enum Slot {
    Held(OwnedSemaphorePermit),
    /// Taken by a blocking POP without one: waits for a free slot.
    Wait(Arc<Semaphore>),
}

/// A delivery whose handler succeeded, with its outcome (`Ack` or `Done`),
/// on its way to its queue's acker.
type Finished = (Delivery, Outcome);

/// Handles one delivery, keeping its lease alive, then settles it: an ACK
/// or DONE goes to its queue's acker, which sends it with the others and
/// tells the handler how it went; a NACK is sent here. A delivery a
/// heartbeat found over sends nothing.
async fn deliver<H: Handler>(shared: Arc<Shared<H>>, delivery: Delivery, slot: Slot) {
    let outcome = match handle_with_heartbeat(&shared, &delivery, slot).await {
        Ended::Done(Outcome::Done(result)) if result.len() > admin::MAX_RESULT_BYTES => {
            // The server would refuse the whole DQ.DONE of the batch.
            Outcome::Dead {
                error: format!(
                    "the handler's result is {} bytes: more than the {} a result may hold",
                    result.len(),
                    admin::MAX_RESULT_BYTES
                ),
            }
        }
        Ended::Done(outcome) => outcome,
        Ended::Over(outcome) => {
            shared
                .handler
                .settled(&delivery, outcome.as_ref(), &Settlement::Stale);
            return;
        }
    };
    if matches!(outcome, Outcome::Ack | Outcome::Done(_)) {
        let (delivery, outcome, why) = match shared.ackers.get(&delivery.queue) {
            Some(acker) => match acker.send(Some((delivery, outcome))) {
                Ok(()) => return,
                Err(mpsc::error::SendError(back)) => match back {
                    Some((delivery, outcome)) => {
                        (delivery, outcome, "the acker of this queue has stopped")
                    }
                    None => return,
                },
            },
            None => (delivery, outcome, "no acker for this queue"),
        };
        let settlement = Settlement::Unsettled(why.into());
        shared
            .handler
            .settled(&delivery, Some(&outcome), &settlement);
        return;
    }
    let settlement = settle(&shared, &delivery, &outcome).await;
    shared
        .handler
        .settled(&delivery, Some(&outcome), &settlement);
}

/// How the handling of a delivery ended.
enum Ended {
    /// The handler returned while the delivery held.
    Done(Outcome),
    /// A TOUCH found the delivery over: the handler's outcome when it
    /// returned in its grace, `None` when its future was dropped.
    Over(Option<Outcome>),
}

/// Runs the handler; every `touch_every` since the POP, renews the lease.
/// When a TOUCH finds the delivery over, the handler is told (its token
/// fires) and its future is dropped: at once when it did not take the
/// token, else after `touch_every` unless it returned by then.
async fn handle_with_heartbeat<H: Handler>(
    shared: &Shared<H>,
    delivery: &Delivery,
    slot: Slot,
) -> Ended {
    let work = async {
        // Held until the handler is done, so the slot counts the work.
        let _slot = match slot {
            Slot::Held(permit) => Some(permit),
            Slot::Wait(slots) => slots.acquire_owned().await.ok(),
        };
        // A panicking handler fails the delivery like a returned error
        // would (NACK with the panic's message), instead of leaving the
        // message to wait for its lease to run out.
        CatchUnwind(shared.handler.handle(delivery))
            .await
            .unwrap_or_else(|message| Outcome::Nack {
                delay: None,
                error: format!("the handler panicked: {message}"),
            })
    };
    tokio::pin!(work);
    let mut next_touch = Instant::from_std(delivery.leased_at) + shared.touch_every;
    loop {
        tokio::select! {
            outcome = &mut work => return Ended::Done(outcome),
            _ = sleep_until(next_touch) => {}
        }
        let mut commands = shared.commands.clone();
        let touched = commands::touch(
            &delivery.queue,
            &delivery.id,
            shared.config.lease,
            delivery.attempt,
        )
        .query_async::<redis::Value>(&mut commands)
        .await;
        match touched {
            Ok(redis::Value::Int(_)) => {
                next_touch = Instant::now() + shared.touch_every;
            }
            Err(e) if !commands::is_stale(&e) => {
                // Try again soon: the lease still has two thirds to go.
                tracing::warn!(queue = %delivery.queue, id = %delivery.id_lossy(),
                    attempt = delivery.attempt, error = %e, "DQ.TOUCH failed; retrying");
                next_touch =
                    Instant::now() + (shared.touch_every / 4).max(Duration::from_millis(1));
            }
            // STALE, or nil: the delivery is over; the message was
            // deleted, or another consumer may hold it. Stop working on it.
            _ => {
                let reason = why_over(shared, delivery).await;
                match reason {
                    LostReason::Cancelled => tracing::info!(queue = %delivery.queue,
                        id = %delivery.id_lossy(), attempt = delivery.attempt,
                        "the message was cancelled or purged while its handler ran; stopping it"),
                    LostReason::Lost => tracing::warn!(queue = %delivery.queue,
                        id = %delivery.id_lossy(), attempt = delivery.attempt,
                        "lease lost before the work ended; abandoning it"),
                }
                if !delivery.lose(reason) {
                    return Ended::Over(None);
                }
                return tokio::select! {
                    outcome = &mut work => Ended::Over(Some(outcome)),
                    _ = sleep(shared.touch_every) => Ended::Over(None),
                };
            }
        }
    }
}

/// Why a delivery the server called over is: DQ.GET finds its message
/// gone (cancelled, purged) or still there (the lease was lost). When the
/// look fails, "lost", which claims less.
async fn why_over<H: Handler>(shared: &Shared<H>, delivery: &Delivery) -> LostReason {
    let mut con = shared.commands.clone();
    match admin::get(&mut con, delivery.queue.as_bytes(), &delivery.id).await {
        Ok(None) => LostReason::Cancelled,
        Ok(Some(_)) => LostReason::Lost,
        Err(e) => {
            tracing::debug!(queue = %delivery.queue, id = %delivery.id_lossy(), error = %e,
                "DQ.GET after a STALE failed; calling the delivery lost");
            LostReason::Lost
        }
    }
}

/// Sends the NACK, trying again a few times when the server cannot be
/// reached (a second fenced NACK is STALE).
async fn settle<H: Handler>(
    shared: &Shared<H>,
    delivery: &Delivery,
    outcome: &Outcome,
) -> Settlement {
    let cmd = commands::nack(&delivery.queue, &delivery.id, delivery.attempt, outcome);
    let mut retry_in = Duration::from_millis(100);
    let mut tries = 0;
    loop {
        tries += 1;
        let mut commands = shared.commands.clone();
        let reply = cmd.query_async::<redis::Value>(&mut commands).await;
        let settled = match reply {
            Ok(reply) => commands::parse_nack(&reply).map(|state| match state {
                Some(state) => Settlement::Nacked(state),
                None => Settlement::Stale,
            }),
            Err(e) if commands::is_stale(&e) => {
                // Say whether it was cancelled (Settlement::state_of).
                let _ = delivery.lose(why_over(shared, delivery).await);
                Ok(Settlement::Stale)
            }
            Err(e) => Err(Error::from(e)),
        };
        match settled {
            Ok(settlement) => return settlement,
            // A reply we cannot read will not read better a second time.
            Err(e @ Error::Reply { .. }) => return Settlement::Unsettled(e.to_string()),
            Err(e) if tries >= 5 => return Settlement::Unsettled(e.to_string()),
            Err(e) => {
                tracing::warn!(queue = %delivery.queue, id = %delivery.id_lossy(),
                    attempt = delivery.attempt, error = %e, "settling failed; retrying");
                sleep(retry_in).await;
                retry_in *= 2;
            }
        }
    }
}

/// One queue's ACKs and DONEs: waits for the first, takes every other
/// that is waiting (the deliveries that finished while the last command
/// was on its way, and those finishing in this turn), sends them — the
/// plain ACKs in one DQ.ACK, the results in one DQ.DONE of id result
/// pairs, both at once when the batch holds both — and tells the handler
/// how each went; never holds one back for a timer. `None` (after the
/// last delivery) ends it, once what it holds is sent.
async fn acker<H: Handler>(
    commands: Connection,
    queue: String,
    mut requests: mpsc::UnboundedReceiver<Option<Finished>>,
    handler: Arc<H>,
) {
    let mut batch: Vec<Finished> = Vec::new();
    let mut open = true;
    while open {
        match requests.recv().await {
            Some(Some(first)) => batch.push(first),
            _ => break,
        }
        tokio::task::yield_now().await;
        loop {
            match requests.try_recv() {
                Ok(Some(more)) => batch.push(more),
                Ok(None) => {
                    open = false;
                    break;
                }
                Err(_) => break,
            }
        }
        let (acks, dones): (Vec<Finished>, Vec<Finished>) = batch
            .drain(..)
            .partition(|(_, outcome)| matches!(outcome, Outcome::Ack));
        let (acked, done) = tokio::join!(
            finish_batch(&commands, &queue, &acks),
            finish_batch(&commands, &queue, &dones)
        );
        for (part, settlement) in [(acks, acked), (dones, done)] {
            for (delivery, outcome) in part {
                handler.settled(&delivery, Some(&outcome), &settlement);
            }
        }
    }
}

/// One DQ.ACK of the batch's ids — or, when it holds results, one DQ.DONE
/// of its id result pairs — tried again a few times when the server cannot
/// be reached. Its count short of the batch means a message of it was no
/// longer in flight; which one the reply does not say, so the whole batch
/// is told [`Settlement::AckedLate`]. An empty batch sends nothing.
async fn finish_batch(commands: &Connection, queue: &str, batch: &[Finished]) -> Settlement {
    if batch.is_empty() {
        return Settlement::Acked;
    }
    let with_results = matches!(batch[0].1, Outcome::Done(_));
    let command = if with_results { "DQ.DONE" } else { "DQ.ACK" };
    let mut cmd = redis::cmd(command);
    cmd.arg(queue);
    for (delivery, outcome) in batch {
        cmd.arg(&delivery.id);
        if let Outcome::Done(result) = outcome {
            cmd.arg(result.as_slice());
        }
    }
    let mut retry_in = Duration::from_millis(100);
    let mut tries = 0;
    loop {
        tries += 1;
        let mut con = commands.clone();
        match cmd.query_async::<redis::Value>(&mut con).await {
            Ok(redis::Value::Int(n)) if n as usize == batch.len() => return Settlement::Acked,
            Ok(redis::Value::Int(n)) => {
                tracing::warn!(queue = %queue, ids = batch.len(), counted = n, command,
                    "{command} counted fewer than it carried: the rest were no longer in flight");
                return Settlement::AckedLate;
            }
            Ok(other) => {
                return Settlement::Unsettled(
                    Error::Reply {
                        command,
                        detail: format!("{other:?}"),
                    }
                    .to_string(),
                )
            }
            Err(e) if tries >= 5 => return Settlement::Unsettled(Error::from(e).to_string()),
            Err(e) => {
                tracing::warn!(queue = %queue, ids = batch.len(), error = %e, command,
                    "{command} failed; retrying");
                sleep(retry_in).await;
                retry_in *= 2;
            }
        }
    }
}
/// A future that turns a panic while polling into `Err(message)`.
struct CatchUnwind<F>(F);

impl<F: std::future::Future> std::future::Future for CatchUnwind<F> {
    type Output = Result<F::Output, String>;

    fn poll(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        // SAFETY: the inner future is never moved out of the pinned wrapper;
        // this is structural pinning of its only field.
        let inner = unsafe { self.map_unchecked_mut(|s| &mut s.0) };
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| inner.poll(cx))) {
            Ok(std::task::Poll::Ready(v)) => std::task::Poll::Ready(Ok(v)),
            Ok(std::task::Poll::Pending) => std::task::Poll::Pending,
            Err(payload) => {
                let message = payload
                    .downcast_ref::<&str>()
                    .map(|s| (*s).to_owned())
                    .or_else(|| payload.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "(no message)".into());
                std::task::Poll::Ready(Err(message))
            }
        }
    }
}

/// A token cancelled on the first SIGINT or SIGTERM: pass it to
/// [`Consumer::run`] so that a worker stops cleanly when told to.
pub fn stop_on_signals() -> std::io::Result<CancellationToken> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut int = signal(SignalKind::interrupt())?;
    let mut term = signal(SignalKind::terminate())?;
    let token = CancellationToken::new();
    let stop = token.clone();
    tokio::spawn(async move {
        tokio::select! {
            _ = int.recv() => {}
            _ = term.recv() => {}
        }
        tracing::info!("stop signal received; finishing the deliveries in hand");
        stop.cancel();
    });
    Ok(token)
}
