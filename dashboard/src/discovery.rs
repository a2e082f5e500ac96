//! Finding a sharded queue's shards: which exist, on which master, and
//! what each one's DQ.QUEUES WITHSTATS record says. sharded.rs says which
//! names are shards; this file asks the servers where they are.

use std::collections::HashMap;
use std::sync::Arc;

use dq_client::{admin, Stats};
use hyper::StatusCode;

use crate::app::App;
use crate::backend::Server;
use crate::http::{fail, Fail};
use crate::pages;
use crate::sharded::{self, ShardName};

/// A sharded queue as its masters hold it now.
pub struct ShardSet {
    pub name: ShardName,
    pub shards: Vec<ShardAt>,
    /// Masters that could not be read, with why: their shards are unknown.
    pub unreadable: Vec<(String, String)>,
}

/// A queue (a shard) to send a command to, and the server to send it to.
pub type Target = (Vec<u8>, Arc<Server>);

/// One shard: where it lives and what DQ.QUEUES WITHSTATS said of it.
pub struct ShardAt {
    pub name: Vec<u8>,
    /// The master that lists it; for a shard no master lists (never used
    /// yet), the one that would hold it. None: no known master serves its
    /// slot (the cluster is changing).
    pub server: Option<Arc<Server>>,
    /// Its DQ.STATS record; None while no master lists it.
    pub stats: Option<Stats>,
}

impl ShardSet {
    /// The flow control of every shard, for a shard's page.
    pub fn view(&self) -> pages::Sharding {
        let all = || self.shards.iter().filter_map(|s| s.stats.as_ref());
        let mut rates: Vec<(String, usize)> = Vec::new();
        let mut max_inflights: Vec<(u64, usize)> = Vec::new();
        for stats in all() {
            if let Some(r) = &stats.rate {
                match rates.iter_mut().find(|(t, _)| t == r) {
                    Some((_, n)) => *n += 1,
                    None => rates.push((r.clone(), 1)),
                }
            }
            if let Some(m) = stats.max_inflight {
                match max_inflights.iter_mut().find(|(v, _)| *v == m) {
                    Some((_, n)) => *n += 1,
                    None => max_inflights.push((m, 1)),
                }
            }
        }
        pages::Sharding {
            base: self.name.base.clone(),
            index: self.name.index,
            count: self.name.count,
            present: all().count(),
            paused: all().filter(|s| s.paused).count(),
            paused_until: all().filter(|s| s.paused).map(|s| s.paused_until).collect(),
            throttled: all().map(|s| s.throttled).sum(),
            rates,
            max_inflights,
            unreadable: self.unreadable.clone(),
        }
    }

    /// Every shard with the master to send it a command, or why not:
    /// acting on some shards only would leave the queue half paused.
    pub fn targets(&self) -> Result<Vec<Target>, Fail> {
        if let Some((addr, e)) = self.unreadable.first() {
            return Err(fail(
                StatusCode::BAD_GATEWAY,
                "The server could not answer",
                format!(
                    "Master {addr} could not be read ({e}), so the shards of {} it holds are \
                     unknown. Nothing was done.",
                    self.name.base
                ),
            ));
        }
        self.shards
            .iter()
            .map(|s| match &s.server {
                Some(server) => Ok((s.name.clone(), server.clone())),
                None => Err(fail(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "Cluster changing",
                    format!(
                        "No known master serves the slot of shard {}. Nothing was done; \
                         try again once the cluster has settled.",
                        crate::render::label(&s.name, 200)
                    ),
                )),
            })
            .collect()
    }
}

/// When `queue` is a shard of a sharded queue: every shard of it, read
/// with one DQ.QUEUES MATCH WITHSTATS per master (on the queue's own
/// server only, outside a cluster, where a sharded queue lives on one).
pub async fn find_shards(app: &App, server: &Arc<Server>, queue: &[u8]) -> Option<ShardSet> {
    let (name, layout) = app.layouts.shard(queue).await?;
    let cluster = app.backend.is_cluster();
    let servers = if cluster {
        app.backend.servers()
    } else {
        vec![server.clone()]
    };
    let pattern = sharded::pattern(&name.base, name.count);
    let mut reads = tokio::task::JoinSet::new();
    for s in servers {
        let pattern = pattern.clone();
        reads.spawn(async move {
            let mut con = s.con.clone();
            let got = admin::queues_with_stats(&mut con, Some(&pattern)).await;
            (s, got)
        });
    }
    let mut listed: HashMap<Vec<u8>, (Arc<Server>, Stats)> = HashMap::new();
    let mut unreadable = Vec::new();
    while let Some(done) = reads.join_next().await {
        match done {
            Ok((s, Ok(queues))) => {
                for (name, stats) in queues {
                    listed.insert(name, (s.clone(), stats));
                }
            }
            Ok((s, Err(e))) => unreadable.push((s.addr.clone(), e.to_string())),
            Err(e) => unreadable.push(("?".to_string(), e.to_string())),
        }
    }
    unreadable.sort();
    let shards = layout
        .names()
        .iter()
        .map(|n| {
            let n = n.as_bytes();
            match listed.remove(n) {
                Some((s, stats)) => ShardAt {
                    name: n.to_vec(),
                    server: Some(s),
                    stats: Some(stats),
                },
                None => ShardAt {
                    name: n.to_vec(),
                    server: if cluster {
                        app.backend.master_of_key(n)
                    } else {
                        Some(server.clone())
                    },
                    stats: None,
                },
            }
        })
        .collect();
    Some(ShardSet {
        name,
        shards,
        unreadable,
    })
}
