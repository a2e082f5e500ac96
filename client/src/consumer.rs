//! The consume loop: one popper task per queue, one task per delivery.

use std::sync::Arc;
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig, MultiplexedConnection};
use redis::AsyncConnectionConfig;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::{sleep, sleep_until, Instant};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::commands::{self, Popped};
use crate::delivery::{Delivery, Handler, Outcome, Settlement};
use crate::error::Error;

/// How a [`Consumer`] takes and holds messages.
#[derive(Clone, Debug)]
pub struct ConsumerConfig {
    /// Deliveries of one queue being handled at once. The popper asks for
    /// no more than the free slots, so no message is leased only to wait
    /// in this process while its lease runs.
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
    client: redis::Client,
    queues: Vec<String>,
    config: ConsumerConfig,
}

/// What every task of one `run` shares.
struct Shared<H> {
    handler: Arc<H>,
    config: ConsumerConfig,
    touch_every: Duration,
    /// ACK, NACK, TOUCH and CLIENT UNBLOCK from every task, pipelined on
    /// one socket; it reconnects by itself.
    commands: ConnectionManager,
    client: redis::Client,
    shutdown: CancellationToken,
    deliveries: TaskTracker,
}

impl Consumer {
    pub fn new(
        client: redis::Client,
        queues: Vec<String>,
        config: ConsumerConfig,
    ) -> Result<Consumer, Error> {
        if queues.is_empty() {
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
            client,
            queues,
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
        let commands = ConnectionManager::new_with_config(
            self.client.clone(),
            ConnectionManagerConfig::new()
                .set_response_timeout(Some(self.config.response_timeout))
                .set_connection_timeout(Some(self.config.response_timeout)),
        )
        .await?;
        let shared = Arc::new(Shared {
            handler,
            touch_every: self
                .config
                .touch_every
                .unwrap_or(self.config.lease / 3)
                .max(Duration::from_millis(1)),
            config: self.config.clone(),
            commands,
            client: self.client.clone(),
            shutdown,
            deliveries: TaskTracker::new(),
        });
        let poppers: Vec<_> = self
            .queues
            .iter()
            .map(|queue| tokio::spawn(popper(Arc::clone(&shared), queue.clone())))
            .collect();
        for popper in poppers {
            if let Err(e) = popper.await {
                tracing::error!(error = %e, "a popper task failed");
            }
        }
        // Every popper has stopped, so no delivery starts any more.
        shared.deliveries.close();
        shared.deliveries.wait().await;
        Ok(())
    }
}

/// A connection for blocking POPs: a blocked connection serves nobody else,
/// so each popper has its own. Its CLIENT ID lets shutdown unblock it.
async fn popper_connection(
    shared: &Shared<impl Handler>,
) -> Result<(MultiplexedConnection, Option<i64>), redis::RedisError> {
    let config = AsyncConnectionConfig::new()
        .set_connection_timeout(Some(shared.config.response_timeout))
        .set_response_timeout(Some(shared.config.block + shared.config.response_timeout));
    let mut conn = shared
        .client
        .get_multiplexed_async_connection_with_config(&config)
        .await?;
    let id = redis::cmd("CLIENT")
        .arg("ID")
        .query_async::<i64>(&mut conn)
        .await
        .ok();
    Ok((conn, id))
}

async fn popper<H: Handler>(shared: Arc<Shared<H>>, queue: String) {
    let slots = Arc::new(Semaphore::new(shared.config.concurrency));
    let mut conn: Option<(MultiplexedConnection, Option<i64>)> = None;
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
        while permits.len() < shared.config.batch {
            match Arc::clone(&slots).try_acquire_owned() {
                Ok(permit) => permits.push(permit),
                Err(_) => break,
            }
        }
        if conn.is_none() {
            match popper_connection(&shared).await {
                Ok(c) => conn = Some(c),
                Err(e) => {
                    tracing::warn!(queue = %queue, error = %e, "cannot connect for POP; retrying");
                    pause(&shared.shutdown, &mut retry_in).await;
                    continue;
                }
            }
        }
        let Some((con, client_id)) = conn.as_mut() else {
            continue;
        };
        let client_id = *client_id;
        let leased_at = std::time::Instant::now();
        let cmd = commands::pop(
            &queue,
            permits.len(),
            shared.config.block,
            shared.config.lease,
        );
        let reply = {
            let pop = cmd.query_async::<redis::Value>(con);
            tokio::pin!(pop);
            tokio::select! {
                reply = &mut pop => reply,
                _ = shared.shutdown.cancelled() => {
                    // Dropping the POP could lose what it is about to
                    // take (until the lease runs out): unblock it and
                    // deliver whatever it took.
                    if let Some(id) = client_id {
                        let mut commands = shared.commands.clone();
                        let unblock = redis::cmd("CLIENT")
                            .arg("UNBLOCK")
                            .arg(id)
                            .query_async::<redis::Value>(&mut commands)
                            .await;
                        if let Err(e) = unblock {
                            tracing::debug!(error = %e, "CLIENT UNBLOCK failed; waiting for the POP to end");
                        }
                    }
                    pop.await
                }
            }
        };
        let popped = match reply.map_err(Error::from).and_then(commands::parse_pop) {
            Ok(popped) => popped,
            Err(e) => {
                tracing::warn!(queue = %queue, error = %e, "DQ.POP failed; retrying");
                conn = None;
                pause(&shared.shutdown, &mut retry_in).await;
                continue;
            }
        };
        retry_in = Duration::from_millis(100);
        // Unused slots go back now, as `permits` is dropped after the loop.
        for (entry, permit) in popped.into_iter().zip(permits.drain(..)) {
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
            shared
                .deliveries
                .spawn(deliver(Arc::clone(&shared), delivery, permit));
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

/// Handles one delivery, keeping its lease alive, then settles it.
async fn deliver<H: Handler>(
    shared: Arc<Shared<H>>,
    delivery: Delivery,
    _slot: OwnedSemaphorePermit,
) {
    let outcome = handle_with_heartbeat(&shared, &delivery).await;
    let settlement = match &outcome {
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
) -> Option<Outcome> {
    let work = shared.handler.handle(delivery);
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

/// Sends the ACK or NACK, trying again a few times when the server cannot
/// be reached (both are safe to repeat: a second ACK counts 0, a second
/// fenced NACK is STALE).
async fn settle<H: Handler>(
    shared: &Shared<H>,
    delivery: &Delivery,
    outcome: &Outcome,
) -> Settlement {
    let cmd = match outcome {
        Outcome::Ack => commands::ack(&delivery.queue, &delivery.id),
        _ => commands::nack(&delivery.queue, &delivery.id, delivery.attempt, outcome),
    };
    let mut retry_in = Duration::from_millis(100);
    let mut tries = 0;
    loop {
        tries += 1;
        let mut commands = shared.commands.clone();
        let reply = cmd.query_async::<redis::Value>(&mut commands).await;
        let settled = match (outcome, reply) {
            (Outcome::Ack, Ok(redis::Value::Int(n))) if n > 0 => Ok(Settlement::Acked),
            (Outcome::Ack, Ok(redis::Value::Int(_))) => Ok(Settlement::AckedLate),
            (Outcome::Ack, Ok(other)) => Err(Error::Reply {
                command: "DQ.ACK",
                detail: format!("{other:?}"),
            }),
            (_, Ok(reply)) => commands::parse_nack(&reply).map(|state| match state {
                Some(state) => Settlement::Nacked(state),
                None => Settlement::Stale,
            }),
            (_, Err(e)) if commands::is_stale(&e) => Ok(Settlement::Stale),
            (_, Err(e)) => Err(Error::from(e)),
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
