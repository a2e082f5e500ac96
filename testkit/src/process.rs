//! A daemon of the workspace (dq-relay, dq-dashboard) as a child process.

use std::ffi::OsStr;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::wait_until;

/// `program` as a command that inherits none of the test run's variables
/// whose names start with `prefix` (the program's own settings, such as
/// `DQ_RELAY_SECRET`): it gets only what the test gives it.
pub fn command_without_env(program: impl AsRef<OsStr>, prefix: &str) -> Command {
    let mut command = Command::new(program);
    for (name, _) in std::env::vars_os() {
        if name.to_string_lossy().starts_with(prefix) {
            command.env_remove(name);
        }
    }
    command
}

/// A child process whose stderr lines (its log) are collected; killed
/// when dropped, also when a test fails.
pub struct Process {
    child: Child,
    lines: Arc<Mutex<Vec<String>>>,
    reader: Option<std::thread::JoinHandle<()>>,
    status: Option<ExitStatus>,
}

impl Process {
    /// Starts `command` with stdin and stdout closed and stderr collected.
    pub fn start(command: &mut Command) -> Process {
        let program = command.get_program().to_string_lossy().into_owned();
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("start {program}: {e}"));
        let stderr = child.stderr.take().expect("the child's stderr");
        let lines = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&lines);
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                sink.lock().unwrap_or_else(|p| p.into_inner()).push(line);
            }
        });
        Process {
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
        assert!(self.status.is_none(), "the process has exited");
        let rc = unsafe { libc::kill(self.pid(), signal) };
        assert_eq!(rc, 0, "kill({}, {signal})", self.pid());
    }

    /// Waits for the process to exit; `None` if it is still running after
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

    /// The log lines so far.
    pub fn lines(&self) -> Vec<String> {
        self.lines.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The log so far, one string.
    pub fn log(&self) -> String {
        self.lines().join("\n")
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

impl Drop for Process {
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
