//! The table the sink writes into, and how each output column lands in it.
//!
//! A missing table is created with a fixed mapping from the Arrow types
//! operators emit; an existing table is read from `pg_catalog` and checked
//! column by column before the first row is sent, so a mismatch is an error
//! naming the column instead of a COPY failing half-way.
//!
//! | operator output | created as         | also accepted by an existing table      |
//! |-----------------|--------------------|-----------------------------------------|
//! | `int64`         | `bigint`           | `integer`, `smallint` (range-checked), `timestamptz`, `timestamp` (value = Unix ms) |
//! | `float64`       | `double precision` | `real`                                  |
//! | `boolean`       | `boolean`          |                                         |
//! | `utf8`          | `text`             | `varchar`, `char`, `json`, `jsonb`      |
//! | `binary`        | `bytea`            |                                         |
//! | `date`          | `date`             |                                         |
//! | `decimal(P,S)`  | `numeric(P,S)`     | `numeric`                               |
//! | `timestamp(…, ZONE)` | `timestamptz` | `timestamp`                             |
//! | `timestamp(…)`  | `timestamp`        | `timestamptz`                           |
//! | `list<T>`, `struct` | `jsonb` (decimals as exact strings) | `json`, `text`    |

use anyhow::{bail, Context, Result};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, Schema};
use std::collections::HashMap;
use std::sync::Arc;

use postgres::types::Type;
use postgres::GenericClient;
use std::fmt;

/// Quotes an SQL identifier, so names keep their case and may hold any character.
pub fn quote_ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// A schema-qualified table name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableName {
    pub schema: String,
    pub table: String,
}

impl TableName {
    /// The name as SQL (both parts quoted).
    pub fn sql(&self) -> String {
        format!("{}.{}", quote_ident(&self.schema), quote_ident(&self.table))
    }
}

impl fmt::Display for TableName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.schema, self.table)
    }
}

/// How an output value is encoded for its table column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    Int8,
    Int4,
    Int2,
    /// Unix milliseconds into `timestamp`/`timestamptz`.
    Timestamp,
    /// A typed timestamp column (any unit) into `timestamp`/`timestamptz`.
    TypedTimestamp,
    /// Days since 1970-01-01 into `date`.
    Date,
    /// An exact decimal into `numeric`.
    Numeric,
    /// Bytes into `bytea`.
    Bytea,
    Float8,
    Float4,
    Bool,
    /// `text`, `varchar`, `char` and `json` take the UTF-8 bytes as they are.
    Text,
    /// `jsonb` takes a version byte before the text.
    Jsonb,
}

impl Target {
    /// The column type a created table gets for an output column.
    fn created(field: &Field) -> Option<(Target, String)> {
        if field.metadata().contains_key(JSON_OF) {
            return Some((Target::Jsonb, "jsonb".to_string()));
        }
        let (target, sql) = match field.data_type() {
            DataType::Int64 => (Target::Int8, "bigint"),
            DataType::Float64 => (Target::Float8, "double precision"),
            DataType::Boolean => (Target::Bool, "boolean"),
            DataType::Utf8 => (Target::Text, "text"),
            DataType::Binary => (Target::Bytea, "bytea"),
            DataType::Date32 => (Target::Date, "date"),
            DataType::Timestamp(_, Some(_)) => (Target::TypedTimestamp, "timestamptz"),
            DataType::Timestamp(_, None) => (Target::TypedTimestamp, "timestamp"),
            &DataType::Decimal128(p, s) => {
                return Some((Target::Numeric, format!("numeric({p},{s})")))
            }
            _ => return None,
        };
        Some((target, sql.to_string()))
    }

    /// How values of `data_type` are written into a column of type `pg`, if they can be.
    fn for_column(data_type: &DataType, pg: &Type) -> Option<Target> {
        Some(match (data_type, pg) {
            (DataType::Int64, &Type::INT8) => Target::Int8,
            (DataType::Int64, &Type::INT4) => Target::Int4,
            (DataType::Int64, &Type::INT2) => Target::Int2,
            (DataType::Int64, &Type::TIMESTAMPTZ | &Type::TIMESTAMP) => Target::Timestamp,
            (DataType::Float64, &Type::FLOAT8) => Target::Float8,
            (DataType::Float64, &Type::FLOAT4) => Target::Float4,
            (DataType::Boolean, &Type::BOOL) => Target::Bool,
            (DataType::Utf8, &Type::TEXT | &Type::VARCHAR | &Type::BPCHAR | &Type::JSON) => {
                Target::Text
            }
            (DataType::Utf8, &Type::JSONB) => Target::Jsonb,
            (DataType::Decimal128(..), &Type::NUMERIC) => Target::Numeric,
            (DataType::Timestamp(..), &Type::TIMESTAMPTZ | &Type::TIMESTAMP) => {
                Target::TypedTimestamp
            }
            (DataType::Date32, &Type::DATE) => Target::Date,
            (DataType::Binary, &Type::BYTEA) => Target::Bytea,
            _ => return None,
        })
    }

    fn accepted(field: &Field) -> &'static str {
        if field.metadata().contains_key(JSON_OF) {
            return "jsonb, json or text";
        }
        match field.data_type() {
            DataType::Int64 => "bigint, integer, smallint, timestamptz or timestamp",
            DataType::Float64 => "double precision or real",
            DataType::Boolean => "boolean",
            DataType::Decimal128(..) => "numeric",
            DataType::Timestamp(..) => "timestamptz or timestamp",
            DataType::Date32 => "date",
            DataType::Binary => "bytea",
            _ => "text, varchar, char, json or jsonb",
        }
    }
}

/// An output column's type as the pipeline file spells it (`decimal(18,2)`,
/// `list<utf8>`); a list or struct column sent as JSON keeps its own.
pub fn type_name(field: &Field) -> String {
    match field.metadata().get(JSON_OF) {
        Some(original) => original.clone(),
        None => weir_core::schema::type_name(field.data_type()),
    }
}

/// The field metadata key marking a column of JSON texts made from a list
/// or struct column (its value: that column's type); such a column goes
/// into `jsonb`.
const JSON_OF: &str = "weir.postgres.json_of";

/// `batch` with every list and struct column as JSON text (decimals as
/// exact strings), for `jsonb` columns; the same batch when it has none.
pub fn nested_as_json(batch: &RecordBatch) -> Result<RecordBatch> {
    let nested = |t: &DataType| matches!(t, DataType::List(_) | DataType::Struct(_));
    if !batch
        .schema()
        .fields()
        .iter()
        .any(|f| nested(f.data_type()))
    {
        return Ok(batch.clone());
    }
    let mut fields = Vec::with_capacity(batch.num_columns());
    let mut columns = Vec::with_capacity(batch.num_columns());
    for (f, column) in batch.schema().fields().iter().zip(batch.columns()) {
        if nested(f.data_type()) {
            let texts = weir_core::sink::json_texts(column)
                .with_context(|| format!("output column `{}` as JSON", f.name()))?;
            let metadata = HashMap::from([(
                JSON_OF.to_string(),
                weir_core::schema::type_name(f.data_type()),
            )]);
            fields.push(Field::new(f.name(), DataType::Utf8, true).with_metadata(metadata));
            columns.push(Arc::new(texts) as ArrayRef);
        } else {
            fields.push(f.as_ref().clone());
            columns.push(column.clone());
        }
    }
    Ok(RecordBatch::try_new(
        Arc::new(Schema::new(fields)),
        columns,
    )?)
}

/// One column of an existing table, as `pg_catalog` describes it.
#[derive(Debug, Clone)]
pub struct TableColumn {
    pub name: String,
    /// `None` for types the client library does not know (domains, enums…).
    pub pg_type: Option<Type>,
    /// The type as PostgreSQL prints it, for messages.
    pub type_name: String,
    pub not_null: bool,
    /// Has a default, identity or generation expression.
    pub has_default: bool,
}

/// How one output column is written: its position in the batch, its table
/// column and the encoding.
#[derive(Debug, Clone)]
pub struct ColumnPlan {
    pub name: String,
    pub index: usize,
    pub pg_type: Type,
    pub target: Target,
}

/// The table's oid, or `None` if there is no such table. Checking first
/// (rather than only `CREATE … IF NOT EXISTS`) lets a role without CREATE
/// rights on the schema write into tables that exist.
pub fn oid<C: GenericClient>(
    client: &mut C,
    table: &TableName,
) -> Result<Option<u32>, postgres::Error> {
    let row = client.query_one("SELECT to_regclass($1::text)::oid", &[&table.sql()])?;
    Ok(row.get(0))
}

/// Columns of `table`, or `None` if there is no such table.
pub fn columns<C: GenericClient>(
    client: &mut C,
    table: &TableName,
) -> Result<Option<Vec<TableColumn>>, postgres::Error> {
    let Some(oid) = oid(client, table)? else {
        return Ok(None);
    };
    let rows = client.query(
        "SELECT a.attname::text, a.atttypid, format_type(a.atttypid, a.atttypmod), \
                a.attnotnull, a.atthasdef OR a.attidentity <> '' OR a.attgenerated <> '' \
         FROM pg_catalog.pg_attribute a \
         WHERE a.attrelid = $1 AND a.attnum > 0 AND NOT a.attisdropped \
         ORDER BY a.attnum",
        &[&oid],
    )?;
    Ok(Some(
        rows.iter()
            .map(|r| TableColumn {
                name: r.get(0),
                pg_type: Type::from_oid(r.get(1)),
                type_name: r.get(2),
                not_null: r.get(3),
                has_default: r.get(4),
            })
            .collect(),
    ))
}

/// `CREATE TABLE IF NOT EXISTS` for `schema`, every column nullable.
pub fn create_sql(table: &TableName, schema: &Schema) -> Result<String> {
    let mut cols = Vec::new();
    for f in schema.fields() {
        let Some((_, sql_type)) = Target::created(f) else {
            bail!(
                "output column `{}` has type {}, which the PostgreSQL sink cannot store",
                f.name(),
                type_name(f)
            );
        };
        cols.push(format!("{} {sql_type}", quote_ident(f.name())));
    }
    Ok(format!(
        "CREATE TABLE IF NOT EXISTS {} ({})",
        table.sql(),
        cols.join(", ")
    ))
}

/// Matches the operator's output columns to the table's, or explains,
/// naming the column, why the output cannot go into this table.
pub fn plan(
    table: &TableName,
    output: &Schema,
    columns: &[TableColumn],
) -> Result<Vec<ColumnPlan>> {
    let mut plans = Vec::with_capacity(output.fields().len());
    for (index, f) in output.fields().iter().enumerate() {
        let Some(col) = columns.iter().find(|c| c.name == *f.name()) else {
            let created = Target::created(f).map_or_else(|| "text".to_string(), |(_, t)| t);
            bail!(
                "the operator outputs column `{name}` ({dt}), but table {table} has no column \
                 `{name}` (it has: {have}); add it, e.g. ALTER TABLE {sql} ADD COLUMN {q} {created}",
                name = f.name(),
                dt = type_name(f),
                have = columns
                    .iter()
                    .map(|c| c.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
                sql = table.sql(),
                q = quote_ident(f.name()),
            );
        };
        let target = col
            .pg_type
            .as_ref()
            .and_then(|t| Target::for_column(f.data_type(), t));
        let (Some(target), Some(pg_type)) = (target, col.pg_type.clone()) else {
            bail!(
                "column `{}`: the operator outputs {}, which cannot be written into {table}.{} \
                 of type {}; {} output goes into {}",
                f.name(),
                type_name(f),
                col.name,
                col.type_name,
                type_name(f),
                Target::accepted(f)
            );
        };
        plans.push(ColumnPlan {
            name: f.name().clone(),
            index,
            pg_type,
            target,
        });
    }
    if let Some(c) = columns.iter().find(|c| {
        c.not_null && !c.has_default && output.fields().iter().all(|f| f.name() != &c.name)
    }) {
        bail!(
            "table {table} column `{}` is NOT NULL without a default, but the operator does not \
             output it (it outputs: {})",
            c.name,
            output
                .fields()
                .iter()
                .map(|f| f.name().as_str())
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    Ok(plans)
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_schema::Field;

    fn table() -> TableName {
        TableName {
            schema: "public".into(),
            table: "alerts".into(),
        }
    }

    fn col(name: &str, pg: Type, not_null: bool, has_default: bool) -> TableColumn {
        TableColumn {
            name: name.into(),
            type_name: pg.name().into(),
            pg_type: Some(pg),
            not_null,
            has_default,
        }
    }

    fn output() -> Schema {
        Schema::new(vec![
            Field::new("txn_id", DataType::Utf8, true),
            Field::new("score", DataType::Float64, true),
            Field::new("ts", DataType::Int64, true),
        ])
    }

    #[test]
    fn identifiers_are_quoted() {
        assert_eq!(quote_ident(r#"we"ird"#), r#""we""ird""#);
        assert_eq!(
            create_sql(&table(), &output()).unwrap(),
            r#"CREATE TABLE IF NOT EXISTS "public"."alerts" ("txn_id" text, "score" double precision, "ts" bigint)"#
        );
    }

    #[test]
    fn compatible_columns_are_planned_in_output_order() {
        let cols = vec![
            col("ts", Type::TIMESTAMPTZ, false, false),
            col("id", Type::INT8, true, true),
            col("score", Type::FLOAT4, false, false),
            col("txn_id", Type::VARCHAR, true, false),
        ];
        let plans = plan(&table(), &output(), &cols).unwrap();
        let got: Vec<_> = plans
            .iter()
            .map(|p| (p.name.as_str(), p.index, p.target))
            .collect();
        assert_eq!(
            got,
            [
                ("txn_id", 0, Target::Text),
                ("score", 1, Target::Float4),
                ("ts", 2, Target::Timestamp)
            ]
        );
    }

    #[test]
    fn mismatches_name_the_column() {
        let err =
            |cols: Vec<TableColumn>| format!("{:#}", plan(&table(), &output(), &cols).unwrap_err());
        let text = err(vec![
            col("txn_id", Type::TEXT, false, false),
            col("score", Type::TEXT, false, false),
            col("ts", Type::INT8, false, false),
        ]);
        assert!(
            text.contains("column `score`") && text.contains("float64"),
            "{text}"
        );
        let text = err(vec![col("txn_id", Type::TEXT, false, false)]);
        assert!(
            text.contains("no column `score`") && text.contains("ADD COLUMN"),
            "{text}"
        );
        let text = err(vec![
            col("txn_id", Type::TEXT, false, false),
            col("score", Type::FLOAT8, false, false),
            col("ts", Type::INT8, false, false),
            col("analyst", Type::TEXT, true, false),
        ]);
        assert!(text.contains("`analyst` is NOT NULL"), "{text}");
    }
}
