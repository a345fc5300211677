//! `fraud-model`: scores every payment with a fraud model evaluated inside
//! the sandbox — gradient-boosted trees trained on the generator's labelled
//! payments (`tools/model/train.py`), exported to ONNX and run by tract.
//!
//! The model is the version's artifact `model` (`--artifact
//! model=model.onnx`), so a new model is a new version without a new
//! build. Its features ([`features::NAMES`]) come from the payment, the
//! pipeline's `cards` lookup table (`home_country`, `devices`: the card's
//! registered devices, separated by spaces) and the card's payments in the
//! last `window_ms` of event time, kept in the host's state. It reads
//! `amount` as a decimal or a float, `ts` as a timestamp or Unix
//! milliseconds, and the device as a nested `device` struct's `id` or a
//! flat `device_id`.
//!
//! Config (every key optional): `{"threshold": 0.5, "window_ms": 60000,
//! "risky_merchants": ["m-0666"], "state_ttl_ms": 3600000}`.
//!
//! Output `default` (the alerts): `txn_id`, `card_id`, `amount`, `score`,
//! `reasons` (`model`), `ts` for payments scoring at least `threshold`.
//! Output `scores`: every payment with `score`, `alert`, each feature as
//! `f_<name>` and the `model` digest — what `weir explain` shows and the
//! next model trains on.
//!
//! A batch of feature columns (`f_<name>` for every feature, float64)
//! instead of payments is scored as it is, returning `score` per row: how
//! `weir explain` measures each feature's contribution with the very
//! model and code of the version that made the decision.

pub mod features;
pub mod model;
pub use fraud_common::{velocity, window};

use features::{CardFacts, Payment, NAMES, WIDTH};
use model::Model;
use serde::Deserialize;
use weir_sdk::{
    artifacts, lookup, outputs, Batch, BoolBuilder, DataType, Decimal, EpochContext, Error,
    Float64Builder, Operator, Output, Utf8Builder, Utf8Column,
};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    #[serde(default = "half")]
    threshold: f64,
    #[serde(default = "one_minute")]
    window_ms: i64,
    #[serde(default)]
    risky_merchants: Vec<String>,
    #[serde(default = "one_hour")]
    state_ttl_ms: u64,
}

fn half() -> f64 {
    0.5
}

fn one_minute() -> i64 {
    60_000
}

fn one_hour() -> u64 {
    3_600_000
}

/// The operator: its settings and the loaded model.
pub struct FraudModel {
    config: Config,
    model: Model,
    model_digest: String,
}

impl Operator for FraudModel {
    fn init(config: &str) -> Result<Self, Error> {
        let config: Config = serde_json::from_str(config)
            .map_err(|e| Error::config(format!("fraud-model config: {e}")))?;
        if config.window_ms <= 0 || !(0.0..=1.0).contains(&config.threshold) {
            return Err(Error::config(
                "fraud-model config: `window_ms` must be positive and `threshold` in 0..=1",
            ));
        }
        let bytes = artifacts::require("model")?;
        let model =
            Model::load(&bytes).map_err(|e| Error::config(format!("artifact `model`: {e}")))?;
        Ok(FraudModel {
            config,
            model,
            model_digest: artifacts::digest("model").unwrap_or_default(),
        })
    }

    fn process(&mut self, _ctx: &EpochContext, batch: &Batch) -> Result<Output, Error> {
        if batch.schema().iter().any(|f| f.name == "f_amount") {
            return self.score_features(batch);
        }
        let card_id = batch.utf8("card_id")?;
        let rows = self.feature_rows(batch, &card_id)?;
        let scores = self.model.score(&rows).map_err(Error::failed)?;
        let hits: Vec<u32> = (0..batch.num_rows())
            .filter(|&r| f64::from(scores[r]) >= self.config.threshold)
            .map(|r| r as u32)
            .collect();
        self.emit_scores(batch, &card_id, &rows, &scores, &hits)?;
        alerts(batch, &scores, &hits)
    }
}

impl FraudModel {
    /// Every row's features, `WIDTH` floats per row, row after row.
    fn feature_rows(&self, batch: &Batch, card_id: &Utf8Column) -> Result<Vec<f32>, Error> {
        let cards = lookup::table("cards");
        let home = cards.utf8(card_id, "home_country")?;
        let devices = cards.utf8(card_id, "devices")?;
        let (amount, country) = (amounts(batch)?, batch.utf8("country")?);
        let (merchant, device) = (batch.utf8("merchant_id")?, device_ids(batch)?);
        let (window_ms, ttl_ms) = (self.config.window_ms, self.config.state_ttl_ms);
        let counts = velocity::counts(card_id, &batch.millis("ts")?, window_ms, ttl_ms);
        let mut rows = Vec::with_capacity(batch.num_rows() * WIDTH);
        for (r, count) in counts.iter().enumerate() {
            let payment = Payment {
                amount: amount[r].unwrap_or(0.0),
                country: country.get(r).unwrap_or(""),
                merchant_id: merchant.get(r).unwrap_or(""),
                device_id: device[r].as_deref(),
            };
            let card = CardFacts {
                home_country: home.get(r),
                devices: devices.get(r),
                payments_in_window: count.unwrap_or(0),
            };
            rows.extend(features::row(&payment, &card, &self.config.risky_merchants));
        }
        Ok(rows)
    }

    /// Sends every payment with its score and features to output `scores`.
    fn emit_scores(
        &self,
        batch: &Batch,
        card_id: &Utf8Column,
        rows: &[f32],
        scores: &[f32],
        hits: &[u32],
    ) -> Result<(), Error> {
        let n = batch.num_rows();
        let txn_id = batch.utf8("txn_id")?;
        let (mut o_txn, mut o_card, mut o_model) =
            (Utf8Builder::new(), Utf8Builder::new(), Utf8Builder::new());
        let (mut o_score, mut o_alert) = (Float64Builder::with_capacity(n), BoolBuilder::new());
        let mut o_features: Vec<Float64Builder> = (0..WIDTH)
            .map(|_| Float64Builder::with_capacity(n))
            .collect();
        let mut next_hit = hits.iter().peekable();
        for r in 0..n {
            o_txn.push_option(txn_id.get(r));
            o_card.push_option(card_id.get(r));
            o_score.push(f64::from(scores[r]));
            o_alert.push(next_hit.next_if(|&&h| h as usize == r).is_some());
            for (f, column) in o_features.iter_mut().enumerate() {
                column.push(f64::from(rows[r * WIDTH + f]));
            }
            o_model.push(&self.model_digest);
        }
        let mut out = Output::new()
            .with("txn_id", o_txn)
            .with("card_id", o_card)
            .with("ts", batch.column("ts")?)
            .with("amount", batch.column("amount")?)
            .with("score", o_score)
            .with("alert", o_alert);
        for (name, column) in NAMES.iter().zip(o_features) {
            out = out.with(&format!("f_{name}"), column);
        }
        outputs::emit("scores", out.with("model", o_model).build()?);
        Ok(())
    }

    /// Scores a batch of feature columns as it is: `score` per row.
    fn score_features(&self, batch: &Batch) -> Result<Output, Error> {
        let n = batch.num_rows();
        let columns = NAMES
            .iter()
            .map(|name| batch.f64(&format!("f_{name}")))
            .collect::<Result<Vec<_>, _>>()?;
        let mut rows = Vec::with_capacity(n * WIDTH);
        for r in 0..n {
            rows.extend(columns.iter().map(|c| c.get(r).unwrap_or(0.0) as f32));
        }
        let scores = self.model.score(&rows).map_err(Error::failed)?;
        let mut o_score = Float64Builder::with_capacity(n);
        scores.iter().for_each(|&s| o_score.push(f64::from(s)));
        Output::new().with("score", o_score).build()
    }
}

/// The alerts: the rows `hits` with their score, in the demo's alert
/// columns.
fn alerts(batch: &Batch, scores: &[f32], hits: &[u32]) -> Result<Output, Error> {
    if hits.is_empty() {
        return Output::empty();
    }
    let (txn_id, card_id) = (
        batch.utf8_rows("txn_id", hits)?,
        batch.utf8_rows("card_id", hits)?,
    );
    let (mut o_txn, mut o_card, mut o_reasons) =
        (Utf8Builder::new(), Utf8Builder::new(), Utf8Builder::new());
    let mut o_score = Float64Builder::new();
    for (k, &row) in hits.iter().enumerate() {
        o_txn.push_option(txn_id.get(k));
        o_card.push_option(card_id.get(k));
        o_score.push(f64::from(scores[row as usize]));
        o_reasons.push("model");
    }
    // `amount` and `ts` go out as the input has them.
    Output::new()
        .with("txn_id", o_txn)
        .with("card_id", o_card)
        .with("amount", batch.column_rows("amount", hits)?)
        .with("score", o_score)
        .with("reasons", o_reasons)
        .with("ts", batch.column_rows("ts", hits)?)
        .build()
}

/// Each row's amount as the model's float feature, from a `decimal(P,S)`
/// or a `float64` column.
fn amounts(batch: &Batch) -> Result<Vec<Option<f64>>, Error> {
    let n = batch.num_rows();
    match batch.data_type("amount")? {
        DataType::Decimal { .. } => {
            let exact = batch.decimal("amount")?;
            Ok((0..n).map(|r| exact.get(r).map(Decimal::to_f64)).collect())
        }
        _ => {
            let floats = batch.f64("amount")?;
            Ok((0..n).map(|r| floats.get(r)).collect())
        }
    }
}

/// Each row's device id: `device.id` of a nested `device` column (null
/// where the device is), or the flat `device_id` column.
fn device_ids(batch: &Batch) -> Result<Vec<Option<String>>, Error> {
    if batch.index_of("device").is_err() {
        let flat = batch.utf8("device_id")?;
        return Ok((0..batch.num_rows())
            .map(|r| flat.get(r).map(str::to_string))
            .collect());
    }
    let device = batch.column("device")?;
    let ids = device.child("id")?.strings()?;
    Ok(ids
        .into_iter()
        .enumerate()
        .map(|(r, id)| id.filter(|_| !device.is_null(r)))
        .collect())
}

weir_sdk::export_operator!(FraudModel);
