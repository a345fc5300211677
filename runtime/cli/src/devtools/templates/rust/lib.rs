//! {{name}}: emits the payments whose amount is above the configured threshold.

use weir_sdk::{Batch, EpochContext, Error, Float64Builder, Operator, Output, Utf8Builder};

pub struct Big {
    threshold: f64,
}

impl Operator for Big {
    fn init(config: &str) -> Result<Self, Error> {
        // The config is JSON, e.g. {"threshold": 1000.0}.
        let threshold = config
            .split("\"threshold\"")
            .nth(1)
            .and_then(|rest| rest.trim_start_matches([' ', ':']).split([',', '}']).next())
            .and_then(|n| n.trim().parse::<f64>().ok())
            .ok_or_else(|| Error::config("expected {\"threshold\": <number>}"))?;
        Ok(Big { threshold })
    }

    fn process(&mut self, _ctx: &EpochContext, batch: &Batch) -> Result<Output, Error> {
        let ids = batch.utf8("txn_id")?;
        let amounts = batch.f64("amount")?;
        let (mut out_ids, mut out_amounts) = (Utf8Builder::new(), Float64Builder::new());
        for row in 0..batch.num_rows() {
            if amounts.get(row).is_some_and(|a| a > self.threshold) {
                out_ids.push_option(ids.get(row));
                out_amounts.push(amounts.value(row));
            }
        }
        Output::new()
            .with("txn_id", out_ids)
            .with("amount", out_amounts)
            .build()
    }
}

weir_sdk::export_operator!(Big);
