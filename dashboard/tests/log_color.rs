//! `--log-format text` into a file or a pipe: no ANSI colour codes unless
//! asked for (`--log-color always`, DQ_DASHBOARD_LOG_COLOR). The real
//! binary against a real server, its stdout and stderr sent to a file as
//! a service manager or `2>dashboard.log` would. (Which streams count as
//! a terminal, and NO_COLOR, are dq-daemon's unit tests: a test has no
//! terminal to give.)

use std::fs::File;
use std::path::PathBuf;
use std::process::{Child, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};

use dq_testkit::{command_without_env, wait_until, Process, Server, LONG};

const ESC: &str = "\x1b[";
const STARTED: &str = "dashboard at http://";

/// A dashboard whose stdout and stderr go to one file; killed, and the
/// file removed, when dropped (also when a test fails).
struct ToFile {
    child: Child,
    path: PathBuf,
}

impl Drop for ToFile {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.path);
    }
}

impl ToFile {
    fn text(&self) -> String {
        // Lossy: a test of bytes, not of UTF-8; an escape is ASCII.
        String::from_utf8_lossy(&std::fs::read(&self.path).unwrap_or_default()).into_owned()
    }
}

/// The file's log once the dashboard has said where it serves. `env` is
/// all the environment it gets of the dashboard's own and NO_COLOR.
fn log_in_a_file(server: &Server, args: &[&str], env: &[(&str, &str)]) -> String {
    static N: AtomicUsize = AtomicUsize::new(0);
    let path = std::env::temp_dir().join(format!(
        "dq-dashboard-log-color-{}-{}.log",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    let file = File::create(&path).expect("create the log file");
    let stdout = file.try_clone().expect("a second handle of the log file");
    let mut command = command_without_env(env!("CARGO_BIN_EXE_dq-dashboard"), "DQ_DASHBOARD_");
    command
        .env_remove("NO_COLOR")
        .envs(env.iter().copied())
        .args(["--redis", &server.url(), "--listen", "127.0.0.1:0"])
        .args(["--log-format", "text"])
        .args(args)
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(file);
    let mut started = ToFile {
        child: command.spawn().expect("start dq-dashboard"),
        path,
    };
    let mut exited = None;
    let up = wait_until(LONG, || {
        exited = started.child.try_wait().ok().flatten();
        exited.is_some() || started.text().contains(STARTED)
    });
    let text = started.text();
    assert!(
        up && exited.is_none(),
        "dq-dashboard {args:?} {env:?} did not start ({exited:?}); its log:\n{text}"
    );
    text
}

#[test]
fn text_logs_into_a_file_or_a_pipe_have_no_colour() {
    let server = Server::start();
    for env in [
        &[][..],
        &[("NO_COLOR", "")],
        &[("DQ_DASHBOARD_LOG_COLOR", "auto")],
    ] {
        let log = log_in_a_file(&server, &[], env);
        assert!(!log.contains(ESC), "{env:?}: colour in a file:\n{log:?}");
        assert!(!log.trim_start().starts_with('{'), "not text:\n{log}");
    }
    let log = log_in_a_file(&server, &["--log-color", "never"], &[]);
    assert!(!log.contains(ESC), "--log-color never:\n{log:?}");

    // A pipe, as the test kit reads a daemon's stderr.
    let process = Process::start(
        command_without_env(env!("CARGO_BIN_EXE_dq-dashboard"), "DQ_DASHBOARD_")
            .env_remove("NO_COLOR")
            .args(["--redis", &server.url(), "--listen", "127.0.0.1:0"])
            .args(["--log-format", "text"]),
    );
    assert!(
        wait_until(LONG, || process.log().contains(STARTED)),
        "did not start; its log:\n{}",
        process.log()
    );
    assert!(!process.log().contains(ESC), "{:?}", process.log());
}

/// The other side of the same check: colours, when asked for, do reach
/// the file (so a file without them is the decision's doing), whatever
/// NO_COLOR says; and the flag beats the variable.
#[test]
fn colour_when_asked_even_into_a_file() {
    let server = Server::start();
    let always = ["--log-color", "always"];
    for (args, env) in [
        (&always[..], &[][..]),
        (&[], &[("DQ_DASHBOARD_LOG_COLOR", "always")]),
        (&always, &[("NO_COLOR", "1")]),
    ] {
        let log = log_in_a_file(&server, args, env);
        assert!(log.contains(ESC), "{args:?} {env:?}: no colour:\n{log:?}");
    }
    let log = log_in_a_file(
        &server,
        &["--log-color", "never"],
        &[("DQ_DASHBOARD_LOG_COLOR", "always")],
    );
    assert!(!log.contains(ESC), "the flag, then the variable:\n{log:?}");
}
