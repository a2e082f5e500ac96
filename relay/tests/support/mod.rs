//! What the relay's integration tests (and its benchmark) run against: a
//! real redis-server with the module, a real HTTP receiver on loopback that
//! answers as a test scripts it, and the real dq-relay binary. Each is
//! stopped when dropped, also when a test fails.
#![allow(dead_code)]

use std::collections::HashMap;
use std::convert::Infallible;
use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};

pub use redis::Value;

pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
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
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("find a free port")
        .port()
}

/// A loopback port with nothing listening on it (for a refused connection).
pub fn closed_port() -> u16 {
    free_port()
}

// --- the server ------------------------------------------------------------

pub struct Server {
    child: Child,
    pub port: u16,
    dir: PathBuf,
    password: Option<String>,
    extra: Vec<String>,
}

fn module_path() -> PathBuf {
    if let Ok(path) = std::env::var("DQ_MODULE") {
        return PathBuf::from(path);
    }
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let target = std::env::var("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| root.join("target"));
    // The benchmark loads the optimised module, the tests the debug one
    // (which `make test` builds first, as for the module's own tests).
    let profile = if cfg!(debug_assertions) {
        "debug"
    } else {
        "release"
    };
    let path = target.join(profile).join("libdq.so");
    assert!(
        path.exists(),
        "{} is missing: build the module first (make test or make bench does)",
        path.display()
    );
    path
}

impl Server {
    pub fn start() -> Server {
        Server::start_with(&[], None)
    }

    /// A server with extra `--name value` arguments and, optionally, a
    /// password (`requirepass`).
    pub fn start_with(extra: &[&str], password: Option<&str>) -> Server {
        static N: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "dq-relay-test-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create a temporary directory");
        let extra: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
        // A port found free can be taken before the server binds it: then
        // the server exits and another is tried.
        for _ in 0..20 {
            let port = free_port();
            match spawn_server(port, &dir, &extra, password) {
                Ok(child) => {
                    return Server {
                        child,
                        port,
                        dir,
                        password: password.map(str::to_string),
                        extra,
                    }
                }
                Err(log) if log.contains("Address already in use") => continue,
                Err(log) => panic!("the server did not start; its log:\n{log}"),
            }
        }
        panic!("no free port for the server");
    }

    /// Kills the server (as a crash would) and starts a new one on the
    /// same port: what clients see when their server restarts.
    pub fn restart(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let password = self.password.clone();
        self.child = spawn_server(self.port, &self.dir, &self.extra, password.as_deref())
            .unwrap_or_else(|log| panic!("no restart; the log:\n{log}"));
    }

    /// The URL the tests connect with (with the password, if any).
    pub fn url(&self) -> String {
        match &self.password {
            Some(pw) => format!("redis://:{pw}@127.0.0.1:{}/", self.port),
            None => format!("redis://127.0.0.1:{}/", self.port),
        }
    }

    /// The URL without credentials, for the relay when it gets them
    /// another way.
    pub fn bare_url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    pub fn conn(&self) -> redis::Connection {
        ping(&self.url()).expect("connect to the server")
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

/// Starts a server on `port`; `Err` carries its log when it did not come up.
fn spawn_server(
    port: u16,
    dir: &std::path::Path,
    extra: &[String],
    password: Option<&str>,
) -> Result<Child, String> {
    let binary = std::env::var("DQ_SERVER").unwrap_or_else(|_| "redis-server".into());
    let _ = std::fs::remove_file(dir.join("server.log"));
    let mut command = Command::new(&binary);
    command
        .arg("--port")
        .arg(port.to_string())
        .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
        .arg("--dir")
        .arg(dir)
        .arg("--logfile")
        .arg(dir.join("server.log"))
        .args(extra)
        .arg("--loadmodule")
        .arg(module_path())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    if let Some(pw) = password {
        command.args(["--requirepass", pw]);
    }
    let mut child = command
        .spawn()
        .unwrap_or_else(|e| panic!("start {binary}: {e}"));
    let url = match password {
        Some(pw) => format!("redis://:{pw}@127.0.0.1:{port}/"),
        None => format!("redis://127.0.0.1:{port}/"),
    };
    let up = wait_until(Duration::from_secs(10), || {
        matches!(child.try_wait(), Ok(Some(_))) || ping(&url).is_ok()
    });
    if up && matches!(child.try_wait(), Ok(None)) {
        return Ok(child);
    }
    let _ = child.kill();
    let _ = child.wait();
    Err(std::fs::read_to_string(dir.join("server.log")).unwrap_or_default())
}

fn ping(url: &str) -> redis::RedisResult<redis::Connection> {
    let mut c = redis::Client::open(url)?.get_connection()?;
    redis::cmd("PING").query::<String>(&mut c)?;
    Ok(c)
}

/// Runs one command; panics on a server error.
pub fn cmd(con: &mut redis::Connection, args: &[&str]) -> Value {
    let mut c = redis::cmd(args[0]);
    for a in &args[1..] {
        c.arg(*a);
    }
    c.query::<Value>(con)
        .unwrap_or_else(|e| panic!("{}: {e}", args.join(" ")))
}

pub fn text(v: &Value) -> String {
    match v {
        Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        Value::SimpleString(s) => s.clone(),
        Value::Int(i) => i.to_string(),
        Value::Okay => "OK".into(),
        Value::Nil => "(nil)".into(),
        other => format!("{other:?}"),
    }
}

/// DQ.GET as field -> value; `None` when the message is gone.
pub fn get(con: &mut redis::Connection, queue: &str, id: &str) -> Option<HashMap<String, Value>> {
    match cmd(con, &["DQ.GET", queue, id]) {
        Value::Nil => None,
        Value::Array(items) => Some(
            items
                .chunks(2)
                .map(|kv| (text(&kv[0]), kv[1].clone()))
                .collect(),
        ),
        Value::Map(pairs) => Some(pairs.iter().map(|(k, v)| (text(k), v.clone())).collect()),
        other => panic!("DQ.GET replied {other:?}"),
    }
}

/// One field of DQ.GET as text ("(nil)" for nil); panics if the message is gone.
pub fn field(con: &mut redis::Connection, queue: &str, id: &str, name: &str) -> String {
    let record = get(con, queue, id).unwrap_or_else(|| panic!("{id} is gone"));
    text(
        record
            .get(name)
            .unwrap_or_else(|| panic!("no field {name}")),
    )
}

// --- the receiver ----------------------------------------------------------

/// One request as the receiver got it.
#[derive(Clone, Debug)]
pub struct Received {
    pub method: String,
    pub path: String,
    /// Names in lower case.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// Unix ms when it arrived (before any scripted delay).
    pub at_ms: u64,
    /// The same in microseconds, for the benchmark's lateness.
    pub at_us: u64,
}

impl Received {
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// What the receiver answers.
#[derive(Clone, Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
    /// Waits this long before answering.
    pub delay: Duration,
}

impl Reply {
    pub fn status(status: u16) -> Reply {
        Reply {
            status,
            headers: Vec::new(),
            body: String::new(),
            delay: Duration::ZERO,
        }
    }
    pub fn body(mut self, body: &str) -> Reply {
        self.body = body.into();
        self
    }
    pub fn header(mut self, name: &str, value: &str) -> Reply {
        self.headers.push((name.into(), value.into()));
        self
    }
    pub fn after(mut self, delay: Duration) -> Reply {
        self.delay = delay;
        self
    }
}

type Script = dyn Fn(&Received) -> Reply + Send + Sync;

struct Log {
    requests: Mutex<Vec<Received>>,
    arrived: Condvar,
    /// Requests being answered now, and the most there ever were.
    answering: AtomicUsize,
    most_answering: AtomicUsize,
}

/// An HTTP/1.1 server on a loopback port, on its own runtime.
pub struct Receiver {
    pub port: u16,
    log: Arc<Log>,
    runtime: Option<tokio::runtime::Runtime>,
}

impl Receiver {
    pub fn start(script: impl Fn(&Received) -> Reply + Send + Sync + 'static) -> Receiver {
        Receiver::start_with_threads(1, script)
    }

    pub fn start_with_threads(
        threads: usize,
        script: impl Fn(&Received) -> Reply + Send + Sync + 'static,
    ) -> Receiver {
        Receiver::spawn(threads, None, Arc::new(script))
    }

    /// An HTTPS receiver with this certificate chain and key (PEM files).
    pub fn start_tls(
        cert: &std::path::Path,
        key: &std::path::Path,
        script: impl Fn(&Received) -> Reply + Send + Sync + 'static,
    ) -> Receiver {
        use rustls::pki_types::pem::PemObject;
        use rustls::pki_types::{CertificateDer, PrivateKeyDer};
        let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
            .expect("read the certificate")
            .collect::<Result<_, _>>()
            .expect("parse the certificate");
        let key = PrivateKeyDer::from_pem_file(key).expect("read the key");
        let config = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .expect("TLS versions")
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .expect("a TLS server configuration");
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        Receiver::spawn(1, Some(acceptor), Arc::new(script))
    }

    fn spawn(
        threads: usize,
        tls: Option<tokio_rustls::TlsAcceptor>,
        script: Arc<Script>,
    ) -> Receiver {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads)
            .enable_all()
            .build()
            .expect("a runtime for the receiver");
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .expect("bind the receiver");
        let port = listener.local_addr().expect("receiver address").port();
        let log = Arc::new(Log {
            requests: Mutex::new(Vec::new()),
            arrived: Condvar::new(),
            answering: AtomicUsize::new(0),
            most_answering: AtomicUsize::new(0),
        });
        let accept_log = Arc::clone(&log);
        runtime.spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let _ = stream.set_nodelay(true);
                let (log, script, tls) =
                    (Arc::clone(&accept_log), Arc::clone(&script), tls.clone());
                tokio::spawn(async move {
                    match tls {
                        None => serve(stream, log, script).await,
                        Some(tls) => {
                            if let Ok(stream) = tls.accept(stream).await {
                                serve(stream, log, script).await;
                            }
                        }
                    }
                });
            }
        });
        Receiver {
            port,
            log,
            runtime: Some(runtime),
        }
    }

    pub fn https_url(&self, path: &str) -> String {
        format!("https://127.0.0.1:{}{path}", self.port)
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    pub fn requests(&self) -> Vec<Received> {
        self.log
            .requests
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The most requests that were ever being answered at once.
    pub fn most_at_once(&self) -> usize {
        self.log.most_answering.load(Ordering::SeqCst)
    }

    pub fn count(&self) -> usize {
        self.log
            .requests
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .len()
    }

    /// Waits until at least `n` requests arrived; panics after `timeout`.
    pub fn wait_for(&self, n: usize, timeout: Duration) -> Vec<Received> {
        let deadline = Instant::now() + timeout;
        let mut requests = self.log.requests.lock().unwrap_or_else(|p| p.into_inner());
        while requests.len() < n {
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(
                !left.is_zero(),
                "the receiver got {} requests, not {n}",
                requests.len()
            );
            requests = self
                .log
                .arrived
                .wait_timeout(requests, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        requests.clone()
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}

async fn serve<S>(stream: S, log: Arc<Log>, script: Arc<Script>)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let service =
        hyper::service::service_fn(move |req| answer(req, Arc::clone(&log), Arc::clone(&script)));
    let _ = hyper::server::conn::http1::Builder::new()
        .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
        .await;
}

async fn answer(
    req: hyper::Request<hyper::body::Incoming>,
    log: Arc<Log>,
    script: Arc<Script>,
) -> Result<hyper::Response<Full<Bytes>>, Infallible> {
    let at_us = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64);
    let at_ms = at_us / 1000;
    let (parts, body) = req.into_parts();
    let body = body
        .collect()
        .await
        .map(|b| b.to_bytes().to_vec())
        .unwrap_or_default();
    let received = Received {
        method: parts.method.to_string(),
        path: parts
            .uri
            .path_and_query()
            .map_or_else(|| "/".into(), |p| p.to_string()),
        headers: parts
            .headers
            .iter()
            .map(|(n, v)| {
                (
                    n.as_str().to_string(),
                    String::from_utf8_lossy(v.as_bytes()).into_owned(),
                )
            })
            .collect(),
        body,
        at_ms,
        at_us,
    };
    let now_answering = log.answering.fetch_add(1, Ordering::SeqCst) + 1;
    log.most_answering
        .fetch_max(now_answering, Ordering::SeqCst);
    let reply = script(&received);
    {
        let mut requests = log.requests.lock().unwrap_or_else(|p| p.into_inner());
        requests.push(received);
        log.arrived.notify_all();
    }
    if !reply.delay.is_zero() {
        tokio::time::sleep(reply.delay).await;
    }
    log.answering.fetch_sub(1, Ordering::SeqCst);
    let mut response = hyper::Response::new(Full::new(Bytes::from(reply.body)));
    *response.status_mut() =
        hyper::StatusCode::from_u16(reply.status).expect("a valid scripted status");
    for (name, value) in reply.headers {
        response.headers_mut().insert(
            hyper::header::HeaderName::from_bytes(name.as_bytes()).expect("header name"),
            hyper::header::HeaderValue::from_str(&value).expect("header value"),
        );
    }
    Ok(response)
}

// --- the relay -------------------------------------------------------------

/// The dq-relay binary as a child process; its log lines are collected.
pub struct RelayProcess {
    child: Child,
    lines: Arc<Mutex<Vec<String>>>,
    reader: Option<std::thread::JoinHandle<()>>,
    status: Option<ExitStatus>,
}

impl RelayProcess {
    pub fn start(args: &[String]) -> RelayProcess {
        RelayProcess::start_with_env(args, &[])
    }

    pub fn start_with_env(args: &[String], env: &[(&str, &str)]) -> RelayProcess {
        let mut child = Command::new(env!("CARGO_BIN_EXE_dq-relay"))
            .args(args)
            .env_remove("DQ_RELAY_LOG")
            .env_remove("DQ_RELAY_SECRET")
            .env_remove("DQ_RELAY_REDIS_PASSWORD")
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start dq-relay");
        let stderr = child.stderr.take().expect("the relay's stderr");
        let lines = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&lines);
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                sink.lock().unwrap_or_else(|p| p.into_inner()).push(line);
            }
        });
        RelayProcess {
            child,
            lines,
            reader: Some(reader),
            status: None,
        }
    }

    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    pub fn signal(&self, signal: i32) {
        // SAFETY: kill(2) on our own child's pid; it has not been reaped
        // (status is None until wait), so the pid is still ours.
        assert!(self.status.is_none(), "the relay has exited");
        let rc = unsafe { libc::kill(self.pid(), signal) };
        assert_eq!(rc, 0, "kill({}, {signal})", self.pid());
    }

    /// Waits for the relay to exit; `None` if it is still running after
    /// `timeout`.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let child = &mut self.child;
        let mut status = self.status;
        wait_until(timeout, || {
            if status.is_none() {
                status = child.try_wait().ok().flatten();
            }
            status.is_some()
        });
        self.status = status;
        if status.is_some() {
            if let Some(reader) = self.reader.take() {
                let _ = reader.join();
            }
        }
        status
    }

    pub fn log(&self) -> String {
        self.lines
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .join("\n")
    }

    /// The log lines that are JSON objects.
    pub fn events(&self) -> Vec<serde_json::Value> {
        self.lines
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// Waits for a log event whose message contains `text`.
    pub fn wait_for_event(&self, text: &str, timeout: Duration) -> serde_json::Value {
        let mut found = None;
        wait_until(timeout, || {
            found = self.events().into_iter().find(|e| {
                e.get("message")
                    .and_then(|m| m.as_str())
                    .is_some_and(|m| m.contains(text))
            });
            found.is_some()
        });
        found.unwrap_or_else(|| panic!("no log event {text:?}; the log:\n{}", self.log()))
    }
}

impl Drop for RelayProcess {
    fn drop(&mut self) {
        if self.status.is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        if let Some(reader) = self.reader.take() {
            let _ = reader.join();
        }
    }
}
