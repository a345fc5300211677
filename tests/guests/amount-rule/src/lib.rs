//! One rule, `amount > threshold`, emitting the matching rows' `txn_id`
//! and amount: what a fraud rule costs over a `float64` amount and over an
//! exact `decimal(18,2)` one (`cargo bench -p weir-cli --bench types`).
//!
//! Config: `MODE THRESHOLD`, MODE one of `float` (a float64 column),
//! `decimal` (a decimal column, compared as `Decimal` values) or
//! `unscaled` (a decimal column, compared as integers at its scale).

use weir_sdk::{
    Batch, Decimal, DecimalBuilder, EpochContext, Error, Float64Builder, Operator, Output,
    Utf8Builder,
};

enum Mode {
    Float(f64),
    Decimal(Decimal),
    Unscaled(Decimal),
}

struct AmountRule {
    mode: Mode,
}

impl Operator for AmountRule {
    fn init(config: &str) -> Result<Self, Error> {
        let config = config.trim().trim_matches('"');
        let (mode, threshold) = config
            .split_once(' ')
            .ok_or_else(|| Error::config("config is `MODE THRESHOLD`"))?;
        let decimal = || {
            threshold
                .parse::<Decimal>()
                .map_err(|e| Error::config(e.to_string()))
        };
        let mode = match mode {
            "float" => Mode::Float(
                threshold
                    .parse()
                    .map_err(|_| Error::config("threshold is not a number"))?,
            ),
            "decimal" => Mode::Decimal(decimal()?),
            "unscaled" => Mode::Unscaled(decimal()?),
            other => return Err(Error::config(format!("unknown mode `{other}`"))),
        };
        Ok(AmountRule { mode })
    }

    fn process(&mut self, _ctx: &EpochContext, batch: &Batch) -> Result<Output, Error> {
        let mut rows = Vec::new();
        let amounts: weir_sdk::ColumnBuilder = match &self.mode {
            Mode::Float(limit) => {
                let amounts = batch.f64("amount")?;
                for row in 0..amounts.len() {
                    if amounts.get(row).is_some_and(|a| a > *limit) {
                        rows.push(row as u32);
                    }
                }
                let mut out = Float64Builder::with_capacity(rows.len());
                rows.iter()
                    .for_each(|&r| out.push(amounts.value(r as usize)));
                out.into()
            }
            Mode::Decimal(limit) => {
                let amounts = batch.decimal("amount")?;
                for row in 0..amounts.len() {
                    if amounts.get(row).is_some_and(|a| a > *limit) {
                        rows.push(row as u32);
                    }
                }
                let mut out = DecimalBuilder::new(18, 2)?;
                for &r in &rows {
                    out.push_option(amounts.get(r as usize))?;
                }
                out.into()
            }
            Mode::Unscaled(limit) => {
                let amounts = batch.decimal("amount")?;
                let (_, scale) = amounts.precision_scale();
                let limit = limit
                    .rescale(scale)
                    .ok_or_else(|| Error::failed("threshold finer than the column"))?
                    .unscaled();
                let values = amounts.unscaled();
                for (row, &a) in values.iter().enumerate() {
                    if a > limit && !amounts.is_null(row) {
                        rows.push(row as u32);
                    }
                }
                let mut out = DecimalBuilder::new(18, 2)?;
                for &r in &rows {
                    out.push_option(amounts.get(r as usize))?;
                }
                out.into()
            }
        };
        let ids = batch.utf8_rows("txn_id", &rows)?;
        let mut out_ids = Utf8Builder::new();
        (0..rows.len()).for_each(|i| out_ids.push(ids.value(i)));
        Output::new()
            .with("txn_id", out_ids)
            .with("amount", amounts)
            .build()
    }
}

weir_sdk::export_operator!(AmountRule);
