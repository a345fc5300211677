//! Moving columns across the sandbox boundary: Arrow arrays to WIT columns
//! (for lookups; see `lowering` for input batches) and guest output back into a validated Arrow batch.
//! Nothing a guest returns is trusted: lengths, offsets and UTF-8 are checked
//! here, before a sink sees a row.

use super::bindings::weir::operator::types::Utf8Values;
use super::bindings::{WitColumn, WitDataType, WitOutput, WitValues};
use anyhow::Result;
use arrow_array::{Array, RecordBatch};
use arrow_schema::DataType;
use weir_guest_output as guest_output;

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

/// Copies one Arrow array into the generated WIT types, for the imports
/// the bindings answer with owned values (lookups); `batch.column` and
/// `batch.take` lower from the Arrow buffers without this copy. Both read
/// the array through [`super::lowering::column`].
pub fn column_to_wit(array: &dyn Array) -> Result<WitColumn> {
    Ok(super::lowering::column(array)?.to_wit())
}

/// Validates an operator's output and turns it into an Arrow batch (the
/// checks live in [`weir_guest_output`], fuzzed there).
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
