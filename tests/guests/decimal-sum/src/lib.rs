//! A running sum of `amount` (decimal(18,2)) over every row of every
//! epoch, kept in the host's state as text, and the same sum in float64
//! beside it: one row per batch with the rows seen so far and both sums.
//! The decimal one must equal the exact sum of the input.

use weir_sdk::{
    state, Decimal, DecimalBuilder, EpochContext, Error, Float64Builder, Int64Builder, Operator,
    Output,
};

struct DecimalSum;

/// (rows, exact sum, float sum) so far, from the state.
fn totals() -> Result<(i64, Decimal, f64), Error> {
    let Some(bytes) = state::get(b"totals") else {
        return Ok((0, Decimal::from_i64(0), 0.0));
    };
    let text = String::from_utf8(bytes).map_err(|_| Error::failed("state is not text"))?;
    let mut parts = text.split(' ');
    let mut next = || parts.next().ok_or_else(|| Error::failed("state is short"));
    let rows = next()?
        .parse()
        .map_err(|_| Error::failed("bad row count"))?;
    let sum = next()?.parse().map_err(|_| Error::failed("bad sum"))?;
    let float = next()?
        .parse()
        .map_err(|_| Error::failed("bad float sum"))?;
    Ok((rows, sum, float))
}

impl Operator for DecimalSum {
    fn init(_config: &str) -> Result<Self, Error> {
        Ok(DecimalSum)
    }

    fn process(&mut self, _ctx: &EpochContext, batch: &weir_sdk::Batch) -> Result<Output, Error> {
        let amounts = batch.decimal("amount")?;
        let (mut rows, mut sum, mut float) = totals()?;
        for row in 0..amounts.len() {
            if let Some(a) = amounts.get(row) {
                sum = sum
                    .checked_add(a)
                    .ok_or_else(|| Error::failed("sum overflow"))?;
                float += a.to_f64();
            }
            rows += 1;
        }
        // `{float:?}` prints the shortest text that reads back as the same f64.
        state::put(b"totals", format!("{rows} {sum} {float:?}").as_bytes());
        let (mut r, mut s, mut f) = (
            Int64Builder::new(),
            DecimalBuilder::new(38, 2)?,
            Float64Builder::new(),
        );
        r.push(rows);
        s.push(sum)?;
        f.push(float);
        Output::new()
            .with("rows", r)
            .with("sum", s)
            .with("float_sum", f)
            .build()
    }
}

weir_sdk::export_operator!(DecimalSum);
