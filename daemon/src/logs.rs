//! Logs to standard error, as JSON (one object a line, for collectors) or
//! as text (for people), in colour only where a person reads them.

use std::ffi::OsStr;
use std::fmt::Display;
use std::io::IsTerminal;
use std::process::ExitCode;

use tracing_subscriber::EnvFilter;

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    Json,
    Text,
}

/// Whether text logs carry ANSI colour codes (`--log-color`). The
/// variants' docs are what `--help` lists.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LogColor {
    /// Colour when standard error is a terminal and NO_COLOR is unset or
    /// empty (no-color.org)
    #[default]
    Auto,
    // The flag is a more specific wish than the environment's NO_COLOR,
    // as no-color.org has it.
    /// Colour wherever the logs go, whatever NO_COLOR says
    Always,
    /// No colour
    Never,
}

impl LogColor {
    /// The decision, from what `init` looks up: whether standard error
    /// is a terminal, and `NO_COLOR`'s value. A file or a pipe (systemd's
    /// journal, docker's log driver, `2>relay.log`) gets no colour unless
    /// asked for: escape codes there are noise to every reader and grep.
    pub fn enabled(self, terminal: bool, no_color: Option<&OsStr>) -> bool {
        match self {
            LogColor::Always => true,
            LogColor::Never => false,
            LogColor::Auto => terminal && no_color.is_none_or(OsStr::is_empty),
        }
    }
}

/// Installs the process' subscriber: the filter in the environment
/// variable `filter_env` when it parses, else `level` (a level or a
/// filter, as `--log-level` takes); colour as `color` decides for
/// standard error, where the logs go.
pub fn init(filter_env: &str, level: &str, format: LogFormat, color: LogColor) {
    let filter = EnvFilter::try_from_env(filter_env).unwrap_or_else(|_| EnvFilter::new(level));
    let no_color = std::env::var_os("NO_COLOR");
    let ansi = color.enabled(std::io::stderr().is_terminal(), no_color.as_deref());
    let logs = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(ansi)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colour_only_on_a_terminal_unless_asked() {
        let set = |v: &'static str| Some(OsStr::new(v));
        // auto: a terminal, and NO_COLOR unset or empty.
        assert!(LogColor::Auto.enabled(true, None));
        assert!(LogColor::Auto.enabled(true, set("")));
        assert!(!LogColor::Auto.enabled(true, set("1")));
        assert!(
            !LogColor::Auto.enabled(true, set("0")),
            "any non-empty value"
        );
        assert!(!LogColor::Auto.enabled(false, None), "a file or a pipe");
        assert!(!LogColor::Auto.enabled(false, set("")));
        // The flags win over both.
        for terminal in [true, false] {
            for no_color in [None, set(""), set("1")] {
                assert!(LogColor::Always.enabled(terminal, no_color));
                assert!(!LogColor::Never.enabled(terminal, no_color));
            }
        }
        assert_eq!(LogColor::default(), LogColor::Auto);
    }
}
