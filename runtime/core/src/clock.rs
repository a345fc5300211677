//! The wall clock, in Unix milliseconds: the epoch time the engine records
//! in `offsets/N` (operators see only that recorded value, never the clock),
//! registration times, progress timestamps. One function, so every record
//! agrees on the unit.

use std::time::{SystemTime, UNIX_EPOCH};

/// Now, in Unix ms (0 if the clock is before 1970).
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}
