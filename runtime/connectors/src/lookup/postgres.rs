//! A reference table from a PostgreSQL query: the rows it returns, its
//! columns by name in the declared types (`text`/`varchar` for utf8,
//! `bigint`/`integer`/`smallint` for int64, `double precision`/`real`/
//! `numeric` cast by the query for float64, `boolean`). A connection or
//! query failure is an error naming the table and server; the engine keeps
//! the version before on a refresh.

use crate::postgres::{endpoint, location};
use anyhow::{anyhow, Context, Result};
use arrow_array::builder::{BooleanBuilder, Float64Builder, Int64Builder, StringBuilder};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, SchemaRef};
use postgres::types::Type;
use postgres::Row;
use std::sync::Arc;
use std::time::Duration;

/// How long a lookup query waits for the server to answer a connect.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// The rows `query` returns from the database at `url`, in `schema`.
pub fn query_table(url: &str, query: &str, schema: &SchemaRef) -> Result<RecordBatch> {
    let (cfg, connector) = endpoint(url, CONNECT_TIMEOUT, "weir-lookup")?;
    let server = location(&cfg);
    let mut client = connector
        .connect(&cfg)
        .with_context(|| format!("connecting to PostgreSQL at {server}"))?;
    let rows = client
        .query(query, &[])
        .with_context(|| format!("running the lookup query on {server}"))?;
    let columns = schema
        .fields()
        .iter()
        .map(|f| column(&rows, f.name(), f.data_type()))
        .collect::<Result<Vec<_>>>()?;
    RecordBatch::try_new(schema.clone(), columns)
        .map_err(|e| anyhow!("the query's rows do not fit the declared columns: {e}"))
}

/// Column `name` of every row as `data_type`.
fn column(rows: &[Row], name: &str, data_type: &DataType) -> Result<ArrayRef> {
    let at = |row: usize| format!("row {}, column `{name}`", row + 1);
    let index = match rows.first() {
        Some(r) => Some(
            r.columns()
                .iter()
                .position(|c| c.name() == name)
                .with_context(|| format!("the query returns no column `{name}`"))?,
        ),
        None => None,
    };
    Ok(match data_type {
        DataType::Utf8 => {
            let mut b = StringBuilder::new();
            for (i, r) in rows.iter().enumerate() {
                let v: Option<String> = r.try_get(index.unwrap_or(0)).with_context(|| at(i))?;
                b.append_option(v);
            }
            Arc::new(b.finish())
        }
        DataType::Int64 => {
            let mut b = Int64Builder::new();
            for (i, r) in rows.iter().enumerate() {
                let c = index.unwrap_or(0);
                let v: Option<i64> = match *r.columns()[c].type_() {
                    Type::INT4 => r.try_get::<_, Option<i32>>(c).map(|v| v.map(i64::from)),
                    Type::INT2 => r.try_get::<_, Option<i16>>(c).map(|v| v.map(i64::from)),
                    _ => r.try_get(c),
                }
                .with_context(|| at(i))?;
                b.append_option(v);
            }
            Arc::new(b.finish())
        }
        DataType::Float64 => {
            let mut b = Float64Builder::new();
            for (i, r) in rows.iter().enumerate() {
                let c = index.unwrap_or(0);
                let v: Option<f64> = match *r.columns()[c].type_() {
                    Type::FLOAT4 => r.try_get::<_, Option<f32>>(c).map(|v| v.map(f64::from)),
                    _ => r.try_get(c),
                }
                .with_context(|| at(i))?;
                b.append_option(v);
            }
            Arc::new(b.finish())
        }
        DataType::Boolean => {
            let mut b = BooleanBuilder::new();
            for (i, r) in rows.iter().enumerate() {
                let v: Option<bool> = r.try_get(index.unwrap_or(0)).with_context(|| at(i))?;
                b.append_option(v);
            }
            Arc::new(b.finish())
        }
        other => {
            return Err(anyhow!(
                "column `{name}`: {other} is not a lookup column type"
            ))
        }
    })
}
