//! `fraud-rules`: scores payments against config-driven rules and emits the
//! ones whose score reaches the alert threshold, with the reasons.
//!
//! Input columns: `txn_id`, `card_id`, `merchant_id`, `amount` (a decimal,
//! compared exactly, or a float), `currency`, `country`, `card_country`,
//! `ts` (a timestamp or Unix milliseconds; others are ignored).
//! Output columns: `txn_id`, `card_id`, `amount`, `score`, `reasons`, `ts`
//! (`amount` and `ts` of the input's types).

pub use fraud_common::{columns, rules};

use columns::Columns;
use rules::{Hit, RuleSet};
use weir_sdk::{Batch, EpochContext, Error, Float64Builder, Operator, Output, Utf8Builder};

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
        let columns = Columns::read(batch)?;
        self.hits.clear();
        self.rules.score_all(&columns, &mut self.hits);
        if self.hits.is_empty() {
            return Output::empty();
        }
        // Fetch only the alerting rows of the columns that are just copied out.
        let rows: Vec<u32> = self.hits.iter().map(|h| h.row as u32).collect();
        let txn_id = batch.utf8_rows("txn_id", &rows)?;
        let card_id = batch.utf8_rows("card_id", &rows)?;
        let (mut o_txn, mut o_card, mut o_reasons) =
            (Utf8Builder::new(), Utf8Builder::new(), Utf8Builder::new());
        let mut o_score = Float64Builder::with_capacity(self.hits.len());
        for (k, hit) in self.hits.iter().enumerate() {
            o_txn.push_option(txn_id.get(k));
            o_card.push_option(card_id.get(k));
            o_score.push(hit.score);
            o_reasons.push(&self.rules.reasons(hit.fired));
        }
        // `amount` and `ts` go out as the input has them (a decimal and a
        // timestamp, or a float and Unix milliseconds).
        Output::new()
            .with("txn_id", o_txn)
            .with("card_id", o_card)
            .with("amount", batch.column_rows("amount", &rows)?)
            .with("score", o_score)
            .with("reasons", o_reasons)
            .with("ts", batch.column_rows("ts", &rows)?)
            .build()
    }
}

weir_sdk::export_operator!(FraudRules);
