//! `fraud-windows`: the Spark Structured Streaming fraud job as a Weir
//! operator. Payments are counted per card in event-time tumbling windows
//! (60 s by default); when the watermark closes a window, **every payment
//! of the window** is scored with the window's *final* count — the
//! configured rules of `fraud-rules`, plus `velocity.weight` when the count
//! is above `velocity.max_payments` — and alerts are emitted (Spark's
//! append mode). Built on the SDK's [`weir_sdk::window`] helper: keyed
//! state, an append-only list per window and an event-time timer at its
//! end; the pipeline needs an `[event_time]` column.
//!
//! Config: the `fraud-rules` config (`alert_threshold`, `rules`) plus
//! `"velocity": {"window_ms": 60000, "max_payments": 5, "weight": 0.7}`
//! and `"late"`: `"drop"` (default; Spark drops rows for a window that is
//! already closed) or `"score"` (score a late payment at once on the rules
//! alone, `window_count` null). Enrichment is the input's `card_country`
//! for now.
//!
//! Output columns: `txn_id`, `card_id`, `amount`, `score`, `reasons`,
//! `ts`, `window_count`, `window_start`. `amount` has the input's type (a
//! decimal, compared exactly with the rules' thresholds, or a float); `ts`
//! is a `timestamp(ms, UTC)` when the input's is a timestamp, Unix
//! milliseconds otherwise.

pub use fraud_common::windows_job::{Alerts, Arrivals, FraudWindows, Late};
pub use fraud_common::{columns, rules};

weir_sdk::export_operator!(FraudWindows);
