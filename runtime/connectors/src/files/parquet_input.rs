//! Parquet files in a files (or object store) source: a file whose name
//! ends in `.parquet` is read whole with arrow's Parquet reader and its
//! rows are put in the source's declared schema, column by column and by
//! name, so the operator sees the same batches as from JSON lines.
//!
//! Only the declared columns are read. A column stored as another type is
//! cast to the declared one (an `int32` into `int64`, say) when every value
//! fits; a declared column the file lacks is all null if it is nullable.
//! Into a declared decimal only exact values go: an integer, or a decimal
//! whose digits past the declared scale are zeros; a float never (money
//! that was stored as a float is already inexact).
//! Anything else is an error naming the file and the column: a Parquet
//! file has no lines to set aside one by one, so the epoch fails.

use anyhow::{Context, Result};
use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;
use bytes::Bytes;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::ProjectionMask;

/// The extension that makes a source file Parquet.
pub const EXTENSION: &str = ".parquet";

/// Whether the source file `name` is read as Parquet.
pub fn is_parquet(name: &str) -> bool {
    name.ends_with(EXTENSION)
}

/// The rows of the Parquet file `data` (named `origin` in errors) in
/// `schema`, in batches of at most `batch_rows`.
pub fn decode(
    data: Bytes,
    schema: &SchemaRef,
    batch_rows: usize,
    origin: &str,
) -> Result<Vec<RecordBatch>> {
    let builder = ParquetRecordBatchReaderBuilder::try_new(data)
        .with_context(|| format!("{origin} is not a readable Parquet file"))?;
    let file_schema = builder.schema().clone();
    let wanted = schema
        .fields()
        .iter()
        .filter(|f| file_schema.field_with_name(f.name()).is_ok())
        .map(|f| f.name().as_str());
    let mask = ProjectionMask::columns(builder.parquet_schema(), wanted);
    let reader = builder
        .with_projection(mask)
        .with_batch_size(batch_rows.max(1))
        .build()
        .with_context(|| format!("reading {origin}"))?;
    let mut out = Vec::new();
    for batch in reader {
        let batch = batch.with_context(|| format!("reading {origin}"))?;
        out.push(super::conform::conform(&batch, schema, origin)?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::{Float64Array, Int32Array, Int64Array, StringArray};
    use arrow_schema::{DataType, Field, Schema};
    use std::sync::Arc;

    fn declared() -> SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new("id", DataType::Utf8, false),
            Field::new("n", DataType::Int64, false),
            Field::new("note", DataType::Utf8, true),
        ]))
    }

    /// A file with the columns in another order, `n` stored as int32, an
    /// extra column and no `note`.
    fn file(n: Vec<Option<i32>>) -> Vec<u8> {
        let rows = n.len();
        let schema = Arc::new(Schema::new(vec![
            Field::new("n", DataType::Int32, true),
            Field::new("extra", DataType::Float64, false),
            Field::new("id", DataType::Utf8, false),
        ]));
        let batch = RecordBatch::try_new(
            schema,
            vec![
                Arc::new(Int32Array::from(n)),
                Arc::new(Float64Array::from(vec![1.5; rows])),
                Arc::new(StringArray::from_iter_values(
                    (0..rows).map(|i| format!("t{i}")),
                )),
            ],
        )
        .unwrap();
        crate::parquet::sink::encode(&[batch]).unwrap().unwrap()
    }

    #[test]
    fn columns_are_taken_by_name_cast_to_the_declared_type_and_cut_into_batches() {
        let batches = decode(
            file((0..5).map(Some).collect()).into(),
            &declared(),
            2,
            "f.parquet",
        )
        .unwrap();
        assert_eq!(
            batches
                .iter()
                .map(RecordBatch::num_rows)
                .collect::<Vec<_>>(),
            [2, 2, 1]
        );
        let first = &batches[0];
        assert_eq!(first.schema(), declared());
        let n = first
            .column(1)
            .as_any()
            .downcast_ref::<Int64Array>()
            .unwrap();
        assert_eq!(n.values(), &[0, 1]);
        assert_eq!(
            first.column(2).null_count(),
            2,
            "a missing nullable column is null"
        );
    }

    #[test]
    fn what_does_not_fit_the_schema_is_an_error_naming_file_and_column() {
        let err = decode(
            file(vec![Some(1), None]).into(),
            &declared(),
            10,
            "f.parquet",
        )
        .unwrap_err();
        assert!(
            format!("{err:#}").contains("f.parquet: column `n` has nulls"),
            "{err:#}"
        );
        let wants_m = Arc::new(Schema::new(vec![Field::new("m", DataType::Int64, false)]));
        let err = decode(file(vec![Some(1)]).into(), &wants_m, 10, "f.parquet").unwrap_err();
        assert!(
            format!("{err:#}").contains("f.parquet has no column `m`"),
            "{err:#}"
        );
        let id_as_number = Arc::new(Schema::new(vec![Field::new("id", DataType::Int64, false)]));
        let err = decode(file(vec![Some(1)]).into(), &id_as_number, 10, "f.parquet").unwrap_err();
        assert!(
            format!("{err:#}").contains("column `id` is Utf8 in the file"),
            "{err:#}"
        );
        let err = decode(b"not parquet".to_vec().into(), &declared(), 10, "f.parquet").unwrap_err();
        assert!(
            format!("{err:#}").contains("not a readable Parquet file"),
            "{err:#}"
        );
    }

    #[test]
    fn a_decimal_is_read_only_when_exact() {
        use arrow_array::{Array, Decimal128Array};
        let stored = |values: Vec<i128>, scale: i8| {
            let array = Decimal128Array::from(values)
                .with_precision_and_scale(20, scale)
                .unwrap();
            let schema = Arc::new(Schema::new(vec![Field::new(
                "amount",
                array.data_type().clone(),
                false,
            )]));
            let batch = RecordBatch::try_new(schema, vec![Arc::new(array)]).unwrap();
            Bytes::from(crate::parquet::sink::encode(&[batch]).unwrap().unwrap())
        };
        let money = Arc::new(Schema::new(vec![Field::new(
            "amount",
            DataType::Decimal128(18, 2),
            false,
        )]));
        // 1.2300 and 5.0000 at scale 4 are 1.23 and 5.00 exactly.
        let batches = decode(stored(vec![12300, 50000], 4), &money, 10, "f.parquet").unwrap();
        let read = batches[0]
            .column(0)
            .as_any()
            .downcast_ref::<Decimal128Array>()
            .unwrap();
        assert_eq!(read.values().to_vec(), [123, 500]);
        let err = decode(stored(vec![12345], 4), &money, 10, "f.parquet").unwrap_err();
        assert!(
            format!("{err:#}").contains("column `amount` holds 1.2345"),
            "{err:#}"
        );
        let floats = file(vec![Some(1)]);
        let as_money = Arc::new(Schema::new(vec![Field::new(
            "extra",
            DataType::Decimal128(18, 2),
            false,
        )]));
        let err = decode(floats.into(), &as_money, 10, "f.parquet").unwrap_err();
        assert!(
            format!("{err:#}").contains("a float is not read as"),
            "{err:#}"
        );
    }
}
