//! Typed, zero-conversion readers over Arrow-layout columns.

use crate::bindings::weir::operator::types as wit;
use crate::Error;

/// An Arrow validity bitmap: bit `i` set means row `i` holds a value.
#[derive(Debug, Clone, Default)]
pub(crate) struct Validity(pub(crate) Option<Vec<u8>>);

impl Validity {
    #[inline]
    pub(crate) fn is_valid(&self, row: usize) -> bool {
        match &self.0 {
            None => true,
            Some(bits) => bit(bits, row),
        }
    }

    pub(crate) fn check_len(&self, name: &str, rows: usize) -> Result<(), Error> {
        match &self.0 {
            Some(bits) if bits.len() * 8 < rows => Err(Error::failed(format!(
                "column `{name}`: validity bitmap too short for {rows} rows"
            ))),
            _ => Ok(()),
        }
    }
}

#[inline]
pub(crate) fn bit(bits: &[u8], i: usize) -> bool {
    bits.get(i / 8).is_some_and(|b| b & (1 << (i % 8)) != 0)
}

fn mismatch(name: &str, want: &str) -> Error {
    Error::failed(format!("column `{name}`: host sent a non-{want} column"))
}

macro_rules! primitive_column {
    ($(#[$doc:meta])* $name:ident, $t:ty, $variant:ident, $label:literal) => {
        $(#[$doc])*
        #[derive(Debug, Clone)]
        pub struct $name {
            values: Vec<$t>,
            validity: Validity,
        }

        impl $name {
            pub(crate) fn from_wit(name: &str, column: wit::Column) -> Result<Self, Error> {
                let wit::Values::$variant(values) = column.values else {
                    return Err(mismatch(name, $label));
                };
                let validity = Validity(column.validity);
                validity.check_len(name, values.len())?;
                Ok(Self { values, validity })
            }

            /// Number of rows.
            pub fn len(&self) -> usize {
                self.values.len()
            }

            /// Whether the column has no rows.
            pub fn is_empty(&self) -> bool {
                self.values.is_empty()
            }

            /// The value of `row`, or `None` if it is null or out of range.
            #[inline]
            pub fn get(&self, row: usize) -> Option<$t> {
                if self.validity.is_valid(row) {
                    self.values.get(row).copied()
                } else {
                    None
                }
            }

            /// The value slot of `row` regardless of validity (unspecified for
            /// null rows); panics if `row` is out of range.
            #[inline]
            pub fn value(&self, row: usize) -> $t {
                self.values[row]
            }

            /// Whether `row` is null.
            #[inline]
            pub fn is_null(&self, row: usize) -> bool {
                !self.validity.is_valid(row)
            }

            /// All value slots, for vectorised loops.
            pub fn values(&self) -> &[$t] {
                &self.values
            }
        }
    };
}

primitive_column!(
    /// An `int64` column (also used for epoch-millisecond timestamps).
    Int64Column, i64, Int64, "int64"
);
primitive_column!(
    /// A `float64` column.
    Float64Column, f64, Float64, "float64"
);

impl Int64Column {
    /// A column of `values`, null where `validity` says so.
    pub(crate) fn from_parts(values: Vec<i64>, validity: Validity) -> Self {
        Int64Column { values, validity }
    }
}

/// A `utf8` column in Arrow layout (offsets + one data buffer).
#[derive(Debug, Clone)]
pub struct Utf8Column {
    offsets: Vec<i32>,
    data: String,
    validity: Validity,
}

impl Utf8Column {
    /// The column in WIT form again (a copy), e.g. as lookup keys.
    pub(crate) fn to_wit(&self) -> wit::Column {
        wit::Column {
            values: wit::Values::Utf8(wit::Utf8Values {
                offsets: self.offsets.clone(),
                data: self.data.as_bytes().to_vec(),
            }),
            validity: self.validity.0.clone(),
        }
    }

    pub(crate) fn from_wit(name: &str, column: wit::Column) -> Result<Self, Error> {
        let wit::Values::Utf8(utf8) = column.values else {
            return Err(mismatch(name, "utf8"));
        };
        // Validate once for the whole buffer; slicing at offsets then checks
        // only char boundaries.
        let data = String::from_utf8(utf8.data)
            .map_err(|e| Error::failed(format!("column `{name}`: invalid UTF-8: {e}")))?;
        let offsets = utf8.offsets;
        // The host validated the offsets (Arrow invariants); `value` still
        // slices with checks, so a bad offset can only yield "", never UB.
        if offsets.is_empty() {
            return Err(Error::failed(format!("column `{name}`: malformed offsets")));
        }
        let validity = Validity(column.validity);
        validity.check_len(name, offsets.len() - 1)?;
        Ok(Self {
            offsets,
            data,
            validity,
        })
    }

    /// Number of rows.
    pub fn len(&self) -> usize {
        self.offsets.len() - 1
    }

    /// Whether the column has no rows.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The string at `row`, or `None` if it is null or out of range.
    #[inline]
    pub fn get(&self, row: usize) -> Option<&str> {
        if self.validity.is_valid(row) && row < self.len() {
            Some(self.value(row))
        } else {
            None
        }
    }

    /// The string slot of `row` regardless of validity (empty for null rows
    /// and rows out of range).
    #[inline]
    pub fn value(&self, row: usize) -> &str {
        let (Some(&start), Some(&end)) = (self.offsets.get(row), self.offsets.get(row + 1)) else {
            return "";
        };
        self.data.get(start as usize..end as usize).unwrap_or("")
    }

    /// The UTF-8 bytes at `row`, or `None` if it is null or out of range.
    /// Cheaper than [`Utf8Column::get`] (no char-boundary checks): use it to
    /// compare identifiers and codes.
    #[inline]
    pub fn get_bytes(&self, row: usize) -> Option<&[u8]> {
        if !self.validity.is_valid(row) {
            return None;
        }
        let (&start, &end) = (self.offsets.get(row)?, self.offsets.get(row + 1)?);
        self.data.as_bytes().get(start as usize..end as usize)
    }

    /// Whether `row` is null.
    #[inline]
    pub fn is_null(&self, row: usize) -> bool {
        !self.validity.is_valid(row)
    }
}

/// A `boolean` column (bit-packed values).
#[derive(Debug, Clone)]
pub struct BoolColumn {
    bits: Vec<u8>,
    rows: usize,
    validity: Validity,
}

impl BoolColumn {
    pub(crate) fn from_wit(name: &str, column: wit::Column) -> Result<Self, Error> {
        let wit::Values::Boolean(bits) = column.values else {
            return Err(mismatch(name, "boolean"));
        };
        let validity = Validity(column.validity);
        // The bit-packed buffer does not carry its own length: the batch's does.
        let rows = bits.len() * 8;
        Ok(Self {
            bits,
            rows,
            validity,
        })
    }

    /// The value of `row`, or `None` if it is null or out of range.
    #[inline]
    pub fn get(&self, row: usize) -> Option<bool> {
        if row < self.rows && self.validity.is_valid(row) {
            Some(bit(&self.bits, row))
        } else {
            None
        }
    }

    /// Whether `row` is null.
    #[inline]
    pub fn is_null(&self, row: usize) -> bool {
        !self.validity.is_valid(row)
    }
}
