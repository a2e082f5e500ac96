//! A server child process with the module loaded.

use std::fs::OpenOptions;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::resp::{cmd, text};
use crate::{free_port, module_path, server_binary, wait_until, Build, LONG};

/// A redis-server (or `DQ_SERVER`) child process on a free loopback port,
/// in its own temporary directory, with the built module loaded. It is
/// killed when dropped, also when a test fails; its directory is removed
/// then, unless the test panicked.
pub struct Server {
    child: Child,
    pub port: u16,
    pub dir: PathBuf,
    /// A cluster node's bus port (kept across restarts).
    bus_port: Option<u16>,
    /// What it was started with, for a restart.
    setup: ServerBuilder,
}

/// How a server is started: `Server::builder()`, then what differs from
/// the default (the debug build of the module, nothing else), then
/// `start` (or `try_start`).
#[derive(Clone, Debug)]
pub struct ServerBuilder {
    args: Vec<String>,
    module_args: Vec<String>,
    env: Vec<(String, String)>,
    password: Option<String>,
    binary: Option<String>,
    /// `None`: a server without the module.
    module: Option<Build>,
    rdb: Option<PathBuf>,
}

fn owned(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

impl Default for ServerBuilder {
    fn default() -> ServerBuilder {
        ServerBuilder {
            args: Vec::new(),
            module_args: Vec::new(),
            env: Vec::new(),
            password: None,
            binary: None,
            module: Some(Build::Debug),
            rdb: None,
        }
    }
}

impl ServerBuilder {
    /// Extra `--name value` arguments (after the kit's own, so they
    /// override them: `--appendonly yes`).
    pub fn args(mut self, args: &[&str]) -> ServerBuilder {
        self.args.extend(owned(args));
        self
    }

    /// Arguments of the `loadmodule` line.
    pub fn module_args(mut self, args: &[&str]) -> ServerBuilder {
        self.module_args.extend(owned(args));
        self
    }

    /// A variable of the server's environment (which otherwise is the
    /// test's own, without `DQ_FAULT`).
    pub fn env(mut self, name: &str, value: &str) -> ServerBuilder {
        self.env.push((name.into(), value.into()));
        self
    }

    /// `requirepass`: `url` then carries the password.
    pub fn password(mut self, password: &str) -> ServerBuilder {
        self.password = Some(password.into());
        self
    }

    /// Another server binary than `DQ_SERVER` (or redis-server).
    pub fn binary(mut self, binary: &str) -> ServerBuilder {
        self.binary = Some(binary.into());
        self
    }

    /// The release build of the module (a benchmark's), not the debug one.
    pub fn release(mut self) -> ServerBuilder {
        self.module = Some(Build::Release);
        self
    }

    /// No module: a plain server (a benchmark's baseline).
    pub fn without_module(mut self) -> ServerBuilder {
        self.module = None;
        self
    }

    /// Starts with `rdb` as the directory's `dump.rdb`, which the server
    /// loads at startup.
    pub fn rdb(mut self, rdb: &Path) -> ServerBuilder {
        self.rdb = Some(rdb.to_path_buf());
        self
    }

    /// Starts the server; panics with its log when it does not come up.
    pub fn start(&self) -> Server {
        self.try_start()
            .unwrap_or_else(|log| panic!("the server did not start; its log:\n{log}"))
    }

    /// Starts the server; `Err` carries its log when it did not come up,
    /// and then no directory is left behind.
    pub fn try_start(&self) -> Result<Server, String> {
        let dir = fresh_dir();
        let started = self.start_in(&dir);
        if started.is_err() {
            let _ = std::fs::remove_dir_all(&dir);
        }
        started
    }

    fn start_in(&self, dir: &Path) -> Result<Server, String> {
        if let Some(rdb) = &self.rdb {
            std::fs::copy(rdb, dir.join("dump.rdb")).expect("copy the RDB file");
        }
        let cluster = self.args.iter().any(|a| a == "--cluster-enabled");
        // A port found free can be taken before the server binds it: then
        // the server exits and we try another.
        for _ in 0..20 {
            let port = free_port();
            // A cluster node also needs its bus port, by default port+10000.
            let bus_port = cluster.then(free_port);
            match self.spawn(dir, port, bus_port) {
                Ok(child) => {
                    return Ok(Server {
                        child,
                        port,
                        dir: dir.to_path_buf(),
                        bus_port,
                        setup: self.clone(),
                    })
                }
                Err(Failed::PortTaken) => continue,
                Err(Failed::Log(log)) => return Err(log),
            }
        }
        Err("20 free ports in a row were taken before the server bound them".into())
    }

    /// One try on `port`, in `dir`, waiting until the server answers
    /// (itself, not another on the port). A try that lost its port leaves
    /// nothing in the log.
    fn spawn(&self, dir: &Path, port: u16, bus_port: Option<u16>) -> Result<Child, Failed> {
        let log = dir.join("server.log");
        let logged = std::fs::metadata(&log).map_or(0, |m| m.len());
        let binary = self.binary.clone().unwrap_or_else(server_binary);
        let mut command = Command::new(&binary);
        command.arg("--port").arg(port.to_string());
        if let Some(bus) = bus_port {
            command.arg("--cluster-port").arg(bus.to_string());
        }
        command
            .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .args(["--enable-debug-command", "yes", "--daemonize", "no"])
            .arg("--dir")
            .arg(dir)
            .arg("--logfile")
            .arg(&log)
            .args(&self.args);
        if let Some(password) = &self.password {
            command.args(["--requirepass", password]);
        }
        if let Some(build) = self.module {
            command
                .arg("--loadmodule")
                .arg(module_path(build))
                .args(&self.module_args);
        }
        let mut child = command
            .env_remove("DQ_FAULT")
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("start {binary}: {e}"));
        let url = url(port, self.password.as_deref());
        // The server that answers must be this one: another test's server
        // may have bound the port first (both were told it was free), and
        // answers while this one is still starting, about to fail. Taken
        // for ours, it once joined two tests' clusters into one.
        let ours = format!("process_id:{}", child.id());
        let up = wait_until(LONG, || {
            if matches!(child.try_wait(), Ok(Some(_))) {
                return true;
            }
            // Then PING, which a server still loading its data refuses.
            redis::Client::open(url.as_str())
                .and_then(|c| c.get_connection())
                .and_then(|mut c| {
                    let info: String = redis::cmd("INFO").arg("server").query(&mut c)?;
                    if !info.lines().any(|line| line.trim_end() == ours) {
                        return Ok(false);
                    }
                    redis::cmd("PING").query::<String>(&mut c).map(|_| true)
                })
                .unwrap_or(false)
        });
        if up && matches!(child.try_wait(), Ok(None)) {
            return Ok(child);
        }
        let _ = child.kill();
        let _ = child.wait();
        let text = read_log(dir);
        let this_try = text.get(logged as usize..).unwrap_or(&text);
        if this_try.contains("Address already in use") {
            if let Ok(file) = OpenOptions::new().write(true).open(&log) {
                let _ = file.set_len(logged);
            }
            return Err(Failed::PortTaken);
        }
        Err(Failed::Log(text)) // not a port race: trying again will not help
    }
}

enum Failed {
    PortTaken,
    Log(String),
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

fn read_log(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("server.log")).unwrap_or_default()
}

fn url(port: u16, password: Option<&str>) -> String {
    match password {
        Some(pw) => format!("redis://:{pw}@127.0.0.1:{port}/"),
        None => format!("redis://127.0.0.1:{port}/"),
    }
}

impl Server {
    /// The default: the debug build of the module, nothing else.
    pub fn builder() -> ServerBuilder {
        ServerBuilder::default()
    }

    pub fn start() -> Server {
        Server::builder().start()
    }

    /// Starts a server with extra `--name value` arguments.
    pub fn start_with(extra: &[&str]) -> Server {
        Server::builder().args(extra).start()
    }

    /// Starts a replica of `master` and waits until its link is up. It
    /// serves a full sync at once (no diskless delay), should it be
    /// promoted and get replicas of its own.
    pub fn start_replica_of(master: &Server) -> Server {
        let port = master.port.to_string();
        let replica = Server::start_with(&[
            "--replicaof",
            "127.0.0.1",
            &port,
            "--repl-diskless-sync-delay",
            "0",
        ]);
        let mut r = replica.conn();
        assert!(
            wait_until(LONG, || {
                text(&cmd(&mut r, "INFO replication")).contains("master_link_status:up")
            }),
            "the replica's link to its master did not come up"
        );
        replica
    }

    /// Starts a server whose `loadmodule` line has these arguments; `Err`
    /// carries the server log when it did not come up.
    pub fn try_start(extra: &[&str], module_args: &[&str]) -> Result<Server, String> {
        Server::builder()
            .args(extra)
            .module_args(module_args)
            .try_start()
    }

    /// Starts a server whose directory holds `rdb` as its `dump.rdb`, so it
    /// loads that at startup.
    pub fn start_from_rdb(rdb: &Path, extra: &[&str]) -> Server {
        Server::builder().rdb(rdb).args(extra).start()
    }

    /// Starts a server with a debug build's fault switch set: each entry
    /// point named in `faults` (see src/server/guard.rs and src/core/fault.rs)
    /// panics when entered.
    pub fn start_with_faults(faults: &str) -> Server {
        Server::start_with_faults_env(faults, &[])
    }

    /// Like `start_with_faults`, with more variables in the server's
    /// environment (which otherwise is the test's own).
    pub fn start_with_faults_env(faults: &str, more: &[(&str, &str)]) -> Server {
        let mut builder = Server::builder().env("DQ_FAULT", faults);
        for (name, value) in more {
            builder = builder.env(name, value);
        }
        builder.start()
    }

    /// Kills the server (as a crash would) and starts it again with the
    /// same arguments, on the same port (what its clients see when their
    /// server restarts) and directory (so it loads what it had persisted).
    /// The log goes on. Should something else take the port meanwhile, it
    /// tries again for a while.
    pub fn restart(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let deadline = Instant::now() + LONG;
        loop {
            match self.setup.spawn(&self.dir, self.port, self.bus_port) {
                Ok(child) => {
                    self.child = child;
                    return;
                }
                Err(Failed::PortTaken) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(10));
                }
                Err(_) => panic!("no restart on port {}; its log:\n{}", self.port, self.log()),
            }
        }
    }

    /// Kills the server as a crash would and leaves it down (its clients
    /// find nothing listening) until [`Server::start_again`]; `restart` is
    /// the two at once.
    pub fn crash(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Whether the server process is running (false after
    /// [`Server::crash`], or when it exited by itself).
    pub fn is_up(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Starts a crashed server again, as `restart` does: same arguments,
    /// port and directory (so it loads what it had persisted).
    pub fn start_again(&mut self) {
        assert!(!self.is_up(), "start_again: the server is running");
        let deadline = Instant::now() + LONG;
        loop {
            match self.setup.spawn(&self.dir, self.port, self.bus_port) {
                Ok(child) => {
                    self.child = child;
                    return;
                }
                Err(Failed::PortTaken) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(10));
                }
                Err(_) => panic!("no restart on port {}; its log:\n{}", self.port, self.log()),
            }
        }
    }

    /// The URL clients connect with (with the password, if any).
    pub fn url(&self) -> String {
        url(self.port, self.setup.password.as_deref())
    }

    /// The URL without credentials, for a client that gets them another
    /// way.
    pub fn bare_url(&self) -> String {
        url(self.port, None)
    }

    pub fn conn(&self) -> redis::Connection {
        redis::Client::open(self.url())
            .and_then(|c| c.get_connection())
            .expect("connect")
    }

    /// Sends `line` (a blocking command: DQ.POP, DQ.WAIT, DQ.EVENTS ...
    /// BLOCK) on a connection of its own; the thread returns its reply
    /// once it comes. Pair with [`crate::wait_blocked`] to know it waits.
    pub fn in_background(&self, line: &str) -> std::thread::JoinHandle<crate::Value> {
        let mut c = self.conn();
        let line = line.to_string();
        std::thread::spawn(move || crate::cmd(&mut c, &line))
    }

    /// A connection speaking RESP3.
    pub fn conn_resp3(&self) -> redis::Connection {
        redis::Client::open(format!("{}?protocol=resp3", self.url()))
            .and_then(|c| c.get_connection())
            .expect("connect with RESP3")
    }

    /// The server's log file, from its first start.
    pub fn log(&self) -> String {
        read_log(&self.dir)
    }

    /// The server's process id (for /proc).
    pub fn pid(&self) -> u32 {
        self.child.id()
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
