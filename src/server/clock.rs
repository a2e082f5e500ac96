//! The clock every command and tick reads: Unix time in milliseconds.
//! (What a write did at that time is propagated with it, so replicas never
//! read their own clock for it.)

use std::time::{SystemTime, UNIX_EPOCH};

pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}
