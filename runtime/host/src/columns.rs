//! Moving columns across the sandbox boundary: Arrow arrays to WIT columns
//! (one copy per column) and guest output back into a validated Arrow batch.
//! Nothing a guest returns is trusted: lengths, offsets and UTF-8 are checked
//! here, before a sink sees a row.

use super::bindings::weir::operator::types::Utf8Values;
use super::bindings::{WitColumn, WitDataType, WitOutput, WitValues};
use anyhow::{bail, Context, Result};
use arrow_array::{
    Array, ArrayRef, BooleanArray, Float64Array, Int64Array, RecordBatch, StringArray,
};
use arrow_buffer::{BooleanBuffer, Buffer, NullBuffer, OffsetBuffer, ScalarBuffer};
use arrow_schema::{DataType, Field, Schema};
use std::sync::Arc;

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

fn downcast<'a, T: 'static>(array: &'a dyn Array, what: &str) -> Result<&'a T> {
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

fn nulls_from_guest(validity: Option<Vec<u8>>, rows: usize) -> Result<Option<NullBuffer>> {
    let Some(bits) = validity else {
        return Ok(None);
    };
    if bits.len() * 8 < rows {
        bail!(
            "validity bitmap has {} bytes, too few for {rows} rows",
            bits.len()
        );
    }
    let nulls = NullBuffer::new(BooleanBuffer::new(Buffer::from_vec(bits), 0, rows));
    Ok((nulls.null_count() > 0).then_some(nulls))
}

fn array_from_guest(column: WitColumn, rows: usize) -> Result<(DataType, ArrayRef)> {
    let len = match &column.values {
        WitValues::Int64(v) => v.len(),
        WitValues::Float64(v) => v.len(),
        WitValues::Boolean(_) => rows,
        WitValues::Utf8(u) => u.offsets.len().saturating_sub(1),
    };
    if len != rows {
        bail!("has {len} values but the output declares {rows} rows");
    }
    let nulls = nulls_from_guest(column.validity, rows)?;
    Ok(match column.values {
        WitValues::Int64(v) => (
            DataType::Int64,
            Arc::new(Int64Array::try_new(ScalarBuffer::from(v), nulls)?),
        ),
        WitValues::Float64(v) => (
            DataType::Float64,
            Arc::new(Float64Array::try_new(ScalarBuffer::from(v), nulls)?),
        ),
        WitValues::Boolean(bits) => {
            if bits.len() * 8 < rows {
                bail!(
                    "boolean buffer has {} bytes, too few for {rows} rows",
                    bits.len()
                );
            }
            let values = BooleanBuffer::new(Buffer::from_vec(bits), 0, rows);
            (
                DataType::Boolean,
                Arc::new(BooleanArray::new(values, nulls)),
            )
        }
        WitValues::Utf8(Utf8Values { offsets, data }) => {
            // `OffsetBuffer::new` panics on bad offsets, so check them first.
            let monotonic = offsets.windows(2).all(|w| w[0] <= w[1]);
            if offsets.is_empty() || offsets[0] < 0 || !monotonic {
                bail!("utf8 offsets must start at a non-negative value and never decrease");
            }
            let offsets = OffsetBuffer::new(ScalarBuffer::from(offsets));
            (
                DataType::Utf8,
                Arc::new(StringArray::try_new(
                    offsets,
                    Buffer::from_vec(data),
                    nulls,
                )?),
            )
        }
    })
}

/// Validates an operator's output and turns it into an Arrow batch.
pub fn output_to_batch(output: WitOutput) -> Result<RecordBatch> {
    let rows = output.num_rows as usize;
    let mut fields = Vec::with_capacity(output.columns.len());
    let mut arrays = Vec::with_capacity(output.columns.len());
    for col in output.columns {
        if fields.iter().any(|f: &Field| f.name() == &col.name) {
            bail!("output column `{}` appears twice", col.name);
        }
        let (data_type, array) = array_from_guest(col.column, rows)
            .with_context(|| format!("output column `{}`", col.name))?;
        fields.push(Field::new(col.name, data_type, true));
        arrays.push(array);
    }
    let schema = Arc::new(Schema::new(fields));
    if arrays.is_empty() {
        if rows != 0 {
            bail!("output declares {rows} rows but has no columns");
        }
        return Ok(RecordBatch::new_empty(schema));
    }
    Ok(RecordBatch::try_new(schema, arrays)?)
}
