use crate::bindings::weir::operator::types as wit;
use crate::columns::{BoolColumn, Float64Column, Int64Column, Utf8Column};
use crate::typed::{AnyColumn, BinaryColumn, DateColumn, DecimalColumn, TimestampColumn};
use crate::{Error, TimeUnit};

/// A column's type: one of the four basic types, or a decimal, timestamp,
/// date, bytes, list or struct (the pipeline file's spelling is its
/// `Display`: `decimal(18,2)`, `timestamp(ms, UTC)`, `list<utf8>`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DataType {
    /// 64-bit signed integers.
    Int64,
    /// 64-bit floats.
    Float64,
    /// Booleans.
    Boolean,
    /// UTF-8 strings.
    Utf8,
    /// Bytes.
    Binary,
    /// Days since 1970-01-01 ([`crate::Date`]).
    Date,
    /// Exact decimals ([`crate::Decimal`]): `precision` digits, `scale`
    /// after the point.
    Decimal {
        /// Digits in all (1 to 38).
        precision: u8,
        /// Digits after the point.
        scale: u8,
    },
    /// Instants ([`crate::Timestamp`]) in `unit`s since the epoch;
    /// `timezone` is `UTC` or `+HH:MM` (none: a wall-clock time).
    Timestamp {
        /// The unit.
        unit: TimeUnit,
        /// The zone, if any.
        timezone: Option<String>,
    },
    /// Lists whose elements are described by the field.
    List(Box<Field>),
    /// Records of these fields.
    Struct(Vec<Field>),
}

impl std::fmt::Display for DataType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DataType::Int64 => f.write_str("int64"),
            DataType::Float64 => f.write_str("float64"),
            DataType::Boolean => f.write_str("boolean"),
            DataType::Utf8 => f.write_str("utf8"),
            DataType::Binary => f.write_str("binary"),
            DataType::Date => f.write_str("date"),
            DataType::Decimal { precision, scale } => write!(f, "decimal({precision},{scale})"),
            DataType::Timestamp { unit, timezone } => {
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
            DataType::List(item) => write!(f, "list<{}>", item.data_type),
            DataType::Struct(_) => f.write_str("struct"),
        }
    }
}

/// One column of the input schema (or a struct's field, a list's element).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Field {
    /// Column name as declared in the pipeline's source schema.
    pub name: String,
    /// Its type.
    pub data_type: DataType,
    /// Whether rows may be null.
    pub nullable: bool,
}

impl Field {
    /// The field a flattened WIT type describes (node `index` and its
    /// children).
    pub(crate) fn from_nodes(
        nodes: &[wit::TypeNode],
        index: u32,
        depth: usize,
    ) -> Result<Self, Error> {
        let bad = || Error::failed(format!("the host sent a malformed type (node {index})"));
        let node = nodes.get(index as usize).ok_or_else(bad)?;
        if depth > 64 {
            return Err(bad());
        }
        let data_type = match &node.kind {
            wit::NodeKind::Int64 => DataType::Int64,
            wit::NodeKind::Float64 => DataType::Float64,
            wit::NodeKind::Boolean => DataType::Boolean,
            wit::NodeKind::Utf8 => DataType::Utf8,
            wit::NodeKind::Binary => DataType::Binary,
            wit::NodeKind::Date32 => DataType::Date,
            wit::NodeKind::Decimal128(d) => DataType::Decimal {
                precision: d.precision,
                scale: d.scale,
            },
            wit::NodeKind::Timestamp(t) => DataType::Timestamp {
                unit: crate::time::from_wit(t.unit),
                timezone: t.timezone.clone(),
            },
            wit::NodeKind::List(child) => {
                DataType::List(Box::new(Field::from_nodes(nodes, *child, depth + 1)?))
            }
            wit::NodeKind::Struct(children) => DataType::Struct(
                children
                    .iter()
                    .map(|c| Field::from_nodes(nodes, *c, depth + 1))
                    .collect::<Result<_, _>>()?,
            ),
        };
        Ok(Field {
            name: node.name.clone(),
            data_type,
            nullable: node.nullable,
        })
    }
}

/// The micro-batch of one epoch. Columns are fetched from the host on demand,
/// so read each column you need once and keep the reader.
pub struct Batch<'a> {
    raw: &'a wit::Batch,
    rows: usize,
    schema: Vec<Field>,
}

impl<'a> Batch<'a> {
    pub(crate) fn new(raw: &'a wit::Batch) -> Result<Self, Error> {
        let schema = raw
            .typed_schema()
            .iter()
            .map(|t| Field::from_nodes(&t.nodes, 0, 0))
            .collect::<Result<_, _>>()?;
        Ok(Batch {
            rows: raw.num_rows() as usize,
            raw,
            schema,
        })
    }

    /// Number of rows in the batch.
    pub fn num_rows(&self) -> usize {
        self.rows
    }

    /// The input schema, in column order.
    pub fn schema(&self) -> &[Field] {
        &self.schema
    }

    /// Position of the column called `name`, or an error naming it.
    pub fn index_of(&self, name: &str) -> Result<usize, Error> {
        self.schema
            .iter()
            .position(|f| f.name == name)
            .ok_or_else(|| Error::failed(format!("input has no column `{name}`")))
    }

    /// The type of column `name`, for operators that read either of two
    /// schemas (a decimal or a float amount).
    pub fn data_type(&self, name: &str) -> Result<&DataType, Error> {
        Ok(&self.schema[self.index_of(name)?].data_type)
    }

    fn typed_index(&self, name: &str, want: DataType) -> Result<u32, Error> {
        let index = self.index_of(name)?;
        let found = &self.schema[index].data_type;
        if *found != want {
            return Err(Error::failed(format!(
                "column `{name}` is {found}, not {want}"
            )));
        }
        Ok(index as u32)
    }

    /// Column `name` of any type, nested ones included (only `rows`, in
    /// that order, if given).
    fn fetch_any(&self, name: &str, rows: Option<&[u32]>) -> Result<AnyColumn, Error> {
        let index = self.index_of(name)?;
        let field = &self.schema[index];
        let arrays = match rows {
            None => self.raw.typed_column(index as u32),
            Some(rows) => {
                self.check_rows(name, rows)?;
                self.raw.typed_take(index as u32, rows)
            }
        };
        AnyColumn::from_wit(field, arrays.nodes)
    }

    fn check_rows(&self, name: &str, rows: &[u32]) -> Result<(), Error> {
        match rows.iter().find(|&&r| r as usize >= self.rows) {
            Some(bad) => Err(Error::failed(format!(
                "row {bad} of column `{name}` asked for, but the batch has {} rows",
                self.rows
            ))),
            None => Ok(()),
        }
    }

    /// Column `name`, of any type: for structs (`.field("ip")`), lists
    /// (`.items()`), or to pass a column through to the output unchanged.
    pub fn column(&self, name: &str) -> Result<AnyColumn, Error> {
        self.fetch_any(name, None)
    }

    /// Only `rows` of column `name`, of any type, in that order (a gather).
    pub fn column_rows(&self, name: &str, rows: &[u32]) -> Result<AnyColumn, Error> {
        self.fetch_any(name, Some(rows))
    }

    /// Reads a `decimal(P,S)` column.
    pub fn decimal(&self, name: &str) -> Result<DecimalColumn, Error> {
        self.column(name)?.decimals()
    }

    /// Reads a `timestamp` column (any unit and zone).
    pub fn timestamp(&self, name: &str) -> Result<TimestampColumn, Error> {
        self.column(name)?.timestamps()
    }

    /// Event times in Unix milliseconds from column `name`, whether it is
    /// `int64` milliseconds or a `timestamp` of any unit (rounded down to
    /// the millisecond): for time logic that runs over either schema and
    /// compares with the watermark and timers, which are milliseconds.
    pub fn millis(&self, name: &str) -> Result<Int64Column, Error> {
        match self.data_type(name)? {
            DataType::Timestamp { .. } => Ok(self.timestamp(name)?.to_millis()),
            _ => self.i64(name),
        }
    }

    /// Reads a `date` column.
    pub fn date(&self, name: &str) -> Result<DateColumn, Error> {
        self.column(name)?.dates()
    }

    /// Reads a `binary` column.
    pub fn binary(&self, name: &str) -> Result<BinaryColumn, Error> {
        self.column(name)?.binaries()
    }

    fn fetch(&self, name: &str, want: DataType) -> Result<wit::Column, Error> {
        Ok(self.raw.column(self.typed_index(name, want)?))
    }

    fn fetch_rows(&self, name: &str, want: DataType, rows: &[u32]) -> Result<wit::Column, Error> {
        self.check_rows(name, rows)?;
        Ok(self.raw.take(self.typed_index(name, want)?, rows))
    }

    /// Reads an `int64` column.
    pub fn i64(&self, name: &str) -> Result<Int64Column, Error> {
        Int64Column::from_wit(name, self.fetch(name, DataType::Int64)?)
    }

    /// Reads a `float64` column.
    pub fn f64(&self, name: &str) -> Result<Float64Column, Error> {
        Float64Column::from_wit(name, self.fetch(name, DataType::Float64)?)
    }

    /// Reads a `utf8` column.
    pub fn utf8(&self, name: &str) -> Result<Utf8Column, Error> {
        Utf8Column::from_wit(name, self.fetch(name, DataType::Utf8)?)
    }

    /// Reads a `boolean` column.
    pub fn bool(&self, name: &str) -> Result<BoolColumn, Error> {
        BoolColumn::from_wit(name, self.fetch(name, DataType::Boolean)?)
    }

    /// Reads only `rows` (in that order) of an `int64` column: row `k` of
    /// the result is row `rows[k]` of the batch. For emitting a few matches
    /// without copying the whole column.
    pub fn i64_rows(&self, name: &str, rows: &[u32]) -> Result<Int64Column, Error> {
        Int64Column::from_wit(name, self.fetch_rows(name, DataType::Int64, rows)?)
    }

    /// Reads only `rows` of a `float64` column (see [`Batch::i64_rows`]).
    pub fn f64_rows(&self, name: &str, rows: &[u32]) -> Result<Float64Column, Error> {
        Float64Column::from_wit(name, self.fetch_rows(name, DataType::Float64, rows)?)
    }

    /// Reads only `rows` of a `utf8` column (see [`Batch::i64_rows`]).
    pub fn utf8_rows(&self, name: &str, rows: &[u32]) -> Result<Utf8Column, Error> {
        Utf8Column::from_wit(name, self.fetch_rows(name, DataType::Utf8, rows)?)
    }

    /// Reads only `rows` of a `boolean` column (see [`Batch::i64_rows`]).
    pub fn bool_rows(&self, name: &str, rows: &[u32]) -> Result<BoolColumn, Error> {
        BoolColumn::from_wit(name, self.fetch_rows(name, DataType::Boolean, rows)?)
    }
}
