//! Arrow values as PostgreSQL parameters. Each output column is downcast
//! once per batch into a [`ColumnReader`]; a row is then a slice of
//! [`Cell`]s, already converted to the table column's type (with range
//! checks that name the column), which both the COPY and the INSERT path
//! send as they are.

use super::table::{ColumnPlan, Target};
use anyhow::{bail, Context, Result};
use arrow_array::{Array, BooleanArray, Float64Array, Int64Array, RecordBatch, StringArray};
use bytes::{BufMut, BytesMut};
use postgres::types::{to_sql_checked, IsNull, ToSql, Type};
use std::error::Error;

/// One value ready for the wire.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Cell<'a> {
    Null,
    I16(i16),
    I32(i32),
    /// `bigint`, and `timestamp`/`timestamptz` as microseconds since 2000-01-01.
    I64(i64),
    F32(f32),
    F64(f64),
    Bool(bool),
    Text(&'a str),
    Jsonb(&'a str),
}

impl ToSql for Cell<'_> {
    fn to_sql(
        &self,
        ty: &Type,
        out: &mut BytesMut,
    ) -> Result<IsNull, Box<dyn Error + Sync + Send>> {
        match *self {
            Cell::Null => return Ok(IsNull::Yes),
            Cell::I16(v) => out.put_i16(v),
            Cell::I32(v) => out.put_i32(v),
            Cell::I64(v) => out.put_i64(v),
            Cell::F32(v) => out.put_f32(v),
            Cell::F64(v) => out.put_f64(v),
            Cell::Bool(v) => return v.to_sql(ty, out),
            Cell::Text(s) => out.put_slice(s.as_bytes()),
            Cell::Jsonb(s) => {
                out.put_u8(1);
                out.put_slice(s.as_bytes());
            }
        }
        Ok(IsNull::No)
    }

    /// Compatibility is decided per column by `table::plan` before any row
    /// is encoded.
    fn accepts(_: &Type) -> bool {
        true
    }

    to_sql_checked!();
}

/// Milliseconds from the Unix epoch to PostgreSQL's (2000-01-01).
const PG_EPOCH_UNIX_MS: i64 = 946_684_800_000;

/// An output column downcast once, converting row by row.
pub struct ColumnReader<'a> {
    name: &'a str,
    target: Target,
    values: Values<'a>,
}

enum Values<'a> {
    Int(&'a Int64Array),
    Float(&'a Float64Array),
    Bool(&'a BooleanArray),
    Utf8(&'a StringArray),
}

fn downcast<'a, T: 'static>(array: &'a dyn Array, name: &str) -> Result<&'a T> {
    array
        .as_any()
        .downcast_ref::<T>()
        .with_context(|| format!("output column `{name}` changed type since the table was checked"))
}

impl<'a> ColumnReader<'a> {
    /// Readers for every planned column of `batch`, in plan order.
    pub fn for_batch(batch: &'a RecordBatch, plans: &'a [ColumnPlan]) -> Result<Vec<Self>> {
        plans
            .iter()
            .map(|p| {
                let array = batch.column(p.index).as_ref();
                let values = match p.target {
                    Target::Int8 | Target::Int4 | Target::Int2 | Target::Timestamp => {
                        Values::Int(downcast(array, &p.name)?)
                    }
                    Target::Float8 | Target::Float4 => Values::Float(downcast(array, &p.name)?),
                    Target::Bool => Values::Bool(downcast(array, &p.name)?),
                    Target::Text | Target::Jsonb => Values::Utf8(downcast(array, &p.name)?),
                };
                Ok(ColumnReader {
                    name: &p.name,
                    target: p.target,
                    values,
                })
            })
            .collect()
    }

    /// Row `row` converted for the table; a value the column cannot hold
    /// is an error naming the column and the value.
    pub fn cell(&self, row: usize) -> Result<Cell<'a>> {
        let is_null = match &self.values {
            Values::Int(a) => a.is_null(row),
            Values::Float(a) => a.is_null(row),
            Values::Bool(a) => a.is_null(row),
            Values::Utf8(a) => a.is_null(row),
        };
        if is_null {
            return Ok(Cell::Null);
        }
        Ok(match (&self.values, self.target) {
            (Values::Int(a), Target::Int8) => Cell::I64(a.value(row)),
            (Values::Int(a), Target::Int4) => {
                let v = a.value(row);
                Cell::I32(v.try_into().map_err(|_| self.out_of_range(v, "integer"))?)
            }
            (Values::Int(a), Target::Int2) => {
                let v = a.value(row);
                Cell::I16(v.try_into().map_err(|_| self.out_of_range(v, "smallint"))?)
            }
            (Values::Int(a), Target::Timestamp) => {
                let ms = a.value(row);
                let micros = ms
                    .checked_sub(PG_EPOCH_UNIX_MS)
                    .and_then(|d| d.checked_mul(1000))
                    .ok_or_else(|| self.out_of_range(ms, "a timestamp (Unix milliseconds)"))?;
                Cell::I64(micros)
            }
            (Values::Float(a), Target::Float4) => Cell::F32(a.value(row) as f32),
            (Values::Float(a), _) => Cell::F64(a.value(row)),
            (Values::Bool(a), _) => Cell::Bool(a.value(row)),
            (Values::Utf8(a), Target::Jsonb) => Cell::Jsonb(a.value(row)),
            (Values::Utf8(a), _) => Cell::Text(a.value(row)),
            (Values::Int(_), _) => bail!(
                "column `{}`: integer output planned as {:?}",
                self.name,
                self.target
            ),
        })
    }

    fn out_of_range(&self, v: i64, what: &str) -> anyhow::Error {
        anyhow::anyhow!("column `{}`: value {v} does not fit {what}", self.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_schema::{DataType, Field, Schema};
    use std::sync::Arc;

    fn batch() -> RecordBatch {
        RecordBatch::try_new(
            Arc::new(Schema::new(vec![
                Field::new("n", DataType::Int64, true),
                Field::new("s", DataType::Utf8, true),
            ])),
            vec![
                Arc::new(Int64Array::from(vec![Some(1), None, Some(5_000_000_000)])),
                Arc::new(StringArray::from(vec![Some("a"), Some("{}"), None])),
            ],
        )
        .unwrap()
    }

    fn plan(name: &str, index: usize, target: Target) -> ColumnPlan {
        ColumnPlan {
            name: name.into(),
            index,
            pg_type: Type::TEXT,
            target,
        }
    }

    #[test]
    fn values_convert_nulls_pass_and_overflow_names_the_column() {
        let b = batch();
        let plans = [plan("n", 0, Target::Int4), plan("s", 1, Target::Jsonb)];
        let readers = ColumnReader::for_batch(&b, &plans).unwrap();
        assert_eq!(readers[0].cell(0).unwrap(), Cell::I32(1));
        assert_eq!(readers[0].cell(1).unwrap(), Cell::Null);
        let err = readers[0].cell(2).unwrap_err().to_string();
        assert!(
            err.contains("column `n`") && err.contains("5000000000"),
            "{err}"
        );
        assert_eq!(readers[1].cell(1).unwrap(), Cell::Jsonb("{}"));
        assert_eq!(readers[1].cell(2).unwrap(), Cell::Null);
    }

    #[test]
    fn unix_milliseconds_become_postgres_microseconds() {
        let b = batch();
        let plans = [plan("n", 0, Target::Timestamp)];
        let readers = ColumnReader::for_batch(&b, &plans).unwrap();
        assert_eq!(
            readers[0].cell(0).unwrap(),
            Cell::I64((1 - PG_EPOCH_UNIX_MS) * 1000)
        );
        let mut buf = BytesMut::new();
        Cell::Jsonb("{}").to_sql(&Type::JSONB, &mut buf).unwrap();
        assert_eq!(&buf[..], b"\x01{}");
    }
}
