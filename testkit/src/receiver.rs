//! An HTTP(S) server on loopback that answers as a test scripts it, and
//! records what it got (the relay's tests and benchmark call it).

use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};

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
