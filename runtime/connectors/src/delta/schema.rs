//! A Delta table's schema (`metaData.schemaString`, the protocol's JSON
//! form of a struct type) made from the operator's Arrow output, and the
//! check that an existing table can take that output.

use anyhow::{bail, Context, Result};
use arrow_array::RecordBatch;
use arrow_schema::{DataType, Schema, TimeUnit};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// A table's columns, as `schemaString` holds them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeltaSchema {
    /// Always `"struct"`.
    #[serde(rename = "type")]
    pub kind: String,
    pub fields: Vec<DeltaField>,
}

/// One column of a [`DeltaSchema`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeltaField {
    pub name: String,
    /// A primitive type's name (`"long"`), or a nested type's object.
    #[serde(rename = "type")]
    pub data_type: serde_json::Value,
    pub nullable: bool,
    #[serde(default)]
    pub metadata: serde_json::Map<String, serde_json::Value>,
}

/// The Delta type of an Arrow column type (a primitive's name, or a nested
/// type's object), for the types a Parquet file of Weir's writes as Delta
/// readers expect them; timestamps with a zone of any unit are written as
/// microseconds ([`for_delta`]). `None`: Delta cannot hold it as written.
fn delta_type(data_type: &DataType) -> Option<serde_json::Value> {
    let name = match data_type {
        DataType::Utf8 | DataType::LargeUtf8 => "string",
        DataType::Int64 => "long",
        DataType::Int32 => "integer",
        DataType::Int16 => "short",
        DataType::Int8 => "byte",
        DataType::Float64 => "double",
        DataType::Float32 => "float",
        DataType::Boolean => "boolean",
        DataType::Binary | DataType::LargeBinary => "binary",
        DataType::Date32 => "date",
        DataType::Timestamp(_, Some(_)) => "timestamp",
        &DataType::Decimal128(p, s) if p <= 38 && s >= 0 => {
            return Some(format!("decimal({p},{s})").into())
        }
        DataType::List(item) => {
            return Some(serde_json::json!({
                "type": "array",
                "elementType": delta_type(item.data_type())?,
                "containsNull": item.is_nullable(),
            }))
        }
        DataType::Struct(fields) => {
            let fields = fields
                .iter()
                .map(|f| {
                    Some(serde_json::json!({
                        "name": f.name(),
                        "type": delta_type(f.data_type())?,
                        "nullable": f.is_nullable(),
                        "metadata": {},
                    }))
                })
                .collect::<Option<Vec<_>>>()?;
            return Some(serde_json::json!({"type": "struct", "fields": fields}));
        }
        _ => return None,
    };
    Some(name.into())
}

/// `batch` as the Delta sink writes it: top-level timestamp columns of a
/// unit other than microseconds converted to microseconds (Delta's
/// timestamps); nanoseconds that microseconds cannot hold are refused,
/// naming the column.
pub fn for_delta(batch: &RecordBatch) -> Result<RecordBatch> {
    let schema = batch.schema();
    let mut fields = Vec::with_capacity(schema.fields().len());
    let mut columns = Vec::with_capacity(schema.fields().len());
    for (f, column) in schema.fields().iter().zip(batch.columns()) {
        match f.data_type() {
            DataType::Timestamp(unit, tz) if *unit != TimeUnit::Microsecond => {
                if *unit == TimeUnit::Nanosecond {
                    let ns = column
                        .as_any()
                        .downcast_ref::<arrow_array::TimestampNanosecondArray>()
                        .context("a nanosecond timestamp column")?;
                    if let Some(v) = ns.iter().flatten().find(|v| v % 1000 != 0) {
                        bail!(
                            "column `{}`: {v} ns is finer than Delta's timestamps \
                             (microseconds) keep",
                            f.name()
                        );
                    }
                }
                let micros = DataType::Timestamp(TimeUnit::Microsecond, tz.clone());
                columns.push(arrow_cast::cast(column, &micros).with_context(|| {
                    format!("column `{}`: converting to microseconds", f.name())
                })?);
                fields.push(f.as_ref().clone().with_data_type(micros));
            }
            _ => {
                columns.push(column.clone());
                fields.push(f.as_ref().clone());
            }
        }
    }
    Ok(RecordBatch::try_new(
        Arc::new(Schema::new(fields)),
        columns,
    )?)
}

/// The table schema of the operator's output `schema`; a column of a type
/// Delta cannot hold as written is an error naming it.
pub fn from_arrow(schema: &Schema) -> Result<DeltaSchema> {
    let fields = schema
        .fields()
        .iter()
        .map(|f| match delta_type(f.data_type()) {
            Some(t) => Ok(DeltaField {
                name: f.name().clone(),
                data_type: t,
                nullable: f.is_nullable(),
                metadata: serde_json::Map::new(),
            }),
            None => bail!(
                "output column `{}` is {}, which the Delta sink cannot write (a timestamp \
                 needs a time zone: Delta's are instants)",
                f.name(),
                f.data_type()
            ),
        })
        .collect::<Result<_>>()?;
    Ok(DeltaSchema {
        kind: "struct".into(),
        fields,
    })
}

/// Checks that rows of schema `ours` may be appended to a table of schema
/// `table` (at `url`): the same columns by name, of the same types, and
/// no null into a column the table declares non-nullable.
pub fn check(table: &DeltaSchema, ours: &DeltaSchema, url: &str) -> Result<()> {
    let names = |s: &DeltaSchema| {
        s.fields
            .iter()
            .map(|f| f.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    for f in &ours.fields {
        let Some(t) = table.fields.iter().find(|t| t.name == f.name) else {
            bail!(
                "the operator's output column `{}` is not in the Delta table {url} (its columns: \
                 {}); write to a new table, or add the column to this one",
                f.name,
                names(table)
            );
        };
        if t.data_type != f.data_type {
            bail!(
                "column `{}` is {} in the operator's output but {} in the Delta table {url}",
                f.name,
                f.data_type,
                t.data_type
            );
        }
        if f.nullable && !t.nullable {
            bail!(
                "column `{}` may be null in the operator's output, but the Delta table {url} \
                 declares it not nullable",
                f.name
            );
        }
    }
    if let Some(t) = table
        .fields
        .iter()
        .find(|t| !ours.fields.iter().any(|f| f.name == t.name))
    {
        bail!(
            "the Delta table {url} has column `{}`, which the operator does not output (its \
             output: {})",
            t.name,
            names(ours)
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_schema::Field;

    fn schema(fields: Vec<Field>) -> DeltaSchema {
        from_arrow(&Schema::new(fields)).unwrap()
    }

    #[test]
    fn output_columns_become_delta_types_and_mismatches_name_the_column() {
        let ours = schema(vec![
            Field::new("card", DataType::Utf8, false),
            Field::new("score", DataType::Float64, true),
        ]);
        let text = serde_json::to_string(&ours).unwrap();
        assert_eq!(
            text,
            r#"{"type":"struct","fields":[{"name":"card","type":"string","nullable":false,"metadata":{}},{"name":"score","type":"double","nullable":true,"metadata":{}}]}"#
        );
        check(&ours, &ours, "t").unwrap();

        let other_type = schema(vec![
            Field::new("card", DataType::Utf8, false),
            Field::new("score", DataType::Int64, true),
        ]);
        let err = check(&other_type, &ours, "t").unwrap_err().to_string();
        assert!(err.contains("column `score` is \"double\""), "{err}");

        let fewer = schema(vec![Field::new("card", DataType::Utf8, false)]);
        let err = check(&fewer, &ours, "t").unwrap_err().to_string();
        assert!(err.contains("output column `score` is not in"), "{err}");
        let err = check(&ours, &fewer, "t").unwrap_err().to_string();
        assert!(err.contains("has column `score`"), "{err}");

        let strict = schema(vec![
            Field::new("card", DataType::Utf8, false),
            Field::new("score", DataType::Float64, false),
        ]);
        let err = check(&strict, &ours, "t").unwrap_err().to_string();
        assert!(err.contains("`score` may be null"), "{err}");

        let err = from_arrow(&Schema::new(vec![Field::new(
            "t",
            DataType::Timestamp(TimeUnit::Millisecond, None),
            true,
        )]))
        .unwrap_err()
        .to_string();
        assert!(err.contains("output column `t`"), "{err}");
    }
}
