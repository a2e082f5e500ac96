//! The consume loop: one popper task per queue, one task per delivery.

use std::sync::Arc;
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::AsyncConnectionConfig;
use std::collections::HashMap;

use tokio::sync::{mpsc, OwnedSemaphorePermit, Semaphore};
use tokio::time::{sleep, sleep_until, Instant};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::commands::{self, Popped};
use crate::delivery::{Delivery, Handler, Outcome, Settlement};
use crate::error::Error;
use crate::server::{Connection, Node, Server};
use crate::shard::Shards;

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
    /// Queues that share one pool of `concurrency` slots: each plain queue
    /// alone, a sharded queue's shards together.
    pools: Vec<Vec<String>>,
    config: ConsumerConfig,
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
    /// Each queue's acker: the ACKs of the deliveries that finished while
    /// its last DQ.ACK was on its way go in its next one.
    ackers: HashMap<String, mpsc::UnboundedSender<Option<Delivery>>>,
}

impl Consumer {
    /// Consumes `queues`, each with up to `concurrency` deliveries at once.
    pub fn new(
        server: impl Into<Server>,
        queues: Vec<String>,
        config: ConsumerConfig,
    ) -> Result<Consumer, Error> {
        let pools = queues.into_iter().map(|q| vec![q]).collect();
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
        Consumer::with_pools(server.into(), vec![shards.names().to_vec()], config)
    }

    fn with_pools(
        server: Server,
        pools: Vec<Vec<String>>,
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
        for queue in self.pools.iter().flatten() {
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
            // tokio's semaphore is fair (first come, first served), and a
            // popper of a pool of n asks for at most its share of slots at
            // once, so with work everywhere every queue of it gets its turn.
            let slots = Arc::new(Semaphore::new(self.config.concurrency));
            let share = self
                .config
                .concurrency
                .div_ceil(pool.len())
                .clamp(1, self.config.batch);
            for queue in pool {
                let popper = popper(
                    Arc::clone(&shared),
                    queue.clone(),
                    Arc::clone(&slots),
                    share,
                    pool.len() == 1,
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

/// Takes messages from one queue while slots of its pool are free.
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
    queue: String,
    slots: Arc<Semaphore>,
    share: usize,
    alone: bool,
) {
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
        let lease = shared.config.lease;
        let mut leased_at = std::time::Instant::now();
        let mut reply = pop_once(
            &shared,
            pc,
            node.as_ref(),
            commands::pop(&queue, permits.len(), None, lease),
        )
        .await;
        if matches!(&reply, Ok(redis::Value::Nil)) && !shared.shutdown.is_cancelled() {
            // Alone in its pool, the popper keeps its slots while it waits:
            // no other queue could use them, and a burst that falls due
            // comes in one reply.
            if !alone {
                permits.clear();
            }
            leased_at = std::time::Instant::now();
            let count = permits.len().max(1);
            let wait = commands::pop(&queue, count, Some(shared.config.block), lease);
            reply = pop_once(&shared, pc, node.as_ref(), wait).await;
        }
        let popped = match reply {
            Ok(reply) => commands::parse_pop(reply),
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
        let popped = match popped {
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
            let delivery = Delivery {
                queue: queue.clone(),
                id,
                payload,
                attempt,
                leased_at,
            };
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

/// Handles one delivery, keeping its lease alive, then settles it: an ACK
/// goes to its queue's acker, which sends it with the others and tells the
/// handler how it went; a NACK is sent here.
async fn deliver<H: Handler>(shared: Arc<Shared<H>>, delivery: Delivery, slot: Slot) {
    let outcome = handle_with_heartbeat(&shared, &delivery, slot).await;
    let settlement = match &outcome {
        Some(Outcome::Ack) => match shared.ackers.get(&delivery.queue) {
            Some(acker) => match acker.send(Some(delivery)) {
                Ok(()) => return,
                Err(mpsc::error::SendError(delivery)) => {
                    let delivery = delivery.expect("sent Some");
                    let gone = Settlement::Unsettled("the acker of this queue has stopped".into());
                    shared.handler.settled(&delivery, outcome.as_ref(), &gone);
                    return;
                }
            },
            None => Settlement::Unsettled("no acker for this queue".into()),
        },
        Some(outcome) => settle(&shared, &delivery, outcome).await,
        None => Settlement::Stale,
    };
    shared
        .handler
        .settled(&delivery, outcome.as_ref(), &settlement);
}

/// Runs the handler; every `touch_every` since the POP, renews the lease.
/// `None` when a TOUCH found the delivery over: the work is dropped.
async fn handle_with_heartbeat<H: Handler>(
    shared: &Shared<H>,
    delivery: &Delivery,
    slot: Slot,
) -> Option<Outcome> {
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
            outcome = &mut work => return Some(outcome),
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
            // STALE, or nil: the delivery is over and another consumer may
            // hold the message. Stop working on it.
            _ => {
                tracing::warn!(queue = %delivery.queue, id = %delivery.id_lossy(),
                    attempt = delivery.attempt, "lease lost before the work ended; abandoning it");
                return None;
            }
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
            Err(e) if commands::is_stale(&e) => Ok(Settlement::Stale),
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

/// One queue's ACKs: waits for the first, takes every other that is
/// waiting (the deliveries that finished while the last DQ.ACK was on its
/// way, and those finishing in this turn), sends them in one DQ.ACK, and
/// tells the handler how each went; never holds one back for a timer.
/// `None` (after the last delivery) ends it, once what it holds is sent.
async fn acker<H: Handler>(
    commands: Connection,
    queue: String,
    mut requests: mpsc::UnboundedReceiver<Option<Delivery>>,
    handler: Arc<H>,
) {
    let mut batch: Vec<Delivery> = Vec::new();
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
        let settlement = ack_batch(&commands, &queue, &batch).await;
        for delivery in batch.drain(..) {
            handler.settled(&delivery, Some(&Outcome::Ack), &settlement);
        }
    }
}

/// One DQ.ACK of the batch's ids, tried again a few times when the server
/// cannot be reached. Its count short of the batch means a message of it
/// was no longer in flight; which one the reply does not say, so the whole
/// batch is told [`Settlement::AckedLate`].
async fn ack_batch(commands: &Connection, queue: &str, batch: &[Delivery]) -> Settlement {
    let mut cmd = redis::cmd("DQ.ACK");
    cmd.arg(queue);
    for delivery in batch {
        cmd.arg(&delivery.id);
    }
    let mut retry_in = Duration::from_millis(100);
    let mut tries = 0;
    loop {
        tries += 1;
        let mut con = commands.clone();
        match cmd.query_async::<redis::Value>(&mut con).await {
            Ok(redis::Value::Int(n)) if n as usize == batch.len() => return Settlement::Acked,
            Ok(redis::Value::Int(n)) => {
                tracing::warn!(queue = %queue, ids = batch.len(), counted = n,
                    "DQ.ACK counted fewer than it carried: the rest were no longer in flight");
                return Settlement::AckedLate;
            }
            Ok(other) => {
                return Settlement::Unsettled(
                    Error::Reply {
                        command: "DQ.ACK",
                        detail: format!("{other:?}"),
                    }
                    .to_string(),
                )
            }
            Err(e) if tries >= 5 => return Settlement::Unsettled(Error::from(e).to_string()),
            Err(e) => {
                tracing::warn!(queue = %queue, ids = batch.len(), error = %e, "DQ.ACK failed; retrying");
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
