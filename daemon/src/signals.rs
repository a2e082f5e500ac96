//! SIGTERM (systemd, docker stop, kill) and SIGINT (Ctrl-C).

use tokio::signal::unix::{signal, Signal, SignalKind};

/// Both signals, caught from `new` on: neither ends the process by
/// itself any more, so the caller decides what each one does.
pub struct Signals {
    term: Signal,
    int: Signal,
}

impl Signals {
    /// Needs a tokio runtime with signals enabled (`#[tokio::main]`).
    pub fn new() -> std::io::Result<Signals> {
        Ok(Signals {
            term: signal(SignalKind::terminate())?,
            int: signal(SignalKind::interrupt())?,
        })
    }

    /// The next one to arrive, by name: `"SIGTERM"` or `"SIGINT"`.
    pub async fn recv(&mut self) -> &'static str {
        tokio::select! {
            Some(()) = self.term.recv() => "SIGTERM",
            Some(()) = self.int.recv() => "SIGINT",
            // Only a runtime being torn down closes both streams; nothing
            // is left to stop then.
            else => std::future::pending().await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn names_the_signal_that_came() {
        let mut signals = Signals::new().expect("signal handlers");
        // SAFETY: kill(2) of this process with a signal that `signals`
        // now catches, so the test process is not ended by it.
        let rc = unsafe { libc::kill(libc::getpid(), libc::SIGTERM) };
        assert_eq!(rc, 0);
        let got = tokio::time::timeout(Duration::from_secs(60), signals.recv()).await;
        assert_eq!(got, Ok("SIGTERM"));
    }
}
