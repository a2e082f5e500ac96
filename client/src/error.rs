/// What can stop a [`Consumer`](crate::Consumer) or fail one command.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("redis: {0}")]
    Redis(#[from] redis::RedisError),
    /// The server answered something a dq command never answers (another
    /// module under the same name, or a version this client does not know).
    #[error("unexpected reply to {command}: {detail}")]
    Reply {
        command: &'static str,
        detail: String,
    },
    #[error("invalid consumer configuration: {0}")]
    Config(String),
}
