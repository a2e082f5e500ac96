//! What dq's tests and benchmarks run against, in one place: the module's
//! integration tests (tests/), the client's, the relay's and the
//! dashboard's tests and benchmarks, and the module's benchmark
//! (benches/dq.rs and benches/dq/) all use this kit as a dev-dependency.
//!
//! - [`Server`]: a redis-server (or `DQ_SERVER`) child process with the
//!   built module loaded, on a free loopback port, in a fresh temporary
//!   directory; [`ServerBuilder`] for its arguments, module arguments,
//!   environment, password, RDB file, binary and module build.
//! - [`Cluster`]: masters joined with the cli's `--cluster create`.
//! - RESP helpers: [`cmd`], [`cmd_err`], [`run`], [`text`], [`int`],
//!   [`list`], [`record`], [`field`], [`entries`], [`dq_get`],
//!   [`dq_get_field`], [`info_field`], [`used_memory`], [`digest`],
//!   [`field_names`], [`migrate`], [`add_due_at`]; [`STATS_COUNTERS`].
//! - Time: [`wait_until`], [`in_time`], [`LONG`], [`now_ms`].
//! - [`Process`]: a daemon (the relay, the dashboard) as a child process
//!   whose log lines are collected.
//! - With the `receiver` feature, `Receiver`: an HTTP or HTTPS server on
//!   loopback that answers as a test scripts it.
//!
//! Environment: `DQ_MODULE` (the module to load; default the workspace's
//! `target/debug/libdq.so`, `target/release/libdq.so` for benchmarks, under
//! `CARGO_TARGET_DIR` when that is set), `DQ_SERVER` (default
//! redis-server), `DQ_CLI` (default redis-cli). An empty value counts as
//! unset. Everything the kit starts binds 127.0.0.1 and is killed when
//! dropped, also when a test fails; directories are removed unless the
//! test panicked (their logs are then kept for a look).

mod cluster;
mod process;
#[cfg(feature = "receiver")]
mod receiver;
mod resp;
mod server;

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

pub use cluster::{cluster_run, Cluster};
pub use process::{command_without_env, Process};
#[cfg(feature = "receiver")]
pub use receiver::{Received, Receiver, Reply};
pub use redis::Value;
pub use resp::{
    add_due_at, blocked_clients, cmd, cmd_err, digest, dq_get, dq_get_field, entries, field,
    field_names, info_field, int, list, migrate, record, run, text, used_memory, wait_blocked,
    STATS_COUNTERS,
};
pub use server::{Server, ServerBuilder};

/// Which build of the module a server loads.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Build {
    /// `target/debug/libdq.so`: what the tests load (`cargo build`).
    #[default]
    Debug,
    /// `target/release/libdq.so`: what the benchmarks load
    /// (`cargo build --release`).
    Release,
}

/// A variable of the environment; an empty one counts as unset.
fn setting(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

/// The workspace's root: the directory above this crate that holds
/// redis.conf.example.
fn workspace_root() -> PathBuf {
    let kit = Path::new(env!("CARGO_MANIFEST_DIR"));
    kit.ancestors()
        .find(|dir| dir.join("redis.conf.example").exists())
        .unwrap_or(kit)
        .to_path_buf()
}

/// The module servers load: `DQ_MODULE`, else `build`'s libdq.so in the
/// workspace's target directory (`CARGO_TARGET_DIR` when set). Panics when
/// that file is missing, saying what builds it.
pub fn module_path(build: Build) -> PathBuf {
    if let Some(path) = setting("DQ_MODULE") {
        return PathBuf::from(path);
    }
    let target =
        setting("CARGO_TARGET_DIR").map_or_else(|| workspace_root().join("target"), PathBuf::from);
    let (dir, how) = match build {
        Build::Debug => ("debug", "run `make test` (or `cargo build` first)"),
        Build::Release => (
            "release",
            "run `make bench` (or `cargo build --release` first)",
        ),
    };
    let path = target.join(dir).join("libdq.so");
    assert!(path.exists(), "{} is missing: {how}", path.display());
    path
}

/// The server binary: `DQ_SERVER`, else redis-server.
pub fn server_binary() -> String {
    setting("DQ_SERVER").unwrap_or_else(|| "redis-server".into())
}

/// The cli that creates clusters: `DQ_CLI`, else redis-cli.
pub fn cli() -> String {
    setting("DQ_CLI").unwrap_or_else(|| "redis-cli".into())
}

/// A loopback port nothing listens on now: for a server to bind (which
/// may lose a race for it: [`Server`] then tries another), or for a
/// connection that is refused.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("find a free port")
        .port()
}

/// How long a test waits for what must happen (a message falling due, a
/// lease running out, a replica catching up) before it fails: enough for a
/// loaded machine, and a passing test never waits it out.
pub const LONG: Duration = Duration::from_secs(60);

/// For checks that need something still pending — a DELAY not yet due, a
/// lease or a TTL not yet over, a BLOCK not yet timed out: runs `attempt`
/// with a window of `ms` milliseconds. `attempt` returns `None` when its
/// checks came after the window had closed, so that they prove nothing;
/// it then runs again, on fresh state, with a window four times longer.
/// However slow the machine is, the checks run in time at last.
pub fn in_time<T>(first_ms: u64, mut attempt: impl FnMut(u64) -> Option<T>) -> T {
    let mut ms = first_ms;
    loop {
        if let Some(done) = attempt(ms) {
            return done;
        }
        assert!(
            ms <= 100_000,
            "the checks came too late even with a window of {ms} ms"
        );
        ms *= 4;
    }
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
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Unix time in milliseconds.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}
