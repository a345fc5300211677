use crate::bindings::weir::operator::types as wit;
use crate::columns::{BoolColumn, Float64Column, Int64Column, Utf8Column};
use crate::Error;

/// Logical column type, mirroring the WIT `data-type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DataType {
    /// 64-bit signed integers (also epoch-millisecond timestamps).
    Int64,
    /// 64-bit floats.
    Float64,
    /// Booleans.
    Boolean,
    /// UTF-8 strings.
    Utf8,
}

impl From<wit::DataType> for DataType {
    fn from(t: wit::DataType) -> Self {
        match t {
            wit::DataType::Int64 => DataType::Int64,
            wit::DataType::Float64 => DataType::Float64,
            wit::DataType::Boolean => DataType::Boolean,
            wit::DataType::Utf8 => DataType::Utf8,
        }
    }
}

/// One column of the input schema.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Field {
    /// Column name as declared in the pipeline's source schema.
    pub name: String,
    /// Its type.
    pub data_type: DataType,
    /// Whether rows may be null.
    pub nullable: bool,
}

/// The micro-batch of one epoch. Columns are fetched from the host on demand,
/// so read each column you need once and keep the reader.
pub struct Batch<'a> {
    raw: &'a wit::Batch,
    rows: usize,
    schema: Vec<Field>,
}

impl<'a> Batch<'a> {
    pub(crate) fn new(raw: &'a wit::Batch) -> Self {
        let schema = raw
            .schema()
            .into_iter()
            .map(|f| Field {
                name: f.name,
                data_type: f.data_type.into(),
                nullable: f.nullable,
            })
            .collect();
        Batch {
            rows: raw.num_rows() as usize,
            raw,
            schema,
        }
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

    fn typed_index(&self, name: &str, want: DataType) -> Result<u32, Error> {
        let index = self.index_of(name)?;
        let found = self.schema[index].data_type;
        if found != want {
            return Err(Error::failed(format!(
                "column `{name}` is {found:?}, not {want:?}"
            )));
        }
        Ok(index as u32)
    }

    fn fetch(&self, name: &str, want: DataType) -> Result<wit::Column, Error> {
        Ok(self.raw.column(self.typed_index(name, want)?))
    }

    fn fetch_rows(&self, name: &str, want: DataType, rows: &[u32]) -> Result<wit::Column, Error> {
        if let Some(bad) = rows.iter().find(|&&r| r as usize >= self.rows) {
            return Err(Error::failed(format!(
                "row {bad} of column `{name}` asked for, but the batch has {} rows",
                self.rows
            )));
        }
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
