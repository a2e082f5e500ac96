//! Which lease, attempt limit and backoff apply, in three layers: a
//! message's own options, then its queue's DQ.CONFIG, then the module
//! settings (`dq.lease-ms`, `dq.max-attempts`, `dq.backoff`).

use crate::core::backoff::Backoff;
use crate::core::error::{DqError, Result};
use crate::core::flow::Rate;

pub const DEFAULT_LEASE_MS: u64 = 30_000;
pub const DEFAULT_MAX_ATTEMPTS: u32 = 16;

/// The module-wide defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    pub lease_ms: u64,
    pub max_attempts: u32,
    pub backoff: Backoff,
    /// `dq.retain-ms`: how long a done message is kept (0: not kept).
    pub retain_ms: u64,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            lease_ms: DEFAULT_LEASE_MS,
            max_attempts: DEFAULT_MAX_ATTEMPTS,
            backoff: Backoff::DEFAULT,
            retain_ms: 0,
        }
    }
}

/// A queue's overrides, as stored in its config hash.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct QueueConfig {
    pub lease_ms: Option<u64>,
    pub max_attempts: Option<u32>,
    pub backoff: Option<Backoff>,
    /// RATE: at most so many deliveries in any window of its length.
    pub rate: Option<Rate>,
    /// MAXINFLIGHT: at most so many messages in flight at once.
    pub max_inflight: Option<u32>,
    /// RETAIN: how long its done messages are kept (0: not kept).
    pub retain_ms: Option<u64>,
    /// RETAINMAX: at most so many done messages; the earliest finished go.
    pub retain_max: Option<u64>,
    /// EVENTS: how many events the queue keeps (none when unset).
    pub events: Option<u64>,
    /// GROUPLIMIT: at most so many messages of a group out at once (1
    /// when unset: round 1's serial groups).
    pub group_limit: Option<u32>,
    /// GROUPRATE: at most so many deliveries of a group in any window.
    pub group_rate: Option<Rate>,
    /// ORDER FAIR: POP takes from the groups in turn.
    pub fair: bool,
}

/// Field names in the config hash, in DQ.CONFIG replies and (with `dq.`)
/// of the module settings.
pub const LEASE_FIELD: &str = "lease-ms";
pub const MAX_ATTEMPTS_FIELD: &str = "max-attempts";
pub const BACKOFF_FIELD: &str = "backoff";

impl QueueConfig {
    /// No overrides: the module settings apply.
    pub const NONE: QueueConfig = QueueConfig {
        lease_ms: None,
        max_attempts: None,
        backoff: None,
        rate: None,
        max_inflight: None,
        retain_ms: None,
        retain_max: None,
        events: None,
        group_limit: None,
        group_rate: None,
        fair: false,
    };

    /// How many messages of one group may be out at once.
    pub fn group_limit(&self) -> u32 {
        self.group_limit.unwrap_or(1)
    }

    /// The hash fields to write: `None` removes the field.
    pub fn to_fields(&self) -> [(&'static str, Option<String>); 3] {
        [
            (LEASE_FIELD, self.lease_ms.map(|v| v.to_string())),
            (MAX_ATTEMPTS_FIELD, self.max_attempts.map(|v| v.to_string())),
            (BACKOFF_FIELD, self.backoff.as_ref().map(Backoff::to_string)),
        ]
    }

    /// Reads the config back from hash fields.
    pub fn from_fields(mut get: impl FnMut(&str) -> Option<Vec<u8>>) -> Result<QueueConfig> {
        // Zero is no lease and no attempt: refuse it as DQ.CONFIG SET would.
        fn number<T: std::str::FromStr + PartialOrd + From<u8>>(
            raw: Option<Vec<u8>>,
            field: &'static str,
        ) -> Result<Option<T>> {
            raw.map(|v| {
                std::str::from_utf8(&v)
                    .ok()
                    .and_then(|s| s.parse().ok())
                    .filter(|n: &T| *n >= T::from(1))
                    .ok_or(DqError::BadQueueSetting(field))
            })
            .transpose()
        }
        Ok(QueueConfig {
            lease_ms: number(get(LEASE_FIELD), LEASE_FIELD)?,
            max_attempts: number(get(MAX_ATTEMPTS_FIELD), MAX_ATTEMPTS_FIELD)?,
            backoff: get(BACKOFF_FIELD)
                .map(|v| Backoff::parse(&v).map_err(|_| DqError::BadQueueSetting(BACKOFF_FIELD)))
                .transpose()?,
            // The multi-key layout, the one reader of these fields, had no
            // flow control.
            rate: None,
            max_inflight: None,
            retain_ms: None,
            retain_max: None,
            events: None,
            group_limit: None,
            group_rate: None,
            fair: false,
        })
    }

    pub fn resolve(&self, module: &Settings) -> Policy {
        fn pick<T: Clone>(queue: &Option<T>, module: &T) -> (T, Source) {
            match queue {
                Some(v) => (v.clone(), Source::Queue),
                None => (module.clone(), Source::Module),
            }
        }
        Policy {
            lease_ms: pick(&self.lease_ms, &module.lease_ms),
            max_attempts: pick(&self.max_attempts, &module.max_attempts),
            backoff: pick(&self.backoff, &module.backoff),
            retain_ms: pick(&self.retain_ms, &module.retain_ms),
        }
    }
}

/// Where an effective value comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    Message,
    Queue,
    Module,
}

impl Source {
    pub fn name(self) -> &'static str {
        match self {
            Source::Message => "message",
            Source::Queue => "queue",
            Source::Module => "module",
        }
    }
}

/// The queue-level values in force, with where each comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    pub lease_ms: (u64, Source),
    pub max_attempts: (u32, Source),
    pub backoff: (Backoff, Source),
    pub retain_ms: (u64, Source),
}

impl Policy {
    /// A message's own MAXATTEMPTS, else the queue's or module's.
    pub fn max_attempts_or(&self, own: Option<u32>) -> (u32, Source) {
        match own {
            Some(n) => (n, Source::Message),
            None => self.max_attempts,
        }
    }

    /// A message's own RETAIN, else the queue's or module's.
    pub fn retain_or(&self, own: Option<u64>) -> (u64, Source) {
        match own {
            Some(ms) => (ms, Source::Message),
            None => self.retain_ms,
        }
    }

    /// A message's own BACKOFF, else the queue's or module's.
    pub fn backoff_or<'a>(&'a self, own: Option<&'a Backoff>) -> (&'a Backoff, Source) {
        match own {
            Some(b) => (b, Source::Message),
            None => (&self.backoff.0, self.backoff.1),
        }
    }
}

impl Default for Policy {
    fn default() -> Self {
        QueueConfig::default().resolve(&Settings::default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn layers_resolve_message_then_queue_then_module() {
        let module = Settings {
            lease_ms: 5_000,
            max_attempts: 3,
            backoff: Backoff::Fixed(7),
            retain_ms: 0,
        };
        let queue = QueueConfig {
            max_attempts: Some(9),
            ..QueueConfig::default()
        };
        let policy = queue.resolve(&module);
        assert_eq!(policy.lease_ms, (5_000, Source::Module));
        assert_eq!(policy.max_attempts, (9, Source::Queue));
        assert_eq!(policy.backoff, (Backoff::Fixed(7), Source::Module));

        // A message's own options, when it has them, come first.
        assert_eq!(policy.max_attempts_or(None), (9, Source::Queue));
        assert_eq!(policy.max_attempts_or(Some(2)), (2, Source::Message));
        assert_eq!(
            policy.backoff_or(None),
            (&Backoff::Fixed(7), Source::Module)
        );
        assert_eq!(
            policy.backoff_or(Some(&Backoff::Fixed(1))),
            (&Backoff::Fixed(1), Source::Message)
        );
    }

    #[test]
    fn config_round_trips_through_hash_fields() {
        let config = QueueConfig {
            lease_ms: Some(1234),
            max_attempts: None,
            backoff: Some(Backoff::parse(b"15s,3m").unwrap()),
            ..QueueConfig::default()
        };
        let stored: HashMap<&str, Vec<u8>> = config
            .to_fields()
            .into_iter()
            .filter_map(|(k, v)| Some((k, v?.into_bytes())))
            .collect();
        assert_eq!(stored.len(), 2);
        let back = QueueConfig::from_fields(|f| stored.get(f).cloned()).unwrap();
        assert_eq!(back, config);
        let broken = QueueConfig::from_fields(|f| (f == LEASE_FIELD).then(|| b"soon".to_vec()));
        assert_eq!(broken, Err(DqError::BadQueueSetting(LEASE_FIELD)));
        let zero = QueueConfig::from_fields(|f| (f == MAX_ATTEMPTS_FIELD).then(|| b"0".to_vec()));
        assert_eq!(zero, Err(DqError::BadQueueSetting(MAX_ATTEMPTS_FIELD)));
    }
}
