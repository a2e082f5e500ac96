//! A real redis-server with the dq module for the client's integration
//! tests: the one scripts/with-servers started (DQ_REDIS_URL) when set,
//! else one started here on a free loopback port and stopped (by PID) when
//! dropped, also when a test fails.
#![allow(dead_code)]

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

pub struct Server {
    child: Option<Child>,
    pub url: String,
    dir: Option<PathBuf>,
}

fn module_path() -> PathBuf {
    if let Ok(path) = std::env::var("DQ_MODULE") {
        return PathBuf::from(path);
    }
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let target = std::env::var("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| root.join("target"));
    let path = target.join("debug").join("libdq.so");
    assert!(
        path.exists(),
        "{} is missing: build the module first (cargo build --lib), or set DQ_MODULE",
        path.display()
    );
    path
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("find a free port")
        .port()
}

impl Server {
    pub fn start() -> Server {
        if let Ok(url) = std::env::var("DQ_REDIS_URL") {
            return Server {
                child: None,
                url,
                dir: None,
            };
        }
        static N: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "dq-client-test-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create a temporary directory");
        let server = std::env::var("DQ_SERVER").unwrap_or_else(|_| "redis-server".into());
        for _ in 0..20 {
            let port = free_port();
            let mut child = Command::new(&server)
                .args([
                    "--port",
                    &port.to_string(),
                    "--bind",
                    "127.0.0.1",
                    "--save",
                    "",
                ])
                .args(["--appendonly", "no", "--dir"])
                .arg(&dir)
                .arg("--loadmodule")
                .arg(module_path())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("start redis-server (make deps installs it)");
            let url = format!("redis://127.0.0.1:{port}/");
            let deadline = Instant::now() + Duration::from_secs(20);
            loop {
                let up = redis::Client::open(url.as_str())
                    .and_then(|c| c.get_connection())
                    .and_then(|mut c| redis::cmd("PING").query::<String>(&mut c))
                    .is_ok();
                if up {
                    return Server {
                        child: Some(child),
                        url,
                        dir: Some(dir),
                    };
                }
                if child.try_wait().ok().flatten().is_some() || Instant::now() > deadline {
                    let _ = child.kill();
                    let _ = child.wait();
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        panic!("redis-server with the dq module did not start");
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(child) = &mut self.child {
            let _ = child.kill();
            let _ = child.wait();
        }
        if let Some(dir) = &self.dir {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}
