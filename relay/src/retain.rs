//! Whether each queue keeps results: a delivered webhook's answer becomes
//! its result (DQ.DONE) only on a queue whose retention (RETAIN, or the
//! module's `dq.retain-ms`) keeps finished messages, so that a relay on a
//! queue without one sends the plain DQ.ACK it always sent.
//!
//! The relay reads each queue's DQ.CONFIG (`retain-ms`) at start and again
//! every [`REFRESH`]: a RETAIN set or removed while it runs applies from
//! the next read. A read that fails keeps what the last one said.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use dq_client::CancellationToken;
use dq_client::{admin, Connection};

/// How often the relay reads each queue's retention.
pub const REFRESH: Duration = Duration::from_secs(5);

/// Per queue: whether finished messages are kept (retain-ms above 0).
pub struct Retains {
    queues: HashMap<String, AtomicBool>,
}

impl Retains {
    /// The relay's queues, none keeping results until read.
    pub fn new<'a>(queues: impl IntoIterator<Item = &'a String>) -> Retains {
        Retains {
            queues: queues
                .into_iter()
                .map(|q| (q.clone(), AtomicBool::new(false)))
                .collect(),
        }
    }

    /// Whether `queue` keeps results, as last read.
    pub fn keeps(&self, queue: &str) -> bool {
        self.queues
            .get(queue)
            .is_some_and(|k| k.load(Ordering::Relaxed))
    }

    /// Reads every queue's retention once; the first failure is returned
    /// (the other queues are still read), and a queue whose read failed
    /// keeps its last value.
    pub async fn read(&self, con: &Connection) -> Result<(), dq_client::Error> {
        let mut first_error = None;
        for (queue, keeps) in &self.queues {
            match admin::config(&mut con.clone(), queue.as_bytes()).await {
                Ok(config) => {
                    let now = config.retain_ms > 0;
                    if keeps.swap(now, Ordering::Relaxed) != now {
                        tracing::info!(queue = %queue, retain_ms = config.retain_ms,
                            "results of delivered calls are {}",
                            if now { "kept (DQ.DONE)" } else { "not kept (DQ.ACK)" });
                    }
                }
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// Reads every [`REFRESH`] until `stop`.
    pub fn keep_reading(self: Arc<Self>, con: Connection, stop: CancellationToken) {
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = tokio::time::sleep(REFRESH) => {}
                    _ = stop.cancelled() => return,
                }
                if let Err(e) = self.read(&con).await {
                    tracing::warn!(error = %e,
                        "could not read the queues' RETAIN (DQ.CONFIG); keeping what was read last");
                }
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unread_or_unknown_queue_keeps_nothing() {
        let queues = ["hooks".to_string()];
        let r = Retains::new(&queues);
        assert!(!r.keeps("hooks"));
        assert!(!r.keeps("other"));
        r.queues["hooks"].store(true, Ordering::Relaxed);
        assert!(r.keeps("hooks"));
    }
}
