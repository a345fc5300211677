//! Moving columns across the sandbox boundary: Arrow arrays to WIT columns
//! (one copy per column) and guest output back into a validated Arrow batch.
//! Nothing a guest returns is trusted: lengths, offsets and UTF-8 are checked
//! here, before a sink sees a row.

use super::bindings::weir::operator::types::Utf8Values;
use super::bindings::{WitColumn, WitDataType, WitOutput, WitValues};
use anyhow::{bail, Context, Result};
use arrow_array::{Array, BooleanArray, Float64Array, Int64Array, RecordBatch, StringArray};
use arrow_schema::DataType;
use weir_core::guest_output;

/// The WIT type for an Arrow type, if Weir can carry it.
pub fn wit_type(t: &DataType) -> Option<WitDataType> {
    Some(match t {
        DataType::Int64 => WitDataType::Int64,
        DataType::Float64 => WitDataType::Float64,
        DataType::Boolean => WitDataType::Boolean,
        DataType::Utf8 => WitDataType::Utf8,
        _ => return None,
    })
}

fn validity_of(array: &dyn Array) -> Option<Vec<u8>> {
    array.nulls().map(|n| n.inner().sliced().to_vec())
}

/// `array` as its concrete Arrow type, or an error naming the expected one.
pub(crate) fn downcast<'a, T: 'static>(array: &'a dyn Array, what: &str) -> Result<&'a T> {
    array
        .as_any()
        .downcast_ref::<T>()
        .with_context(|| format!("expected a {what} array"))
}

/// Copies one Arrow array into the WIT representation.
pub fn column_to_wit(array: &dyn Array) -> Result<WitColumn> {
    let values = match array.data_type() {
        DataType::Int64 => {
            WitValues::Int64(downcast::<Int64Array>(array, "int64")?.values().to_vec())
        }
        DataType::Float64 => WitValues::Float64(
            downcast::<Float64Array>(array, "float64")?
                .values()
                .to_vec(),
        ),
        DataType::Boolean => WitValues::Boolean(
            downcast::<BooleanArray>(array, "boolean")?
                .values()
                .sliced()
                .to_vec(),
        ),
        DataType::Utf8 => {
            let strings = downcast::<StringArray>(array, "utf8")?;
            let offsets = strings.value_offsets();
            let (first, last) = (offsets[0], offsets[offsets.len() - 1]);
            let data = strings.value_data()[first as usize..last as usize].to_vec();
            let offsets = if first == 0 {
                offsets.to_vec()
            } else {
                offsets.iter().map(|o| o - first).collect()
            };
            WitValues::Utf8(Utf8Values { offsets, data })
        }
        other => bail!("column type {other} cannot be passed to an operator"),
    };
    Ok(WitColumn {
        values,
        validity: validity_of(array),
    })
}

/// Validates an operator's output and turns it into an Arrow batch (the
/// checks live in [`weir_core::guest_output`], fuzzed there).
pub fn output_to_batch(output: WitOutput) -> Result<RecordBatch> {
    guest_output::to_batch(guest_output::Output {
        num_rows: output.num_rows,
        columns: output
            .columns
            .into_iter()
            .map(|c| guest_output::NamedColumn {
                name: c.name,
                column: guest_output::Column {
                    values: match c.column.values {
                        WitValues::Int64(v) => guest_output::Values::Int64(v),
                        WitValues::Float64(v) => guest_output::Values::Float64(v),
                        WitValues::Boolean(v) => guest_output::Values::Boolean(v),
                        WitValues::Utf8(Utf8Values { offsets, data }) => {
                            guest_output::Values::Utf8 { offsets, data }
                        }
                    },
                    validity: c.column.validity,
                },
            })
            .collect(),
    })
}
