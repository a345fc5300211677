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

#[path = "../../fraud-rules/src/columns.rs"]
pub mod columns;
pub mod job;
pub mod payload;
#[path = "../../fraud-rules/src/rules.rs"]
pub mod rules;

pub use job::{Alerts, Arrivals, FraudWindows, Late};
use payload::Buffered;
use weir_sdk::window::Row;
use weir_sdk::{log, Batch, EpochContext, Error, Operator, Output, Timer};

impl Operator for FraudWindows {
    fn init(config: &str) -> Result<Self, Error> {
        FraudWindows::from_config(config)
    }

    /// Buffers each payment in its card's window with the rules' verdict;
    /// alerts come when the window closes ([`Self::on_timers`]).
    fn process(&mut self, _ctx: &EpochContext, batch: &Batch) -> Result<Output, Error> {
        let arrivals = self.arrivals(batch)?;
        let rows: Vec<Row<'_>> = arrivals
            .rows
            .iter()
            .zip(&arrivals.payloads)
            .map(|(&(row, t), p)| Row {
                key: arrivals.cards.get_bytes(row).unwrap_or_default(),
                ts_ms: t,
                value: 1.0,
                payload: p,
            })
            .collect();
        let added = self.windows.add(&rows)?;
        if added.late.is_empty() {
            return Output::empty();
        }
        log::warn(&format!(
            "{} payments arrived after their window closed ({})",
            added.late.len(),
            if self.late == Late::Drop {
                "dropped, as Spark does"
            } else {
                "scored on the rules alone"
            }
        ));
        let mut alerts = Alerts::default();
        if self.late == Late::Score {
            for &i in &added.late {
                let row = arrivals.rows[i].0;
                let c = arrivals.cards.get(row).unwrap_or_default();
                let b = Buffered::decode(&arrivals.payloads[i])
                    .ok_or_else(|| Error::failed("payload"))?;
                let (score, fired) = (arrivals.scores[row], arrivals.fired[row]);
                if fired != 0 && score >= self.rules.alert_threshold() {
                    alerts.push(c, &b, score, &self.rules.reasons(fired), None);
                }
            }
        }
        alerts.build()
    }

    /// Scores every payment of each closed window with its final count.
    fn on_timers(&mut self, _ctx: &EpochContext, fired: &[Timer]) -> Result<Output, Error> {
        let mut alerts = Alerts::default();
        for w in self.windows.close(fired)? {
            let card = String::from_utf8_lossy(&w.key);
            let payloads = w.rows.iter().map(Vec::as_slice);
            self.score_window(&card, w.agg.count, w.start_ms, payloads, &mut alerts)?;
        }
        alerts.build()
    }
}

weir_sdk::export_operator!(FraudWindows);
