//! Readers for columns of every type: decimals, timestamps, dates, bytes,
//! and nested lists and structs ([`AnyColumn`]). The host sends each
//! column as one Arrow array per node of its type; these index them.

use crate::bindings::weir::operator::types as wit;
use crate::columns::{bit, Int64Column, Validity};
use crate::{DataType, Date, Decimal, Error, Field, TimeUnit, Timestamp};
use std::ops::Range;

/// A column of any type as the host sent it, nested columns included:
/// read a struct's field with [`AnyColumn::field`], a list's elements
/// with [`AnyColumn::items`] and [`AnyColumn::item_range`], any value
/// with [`AnyColumn::value`]; turn it into a typed reader
/// ([`AnyColumn::decimals`], …); or pass it to an output unchanged.
#[derive(Debug, Clone)]
pub struct AnyColumn {
    pub(crate) field: Field,
    pub(crate) len: usize,
    pub(crate) validity: Validity,
    pub(crate) offsets: Vec<i32>,
    pub(crate) values: Vec<u8>,
    pub(crate) children: Vec<AnyColumn>,
}

/// One value of any type, for generic code (printing, tests, passing
/// through); the typed readers are faster.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// No value.
    Null,
    /// An `int64`.
    Int64(i64),
    /// A `float64`.
    Float64(f64),
    /// A `boolean`.
    Boolean(bool),
    /// A `utf8` string.
    Utf8(String),
    /// `binary` bytes.
    Binary(Vec<u8>),
    /// A `date`.
    Date(Date),
    /// A `decimal(P,S)`.
    Decimal(Decimal),
    /// A `timestamp`.
    Timestamp(Timestamp),
    /// A `list<T>`.
    List(Vec<Value>),
    /// A `struct`: its fields' names and values, in order.
    Struct(Vec<(String, Value)>),
}

fn malformed(name: &str) -> Error {
    Error::failed(format!("column `{name}`: the host sent malformed arrays"))
}

impl AnyColumn {
    /// Rebuilds the tree from the host's arrays (pre-order, like the type).
    pub(crate) fn from_wit(field: &Field, nodes: Vec<wit::ArrayNode>) -> Result<Self, Error> {
        let mut nodes = nodes.into_iter();
        let column = Self::take(field, &mut nodes)?;
        match nodes.next() {
            None => Ok(column),
            Some(_) => Err(malformed(&field.name)),
        }
    }

    fn take(
        field: &Field,
        nodes: &mut impl Iterator<Item = wit::ArrayNode>,
    ) -> Result<Self, Error> {
        let node = nodes.next().ok_or_else(|| malformed(&field.name))?;
        let len = node.len as usize;
        let validity = Validity(node.validity);
        validity.check_len(&field.name, len)?;
        let children = match &field.data_type {
            DataType::List(item) => vec![Self::take(item, nodes)?],
            DataType::Struct(fields) => fields
                .iter()
                .map(|f| Self::take(f, nodes))
                .collect::<Result<_, _>>()?,
            _ => Vec::new(),
        };
        let column = AnyColumn {
            field: field.clone(),
            len,
            validity,
            offsets: node.offsets,
            values: node.values,
            children,
        };
        column.check()?;
        Ok(column)
    }

    /// The lengths the host promises, checked once so that reads can
    /// index without surprises.
    fn check(&self) -> Result<(), Error> {
        let width = match &self.field.data_type {
            DataType::Int64 | DataType::Float64 | DataType::Timestamp { .. } => Some(8),
            DataType::Date => Some(4),
            DataType::Decimal { .. } => Some(16),
            _ => None,
        };
        let offsets_ok = || {
            self.offsets.len() == self.len + 1
                && self.offsets.windows(2).all(|w| w[0] <= w[1])
                && self.offsets.first() == Some(&0)
        };
        let ok = match &self.field.data_type {
            DataType::Boolean => self.values.len() * 8 >= self.len,
            DataType::Utf8 | DataType::Binary => {
                offsets_ok() && self.offsets[self.len] as usize <= self.values.len()
            }
            DataType::List(_) => {
                offsets_ok() && self.offsets[self.len] as usize <= self.children[0].len
            }
            DataType::Struct(_) => self.children.iter().all(|c| c.len >= self.len),
            _ => width.is_some_and(|w| self.values.len() == self.len * w),
        };
        if !ok {
            return Err(malformed(&self.field.name));
        }
        if self.field.data_type == DataType::Utf8 && std::str::from_utf8(&self.values).is_err() {
            return Err(Error::failed(format!(
                "column `{}`: invalid UTF-8",
                self.field.name
            )));
        }
        Ok(())
    }

    /// The column's (or field's) name and type.
    pub fn field(&self) -> &Field {
        &self.field
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there are no entries.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether entry `row` is null.
    pub fn is_null(&self, row: usize) -> bool {
        !self.validity.is_valid(row)
    }

    /// A struct's field `name`, with one entry per row of the struct (a
    /// null struct's fields read as null too only if the field says so:
    /// check [`AnyColumn::is_null`] on the struct).
    pub fn child(&self, name: &str) -> Result<&AnyColumn, Error> {
        let DataType::Struct(fields) = &self.field.data_type else {
            return Err(Error::failed(format!(
                "column `{}` is {}, not a struct",
                self.field.name, self.field.data_type
            )));
        };
        fields
            .iter()
            .position(|f| f.name == name)
            .map(|i| &self.children[i])
            .ok_or_else(|| {
                Error::failed(format!(
                    "struct `{}` has no field `{name}`",
                    self.field.name
                ))
            })
    }

    /// A list's elements, all rows' back to back (see
    /// [`AnyColumn::item_range`]).
    pub fn items(&self) -> Result<&AnyColumn, Error> {
        match &self.field.data_type {
            DataType::List(_) => Ok(&self.children[0]),
            other => Err(Error::failed(format!(
                "column `{}` is {other}, not a list",
                self.field.name
            ))),
        }
    }

    /// The positions in [`AnyColumn::items`] of row `row`'s list (empty
    /// for a null list, or a row out of range).
    pub fn item_range(&self, row: usize) -> Range<usize> {
        match (self.offsets.get(row), self.offsets.get(row + 1)) {
            (Some(&a), Some(&b)) if !self.is_null(row) => a as usize..b as usize,
            _ => 0..0,
        }
    }

    fn fixed<const N: usize>(&self, row: usize) -> [u8; N] {
        let mut out = [0; N];
        if let Some(bytes) = self.values.get(row * N..row * N + N) {
            out.copy_from_slice(bytes);
        }
        out
    }

    fn bytes(&self, row: usize) -> &[u8] {
        match (self.offsets.get(row), self.offsets.get(row + 1)) {
            (Some(&a), Some(&b)) => self.values.get(a as usize..b as usize).unwrap_or(&[]),
            _ => &[],
        }
    }

    /// Entry `row` as a [`Value`] (nested values in full).
    pub fn value(&self, row: usize) -> Value {
        if row >= self.len || self.is_null(row) {
            return Value::Null;
        }
        match &self.field.data_type {
            DataType::Int64 => Value::Int64(i64::from_le_bytes(self.fixed(row))),
            DataType::Float64 => Value::Float64(f64::from_le_bytes(self.fixed(row))),
            DataType::Boolean => Value::Boolean(bit(&self.values, row)),
            DataType::Utf8 => Value::Utf8(String::from_utf8_lossy(self.bytes(row)).into_owned()),
            DataType::Binary => Value::Binary(self.bytes(row).to_vec()),
            DataType::Date => Value::Date(Date(i32::from_le_bytes(self.fixed(row)))),
            DataType::Decimal { scale, .. } => Value::Decimal(Decimal::checked_by_host(
                i128::from_le_bytes(self.fixed(row)),
                *scale,
            )),
            DataType::Timestamp { unit, .. } => Value::Timestamp(Timestamp {
                count: i64::from_le_bytes(self.fixed(row)),
                unit: *unit,
            }),
            DataType::List(_) => {
                let items = &self.children[0];
                Value::List(self.item_range(row).map(|i| items.value(i)).collect())
            }
            DataType::Struct(fields) => Value::Struct(
                fields
                    .iter()
                    .zip(&self.children)
                    .map(|(f, c)| (f.name.clone(), c.value(row)))
                    .collect(),
            ),
        }
    }

    fn expect(&self, what: &str, ok: bool) -> Result<(), Error> {
        if ok {
            Ok(())
        } else {
            Err(Error::failed(format!(
                "column `{}` is {}, not {what}",
                self.field.name, self.field.data_type
            )))
        }
    }

    /// A `decimal(P,S)` column's reader.
    pub fn decimals(&self) -> Result<DecimalColumn, Error> {
        let DataType::Decimal { precision, scale } = self.field.data_type else {
            return Err(self.expect("a decimal", false).unwrap_err());
        };
        Ok(DecimalColumn {
            values: (0..self.len)
                .map(|r| i128::from_le_bytes(self.fixed(r)))
                .collect(),
            precision,
            scale,
            validity: self.validity.clone(),
        })
    }

    /// A `timestamp` column's reader.
    pub fn timestamps(&self) -> Result<TimestampColumn, Error> {
        let DataType::Timestamp { unit, timezone } = &self.field.data_type else {
            return Err(self.expect("a timestamp", false).unwrap_err());
        };
        Ok(TimestampColumn {
            values: (0..self.len)
                .map(|r| i64::from_le_bytes(self.fixed(r)))
                .collect(),
            unit: *unit,
            timezone: timezone.clone(),
            validity: self.validity.clone(),
        })
    }

    /// A `date` column's reader.
    pub fn dates(&self) -> Result<DateColumn, Error> {
        self.expect("a date", self.field.data_type == DataType::Date)?;
        Ok(DateColumn {
            values: (0..self.len)
                .map(|r| i32::from_le_bytes(self.fixed(r)))
                .collect(),
            validity: self.validity.clone(),
        })
    }

    /// A `binary` column's reader.
    pub fn binaries(&self) -> Result<BinaryColumn, Error> {
        self.expect("binary", self.field.data_type == DataType::Binary)?;
        Ok(BinaryColumn {
            offsets: self.offsets.clone(),
            data: self.values.clone(),
            validity: self.validity.clone(),
        })
    }

    /// A `utf8` field's values (for a struct's field; a batch's own utf8
    /// columns read faster with [`crate::Batch::utf8`]).
    pub fn strings(&self) -> Result<Vec<Option<String>>, Error> {
        self.expect("utf8", self.field.data_type == DataType::Utf8)?;
        Ok((0..self.len)
            .map(|r| match self.value(r) {
                Value::Utf8(s) => Some(s),
                _ => None,
            })
            .collect())
    }

    /// An `int64` field's values (see [`AnyColumn::strings`]).
    pub fn ints(&self) -> Result<Vec<Option<i64>>, Error> {
        self.expect("int64", self.field.data_type == DataType::Int64)?;
        Ok((0..self.len)
            .map(|r| (!self.is_null(r)).then(|| i64::from_le_bytes(self.fixed(r))))
            .collect())
    }
}

macro_rules! nullable_reader {
    ($(#[$doc:meta])* $name:ident { $($field:ident : $t:ty),* }, $value:ty, |$self_:ident, $row:ident| $get:expr) => {
        $(#[$doc])*
        #[derive(Debug, Clone)]
        pub struct $name {
            $($field: $t,)*
            validity: Validity,
        }

        impl $name {
            /// Entry `row`, or `None` if it is null or out of range.
            #[inline]
            pub fn get(&self, row: usize) -> Option<$value> {
                if row < self.len() && self.validity.is_valid(row) {
                    let ($self_, $row) = (self, row);
                    Some($get)
                } else {
                    None
                }
            }

            /// Whether `row` is null.
            #[inline]
            pub fn is_null(&self, row: usize) -> bool {
                !self.validity.is_valid(row)
            }

            /// Whether there are no rows.
            pub fn is_empty(&self) -> bool {
                self.len() == 0
            }
        }
    };
}

nullable_reader!(
    /// A `decimal(P,S)` column: [`Decimal`] values, exact.
    DecimalColumn { values: Vec<i128>, precision: u8, scale: u8 },
    Decimal,
    |c, row| Decimal::checked_by_host(c.values[row], c.scale)
);

impl DecimalColumn {
    /// Number of rows.
    pub fn len(&self) -> usize {
        self.values.len()
    }

    /// The column's precision and scale.
    pub fn precision_scale(&self) -> (u8, u8) {
        (self.precision, self.scale)
    }

    /// The unscaled values (row `i` is `values()[i] × 10^-scale`), for
    /// loops that add or compare at one scale.
    pub fn unscaled(&self) -> &[i128] {
        &self.values
    }
}

nullable_reader!(
    /// A `timestamp` column: [`Timestamp`] values in the column's unit.
    TimestampColumn { values: Vec<i64>, unit: TimeUnit, timezone: Option<String> },
    Timestamp,
    |c, row| Timestamp { count: c.values[row], unit: c.unit }
);

impl TimestampColumn {
    /// Number of rows.
    pub fn len(&self) -> usize {
        self.values.len()
    }

    /// The counts in the column's unit.
    pub fn counts(&self) -> &[i64] {
        &self.values
    }

    /// The column's unit.
    pub fn unit(&self) -> TimeUnit {
        self.unit
    }

    /// The column's zone (`UTC`, `+01:00`), if any.
    pub fn timezone(&self) -> Option<&str> {
        self.timezone.as_deref()
    }

    /// The instants as Unix milliseconds (finer units rounded down), nulls
    /// kept: the unit of epoch times, watermarks and timers.
    pub fn to_millis(&self) -> Int64Column {
        let unit = self.unit;
        let millis = self
            .values
            .iter()
            .map(|&count| Timestamp { count, unit }.as_millis());
        Int64Column::from_parts(millis.collect(), self.validity.clone())
    }
}

nullable_reader!(
    /// A `date` column: [`Date`] values.
    DateColumn { values: Vec<i32> },
    Date,
    |c, row| Date(c.values[row])
);

impl DateColumn {
    /// Number of rows.
    pub fn len(&self) -> usize {
        self.values.len()
    }
}

nullable_reader!(
    /// A `binary` column: byte strings.
    BinaryColumn { offsets: Vec<i32>, data: Vec<u8> },
    &[u8],
    |c, row| c.data.get(c.offsets[row] as usize..c.offsets[row + 1] as usize).unwrap_or(&[])
);

impl BinaryColumn {
    /// Number of rows.
    pub fn len(&self) -> usize {
        self.offsets.len().saturating_sub(1)
    }
}
