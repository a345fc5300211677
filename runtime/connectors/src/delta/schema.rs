//! A Delta table's schema (`metaData.schemaString`, the protocol's JSON
//! form of a struct type) made from the operator's Arrow output, and the
//! check that an existing table can take that output.

use anyhow::{bail, Result};
use arrow_schema::{DataType, Schema, TimeUnit};
use serde::{Deserialize, Serialize};

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

/// The Delta type of an Arrow column type, for the types a Parquet file
/// of Weir's writes as Delta readers expect them.
fn delta_type(data_type: &DataType) -> Option<&'static str> {
    Some(match data_type {
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
        DataType::Timestamp(TimeUnit::Microsecond, Some(_)) => "timestamp",
        _ => return None,
    })
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
                data_type: t.into(),
                nullable: f.is_nullable(),
                metadata: serde_json::Map::new(),
            }),
            None => bail!(
                "output column `{}` is {}, which the Delta sink cannot write",
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
