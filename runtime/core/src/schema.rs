//! The columns a source declares (`[[source.schema]]` in the pipeline
//! file) and the Arrow schema its batches have.
//!
//! A column's `type` is written as text: `int64`, `float64`, `boolean`,
//! `utf8`, `binary`, `date`, `decimal(P,S)` (exact: `decimal(18,2)` for
//! money), `timestamp(UNIT)` or `timestamp(UNIT, ZONE)` (UNIT `s`, `ms`,
//! `us` or `ns`; ZONE e.g. `UTC` or `+01:00`), `list<T>` for any of these,
//! and `struct` (or `list<struct>`) with its own `fields = [...]`.

use anyhow::{bail, Result};
use arrow_schema::{DataType, Field, Fields, Schema, SchemaRef, TimeUnit};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::sync::Arc;

/// Type of a declared column, as the pipeline file spells it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum ColumnType {
    Int64,
    Float64,
    Boolean,
    Utf8,
    /// Bytes.
    Binary,
    /// Days since 1970-01-01.
    Date,
    /// An exact decimal: `precision` digits, `scale` of them after the point.
    Decimal {
        precision: u8,
        scale: i8,
    },
    /// An instant (or, without a zone, a wall-clock time) in `unit`s
    /// since the epoch.
    Timestamp {
        unit: TimeUnit,
        timezone: Option<String>,
    },
    /// A list of values of one type.
    List(Box<ColumnType>),
    /// A record of the column's `fields`.
    Struct,
}

/// The largest precision of a 128-bit decimal.
pub const MAX_DECIMAL_PRECISION: u8 = 38;

impl TryFrom<String> for ColumnType {
    type Error = String;

    fn try_from(text: String) -> Result<Self, String> {
        text.parse()
    }
}

impl From<ColumnType> for String {
    fn from(t: ColumnType) -> String {
        t.to_string()
    }
}

impl std::str::FromStr for ColumnType {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let t = text.trim();
        let call = |name: &str| {
            t.strip_prefix(name)
                .map(str::trim_start)
                .and_then(|r| r.strip_prefix('('))
                .and_then(|r| r.strip_suffix(')'))
        };
        Ok(match t {
            "int64" => ColumnType::Int64,
            "float64" => ColumnType::Float64,
            "boolean" => ColumnType::Boolean,
            "utf8" => ColumnType::Utf8,
            "binary" => ColumnType::Binary,
            "date" => ColumnType::Date,
            "struct" => ColumnType::Struct,
            _ if t.starts_with("list<") && t.ends_with('>') => {
                ColumnType::List(Box::new(t["list<".len()..t.len() - 1].parse()?))
            }
            _ => {
                if let Some(args) = call("decimal") {
                    decimal(args, t)?
                } else if let Some(args) = call("timestamp") {
                    timestamp(args, t)?
                } else {
                    return Err(format!(
                        "unknown column type `{t}`: expected int64, float64, boolean, utf8, \
                         binary, date, decimal(P,S), timestamp(UNIT[, ZONE]), list<T> or struct"
                    ));
                }
            }
        })
    }
}

/// `P,S` of `decimal(P,S)`.
fn decimal(args: &str, whole: &str) -> Result<ColumnType, String> {
    let bad = || {
        format!(
            "`{whole}`: a decimal is decimal(P,S), P digits (1 to {MAX_DECIMAL_PRECISION}) of \
             which S (0 to P) after the point, e.g. decimal(18,2)"
        )
    };
    let (p, s) = args.split_once(',').ok_or_else(bad)?;
    let precision: u8 = p.trim().parse().map_err(|_| bad())?;
    let scale: i8 = s.trim().parse().map_err(|_| bad())?;
    if precision == 0 || precision > MAX_DECIMAL_PRECISION || scale < 0 || scale as u8 > precision {
        return Err(bad());
    }
    Ok(ColumnType::Decimal { precision, scale })
}

/// `UNIT[, ZONE]` of `timestamp(...)`.
fn timestamp(args: &str, whole: &str) -> Result<ColumnType, String> {
    let (unit, zone) = match args.split_once(',') {
        Some((u, z)) => (u.trim(), Some(z.trim())),
        None => (args.trim(), None),
    };
    let unit = match unit {
        "s" => TimeUnit::Second,
        "ms" => TimeUnit::Millisecond,
        "us" => TimeUnit::Microsecond,
        "ns" => TimeUnit::Nanosecond,
        other => {
            return Err(format!(
                "`{whole}`: the unit `{other}` is not one of s, ms, us, ns"
            ))
        }
    };
    let timezone = match zone {
        None => None,
        Some("") => return Err(format!("`{whole}`: the time zone is empty")),
        Some(z) => {
            if arrow_zone(z).parse::<arrow_array::timezone::Tz>().is_err() {
                return Err(format!(
                    "`{whole}`: `{z}` is not a time zone this build knows: UTC or an offset \
                     such as +01:00 (IANA names such as Europe/Berlin are not built in)"
                ));
            }
            Some(z.to_string())
        }
    };
    Ok(ColumnType::Timestamp { unit, timezone })
}

/// The zone as Arrow takes it: `UTC` (or `Z`) as the offset `+00:00`
/// (Arrow knows names only with the IANA database, not built in).
pub(crate) fn arrow_zone(zone: &str) -> &str {
    match zone {
        "UTC" | "Z" | "utc" => "+00:00",
        other => other,
    }
}

impl fmt::Display for ColumnType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ColumnType::Int64 => f.write_str("int64"),
            ColumnType::Float64 => f.write_str("float64"),
            ColumnType::Boolean => f.write_str("boolean"),
            ColumnType::Utf8 => f.write_str("utf8"),
            ColumnType::Binary => f.write_str("binary"),
            ColumnType::Date => f.write_str("date"),
            ColumnType::Struct => f.write_str("struct"),
            ColumnType::Decimal { precision, scale } => write!(f, "decimal({precision},{scale})"),
            ColumnType::Timestamp { unit, timezone } => {
                let unit = match unit {
                    TimeUnit::Second => "s",
                    TimeUnit::Millisecond => "ms",
                    TimeUnit::Microsecond => "us",
                    TimeUnit::Nanosecond => "ns",
                };
                match timezone {
                    Some(z) => write!(f, "timestamp({unit}, {z})"),
                    None => write!(f, "timestamp({unit})"),
                }
            }
            ColumnType::List(item) => write!(f, "list<{item}>"),
        }
    }
}

impl ColumnType {
    /// Whether it is one of the four basic types every operator reads
    /// (`batch.column`, lookups): int64, float64, boolean, utf8.
    pub fn is_basic(&self) -> bool {
        matches!(
            self,
            ColumnType::Int64 | ColumnType::Float64 | ColumnType::Boolean | ColumnType::Utf8
        )
    }

    /// Whether it is `struct`, or a list of (lists of) structs: a type
    /// whose column declares `fields`.
    fn has_fields(&self) -> bool {
        match self {
            ColumnType::Struct => true,
            ColumnType::List(item) => item.has_fields(),
            _ => false,
        }
    }
}

impl ColumnType {
    /// The declared type an Arrow type comes from (a struct's fields are
    /// the column's own `fields`); `None` for types no schema declares.
    pub fn of_arrow(t: &DataType) -> Option<ColumnType> {
        Some(match t {
            DataType::Int64 => ColumnType::Int64,
            DataType::Float64 => ColumnType::Float64,
            DataType::Boolean => ColumnType::Boolean,
            DataType::Utf8 => ColumnType::Utf8,
            DataType::Binary => ColumnType::Binary,
            DataType::Date32 => ColumnType::Date,
            DataType::Decimal128(precision, scale) if *scale >= 0 => ColumnType::Decimal {
                precision: *precision,
                scale: *scale,
            },
            DataType::Timestamp(unit, zone) => ColumnType::Timestamp {
                unit: *unit,
                timezone: zone.as_deref().map(|z| match z {
                    "+00:00" => "UTC".to_string(),
                    other => other.to_string(),
                }),
            },
            DataType::List(item) => {
                ColumnType::List(Box::new(ColumnType::of_arrow(item.data_type())?))
            }
            DataType::Struct(_) => ColumnType::Struct,
            _ => return None,
        })
    }
}

/// How the pipeline file spells Arrow type `t` (`decimal(18,2)`), for
/// messages; Arrow's own name for a type no schema declares.
pub fn type_name(t: &DataType) -> String {
    ColumnType::of_arrow(t).map_or_else(|| t.to_string(), |c| c.to_string())
}

/// One declared column of the source schema.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ColumnConfig {
    /// The column's name in the input and in the batches.
    pub name: String,
    /// Its type, e.g. `utf8`, `decimal(18,2)`, `timestamp(ms, UTC)`,
    /// `list<utf8>` or `struct`.
    #[serde(rename = "type")]
    pub data_type: ColumnType,
    /// Whether rows may leave it out (default: no).
    #[serde(default)]
    pub nullable: bool,
    /// The fields of a `struct` (or `list<struct>`) column.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fields: Vec<ColumnConfig>,
}

impl ColumnConfig {
    /// A column without fields.
    pub fn new(name: &str, data_type: ColumnType, nullable: bool) -> Self {
        ColumnConfig {
            name: name.into(),
            data_type,
            nullable,
            fields: Vec::new(),
        }
    }

    /// The Arrow field of this column.
    pub fn arrow_field(&self) -> Field {
        Field::new(
            &self.name,
            arrow_type(&self.data_type, &self.fields),
            self.nullable,
        )
    }
}

/// The Arrow type of `t`, whose struct (if any) has `fields`. List items
/// may be null.
fn arrow_type(t: &ColumnType, fields: &[ColumnConfig]) -> DataType {
    match t {
        ColumnType::Int64 => DataType::Int64,
        ColumnType::Float64 => DataType::Float64,
        ColumnType::Boolean => DataType::Boolean,
        ColumnType::Utf8 => DataType::Utf8,
        ColumnType::Binary => DataType::Binary,
        ColumnType::Date => DataType::Date32,
        ColumnType::Decimal { precision, scale } => DataType::Decimal128(*precision, *scale),
        ColumnType::Timestamp { unit, timezone } => {
            DataType::Timestamp(*unit, timezone.as_deref().map(arrow_zone).map(Arc::from))
        }
        ColumnType::List(item) => {
            DataType::List(Arc::new(Field::new("item", arrow_type(item, fields), true)))
        }
        ColumnType::Struct => DataType::Struct(Fields::from(
            fields
                .iter()
                .map(ColumnConfig::arrow_field)
                .collect::<Vec<_>>(),
        )),
    }
}

/// The Arrow schema for declared columns.
pub fn arrow_schema(columns: &[ColumnConfig]) -> SchemaRef {
    Arc::new(Schema::new(
        columns
            .iter()
            .map(ColumnConfig::arrow_field)
            .collect::<Vec<_>>(),
    ))
}

/// Checks declared columns: at least one, each named, no name twice, and
/// `fields` exactly where the type is a struct (checked the same way).
pub fn check(schema: &[ColumnConfig]) -> Result<()> {
    if schema.is_empty() {
        bail!("`source.schema` must declare at least one column");
    }
    check_columns(schema, "source.schema")
}

fn check_columns(columns: &[ColumnConfig], path: &str) -> Result<()> {
    for (i, c) in columns.iter().enumerate() {
        if c.name.is_empty() {
            bail!("`{path}[{i}].name` must not be empty");
        }
        if columns[..i].iter().any(|o| o.name == c.name) {
            bail!("`{path}` declares column `{}` twice", c.name);
        }
        match (c.data_type.has_fields(), c.fields.is_empty()) {
            (true, true) => bail!(
                "column `{}` is a {}: give its fields, `fields = [ {{ name = …, type = … }} ]`",
                c.name,
                c.data_type
            ),
            (false, false) => bail!(
                "column `{}` is a {}, not a struct: `fields` is for struct columns",
                c.name,
                c.data_type
            ),
            (true, false) => check_columns(&c.fields, &format!("{path}.{}.fields", c.name))?,
            (false, true) => {}
        }
    }
    Ok(())
}

/// Refuses a lookup table's column of a type other than the four basic
/// ones (`lookup.get` answers in basic columns), naming the first.
pub fn check_lookup_columns(schema: &[ColumnConfig]) -> Result<()> {
    if let Some(c) = schema.iter().find(|c| !c.data_type.is_basic()) {
        bail!(
            "column `{}` is a {}: lookup tables hold only int64, float64, boolean and utf8 \
             columns",
            c.name,
            c.data_type
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_type_is_spelt_one_way_and_maps_to_its_arrow_type() {
        for (text, arrow) in [
            ("int64", DataType::Int64),
            ("decimal(18,2)", DataType::Decimal128(18, 2)),
            (
                "timestamp(ms, UTC)",
                DataType::Timestamp(TimeUnit::Millisecond, Some("+00:00".into())),
            ),
            (
                "timestamp(us)",
                DataType::Timestamp(TimeUnit::Microsecond, None),
            ),
            ("date", DataType::Date32),
            ("binary", DataType::Binary),
            (
                "list<decimal(10,0)>",
                DataType::List(Arc::new(Field::new(
                    "item",
                    DataType::Decimal128(10, 0),
                    true,
                ))),
            ),
        ] {
            let t: ColumnType = text.parse().unwrap();
            assert_eq!(t.to_string(), text, "round trip");
            assert_eq!(arrow_type(&t, &[]), arrow, "{text}");
        }
        assert_eq!(
            "decimal( 18 , 2 )"
                .parse::<ColumnType>()
                .unwrap()
                .to_string(),
            "decimal(18,2)"
        );
    }

    #[test]
    fn bad_types_say_what_is_expected() {
        for (text, want) in [
            ("decimal(18)", "decimal(P,S)"),
            ("decimal(39,2)", "1 to 38"),
            ("decimal(4,5)", "S (0 to P)"),
            ("timestamp(min)", "not one of s, ms, us, ns"),
            ("timestamp(ms, Mars/Olympus)", "not a time zone"),
            ("timestamp(ms, Europe/Berlin)", "IANA names"),
            ("float32", "unknown column type `float32`"),
            ("list<float32>", "unknown column type `float32`"),
        ] {
            let err = text.parse::<ColumnType>().unwrap_err();
            assert!(err.contains(want), "{text}: {err}");
        }
    }

    #[test]
    fn a_struct_declares_its_fields_and_nothing_else_does() {
        let toml = r#"schema = [
          { name = "amount", type = "decimal(18,2)" },
          { name = "device", type = "struct", nullable = true, fields = [
              { name = "id", type = "utf8" },
              { name = "ip", type = "utf8", nullable = true } ] },
          { name = "items", type = "list<struct>", fields = [ { name = "sku", type = "utf8" } ] },
        ]"#;
        #[derive(Deserialize)]
        struct Doc {
            schema: Vec<ColumnConfig>,
        }
        let doc: Doc = toml::from_str(toml).unwrap();
        check(&doc.schema).unwrap();
        let schema = arrow_schema(&doc.schema);
        let DataType::Struct(device) = schema.field(1).data_type() else {
            panic!("{schema:?}")
        };
        assert_eq!(device.len(), 2);
        assert!(schema.field(1).is_nullable());
        let err = check_lookup_columns(&doc.schema).unwrap_err().to_string();
        assert!(err.contains("column `amount` is a decimal(18,2)"), "{err}");
        let missing = vec![ColumnConfig::new("device", ColumnType::Struct, false)];
        let err = check(&missing).unwrap_err().to_string();
        assert!(err.contains("give its fields"), "{err}");
        let mut extra = ColumnConfig::new("n", ColumnType::Int64, false);
        extra.fields = missing;
        let err = check(&[extra]).unwrap_err().to_string();
        assert!(err.contains("not a struct"), "{err}");
    }
}
