//! dq-dashboard: a web dashboard and Prometheus metrics for dq queues.
//!
//! It reads a Redis or Valkey server with the dq module (several, or every
//! master of a cluster) only through dq's commands, shows each queue's
//! messages per state, throughput and lag, each message's payload and
//! failure, and lets an operator redrive, cancel and purge — each action a
//! confirmed POST. See dashboard/README.md.

mod app;
mod backend;
mod charts;
mod discovery;
mod events;
mod groups;
mod http;
mod list;
mod metrics;
mod newest;
mod ops;
mod pages;
mod render;
mod security;
mod sharded;
mod views;
mod web;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use anyhow::{bail, Context};
use clap::Parser;
use dq_daemon::{LogColor, LogFormat, Signals};

use crate::backend::{Backend, History};
use crate::security::{Auth, Csrf};

/// A web dashboard and Prometheus metrics for dq queues.
#[derive(Parser)]
#[command(version, about, long_about = None)]
struct Args {
    /// A server: redis://[user[:password]@]host[:port][/db], or rediss://
    /// for TLS. Repeatable; for a cluster one node is enough.
    #[arg(
        long = "redis",
        env = "DQ_DASHBOARD_REDIS",
        // It may hold a password: --help must not print it.
        hide_env_values = true,
        default_value = "redis://127.0.0.1:6379/"
    )]
    redis: Vec<String>,

    /// ACL user name (instead of one in the URL).
    #[arg(long, env = "DQ_DASHBOARD_REDIS_USER")]
    redis_user: Option<String>,

    /// Password (instead of one in the URL); prefer the environment
    /// variable, which `ps` does not show.
    #[arg(long, env = "DQ_DASHBOARD_REDIS_PASSWORD", hide_env_values = true)]
    redis_password: Option<String>,

    /// The servers are a Redis Cluster: show every master's queues.
    /// Without it a seed answering `cluster_enabled:1` makes it so.
    #[arg(long)]
    cluster: bool,

    /// Address to serve on (port 0: any free port, named in the log).
    #[arg(long, env = "DQ_DASHBOARD_LISTEN", default_value = "127.0.0.1:7070")]
    listen: SocketAddr,

    /// Show no action and refuse every POST (403).
    #[arg(long, env = "DQ_DASHBOARD_READ_ONLY")]
    read_only: bool,

    /// Require `Authorization: Bearer TOKEN` (for scrapers and proxies).
    #[arg(long, env = "DQ_DASHBOARD_TOKEN", hide_env_values = true)]
    token: Option<String>,

    /// Require HTTP basic auth (for people in a browser), USER:PASSWORD.
    #[arg(
        long,
        env = "DQ_DASHBOARD_BASIC_AUTH",
        hide_env_values = true,
        value_name = "USER:PASSWORD"
    )]
    basic_auth: Option<String>,

    /// How often the charts' sampler reads every server (one DQ.QUEUES
    /// WITHSTATS each).
    #[arg(long, env = "DQ_DASHBOARD_SAMPLE_INTERVAL", default_value = "2s", value_parser = humantime::parse_duration)]
    sample_interval: Duration,

    /// Queues that get series of their own in /metrics: a glob as
    /// DQ.QUEUES MATCH takes (orders-*, tenant-[0-9]*). Repeatable: a queue
    /// matching any. Not given: every queue, up to --metrics-max-queues.
    /// Per-server totals are always there.
    #[arg(
        long = "metrics-queues",
        env = "DQ_DASHBOARD_METRICS_QUEUES",
        value_name = "GLOB"
    )]
    metrics_queues: Vec<String>,

    /// At most this many queues get series of their own in a scrape (the
    /// first by name); dq_metrics_queues_omitted counts the rest. 0: totals
    /// only.
    #[arg(
        long,
        env = "DQ_DASHBOARD_METRICS_MAX_QUEUES",
        default_value_t = 250,
        value_name = "N"
    )]
    metrics_max_queues: usize,

    /// How far back the charts go.
    #[arg(long, env = "DQ_DASHBOARD_HISTORY", default_value = "10m", value_parser = humantime::parse_duration)]
    history: Duration,

    /// Log format, to standard error.
    #[arg(long, value_enum, default_value = "json")]
    log_format: LogFormat,

    /// ANSI colours in text logs: auto (only when standard error is a
    /// terminal and NO_COLOR is unset or empty), always or never.
    #[arg(
        long,
        env = "DQ_DASHBOARD_LOG_COLOR",
        value_enum,
        default_value = "auto"
    )]
    log_color: LogColor,

    /// Log level or filter (error, warn, info, debug); DQ_DASHBOARD_LOG
    /// overrides it with a full tracing filter.
    #[arg(long, default_value = "info")]
    log_level: String,
}

fn connection_infos(args: &Args) -> anyhow::Result<Vec<redis::ConnectionInfo>> {
    let mut infos = Vec::new();
    for (n, url) in args.redis.iter().enumerate() {
        // The URL itself is never quoted in an error: it may hold a password.
        let info = dq_daemon::redis_url::connection_info(
            url,
            args.redis_user.as_deref(),
            args.redis_password.as_deref(),
        )
        .with_context(|| format!("--redis #{}: not a valid redis:// or rediss:// URL", n + 1))?;
        infos.push(info);
    }
    Ok(infos)
}

/// `10m` as the pages name a window.
fn window_name(d: Duration) -> String {
    humantime::format_duration(Duration::from_secs(d.as_secs().max(1))).to_string()
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let args = Args::parse();
    dq_daemon::logs::init(
        "DQ_DASHBOARD_LOG",
        &args.log_level,
        args.log_format,
        args.log_color,
    );
    dq_daemon::logs::exit_code("dq-dashboard", run(args).await)
}

async fn run(args: Args) -> anyhow::Result<()> {
    // redis' rustls (rediss://) was built without a provider: ring.
    let _ = rustls::crypto::ring::default_provider().install_default();

    if args.sample_interval < Duration::from_millis(100) {
        bail!("--sample-interval must be at least 100ms");
    }
    if args.history < args.sample_interval * 2 {
        bail!("--history must hold at least two samples (2 × --sample-interval)");
    }
    let auth =
        Auth::new(args.token.clone(), args.basic_auth.as_deref()).map_err(anyhow::Error::msg)?;
    let csrf = Csrf::new().map_err(anyhow::Error::msg)?;
    let seeds = connection_infos(&args)?;
    let names: Vec<String> = seeds.iter().map(|i| backend::addr_name(i.addr())).collect();
    let backend = Arc::new(Backend::connect(seeds, args.cluster).await?);
    let servers: Vec<String> = backend.servers().iter().map(|s| s.addr.clone()).collect();
    tracing::info!(seeds = ?names, servers = ?servers, cluster = backend.is_cluster(), "connected");

    let history = Arc::new(Mutex::new(History::new(args.sample_interval, args.history)));
    let latest = Arc::new(RwLock::new(None));
    tokio::spawn(backend::sample(
        backend.clone(),
        history.clone(),
        latest.clone(),
        args.sample_interval,
    ));

    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("--listen {}", args.listen))?;
    let bound = listener.local_addr()?;
    if !bound.ip().is_loopback() && !auth.required() {
        tracing::warn!(addr = %bound, "listening beyond loopback without --token or --basic-auth: \
            anyone who can reach this address can read payloads{}",
            if args.read_only { "" } else { " and redrive, cancel, purge, pause and unschedule" });
    }
    let app = Arc::new(app::App {
        backend,
        history,
        latest,
        auth,
        csrf,
        read_only: args.read_only,
        window: window_name(args.history),
        metrics: metrics::Selection {
            patterns: args
                .metrics_queues
                .iter()
                .map(|p| p.as_bytes().to_vec())
                .collect(),
            max_queues: args.metrics_max_queues,
        },
        layouts: sharded::Layouts::default(),
    });
    tracing::info!(addr = %bound, read_only = args.read_only, auth = app.auth.required(),
        "dashboard at http://{bound}/");

    let mut signals = Signals::new().context("catching SIGTERM and SIGINT")?;
    let handle = move |req| web::handle(app.clone(), req);
    let options = dq_daemon::http::Options::new("");
    let name = dq_daemon::http::serve(listener, options, handle, signals.recv()).await;
    tracing::info!(signal = name, "dq-dashboard stopped");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_parse_and_bad_ones_are_refused() {
        let a = Args::try_parse_from([
            "dq-dashboard",
            "--redis",
            "redis://a:1",
            "--redis",
            "redis://b:2",
        ])
        .unwrap();
        assert_eq!(a.redis.len(), 2);
        assert_eq!(a.listen.to_string(), "127.0.0.1:7070");
        assert_eq!(a.sample_interval, Duration::from_secs(2));
        assert!(Args::try_parse_from(["dq-dashboard", "--listen", "nope"]).is_err());
        assert!(Args::try_parse_from(["dq-dashboard", "--sample-interval", "fast"]).is_err());
        let a =
            Args::try_parse_from(["dq-dashboard", "--redis", "redis://u:hunter2@h:1/"]).unwrap();
        let infos = connection_infos(&a).unwrap();
        assert_eq!(backend::addr_name(infos[0].addr()), "h:1");
        let bad = Args::try_parse_from(["dq-dashboard", "--redis", "http://u:hunter2@h/"]).unwrap();
        let err = format!("{:#}", connection_infos(&bad).unwrap_err());
        assert!(!err.contains("hunter2"), "{err}");
        assert_eq!(window_name(Duration::from_secs(600)), "10m");
        assert_eq!(a.metrics_max_queues, 250);
        assert!(a.metrics_queues.is_empty());
        let m = Args::try_parse_from([
            "dq-dashboard",
            "--metrics-queues",
            "orders-*",
            "--metrics-queues",
            "emails",
            "--metrics-max-queues",
            "0",
        ])
        .unwrap();
        assert_eq!(m.metrics_queues, ["orders-*", "emails"]);
        assert_eq!(m.metrics_max_queues, 0);
        assert!(Args::try_parse_from(["dq-dashboard", "--metrics-max-queues", "-1"]).is_err());
    }

    #[test]
    fn log_colour_is_automatic_unless_given() {
        let a = Args::try_parse_from(["dq-dashboard"]).unwrap();
        assert_eq!(a.log_color, LogColor::Auto);
        for (given, want) in [
            ("auto", LogColor::Auto),
            ("always", LogColor::Always),
            ("never", LogColor::Never),
        ] {
            let a = Args::try_parse_from(["dq-dashboard", "--log-color", given]).unwrap();
            assert_eq!(a.log_color, want);
        }
        assert!(Args::try_parse_from(["dq-dashboard", "--log-color", "yes"]).is_err());
    }
}
