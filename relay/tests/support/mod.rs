//! The dq-relay binary for the relay's tests. Servers, the HTTP receiver
//! and the helpers come from the workspace's test kit (testkit/).

use std::ops::{Deref, DerefMut};

use dq_testkit::{command_without_env, Process};

/// The dq-relay binary as a child process; its log lines are collected.
/// It inherits none of the test run's `DQ_RELAY_*` settings.
pub struct RelayProcess(Process);

impl RelayProcess {
    pub fn start(args: &[String]) -> RelayProcess {
        RelayProcess::start_with_env(args, &[])
    }

    pub fn start_with_env(args: &[String], env: &[(&str, &str)]) -> RelayProcess {
        RelayProcess(Process::start(
            command_without_env(env!("CARGO_BIN_EXE_dq-relay"), "DQ_RELAY_")
                .args(args)
                .envs(env.iter().copied()),
        ))
    }
}

impl Deref for RelayProcess {
    type Target = Process;
    fn deref(&self) -> &Process {
        &self.0
    }
}

impl DerefMut for RelayProcess {
    fn deref_mut(&mut self) -> &mut Process {
        &mut self.0
    }
}
