//! Every column type through the Rust SDK's values, row by row: the same
//! computation as `types-check-py` and `types-check-js`, whose outputs must
//! be byte-identical to this one's.
//!
//! Input: `txn_id` utf8, `amount` decimal(18,2), `ts` timestamp(ms, UTC),
//! `day` date, `raw` binary, `device` struct{id, ip, score int64},
//! `tags` `list<utf8>`, `lines` `list<struct{sku utf8, price decimal(18,2)}>`.
//! Output: each value rebuilt from the language's own values, plus values
//! computed from them (exact decimal sums and comparisons, the instant and
//! date as text, the next day, lengths, a struct's field), and one input
//! column passed through untouched (`device_in`).

use weir_sdk::{
    BinaryBuilder, BoolBuilder, ColumnBuilder, Date, DateBuilder, Decimal, DecimalBuilder,
    EpochContext, Error, Int64Builder, Operator, Output, TimeUnit, TimestampBuilder, Utf8Builder,
    Value,
};

struct TypesCheck;

fn decimal(value: &Value) -> Option<Decimal> {
    match value {
        Value::Decimal(d) => Some(*d),
        _ => None,
    }
}

fn text(value: &Value) -> Option<String> {
    match value {
        Value::Utf8(s) => Some(s.clone()),
        _ => None,
    }
}

fn overflow() -> Error {
    Error::failed("decimal overflow")
}

/// The `lines` column rebuilt from values: list<struct{sku, price}>.
fn lines_column(rows: &[Value]) -> Result<ColumnBuilder, Error> {
    let (mut offsets, mut valid) = (vec![0i32], Vec::new());
    let (mut skus, mut prices) = (Utf8Builder::new(), DecimalBuilder::new(18, 2)?);
    for row in rows {
        valid.push(!matches!(row, Value::Null));
        if let Value::List(items) = row {
            for item in items {
                let Value::Struct(fields) = item else {
                    return Err(Error::failed("a line is not a struct"));
                };
                skus.push_option(
                    fields
                        .iter()
                        .find(|(n, _)| n == "sku")
                        .and_then(|(_, v)| text(v))
                        .as_deref(),
                );
                prices.push_option(
                    fields
                        .iter()
                        .find(|(n, _)| n == "price")
                        .and_then(|(_, v)| decimal(v)),
                )?;
            }
        }
        offsets.push(skus.len() as i32);
    }
    let items =
        ColumnBuilder::struct_of(vec![("sku", skus.into()), ("price", prices.into())], None)?;
    ColumnBuilder::list_of(offsets, items, Some(&valid))
}

impl Operator for TypesCheck {
    fn init(_config: &str) -> Result<Self, Error> {
        Ok(TypesCheck)
    }

    fn process(&mut self, _ctx: &EpochContext, batch: &weir_sdk::Batch) -> Result<Output, Error> {
        let n = batch.num_rows();
        let ids = batch.utf8("txn_id")?;
        let amounts = batch.decimal("amount")?;
        let times = batch.timestamp("ts")?;
        let days = batch.date("day")?;
        let raw = batch.binary("raw")?;
        let device = batch.column("device")?;
        let tags = batch.column("tags")?;
        let lines = batch.column("lines")?;
        let hundred: Decimal = "100.00".parse().map_err(|_| overflow())?;

        let mut out_ids = Utf8Builder::new();
        let (mut amount, mut double, mut total) = (
            DecimalBuilder::new(18, 2)?,
            DecimalBuilder::new(19, 2)?,
            DecimalBuilder::new(18, 2)?,
        );
        let mut over = BoolBuilder::new();
        let mut ts = TimestampBuilder::new(TimeUnit::Millisecond, Some("UTC"));
        let (mut ts_text, mut day_text, mut device_ip) =
            (Utf8Builder::new(), Utf8Builder::new(), Utf8Builder::new());
        let (mut next_day, mut raw_out) = (DateBuilder::new(), BinaryBuilder::new());
        let (mut raw_len, mut tag_count) = (Int64Builder::new(), Int64Builder::new());
        let (mut dev_id, mut dev_ip, mut dev_score) =
            (Utf8Builder::new(), Utf8Builder::new(), Int64Builder::new());
        let (mut tag_offsets, mut tag_items, mut tag_valid) =
            (vec![0i32], Utf8Builder::new(), Vec::new());
        let mut line_values = Vec::with_capacity(n);

        for row in 0..n {
            out_ids.push_option(ids.get(row));
            let a = amounts.get(row);
            amount.push_option(a)?;
            double.push_option(
                a.map(|a| a.checked_add(a).ok_or_else(overflow))
                    .transpose()?,
            )?;
            let line_row = lines.value(row);
            let mut sum = Decimal::from_i64(0);
            if let Value::List(items) = &line_row {
                for item in items {
                    if let Value::Struct(fields) = item {
                        if let Some(price) = fields
                            .iter()
                            .find(|(n, _)| n == "price")
                            .and_then(|(_, v)| decimal(v))
                        {
                            sum = sum.checked_add(price).ok_or_else(overflow)?;
                        }
                    }
                }
            }
            total.push(sum)?;
            line_values.push(line_row);
            match a {
                Some(a) => over.push(a > hundred),
                None => over.push_null(),
            }
            match times.get(row) {
                Some(t) => {
                    ts.push(t)?;
                    ts_text.push(&t.to_string());
                }
                None => {
                    ts.push_null();
                    ts_text.push_null();
                }
            }
            match days.get(row) {
                Some(d) => {
                    next_day.push(Date(d.0 + 1));
                    day_text.push(&d.to_string());
                }
                None => {
                    next_day.push_null();
                    day_text.push_null();
                }
            }
            match raw.get(row) {
                Some(bytes) => {
                    raw_out.push(bytes);
                    raw_len.push(bytes.len() as i64);
                }
                None => {
                    raw_out.push_null();
                    raw_len.push_null();
                }
            }
            let Value::Struct(fields) = device.value(row) else {
                return Err(Error::failed("device is not a struct"));
            };
            let field = |name: &str| {
                fields
                    .iter()
                    .find(|(n, _)| n == name)
                    .map(|(_, v)| v.clone())
            };
            let ip = field("ip").as_ref().and_then(text);
            dev_id.push_option(field("id").as_ref().and_then(text).as_deref());
            dev_ip.push_option(ip.as_deref());
            dev_score.push_option(match field("score") {
                Some(Value::Int64(s)) => Some(s),
                _ => None,
            });
            device_ip.push_option(ip.as_deref());
            let tag_row = tags.value(row);
            tag_valid.push(!matches!(tag_row, Value::Null));
            let list = match tag_row {
                Value::List(list) => list,
                _ => Vec::new(),
            };
            tag_count.push(list.len() as i64);
            for t in &list {
                tag_items.push_option(text(t).as_deref());
            }
            tag_offsets.push(tag_items.len() as i32);
        }
        let device_out = ColumnBuilder::struct_of(
            vec![
                ("id", dev_id.into()),
                ("ip", dev_ip.into()),
                ("score", dev_score.into()),
            ],
            None,
        )?;
        Output::new()
            .with("txn_id", out_ids)
            .with("amount", amount)
            .with("double", double)
            .with("total", total)
            .with("over", over)
            .with("ts", ts)
            .with("ts_text", ts_text)
            .with("day_text", day_text)
            .with("next_day", next_day)
            .with("raw", raw_out)
            .with("raw_len", raw_len)
            .with("device", device_out)
            .with("device_ip", device_ip)
            .with(
                "tags",
                ColumnBuilder::list_of(tag_offsets, tag_items.into(), Some(&tag_valid))?,
            )
            .with("tag_count", tag_count)
            .with("lines", lines_column(&line_values)?)
            .with("device_in", device.clone())
            .build()
    }
}

weir_sdk::export_operator!(TypesCheck);
