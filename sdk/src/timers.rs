//! Event-time timers: "call me back for this key when event time reaches
//! T". The host keeps them in the operator's state (committed and replayed
//! with the epoch) and, in the epoch whose watermark reaches a timer,
//! calls [`crate::Operator::on_timers`] after every batch of the epoch,
//! with the same state view. Timers need an event-time column
//! (`[event_time]` in the pipeline); there are no processing-time timers,
//! since a replay would fire them differently.
//!
//! ```ignore
//! // In `process`: close the card's 60 s window when the watermark passes its end.
//! weir_sdk::timers::set(card.as_bytes(), window_end_ms);
//! // In `on_timers`: read what the window buffered, emit, clean up.
//! for timer in fired { let rows = weir_sdk::state::read_list(&timer.key); /* … */ }
//! ```

use crate::bindings::weir::operator::timers as wit;

/// A timer that fired: its key and the event time it was set for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Timer {
    pub key: Vec<u8>,
    pub at_ms: i64,
}

/// Sets a timer for `key` at event time `at_ms` (Unix ms). Setting the
/// same one twice is one timer; a key may have many.
pub fn set(key: &[u8], at_ms: i64) {
    wit::set(key, at_ms)
}

/// Removes `key`'s timer at `at_ms`, if set.
pub fn delete(key: &[u8], at_ms: i64) {
    wit::delete(key, at_ms)
}

/// The times of `key`'s timers not yet fired, ascending.
pub fn pending(key: &[u8]) -> Vec<i64> {
    wit::pending(key)
}

pub(crate) fn from_wit(fired: Vec<wit::Timer>) -> Vec<Timer> {
    fired
        .into_iter()
        .map(|t| Timer {
            key: t.key,
            at_ms: t.at_ms,
        })
        .collect()
}
