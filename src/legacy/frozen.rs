//! Frozen copies of the types the multi-key layout stored, with their
//! serde form (variant order and shape) exactly as that layout wrote them.
//! Today's types carry no serde derives: they may change, these may not.
//! Each converts into today's type.

use serde::{Deserialize, Serialize};

use crate::core::backoff;
use crate::core::queue;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum State {
    Delayed,
    Ready,
    Inflight,
    Dead,
    Waiting,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum DeathReason {
    Nack,
    LeaseExpired,
    Expired,
    Permanent,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Death {
    pub reason: DeathReason,
    /// Unix ms.
    pub at: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Backoff {
    Exponential { base: u64, max: u64 },
    Fixed(u64),
    Steps(Vec<u64>),
}

impl From<State> for queue::State {
    fn from(s: State) -> Self {
        match s {
            State::Delayed => queue::State::Delayed,
            State::Ready => queue::State::Ready,
            State::Inflight => queue::State::Inflight,
            State::Dead => queue::State::Dead,
            State::Waiting => queue::State::Waiting,
        }
    }
}

impl From<Death> for queue::Death {
    fn from(d: Death) -> Self {
        let reason = match d.reason {
            DeathReason::Nack => queue::DeathReason::Nack,
            DeathReason::LeaseExpired => queue::DeathReason::LeaseExpired,
            DeathReason::Expired => queue::DeathReason::Expired,
            DeathReason::Permanent => queue::DeathReason::Permanent,
        };
        queue::Death { reason, at: d.at }
    }
}

impl From<&Backoff> for backoff::Backoff {
    fn from(b: &Backoff) -> Self {
        match b {
            Backoff::Exponential { base, max } => backoff::Backoff::Exponential {
                base: *base,
                max: *max,
            },
            Backoff::Fixed(d) => backoff::Backoff::Fixed(*d),
            Backoff::Steps(steps) => backoff::Backoff::Steps(steps.clone()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The serde form is the variant index, in declaration order: the
    /// layout's records depend on it.
    #[test]
    fn variant_order_is_the_stored_one() {
        let config = bincode::config::standard();
        let encode = |v: &dyn erased::Encode| v.encode(config);
        assert_eq!(encode(&State::Waiting), [4]);
        assert_eq!(encode(&DeathReason::Permanent), [3]);
        assert_eq!(encode(&Backoff::Fixed(7)), [1, 7]);
        assert_eq!(queue::State::from(State::Waiting), queue::State::Waiting);
        assert_eq!(
            backoff::Backoff::from(&Backoff::Steps(vec![1, 2])),
            backoff::Backoff::Steps(vec![1, 2])
        );
    }

    mod erased {
        pub trait Encode {
            fn encode(&self, config: bincode::config::Configuration) -> Vec<u8>;
        }
        impl<T: serde::Serialize> Encode for T {
            fn encode(&self, config: bincode::config::Configuration) -> Vec<u8> {
                bincode::serde::encode_to_vec(self, config).unwrap_or_default()
            }
        }
    }
}
