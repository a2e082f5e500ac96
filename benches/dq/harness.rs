//! What every scenario runs on: the run's configuration and counts, the
//! servers (the test kit's, with what the benchmark reads of them), the
//! load clients, throughput timing in alternating rounds, and the PING
//! probe. A change to how the benchmark measures belongs here; what it
//! measures, in the scenarios.

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::OnceLock;
use std::thread::{self, Scope, ScopedJoinHandle};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use dq_testkit::Server;
use redis::{Connection, Pipeline, Value};

/// Messages per pipeline and per POP/ACK: what a real client batches.
pub const BATCH: usize = 100;
/// Far enough ahead that nothing falls due during a measurement.
pub const HOUR_MS: u64 = 3_600_000;
/// A consumer or broker that has not seen every message by then stops, and
/// the run fails instead of hanging.
pub const GIVE_UP: Duration = Duration::from_secs(300);

/// What the environment asked for (see the crate's documentation).
pub struct Config {
    pub quick: bool,
    pub server: String,
    pub out: PathBuf,
    pub only: Option<Vec<String>>,
    /// The server lines the `lines` scenario compares: Valkey 8.0, and the
    /// Debian 13 root's wrappers (Redis 8.0, Valkey 8.1).
    pub valkey: String,
    pub debian13: PathBuf,
}

/// Counts for one run; quick mode keeps the whole run under a minute.
pub struct Scale {
    pub rounds: usize,
    /// Connections of the add and preload clients.
    pub conns: usize,
    /// Messages per add run and per lifecycle run.
    pub add_n: usize,
    pub life_n: usize,
    pub producers: usize,
    pub consumers: usize,
    pub late_secs: u64,
    pub burst_n: usize,
    pub idle_n: usize,
    pub idle_secs: u64,
    pub mem_n: usize,
    pub backlog_small: usize,
    pub backlog_big: usize,
    /// Queues of the many-queues scenario, one message each, and how many
    /// fresh servers its lateness is measured on.
    pub queues_n: usize,
    pub queue_rounds: usize,
    /// Schedules all due at the same instant (runs/s).
    pub schedule_burst: usize,
    /// Messages delivered under RATE 1000/1s, and RESUMEs timed.
    pub rate_n: usize,
    pub resume_n: usize,
}

impl Scale {
    pub fn new(quick: bool) -> Scale {
        let pick = |q: usize, f: usize| if quick { q } else { f };
        Scale {
            rounds: pick(3, 5),
            conns: 8,
            add_n: pick(50_000, 200_000),
            life_n: pick(50_000, 300_000),
            producers: 4,
            consumers: 4,
            late_secs: pick(3, 20) as u64,
            burst_n: pick(100_000, 1_000_000),
            idle_n: pick(100_000, 1_000_000),
            idle_secs: pick(3, 10) as u64,
            mem_n: pick(100_000, 1_000_000),
            backlog_small: 10_000,
            backlog_big: pick(200_000, 10_000_000),
            queues_n: 10_000,
            queue_rounds: pick(1, 3),
            schedule_burst: pick(50_000, 200_000),
            rate_n: pick(4_000, 20_000),
            resume_n: pick(200, 2_000),
        }
    }
}

// ---------------------------------------------------------------- servers

/// What the benchmark adds to the test kit's server (a child process on a
/// free loopback port, killed when dropped, also when the benchmark
/// panics).
pub trait BenchServer {
    fn with_module(cfg: &Config) -> Self;
    /// The client-side designs run where they would: on a server without dq.
    fn plain(cfg: &Config) -> Self;
    fn conns(&self, n: usize) -> Vec<Connection>;
    fn load_script(&self, source: &str) -> String;
    fn info_u64(&self, section: &str, field: &str) -> u64;
    /// CPU seconds (user + system) the server has used so far.
    fn cpu_secs(&self) -> f64;
}

impl BenchServer for Server {
    fn with_module(cfg: &Config) -> Server {
        Server::builder().binary(&cfg.server).release().start()
    }

    fn plain(cfg: &Config) -> Server {
        Server::builder()
            .binary(&cfg.server)
            .without_module()
            .start()
    }

    fn conns(&self, n: usize) -> Vec<Connection> {
        (0..n).map(|_| self.conn()).collect()
    }

    fn load_script(&self, source: &str) -> String {
        redis::cmd("SCRIPT")
            .arg("LOAD")
            .arg(source)
            .query(&mut self.conn())
            .expect("SCRIPT LOAD")
    }

    fn info_u64(&self, section: &str, field: &str) -> u64 {
        info_u64(&mut self.conn(), section, field)
    }

    fn cpu_secs(&self) -> f64 {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.pid()))
            .expect("read the server's /proc stat");
        // utime and stime are fields 14 and 15 of the line, 12 and 13 after
        // the parenthesised command name (which may contain spaces).
        let rest = &stat[stat.rfind(')').expect("a /proc stat line") + 1..];
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let ticks: u64 =
            fields[11].parse::<u64>().expect("utime") + fields[12].parse::<u64>().expect("stime");
        ticks as f64 / clock_ticks_per_sec()
    }
}

pub fn clock_ticks_per_sec() -> f64 {
    static HZ: OnceLock<f64> = OnceLock::new();
    *HZ.get_or_init(|| {
        Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
            .unwrap_or(100.0)
    })
}

/// All `field:value` lines of one INFO section.
pub fn info(con: &mut Connection, section: &str) -> HashMap<String, String> {
    let text: String = redis::cmd("INFO").arg(section).query(con).expect("INFO");
    text.lines()
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.to_string(), v.trim().to_string()))
        .collect()
}

pub fn info_u64(con: &mut Connection, section: &str, field: &str) -> u64 {
    info(con, section)
        .get(field)
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no numeric {field} in INFO {section}"))
}

/// "redis 7.0.15", "valkey 8.1.1": the server's name and version, from
/// INFO server (Valkey names itself there and keeps redis_version at
/// 7.2.4 for clients).
pub fn server_version(con: &mut Connection) -> String {
    let i = info(con, "server");
    let name = i.get("server_name").map_or("redis", String::as_str);
    let version = i.get(&format!("{name}_version")).or(i.get("redis_version"));
    format!("{name} {}", version.map_or("?", String::as_str))
}

// ---------------------------------------------------------------- load

pub fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("the clock is after 1970")
        .as_micros() as u64
}

/// A 64-byte payload that starts with `tag`, so every one is distinct.
pub fn payload(tag: usize) -> Vec<u8> {
    let mut p = format!("{tag:020}:").into_bytes();
    p.resize(64, b'.');
    p
}

pub fn tag_of(payload: &[u8]) -> u64 {
    std::str::from_utf8(&payload[..20])
        .ok()
        .and_then(|s| s.parse().ok())
        .expect("a benchmark payload")
}

/// Adds `n` messages due in an hour to queue `q`; returns the wall time.
pub fn add_delayed(server: &Server, s: &Scale, n: usize) -> Duration {
    drive(server.conns(s.conns), n, |p, i| {
        p.cmd("DQ.ADD")
            .arg("q")
            .arg(payload(i))
            .arg("DELAY")
            .arg(HOUR_MS);
    })
}

/// Sends commands `0..n` (built by `add`) over the connections, each its
/// own share in pipelines of BATCH; returns the wall time.
pub fn drive(
    conns: Vec<Connection>,
    n: usize,
    add: impl Fn(&mut Pipeline, usize) + Sync,
) -> Duration {
    let workers = conns.len();
    let start = Instant::now();
    thread::scope(|s| {
        for (w, mut con) in conns.into_iter().enumerate() {
            let add = &add;
            s.spawn(move || {
                let mut pipe = redis::pipe();
                let (mut i, end) = (n * w / workers, n * (w + 1) / workers);
                while i < end {
                    pipe.clear();
                    for j in i..(i + BATCH).min(end) {
                        add(&mut pipe, j);
                    }
                    pipe.query::<Vec<Value>>(&mut con)
                        .expect("a pipelined batch");
                    i += BATCH;
                }
            });
        }
    });
    start.elapsed()
}

// ---------------------------------------------------------------- timing

pub fn rate(n: usize, took: Duration) -> f64 {
    n as f64 / took.as_secs_f64()
}

/// A throughput measurement, and how busy the server was meanwhile: near
/// 100% of a core, the server is what limits the rate; well below, the
/// clients or the machine are.
#[derive(Clone, Copy, Default)]
pub struct Run {
    pub rate: f64,
    pub busy: f64,
}

/// Times `work` (which returns how long its `n` messages took) and the
/// server's CPU use meanwhile.
pub fn timed(server: &Server, n: usize, work: impl FnOnce() -> Duration) -> Run {
    let cpu = server.cpu_secs();
    let took = work();
    let busy = (server.cpu_secs() - cpu) / took.as_secs_f64();
    Run {
        rate: rate(n, took),
        busy,
    }
}

/// Runs every variant once per round, in turn, and keeps each one's best
/// run.
pub fn best_of<const N: usize>(rounds: usize, variants: [&dyn Fn() -> Run; N]) -> [Run; N] {
    let mut best = [Run::default(); N];
    for _ in 0..rounds {
        for (b, variant) in best.iter_mut().zip(variants) {
            let run = variant();
            if run.rate > b.rate {
                *b = run;
            }
        }
    }
    best
}

/// "server busy: DQ.ADD 98%, ZADD 95%" for a detail line.
pub fn busy(runs: &[(&str, Run)]) -> String {
    let each: Vec<String> = runs
        .iter()
        .map(|(name, run)| format!("{name} {:.0}%", 100.0 * run.busy))
        .collect();
    format!("server CPU busy in those runs: {}", each.join(", "))
}

// ---------------------------------------------------------------- probe

/// Makes the calling thread real-time (SCHED_FIFO), so that a probe
/// measures the server's stalls rather than the kernel keeping the probe
/// off a busy core. False when not permitted.
pub fn realtime_priority() -> bool {
    let param = libc::sched_param { sched_priority: 10 };
    // SAFETY: plain syscall on the calling thread (pid 0) with a valid struct.
    unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) == 0 }
}

/// PINGs sent back to back on `con`, from a real-time thread when the
/// system allows it, until `stop` is set: the thread's result is each
/// round trip (µs), and whether it ran at real-time priority. How long the
/// server keeps a client waiting while it works through something big.
pub fn ping_probe<'scope>(
    sc: &'scope Scope<'scope, '_>,
    con: &'scope mut Connection,
    stop: &'scope AtomicBool,
) -> ScopedJoinHandle<'scope, (Vec<i64>, bool)> {
    sc.spawn(move || {
        let realtime = realtime_priority();
        let mut round_trips = Vec::new();
        while !stop.load(Relaxed) {
            let t = Instant::now();
            let _: String = redis::cmd("PING").query(con).expect("PING");
            round_trips.push(t.elapsed().as_micros() as i64);
        }
        (round_trips, realtime)
    })
}
