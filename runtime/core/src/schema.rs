//! The columns a source declares (`[[source.schema]]` in the pipeline
//! file) and the Arrow schema its batches have.

use anyhow::{bail, Result};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// Type of a declared source column.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ColumnType {
    Int64,
    Float64,
    Boolean,
    Utf8,
}

/// One declared column of the source schema.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ColumnConfig {
    /// The column's name in the input and in the batches.
    pub name: String,
    /// `int64`, `float64`, `boolean` or `utf8`.
    #[serde(rename = "type")]
    pub data_type: ColumnType,
    /// Whether rows may leave it out (default: no).
    #[serde(default)]
    pub nullable: bool,
}

/// The Arrow schema for declared columns.
pub fn arrow_schema(columns: &[ColumnConfig]) -> SchemaRef {
    let fields: Vec<Field> = columns
        .iter()
        .map(|c| {
            let t = match c.data_type {
                ColumnType::Int64 => DataType::Int64,
                ColumnType::Float64 => DataType::Float64,
                ColumnType::Boolean => DataType::Boolean,
                ColumnType::Utf8 => DataType::Utf8,
            };
            Field::new(&c.name, t, c.nullable)
        })
        .collect();
    Arc::new(Schema::new(fields))
}

/// Checks declared columns: at least one, each named, no name twice.
pub fn check(schema: &[ColumnConfig]) -> Result<()> {
    if schema.is_empty() {
        bail!("`source.schema` must declare at least one column");
    }
    for (i, c) in schema.iter().enumerate() {
        if c.name.is_empty() {
            bail!("`source.schema[{i}].name` must not be empty");
        }
        if schema[..i].iter().any(|o| o.name == c.name) {
            bail!("`source.schema` declares column `{}` twice", c.name);
        }
    }
    Ok(())
}
