//! The servers the dashboard reads, what they hold now, and the history the
//! charts draw.
//!
//! A standalone server is one `--redis` URL. In a cluster the dashboard
//! finds every master with CLUSTER SLOTS (on a seed, then on any master it
//! knows, at every sample) and keeps one connection per master. A queue is
//! shown as living on the master whose DQ.QUEUES listed it, and every
//! command for that queue goes to that master: the server's own answer,
//! rather than a slot map of ours, says where each queue is, and no key
//! routing is needed for DQ.QUEUES (which names no key) or for INFO.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use anyhow::{bail, Context};
use dq_client::admin;
use dq_client::{InfoDq, Stats};
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{ConnectionAddr, ConnectionInfo, Value};

use crate::render::now_ms;

/// One server (a standalone server or a cluster master).
pub struct Server {
    /// `host:port` (or the socket path): its name on pages, in logs and in
    /// metric labels; never a password.
    pub addr: String,
    pub con: ConnectionManager,
}

/// What one server holds at one moment.
pub struct ServerSnap {
    pub addr: String,
    /// Each queue's name and DQ.STATS record (its flow control and
    /// schedule count too), as one DQ.QUEUES WITHSTATS gave them.
    pub queues: Vec<(Vec<u8>, Stats)>,
    pub info: Option<InfoDq>,
    /// Why the server could not be read (then `queues` may be partial).
    pub error: Option<String>,
}

pub struct Backend {
    cluster: bool,
    /// The seeds' connection settings, for connecting to discovered masters
    /// (same user, password, TLS).
    template: ConnectionInfo,
    servers: RwLock<Vec<Arc<Server>>>,
    /// Cluster: which master serves each slot range, from the last
    /// CLUSTER SLOTS: where a sharded queue's shards that no master lists
    /// yet go (DQ.PAUSE makes them).
    slots: RwLock<Vec<SlotRange>>,
}

/// Slots `first..=last` and the master (`host:port`) serving them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SlotRange {
    pub first: u16,
    pub last: u16,
    pub master: String,
}

/// `host:port` of an address.
pub fn addr_name(addr: &ConnectionAddr) -> String {
    match addr {
        ConnectionAddr::Tcp(host, port) | ConnectionAddr::TcpTls { host, port, .. } => {
            if host.contains(':') {
                format!("[{host}]:{port}")
            } else {
                format!("{host}:{port}")
            }
        }
        ConnectionAddr::Unix(path) => path.display().to_string(),
        // A future variant: its Display (redis prints host:port, no
        // password, for every address kind).
        #[allow(unreachable_patterns)]
        other => other.to_string(),
    }
}

fn manager_config() -> ConnectionManagerConfig {
    ConnectionManagerConfig::new()
        .set_connection_timeout(Some(Duration::from_secs(3)))
        .set_response_timeout(Some(Duration::from_secs(10)))
        .set_number_of_retries(2)
        .set_max_delay(Duration::from_secs(2))
}

async fn connect(info: ConnectionInfo) -> anyhow::Result<Arc<Server>> {
    let addr = addr_name(info.addr());
    let client = redis::Client::open(info).with_context(|| format!("server {addr}"))?;
    let con = ConnectionManager::new_with_config(client, manager_config())
        .await
        .with_context(|| format!("connecting to {addr}"))?;
    Ok(Arc::new(Server { addr, con }))
}

/// The slot ranges of a CLUSTER SLOTS reply, each with its master as
/// (host, port). An empty host means "the node you asked".
pub fn slot_ranges(reply: &Value, asked_host: &str) -> Vec<(u16, u16, String, u16)> {
    let mut ranges = Vec::new();
    let Value::Array(items) = reply else {
        return ranges;
    };
    for range in items {
        let Value::Array(items) = range else { continue };
        let (Some(Value::Int(first)), Some(Value::Int(last)), Some(Value::Array(node))) =
            (items.first(), items.get(1), items.get(2))
        else {
            continue;
        };
        let (Ok(first), Ok(last)) = (u16::try_from(*first), u16::try_from(*last)) else {
            continue;
        };
        let host = match node.first() {
            Some(Value::BulkString(b)) => String::from_utf8_lossy(b).into_owned(),
            Some(Value::SimpleString(s)) => s.clone(),
            _ => continue,
        };
        let host = if host.is_empty() || host == "?" {
            asked_host.to_string()
        } else {
            host
        };
        let Some(Value::Int(port)) = node.get(1) else {
            continue;
        };
        let Ok(port) = u16::try_from(*port) else {
            continue;
        };
        ranges.push((first, last, host, port));
    }
    ranges
}

/// The masters of a CLUSTER SLOTS reply, as (host, port), in slot order,
/// each once. An empty host means "the node you asked".
pub fn slots_masters(reply: &Value, asked_host: &str) -> Vec<(String, u16)> {
    let mut masters: Vec<(String, u16)> = Vec::new();
    for (_, _, host, port) in slot_ranges(reply, asked_host) {
        if !masters.iter().any(|(h, p)| *h == host && *p == port) {
            masters.push((host, port));
        }
    }
    masters
}

impl Backend {
    /// Connects to every seed; with `cluster` (or when a seed says
    /// `cluster_enabled:1`) to every master instead.
    pub async fn connect(seeds: Vec<ConnectionInfo>, cluster: bool) -> anyhow::Result<Backend> {
        let Some(template) = seeds.first().cloned() else {
            bail!("give at least one --redis URL");
        };
        let mut servers = Vec::new();
        for info in seeds {
            servers.push(connect(info).await?);
        }
        let mut detected = cluster;
        if !detected {
            for s in &servers {
                let mut con = s.con.clone();
                let info: String = redis::cmd("INFO")
                    .arg("cluster")
                    .query_async(&mut con)
                    .await
                    .with_context(|| format!("INFO cluster on {}", s.addr))?;
                if info.lines().any(|l| l.trim() == "cluster_enabled:1") {
                    detected = true;
                }
            }
        }
        let backend = Backend {
            cluster: detected,
            template,
            servers: RwLock::new(servers),
            slots: RwLock::new(Vec::new()),
        };
        if detected {
            backend
                .refresh_topology()
                .await
                .context("finding the cluster's masters (CLUSTER SLOTS)")?;
        }
        Ok(backend)
    }

    pub fn is_cluster(&self) -> bool {
        self.cluster
    }

    pub fn servers(&self) -> Vec<Arc<Server>> {
        self.servers.read().map(|s| s.clone()).unwrap_or_default()
    }

    pub fn server(&self, addr: &str) -> Option<Arc<Server>> {
        self.servers().into_iter().find(|s| s.addr == addr)
    }

    /// Cluster: the master serving `key`'s slot, by the last CLUSTER
    /// SLOTS; None when no known master serves it (or not a cluster).
    pub fn master_of_key(&self, key: &[u8]) -> Option<Arc<Server>> {
        if !self.cluster {
            return None;
        }
        let slot = dq_client::key_slot(key);
        let master = self.slots.read().ok().and_then(|ranges| {
            ranges
                .iter()
                .find(|r| (r.first..=r.last).contains(&slot))
                .map(|r| r.master.clone())
        })?;
        self.server(&master)
    }

    /// Cluster: asks CLUSTER SLOTS of the servers known (first that
    /// answers) and keeps exactly the masters it names.
    pub async fn refresh_topology(&self) -> anyhow::Result<()> {
        if !self.cluster {
            return Ok(());
        }
        let known = self.servers();
        let mut last_error = None;
        for s in &known {
            let mut con = s.con.clone();
            let reply: Value = match redis::cmd("CLUSTER")
                .arg("SLOTS")
                .query_async(&mut con)
                .await
            {
                Ok(v) => v,
                Err(e) => {
                    last_error = Some(anyhow::Error::from(e).context(s.addr.clone()));
                    continue;
                }
            };
            let asked = s.addr.rsplit_once(':').map_or(String::new(), |(h, _)| {
                h.trim_matches(['[', ']']).to_string()
            });
            let masters = slots_masters(&reply, &asked);
            let ranges: Vec<SlotRange> = slot_ranges(&reply, &asked)
                .into_iter()
                .map(|(first, last, host, port)| SlotRange {
                    first,
                    last,
                    master: addr_name(dq_client::node_info(&self.template, &host, port).addr()),
                })
                .collect();
            if masters.is_empty() {
                bail!(
                    "{}: CLUSTER SLOTS names no master (are all slots assigned?)",
                    s.addr
                );
            }
            let mut next = Vec::new();
            for (host, port) in masters {
                let info = dq_client::node_info(&self.template, &host, port);
                let name = addr_name(info.addr());
                match known.iter().find(|k| k.addr == name) {
                    Some(k) => next.push(k.clone()),
                    None => match connect(info).await {
                        Ok(server) => {
                            tracing::info!(server = %server.addr, "cluster master found");
                            next.push(server);
                        }
                        Err(e) => {
                            tracing::warn!(server = %name, error = format!("{e:#}"),
                                "cannot reach a cluster master");
                        }
                    },
                }
            }
            if let Ok(mut servers) = self.servers.write() {
                *servers = next;
            }
            if let Ok(mut slots) = self.slots.write() {
                *slots = ranges;
            }
            return Ok(());
        }
        Err(last_error.unwrap_or_else(|| anyhow::anyhow!("no server to ask")))
    }

    /// What one server holds now: INFO dq and one DQ.QUEUES WITHSTATS
    /// (with MATCH `pattern` when given), however many queues it holds.
    pub async fn snapshot_of(server: &Server, pattern: Option<&[u8]>) -> ServerSnap {
        let mut con = server.con.clone();
        let mut snap = ServerSnap {
            addr: server.addr.clone(),
            queues: Vec::new(),
            info: None,
            error: None,
        };
        match admin::info_dq(&mut con).await {
            Ok(info) => snap.info = Some(info),
            Err(e) => {
                snap.error = Some(e.to_string());
                return snap;
            }
        }
        match admin::queues_with_stats(&mut con, pattern).await {
            Ok(queues) => snap.queues = queues,
            Err(e) => snap.error = Some(e.to_string()),
        }
        snap
    }

    /// Every server's snapshot, read in parallel.
    pub async fn snapshot(&self) -> Vec<ServerSnap> {
        Backend::snapshot_matching(self.servers(), None).await
    }

    /// The snapshots of `servers`, read in parallel, each with DQ.QUEUES
    /// MATCH `pattern` when given; in the order of `servers`.
    pub async fn snapshot_matching(
        servers: Vec<Arc<Server>>,
        pattern: Option<&[u8]>,
    ) -> Vec<ServerSnap> {
        let mut tasks = tokio::task::JoinSet::new();
        for (i, s) in servers.into_iter().enumerate() {
            let pattern = pattern.map(<[u8]>::to_vec);
            tasks.spawn(async move { (i, Backend::snapshot_of(&s, pattern.as_deref()).await) });
        }
        let mut snaps = Vec::new();
        while let Some(done) = tasks.join_next().await {
            if let Ok(pair) = done {
                snaps.push(pair);
            }
        }
        snaps.sort_by_key(|(i, _)| *i);
        snaps.into_iter().map(|(_, s)| s).collect()
    }
}

// --- history -------------------------------------------------------------------

/// One sample of a queue (or of all queues summed).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Point {
    pub at_ms: u64,
    pub delayed: u64,
    pub ready: u64,
    pub inflight: u64,
    pub dead: u64,
    pub added: u64,
    pub acked: u64,
    pub dead_lettered: u64,
}

impl Point {
    pub fn of(at_ms: u64, s: &Stats) -> Point {
        Point {
            at_ms,
            delayed: s.delayed,
            ready: s.ready,
            inflight: s.inflight,
            dead: s.dead,
            added: s.added,
            acked: s.acked,
            dead_lettered: s.dead_lettered,
        }
    }

    fn add(&mut self, o: &Point) {
        self.delayed += o.delayed;
        self.ready += o.ready;
        self.inflight += o.inflight;
        self.dead += o.dead;
        self.added += o.added;
        self.acked += o.acked;
        self.dead_lettered += o.dead_lettered;
    }
}

/// Per second between two points of one counter; 0 across a reset (a
/// queue deleted and made again) or no time.
pub fn per_s(a: &Point, b: &Point, field: fn(&Point) -> u64) -> f64 {
    let dt = b.at_ms.saturating_sub(a.at_ms);
    if dt == 0 {
        return 0.0;
    }
    field(b).saturating_sub(field(a)) as f64 * 1000.0 / dt as f64
}

/// Rates over the whole series: (added, acked, dead-lettered) per second
/// between each pair of neighbours.
pub fn rates(points: &[Point]) -> Vec<(f64, f64, f64)> {
    points
        .windows(2)
        .map(|w| {
            (
                per_s(&w[0], &w[1], |p| p.added),
                per_s(&w[0], &w[1], |p| p.acked),
                per_s(&w[0], &w[1], |p| p.dead_lettered),
            )
        })
        .collect()
}

/// The recent rate: from the newest point back to the newest one at least
/// `span_ms` older (or the oldest there is).
pub fn recent_rate(points: &[Point], span_ms: u64, field: fn(&Point) -> u64) -> f64 {
    let Some(last) = points.last() else {
        return 0.0;
    };
    let from = points
        .iter()
        .rev()
        .find(|p| last.at_ms.saturating_sub(p.at_ms) >= span_ms)
        .or(points.first());
    from.map_or(0.0, |f| per_s(f, last, field))
}

/// Points a queue keeps over the whole window: its charts' resolution.
/// Totals keep every sample; a queue keeps one point per window/60 (10 s
/// over the default 10 minutes), so that memory grows by about 4 KB per
/// queue, not by 20 KB, and 10,000 queues cost some 40 MB.
pub const QUEUE_POINTS: usize = 60;

/// One queue's points: spaced at least `step` apart, but for the newest,
/// which each sample replaces until it is `step` past the one before.
struct Ring {
    points: VecDeque<Point>,
    /// The sample that last saw the queue.
    seen: u64,
}

impl Ring {
    fn push(&mut self, p: Point, step_ms: u64, capacity: usize) {
        let n = self.points.len();
        if n >= 2
            && self.points[n - 1]
                .at_ms
                .saturating_sub(self.points[n - 2].at_ms)
                < step_ms
        {
            self.points[n - 1] = p;
        } else {
            self.points.push_back(p);
            while self.points.len() > capacity {
                self.points.pop_front();
            }
        }
    }
}

/// A ring buffer of every sample of the sum of all queues, and a coarser
/// one per queue (see [`QUEUE_POINTS`]).
pub struct History {
    capacity: usize,
    queue_capacity: usize,
    queue_step_ms: u64,
    /// By server, then by queue name: a sample looks each queue up without
    /// copying its name.
    queues: HashMap<String, HashMap<Vec<u8>, Ring>>,
    total: VecDeque<Point>,
    samples: u64,
}

impl History {
    /// A history of `window`, sampled every `interval`.
    pub fn new(interval: Duration, window: Duration) -> History {
        let interval_ms = interval.as_millis().max(1) as u64;
        let window_ms = window.as_millis() as u64;
        let capacity = (window_ms / interval_ms) as usize + 1;
        let step = (window_ms / QUEUE_POINTS as u64).max(interval_ms);
        History {
            capacity: capacity.max(2),
            queue_capacity: capacity.clamp(2, QUEUE_POINTS + 2),
            queue_step_ms: step,
            queues: HashMap::new(),
            total: VecDeque::new(),
            samples: 0,
        }
    }

    /// The span a queue's recent rates are measured over: one step of its
    /// ring (at least one sample interval).
    pub fn rate_span_ms(&self) -> u64 {
        self.queue_step_ms
    }

    pub fn record(&mut self, at_ms: u64, snaps: &[ServerSnap]) {
        self.samples += 1;
        let sample = self.samples;
        let mut total = Point {
            at_ms,
            ..Point::default()
        };
        for snap in snaps {
            if !self.queues.contains_key(&snap.addr) {
                self.queues.insert(snap.addr.clone(), HashMap::new());
            }
            let Some(rings) = self.queues.get_mut(&snap.addr) else {
                continue;
            };
            for (name, stats) in &snap.queues {
                let p = Point::of(at_ms, stats);
                total.add(&p);
                match rings.get_mut(name.as_slice()) {
                    Some(ring) => {
                        ring.push(p, self.queue_step_ms, self.queue_capacity);
                        ring.seen = sample;
                    }
                    None => {
                        rings.insert(
                            name.clone(),
                            Ring {
                                points: VecDeque::from([p]),
                                seen: sample,
                            },
                        );
                    }
                }
            }
        }
        // A queue gone (deleted, or moved to another master) is forgotten,
        // unless its server could not be read this time; so is a server
        // that left the cluster.
        self.queues
            .retain(|addr, _| snaps.iter().any(|s| s.addr == *addr));
        for snap in snaps.iter().filter(|s| s.error.is_none()) {
            if let Some(rings) = self.queues.get_mut(&snap.addr) {
                rings.retain(|_, r| r.seen == sample);
            }
        }
        if self.total.len() == self.capacity {
            self.total.pop_front();
        }
        self.total.push_back(total);
    }

    pub fn queue(&self, server: &str, name: &[u8]) -> Vec<Point> {
        self.queues
            .get(server)
            .and_then(|rings| rings.get(name))
            .map(|r| r.points.iter().copied().collect())
            .unwrap_or_default()
    }

    pub fn total(&self) -> Vec<Point> {
        self.total.iter().copied().collect()
    }
}

/// Samples every `interval` into `history`, refreshing the cluster's
/// topology first. Runs until the process ends.
pub async fn sample(
    backend: Arc<Backend>,
    history: Arc<Mutex<History>>,
    latest: Arc<RwLock<Option<Arc<Vec<ServerSnap>>>>>,
    interval: Duration,
) {
    let mut tick = tokio::time::interval(interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // A server's last error: logged when it changes, not at every sample.
    let mut failing: HashMap<String, String> = HashMap::new();
    loop {
        tick.tick().await;
        if let Err(e) = backend.refresh_topology().await {
            tracing::warn!(error = format!("{e:#}"), "cluster topology not refreshed");
        }
        let snaps = backend.snapshot().await;
        for s in &snaps {
            match &s.error {
                Some(e) if failing.get(&s.addr) != Some(e) => {
                    tracing::warn!(server = %s.addr, error = %e, "cannot read the server");
                    failing.insert(s.addr.clone(), e.clone());
                }
                None if failing.remove(&s.addr).is_some() => {
                    tracing::info!(server = %s.addr, "the server answers again");
                }
                _ => {}
            }
        }
        if let Ok(mut h) = history.lock() {
            h.record(now_ms(), &snaps);
        }
        if let Ok(mut l) = latest.write() {
            *l = Some(Arc::new(snaps));
        }
    }
}

/// A server read in full, holding `queues`: what the tests of the history
/// and of `/metrics` start from.
#[cfg(test)]
pub fn test_snap(
    addr: &str,
    queues: impl IntoIterator<Item = (&'static str, Stats)>,
) -> ServerSnap {
    ServerSnap {
        addr: addr.into(),
        queues: queues
            .into_iter()
            .map(|(name, stats)| (name.as_bytes().to_vec(), stats))
            .collect(),
        info: None,
        error: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snap(addr: &str, queues: &[(&'static str, u64, u64)]) -> ServerSnap {
        let stats = |ready, added| Stats {
            ready,
            added,
            ..Stats::default()
        };
        test_snap(addr, queues.iter().map(|&(n, r, a)| (n, stats(r, a))))
    }

    #[test]
    fn history_rings_rates_and_totals() {
        // 2 s samples over 20 s: totals keep 11 points, a queue one per
        // max(20 s / 60, 2 s) = 2 s too.
        let mut h = History::new(Duration::from_secs(2), Duration::from_secs(6));
        for i in 0..5u64 {
            h.record(
                i * 2000,
                &[
                    snap("a:1", &[("q", i, i * 10)]),
                    snap("b:2", &[("r", 1, 0)]),
                ],
            );
        }
        let q = h.queue("a:1", b"q");
        assert_eq!(q.len(), 4);
        assert_eq!(q[0].ready, 1);
        assert_eq!(recent_rate(&q, 2000, |p| p.added), 5.0);
        assert_eq!(rates(&q).len(), 3);
        assert_eq!(h.total().len(), 4);
        assert_eq!(h.total().last().map(|p| p.ready), Some(5));
        // r disappears from b:2: forgotten.
        h.record(10_000, &[snap("a:1", &[("q", 0, 50)]), snap("b:2", &[])]);
        assert!(h.queue("b:2", b"r").is_empty());
        // A server that could not be read keeps its queues' history.
        let mut down = snap("a:1", &[]);
        down.error = Some("down".into());
        h.record(12_000, &[down]);
        assert!(!h.queue("a:1", b"q").is_empty());
        // A counter going back (queue made again) is no negative rate.
        let a = Point {
            at_ms: 0,
            added: 10,
            ..Point::default()
        };
        let b = Point {
            at_ms: 1000,
            added: 3,
            ..Point::default()
        };
        assert_eq!(per_s(&a, &b, |p| p.added), 0.0);
    }

    #[test]
    fn a_queue_keeps_one_point_per_step_and_the_newest() {
        // 1 s samples over 10 minutes: totals keep 601 points, a queue one
        // per 10 s (62 at most), and its newest always.
        let mut h = History::new(Duration::from_secs(1), Duration::from_secs(600));
        assert_eq!(h.rate_span_ms(), 10_000);
        for i in 0..1000u64 {
            h.record(i * 1000, &[snap("a:1", &[("q", i, i)])]);
        }
        assert_eq!(h.total().len(), 601);
        let q = h.queue("a:1", b"q");
        assert_eq!(q.len(), QUEUE_POINTS + 2);
        assert_eq!(q.last().map(|p| p.at_ms), Some(999_000));
        for w in q[..q.len() - 1].windows(2) {
            assert_eq!(w[1].at_ms - w[0].at_ms, 10_000, "{w:?}");
        }
        // The window is covered: the oldest point is at least 10 minutes old.
        assert!(q[q.len() - 1].at_ms - q[0].at_ms >= 600_000);
        // The recent rate spans one step to two: 1 added per second.
        assert_eq!(recent_rate(&q, h.rate_span_ms(), |p| p.added), 1.0);
        assert_eq!(recent_rate(&[], 1, |p| p.added), 0.0);
    }

    #[test]
    fn cluster_slots_masters() {
        let node = |h: &str, p: i64| {
            Value::Array(vec![
                Value::BulkString(h.as_bytes().to_vec()),
                Value::Int(p),
                Value::BulkString(b"id".to_vec()),
            ])
        };
        let reply = Value::Array(vec![
            Value::Array(vec![
                Value::Int(0),
                Value::Int(5460),
                node("10.0.0.1", 7000),
                node("10.0.0.4", 7003),
            ]),
            Value::Array(vec![Value::Int(5461), Value::Int(10922), node("", 7001)]),
            Value::Array(vec![
                Value::Int(10923),
                Value::Int(16383),
                node("10.0.0.1", 7000),
            ]),
        ]);
        assert_eq!(
            slots_masters(&reply, "seed"),
            vec![("10.0.0.1".to_string(), 7000), ("seed".to_string(), 7001)]
        );
        assert_eq!(
            slot_ranges(&reply, "seed"),
            vec![
                (0, 5460, "10.0.0.1".to_string(), 7000),
                (5461, 10922, "seed".to_string(), 7001),
                (10923, 16383, "10.0.0.1".to_string(), 7000),
            ]
        );
        assert!(slots_masters(&Value::Nil, "x").is_empty());
    }

    #[test]
    fn addresses_never_show_credentials() {
        let info: ConnectionInfo = redis::IntoConnectionInfo::into_connection_info(
            "redis://user:hunter2@127.0.0.1:6380/0",
        )
        .unwrap();
        assert_eq!(addr_name(info.addr()), "127.0.0.1:6380");
        let moved = dq_client::node_info(&info, "10.1.1.1", 7001);
        assert_eq!(addr_name(moved.addr()), "10.1.1.1:7001");
        assert_eq!(moved.redis_settings().password(), Some("hunter2"));
    }
}
