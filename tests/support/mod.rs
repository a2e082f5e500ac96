//! Real servers for the integration tests.
//!
//! Each `Server` is a redis-server child process on a free loopback port, in
//! its own temporary directory, with the freshly built module loaded. It is
//! killed when dropped, also when a test fails. `DQ_SERVER` names another
//! server binary (for example valkey-server); `DQ_MODULE` another module.
#![allow(dead_code)]

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

pub use redis::Value;

pub struct Server {
    child: Child,
    pub port: u16,
    pub dir: PathBuf,
    extra: Vec<String>,
    module_args: Vec<String>,
    /// Environment variables given to the server (the `DQ_FAULT` switch).
    env: Vec<(String, String)>,
}

fn module_path() -> PathBuf {
    if let Ok(path) = std::env::var("DQ_MODULE") {
        return PathBuf::from(path);
    }
    // The workspace root (this file serves client/'s tests too), and the
    // target directory cargo builds the module into.
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .find(|dir| dir.join("redis.conf.example").exists())
        .map_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")), PathBuf::from);
    let target =
        std::env::var("CARGO_TARGET_DIR").map_or_else(|_| root.join("target"), PathBuf::from);
    let path = target.join("debug/libdq.so");
    assert!(
        path.exists(),
        "{} is missing: run `make test` (or `cargo build` first)",
        path.display()
    );
    path
}

fn server_binary() -> String {
    std::env::var("DQ_SERVER").unwrap_or_else(|_| "redis-server".into())
}

fn fresh_dir() -> PathBuf {
    static N: AtomicUsize = AtomicUsize::new(0);
    let dir = std::env::temp_dir().join(format!(
        "dq-test-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create a temporary directory");
    dir
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("find a free port")
        .port()
}

/// The redis-cli that creates clusters (`DQ_CLI` names another one).
pub fn cli() -> String {
    std::env::var("DQ_CLI").unwrap_or_else(|_| "redis-cli".into())
}

/// Master nodes of a Redis Cluster on loopback ports, every slot assigned.
pub struct Cluster {
    pub nodes: Vec<Server>,
}

impl Cluster {
    pub fn start(masters: usize) -> Cluster {
        let nodes: Vec<Server> = (0..masters)
            .map(|_| {
                Server::start_with(&["--cluster-enabled", "yes", "--cluster-node-timeout", "5000"])
            })
            .collect();
        let out = Command::new(cli())
            .args(["--cluster", "create"])
            .args(nodes.iter().map(|n| format!("127.0.0.1:{}", n.port)))
            .args(["--cluster-replicas", "0", "--cluster-yes"])
            .output()
            .expect("run redis-cli --cluster create");
        assert!(
            out.status.success(),
            "cluster create: {}",
            String::from_utf8_lossy(&out.stdout)
        );
        let cluster = Cluster { nodes };
        for node in &cluster.nodes {
            let mut c = node.conn();
            assert!(
                wait_until(LONG, || {
                    text(&cmd(&mut c, "CLUSTER INFO")).contains("cluster_state:ok")
                }),
                "the cluster did not come up"
            );
        }
        cluster
    }

    /// A cluster-aware client that follows MOVED and ASK and retries
    /// TRYAGAIN.
    pub fn client(&self) -> redis::cluster::ClusterConnection {
        redis::cluster::ClusterClientBuilder::new(self.nodes.iter().map(|n| n.url()))
            .retries(30)
            .min_retry_wait(5)
            .max_retry_wait(200)
            .build()
            .and_then(|c| c.get_connection())
            .expect("cluster connection")
    }

    pub fn id(&self, node: usize) -> String {
        text(&cmd(&mut self.nodes[node].conn(), "CLUSTER MYID"))
    }

    /// The node that owns `key`'s slot.
    pub fn owner(&self, key: &[u8]) -> usize {
        let slot = int(&run(&mut self.nodes[0].conn(), &[b"CLUSTER", b"KEYSLOT", key]).unwrap());
        self.owner_of_slot(slot)
    }

    pub fn owner_of_slot(&self, slot: i64) -> usize {
        let counts: Vec<usize> = (0..self.nodes.len())
            .filter(|&i| {
                let mut c = self.nodes[i].conn();
                // Owned slots of this node, from its own CLUSTER NODES line.
                let nodes = text(&cmd(&mut c, "CLUSTER NODES"));
                let me = nodes.lines().find(|l| l.contains("myself")).unwrap_or("");
                me.split(' ').skip(8).any(|range| {
                    let mut ends = range.split('-').map(|s| s.parse::<i64>());
                    match (ends.next(), ends.next()) {
                        (Some(Ok(a)), Some(Ok(b))) => a <= slot && slot <= b,
                        (Some(Ok(a)), None) => a == slot,
                        _ => false,
                    }
                })
            })
            .collect();
        assert_eq!(counts.len(), 1, "slot {slot} has owners {counts:?}");
        counts[0]
    }
}

/// Runs a command on a cluster connection; a server error becomes `Err`.
pub fn cluster_run(
    con: &mut redis::cluster::ClusterConnection,
    args: &[&[u8]],
) -> Result<Value, String> {
    let mut cmd = redis::cmd(std::str::from_utf8(args[0]).unwrap());
    for arg in &args[1..] {
        cmd.arg(*arg);
    }
    cmd.query::<Value>(con).map_err(|e| e.to_string())
}

/// How long a test waits for what must happen (a message falling due, a
/// lease running out, a replica catching up) before it fails: enough for a
/// loaded machine, and a passing test never waits it out.
pub const LONG: Duration = Duration::from_secs(60);

/// For checks that need something still pending — a DELAY not yet due, a
/// lease or a TTL not yet over, a BLOCK not yet timed out: runs `attempt`
/// with a window of `ms` milliseconds. `attempt` returns `None` when its
/// checks came after the window had closed, so that they prove nothing;
/// it then runs again, on fresh state, with a window four times longer.
/// However slow the machine is, the checks run in time at last.
pub fn in_time<T>(first_ms: u64, mut attempt: impl FnMut(u64) -> Option<T>) -> T {
    let mut ms = first_ms;
    loop {
        if let Some(done) = attempt(ms) {
            return done;
        }
        assert!(
            ms <= 100_000,
            "the checks came too late even with a window of {ms} ms"
        );
        ms *= 4;
    }
}

/// Polls `condition` until it holds or `timeout` passes.
pub fn wait_until(timeout: Duration, mut condition: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if condition() {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

impl Server {
    pub fn start() -> Server {
        Server::start_with(&[])
    }

    /// Starts a server with extra `--name value` arguments.
    pub fn start_with(extra: &[&str]) -> Server {
        Server::try_start(extra, &[])
            .unwrap_or_else(|log| panic!("the server did not start; its log:\n{log}"))
    }

    /// Starts a server whose `loadmodule` line has these arguments; `Err`
    /// carries the server log when it did not come up.
    pub fn try_start(extra: &[&str], module_args: &[&str]) -> Result<Server, String> {
        let owned = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let dir = fresh_dir();
        // A server expected to fail leaves no directory behind.
        Server::spawn_in(dir.clone(), owned(extra), owned(module_args), Vec::new()).inspect_err(
            |_| {
                let _ = std::fs::remove_dir_all(&dir);
            },
        )
    }

    /// Starts a server whose directory holds `rdb` as its `dump.rdb`, so it
    /// loads that at startup.
    pub fn start_from_rdb(rdb: &std::path::Path, extra: &[&str]) -> Server {
        let dir = fresh_dir();
        std::fs::copy(rdb, dir.join("dump.rdb")).expect("copy the RDB fixture");
        let extra = extra.iter().map(|s| s.to_string()).collect();
        Server::spawn_in(dir, extra, Vec::new(), Vec::new())
            .unwrap_or_else(|log| panic!("the server did not start; its log:\n{log}"))
    }

    /// Starts a server with a debug build's fault switch set: each entry
    /// point named in `faults` (see src/guard.rs) panics when entered.
    pub fn start_with_faults(faults: &str) -> Server {
        Server::start_with_faults_env(faults, &[])
    }

    /// Like `start_with_faults`, with more variables in the server's
    /// environment (which otherwise is the test's own).
    pub fn start_with_faults_env(faults: &str, more: &[(&str, &str)]) -> Server {
        let mut env = vec![("DQ_FAULT".to_string(), faults.to_string())];
        env.extend(more.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        Server::spawn_in(fresh_dir(), Vec::new(), Vec::new(), env)
            .unwrap_or_else(|log| panic!("the server did not start; its log:\n{log}"))
    }

    fn spawn_in(
        dir: PathBuf,
        extra: Vec<String>,
        module_args: Vec<String>,
        env: Vec<(String, String)>,
    ) -> Result<Server, String> {
        // A port found free can be taken before the server binds it: then
        // the server exits and we try another.
        for _ in 0..20 {
            let _ = std::fs::remove_file(dir.join("server.log"));
            let port = free_port();
            // A cluster node also needs its bus port, by default port+10000.
            let bus: Vec<String> = if extra.iter().any(|a| a == "--cluster-enabled") {
                vec!["--cluster-port".into(), free_port().to_string()]
            } else {
                Vec::new()
            };
            let mut child = Command::new(server_binary())
                .arg("--port")
                .arg(port.to_string())
                .args(&bus)
                .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
                .args(["--enable-debug-command", "yes", "--daemonize", "no"])
                .arg("--dir")
                .arg(&dir)
                .arg("--logfile")
                .arg(dir.join("server.log"))
                .args(&extra)
                .arg("--loadmodule")
                .arg(module_path())
                .args(&module_args)
                .env_remove("DQ_FAULT")
                .envs(env.iter().map(|(k, v)| (k, v)))
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap_or_else(|e| panic!("start {}: {e}", server_binary()));
            let up = wait_until(LONG, || {
                if matches!(child.try_wait(), Ok(Some(_))) {
                    return true;
                }
                redis::Client::open(format!("redis://127.0.0.1:{port}/"))
                    .and_then(|c| c.get_connection())
                    .and_then(|mut c| redis::cmd("PING").query::<String>(&mut c))
                    .is_ok()
            });
            if up && matches!(child.try_wait(), Ok(None)) {
                return Ok(Server {
                    child,
                    port,
                    dir,
                    extra,
                    module_args,
                    env,
                });
            }
            let _ = child.kill();
            let _ = child.wait();
            let log = std::fs::read_to_string(dir.join("server.log")).unwrap_or_default();
            if !log.contains("Address already in use") {
                return Err(log); // not a port race: trying again will not help
            }
        }
        Err(std::fs::read_to_string(dir.join("server.log")).unwrap_or_default())
    }

    /// Kills the server (as a crash would) and starts it again on the same
    /// directory and arguments, so it loads what it had persisted.
    pub fn restart(mut self) -> Server {
        let _ = self.child.kill();
        let _ = self.child.wait();
        // Taking the directory leaves nothing for Drop to delete.
        let dir = std::mem::take(&mut self.dir);
        let extra = std::mem::take(&mut self.extra);
        let module_args = std::mem::take(&mut self.module_args);
        let env = std::mem::take(&mut self.env);
        Server::spawn_in(dir, extra, module_args, env)
            .unwrap_or_else(|log| panic!("no restart:\n{log}"))
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    pub fn conn(&self) -> redis::Connection {
        redis::Client::open(self.url())
            .and_then(|c| c.get_connection())
            .expect("connect")
    }

    /// A connection speaking RESP3.
    pub fn conn_resp3(&self) -> redis::Connection {
        redis::Client::open(format!("{}?protocol=resp3", self.url()))
            .and_then(|c| c.get_connection())
            .expect("connect with RESP3")
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("server.log")).unwrap_or_default()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// Runs one command; a server error becomes `Err` with its text.
pub fn run(con: &mut redis::Connection, args: &[&[u8]]) -> Result<Value, String> {
    let mut cmd = redis::cmd(std::str::from_utf8(args[0]).unwrap());
    for arg in &args[1..] {
        cmd.arg(*arg);
    }
    cmd.query::<Value>(con).map_err(|e| {
        // "ERR DELAY must be ..." as the server wrote it.
        match (e.code(), e.detail()) {
            (Some(code), Some(detail)) => format!("{code} {detail}"),
            (Some(code), None) => code.to_string(),
            _ => e.to_string(),
        }
    })
}

/// Runs one command from a string split on spaces; panics on error.
pub fn cmd(con: &mut redis::Connection, line: &str) -> Value {
    let args: Vec<&[u8]> = line.split(' ').map(str::as_bytes).collect();
    run(con, &args).unwrap_or_else(|e| panic!("{line}: {e}"))
}

/// Like `cmd`, expecting an error; returns its text.
pub fn cmd_err(con: &mut redis::Connection, line: &str) -> String {
    let args: Vec<&[u8]> = line.split(' ').map(str::as_bytes).collect();
    match run(con, &args) {
        Err(e) => e,
        Ok(v) => panic!("{line}: expected an error, got {v:?}"),
    }
}

pub fn text(v: &Value) -> String {
    match v {
        Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        Value::SimpleString(s) => s.clone(),
        Value::Int(i) => i.to_string(),
        Value::Okay => "OK".into(),
        other => panic!("not a string: {other:?}"),
    }
}

pub fn int(v: &Value) -> i64 {
    match v {
        Value::Int(i) => *i,
        other => panic!("not an integer: {other:?}"),
    }
}

/// A record reply (RESP2 flat array or RESP3 map) as (field, value) pairs.
pub fn record(v: &Value) -> Vec<(String, Value)> {
    match v {
        Value::Array(items) => items
            .chunks(2)
            .map(|kv| (text(&kv[0]), kv[1].clone()))
            .collect(),
        Value::Map(pairs) => pairs.iter().map(|(k, v)| (text(k), v.clone())).collect(),
        other => panic!("not a record: {other:?}"),
    }
}

/// The items of an array (or set) reply.
pub fn list(v: &Value) -> Vec<Value> {
    match v {
        Value::Array(items) | Value::Set(items) => items.clone(),
        other => panic!("not a list: {other:?}"),
    }
}

pub fn field(v: &Value, name: &str) -> Value {
    record(v)
        .into_iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v)
        .unwrap_or_else(|| panic!("no field {name} in {v:?}"))
}

/// POP entries as (id, payload, attempt).
pub fn entries(v: &Value) -> Vec<(String, String, i64)> {
    match v {
        Value::Nil => Vec::new(),
        Value::Array(items) => items
            .iter()
            .map(|e| match e {
                Value::Array(f) if f.len() == 3 => (text(&f[0]), text(&f[1]), int(&f[2])),
                other => panic!("not an entry: {other:?}"),
            })
            .collect(),
        other => panic!("not a POP reply: {other:?}"),
    }
}

/// One numeric field of `INFO dq`.
pub fn info_field(c: &mut redis::Connection, name: &str) -> i64 {
    let info = text(&cmd(c, "INFO dq"));
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {name} in INFO dq:\n{info}"))
}

/// `used_memory` of `INFO memory`.
pub fn used_memory(c: &mut redis::Connection) -> i64 {
    let info = text(&cmd(c, "INFO memory"));
    info.lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("used_memory in INFO")
}

pub fn digest(con: &mut redis::Connection) -> String {
    text(&cmd(con, "DEBUG DIGEST"))
}
