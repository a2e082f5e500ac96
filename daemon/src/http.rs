//! The one HTTP/1.1 serving loop of the dashboard and of the relay's
//! `/metrics`, so that both listeners get the same protections.

use std::convert::Infallible;
use std::future::Future;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::{Request, Response};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;

/// How a listener serves; [`Options::new`] gives what both binaries use.
#[derive(Clone, Copy, Debug)]
pub struct Options {
    /// Starts the warning of a failed accept ("metrics: "), so that each
    /// binary's log reads as it always did.
    pub log_prefix: &'static str,
    /// A connection whose request head (the request line and headers) has
    /// not all arrived this long after the server began waiting for it is
    /// closed. It bounds what an idle or trickling client holds (a task
    /// and a socket); a kept-alive connection waiting for its next request
    /// counts as waiting too.
    pub header_read_timeout: Duration,
    /// The pause after a failed accept: out of file descriptors, the next
    /// accept would fail at once, and the loop would spin on a core.
    pub accept_pause: Duration,
}

impl Options {
    pub fn new(log_prefix: &'static str) -> Options {
        Options {
            log_prefix,
            header_read_timeout: Duration::from_secs(30),
            accept_pause: Duration::from_millis(50),
        }
    }
}

/// Serves each connection accepted on `listener` with `handle`, one task
/// a connection, until `shutdown` completes; returns what it gave.
/// Connections being served then are dropped with the runtime, not waited
/// for.
pub async fn serve<H, F, T>(
    listener: TcpListener,
    options: Options,
    handle: H,
    shutdown: impl Future<Output = T>,
) -> T
where
    H: Fn(Request<Incoming>) -> F + Clone + Send + 'static,
    F: Future<Output = Response<Full<Bytes>>> + Send + 'static,
{
    tokio::pin!(shutdown);
    loop {
        let stream = tokio::select! {
            conn = listener.accept() => match conn {
                Ok((stream, _)) => stream,
                Err(e) => {
                    tracing::warn!(error = %e, "{}accept failed", options.log_prefix);
                    tokio::time::sleep(options.accept_pause).await;
                    continue;
                }
            },
            value = &mut shutdown => return value,
        };
        let handle = handle.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req| {
                let answer = handle(req);
                async move { Ok::<_, Infallible>(answer.await) }
            });
            // An error here is the client's (a bad request, a reset, the
            // timeout): hyper has answered or closed already.
            let _ = hyper::server::conn::http1::Builder::new()
                .header_read_timeout(options.header_read_timeout)
                .timer(TokioTimer::new())
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::SocketAddr;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpStream;
    use tokio::sync::oneshot;

    /// Generous: only a stuck test waits this long.
    const DEADLINE: Duration = Duration::from_secs(60);

    async fn start(options: Options) -> (SocketAddr, oneshot::Sender<&'static str>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("the bound address");
        let (stop, stopped) = oneshot::channel();
        tokio::spawn(serve(
            listener,
            options,
            |req: Request<Incoming>| async move {
                Response::new(Full::new(Bytes::from(format!("path {}", req.uri().path()))))
            },
            async move { stopped.await.unwrap_or("dropped") },
        ));
        (addr, stop)
    }

    /// A server whose header-read timeout is short, so that a test sees
    /// it pass; and a client of it. The sender stops the server.
    async fn connect_with_a_short_timeout() -> (TcpStream, oneshot::Sender<&'static str>) {
        let options = Options {
            header_read_timeout: Duration::from_millis(300),
            ..Options::new("test: ")
        };
        let (addr, stop) = start(options).await;
        let s = TcpStream::connect(addr).await.expect("connect");
        (s, stop)
    }

    async fn read_to_end(stream: &mut TcpStream) -> String {
        let mut got = Vec::new();
        let read = tokio::time::timeout(DEADLINE, stream.read_to_end(&mut got)).await;
        assert!(read.is_ok(), "still open after {DEADLINE:?}");
        String::from_utf8_lossy(&got).into_owned()
    }

    /// A client that keeps its connection busy with a byte of header now
    /// and then but never ends its head is closed: the timeout is on the
    /// whole head, not on the pause between two reads.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_slow_client_is_closed() {
        let (mut s, _stop) = connect_with_a_short_timeout().await;
        s.write_all(b"GET / HTTP/1.1\r\nHost: t\r\nX-Slow: ")
            .await
            .expect("send");
        let mut closed = false;
        let started = tokio::time::Instant::now();
        // One more byte of the header's value each time, never its end.
        while started.elapsed() < DEADLINE {
            if s.write_all(b"a").await.is_err() {
                closed = true;
                break;
            }
            let mut buf = [0u8; 64];
            match tokio::time::timeout(Duration::from_millis(50), s.read(&mut buf)).await {
                Ok(Ok(0)) | Ok(Err(_)) => {
                    closed = true;
                    break;
                }
                Ok(Ok(n)) => panic!("an answer to half a request: {:?}", &buf[..n]),
                Err(_) => {}
            }
        }
        assert!(closed, "still open after {DEADLINE:?}");
    }

    /// A client that connects and sends nothing is closed too.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_silent_client_is_closed() {
        let (mut s, _stop) = connect_with_a_short_timeout().await;
        assert_eq!(read_to_end(&mut s).await, "");
    }

    /// A request is answered; then waiting for the next request on the
    /// kept-alive connection is waiting for a head too.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn answers_then_closes_an_idle_kept_alive_connection() {
        let (mut s, _stop) = connect_with_a_short_timeout().await;
        s.write_all(b"GET /x HTTP/1.1\r\nHost: t\r\n\r\n")
            .await
            .expect("send");
        let answer = read_to_end(&mut s).await;
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        assert!(answer.ends_with("path /x"), "{answer}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn returns_what_shutdown_gave_and_stops_accepting() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("the bound address");
        let served = serve(
            listener,
            Options::new("test: "),
            |_req: Request<Incoming>| async { Response::new(Full::new(Bytes::new())) },
            async { "SIGTERM" },
        );
        let got = tokio::time::timeout(DEADLINE, served).await;
        assert_eq!(got, Ok("SIGTERM"));
        // The listener went with the loop.
        assert!(TcpStream::connect(addr).await.is_err());
    }
}
