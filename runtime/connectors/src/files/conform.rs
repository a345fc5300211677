//! Rows read from a file that carries its own types (Parquet, Avro) put
//! into the source's declared columns: by name, cast where every value
//! fits, a missing nullable column all null, and a decimal only from exact
//! values. Anything else is an error naming the file and the column.

use anyhow::{anyhow, bail, Context, Result};
use arrow_array::{new_null_array, ArrayRef, RecordBatch};
use arrow_cast::cast::{cast_with_options, CastOptions};
use arrow_schema::{DataType, SchemaRef};

/// `batch` (as read from the file) in `schema`.
pub fn conform(batch: &RecordBatch, schema: &SchemaRef, origin: &str) -> Result<RecordBatch> {
    let strict = CastOptions {
        safe: false,
        ..CastOptions::default()
    };
    let columns = schema
        .fields()
        .iter()
        .map(|field| {
            let name = field.name();
            let Some(column) = batch.column_by_name(name) else {
                if field.is_nullable() {
                    return Ok(new_null_array(field.data_type(), batch.num_rows()));
                }
                bail!("{origin} has no column `{name}`, which the source's schema declares not nullable");
            };
            let column: ArrayRef = if column.data_type() == field.data_type() {
                column.clone()
            } else {
                exact_decimal(column, field.data_type())
                    .map_err(|why| anyhow!("{origin}: column `{name}` {why}"))?;
                cast_with_options(column, field.data_type(), &strict).map_err(|e| {
                    anyhow!(
                        "{origin}: column `{name}` is {} in the file and cannot be read as {}: {e}",
                        column.data_type(),
                        field.data_type()
                    )
                })?
            };
            if !field.is_nullable() && column.null_count() > 0 {
                bail!("{origin}: column `{name}` has nulls, and the source's schema declares it not nullable");
            }
            Ok(column)
        })
        .collect::<Result<Vec<_>>>()?;
    RecordBatch::try_new(schema.clone(), columns).with_context(|| format!("reading {origin}"))
}

/// Refuses a cast into a decimal that would not be exact: from a float,
/// or from a decimal with a finer scale whose extra digits are not zeros
/// (the cast would round them).
fn exact_decimal(column: &ArrayRef, to: &DataType) -> std::result::Result<(), String> {
    let &DataType::Decimal128(_, scale) = to else {
        return Ok(());
    };
    match column.data_type() {
        DataType::Float16 | DataType::Float32 | DataType::Float64 => Err(format!(
            "is {} in the file: a float is not read as {to} (it is not exact); declare it \
             float64, or store it as a decimal",
            column.data_type()
        )),
        &DataType::Decimal128(_, from) if from > scale => {
            let step = 10i128.pow(u32::from((from - scale) as u8));
            let values = column
                .as_any()
                .downcast_ref::<arrow_array::Decimal128Array>()
                .ok_or_else(|| "is not a decimal array".to_string())?;
            match values.iter().flatten().find(|v| v % step != 0) {
                Some(v) => Err(format!(
                    "holds {} ({}), which {to} cannot hold without rounding",
                    <arrow_array::types::Decimal128Type as arrow_array::types::DecimalType>::format_decimal(
                        v,
                        values.precision(),
                        from,
                    ),
                    column.data_type()
                )),
                None => Ok(()),
            }
        }
        _ => Ok(()),
    }
}
