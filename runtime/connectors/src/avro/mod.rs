//! Avro, read with arrow-avro straight into Arrow: object container files
//! in a files (or S3) source, and Kafka values in a schema registry's wire
//! format (`registry.rs`, `framed.rs`); and written from Arrow, as a Kafka
//! sink's values in that format (`encode.rs`).
//!
//! The source's declared columns become an Avro **reader schema**
//! ([`reader_schema`]), and every writer's schema is resolved into it by
//! Avro's rules: a field the writer lacks takes the reader's default (a
//! nullable column's is null), a field the reader lacks is skipped, `int`
//! is promoted to `long`, `float` to `double`, `string` and `bytes` into
//! each other. A writer schema that cannot be resolved (a declared column
//! that is neither written nor nullable, a `string` where a `long` is
//! declared) is refused with arrow-avro's reason.

mod blocks;
pub mod encode;
pub mod framed;
pub mod registry;

use anyhow::{bail, Context, Result};
use arrow_array::RecordBatch;
use arrow_avro::reader::ReaderBuilder;
use arrow_avro::schema::AvroSchema;
use arrow_schema::{DataType, Field, Fields, Schema, SchemaRef, TimeUnit};
use bytes::Bytes;
use serde_json::{json, Value};

/// The extension that makes a source file an Avro object container file.
pub const EXTENSION: &str = ".avro";

/// Whether the source file `name` is read as Avro.
pub fn is_avro(name: &str) -> bool {
    name.ends_with(EXTENSION)
}

/// The Avro reader schema of the declared columns, for data written with
/// `writer` (its JSON): a record with one field per column, nullable
/// columns as unions with `null` first and a null default. Avro resolves
/// records only of the same name, so each record takes the name (and
/// namespace) of the writer's record in the same place.
pub fn reader_schema(schema: &Schema, writer: &str) -> Result<AvroSchema> {
    let writer: Value =
        serde_json::from_str(writer).context("the writer's Avro schema is not JSON")?;
    let mut names = Names::default();
    let record = names.record(schema.fields(), Some(&writer), "Row")?;
    Ok(AvroSchema::new(record.to_string()))
}

/// The records a reader schema defines, with the declared fields each was
/// defined for, so that each is defined once.
#[derive(Default)]
struct Names(std::collections::HashMap<String, Fields>);

impl Names {
    /// A record of `fields`, named like `writer` (a record, or a union
    /// holding one, or a reference to one by name) when it is one.
    fn record(&mut self, fields: &Fields, writer: Option<&Value>, fallback: &str) -> Result<Value> {
        let (name, namespace) = record_name(writer).unwrap_or((fallback.to_string(), None));
        let full = match &namespace {
            Some(ns) => format!("{ns}.{name}"),
            None => name.clone(),
        };
        if let Some(defined) = self.0.get(&full) {
            // Avro defines a record once and refers to it by name after:
            // every column read from it must declare the same fields.
            if defined != fields {
                bail!(
                    "the writer's record `{full}` is read into two struct columns declared with \
                     different fields; declare every column of that record with the same fields"
                );
            }
            return Ok(json!(full));
        }
        self.0.insert(full.clone(), fields.clone());
        let writer_fields = writer.and_then(record_of).and_then(|r| r.get("fields"));
        let fields = fields
            .iter()
            .map(|f| {
                let writer_type = writer_fields
                    .and_then(Value::as_array)
                    .and_then(|fs| fs.iter().find(|w| w["name"] == f.name().as_str()))
                    .map(|w| &w["type"]);
                self.field(f, writer_type, &format!("{name}_{}", f.name()))
            })
            .collect::<Result<Vec<_>>>()?;
        let mut record = json!({ "type": "record", "name": name, "fields": fields });
        if let Some(ns) = namespace {
            record["namespace"] = json!(ns);
        }
        Ok(record)
    }

    fn field(&mut self, field: &Field, writer: Option<&Value>, path: &str) -> Result<Value> {
        let name = field.name();
        if !is_avro_name(name) {
            bail!(
                "column `{name}` cannot be read from Avro: Avro names are letters, digits and \
                 `_`, not starting with a digit"
            );
        }
        let t = self
            .avro_type(field.data_type(), writer, path)
            .with_context(|| format!("column `{name}`"))?;
        Ok(if field.is_nullable() {
            json!({ "name": name, "type": ["null", t], "default": null })
        } else {
            json!({ "name": name, "type": t })
        })
    }

    /// The Avro type a declared column's values are read as; `writer` is
    /// the writer's type in the same place, if it has one.
    fn avro_type(&mut self, t: &DataType, writer: Option<&Value>, path: &str) -> Result<Value> {
        let logical = |base: &str, logical: &str| json!({ "type": base, "logicalType": logical });
        Ok(match t {
            DataType::Int64 => json!("long"),
            DataType::Float64 => json!("double"),
            DataType::Boolean => json!("boolean"),
            DataType::Utf8 => json!("string"),
            DataType::Binary => json!("bytes"),
            DataType::Date32 => {
                check_date_writer(writer)?;
                logical("int", "date")
            }
            DataType::Decimal128(precision, scale) => {
                check_decimal_writer(writer, *precision, *scale)?;
                json!({
                    "type": "bytes", "logicalType": "decimal", "precision": precision, "scale": scale
                })
            }
            DataType::Timestamp(unit, zone) => {
                check_timestamp_writer(writer, *unit, zone.is_some())?;
                let unit = match unit {
                    TimeUnit::Millisecond => "millis",
                    TimeUnit::Microsecond => "micros",
                    TimeUnit::Nanosecond => "nanos",
                    TimeUnit::Second => bail!(
                        "Avro has no timestamp in seconds: declare timestamp(ms), (us) or (ns)"
                    ),
                };
                let local = if zone.is_some() { "" } else { "local-" };
                logical("long", &format!("{local}timestamp-{unit}"))
            }
            DataType::List(item) => {
                let writer_items = writer.and_then(|w| branch(w, "array")).map(|a| &a["items"]);
                let items =
                    self.avro_type(item.data_type(), writer_items, &format!("{path}_item"))?;
                let items = if item.is_nullable() {
                    json!(["null", items])
                } else {
                    items
                };
                json!({ "type": "array", "items": items })
            }
            DataType::Struct(fields) => self.record(fields, writer, path)?,
            other => bail!("{other} has no Avro type here"),
        })
    }
}

/// Whether `name` is an Avro name (of a field, or one part of a record's
/// full name): a letter or `_`, then letters, digits or `_`.
pub(crate) fn is_avro_name(name: &str) -> bool {
    name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// `t` without a `null` branch: the member of a `["null", T]` union.
fn non_null(t: &Value) -> &Value {
    match t {
        Value::Array(members) => members.iter().find(|m| *m != "null").unwrap_or(t),
        _ => t,
    }
}

/// Avro's resolution ignores logical types: a `string` or plain `bytes`
/// would be read into a decimal as its raw bytes. Money is read only from
/// an Avro decimal of the declared scale.
fn check_decimal_writer(writer: Option<&Value>, precision: u8, scale: i8) -> Result<()> {
    let Some(w) = writer.map(non_null) else {
        return Ok(());
    };
    let logical = w.get("logicalType").and_then(Value::as_str);
    let written_scale = w.get("scale").and_then(Value::as_i64).unwrap_or(0);
    let written_precision = w.get("precision").and_then(Value::as_i64).unwrap_or(0);
    if logical != Some("decimal") || written_scale != i64::from(scale) {
        bail!(
            "the writer's type is {w}: a decimal({precision},{scale}) is read only from an Avro \
             decimal of scale {scale}, never from text, plain bytes or another scale"
        );
    }
    if written_precision > i64::from(precision) {
        bail!(
            "the writer's decimal has precision {written_precision}, more than the declared \
             decimal({precision},{scale}) holds"
        );
    }
    Ok(())
}

/// A writer's timestamp of another unit, or of the other kind (an instant
/// for a wall-clock column or the other way round), or another logical
/// type on a `long` would be read as counts of the declared unit
/// (resolution ignores logical types): refused.
fn check_timestamp_writer(writer: Option<&Value>, unit: TimeUnit, zoned: bool) -> Result<()> {
    let Some(logical) = writer
        .map(non_null)
        .and_then(|w| w.get("logicalType"))
        .and_then(Value::as_str)
    else {
        return Ok(());
    };
    let (local, plain) = match logical.strip_prefix("local-") {
        Some(rest) => (true, rest),
        None => (false, logical),
    };
    let written = match plain {
        "timestamp-millis" => TimeUnit::Millisecond,
        "timestamp-micros" => TimeUnit::Microsecond,
        "timestamp-nanos" => TimeUnit::Nanosecond,
        _ => bail!("the writer's type is {logical}, not a timestamp"),
    };
    if written != unit {
        bail!(
            "the writer's type is {logical}, another unit than the declared {unit:?}: \
             declare the column in the writer's unit"
        );
    }
    if local == zoned {
        bail!(
            "the writer's type is {logical}, but the column is declared {}: an instant and a \
             wall-clock time are not read as each other",
            if zoned {
                "with a zone (an instant)"
            } else {
                "without a zone (a wall-clock time)"
            }
        );
    }
    Ok(())
}

/// A date only from a plain `int` or a `date`.
fn check_date_writer(writer: Option<&Value>) -> Result<()> {
    match writer
        .map(non_null)
        .and_then(|w| w.get("logicalType"))
        .and_then(Value::as_str)
    {
        None | Some("date") => Ok(()),
        Some(other) => bail!("the writer's type is {other}, not a date"),
    }
}

/// The first branch of `t` (itself, or a member of a union) of Avro
/// type `kind`.
fn branch<'a>(t: &'a Value, kind: &str) -> Option<&'a Value> {
    match t {
        Value::Array(members) => members.iter().find_map(|m| branch(m, kind)),
        Value::Object(o) if o.get("type").and_then(Value::as_str) == Some(kind) => Some(t),
        _ => None,
    }
}

/// The record definition `t` holds, if any.
fn record_of(t: &Value) -> Option<&Value> {
    branch(t, "record")
}

/// The name and namespace of the record `t` is, holds, or names.
fn record_name(t: Option<&Value>) -> Option<(String, Option<String>)> {
    let t = t?;
    let split = |full: &str| match full.rsplit_once('.') {
        Some((ns, name)) => (name.to_string(), Some(ns.to_string())),
        None => (full.to_string(), None),
    };
    if let Some(record) = record_of(t) {
        let name = record.get("name")?.as_str()?;
        let namespace = record.get("namespace").and_then(Value::as_str);
        return Some(match (name.contains('.'), namespace) {
            (false, Some(ns)) => (name.to_string(), Some(ns.to_string())),
            _ => split(name),
        });
    }
    let reference = match t {
        Value::String(s) => Some(s.as_str()),
        Value::Array(members) => members
            .iter()
            .filter_map(Value::as_str)
            .find(|s| !PRIMITIVES.contains(s)),
        _ => None,
    }?;
    (!PRIMITIVES.contains(&reference)).then(|| split(reference))
}

/// Avro's primitive type names: any other name refers to a named type.
const PRIMITIVES: [&str; 8] = [
    "null", "boolean", "int", "long", "float", "double", "bytes", "string",
];

/// The rows of the Avro object container file `data` (named `origin` in
/// errors) in `schema`, in batches of at most `batch_rows`: the file's
/// writer schema resolved into the declared columns.
pub fn decode_file(
    data: Bytes,
    schema: &SchemaRef,
    batch_rows: usize,
    origin: &str,
) -> Result<Vec<RecordBatch>> {
    let header = arrow_avro::reader::read_header_info(std::io::Cursor::new(&data))
        .with_context(|| format!("{origin} is not an Avro object container file"))?;
    let writer = header
        .writer_schema()
        .with_context(|| format!("{origin} has no readable writer schema"))?;
    let writer_json: Value = serde_json::from_str(&writer.json_string)
        .with_context(|| format!("{origin}'s writer schema is not JSON"))?;
    blocks::check(
        &data,
        usize::try_from(header.header_len())?,
        header.sync(),
        header
            .compression()
            .with_context(|| format!("{origin}'s codec"))?,
        &writer_json,
    )
    .with_context(|| format!("{origin} is not a whole Avro file"))?;
    let reader_schema = reader_schema(schema, &writer.json_string).with_context(|| {
        format!("{origin}'s writer schema does not resolve into the declared columns")
    })?;
    let reader = ReaderBuilder::new()
        .with_batch_size(batch_rows.max(1))
        .with_reader_schema(reader_schema)
        .build(std::io::Cursor::new(data))
        .with_context(|| {
            format!("{origin} is not an Avro file whose schema resolves into the declared columns")
        })?;
    let mut out = Vec::new();
    for batch in reader {
        let batch = batch.with_context(|| format!("reading {origin}"))?;
        let batch = crate::files::conform::conform(&batch, schema, origin)?;
        let first = out.iter().map(RecordBatch::num_rows).sum::<usize>();
        let rows: Vec<usize> = (first..first + batch.num_rows()).collect();
        let (batch, refused) = framed::without_overlong_decimals(batch, &rows)?;
        if let Some((row, why)) = refused.first() {
            bail!("{origin}: record {}: {why}", row + 1);
        }
        out.push(batch);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn address(fields: &[&str]) -> DataType {
        DataType::Struct(
            fields
                .iter()
                .map(|f| Field::new(*f, DataType::Utf8, true))
                .collect(),
        )
    }

    /// A writer defines `Address` once and names it again for `work`.
    const WRITER: &str = r#"{"type":"record","name":"Customer","fields":[
      {"name":"home","type":{"type":"record","name":"Address","fields":[
        {"name":"street","type":"string"},{"name":"city","type":"string"}]}},
      {"name":"work","type":"Address"}]}"#;

    #[test]
    fn columns_read_from_one_writer_record_must_declare_the_same_fields() {
        let alike = Schema::new(vec![
            Field::new("home", address(&["street", "city"]), false),
            Field::new("work", address(&["street", "city"]), false),
        ]);
        let reader: Value =
            serde_json::from_str(&reader_schema(&alike, WRITER).unwrap().json_string).unwrap();
        assert_eq!(reader["fields"][1]["type"], "Address");
        let unlike = Schema::new(vec![
            Field::new("home", address(&["street", "city"]), false),
            Field::new("work", address(&["street"]), false),
        ]);
        let err = format!("{:#}", reader_schema(&unlike, WRITER).unwrap_err());
        assert!(
            err.contains("record `Address`") && err.contains("different fields"),
            "{err}"
        );
    }
}
