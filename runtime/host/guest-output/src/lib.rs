//! An operator's output as it crosses the sandbox boundary (the WIT
//! `output` record: columns in Arrow layout), and its validation into an
//! Arrow batch. Nothing a guest returns is trusted: lengths, offsets,
//! bitmaps and UTF-8 are checked here, before a sink sees a row. The Wasm
//! host moves the guest's values into these types without copying; this
//! crate has no Wasm in it so that it can be fuzzed on its own
//! (`tests/fuzz/fuzz_targets/guest_output.rs`).

use anyhow::{bail, Context, Result};
use arrow_array::{ArrayRef, BooleanArray, Float64Array, Int64Array, RecordBatch, StringArray};
use arrow_buffer::{BooleanBuffer, Buffer, NullBuffer, OffsetBuffer, ScalarBuffer};
use arrow_schema::{DataType, Field, Schema};
use std::sync::Arc;

/// Column values in Arrow layout (booleans bit-packed, LSB first).
#[derive(Debug, Clone, PartialEq)]
pub enum Values {
    /// 64-bit integers.
    Int64(Vec<i64>),
    /// 64-bit floats.
    Float64(Vec<f64>),
    /// Bit-packed booleans.
    Boolean(Vec<u8>),
    /// UTF-8 strings: `offsets` (one more than the rows) into `data`.
    Utf8 {
        /// Start of each string in `data`, then the end of the last.
        offsets: Vec<i32>,
        /// The strings' bytes.
        data: Vec<u8>,
    },
}

/// Values plus an optional validity bitmap (bit set = non-null).
#[derive(Debug, Clone, PartialEq)]
pub struct Column {
    /// The values.
    pub values: Values,
    /// `None`: every row is valid.
    pub validity: Option<Vec<u8>>,
}

/// A named output column.
#[derive(Debug, Clone, PartialEq)]
pub struct NamedColumn {
    /// The column's name.
    pub name: String,
    /// Its values.
    pub column: Column,
}

/// The rows an operator emitted for one batch.
#[derive(Debug, Clone, PartialEq)]
pub struct Output {
    /// Rows every column must hold.
    pub num_rows: u32,
    /// The columns.
    pub columns: Vec<NamedColumn>,
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

fn array_from_guest(column: Column, rows: usize) -> Result<(DataType, ArrayRef)> {
    let len = match &column.values {
        Values::Int64(v) => v.len(),
        Values::Float64(v) => v.len(),
        Values::Boolean(_) => rows,
        Values::Utf8 { offsets, .. } => offsets.len().saturating_sub(1),
    };
    if len != rows {
        bail!("has {len} values but the output declares {rows} rows");
    }
    let nulls = nulls_from_guest(column.validity, rows)?;
    Ok(match column.values {
        Values::Int64(v) => (
            DataType::Int64,
            Arc::new(Int64Array::try_new(ScalarBuffer::from(v), nulls)?),
        ),
        Values::Float64(v) => (
            DataType::Float64,
            Arc::new(Float64Array::try_new(ScalarBuffer::from(v), nulls)?),
        ),
        Values::Boolean(bits) => {
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
        Values::Utf8 { offsets, data } => {
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
pub fn to_batch(output: Output) -> Result<RecordBatch> {
    let rows = output.num_rows as usize;
    let mut fields = Vec::with_capacity(output.columns.len());
    let mut names = std::collections::HashSet::with_capacity(output.columns.len());
    let mut arrays = Vec::with_capacity(output.columns.len());
    for col in output.columns {
        if col.name.len() > weir_core::column_tree::MAX_NAME {
            bail!(
                "an output column's name of {} bytes is longer than {}",
                col.name.len(),
                weir_core::column_tree::MAX_NAME
            );
        }
        if !names.insert(col.name.clone()) {
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
