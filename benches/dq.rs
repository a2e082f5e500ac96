//! `make bench`: dq against what clients do today with Lua and polling.
//!
//! Every scenario starts its own servers (redis-server with the module built
//! in release mode, or a plain one for the client-side designs) and measures
//! dq and its baseline side by side, with the same connections and pipeline
//! depth. On a shared machine absolute numbers drift from run to run; ratios
//! of runs made together hold, so throughput is measured in rounds that
//! alternate the variants, keeping each one's best round (load from other
//! processes only ever slows a run down).
//!
//! Environment: `DQ_MODULE` (default: the release build's libdq.so, under
//! CARGO_TARGET_DIR when set; see testkit/), `DQ_SERVER`
//! (default redis-server), `DQ_BENCH_QUICK=1` (small counts, under a
//! minute), `DQ_BENCH_OUT` (default target/bench), `DQ_BENCH_ONLY`
//! (comma-separated scenarios: add, lifecycle, lateness, burst, idle,
//! memory, queues, lines, schedules, flow, backlog, unlink). Writes
//! `results.md` and `lateness.svg` there. The `lines` scenario runs on each server line it
//! finds: `redis-server`, `DQ_VALKEY` (default valkey-server) and the
//! redis-server and valkey-server of `DQ_DEBIAN13` (default
//! target/debian13/dq, see `make debian13`).

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Mutex, OnceLock};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use dq_testkit::{now_ms, Build, Server};
use redis::{Connection, Pipeline, Value};

/// Messages per pipeline and per POP/ACK: what a real client batches.
const BATCH: usize = 100;
/// Far enough ahead that nothing falls due during a measurement.
const HOUR_MS: u64 = 3_600_000;
/// A consumer or broker that has not seen every message by then stops, and
/// the run fails instead of hanging.
const GIVE_UP: Duration = Duration::from_secs(300);

/// Redisson's RDelayedQueue offer, as the issue quotes it.
const LUA_ADD: &str = r"
redis.call('ZADD', KEYS[1], ARGV[1], ARGV[2])
redis.call('RPUSH', KEYS[2], ARGV[2])
local first = redis.call('ZRANGE', KEYS[1], 0, 0)
if first[1] == ARGV[2] then redis.call('PUBLISH', KEYS[3], ARGV[1]) end
return 1";

/// The seeds' broker script: move up to ARGV[2] members due by ARGV[1]
/// from the ZSET to the LIST.
const TAKE_DUE: &str = r"
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, ARGV[2])
if #due > 0 then
  redis.call('ZREM', KEYS[1], unpack(due))
  redis.call('RPUSH', KEYS[2], unpack(due))
end
return #due";

/// One numbered scenario of the issue: measures and adds its rows.
type Scenario = fn(&Config, &Scale, &mut Report);

struct Config {
    quick: bool,
    server: String,
    out: PathBuf,
    only: Option<Vec<String>>,
    /// The server lines the `lines` scenario compares: Valkey 8.0, and the
    /// Debian 13 root's wrappers (Redis 8.0, Valkey 8.1).
    valkey: String,
    debian13: PathBuf,
}

/// Counts for one run; quick mode keeps the whole run under a minute.
struct Scale {
    rounds: usize,
    /// Connections of the add and preload clients.
    conns: usize,
    /// Messages per add run and per lifecycle run.
    add_n: usize,
    life_n: usize,
    producers: usize,
    consumers: usize,
    late_secs: u64,
    burst_n: usize,
    idle_n: usize,
    idle_secs: u64,
    mem_n: usize,
    backlog_small: usize,
    backlog_big: usize,
    /// Queues of the many-queues scenario, one message each, and how many
    /// fresh servers its lateness is measured on.
    queues_n: usize,
    queue_rounds: usize,
    /// Schedules all due at the same instant (runs/s).
    schedule_burst: usize,
    /// Messages delivered under RATE 1000/1s, and RESUMEs timed.
    rate_n: usize,
    resume_n: usize,
}

impl Scale {
    fn new(quick: bool) -> Scale {
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
trait BenchServer {
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

fn clock_ticks_per_sec() -> f64 {
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
fn info(con: &mut Connection, section: &str) -> HashMap<String, String> {
    let text: String = redis::cmd("INFO").arg(section).query(con).expect("INFO");
    text.lines()
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.to_string(), v.trim().to_string()))
        .collect()
}

fn info_u64(con: &mut Connection, section: &str, field: &str) -> u64 {
    info(con, section)
        .get(field)
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no numeric {field} in INFO {section}"))
}

// ---------------------------------------------------------------- clients

fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("the clock is after 1970")
        .as_micros() as u64
}

/// A 64-byte payload that starts with `tag`, so every one is distinct.
fn payload(tag: usize) -> Vec<u8> {
    let mut p = format!("{tag:020}:").into_bytes();
    p.resize(64, b'.');
    p
}

fn tag_of(payload: &[u8]) -> u64 {
    std::str::from_utf8(&payload[..20])
        .ok()
        .and_then(|s| s.parse().ok())
        .expect("a benchmark payload")
}

/// Adds `n` messages due in an hour to queue `q`; returns the wall time.
fn add_delayed(server: &Server, s: &Scale, n: usize) -> Duration {
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
fn drive(conns: Vec<Connection>, n: usize, add: impl Fn(&mut Pipeline, usize) + Sync) -> Duration {
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

fn rate(n: usize, took: Duration) -> f64 {
    n as f64 / took.as_secs_f64()
}

/// A throughput measurement, and how busy the server was meanwhile: near
/// 100% of a core, the server is what limits the rate; well below, the
/// clients or the machine are.
#[derive(Clone, Copy, Default)]
struct Run {
    rate: f64,
    busy: f64,
}

/// Times `work` (which returns how long its `n` messages took) and the
/// server's CPU use meanwhile.
fn timed(server: &Server, n: usize, work: impl FnOnce() -> Duration) -> Run {
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
fn best_of<const N: usize>(rounds: usize, variants: [&dyn Fn() -> Run; N]) -> [Run; N] {
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
fn busy(runs: &[(&str, Run)]) -> String {
    let each: Vec<String> = runs
        .iter()
        .map(|(name, run)| format!("{name} {:.0}%", 100.0 * run.busy))
        .collect();
    format!("server CPU busy in those runs: {}", each.join(", "))
}

/// What a POP took: (id, payload) pairs.
type Entries = Vec<(Vec<u8>, Vec<u8>)>;

/// `DQ.POP queue COUNT 100 BLOCK 100`.
fn dq_pop(con: &mut Connection, queue: &str) -> Entries {
    let reply: Value = redis::cmd("DQ.POP")
        .arg(queue)
        .arg("COUNT")
        .arg(BATCH)
        .arg("BLOCK")
        .arg(100)
        .query(con)
        .expect("DQ.POP");
    pop_entries(reply)
}

/// `DQ.MPOP n queue... COUNT 100 BLOCK 100`: the queue taken from (an
/// index into `queues`) and what it took.
fn dq_mpop(con: &mut Connection, queues: &[&str]) -> Option<(usize, Entries)> {
    let reply: Value = redis::cmd("DQ.MPOP")
        .arg(queues.len())
        .arg(queues)
        .arg("COUNT")
        .arg(BATCH)
        .arg("BLOCK")
        .arg(100)
        .query(con)
        .expect("DQ.MPOP");
    let Value::Array(pair) = reply else {
        return None; // nil: nothing was ready
    };
    match <[Value; 2]>::try_from(pair) {
        Ok([Value::BulkString(name), entries]) => {
            let at = queues
                .iter()
                .position(|q| q.as_bytes() == name)
                .expect("MPOP names one of its queues");
            Some((at, pop_entries(entries)))
        }
        other => panic!("not an MPOP reply: {other:?}"),
    }
}

/// DQ.POP's reply; nil is none.
fn pop_entries(reply: Value) -> Entries {
    let Value::Array(items) = reply else {
        return Vec::new();
    };
    let entry = |e: Value| match e {
        Value::Array(f) => match <[Value; 3]>::try_from(f) {
            Ok([Value::BulkString(id), Value::BulkString(p), _]) => (id, p),
            other => panic!("not a POP entry: {other:?}"),
        },
        other => panic!("not a POP entry: {other:?}"),
    };
    items.into_iter().map(entry).collect()
}

fn dq_ack(con: &mut Connection, queue: &str, ids: &[Vec<u8>]) -> usize {
    redis::cmd("DQ.ACK")
        .arg(queue)
        .arg(ids)
        .query(con)
        .expect("DQ.ACK")
}

/// The seeds' broker: runs TAKE_DUE every millisecond (at once again after
/// a full batch) until it has moved `n` members.
fn broker(con: &mut Connection, sha: &str, n: usize) {
    let give_up = Instant::now() + GIVE_UP;
    let mut moved = 0;
    while moved < n && Instant::now() < give_up {
        let batch: usize = redis::cmd("EVALSHA")
            .arg(sha)
            .arg(2)
            .arg("delayed")
            .arg("ready")
            .arg(now_ms())
            .arg(1000)
            .query(con)
            .expect("the take-due script");
        moved += batch;
        if batch < 1000 {
            thread::sleep(Duration::from_millis(1));
        }
    }
}

// ---------------------------------------------------------------- report

/// A target's text and whether the figure meets it.
type Target = Option<(&'static str, bool)>;

struct Row {
    scenario: &'static str,
    figure: String,
    value: String,
    baseline: String,
    ratio: String,
    target: String,
    met: Option<bool>,
}

#[derive(Default)]
struct Report {
    rows: Vec<Row>,
    details: Vec<String>,
    lateness_us: Vec<i64>,
    /// DQ.ADD's rate, measured by the add scenario: it times the burst's
    /// preload.
    add_rate: Option<f64>,
}

impl Report {
    fn push(&mut self, row: Row) {
        println!(
            "  {:<12} {:<46} {:>10} {:>10} {:>9}  {:<10} {}",
            row.scenario,
            row.figure,
            row.value,
            row.baseline,
            row.ratio,
            row.target,
            met_text(row.met)
        );
        self.rows.push(row);
    }

    /// A figure of dq's alone, perhaps against a target.
    fn figure(&mut self, scenario: &'static str, figure: &str, value: String, target: Target) {
        self.push(Row {
            scenario,
            figure: figure.into(),
            value,
            baseline: "—".into(),
            ratio: "—".into(),
            target: target.map_or("—", |t| t.0).into(),
            met: target.map(|t| t.1),
        });
    }

    /// Throughput of dq against a baseline, with a target on the ratio.
    fn versus(
        &mut self,
        scenario: &'static str,
        figure: &str,
        dq: Run,
        base: Run,
        min: Option<f64>,
    ) {
        let ratio = dq.rate / base.rate;
        self.push(Row {
            scenario,
            figure: figure.into(),
            value: per_sec(dq.rate),
            baseline: per_sec(base.rate),
            ratio: format!("{ratio:.2}×"),
            target: min.map_or("—".into(), |m| format!("≥ {m}×")),
            met: min.map(|m| ratio >= m),
        });
    }

    fn detail(&mut self, text: String) {
        println!("    · {text}");
        self.details.push(text);
    }
}

fn met_text(met: Option<bool>) -> &'static str {
    match met {
        Some(true) => "met",
        Some(false) => "NOT met",
        None => "",
    }
}

fn per_sec(r: f64) -> String {
    if r >= 1e6 {
        format!("{:.2}M/s", r / 1e6)
    } else {
        format!("{:.1}k/s", r / 1e3)
    }
}

fn ms(us: f64) -> String {
    format!("{:.2} ms", us / 1000.0)
}

// ---------------------------------------------------------------- 1. add

/// DQ.ADD of `s.add_n` messages to one queue on a fresh server with the
/// module, after `delay` ms (None: ready at once).
fn dq_add_run(cfg: &Config, s: &Scale, delay: Option<u64>) -> Run {
    let n = s.add_n;
    let server = Server::with_module(cfg);
    let conns = server.conns(s.conns);
    timed(&server, n, || {
        drive(conns, n, |p, i| {
            p.cmd("DQ.ADD").arg("q").arg(payload(i));
            if let Some(d) = delay {
                p.arg("DELAY").arg(d);
            }
        })
    })
}

/// Raw ZADD of `s.add_n` payloads scored `due` to one ZSET on `server`.
fn zadd_run(server: Server, s: &Scale, due: u64) -> Run {
    let n = s.add_n;
    let conns = server.conns(s.conns);
    timed(&server, n, || {
        drive(conns, n, |p, i| {
            p.cmd("ZADD").arg("delayed").arg(due).arg(payload(i));
        })
    })
}

/// Add throughput: the same connections and pipeline depth for each way of
/// scheduling a message, each run on a fresh server.
fn add_throughput(cfg: &Config, s: &Scale, report: &mut Report) {
    let n = s.add_n;
    let due = now_ms() + HOUR_MS;
    let dq_add = |delay: Option<u64>| dq_add_run(cfg, s, delay);
    let zadd = |server: Server| zadd_run(server, s, due);
    let lua = || {
        let server = Server::plain(cfg);
        let sha = server.load_script(LUA_ADD);
        let conns = server.conns(s.conns);
        timed(&server, n, || {
            drive(conns, n, |p, i| {
                let keys = ["timeout", "queue", "channel"];
                p.cmd("EVALSHA").arg(&sha).arg(3).arg(&keys);
                p.arg(due).arg(payload(i));
            })
        })
    };
    // The seeds' way to a ready message: ZADD due now, and the broker's
    // take-due script moving it to the LIST.
    let seeds = || {
        let server = Server::plain(cfg);
        let sha = server.load_script(TAKE_DUE);
        let (mut broker_con, conns) = (server.conn(), server.conns(s.conns));
        timed(&server, n, || {
            let start = Instant::now();
            thread::scope(|sc| {
                sc.spawn(|| broker(&mut broker_con, &sha, n));
                drive(conns, n, |p, i| {
                    p.cmd("ZADD").arg("delayed").arg(now_ms()).arg(payload(i));
                });
            });
            start.elapsed()
        })
    };
    let [dq_delayed, zadd_plain, zadd_dq, lua, dq_ready, seeds] = best_of(
        s.rounds,
        [
            &|| dq_add(Some(HOUR_MS)),
            &|| zadd(Server::plain(cfg)),
            &|| zadd(Server::with_module(cfg)),
            &lua,
            &|| dq_add(None),
            &seeds,
        ],
    );
    let scenario = "1 add";
    let figure = "DQ.ADD DELAY 1h vs raw ZADD";
    report.versus(scenario, figure, dq_delayed, zadd_plain, Some(1.0));
    let figure = "DQ.ADD DELAY 1h vs Redisson Lua add";
    report.versus(scenario, figure, dq_delayed, lua, Some(2.5));
    let figure = "DQ.ADD, ready at once, vs ZADD + take-due Lua";
    report.versus(scenario, figure, dq_ready, seeds, None);
    let figure = "raw ZADD with dq loaded vs without";
    report.versus(scenario, figure, zadd_dq, zadd_plain, None);
    report.detail(format!(
        "add: best of {} rounds of {n} messages per variant, {} connections, pipelines of \
         {BATCH}, 64-byte payloads; baselines on a server without the module; ZADD + take-due \
         counts until the broker has moved every message to the LIST; {}",
        s.rounds,
        s.conns,
        busy(&[
            ("DQ.ADD DELAY", dq_delayed),
            ("DQ.ADD", dq_ready),
            ("ZADD", zadd_plain),
            ("ZADD with dq", zadd_dq),
            ("Lua add", lua),
            ("ZADD + take-due", seeds)
        ])
    ));
    report.add_rate = Some(dq_delayed.rate);
}

// ---------------------------------------------------------------- 2. lifecycle

/// dq: producers pipeline DQ.ADD (ready at once), consumers DQ.POP COUNT
/// 100 then DQ.ACK the lot. Messages fully acknowledged per second.
fn dq_lifecycle(server: &Server, queue: &str, s: &Scale) -> Run {
    dq_lifecycle_over(server, &[queue], s)
}

/// The lifecycle spread over `queues` (message i to queue i mod k): one
/// queue is served by DQ.POP, several by DQ.MPOP over all of them.
fn dq_lifecycle_over(server: &Server, queues: &[&str], s: &Scale) -> Run {
    let n = s.life_n;
    let acked = AtomicUsize::new(0);
    let finished = OnceLock::new();
    let (producers, consumers) = (server.conns(s.producers), server.conns(s.consumers));
    timed(server, n, || {
        let start = Instant::now();
        thread::scope(|sc| {
            sc.spawn(|| {
                drive(producers, n, |p, i| {
                    p.cmd("DQ.ADD")
                        .arg(queues[i % queues.len()])
                        .arg(payload(i));
                })
            });
            for mut con in consumers {
                let (acked, finished) = (&acked, &finished);
                sc.spawn(move || {
                    while acked.load(Relaxed) < n && start.elapsed() < GIVE_UP {
                        let (queue, entries) = match queues {
                            [one] => (*one, dq_pop(&mut con, one)),
                            _ => match dq_mpop(&mut con, queues) {
                                Some((at, entries)) => (queues[at], entries),
                                None => continue,
                            },
                        };
                        let ids: Vec<_> = entries.into_iter().map(|e| e.0).collect();
                        if ids.is_empty() {
                            continue;
                        }
                        let got = dq_ack(&mut con, queue, &ids);
                        if acked.fetch_add(got, Relaxed) + got >= n {
                            let _ = finished.set(Instant::now());
                        }
                    }
                });
            }
        });
        let finished = finished.get();
        *finished.unwrap_or_else(|| panic!("only {acked:?} of {n} acked")) - start
    })
}

/// The seeds' design: producers ZADD the payload due now, a broker moves
/// due members to a LIST, consumers LMOVE batches into their processing
/// list and acknowledge each with LREM.
fn seeds_lifecycle(server: &Server, s: &Scale) -> Run {
    let n = s.life_n;
    let sha = server.load_script(TAKE_DUE);
    let done = AtomicUsize::new(0);
    let finished = OnceLock::new();
    let (producers, consumers) = (server.conns(s.producers), server.conns(s.consumers));
    let mut broker_con = server.conn();
    timed(server, n, || {
        let start = Instant::now();
        thread::scope(|sc| {
            sc.spawn(|| broker(&mut broker_con, &sha, n));
            sc.spawn(|| {
                drive(producers, n, |p, i| {
                    p.cmd("ZADD").arg("delayed").arg(now_ms()).arg(payload(i));
                })
            });
            for (c, mut con) in consumers.into_iter().enumerate() {
                let (done, finished) = (&done, &finished);
                sc.spawn(move || {
                    let processing = format!("processing:{c}");
                    let mut pipe = redis::pipe();
                    while done.load(Relaxed) < n && start.elapsed() < GIVE_UP {
                        pipe.clear();
                        for _ in 0..BATCH {
                            pipe.cmd("LMOVE")
                                .arg(&["ready", &processing, "LEFT", "RIGHT"]);
                        }
                        let replies: Vec<Option<Vec<u8>>> =
                            pipe.query(&mut con).expect("LMOVE batch");
                        let mut got: Vec<Vec<u8>> = replies.into_iter().flatten().collect();
                        if got.is_empty() {
                            // Nothing ready: wait for one as a real worker would.
                            let one: Option<Vec<u8>> = redis::cmd("BLMOVE")
                                .arg(&["ready", &processing, "LEFT", "RIGHT", "0.1"])
                                .query(&mut con)
                                .expect("BLMOVE");
                            got.extend(one);
                        }
                        if got.is_empty() {
                            continue;
                        }
                        pipe.clear();
                        for member in &got {
                            pipe.cmd("LREM").arg(&processing).arg(1).arg(member);
                        }
                        let removed: Vec<usize> = pipe.query(&mut con).expect("LREM batch");
                        let removed: usize = removed.iter().sum();
                        if done.fetch_add(removed, Relaxed) + removed >= n {
                            let _ = finished.set(Instant::now());
                        }
                    }
                });
            }
        });
        let finished = finished.get();
        *finished.unwrap_or_else(|| panic!("only {done:?} of {n} acknowledged")) - start
    })
}

fn lifecycle(cfg: &Config, s: &Scale, report: &mut Report) {
    let [dq, seeds] = best_of(
        s.rounds,
        [&|| dq_lifecycle(&Server::with_module(cfg), "q", s), &|| {
            seeds_lifecycle(&Server::plain(cfg), s)
        }],
    );
    let figure = "ADD→POP→ACK vs ZSET + Lua broker + LIST";
    report.versus("2 lifecycle", figure, dq, seeds, Some(1.2));
    report.detail(format!(
        "lifecycle: best of {} rounds of {} messages, {} producers and {} consumers, batches \
         of {BATCH}, everything due at once; the baseline's consumers LMOVE 100 at a time \
         (BLMOVE when the list is empty) and pipeline their LREMs, its broker runs every 1 ms \
         (at once again after a full batch of 1000); {}",
        s.rounds,
        s.life_n,
        s.producers,
        s.consumers,
        busy(&[("dq", dq), ("baseline", seeds)])
    ));
}

// ---------------------------------------------------------------- 3. lateness

/// A steady 10k msg/s due 100 ms after they are added, four blocking
/// consumers; lateness = when a consumer got the message − its due time.
fn lateness(cfg: &Config, s: &Scale, report: &mut Report) {
    const PER_MS: usize = 10;
    const LEAD_MS: u64 = 100;
    let server = Server::with_module(cfg);
    let ms_total = s.late_secs * 1000;
    let n = ms_total as usize * PER_MS;
    let received = AtomicUsize::new(0);
    let samples = Mutex::new(Vec::with_capacity(n));
    let behind_ms = AtomicU64::new(0);
    let (mut producer, consumers) = (server.conn(), server.conns(4));
    let start = Instant::now();
    let sending = thread::scope(|sc| {
        let producer = sc.spawn(|| {
            let first = now_ms() + 1;
            let mut pipe = redis::pipe();
            for send_at in first..first + ms_total {
                while now_ms() < send_at {
                    thread::sleep(Duration::from_micros(100));
                }
                // Due LEAD_MS after the ADD really goes out: a producer that
                // fell behind (a busy machine) must not make dq look late.
                let sent = now_ms();
                behind_ms.fetch_max(sent - send_at, Relaxed);
                let due = sent + LEAD_MS;
                pipe.clear();
                for _ in 0..PER_MS {
                    pipe.cmd("DQ.ADD")
                        .arg("q")
                        .arg(payload(due as usize))
                        .arg("AT")
                        .arg(due);
                }
                pipe.query::<Vec<Value>>(&mut producer)
                    .expect("DQ.ADD batch");
            }
            start.elapsed()
        });
        for mut con in consumers {
            let (received, samples) = (&received, &samples);
            sc.spawn(move || {
                let mut mine = Vec::new();
                while received.load(Relaxed) < n && start.elapsed() < GIVE_UP {
                    let batch = dq_pop(&mut con, "q");
                    let got_us = now_us() as i64;
                    mine.extend(
                        batch
                            .iter()
                            .map(|(_, p)| got_us - (tag_of(p) * 1000) as i64),
                    );
                    let ids: Vec<_> = batch.into_iter().map(|e| e.0).collect();
                    if !ids.is_empty() {
                        received.fetch_add(ids.len(), Relaxed);
                        dq_ack(&mut con, "q", &ids);
                    }
                }
                samples.lock().expect("samples").extend(mine);
            });
        }
        producer.join().expect("the producer")
    });
    let mut samples = samples.into_inner().expect("samples");
    assert_eq!(samples.len(), n, "lateness: messages went missing");
    samples.sort_unstable();
    let scenario = "3 lateness";
    let p = |q: f64| percentile(&samples, q);
    let figure = "p50 at 10k msg/s, blocking consumers";
    report.figure(scenario, figure, ms(p(0.5)), None);
    report.figure(
        scenario,
        "p99",
        ms(p(0.99)),
        Some(("≤ 2 ms", p(0.99) <= 2000.0)),
    );
    report.figure(scenario, "p999", ms(p(0.999)), None);
    report.figure(
        scenario,
        "max",
        ms(p(1.0)),
        Some(("≤ 10 ms", p(1.0) <= 10_000.0)),
    );
    let ticks = server.info_u64("dq", "dq_timer_ticks");
    let longest = server.info_u64("dq", "dq_longest_tick_us");
    report.detail(format!(
        "lateness: {n} messages over {} s, {PER_MS} per ms due {LEAD_MS} ms after their ADD \
         (AT), 4 consumers DQ.POP COUNT {BATCH} BLOCK; {ticks} timer ticks, the longest \
         {longest} µs; the producer sent at {} (at most {} ms behind its schedule)",
        s.late_secs,
        per_sec(rate(n, sending)),
        behind_ms.load(Relaxed)
    ));
    report.lateness_us = samples;
}

fn percentile(sorted: &[i64], q: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * q).round() as usize] as f64
}

// ---------------------------------------------------------------- 4. burst

/// N messages due at one instant: how fast they become ready, and the
/// longest PING round trip meanwhile on another connection.
fn burst(cfg: &Config, s: &Scale, report: &mut Report) {
    let n = s.burst_n;
    let add_rate = report.add_rate.unwrap_or(100e3);
    // They fall due once the preload is surely over; if it overran, again
    // on a fresh server with more room.
    let mut expect_ms = 1000.0 * n as f64 / add_rate;
    let (server, due, took) = loop {
        let server = Server::with_module(cfg);
        let due = now_ms() + 1000 + (2.0 * expect_ms) as u64;
        let took = drive(server.conns(s.conns), n, |p, i| {
            p.cmd("DQ.ADD").arg("q").arg(payload(i)).arg("AT").arg(due);
        });
        if now_ms() + 200 < due {
            break (server, due, took);
        }
        expect_ms = took.as_millis() as f64;
    };
    let mut con = server.conn();
    let ticks_before = info_u64(&mut con, "dq", "dq_timer_ticks");
    while now_ms() + 100 < due {
        thread::sleep(Duration::from_millis(10));
    }
    let stop = AtomicBool::new(false);
    let mut probe = server.conn();
    let ((mut pings_us, realtime), ready_us) = thread::scope(|sc| {
        let pinger = sc.spawn(|| {
            let realtime = realtime_priority();
            let mut round_trips = Vec::new();
            while !stop.load(Relaxed) {
                let t = Instant::now();
                let _: String = redis::cmd("PING").query(&mut probe).expect("PING");
                round_trips.push(t.elapsed().as_micros() as i64);
            }
            (round_trips, realtime)
        });
        while now_ms() < due {
            thread::sleep(Duration::from_micros(200));
        }
        let give_up = Instant::now() + GIVE_UP;
        while info_u64(&mut con, "dq", "dq_messages_ready") < n as u64 && Instant::now() < give_up {
            thread::sleep(Duration::from_millis(1));
        }
        let ready_us = now_us() - due * 1000;
        stop.store(true, Relaxed);
        (pinger.join().expect("the PING probe"), ready_us as f64)
    });
    let dq = info(&mut con, "dq");
    let field = |name: &str| dq[name].parse::<u64>().expect("a numeric INFO dq field");
    assert_eq!(
        field("dq_messages_ready"),
        n as u64,
        "burst: not every message became ready"
    );
    let promote_rate = n as f64 / (ready_us / 1e6);
    let longest_tick = field("dq_longest_tick_us") as f64;
    pings_us.sort_unstable();
    let longest_ping_us = percentile(&pings_us, 1.0);
    let ticks = field("dq_timer_ticks") - ticks_before;
    let scenario = "4 burst";
    let figure = format!("all {n} ready, after their due time");
    report.figure(
        scenario,
        &figure,
        ms(ready_us),
        Some(("≤ 250 ms", ready_us <= 250e3)),
    );
    let figure = format!("promotion rate, {n} due at once");
    report.figure(scenario, &figure, per_sec(promote_rate), None);
    let figure = "longest PING round trip meanwhile";
    report.figure(
        scenario,
        figure,
        ms(longest_ping_us),
        Some(("≤ 5 ms", longest_ping_us <= 5000.0)),
    );
    let figure = "longest timer tick (INFO dq)";
    report.figure(
        scenario,
        figure,
        ms(longest_tick),
        Some(("≤ 5 ms", longest_tick <= 5000.0)),
    );
    report.detail(format!(
        "burst: preloaded {n} with AT in {:.1} s ({}); all ready {:.0} ms after their due time \
         (INFO dq polled every 1 ms), in {ticks} timer ticks, {:.2} ms apart on average; a PING \
         probe ran back to back on its own connection ({}) from 100 ms before the due time: \
         {} round trips, p50 {}, p99 {}, {} over 5 ms",
        took.as_secs_f64(),
        per_sec(rate(n, took)),
        ready_us / 1000.0,
        ready_us / 1000.0 / ticks.max(1) as f64,
        if realtime {
            "a real-time thread, so that it measures the server and not its own wait for a core"
        } else {
            "an ordinary thread: real-time priority was refused, so client-side scheduling delays count too"
        },
        pings_us.len(),
        ms(percentile(&pings_us, 0.5)),
        ms(percentile(&pings_us, 0.99)),
        pings_us.iter().filter(|&&us| us > 5000).count()
    ));
}

/// Makes the calling thread real-time (SCHED_FIFO), so that a probe
/// measures the server's stalls rather than the kernel keeping the probe
/// off a busy core. False when not permitted.
fn realtime_priority() -> bool {
    let param = libc::sched_param { sched_priority: 10 };
    // SAFETY: plain syscall on the calling thread (pid 0) with a valid struct.
    unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) == 0 }
}

// ---------------------------------------------------------------- 5. idle

/// N messages due in an hour: timer wakeups and CPU, beside an empty server
/// measured over the same window.
fn idle(cfg: &Config, s: &Scale, report: &mut Report) {
    let n = s.idle_n;
    let empty = Server::with_module(cfg);
    let loaded = Server::with_module(cfg);
    add_delayed(&loaded, s, n);
    // Let the preload's aftermath (disconnects, incremental rehashing) pass.
    thread::sleep(Duration::from_secs(1));
    let ticks0 = loaded.info_u64("dq", "dq_timer_ticks");
    let cpu0 = (empty.cpu_secs(), loaded.cpu_secs());
    let start = Instant::now();
    thread::sleep(Duration::from_secs(s.idle_secs));
    let window = start.elapsed().as_secs_f64();
    let cpu1 = (empty.cpu_secs(), loaded.cpu_secs());
    let wakeups = (loaded.info_u64("dq", "dq_timer_ticks") - ticks0) as f64 / window;
    let cpu_empty = 100.0 * (cpu1.0 - cpu0.0) / window;
    let cpu_loaded = 100.0 * (cpu1.1 - cpu0.1) / window;
    let scenario = "5 idle";
    let figure = format!("timer wakeups/s, {n} due in 1 h");
    report.figure(
        scenario,
        &figure,
        format!("{wakeups:.2}/s"),
        Some(("≤ 1/s", wakeups <= 1.0)),
    );
    // /proc counts CPU in clock ticks: a tick or two per window is noise,
    // so "as an empty server" allows half a percent of a core.
    report.push(Row {
        scenario,
        figure: "server CPU, % of a core, vs an empty server".into(),
        value: format!("{cpu_loaded:.2}%"),
        baseline: format!("{cpu_empty:.2}%"),
        ratio: format!("{:+.2} pt", cpu_loaded - cpu_empty),
        target: "≤ +0.5 pt".into(),
        met: Some(cpu_loaded - cpu_empty <= 0.5),
    });
    report.detail(format!(
        "idle: {window:.1} s window, both servers side by side; CPU is the server process's \
         user+system time, resolution {:.2} pt",
        100.0 / clock_ticks_per_sec() / window
    ));
}

// ---------------------------------------------------------------- 6. memory

fn memory(cfg: &Config, s: &Scale, report: &mut Report) {
    let n = s.mem_n;
    let id = |i: usize| format!("msg-{i:010}");
    let per_message = |server: Server, add: &(dyn Fn(&mut Pipeline, usize) + Sync)| {
        let before = server.info_u64("memory", "used_memory");
        drive(server.conns(s.conns), n, add);
        (server.info_u64("memory", "used_memory") - before) as f64 / n as f64
    };
    let dq = per_message(Server::with_module(cfg), &|p, i| {
        p.cmd("DQ.ADD")
            .arg("q")
            .arg(payload(i))
            .arg("ID")
            .arg(id(i));
        p.arg("DELAY").arg(HOUR_MS);
    });
    let due = now_ms() + HOUR_MS;
    let bare = per_message(Server::plain(cfg), &|p, i| {
        p.cmd("ZADD").arg("delayed").arg(due).arg(id(i));
        p.cmd("HSET").arg("payloads").arg(id(i)).arg(payload(i));
    });
    report.push(Row {
        scenario: "6 memory",
        figure: format!("bytes/message, 64-byte payload, {n} delayed"),
        value: format!("{dq:.0} B"),
        baseline: format!("{bare:.0} B"),
        ratio: format!("{:.2}×", dq / bare),
        target: "≤ 0.8×".into(),
        met: Some(dq / bare <= 0.8),
    });
    report.detail(format!(
        "memory: used_memory delta / N on fresh servers; baseline: one ZSET (id by due time) \
         and one HASH (id → payload) on a server without the module; ids of {} bytes",
        id(0).len()
    ));
}

// ---------------------------------------------------------------- 9. queues

/// Queue (or topic) `i` of the many-queues scenario, and its message's id:
/// the same names for dq and for the client-side design.
fn tenant(i: usize) -> String {
    format!("tenant-{i:05}")
}

fn msg_id(i: usize) -> String {
    format!("msg-{i:010}")
}

/// Thousands of small queues: what one costs in memory, and how late their
/// messages become ready when they all fall due within one second.
fn many_queues(cfg: &Config, s: &Scale, report: &mut Report) {
    queue_memory(cfg, s, report);
    queue_lateness(cfg, s, report);
}

/// used_memory once the server has let go of everything but its data: the
/// loading clients are gone (their buffers freed) and the main dictionary
/// has finished the rehash the loading started (serverCron does 1 ms of it
/// every 100 ms).
fn settled_memory(server: &Server) -> u64 {
    let mut con = server.conn();
    let deadline = Instant::now() + Duration::from_secs(5);
    while info_u64(&mut con, "clients", "connected_clients") > 1 && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(10));
    }
    thread::sleep(Duration::from_millis(300));
    info_u64(&mut con, "memory", "used_memory")
}

fn memory_usage(server: &Server, key: &str) -> u64 {
    redis::cmd("MEMORY")
        .arg("USAGE")
        .arg(key)
        .query(&mut server.conn())
        .expect("MEMORY USAGE")
}

fn queue_memory(cfg: &Config, s: &Scale, report: &mut Report) {
    let n = s.queues_n;
    let per_queue = |server: &Server, add: &(dyn Fn(&mut Pipeline, usize) + Sync)| {
        let before = settled_memory(server);
        drive(server.conns(s.conns), n, add);
        (settled_memory(server) - before) as f64 / n as f64
    };
    let with_module = Server::with_module(cfg);
    let dq = per_queue(&with_module, &|p, i| {
        p.cmd("DQ.ADD")
            .arg(tenant(i))
            .arg(payload(i))
            .arg("ID")
            .arg(msg_id(i));
        p.arg("DELAY").arg(HOUR_MS);
    });
    let queues = with_module.info_u64("dq", "dq_queues");
    assert_eq!(queues, n as u64, "queues: INFO dq counts {queues} queues");
    let dq_usage = memory_usage(&with_module, &tenant(0));
    drop(with_module);
    let plain = Server::plain(cfg);
    let due = now_ms() + HOUR_MS;
    let bare = per_queue(&plain, &|p, i| {
        let topic = tenant(i);
        p.cmd("ZADD")
            .arg(format!("{topic}:delayed"))
            .arg(due)
            .arg(msg_id(i));
        p.cmd("HSET")
            .arg(format!("{topic}:payloads"))
            .arg(msg_id(i))
            .arg(payload(i));
    });
    let bare_usage = memory_usage(&plain, &format!("{}:delayed", tenant(0)))
        + memory_usage(&plain, &format!("{}:payloads", tenant(0)));
    drop(plain);
    report.push(Row {
        scenario: "9 queues",
        figure: format!("bytes/queue holding one 64-byte message, {n} queues"),
        value: format!("{dq:.0} B"),
        baseline: format!("{bare:.0} B"),
        ratio: format!("{:.2}×", dq / bare),
        target: "≤ 3× (goal ≤ 1×)".into(),
        met: Some(dq / bare <= 3.0),
    });
    let off = |usage: u64, measured: f64| 100.0 * (usage as f64 - measured) / measured;
    report.detail(format!(
        "queues, memory: used_memory delta / N on fresh servers, each read once the loading \
         clients had gone and the main dictionary's rehash was over; {n} queues named like \
         `{}`, each holding one message (id like `{}`, 64-byte payload, DELAY 1 h); baseline \
         per topic, on a server without the module: one ZSET `<topic>:delayed` (id by due \
         time) and one HASH `<topic>:payloads` (id → payload), the same names and ids; \
         MEMORY USAGE of one queue: {dq_usage} B against {dq:.0} B measured per queue \
         ({:+.1}%); of one topic's ZSET + HASH: {bare_usage} B against {bare:.0} B \
         ({:+.1}%); the measured figures include each key's share of the main dictionary, \
         which MEMORY USAGE leaves out",
        tenant(0),
        msg_id(0),
        off(dq_usage, dq),
        off(bare_usage, bare),
    ));
}

/// The keyevent channel on which db 0 announces messages becoming ready
/// (the generic class, see docs/commands.md, Keyspace notifications).
const READY_CHANNEL: &str = "__keyevent@0__:dq.ready";

/// Published on READY_CHANNEL by the benchmark itself to stop a
/// subscriber that gave up waiting; not a queue name of the scenario.
const END_OF_RUN: &str = "dq-bench-end-of-run";

/// N queues with one message each, due spread evenly over one second a
/// few seconds ahead; a subscriber to the `dq.ready` keyevent channel
/// times each queue's event against that queue's due time. No consumer can
/// block on 10,000 queues at once: the notification is how one learns
/// which queue to POP, so its arrival is when a consumer could have the
/// message.
/// Gives each queue `i` of a server its one thing due at `due_of(i)`;
/// returns how long that took.
type Preload<'a> = dyn Fn(&Server, &(dyn Fn(usize) -> u64 + Sync)) -> Duration + 'a;

/// What `ready_lateness` measured: each queue's dq.ready event time minus
/// its due time (µs), whether the subscriber ran at real-time priority,
/// and one line per server.
struct ReadyLateness {
    samples: Vec<i64>,
    realtime: bool,
    rounds: Vec<String>,
}

/// `n` queues (`tenant(i)`), each given one thing due at `due_of(base, i)`
/// by `preload` (a message, a schedule's run): n / 1000 falling due a
/// millisecond across one second, a few seconds ahead. One client
/// SUBSCRIBEd to dq.ready takes each queue's event time; no other client
/// talks to the server meanwhile.
fn ready_lateness(cfg: &Config, s: &Scale, n: usize, preload: &Preload<'_>) -> ReadyLateness {
    // Queue i falls due at base + i * 1000 / n ms: n / 1000 a millisecond.
    let due_of = |base: u64, i: usize| base + (i * 1000 / n) as u64;
    let mut samples: Vec<i64> = Vec::with_capacity(n * s.queue_rounds);
    let mut rounds = Vec::new();
    let mut all_realtime = true;
    for _ in 0..s.queue_rounds {
        // Due once the preload (and the subscription) are surely over; if
        // the preload overran, again on a fresh server with more room.
        let mut lead_ms = 2000;
        let (server, base, took) = loop {
            let server = Server::with_module(cfg);
            let base = now_ms() + lead_ms;
            let took = preload(&server, &|i| due_of(base, i));
            if now_ms() + 1000 < base {
                break (server, base, took);
            }
            lead_ms = 2 * lead_ms + 2 * took.as_millis() as u64;
        };
        let mut con = server.conn();
        let _: () = redis::cmd("CONFIG")
            .arg("SET")
            .arg("notify-keyspace-events")
            .arg("Eg")
            .query(&mut con)
            .expect("CONFIG SET notify-keyspace-events");
        let ticks_before = info_u64(&mut con, "dq", "dq_timer_ticks");
        let received = AtomicUsize::new(0);
        let subscribed = AtomicBool::new(false);
        let mut sub_con = server.conn();
        let (events, realtime) = thread::scope(|sc| {
            let subscriber = sc.spawn(|| {
                let realtime = realtime_priority();
                let mut pubsub = sub_con.as_pubsub();
                pubsub.subscribe(READY_CHANNEL).expect("SUBSCRIBE");
                subscribed.store(true, Relaxed);
                let mut events = Vec::with_capacity(n);
                while events.len() < n {
                    let msg = pubsub.get_message().expect("a dq.ready notification");
                    let at_us = now_us();
                    let name = msg.get_payload_bytes();
                    if name == END_OF_RUN.as_bytes() {
                        break;
                    }
                    let index = std::str::from_utf8(name)
                        .ok()
                        .and_then(|name| name.strip_prefix("tenant-"))
                        .and_then(|i| i.parse::<usize>().ok())
                        .unwrap_or_else(|| panic!("not a queue of the scenario: {name:?}"));
                    events.push((index, at_us));
                    received.fetch_add(1, Relaxed);
                }
                (events, realtime)
            });
            while !subscribed.load(Relaxed) && !subscriber.is_finished() {
                thread::sleep(Duration::from_millis(1));
            }
            assert!(
                now_ms() < base,
                "queues: subscribed only after the first due time"
            );
            let give_up = due_of(base, n - 1) + GIVE_UP.as_millis() as u64;
            while received.load(Relaxed) < n && !subscriber.is_finished() && now_ms() < give_up {
                thread::sleep(Duration::from_millis(10));
            }
            if received.load(Relaxed) < n && !subscriber.is_finished() {
                let _: i64 = redis::cmd("PUBLISH")
                    .arg(READY_CHANNEL)
                    .arg(END_OF_RUN)
                    .query(&mut con)
                    .expect("PUBLISH");
            }
            subscriber.join().expect("the dq.ready subscriber")
        });
        let dq = info(&mut con, "dq");
        let field = |name: &str| dq[name].parse::<u64>().expect("a numeric INFO dq field");
        assert_eq!(
            field("dq_messages_ready"),
            n as u64,
            "queues: not every message became ready"
        );
        assert_eq!(
            events.len(),
            n,
            "queues: {} dq.ready events for {n} queues",
            events.len()
        );
        let mut seen = vec![false; n];
        for &(i, at_us) in &events {
            assert!(!seen[i], "queues: two dq.ready events for {}", tenant(i));
            seen[i] = true;
            samples.push(at_us as i64 - (due_of(base, i) * 1000) as i64);
        }
        all_realtime &= realtime;
        rounds.push(format!(
            "preload {:.2} s, {} timer ticks ({} of them continuing a previous tick's work), \
             the longest {} µs, {} promoted, {} schedule runs",
            took.as_secs_f64(),
            field("dq_timer_ticks") - ticks_before,
            field("dq_ticks_continued"),
            field("dq_longest_tick_us"),
            field("dq_promoted"),
            field("dq_schedule_runs")
        ));
    }
    ReadyLateness {
        samples,
        realtime: all_realtime,
        rounds,
    }
}

fn queue_lateness(cfg: &Config, s: &Scale, report: &mut Report) {
    let n = s.queues_n;
    let ReadyLateness {
        mut samples,
        realtime: all_realtime,
        rounds,
    } = ready_lateness(cfg, s, n, &|server, due_of| {
        drive(server.conns(s.conns), n, |p, i| {
            p.cmd("DQ.ADD")
                .arg(tenant(i))
                .arg(payload(i))
                .arg("ID")
                .arg(msg_id(i))
                .arg("AT")
                .arg(due_of(i));
        })
    });
    samples.sort_unstable();
    let p = |q: f64| percentile(&samples, q);
    let scenario = "9 queues";
    report.figure(
        scenario,
        &format!("lateness p50, {n} queues due within one second"),
        ms(p(0.5)),
        None,
    );
    report.figure(
        scenario,
        "lateness p99",
        ms(p(0.99)),
        Some(("≤ 5 ms (goal ≤ 1 ms)", p(0.99) <= 5000.0)),
    );
    report.figure(scenario, "lateness max", ms(p(1.0)), None);
    report.detail(format!(
        "queues, lateness: {n} queues of one message each (added with AT), due {} a \
         millisecond across one second a few seconds ahead, on {} fresh server(s); with \
         notify-keyspace-events `Eg`, one client SUBSCRIBEd to `{READY_CHANNEL}` (each event \
         names its queue) takes the arrival time of each queue's event − that queue's due \
         time: when a consumer told by the event could POP it, like scenario 3's delivery − \
         due; no other client sends the server anything from the subscription to the last \
         event (the benchmark waits on the subscriber, not on INFO), as for consumers that \
         wait for the events; the subscriber ran as {}; no baseline: the seeds' broker would have to poll \
         {n} ZSETs; per server: {}",
        n / 1000,
        s.queue_rounds,
        if all_realtime {
            "a real-time thread, so that it measures the server and not its own wait for a core"
        } else {
            "an ordinary thread: real-time priority was refused, so client-side scheduling delays count too"
        },
        rounds.join("; ")
    ));
}

// ---------------------------------------------------------------- 11. schedules

/// Recurring schedules: how late their runs are when 10,000 fall due in
/// the same second, how many runs a second the server makes when many fall
/// due at once, and that thousands of schedules hours away cost no wakeup.
fn schedules(cfg: &Config, s: &Scale, report: &mut Report) {
    let scenario = "11 schedules";
    let n = s.queues_n;
    let late = ready_lateness(cfg, s, n, &|server, due_of| {
        drive(server.conns(s.conns), n, |p, i| {
            p.cmd("DQ.SCHEDULE")
                .arg(tenant(i))
                .arg("s")
                .arg(payload(i))
                .arg("EVERY")
                .arg("1h")
                .arg("START")
                .arg(due_of(i));
        })
    });
    let mut samples = late.samples;
    samples.sort_unstable();
    let p = |q: f64| percentile(&samples, q);
    report.figure(
        scenario,
        &format!("run lateness p99, {n} schedules due within one second"),
        ms(p(0.99)),
        Some(("≤ 5 ms", p(0.99) <= 5000.0)),
    );
    report.figure(
        scenario,
        "run lateness max",
        ms(p(1.0)),
        Some(("≤ 20 ms", p(1.0) <= 20_000.0)),
    );
    report.detail(format!(
        "schedules, lateness: {n} queues with one schedule each (EVERY 1h, START spread over \
         one second a few seconds ahead), measured as scenario 9 measures messages: the \
         arrival of each queue's dq.ready event (its run's message is ready at once) − the \
         run time; subscriber as {}; per server: {}",
        if late.realtime {
            "a real-time thread"
        } else {
            "an ordinary thread"
        },
        late.rounds.join("; ")
    ));

    // Runs a second: many schedules due at the same instant.
    let burst = s.schedule_burst;
    let server = Server::with_module(cfg);
    let mut lead_ms = 2000;
    let (at, took) = loop {
        let at = now_ms() + lead_ms;
        let took = drive(server.conns(s.conns), burst, |p, i| {
            p.cmd("DQ.SCHEDULE")
                .arg(format!("burst-{}", i % 100))
                .arg(format!("s{i}"))
                .arg("x")
                .arg("EVERY")
                .arg("1d")
                .arg("START")
                .arg(at);
        });
        if now_ms() + 500 < at {
            break (at, took);
        }
        let _: () = redis::cmd("FLUSHALL")
            .query(&mut server.conn())
            .expect("FLUSHALL");
        lead_ms = 2 * lead_ms + 2 * took.as_millis() as u64;
    };
    let mut con = server.conn();
    let runs_before = server.info_u64("dq", "dq_schedule_runs");
    while now_ms() < at {
        thread::sleep(Duration::from_millis(1));
    }
    let give_up = Instant::now() + GIVE_UP;
    let done_at = loop {
        let made = info_u64(&mut con, "dq", "dq_schedule_runs") - runs_before;
        if made >= burst as u64 || Instant::now() > give_up {
            break now_us();
        }
        thread::sleep(Duration::from_millis(2));
    };
    let made = info_u64(&mut con, "dq", "dq_schedule_runs") - runs_before;
    assert_eq!(made, burst as u64, "schedules: not every run was made");
    let secs = (done_at as f64 / 1e6 - at as f64 / 1e3).max(1e-3);
    let per_sec = burst as f64 / secs;
    report.figure(
        scenario,
        &format!("runs made per second, {burst} due at once"),
        format!("{:.0}k/s", per_sec / 1000.0),
        Some(("≥ 100k/s", per_sec >= 100_000.0)),
    );
    report.detail(format!(
        "schedules, runs/s: {burst} schedules in 100 queues (preloaded in {:.2} s), all due \
         at the same millisecond; from that time until INFO dq's schedule_runs (polled every \
         2 ms) counted them all: {secs:.3} s, {} timer ticks, the longest {} µs",
        took.as_secs_f64(),
        info_u64(&mut con, "dq", "dq_timer_ticks"),
        info_u64(&mut con, "dq", "dq_longest_tick_us")
    ));
    drop(con);
    drop(server);

    // Idle: schedules hours away wake nothing.
    let server = Server::with_module(cfg);
    drive(server.conns(s.conns), n, |p, i| {
        p.cmd("DQ.SCHEDULE")
            .arg(format!("idle-{}", i % 100))
            .arg(format!("s{i}"))
            .arg("x")
            .arg("CRON")
            .arg("0 3 * * *")
            .arg("START")
            .arg(now_ms() + 3 * 3_600_000);
    });
    thread::sleep(Duration::from_secs(1));
    let ticks0 = server.info_u64("dq", "dq_timer_ticks");
    let start = Instant::now();
    thread::sleep(Duration::from_secs(s.idle_secs));
    let wakeups =
        (server.info_u64("dq", "dq_timer_ticks") - ticks0) as f64 / start.elapsed().as_secs_f64();
    report.figure(
        scenario,
        &format!("timer wakeups/s, {n} schedules hours away"),
        format!("{wakeups:.2}/s"),
        Some(("0/s", wakeups == 0.0)),
    );
}

// ---------------------------------------------------------------- 12. flow

/// Flow control: what a limit the load never reaches costs, how exact
/// RATE is under many consumers, DQ.MPOP over several queues against
/// DQ.POP over one, and how soon DQ.RESUME reaches a blocked consumer.
fn flow(cfg: &Config, s: &Scale, report: &mut Report) {
    let scenario = "12 flow";
    let limited = |option: &'static str, value: &'static str| {
        move || {
            let server = Server::with_module(cfg);
            let _: () = redis::cmd("DQ.CONFIG")
                .arg(&["q", "SET", option, value])
                .query(&mut server.conn())
                .expect("DQ.CONFIG SET");
            let run = dq_lifecycle(&server, "q", s);
            let throttled = queue_stat(&mut server.conn(), "q", "throttled");
            assert_eq!(throttled, 0, "flow: {option} {value} held the load back");
            run
        }
    };
    let [plain, rate, inflight] = best_of(
        s.rounds,
        [
            &|| dq_lifecycle(&Server::with_module(cfg), "q", s),
            &limited("RATE", "1000000/1s"),
            &limited("MAXINFLIGHT", "1000000"),
        ],
    );
    report.versus(
        scenario,
        "POP+ACK, RATE 1000000/1s above the load / none",
        rate,
        plain,
        Some(0.95),
    );
    report.versus(
        scenario,
        "POP+ACK, MAXINFLIGHT 1000000 above the load / none",
        inflight,
        plain,
        None,
    );
    report.detail(format!(
        "flow, limits above the load: scenario 2's lifecycle (best of {} rounds of {} \
         messages, alternating) on a queue with no limit, with RATE 1000000/1s and with \
         MAXINFLIGHT 1000000; no POP was throttled; {}",
        s.rounds,
        s.life_n,
        busy(&[("none", plain), ("RATE", rate), ("MAXINFLIGHT", inflight)])
    ));

    rate_exactness(cfg, s, report);

    let queues: Vec<String> = (0..8).map(|i| format!("q{i}")).collect();
    let queues: Vec<&str> = queues.iter().map(String::as_str).collect();
    // Messages per POP or MPOP call, of each variant's last round.
    let per_call = Mutex::new([0.0f64; 2]);
    let counted = |variant: usize, queues: &[&str]| {
        let server = Server::with_module(cfg);
        let run = dq_lifecycle_over(&server, queues, s);
        let command = if variant == 0 { "dq.pop" } else { "dq.mpop" };
        let calls = command_calls(&mut server.conn(), command);
        per_call.lock().expect("per_call")[variant] = s.life_n as f64 / calls.max(1) as f64;
        run
    };
    let [pop, mpop] = best_of(s.rounds, [&|| counted(0, &["q"]), &|| counted(1, &queues)]);
    let [pop_batch, mpop_batch] = *per_call.lock().expect("per_call");
    report.versus(
        scenario,
        "ADD→MPOP→ACK over 8 queues / ADD→POP→ACK over 1",
        mpop,
        pop,
        Some(0.8),
    );
    report.detail(format!(
        "flow, MPOP: scenario 2's lifecycle with the messages spread over 8 queues (message \
         i to queue i mod 8) and consumers taking with DQ.MPOP 8 q0 … q7 COUNT {BATCH} BLOCK \
         100, then DQ.ACK on the queue the reply names; baseline: the same on one queue with \
         DQ.POP; best of {} rounds; messages per call (the last round): MPOP {mpop_batch:.1}, \
         POP {pop_batch:.1} (an MPOP takes from one queue only, so with the load spread its \
         batches are smaller); {}",
        s.rounds,
        busy(&[("MPOP", mpop), ("POP", pop)])
    ));

    resume_latency(cfg, s, report);
}

/// How many times `command` was called (INFO commandstats).
fn command_calls(con: &mut Connection, command: &str) -> u64 {
    let stats = info(con, "commandstats");
    let line = stats
        .get(&format!("cmdstat_{command}"))
        .unwrap_or_else(|| panic!("no commandstats for {command}"));
    line.split(',')
        .find_map(|kv| kv.strip_prefix("calls="))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no calls= in {line}"))
}

/// DQ.STATS queue's integer `field`.
fn queue_stat(con: &mut Connection, queue: &str, field: &str) -> u64 {
    let stats: HashMap<String, Value> = redis::cmd("DQ.STATS")
        .arg(queue)
        .query(con)
        .expect("DQ.STATS");
    match stats.get(field) {
        Some(Value::Int(n)) => *n as u64,
        other => panic!("DQ.STATS {field}: {other:?}"),
    }
}

/// RATE 1000/1s with 8 consumers popping as fast as they can: the server's
/// own delivery times (each lease deadline − the fixed LEASE) give the
/// busiest 1 s window and the sustained rate.
fn rate_exactness(cfg: &Config, s: &Scale, report: &mut Report) {
    const N: u64 = 1000;
    const WINDOW_MS: i64 = 1000;
    const LEASE_MS: i64 = 3_600_000;
    let total = s.rate_n;
    let server = Server::with_module(cfg);
    drive(server.conns(s.conns), total, |p, i| {
        p.cmd("DQ.ADD").arg("q").arg(payload(i));
    });
    let _: () = redis::cmd("DQ.CONFIG")
        .arg(&["q", "SET", "RATE", "1000/1s"])
        .query(&mut server.conn())
        .expect("DQ.CONFIG SET RATE");
    let taken = AtomicUsize::new(0);
    let start = Instant::now();
    thread::scope(|sc| {
        for mut con in server.conns(8) {
            let taken = &taken;
            sc.spawn(move || {
                while taken.load(Relaxed) < total && start.elapsed() < GIVE_UP {
                    let reply: Value = redis::cmd("DQ.POP")
                        .arg("q")
                        .arg("COUNT")
                        .arg(BATCH)
                        .arg("BLOCK")
                        .arg(100)
                        .arg("LEASE")
                        .arg(LEASE_MS)
                        .query(&mut con)
                        .expect("DQ.POP");
                    taken.fetch_add(pop_entries(reply).len(), Relaxed);
                }
            });
        }
    });
    let mut con = server.conn();
    let mut times = Vec::with_capacity(total);
    let mut cursor = "0".to_string();
    loop {
        let (next, entries): (String, Vec<Value>) = redis::cmd("DQ.SCAN")
            .arg("q")
            .arg(&cursor)
            .arg(&["STATE", "INFLIGHT", "COUNT", "10000"])
            .query(&mut con)
            .expect("DQ.SCAN");
        for entry in entries {
            let Value::Array(fields) = entry else {
                panic!("not a SCAN entry: {entry:?}")
            };
            let Some(Value::Int(deadline)) = fields.get(3) else {
                panic!("no lease deadline: {fields:?}")
            };
            times.push(deadline - LEASE_MS);
        }
        if next == "0" {
            break;
        }
        cursor = next;
    }
    assert_eq!(times.len(), total, "rate: not every message was delivered");
    times.sort_unstable();
    // The busiest window [t, t + 1 s), t at each delivery time.
    let mut worst = 0;
    let mut end = 0;
    for (i, &t) in times.iter().enumerate() {
        while end < times.len() && times[end] < t + WINDOW_MS {
            end += 1;
        }
        worst = worst.max(end - i);
    }
    let first_window = times.partition_point(|&t| t < times[0] + WINDOW_MS);
    let span_s = (times[times.len() - 1] - times[0]) as f64 / 1e3;
    let sustained = (total - first_window) as f64 / span_s.max(1e-3);
    let scenario = "12 flow";
    report.figure(
        scenario,
        "RATE 1000/1s, 8 consumers: deliveries in the busiest 1 s",
        worst.to_string(),
        Some(("≤ 1000", worst as u64 <= N)),
    );
    report.figure(
        scenario,
        "RATE 1000/1s, 8 consumers: sustained deliveries",
        format!("{sustained:.0}/s"),
        Some(("≥ 950/s", sustained >= 950.0)),
    );
    report.detail(format!(
        "flow, RATE: {total} ready messages, RATE 1000/1s, 8 consumers each looping DQ.POP \
         COUNT {BATCH} BLOCK 100 LEASE {LEASE_MS}; delivery times are the server's (each \
         in-flight message's lease deadline − LEASE, from DQ.SCAN); busiest window over every \
         [t, t + 1 s) starting at a delivery; sustained = the deliveries after the first \
         window ÷ the time from the first delivery to the last ({span_s:.2} s); POPs \
         throttled: {}",
        queue_stat(&mut con, "q", "throttled")
    ));
}

/// A consumer blocked on a paused queue holding a ready message: the time
/// from sending DQ.RESUME to the consumer's reply.
fn resume_latency(cfg: &Config, s: &Scale, report: &mut Report) {
    let server = Server::with_module(cfg);
    let mut con = server.conn();
    let mut consumer = server.conn();
    let (tx, rx) = std::sync::mpsc::channel::<Instant>();
    let mut samples = Vec::with_capacity(s.resume_n);
    thread::scope(|sc| {
        sc.spawn(move || loop {
            let reply: Value = redis::cmd("DQ.POP")
                .arg(&["q", "BLOCK", "0"])
                .query(&mut consumer)
                .expect("DQ.POP");
            let got = Instant::now();
            let entries = pop_entries(reply);
            if entries.iter().any(|(_, p)| p.as_slice() == b"stop") {
                break;
            }
            if tx.send(got).is_err() {
                break;
            }
        });
        for _ in 0..s.resume_n {
            let _: () = redis::cmd("DQ.PAUSE")
                .arg("q")
                .query(&mut con)
                .expect("PAUSE");
            let _: String = redis::cmd("DQ.ADD")
                .arg(&["q", "x"])
                .query(&mut con)
                .expect("ADD");
            // The consumer must be blocked before the RESUME is sent.
            let give_up = Instant::now() + GIVE_UP;
            while info(&mut con, "clients")
                .get("blocked_clients")
                .is_none_or(|b| b != "1")
            {
                assert!(
                    Instant::now() < give_up,
                    "resume: the consumer never blocked"
                );
                thread::sleep(Duration::from_micros(200));
            }
            let sent = Instant::now();
            let _: i64 = redis::cmd("DQ.RESUME")
                .arg("q")
                .query(&mut con)
                .expect("RESUME");
            let got = rx.recv_timeout(GIVE_UP).expect("the consumer's delivery");
            samples.push(got.saturating_duration_since(sent).as_micros() as i64);
        }
        let _: String = redis::cmd("DQ.ADD")
            .arg(&["q", "stop"])
            .query(&mut con)
            .expect("ADD");
    });
    samples.sort_unstable();
    let p = |q: f64| percentile(&samples, q);
    let scenario = "12 flow";
    report.figure(
        scenario,
        "blocked consumer on a paused queue: RESUME → delivery p99",
        ms(p(0.99)),
        Some(("≤ 2 ms", p(0.99) <= 2000.0)),
    );
    report.detail(format!(
        "flow, RESUME: {} times, DQ.PAUSE q, DQ.ADD q, wait for the consumer's DQ.POP q BLOCK \
         0 to be blocked (INFO clients), then the time from sending DQ.RESUME q to the \
         consumer's reply on its own connection and thread: p50 {}, p99 {}, max {}",
        s.resume_n,
        ms(p(0.5)),
        ms(p(0.99)),
        ms(p(1.0))
    ));
}

// ---------------------------------------------------------------- 10. lines

/// Whether `program` can be started: a path that exists, or a name found
/// on PATH.
fn installed(program: &str) -> bool {
    if program.contains('/') {
        return std::path::Path::new(program).is_file();
    }
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(program).is_file()))
}

/// Scenario 1's first figure, DQ.ADD DELAY 1h against raw ZADD, on each
/// server line the tests run on, each against its own ZADD.
fn server_lines(cfg: &Config, s: &Scale, report: &mut Report) {
    let d13 = |name: &str| cfg.debian13.join(name).to_string_lossy().into_owned();
    let lines = [
        ("Redis 7.0", "redis-server".to_string()),
        ("Valkey 8.0", cfg.valkey.clone()),
        ("Redis 8.0", d13("redis-server")),
        ("Valkey 8.1", d13("valkey-server")),
    ];
    let scenario = "10 lines";
    let mut measured = Vec::new();
    for (line, program) in lines {
        if !installed(&program) {
            report.push(Row {
                scenario,
                figure: format!("DQ.ADD DELAY 1h vs raw ZADD, {line}"),
                value: "—".into(),
                baseline: "—".into(),
                ratio: "—".into(),
                target: format!("skipped: no {program}"),
                met: None,
            });
            continue;
        }
        let cfg = Config {
            quick: cfg.quick,
            server: program.clone(),
            out: cfg.out.clone(),
            only: None,
            valkey: cfg.valkey.clone(),
            debian13: cfg.debian13.clone(),
        };
        let (version, skips) = {
            let server = Server::with_module(&cfg);
            let mut con = server.conn();
            let skips = info_u64(&mut con, "dq", "dq_replicate_skips_lookup");
            (server_version(&mut con), skips)
        };
        let due = now_ms() + HOUR_MS;
        let [dq, zadd] = best_of(
            s.rounds,
            [&|| dq_add_run(&cfg, s, Some(HOUR_MS)), &|| {
                zadd_run(Server::plain(&cfg), s, due)
            }],
        );
        let figure = format!("DQ.ADD DELAY 1h vs raw ZADD, {version}, skips lookup {skips}");
        report.versus(scenario, &figure, dq, zadd, Some(1.0));
        measured.push(format!(
            "{line} ({program}): {}",
            busy(&[("DQ.ADD DELAY", dq), ("ZADD", zadd)])
        ));
    }
    report.detail(format!(
        "lines: as the first figure of 1 (best of {} rounds of {} messages, {} connections, \
         pipelines of {BATCH}), on each server line, against raw ZADD on a server of the same \
         line without the module; `skips lookup` is INFO dq's dq_replicate_skips_lookup (1: \
         propagation skips the per-call command lookup, Valkey ≥ 8.1); a line whose binary \
         is absent is skipped; {}",
        s.rounds,
        s.add_n,
        s.conns,
        measured.join("; ")
    ));
}

// ---------------------------------------------------------------- 8. unlink

/// UNLINK (and, for contrast, DEL) of a queue of N messages: how long the
/// command holds the main thread, seen by the caller and by a PING probe
/// on another connection.
fn unlink(cfg: &Config, s: &Scale, report: &mut Report) {
    let n = s.burst_n;
    // The pause: the larger of the command's round trip and the longest
    // round trip of a PING probe on another connection meanwhile.
    let drop_key = |server: Server, key: &str, command: &str| {
        let mut con = server.conn();
        let mut probe = server.conn();
        let stop = AtomicBool::new(false);
        thread::scope(|sc| {
            let pinger = sc.spawn(|| {
                realtime_priority();
                let mut longest = 0;
                while !stop.load(Relaxed) {
                    let t = Instant::now();
                    let _: String = redis::cmd("PING").query(&mut probe).expect("PING");
                    longest = longest.max(t.elapsed().as_micros() as u64);
                }
                longest
            });
            thread::sleep(Duration::from_millis(50));
            let t = Instant::now();
            let removed: i64 = redis::cmd(command).arg(key).query(&mut con).expect(command);
            let took_us = t.elapsed().as_micros() as f64;
            assert_eq!(removed, 1, "{command} {key}");
            thread::sleep(Duration::from_millis(100));
            stop.store(true, Relaxed);
            let probe_us = pinger.join().expect("the PING probe") as f64;
            (took_us.max(probe_us), took_us, probe_us)
        })
    };
    let queue = |command: &str| {
        let server = Server::with_module(cfg);
        add_delayed(&server, s, n);
        drop_key(server, "q", command)
    };
    let zset = || {
        let server = Server::plain(cfg);
        let due = now_ms() + HOUR_MS;
        drive(server.conns(s.conns), n, |p, i| {
            p.cmd("ZADD").arg("z").arg(due).arg(payload(i));
        });
        drop_key(server, "z", "UNLINK")
    };
    let (_, unlink, unlink_probe) = queue("UNLINK");
    let (_, zset_unlink, zset_probe) = zset();
    let (del, ..) = queue("DEL");
    let scenario = "8 unlink";
    let mut versus = |figure: String, dq: f64, base: f64, target: Option<f64>| {
        report.push(Row {
            scenario,
            figure,
            value: ms(dq),
            baseline: ms(base),
            ratio: format!("{:.2}×", dq / base),
            target: target.map_or("—".into(), |t| format!("≤ {} ms", t / 1000.0)),
            met: target.map(|t| dq <= t),
        })
    };
    versus(
        format!("UNLINK of {n} messages, its round trip, vs a ZSET's"),
        unlink,
        zset_unlink,
        Some(1000.0),
    );
    versus(
        "longest PING round trip meanwhile, vs a ZSET's".into(),
        unlink_probe,
        zset_probe,
        None,
    );
    report.figure(
        scenario,
        &format!("DEL of {n} messages (frees in the command)"),
        ms(del),
        None,
    );
    report.detail(format!(
        "unlink: the main thread's pause is UNLINK's round trip: the queue's free effort is \
         its message count, so the server frees it on its lazy-free thread; a PING probe on \
         another connection ran from 50 ms before to 100 ms after the UNLINK: its longest \
         round trip is the lazy-free thread competing for this machine's two cores, the same \
         for a ZSET; baseline: a ZSET of {n} 64-byte members on a server without the module"
    ));
}

// ---------------------------------------------------------------- 7. backlog

fn backlog(cfg: &Config, s: &Scale, report: &mut Report) {
    let preload = |waiting: usize, report: &mut Report| {
        let server = Server::with_module(cfg);
        let took = add_delayed(&server, s, waiting);
        report.detail(format!(
            "backlog: preloaded {waiting} delayed messages in {:.1} s ({})",
            took.as_secs_f64(),
            per_sec(rate(waiting, took))
        ));
        server
    };
    let small = preload(s.backlog_small, report);
    let big = preload(s.backlog_big, report);
    let [big_rate, small_rate] = best_of(
        s.rounds,
        [&|| dq_lifecycle(&big, "q", s), &|| {
            dq_lifecycle(&small, "q", s)
        }],
    );
    let figure = format!(
        "lifecycle, {} vs {} waiting",
        s.backlog_big, s.backlog_small
    );
    report.versus("7 backlog", &figure, big_rate, small_rate, Some(0.8));
    report.detail(format!(
        "backlog: best of {} lifecycle rounds as in 2, on the queue that holds the waiting \
         messages; {}",
        s.rounds,
        busy(&[("big backlog", big_rate), ("small", small_rate)])
    ));
}

// ---------------------------------------------------------------- output

fn machine(cfg: &Config) -> Vec<(&'static str, String)> {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            let line = t.lines().find(|l| l.starts_with("model name"))?;
            Some(line.split_once(':')?.1.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = thread::available_parallelism().map_or(0, |n| n.get());
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let server = format!(
        "{} ({})",
        server_version(&mut Server::with_module(cfg).conn()),
        cfg.server
    );
    let run = |program: &str, args: &[&str]| {
        Command::new(program)
            .args(args)
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map_or("unknown".into(), |o| {
                String::from_utf8_lossy(&o.stdout).trim().to_string()
            })
    };
    let load: Vec<&str> = load.split(' ').take(3).collect();
    vec![
        ("date", run("date", &["-u", "+%Y-%m-%d %H:%M UTC"])),
        ("mode", if cfg.quick { "quick" } else { "full" }.into()),
        (
            "machine",
            format!("{cores} cores, {cpu}, Linux {}", kernel.trim()),
        ),
        ("load average at start", load.join(" ")),
        ("server", server),
        ("dq", run("git", &["describe", "--always", "--dirty"])),
    ]
}

/// "redis 7.0.15", "valkey 8.1.1": the server's name and version, from
/// INFO server (Valkey names itself there and keeps redis_version at
/// 7.2.4 for clients).
fn server_version(con: &mut Connection) -> String {
    let i = info(con, "server");
    let name = i.get("server_name").map_or("redis", String::as_str);
    let version = i.get(&format!("{name}_version")).or(i.get("redis_version"));
    format!("{name} {}", version.map_or("?", String::as_str))
}

fn markdown(header: &[(&str, String)], report: &Report, wall: Duration) -> String {
    let mut md = String::from("# dq benchmark\n\n");
    for (k, v) in header {
        let _ = writeln!(md, "- {k}: {v}");
    }
    let _ = writeln!(md, "- wall time: {:.0} s\n", wall.as_secs_f64());
    md.push_str("| scenario | figure | dq | baseline | ratio | target | met |\n");
    md.push_str("|---|---|--:|--:|--:|---|---|\n");
    for r in &report.rows {
        let met = match r.met {
            Some(true) => "yes",
            Some(false) => "**no**",
            None => "",
        };
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {} | {} | {met} |",
            r.scenario, r.figure, r.value, r.baseline, r.ratio, r.target
        );
    }
    md.push_str("\nHow each figure was made:\n\n");
    for d in &report.details {
        let _ = writeln!(md, "- {d}");
    }
    if !report.lateness_us.is_empty() {
        md.push_str("\n![lateness histogram](lateness.svg)\n");
    }
    md
}

/// A histogram of lateness on logarithmic axes: 10 bins per decade from
/// 10 µs to 100 ms, counts on a log scale, the percentiles marked.
fn lateness_svg(sorted_us: &[i64], quick: bool) -> String {
    // Canvas and margins: left, right, top, bottom.
    let (w, h) = (820.0, 380.0);
    let (l, r, t, b) = (70.0, 180.0, 40.0, 55.0);
    let (lo, hi) = (1.0_f64, 5.0_f64); // log10 of µs
    let bins = ((hi - lo) * 10.0) as usize;
    let mut counts = vec![0u64; bins];
    for &us in sorted_us {
        let bin = ((((us.max(1) as f64).log10() - lo) * 10.0).floor()).max(0.0) as usize;
        counts[bin.min(bins - 1)] += 1;
    }
    let decades = (counts.iter().copied().max().unwrap_or(1).max(1) as f64)
        .log10()
        .ceil()
        .max(1.0);
    let x = |log_us: f64| l + (log_us.clamp(lo, hi) - lo) / (hi - lo) * (w - l - r);
    let y = |count: f64| h - b - count.max(1.0).log10() / decades * (h - t - b);
    let mut svg = String::new();
    let mut put = |line: String| {
        svg.push_str(&line);
        svg.push('\n');
    };
    put(format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" \
         font-family=\"sans-serif\" font-size=\"12\">\n\
         <rect width=\"100%\" height=\"100%\" fill=\"white\"/>"
    ));
    put(format!(
        "<text x=\"{}\" y=\"22\" text-anchor=\"middle\" font-size=\"15\">dq lateness \
         (delivery − due) at 10k msg/s, {} messages{}</text>",
        (l + w - r) / 2.0,
        sorted_us.len(),
        if quick { ", quick run" } else { "" }
    ));
    for (i, &c) in counts.iter().enumerate().filter(|(_, &c)| c > 0) {
        let (x0, x1) = (x(lo + i as f64 / 10.0), x(lo + (i + 1) as f64 / 10.0));
        put(format!(
            "<rect x=\"{x0:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"#4a7ebb\">\
             <title>{c}</title></rect>",
            y(c as f64),
            x1 - x0 - 1.0,
            h - b - y(c as f64)
        ));
    }
    put(format!(
        "<path d=\"M{l} {t} V{} H{}\" stroke=\"black\" fill=\"none\"/>",
        h - b,
        w - r
    ));
    for (d, label) in ["0.01 ms", "0.1 ms", "1 ms", "10 ms", "100 ms"]
        .iter()
        .enumerate()
    {
        let xd = x(lo + d as f64);
        put(format!(
            "<line x1=\"{xd}\" y1=\"{}\" x2=\"{xd}\" y2=\"{}\" stroke=\"black\"/>\
             <text x=\"{xd}\" y=\"{}\" text-anchor=\"middle\">{label}</text>",
            h - b,
            h - b + 5.0,
            h - b + 18.0
        ));
    }
    for d in 0..=decades as u32 {
        let yd = y(10f64.powi(d as i32));
        put(format!(
            "<line x1=\"{}\" y1=\"{yd:.1}\" x2=\"{l}\" y2=\"{yd:.1}\" stroke=\"black\"/>\
             <text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            l - 5.0,
            l - 8.0,
            yd + 4.0,
            10u64.pow(d)
        ));
    }
    put(format!(
        "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">lateness (log scale)</text>",
        (l + w - r) / 2.0,
        h - 15.0
    ));
    put(format!(
        "<text transform=\"translate(18 {}) rotate(-90)\" text-anchor=\"middle\">messages per \
         bin (log scale)</text>",
        (t + h - b) / 2.0
    ));
    if sorted_us.is_empty() {
        put("</svg>".into());
        return svg;
    }
    // The percentiles as dashed lines, named in a legend on the right.
    let p = |q: f64| percentile(sorted_us, q).max(1.0);
    let marks = [
        ("p50", p(0.5), "#2a2"),
        ("p99", p(0.99), "#d80"),
        ("p999", p(0.999), "#c22"),
        ("max", p(1.0), "#808"),
        ("p99 target", 2000.0, "#888"),
    ];
    for (i, (name, us, colour)) in marks.iter().enumerate() {
        let xm = x(us.log10());
        let ly = t + 10.0 + 18.0 * i as f64;
        put(format!(
            "<line x1=\"{xm:.1}\" y1=\"{t}\" x2=\"{xm:.1}\" y2=\"{}\" stroke=\"{colour}\" \
             stroke-width=\"1.5\" stroke-dasharray=\"5 3\"/>\
             <line x1=\"{}\" y1=\"{ly}\" x2=\"{}\" y2=\"{ly}\" stroke=\"{colour}\" \
             stroke-width=\"1.5\" stroke-dasharray=\"5 3\"/>\
             <text x=\"{}\" y=\"{}\" fill=\"{colour}\">{name} {:.2} ms</text>",
            h - b,
            w - r + 12.0,
            w - r + 36.0,
            w - r + 42.0,
            ly + 4.0,
            us / 1000.0
        ));
    }
    put("</svg>".into());
    svg
}

fn main() {
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let env = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    let cfg = Config {
        quick: env("DQ_BENCH_QUICK").is_some_and(|v| v != "0"),
        server: dq_testkit::server_binary(),
        out: env("DQ_BENCH_OUT").map_or(manifest.join("target/bench"), PathBuf::from),
        only: env("DQ_BENCH_ONLY").map(|v| v.split(',').map(|s| s.trim().to_string()).collect()),
        valkey: env("DQ_VALKEY").unwrap_or_else(|| "valkey-server".into()),
        debian13: env("DQ_DEBIAN13").map_or(manifest.join("target/debian13/dq"), PathBuf::from),
    };
    // Fails now, not in the first scenario, when the release build is
    // missing (`make bench` builds it).
    dq_testkit::module_path(Build::Release);
    let s = Scale::new(cfg.quick);
    let wanted = |name: &str| {
        cfg.only
            .as_ref()
            .is_none_or(|o| o.iter().any(|x| x == name))
    };
    let wall = Instant::now();
    let header = machine(&cfg);
    for (k, v) in &header {
        println!("{k}: {v}");
    }
    let mut report = Report::default();
    let scenarios: [(&str, Scenario); 12] = [
        ("add", add_throughput),
        ("lifecycle", lifecycle),
        ("lateness", lateness),
        ("burst", burst),
        ("idle", idle),
        ("memory", memory),
        ("queues", many_queues),
        ("lines", server_lines),
        ("schedules", schedules),
        ("flow", flow),
        // Before the backlog: tearing down its 10M-message servers
        // disturbed the UNLINK pause measured right after them.
        ("unlink", unlink),
        ("backlog", backlog),
    ];
    for (name, run) in scenarios {
        if wanted(name) {
            run(&cfg, &s, &mut report);
        }
    }
    std::fs::create_dir_all(&cfg.out).expect("create the output directory");
    let md = markdown(&header, &report, wall.elapsed());
    std::fs::write(cfg.out.join("results.md"), &md).expect("write results.md");
    if !report.lateness_us.is_empty() {
        let svg = lateness_svg(&report.lateness_us, cfg.quick);
        std::fs::write(cfg.out.join("lateness.svg"), svg).expect("write lateness.svg");
    }
    println!("\n{md}\nwritten to {}", cfg.out.display());
}
