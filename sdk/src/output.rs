//! Column builders for an operator's output rows.

use crate::bindings::weir::operator::types as wit;
use crate::Error;

/// Validity bits under construction; stays `None` until the first null so
/// that all-valid columns send no bitmap at all.
#[derive(Debug, Clone, Default)]
struct ValidityBuilder {
    bits: Option<Vec<u8>>,
    len: usize,
}

impl ValidityBuilder {
    fn push(&mut self, valid: bool) {
        if !valid && self.bits.is_none() {
            let mut bits = vec![0xFF; self.len.div_ceil(8)];
            // Clear the padding bits past `len` so they read as null.
            if !self.len.is_multiple_of(8) {
                if let Some(last) = bits.last_mut() {
                    *last = (1u8 << (self.len % 8)) - 1;
                }
            }
            self.bits = Some(bits);
        }
        if let Some(bits) = &mut self.bits {
            set_bit(bits, self.len, valid);
        }
        self.len += 1;
    }

    fn finish(self) -> Option<Vec<u8>> {
        self.bits
    }
}

fn set_bit(bits: &mut Vec<u8>, i: usize, value: bool) {
    if i / 8 >= bits.len() {
        bits.push(0);
    }
    if value {
        bits[i / 8] |= 1 << (i % 8);
    }
}

macro_rules! primitive_builder {
    ($(#[$doc:meta])* $name:ident, $t:ty, $variant:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Default)]
        pub struct $name {
            values: Vec<$t>,
            validity: ValidityBuilder,
        }

        impl $name {
            /// An empty builder.
            pub fn new() -> Self {
                Self::default()
            }

            /// An empty builder with room for `rows` values.
            pub fn with_capacity(rows: usize) -> Self {
                Self { values: Vec::with_capacity(rows), validity: ValidityBuilder::default() }
            }

            /// Appends a value.
            pub fn push(&mut self, value: $t) {
                self.values.push(value);
                self.validity.push(true);
            }

            /// Appends a null.
            pub fn push_null(&mut self) {
                self.values.push(<$t>::default());
                self.validity.push(false);
            }

            /// Appends a value or a null.
            pub fn push_option(&mut self, value: Option<$t>) {
                match value {
                    Some(v) => self.push(v),
                    None => self.push_null(),
                }
            }

            /// Number of rows appended so far.
            pub fn len(&self) -> usize {
                self.values.len()
            }

            /// Whether nothing was appended yet.
            pub fn is_empty(&self) -> bool {
                self.values.is_empty()
            }
        }

        impl From<$name> for ColumnBuilder {
            fn from(b: $name) -> Self {
                ColumnBuilder {
                    rows: b.values.len(),
                    column: wit::Column {
                        values: wit::Values::$variant(b.values),
                        validity: b.validity.finish(),
                    },
                }
            }
        }
    };
}

primitive_builder!(
    /// Builds an `int64` output column.
    Int64Builder, i64, Int64
);
primitive_builder!(
    /// Builds a `float64` output column.
    Float64Builder, f64, Float64
);

/// Builds a `utf8` output column.
#[derive(Debug, Clone)]
pub struct Utf8Builder {
    offsets: Vec<i32>,
    data: Vec<u8>,
    validity: ValidityBuilder,
}

impl Default for Utf8Builder {
    fn default() -> Self {
        Self::new()
    }
}

impl Utf8Builder {
    /// An empty builder.
    pub fn new() -> Self {
        Self {
            offsets: vec![0],
            data: Vec::new(),
            validity: ValidityBuilder::default(),
        }
    }

    /// Appends a string.
    pub fn push(&mut self, value: &str) {
        self.data.extend_from_slice(value.as_bytes());
        self.offsets.push(self.data.len() as i32);
        self.validity.push(true);
    }

    /// Appends a null.
    pub fn push_null(&mut self) {
        self.offsets.push(self.data.len() as i32);
        self.validity.push(false);
    }

    /// Appends a string or a null.
    pub fn push_option(&mut self, value: Option<&str>) {
        match value {
            Some(v) => self.push(v),
            None => self.push_null(),
        }
    }

    /// Number of rows appended so far.
    pub fn len(&self) -> usize {
        self.offsets.len() - 1
    }

    /// Whether nothing was appended yet.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl From<Utf8Builder> for ColumnBuilder {
    fn from(b: Utf8Builder) -> Self {
        ColumnBuilder {
            rows: b.offsets.len() - 1,
            column: wit::Column {
                values: wit::Values::Utf8(wit::Utf8Values {
                    offsets: b.offsets,
                    data: b.data,
                }),
                validity: b.validity.finish(),
            },
        }
    }
}

/// Builds a `boolean` output column.
#[derive(Debug, Clone, Default)]
pub struct BoolBuilder {
    bits: Vec<u8>,
    len: usize,
    validity: ValidityBuilder,
}

impl BoolBuilder {
    /// An empty builder.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends a value.
    pub fn push(&mut self, value: bool) {
        set_bit(&mut self.bits, self.len, value);
        self.len += 1;
        self.validity.push(true);
    }

    /// Appends a null.
    pub fn push_null(&mut self) {
        set_bit(&mut self.bits, self.len, false);
        self.len += 1;
        self.validity.push(false);
    }

    /// Number of rows appended so far.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether nothing was appended yet.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl From<BoolBuilder> for ColumnBuilder {
    fn from(b: BoolBuilder) -> Self {
        ColumnBuilder {
            rows: b.len,
            column: wit::Column {
                values: wit::Values::Boolean(b.bits),
                validity: b.validity.finish(),
            },
        }
    }
}

/// A finished column of any type, ready to be put into an [`Output`].
#[derive(Debug, Clone)]
pub struct ColumnBuilder {
    rows: usize,
    pub(crate) column: wit::Column,
}

/// The rows an operator returns for a batch, as named columns of equal length.
#[derive(Debug, Clone, Default)]
pub struct Output {
    columns: Vec<(String, ColumnBuilder)>,
}

impl Output {
    /// An output with no columns yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// An output with no rows and no columns: "nothing to report".
    pub fn empty() -> Result<Self, Error> {
        Ok(Self::default())
    }

    /// Adds a column; order is kept in the sink.
    pub fn with(mut self, name: &str, column: impl Into<ColumnBuilder>) -> Self {
        self.columns.push((name.to_string(), column.into()));
        self
    }

    /// Checks that all columns have the same number of rows and distinct names.
    pub fn build(self) -> Result<Self, Error> {
        if let Some((first_name, first)) = self.columns.first() {
            for (name, col) in &self.columns {
                if col.rows != first.rows {
                    return Err(Error::failed(format!(
                        "output column `{name}` has {} rows but `{first_name}` has {}",
                        col.rows, first.rows
                    )));
                }
            }
        }
        for (i, (name, _)) in self.columns.iter().enumerate() {
            if self.columns[..i].iter().any(|(n, _)| n == name) {
                return Err(Error::failed(format!(
                    "output column `{name}` appears twice"
                )));
            }
        }
        Ok(self)
    }

    /// Number of output rows.
    pub fn num_rows(&self) -> usize {
        self.columns.first().map_or(0, |(_, c)| c.rows)
    }

    pub(crate) fn into_wit(self) -> wit::Output {
        wit::Output {
            num_rows: self.num_rows() as u32,
            columns: self
                .columns
                .into_iter()
                .map(|(name, c)| wit::OutputColumn {
                    name,
                    column: c.column,
                })
                .collect(),
        }
    }
}
