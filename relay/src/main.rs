//! dq-relay: delivers dq messages over HTTP.
//!
//! It consumes one or more queues of a Redis (or Valkey) server with the
//! dq module loaded, calls each message's URL, and records the outcome:
//! ACK on 2xx (DQ.DONE with the answer's status and first bytes as the
//! result, on a queue that keeps results: retain.rs), NACK (retry after the message's backoff, or the
//! receiver's Retry-After) on 408, 429, 5xx and transport failures, dead
//! at once on any other 4xx, a URL outside the allow-list or an address
//! it must not connect to (loopback, private, link-local...; see
//! egress.rs). See docs/relay.md.

mod allow;
mod egress;
mod envelope;
mod metrics;
mod outcome;
mod redact;
mod relay;
mod resolver;
mod retain;
mod signature;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use clap::Parser;
use dq_client::{CancellationToken, Consumer, ConsumerConfig};
use dq_daemon::{LogColor, LogFormat, Signals};
use reqwest::Url;

use crate::allow::AllowList;
use crate::egress::{Cidr, Egress};
use crate::relay::{PerHost, Relay, Route};
use crate::resolver::CheckedResolver;
use crate::retain::Retains;
use crate::signature::Secret;

/// Delivers dq messages over HTTP: calls each message's URL, retries on
/// 408/429/5xx and network failures, dead-letters other 4xx, signs every
/// request.
#[derive(Parser)]
#[command(version, about, long_about = None)]
struct Args {
    /// The server: redis://[user[:password]@]host[:port][/db], or rediss://
    /// for TLS.
    #[arg(
        long,
        env = "DQ_RELAY_REDIS",
        // It may hold a password: --help must not print it.
        hide_env_values = true,
        default_value = "redis://127.0.0.1:6379/"
    )]
    redis: String,

    /// ACL user name (instead of one in the URL).
    #[arg(long, env = "DQ_RELAY_REDIS_USER")]
    redis_user: Option<String>,

    /// Password (instead of one in the URL); prefer the environment
    /// variable, which `ps` does not show.
    #[arg(long, env = "DQ_RELAY_REDIS_PASSWORD", hide_env_values = true)]
    redis_password: Option<String>,

    /// PEM file of the CA that signed the server's certificate (rediss://),
    /// instead of the system's roots.
    #[arg(long)]
    redis_ca: Option<PathBuf>,

    /// PEM client certificate for mutual TLS (with --redis-key).
    #[arg(long, requires = "redis_key")]
    redis_cert: Option<PathBuf>,

    /// PEM private key of --redis-cert.
    #[arg(long, requires = "redis_cert")]
    redis_key: Option<PathBuf>,

    /// A queue to deliver: NAME (each payload is a JSON envelope naming its
    /// URL) or NAME=URL (each payload is POSTed to URL). Repeatable.
    #[arg(short, long = "queue", value_name = "NAME[=URL]", required = true)]
    queues: Vec<String>,

    /// Allow URLs starting with this prefix (scheme, host, port and a path
    /// prefix, e.g. https://hooks.example.com/v1/). Repeatable.
    #[arg(long = "allow", value_name = "URL_PREFIX")]
    allow: Vec<String>,

    /// Allow any URL on this host: a name, *.name for its subdomains, or *
    /// for every host. Repeatable.
    #[arg(long = "allow-host", value_name = "PATTERN")]
    allow_host: Vec<String>,

    /// Let the relay connect to addresses in this range (CIDR: 10.1.2.0/24,
    /// fd00:1::/64, or one address), which it otherwise refuses whatever
    /// the allow-list says: loopback, private (RFC 1918), link-local (cloud
    /// metadata), carrier-grade NAT, unique-local, multicast, unspecified,
    /// reserved and the other ranges of docs/relay.md. Repeatable; in
    /// DQ_RELAY_ALLOW_NET, separated by commas.
    #[arg(
        long = "allow-net",
        value_name = "CIDR",
        env = "DQ_RELAY_ALLOW_NET",
        value_delimiter = ',',
        value_parser = Cidr::parse
    )]
    allow_net: Vec<Cidr>,

    /// HMAC-SHA256 signing secret; give two while rotating. Prefer
    /// DQ_RELAY_SECRET or --secret-file, which `ps` does not show.
    #[arg(long = "secret", env = "DQ_RELAY_SECRET", hide_env_values = true)]
    secrets: Vec<String>,

    /// A file with one signing secret per line.
    #[arg(long)]
    secret_file: Option<PathBuf>,

    /// Calls in flight at once, per queue.
    #[arg(long, default_value_t = 64)]
    concurrency: usize,

    /// Calls in flight at once to one host and port, across queues.
    #[arg(long, default_value_t = 32)]
    per_host: usize,

    /// Messages taken per DQ.POP, at most (default: --concurrency, up to 64).
    #[arg(long)]
    batch: Option<usize>,

    /// Request timeout when the message gives none (e.g. 10s, 1m, 500ms).
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
    timeout: Duration,

    /// The longest timeout a message may ask for.
    #[arg(long, default_value = "5m", value_parser = humantime::parse_duration)]
    max_timeout: Duration,

    /// Time allowed to open a connection to a receiver.
    #[arg(long, default_value = "5s", value_parser = humantime::parse_duration)]
    connect_timeout: Duration,

    /// The longest retry delay a receiver's Retry-After may set.
    #[arg(long, default_value = "6h", value_parser = humantime::parse_duration)]
    max_retry_after: Duration,

    /// Lease taken per delivery; renewed (DQ.TOUCH) every third of it
    /// while a call runs.
    #[arg(long, default_value = "30s", value_parser = humantime::parse_duration)]
    lease: Duration,

    /// How long one DQ.POP waits for a message.
    #[arg(long, default_value = "5s", value_parser = humantime::parse_duration)]
    block: Duration,

    /// Serve Prometheus metrics at http://ADDR/metrics (port 0: any free
    /// port, named in the log).
    #[arg(long, value_name = "ADDR")]
    metrics: Option<SocketAddr>,

    /// Log format, to standard error.
    #[arg(long, value_enum, default_value = "json")]
    log_format: LogFormat,

    /// ANSI colours in text logs: auto (only when standard error is a
    /// terminal and NO_COLOR is unset or empty), always or never.
    #[arg(long, env = "DQ_RELAY_LOG_COLOR", value_enum, default_value = "auto")]
    log_color: LogColor,

    /// Log level or filter (error, warn, info, debug); DQ_RELAY_LOG
    /// overrides it with a full tracing filter.
    #[arg(long, default_value = "info")]
    log_level: String,
}

/// `NAME` or `NAME=URL`. A queue name may contain `=`, so the split is at
/// the first `=http://` or `=https://`.
fn parse_queue(spec: &str) -> anyhow::Result<(String, Route)> {
    let split = ["=http://", "=https://"]
        .iter()
        .filter_map(|m| spec.find(m))
        .min();
    let Some(at) = split else {
        if spec.is_empty() {
            bail!("--queue needs a queue name");
        }
        return Ok((spec.to_string(), Route::Envelope));
    };
    let (name, url) = (&spec[..at], &spec[at + 1..]);
    let url = Url::parse(url).with_context(|| format!("--queue {name}=...: not a valid URL"))?;
    if url.host_str().is_none() {
        bail!("--queue {name}=...: the URL has no host");
    }
    Ok((name.to_string(), Route::Fixed(url)))
}

fn read_secrets(args: &Args) -> anyhow::Result<Vec<Secret>> {
    let mut texts: Vec<String> = args.secrets.clone();
    if let Some(path) = &args.secret_file {
        let file = std::fs::read_to_string(path)
            .with_context(|| format!("reading --secret-file {}", path.display()))?;
        texts.extend(
            file.lines()
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .map(str::to_string),
        );
    }
    texts
        .into_iter()
        .map(|t| Secret::new(t.into_bytes()).map_err(anyhow::Error::msg))
        .collect()
}

fn redis_client(args: &Args) -> anyhow::Result<redis::Client> {
    let info = dq_daemon::redis_url::connection_info(
        &args.redis,
        args.redis_user.as_deref(),
        args.redis_password.as_deref(),
    )
    .context("--redis is not a valid redis:// or rediss:// URL")?;
    if args.redis_ca.is_none() && args.redis_cert.is_none() {
        return Ok(redis::Client::open(info)?);
    }
    let read = |p: &PathBuf| std::fs::read(p).with_context(|| format!("reading {}", p.display()));
    let client_tls = match (&args.redis_cert, &args.redis_key) {
        (Some(cert), Some(key)) => Some(redis::ClientTlsConfig {
            client_cert: read(cert)?,
            client_key: read(key)?,
        }),
        _ => None,
    };
    let root_cert = args.redis_ca.as_ref().map(read).transpose()?;
    Ok(redis::Client::build_with_tls(
        info,
        redis::TlsCertificates {
            client_tls,
            root_cert,
        },
    )?)
}

/// An address the operator wrote into a fixed URL or the allow-list that
/// the egress check refuses would make a dead letter of every call to it:
/// say so now, with what to do, rather than one message at a time. (A
/// name is looked up at each connection, not here: DNS may be down at
/// start, and its answer may change.)
fn check_addresses_given(
    args: &Args,
    routes: &HashMap<String, Route>,
    egress: &Egress,
) -> anyhow::Result<()> {
    let mut given: Vec<(String, Url)> = Vec::new();
    for (name, route) in routes {
        if let Route::Fixed(url) = route {
            given.push((format!("--queue {name}={}", redact::url(url)), url.clone()));
        }
    }
    for prefix in &args.allow {
        if let Ok(url) = Url::parse(prefix) {
            given.push((format!("--allow {prefix}"), url));
        }
    }
    for pattern in &args.allow_host {
        if let Ok(url) = Url::parse(&format!("http://{}/", pattern.trim())) {
            given.push((format!("--allow-host {pattern}"), url));
        }
    }
    for (flag, url) in given {
        if let Err(refused) = egress.check_url(&url) {
            let ip = refused.addr;
            bail!(
                "{flag}: {refused}; the relay refuses to connect to it. If it should, \
                 open it: --allow-net {ip}"
            );
        }
    }
    Ok(())
}

/// SIGTERM or SIGINT: stop taking messages and finish the calls in
/// flight. A second one: exit now (what was in flight is delivered again
/// when its lease runs out).
fn stop_on_signals(shutdown: CancellationToken) -> anyhow::Result<()> {
    let mut signals = Signals::new()?;
    tokio::spawn(async move {
        let name = signals.recv().await;
        tracing::info!(
            signal = name,
            "stopping: no new messages; finishing the calls in flight"
        );
        shutdown.cancel();
        let name = signals.recv().await;
        tracing::warn!(
            signal = name,
            "second signal: exiting now; unfinished calls are \
            delivered again when their leases run out"
        );
        std::process::exit(130);
    });
    Ok(())
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let args = Args::parse();
    dq_daemon::logs::init(
        "DQ_RELAY_LOG",
        &args.log_level,
        args.log_format,
        args.log_color,
    );
    dq_daemon::logs::exit_code("dq-relay", run(args).await)
}

async fn run(args: Args) -> anyhow::Result<()> {
    // One TLS provider for both reqwest and redis (each was built without
    // one): ring. A second call would fail only if one was installed.
    let _ = rustls::crypto::ring::default_provider().install_default();

    let mut routes = HashMap::new();
    for spec in &args.queues {
        let (name, route) = parse_queue(spec)?;
        if routes.insert(name.clone(), route).is_some() {
            bail!("--queue {name} is given more than once");
        }
    }
    let mut allow = AllowList::default();
    for prefix in &args.allow {
        allow.add_prefix(prefix).map_err(anyhow::Error::msg)?;
    }
    for pattern in &args.allow_host {
        allow.add_host(pattern).map_err(anyhow::Error::msg)?;
    }
    if let Some((name, _)) = routes.iter().find(|(_, r)| matches!(r, Route::Envelope)) {
        if allow.is_empty() {
            bail!(
                "queue {name} takes its URLs from its messages, so the relay needs an \
                 allow-list: give --allow URL_PREFIX or --allow-host PATTERN (--allow-host '*' \
                 allows every host)"
            );
        }
    }
    if args.allow_host.iter().any(|h| h.trim() == "*") {
        tracing::warn!(
            "--allow-host '*': messages may make the relay call any host on the internet \
             (internal addresses stay refused unless --allow-net opens them)"
        );
    }
    let egress = Arc::new(Egress::new(args.allow_net.clone()));
    check_addresses_given(&args, &routes, &egress)?;
    for everything in args.allow_net.iter().filter(|c| c.is_everything()) {
        tracing::warn!(
            "--allow-net {everything}: messages may make the relay connect to any address \
             of its family, internal ones included"
        );
    }
    let secrets = read_secrets(&args)?;
    if secrets.is_empty() {
        tracing::warn!("no --secret: requests are not signed (no X-DQ-Signature header)");
    }
    if args.concurrency == 0 || args.per_host == 0 {
        bail!("--concurrency and --per-host must be at least 1");
    }
    if args.timeout.is_zero() || args.connect_timeout.is_zero() {
        bail!("--timeout and --connect-timeout must be positive");
    }

    let http = reqwest::Client::builder()
        // A redirect could lead anywhere, around the allow-list.
        .redirect(reqwest::redirect::Policy::none())
        // Every name is looked up once and checked, and the connection made
        // to a checked address (resolver.rs).
        .dns_resolver(Arc::new(CheckedResolver::new(Arc::clone(&egress))))
        // Through an HTTP_PROXY the proxy would look the name up and
        // connect, to an address the relay never saw.
        .no_proxy()
        .connect_timeout(args.connect_timeout)
        .pool_max_idle_per_host(args.per_host)
        .user_agent(concat!("dq-relay/", env!("CARGO_PKG_VERSION")))
        .build()
        .context("building the HTTP client")?;

    let metrics = metrics::Metrics::new();
    if let Some(addr) = args.metrics {
        let listener = metrics::bind(addr)
            .await
            .with_context(|| format!("--metrics {addr}"))?;
        let bound = listener.local_addr()?;
        tracing::info!(addr = %bound, "metrics at http://{bound}/metrics");
        tokio::spawn(metrics::serve(listener, metrics.clone()));
    }

    let client = redis_client(&args)?;
    let server = client.get_connection_info().addr().to_string();
    let config = ConsumerConfig {
        concurrency: args.concurrency,
        batch: args.batch.unwrap_or(args.concurrency.min(64)),
        block: args.block,
        lease: args.lease,
        touch_every: None,
        response_timeout: Duration::from_secs(5),
    };
    let queues: Vec<String> = routes.keys().cloned().collect();
    let shutdown = CancellationToken::new();
    // Which queues keep results, read now and every few seconds.
    let retains = Arc::new(Retains::new(&queues));
    let con = dq_client::Server::from(client.clone())
        .connect(Duration::from_secs(5))
        .await
        .with_context(|| format!("connecting to {server}"))?;
    if let Err(e) = retains.read(&con).await {
        tracing::warn!(error = %e, "could not read the queues' RETAIN (DQ.CONFIG); \
            delivered calls are acknowledged without a result until it can be read");
    }
    Arc::clone(&retains).keep_reading(con, shutdown.clone());
    let consumer = Consumer::new(client, queues.clone(), config)?;
    let relay = Arc::new(Relay {
        http,
        routes,
        allow,
        egress,
        secrets,
        timeout: args.timeout,
        max_timeout: args.max_timeout,
        max_retry_after: args.max_retry_after,
        per_host: PerHost::new(args.per_host),
        metrics,
        retains,
    });

    stop_on_signals(shutdown.clone())?;
    let allow_net: Vec<String> = args.allow_net.iter().map(Cidr::to_string).collect();
    tracing::info!(server = %server, queues = ?queues, concurrency = args.concurrency,
        per_host = args.per_host, allow_net = ?allow_net, "dq-relay started");
    consumer
        .run(relay, shutdown)
        .await
        .with_context(|| format!("consuming from {server}"))?;
    tracing::info!("dq-relay stopped: every call in flight was finished and recorded");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queue_specs() {
        assert!(matches!(parse_queue("hooks").unwrap(), (n, Route::Envelope) if n == "hooks"));
        let (name, route) = parse_queue("a=b=https://h.example.com/x?y=1").unwrap();
        assert_eq!(name, "a=b");
        assert!(matches!(route, Route::Fixed(u) if u.as_str() == "https://h.example.com/x?y=1"));
        assert!(matches!(parse_queue("x=1").unwrap(), (n, Route::Envelope) if n == "x=1"));
        assert!(parse_queue("").is_err());
        assert!(parse_queue("q=http://").is_err());
    }

    #[test]
    fn log_colour_is_automatic_unless_given() {
        let a = Args::try_parse_from(["dq-relay", "-q", "h"]).unwrap();
        assert_eq!(a.log_color, LogColor::Auto);
        let a = Args::try_parse_from(["dq-relay", "-q", "h", "--log-color", "never"]).unwrap();
        assert_eq!(a.log_color, LogColor::Never);
        assert!(Args::try_parse_from(["dq-relay", "-q", "h", "--log-color", "yes"]).is_err());
    }

    #[test]
    fn allow_net_is_repeatable_and_takes_lists() {
        let args = Args::try_parse_from([
            "dq-relay",
            "--queue",
            "hooks",
            "--allow-net",
            "10.1.2.0/24,fd00:1::/64",
            "--allow-net",
            "127.0.0.1",
        ])
        .unwrap();
        let nets: Vec<String> = args.allow_net.iter().map(Cidr::to_string).collect();
        assert_eq!(nets, ["10.1.2.0/24", "fd00:1::/64", "127.0.0.1/32"]);
        let bad = Args::try_parse_from(["dq-relay", "-q", "h", "--allow-net", "10.1.2.3/24"]);
        let Err(e) = bad else {
            panic!("10.1.2.3/24 was taken");
        };
        assert!(e.to_string().contains("did you mean 10.1.2.0/24?"), "{e}");
    }
}
