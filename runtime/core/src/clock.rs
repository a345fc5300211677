//! The wall clock, in Unix milliseconds: the epoch time the engine records
//! in `offsets/N` (operators see only that recorded value, never the clock),
//! registration times, progress timestamps. One function, so every record
//! agrees on the unit.

use std::time::{SystemTime, UNIX_EPOCH};

/// Now, in Unix microseconds (0 if the clock is before 1970): for
/// event→emit latency, which is often below a millisecond.
pub fn now_us() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as i64)
        .unwrap_or(0)
}

/// Now, in Unix ms (0 if the clock is before 1970).
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}
