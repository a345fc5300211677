//! Arrow values as PostgreSQL parameters. Each output column is downcast
//! once per batch into a [`ColumnReader`]; a row is then a slice of
//! [`Cell`]s, already converted to the table column's type (with range
//! checks that name the column), which both the COPY and the INSERT path
//! send as they are.

use super::table::{ColumnPlan, Target};
use anyhow::{bail, Context, Result};
use arrow_array::{
    Array, BinaryArray, BooleanArray, Date32Array, Decimal128Array, Float64Array, Int64Array,
    RecordBatch, StringArray,
};
use arrow_schema::{DataType, TimeUnit};
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
    Bytes(&'a [u8]),
    /// `numeric`: an unscaled value and its scale.
    Numeric(i128, i8),
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
            Cell::Bytes(b) => out.put_slice(b),
            Cell::Numeric(v, scale) => put_numeric(v, scale, out),
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
/// Days from the Unix epoch to PostgreSQL's.
const PG_EPOCH_UNIX_DAYS: i32 = 10_957;

/// `numeric`'s binary form (as PostgreSQL's `numeric_send` writes it): the
/// count of base-10000 digits, the weight of the first, the sign, the
/// display scale, then the digits. `value` is unscaled (`12345` at scale
/// 2 is 123.45); exact, never through a float.
fn put_numeric(value: i128, scale: i8, out: &mut BytesMut) {
    let scale = scale.max(0) as usize;
    let abs = value.unsigned_abs();
    let digits = abs.to_string();
    let (int_part, frac_part) = if digits.len() > scale {
        digits.split_at(digits.len() - scale)
    } else {
        ("", digits.as_str())
    };
    let frac = format!("{frac_part:0>scale$}");
    let int_pad = format!("{}{int_part}", "0".repeat((4 - int_part.len() % 4) % 4));
    let frac_pad = format!("{frac}{}", "0".repeat((4 - frac.len() % 4) % 4));
    let group = |s: &str| -> Vec<i16> {
        s.as_bytes()
            .chunks(4)
            .map(|c| c.iter().fold(0i16, |n, d| n * 10 + i16::from(d - b'0')))
            .collect()
    };
    let int_groups = group(&int_pad);
    let mut weight = int_groups.len() as i16 - 1;
    let mut groups: Vec<i16> = int_groups.into_iter().chain(group(&frac_pad)).collect();
    let leading = groups.iter().take_while(|&&g| g == 0).count();
    groups.drain(..leading);
    weight -= leading as i16;
    while groups.last() == Some(&0) {
        groups.pop();
    }
    if groups.is_empty() {
        weight = 0;
    }
    out.put_i16(groups.len() as i16);
    out.put_i16(weight);
    out.put_u16(if value < 0 && !groups.is_empty() {
        0x4000
    } else {
        0
    });
    out.put_i16(scale as i16);
    for g in groups {
        out.put_i16(g);
    }
}

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
    Binary(&'a BinaryArray),
    Date(&'a Date32Array),
    Decimal(&'a Decimal128Array, i8),
    /// A timestamp column's values and how many microseconds one of its
    /// units is (`None`: nanoseconds, divided by 1,000).
    Timestamp(&'a [i64], &'a dyn Array, Option<i64>),
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
                    Target::Bytea => Values::Binary(downcast(array, &p.name)?),
                    Target::Date => Values::Date(downcast(array, &p.name)?),
                    Target::Numeric => {
                        let a: &Decimal128Array = downcast(array, &p.name)?;
                        Values::Decimal(a, a.scale())
                    }
                    Target::TypedTimestamp => timestamps(array, &p.name)?,
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
            Values::Binary(a) => a.is_null(row),
            Values::Date(a) => a.is_null(row),
            Values::Decimal(a, _) => a.is_null(row),
            Values::Timestamp(_, a, _) => a.is_null(row),
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
            (Values::Binary(a), _) => Cell::Bytes(a.value(row)),
            (Values::Date(a), _) => {
                let days = a.value(row);
                Cell::I32(days.checked_sub(PG_EPOCH_UNIX_DAYS).ok_or_else(|| {
                    self.out_of_range(i64::from(days), "a date (days since 1970)")
                })?)
            }
            (Values::Decimal(a, scale), _) => Cell::Numeric(a.value(row), *scale),
            (Values::Timestamp(values, _, micros_per_unit), _) => {
                let v = values[row];
                let micros = match micros_per_unit {
                    Some(m) => v.checked_mul(*m),
                    None if v % 1000 == 0 => Some(v / 1000),
                    None => {
                        bail!(
                            "column `{}`: {v} ns is finer than PostgreSQL's timestamps \
                             (microseconds) keep",
                            self.name
                        )
                    }
                };
                let pg = micros
                    .and_then(|m| m.checked_sub(PG_EPOCH_UNIX_MS * 1000))
                    .ok_or_else(|| self.out_of_range(v, "a PostgreSQL timestamp"))?;
                Cell::I64(pg)
            }
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

/// A timestamp column of any unit, with its conversion to microseconds.
fn timestamps<'a>(array: &'a dyn Array, name: &str) -> Result<Values<'a>> {
    use arrow_array::types::*;
    use arrow_array::{ArrowPrimitiveType, PrimitiveArray};
    fn raw<'a, T: ArrowPrimitiveType<Native = i64>>(
        array: &'a dyn Array,
        name: &str,
    ) -> Result<&'a [i64]> {
        Ok(downcast::<PrimitiveArray<T>>(array, name)?.values())
    }
    Ok(match array.data_type() {
        DataType::Timestamp(TimeUnit::Second, _) => Values::Timestamp(
            raw::<TimestampSecondType>(array, name)?,
            array,
            Some(1_000_000),
        ),
        DataType::Timestamp(TimeUnit::Millisecond, _) => Values::Timestamp(
            raw::<TimestampMillisecondType>(array, name)?,
            array,
            Some(1_000),
        ),
        DataType::Timestamp(TimeUnit::Microsecond, _) => Values::Timestamp(
            raw::<TimestampMicrosecondType>(array, name)?,
            array,
            Some(1),
        ),
        DataType::Timestamp(TimeUnit::Nanosecond, _) => {
            Values::Timestamp(raw::<TimestampNanosecondType>(array, name)?, array, None)
        }
        _ => bail!("output column `{name}` changed type since the table was checked"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_schema::{Field, Schema};
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

    #[test]
    fn numeric_is_sent_in_postgres_base_10000_form() {
        let encode = |v: i128, scale: i8| {
            let mut buf = BytesMut::new();
            put_numeric(v, scale, &mut buf);
            buf.chunks(2)
                .map(|c| i16::from_be_bytes([c[0], c[1]]))
                .collect::<Vec<i16>>()
        };
        // ndigits, weight, sign, dscale, digits…
        assert_eq!(encode(12345, 2), [2, 0, 0, 2, 123, 4500], "123.45");
        assert_eq!(encode(-1, 2), [1, -1, 0x4000, 2, 100], "-0.01");
        assert_eq!(encode(0, 2), [0, 0, 0, 2], "0.00");
        assert_eq!(encode(100_000_000, 0), [1, 2, 0, 0, 1], "10^8");
        assert_eq!(
            encode(123_456_789, 4),
            [3, 1, 0, 4, 1, 2345, 6789],
            "12345.6789"
        );
        assert_eq!(encode(5, 5), [1, -2, 0, 5, 5000], "0.00005");
    }
}
