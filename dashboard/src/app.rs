//! What every request handler shares: the servers, the history, the
//! settings; and the two questions most of them ask first — which server a
//! URL names, and whether it holds the queue.

use std::sync::{Arc, Mutex, RwLock};

use dq_client::admin;
use hyper::StatusCode;

use crate::backend::{Backend, History, Server, ServerSnap};
use crate::http::{fail, redis_fail, utf8, Fail};
use crate::security::{Auth, Csrf};
use crate::sharded::Layouts;

pub struct App {
    pub backend: Arc<Backend>,
    pub history: Arc<Mutex<History>>,
    pub latest: Arc<RwLock<Option<Arc<Vec<ServerSnap>>>>>,
    pub auth: Auth,
    pub csrf: Csrf,
    pub read_only: bool,
    /// The chart window as the pages name it, e.g. `10m`.
    pub window: String,
    /// Which queues `/metrics` gives series of their own.
    pub metrics: crate::metrics::Selection,
    /// The shard names of the sharded queues met so far.
    pub layouts: Layouts,
}

impl App {
    /// The server a URL names (`host:port`); 404 when the dashboard does
    /// not read it (any more: a cluster's masters change).
    pub fn server_of(&self, server: &[u8]) -> Result<Arc<Server>, Fail> {
        let name = utf8(server, "the server")?;
        self.backend.server(&name).ok_or_else(|| {
            fail(
                StatusCode::NOT_FOUND,
                "Unknown server",
                format!(
                    "{name} is not a server this dashboard reads (the cluster may have changed)."
                ),
            )
        })
    }

    /// Whether `queue` exists on `server`: DQ.QUEUES lists it. The
    /// sampler's last list answers first; DQ.QUEUES MATCH of the exact name
    /// is asked when it does not know (a one-name answer, however many
    /// queues).
    pub async fn queue_exists(&self, server: &Server, queue: &[u8]) -> Result<bool, Fail> {
        let known = self
            .latest
            .read()
            .ok()
            .and_then(|l| l.clone())
            .is_some_and(|snaps| {
                snaps
                    .iter()
                    .any(|s| s.addr == server.addr && s.queues.iter().any(|(q, _)| q == queue))
            });
        if known {
            return Ok(true);
        }
        let mut con = server.con.clone();
        let names = admin::queues_matching(&mut con, &admin::glob_escape(queue))
            .await
            .map_err(redis_fail)?;
        Ok(names.iter().any(|n| n == queue))
    }

    /// 404 unless `server` holds `queue`: pages and actions name only
    /// queues that exist.
    pub async fn existing_queue(&self, server: &Server, queue: &[u8]) -> Result<(), Fail> {
        if self.queue_exists(server, queue).await? {
            return Ok(());
        }
        Err(fail(
            StatusCode::NOT_FOUND,
            "Unknown queue",
            format!(
                "{} has no queue named {}.",
                server.addr,
                crate::render::label(queue, 200)
            ),
        ))
    }
}
