//! Logs to standard error, as JSON (one object a line, for collectors) or
//! as text (for people).

use std::fmt::Display;
use std::process::ExitCode;

use tracing_subscriber::EnvFilter;

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    Json,
    Text,
}

/// Installs the process' subscriber: the filter in the environment
/// variable `filter_env` when it parses, else `level` (a level or a
/// filter, as `--log-level` takes).
pub fn init(filter_env: &str, level: &str, format: LogFormat) {
    let filter = EnvFilter::try_from_env(filter_env).unwrap_or_else(|_| EnvFilter::new(level));
    let logs = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        // Flat objects: a line's fields sit beside "message", where log
        // queries (and the tests) look for them, with no span list.
        LogFormat::Json => logs
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .init(),
        LogFormat::Text => logs.init(),
    }
}

/// A daemon's exit: a failure is its last log line, "`name` stopped" with
/// the error and its causes (`{:#}`, as anyhow shows a chain), so that the
/// reason is where the rest of the log went, in the same format.
pub fn exit_code<E: Display>(name: &str, result: Result<(), E>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = format!("{e:#}"), "{name} stopped");
            ExitCode::FAILURE
        }
    }
}
