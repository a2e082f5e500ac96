//! Prometheus metrics and the `/metrics` endpoint.

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use dq_daemon::http::Options;
use http_body_util::Full;
use hyper::{Request, Response, StatusCode};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct QueueLabels {
    pub queue: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OutcomeLabels {
    pub queue: String,
    /// `delivered`, `retry`, `dead`, `stale` or `unsettled`.
    pub outcome: &'static str,
}

fn latency_histogram() -> Histogram {
    // 1 ms to about 33 s, doubling.
    Histogram::new(exponential_buckets(0.001, 2.0, 16))
}

#[derive(Clone)]
pub struct Metrics {
    pub deliveries: Family<OutcomeLabels, Counter>,
    pub request_seconds: Family<QueueLabels, Histogram, fn() -> Histogram>,
    pub in_flight: Family<QueueLabels, Gauge>,
    registry: Arc<Registry>,
}

impl Metrics {
    pub fn new() -> Metrics {
        let deliveries = Family::<OutcomeLabels, Counter>::default();
        let request_seconds =
            Family::<QueueLabels, Histogram, fn() -> Histogram>::new_with_constructor(
                latency_histogram,
            );
        let in_flight = Family::<QueueLabels, Gauge>::default();
        let mut registry = Registry::default();
        registry.register(
            "dq_relay_deliveries",
            "Deliveries by how they ended: delivered (2xx, acknowledged), retry (NACKed \
             for a later attempt), dead (permanent failure or last attempt), stale (the \
             lease ran out first), unsettled (Redis could not be told)",
            deliveries.clone(),
        );
        registry.register(
            "dq_relay_request_duration_seconds",
            "Time from sending an HTTP request to the end of its answer, or to its failure",
            request_seconds.clone(),
        );
        registry.register(
            "dq_relay_in_flight",
            "Deliveries being worked on now",
            in_flight.clone(),
        );
        Metrics {
            deliveries,
            request_seconds,
            in_flight,
            registry: Arc::new(registry),
        }
    }

    pub fn render(&self) -> String {
        let mut text = String::new();
        // Writing to a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut text, &self.registry);
        text
    }
}

/// Serves `GET /metrics` on `listener` until the process ends: through
/// the graceful stop too, while the calls in flight finish.
pub async fn serve(listener: tokio::net::TcpListener, metrics: Metrics) {
    let handle = move |req: Request<hyper::body::Incoming>| {
        let answer = answer(&req, &metrics);
        async move { answer }
    };
    let options = Options::new("metrics: ");
    dq_daemon::http::serve(listener, options, handle, std::future::pending::<()>()).await
}

fn answer(req: &Request<hyper::body::Incoming>, metrics: &Metrics) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::new()));
    if req.uri().path() != "/metrics" {
        *response.status_mut() = StatusCode::NOT_FOUND;
        return response;
    }
    *response.body_mut() = Full::new(Bytes::from(metrics.render()));
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static(
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        ),
    );
    response
}

/// Binds the metrics address (port 0 picks a free one; the log says which).
pub async fn bind(addr: SocketAddr) -> std::io::Result<tokio::net::TcpListener> {
    tokio::net::TcpListener::bind(addr).await
}
