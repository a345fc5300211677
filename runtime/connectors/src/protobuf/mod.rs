//! Protobuf values: one message type of a descriptor set (what
//! `protoc --include_imports --descriptor_set_out` writes), each value
//! decoded with prost-reflect and read into the declared columns through
//! protobuf's JSON mapping, so the JSON decoder's exact rules apply
//! unchanged: a decimal from a `string` field's digits (or a `double`'s
//! shortest form), never rounded; a timestamp from a
//! `google.protobuf.Timestamp`; a nested message into a `struct`, a
//! `repeated` field into a `list`.
//!
//! The mapping differs from protobuf's canonical JSON where the declared
//! columns need it: fields keep their `.proto` names (`card_id`, not
//! `cardId`), 64-bit integers stay numbers, `bytes` become hex (how a
//! `binary` column is read from JSON), and a field without presence that is
//! not set reads as its default (`0`, `""`), as protobuf defines it; a
//! message field, an `optional` field or a wrapper (`StringValue`…) that is
//! not set reads as null.

use anyhow::{bail, Context, Result};
use prost_reflect::{
    DescriptorPool, DynamicMessage, FieldDescriptor, Kind, MapKey, ReflectMessage, Value,
};
use serde::Deserialize;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// `protobuf = { descriptor_set = "payments.desc", message = "fraud.Payment" }`:
/// how Protobuf values are decoded (`value_format = "protobuf"`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProtobufConfig {
    /// A `FileDescriptorSet` with the message and everything it imports
    /// (`protoc --include_imports --descriptor_set_out=…`); relative to the
    /// pipeline file.
    pub descriptor_set: PathBuf,
    /// The values' message type, fully qualified (`package.Message`).
    pub message: String,
}

/// Nesting deeper than this is refused (prost-reflect's own decoding limit
/// is 100): a value cannot make the mapping recurse without bound.
const MAX_DEPTH: usize = 64;

/// Turns values of one message type into JSON text for the JSON decoder.
#[derive(Debug, Clone)]
pub struct ProtobufDecoder {
    message: prost_reflect::MessageDescriptor,
}

impl ProtobufDecoder {
    /// Reads the descriptor set and finds the message type in it; a missing
    /// file, a file that is not a descriptor set, or a type it lacks is an
    /// error naming what is there.
    pub fn open(config: &ProtobufConfig) -> Result<Self> {
        let bytes = std::fs::read(&config.descriptor_set).with_context(|| {
            format!(
                "reading the descriptor set {}",
                config.descriptor_set.display()
            )
        })?;
        Self::from_bytes(&bytes, &config.message, &config.descriptor_set)
    }

    /// [`ProtobufDecoder::open`] over the descriptor set's bytes.
    pub fn from_bytes(bytes: &[u8], message: &str, origin: &Path) -> Result<Self> {
        let pool = DescriptorPool::decode(bytes).with_context(|| {
            format!(
                "{} is not a protobuf descriptor set (make one with `protoc --include_imports \
                 --descriptor_set_out=FILE`)",
                origin.display()
            )
        })?;
        let Some(message) = pool.get_message_by_name(message) else {
            let mut names: Vec<String> = pool
                .all_messages()
                .map(|m| m.full_name().to_string())
                .filter(|n| !n.starts_with("google.protobuf."))
                .collect();
            names.sort();
            names.truncate(20);
            bail!(
                "`protobuf.message`: {} has no message `{message}` (it has: {})",
                origin.display(),
                names.join(", ")
            );
        };
        Ok(ProtobufDecoder { message })
    }

    /// One value as a JSON object in the declared columns' spellings, or
    /// why it is not a message of the type.
    pub fn to_json(&self, bytes: &[u8]) -> Result<Vec<u8>, String> {
        let message = DynamicMessage::decode(self.message.clone(), bytes)
            .map_err(|e| format!("not a protobuf `{}`: {e}", self.message.full_name()))?;
        let mut out = String::with_capacity(bytes.len() * 2 + 16);
        write_message(&mut out, &message, 0)?;
        Ok(out.into_bytes())
    }
}

/// Appends `message` as a JSON object (or a well-known type's JSON value).
fn write_message(out: &mut String, message: &DynamicMessage, depth: usize) -> Result<(), String> {
    if depth > MAX_DEPTH {
        return Err(format!("messages nested deeper than {MAX_DEPTH}"));
    }
    let descriptor = message.descriptor();
    match descriptor.full_name() {
        "google.protobuf.Timestamp" => return write_timestamp(out, message),
        name if is_wrapper(name) => {
            let field = descriptor
                .get_field_by_name("value")
                .ok_or("a wrapper without `value`")?;
            return write_value(out, &message.get_field(&field), &field.kind(), depth);
        }
        _ => {}
    }
    out.push('{');
    for (i, field) in descriptor.fields().enumerate() {
        if i > 0 {
            out.push(',');
        }
        write_string(out, field.name());
        out.push(':');
        if is_unset(message, &field) {
            out.push_str("null");
        } else {
            write_field(out, &message.get_field(&field), &field, depth)?;
        }
    }
    out.push('}');
    Ok(())
}

/// A field with presence (a message, `optional`, a oneof member) that the
/// value does not set: null, not its default.
fn is_unset(message: &DynamicMessage, field: &FieldDescriptor) -> bool {
    field.supports_presence() && !message.has_field(field)
}

fn write_field(
    out: &mut String,
    value: &Value,
    field: &FieldDescriptor,
    depth: usize,
) -> Result<(), String> {
    let kind = field.kind();
    match value {
        Value::List(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_value(out, item, &kind, depth)?;
            }
            out.push(']');
            Ok(())
        }
        Value::Map(entries) => {
            let value_kind = match &kind {
                Kind::Message(entry) => entry.map_entry_value_field().kind(),
                _ => {
                    return Err(format!(
                        "map field `{}` without an entry type",
                        field.name()
                    ))
                }
            };
            let mut keys: Vec<(String, &Value)> =
                entries.iter().map(|(k, v)| (map_key(k), v)).collect();
            keys.sort_by(|a, b| a.0.cmp(&b.0));
            out.push('{');
            for (i, (key, v)) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_string(out, &key);
                out.push(':');
                write_value(out, v, &value_kind, depth)?;
            }
            out.push('}');
            Ok(())
        }
        single => write_value(out, single, &kind, depth),
    }
}

fn map_key(key: &MapKey) -> String {
    match key {
        MapKey::Bool(b) => b.to_string(),
        MapKey::I32(n) => n.to_string(),
        MapKey::I64(n) => n.to_string(),
        MapKey::U32(n) => n.to_string(),
        MapKey::U64(n) => n.to_string(),
        MapKey::String(s) => s.clone(),
    }
}

/// Appends one value of a field of `kind`.
fn write_value(out: &mut String, value: &Value, kind: &Kind, depth: usize) -> Result<(), String> {
    match value {
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::I32(n) => push_display(out, n),
        Value::I64(n) => push_display(out, n),
        Value::U32(n) => push_display(out, n),
        Value::U64(n) => push_display(out, n),
        // The shortest text that reads back as the same float (for a
        // `float`, the same f32: `0.1`, not `0.10000000149011612`).
        Value::F32(f) if f.is_finite() => push_display(out, f),
        Value::F64(f) if f.is_finite() => push_display(out, f),
        Value::F32(_) | Value::F64(_) => out.push_str("null"),
        Value::String(s) => write_string(out, s),
        Value::Bytes(b) => {
            out.push('"');
            for byte in b.iter() {
                let _ = write!(out, "{byte:02x}");
            }
            out.push('"');
        }
        Value::EnumNumber(n) => match kind {
            Kind::Enum(e) => match e.get_value(*n) {
                Some(v) => write_string(out, v.name()),
                None => push_display(out, n),
            },
            _ => push_display(out, n),
        },
        Value::Message(m) => write_message(out, m, depth + 1)?,
        Value::List(_) | Value::Map(_) => return Err("a list inside a list".into()),
    }
    Ok(())
}

/// `google.protobuf.Timestamp` as RFC 3339 in UTC, as protobuf's JSON
/// mapping writes it (nanoseconds kept).
fn write_timestamp(out: &mut String, message: &DynamicMessage) -> Result<(), String> {
    let seconds = message
        .get_field_by_name("seconds")
        .and_then(|v| v.as_i64())
        .ok_or("a Timestamp without `seconds`")?;
    let nanos = message
        .get_field_by_name("nanos")
        .and_then(|v| v.as_i32())
        .ok_or("a Timestamp without `nanos`")?;
    let nanos = u32::try_from(nanos).ok().filter(|n| *n < 1_000_000_000);
    let instant = nanos
        .and_then(|n| chrono::DateTime::from_timestamp(seconds, n))
        .ok_or_else(|| format!("Timestamp {seconds} s {nanos:?} ns is not a valid instant"))?;
    write_string(
        out,
        &instant.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true),
    );
    Ok(())
}

/// Whether `name` is one of protobuf's wrapper types, read as their value.
fn is_wrapper(name: &str) -> bool {
    matches!(
        name,
        "google.protobuf.DoubleValue"
            | "google.protobuf.FloatValue"
            | "google.protobuf.Int64Value"
            | "google.protobuf.UInt64Value"
            | "google.protobuf.Int32Value"
            | "google.protobuf.UInt32Value"
            | "google.protobuf.BoolValue"
            | "google.protobuf.StringValue"
            | "google.protobuf.BytesValue"
    )
}

fn push_display(out: &mut String, value: impl std::fmt::Display) {
    let _ = write!(out, "{value}");
}

fn write_string(out: &mut String, s: &str) {
    // Serialising a string into a String cannot fail.
    if let Ok(quoted) = serde_json::to_string(s) {
        out.push_str(&quoted);
    }
}

#[cfg(test)]
mod tests;
