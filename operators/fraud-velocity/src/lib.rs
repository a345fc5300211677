//! `fraud-velocity`: the rules of `fraud-rules` plus a velocity rule — more
//! than `max_payments` payments on one card within `window_ms` of event
//! time — using the host's keyed state, so the count spans epochs, restarts
//! and operator upgrades.
//!
//! Config: the `fraud-rules` config plus
//! `"velocity": {"window_ms": 60000, "max_payments": 5, "weight": 0.7}` and
//! optionally `"state_ttl_ms"` (default one hour of epoch time), after which
//! a card that stopped paying is forgotten.
//!
//! Input columns: those of `fraud-rules` (`ts`, a timestamp or Unix
//! milliseconds, is also the velocity window's time). Output columns (the `default`
//! output, the alerts): those of `fraud-rules` plus `window_count`, the
//! card's payments in the window up to and including this one. A fired
//! velocity rule shows as `velocity` in `reasons`, after the configured
//! rules.
//!
//! Output `scores`: every payment with its score — `txn_id`, `card_id`,
//! `ts`, `amount` (both of the input's types), `score`, `alert` (whether it
//! is in the alerts) — for the
//! analysts' lake and for training the next model (`[[sink]] output =
//! "scores"`).

pub use fraud_common::{columns, rules, velocity, window};

use columns::Columns;
use rules::{Rule, RuleSet};
use serde::Deserialize;
use weir_sdk::{
    outputs, Batch, BoolBuilder, EpochContext, Error, Float64Builder, Int64Builder, Operator,
    Output, Utf8Builder, Utf8Column,
};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Velocity {
    window_ms: i64,
    max_payments: usize,
    weight: f64,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    alert_threshold: f64,
    rules: Vec<Rule>,
    velocity: Velocity,
    #[serde(default = "one_hour")]
    state_ttl_ms: u64,
}

fn one_hour() -> u64 {
    3_600_000
}

/// The operator: the compiled rules and the velocity settings.
pub struct FraudVelocity {
    rules: RuleSet,
    velocity: Velocity,
    ttl_ms: u64,
}

impl Operator for FraudVelocity {
    fn init(config: &str) -> Result<Self, Error> {
        let c: Config = serde_json::from_str(config)
            .map_err(|e| Error::config(format!("fraud-velocity config: {e}")))?;
        if c.velocity.window_ms <= 0 || c.velocity.max_payments == 0 {
            return Err(Error::config(
                "fraud-velocity config: `velocity.window_ms` and `velocity.max_payments` must be positive",
            ));
        }
        Ok(FraudVelocity {
            rules: RuleSet::new(c.alert_threshold, c.rules).map_err(Error::config)?,
            velocity: c.velocity,
            ttl_ms: c.state_ttl_ms,
        })
    }

    fn process(&mut self, _ctx: &EpochContext, batch: &Batch) -> Result<Output, Error> {
        let columns = Columns::read(batch)?;
        let (mut scores, mut fired) = self.rules.score_rows(&columns);
        let (cards, times) = (batch.utf8("card_id")?, batch.millis("ts")?);
        let counts = velocity::counts(&cards, &times, self.velocity.window_ms, self.ttl_ms);
        let velocity_bit = 1u64 << self.rules.len();
        for (row, count) in counts.iter().enumerate() {
            if count.is_some_and(|c| c > self.velocity.max_payments) {
                scores[row] += self.velocity.weight;
                fired[row] |= velocity_bit;
            }
        }
        let hits: Vec<u32> = (0..batch.num_rows())
            .filter(|&r| fired[r] != 0 && scores[r] >= self.rules.alert_threshold())
            .map(|r| r as u32)
            .collect();
        emit_scores(batch, &cards, &scores, &hits)?;
        if hits.is_empty() {
            return Output::empty();
        }
        let txn_id = batch.utf8_rows("txn_id", &hits)?;
        let card_id = batch.utf8_rows("card_id", &hits)?;
        let (mut o_txn, mut o_card, mut o_reasons) =
            (Utf8Builder::new(), Utf8Builder::new(), Utf8Builder::new());
        let (mut o_score, mut o_count) = (Float64Builder::new(), Int64Builder::new());
        for (k, &row) in hits.iter().enumerate() {
            let row = row as usize;
            o_txn.push_option(txn_id.get(k));
            o_card.push_option(card_id.get(k));
            o_score.push(scores[row]);
            let mut reasons = self.rules.reasons(fired[row] & !velocity_bit);
            if fired[row] & velocity_bit != 0 {
                if !reasons.is_empty() {
                    reasons.push(',');
                }
                reasons.push_str("velocity");
            }
            o_reasons.push(&reasons);
            o_count.push_option(counts[row].map(|c| c as i64));
        }
        // `amount` and `ts` go out as the input has them.
        Output::new()
            .with("txn_id", o_txn)
            .with("card_id", o_card)
            .with("amount", batch.column_rows("amount", &hits)?)
            .with("score", o_score)
            .with("reasons", o_reasons)
            .with("ts", batch.column_rows("ts", &hits)?)
            .with("window_count", o_count)
            .build()
    }
}

/// Sends every payment of the batch with its score to output `scores`;
/// `alerts` are the rows (ascending) that made the alerts.
fn emit_scores(
    batch: &Batch,
    cards: &Utf8Column,
    scores: &[f64],
    alerts: &[u32],
) -> Result<(), Error> {
    let rows = batch.num_rows();
    let txn_id = batch.utf8("txn_id")?;
    let (mut o_txn, mut o_card) = (Utf8Builder::new(), Utf8Builder::new());
    let (mut o_score, mut o_alert) = (Float64Builder::with_capacity(rows), BoolBuilder::new());
    let mut next_alert = alerts.iter().peekable();
    for (row, &score) in scores.iter().enumerate().take(rows) {
        o_txn.push_option(txn_id.get(row));
        o_card.push_option(cards.get(row));
        o_score.push(score);
        o_alert.push(next_alert.next_if(|&&a| a as usize == row).is_some());
    }
    let scores = Output::new()
        .with("txn_id", o_txn)
        .with("card_id", o_card)
        .with("ts", batch.column("ts")?)
        .with("amount", batch.column("amount")?)
        .with("score", o_score)
        .with("alert", o_alert)
        .build()?;
    outputs::emit("scores", scores);
    Ok(())
}

weir_sdk::export_operator!(FraudVelocity);
