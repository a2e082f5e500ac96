//! The relay's handler: one HTTP call per delivery, and what it means.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use dq_client::{Delivery, Handler, NackState, Outcome, Settlement};
use prometheus_client::metrics::gauge::Gauge;
use reqwest::header::{AUTHORIZATION, RETRY_AFTER};
use reqwest::Url;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::allow::AllowList;
use crate::egress::{Egress, Refused};
use crate::envelope::{self, HttpCall};
use crate::metrics::{Metrics, OutcomeLabels, QueueLabels};
use crate::outcome::{self, EXCERPT_BYTES, RESULT_BYTES};
use crate::redact;
use crate::retain::Retains;
use crate::signature::{self, Secret};

/// Where a queue's messages go.
#[derive(Clone, Debug)]
pub enum Route {
    /// Each payload is an envelope naming its URL.
    Envelope,
    /// Each payload is the body of a POST to this URL.
    Fixed(Url),
}

pub struct Relay {
    pub http: reqwest::Client,
    pub routes: HashMap<String, Route>,
    pub allow: AllowList,
    /// The addresses it must not connect to; names are checked by the
    /// HTTP client's resolver, which shares it.
    pub egress: Arc<Egress>,
    pub secrets: Vec<Secret>,
    /// For calls whose message gives no timeout.
    pub timeout: Duration,
    /// A message's own timeout is capped here.
    pub max_timeout: Duration,
    /// A receiver's Retry-After is capped here.
    pub max_retry_after: Duration,
    pub per_host: PerHost,
    pub metrics: Metrics,
    /// Which queues keep results: their delivered calls end with DQ.DONE
    /// and the answer, the others' with a plain DQ.ACK.
    pub retains: Arc<Retains>,
}

/// At most `limit` calls at once to one host and port, whatever the queue:
/// one slow receiver must not take every connection the relay has, nor
/// be flooded when a backlog falls due at once.
pub struct PerHost {
    limit: usize,
    hosts: Mutex<HashMap<String, Arc<Semaphore>>>,
}

impl PerHost {
    pub fn new(limit: usize) -> PerHost {
        PerHost {
            limit,
            hosts: Mutex::new(HashMap::new()),
        }
    }

    async fn acquire(&self, url: &Url) -> Option<OwnedSemaphorePermit> {
        let key = format!(
            "{}:{}",
            url.host_str().unwrap_or(""),
            url.port_or_known_default().unwrap_or(0)
        );
        let semaphore = {
            // A poisoned lock only means another task panicked while
            // inserting; the map itself is still whole.
            let mut hosts = self.hosts.lock().unwrap_or_else(|p| p.into_inner());
            Arc::clone(
                hosts
                    .entry(key)
                    .or_insert_with(|| Arc::new(Semaphore::new(self.limit))),
            )
        };
        semaphore.acquire_owned().await.ok()
    }
}

/// Decrements the in-flight gauge however the call ends, also when the
/// work is dropped because its lease was lost.
struct InFlight(Gauge);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.dec();
    }
}

/// What came back from the receiver.
struct Answer {
    status: u16,
    retry_after: Option<String>,
    excerpt: String,
    /// A success's body, its first [`RESULT_BYTES`] (for its result).
    start: Vec<u8>,
}

impl Relay {
    fn allowed(&self, url: &Url) -> bool {
        self.allow.allows(url)
            || self
                .routes
                .values()
                .any(|r| matches!(r, Route::Fixed(f) if f == url))
    }

    async fn send(&self, delivery: &Delivery, call: HttpCall) -> Result<Answer, reqwest::Error> {
        let mut url = call.url;
        // Credentials in the URL become Basic authentication; a header the
        // message sets itself says more precisely what it wants, and two
        // Authorization headers would leave the receiver guessing.
        if call.headers.iter().any(|(n, _)| n == AUTHORIZATION) {
            let _ = url.set_username("");
            let _ = url.set_password(None);
        }
        let mut request = self.http.request(call.method, url);
        for (name, value) in call.headers {
            request = request.header(name, value);
        }
        request = request
            .header("X-DQ-Queue", redact::header_text(delivery.queue.as_bytes()))
            .header("X-DQ-Id", redact::header_text(&delivery.id))
            .header("X-DQ-Attempt", delivery.attempt);
        if !self.secrets.is_empty() {
            let t = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_secs());
            request = request.header(
                "X-DQ-Signature",
                signature::sign(&self.secrets, t, &call.body),
            );
        }
        let mut response = request.body(call.body).send().await?;
        let status = response.status().as_u16();
        let retry_after = response
            .headers()
            .get(RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let success = (200..300).contains(&status);
        // A success's body is read (up to a bound) so that the connection
        // can carry the next call; a failure's only as far as the excerpt.
        let limit = if success { 64 * 1024 } else { EXCERPT_BYTES };
        let mut body = Vec::new();
        while body.len() < limit {
            match response.chunk().await {
                Ok(Some(chunk)) => body.extend_from_slice(&chunk),
                // The status is the receiver's answer; a body cut short
                // does not change it.
                Ok(None) | Err(_) => break,
            }
        }
        let excerpt = if success {
            String::new()
        } else {
            outcome::excerpt(&body, EXCERPT_BYTES)
        };
        // One byte past the bound says the body went on (see `result`).
        let start = if success {
            body.truncate(RESULT_BYTES + 1);
            body
        } else {
            Vec::new()
        };
        Ok(Answer {
            status,
            retry_after,
            excerpt,
            start,
        })
    }
}

/// The resolver's refusal of a name's address, wherever in the error's
/// causes the HTTP client put it.
fn refusal(e: &reqwest::Error) -> Option<&Refused> {
    let mut next: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = next {
        if let Some(refused) = err.downcast_ref::<Refused>() {
            return Some(refused);
        }
        next = err.source();
    }
    None
}

impl Handler for Relay {
    async fn handle(&self, delivery: &Delivery) -> Outcome {
        let queue = QueueLabels {
            queue: delivery.queue.clone(),
        };
        let gauge = self.metrics.in_flight.get_or_create(&queue).clone();
        gauge.inc();
        let _in_flight = InFlight(gauge);

        let call = match self.routes.get(&delivery.queue) {
            Some(Route::Fixed(url)) => envelope::fixed(url, delivery.payload.clone()),
            _ => match envelope::parse_envelope(&delivery.payload) {
                Ok(call) => call,
                Err(why) => {
                    return Outcome::Dead {
                        error: format!("bad message: {why}"),
                    }
                }
            },
        };
        let shown_url = redact::url(&call.url);
        if !self.allowed(&call.url) {
            return Outcome::Dead {
                error: format!("url not allowed: {shown_url}"),
            };
        }
        // A refused address is refused for good: no retry can change it.
        if let Err(refused) = self.egress.check_url(&call.url) {
            return Outcome::Dead {
                error: refused.to_string(),
            };
        }
        let _host_slot = self.per_host.acquire(&call.url).await;
        let timeout = call
            .timeout
            .map_or(self.timeout, |t| t.min(self.max_timeout));

        let started = Instant::now();
        let answer = tokio::time::timeout(timeout, self.send(delivery, call)).await;
        let took = started.elapsed();
        self.metrics
            .request_seconds
            .get_or_create(&queue)
            .observe(took.as_secs_f64());

        let (outcome, status) = match answer {
            Ok(Ok(a)) => {
                let outcome = match outcome::from_status(
                    a.status,
                    a.retry_after.as_deref(),
                    &a.excerpt,
                    SystemTime::now(),
                    self.max_retry_after,
                ) {
                    // "What did the endpoint answer?" is DQ.WAIT's (or the
                    // dashboard's) to tell while the queue keeps results.
                    Outcome::Ack if self.retains.keeps(&delivery.queue) => {
                        Outcome::Done(outcome::result(a.status, &a.start))
                    }
                    outcome => outcome,
                };
                (outcome, Some(a.status))
            }
            Err(_elapsed) => (
                Outcome::Nack {
                    delay: None,
                    error: format!("timeout after {}", humantime::format_duration(timeout)),
                },
                None,
            ),
            Ok(Err(e)) => {
                // reqwest's error names the URL, query and credentials
                // included: drop it, and say why from its causes.
                let e = e.without_url();
                let why = match std::error::Error::source(&e) {
                    Some(cause) => outcome::transport_error(cause),
                    None => e.to_string(),
                };
                let outcome = if let Some(refused) = refusal(&e) {
                    Outcome::Dead {
                        error: refused.to_string(),
                    }
                } else if e.is_builder() {
                    Outcome::Dead {
                        error: format!("bad request: {why}"),
                    }
                } else if e.is_connect() {
                    Outcome::Nack {
                        delay: None,
                        error: format!("connection failed: {why}"),
                    }
                } else {
                    Outcome::Nack {
                        delay: None,
                        error: format!("request failed: {why}"),
                    }
                };
                (outcome, None)
            }
        };
        let ms = took.as_millis() as u64;
        match &outcome {
            Outcome::Ack | Outcome::Done(_) => tracing::debug!(queue = %delivery.queue,
                id = %delivery.id_lossy(), attempt = delivery.attempt, url = %shown_url, status,
                ms, "delivered"),
            Outcome::Nack { error, delay } => tracing::warn!(queue = %delivery.queue,
                id = %delivery.id_lossy(), attempt = delivery.attempt, url = %shown_url, status,
                ms, retry_after_ms = delay.map(|d| d.as_millis() as u64), error = %error,
                "call failed; will retry"),
            Outcome::Dead { error } => tracing::warn!(queue = %delivery.queue,
                id = %delivery.id_lossy(), attempt = delivery.attempt, url = %shown_url, status,
                ms, error = %error, "call failed permanently"),
        }
        outcome
    }

    fn settled(&self, delivery: &Delivery, outcome: Option<&Outcome>, settlement: &Settlement) {
        let label = match settlement {
            Settlement::Acked | Settlement::AckedLate => "delivered",
            Settlement::Nacked(NackState::Dead) => "dead",
            Settlement::Nacked(_) => "retry",
            Settlement::Stale => "stale",
            Settlement::Unsettled(_) => "unsettled",
        };
        self.metrics
            .deliveries
            .get_or_create(&OutcomeLabels {
                queue: delivery.queue.clone(),
                outcome: label,
            })
            .inc();
        let (queue, id, attempt) = (&delivery.queue, delivery.id_lossy(), delivery.attempt);
        match settlement {
            Settlement::Acked => {}
            Settlement::AckedLate => tracing::warn!(queue = %queue, id = %id, attempt,
                "delivered after the lease ran out: the message may be delivered again"),
            Settlement::Nacked(NackState::Dead) => {
                let (reason, error) = match outcome {
                    Some(Outcome::Dead { error }) => ("permanent failure", error.as_str()),
                    Some(Outcome::Nack { error, .. }) => ("no attempts left", error.as_str()),
                    _ => ("no attempts left", ""),
                };
                tracing::warn!(queue = %queue, id = %id, attempt, reason, error, "dead letter");
            }
            Settlement::Nacked(_) => {}
            Settlement::Stale => tracing::warn!(queue = %queue, id = %id, attempt,
                "the lease ran out before the outcome was recorded; the result is dropped \
                 (the message is delivered again)"),
            Settlement::Unsettled(e) => tracing::error!(queue = %queue, id = %id, attempt,
                error = %e, "could not record the outcome in Redis; the message is \
                 delivered again when its lease runs out"),
        }
    }
}
