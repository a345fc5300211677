//! `fraud-rules`: scores payments against config-driven rules and emits the
//! ones whose score reaches the alert threshold, with the reasons.
//!
//! Input columns: `txn_id`, `card_id`, `merchant_id`, `amount`, `currency`,
//! `country`, `card_country`, `ts` (others are ignored).
//! Output columns: `txn_id`, `card_id`, `amount`, `score`, `reasons`, `ts`.

pub mod rules;

use rules::{Hit, Payments, RuleSet};
use weir_sdk::{
    Batch, EpochContext, Error, Float64Builder, Float64Column, Int64Builder, Operator, Output,
    Utf8Builder, Utf8Column,
};

/// The columns the rules read, fetched once per batch.
struct Columns {
    amount: Float64Column,
    currency: Utf8Column,
    country: Utf8Column,
    card_country: Utf8Column,
    merchant_id: Utf8Column,
}

impl Payments for Columns {
    fn len(&self) -> usize {
        self.amount.len()
    }
    fn amount(&self, row: usize) -> Option<f64> {
        self.amount.get(row)
    }
    fn currency(&self, row: usize) -> Option<&[u8]> {
        self.currency.get_bytes(row)
    }
    fn country(&self, row: usize) -> Option<&[u8]> {
        self.country.get_bytes(row)
    }
    fn card_country(&self, row: usize) -> Option<&[u8]> {
        self.card_country.get_bytes(row)
    }
    fn merchant_id(&self, row: usize) -> Option<&[u8]> {
        self.merchant_id.get_bytes(row)
    }
}

/// The operator instance: the compiled rule set.
pub struct FraudRules {
    rules: RuleSet,
    hits: Vec<Hit>,
}

impl Operator for FraudRules {
    fn init(config: &str) -> Result<Self, Error> {
        Ok(FraudRules {
            rules: RuleSet::from_json(config).map_err(Error::config)?,
            hits: Vec::new(),
        })
    }

    fn process(&mut self, _ctx: &EpochContext, batch: &Batch) -> Result<Output, Error> {
        let columns = Columns {
            amount: batch.f64("amount")?,
            currency: batch.utf8("currency")?,
            country: batch.utf8("country")?,
            card_country: batch.utf8("card_country")?,
            merchant_id: batch.utf8("merchant_id")?,
        };
        self.hits.clear();
        self.rules.score_all(&columns, &mut self.hits);
        if self.hits.is_empty() {
            return Output::empty();
        }
        // Fetch only the alerting rows of the columns that are just copied out.
        let rows: Vec<u32> = self.hits.iter().map(|h| h.row as u32).collect();
        let txn_id = batch.utf8_rows("txn_id", &rows)?;
        let card_id = batch.utf8_rows("card_id", &rows)?;
        let ts = batch.i64_rows("ts", &rows)?;

        let n = self.hits.len();
        let (mut o_txn, mut o_card, mut o_reasons) =
            (Utf8Builder::new(), Utf8Builder::new(), Utf8Builder::new());
        let (mut o_amount, mut o_score) = (
            Float64Builder::with_capacity(n),
            Float64Builder::with_capacity(n),
        );
        let mut o_ts = Int64Builder::with_capacity(n);
        for (k, hit) in self.hits.iter().enumerate() {
            o_txn.push_option(txn_id.get(k));
            o_card.push_option(card_id.get(k));
            o_amount.push_option(columns.amount.get(hit.row));
            o_score.push(hit.score);
            o_reasons.push(&self.rules.reasons(hit.fired));
            o_ts.push_option(ts.get(k));
        }
        Output::new()
            .with("txn_id", o_txn)
            .with("card_id", o_card)
            .with("amount", o_amount)
            .with("score", o_score)
            .with("reasons", o_reasons)
            .with("ts", o_ts)
            .build()
    }
}

weir_sdk::export_operator!(FraudRules);
