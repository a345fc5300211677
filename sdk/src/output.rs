//! Column builders for an operator's output rows.

use crate::bindings::weir::operator::types as wit;
use crate::Error;

/// Validity bits under construction; stays `None` until the first null so
/// that all-valid columns send no bitmap at all.
#[derive(Debug, Clone, Default)]
pub(crate) struct ValidityBuilder {
    bits: Option<Vec<u8>>,
    pub(crate) len: usize,
}

impl ValidityBuilder {
    pub(crate) fn push(&mut self, valid: bool) {
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

    pub(crate) fn finish(self) -> Option<Vec<u8>> {
        self.bits
    }

    /// The bitmap of `valid`, one flag per row.
    pub(crate) fn from_flags(valid: &[bool]) -> Self {
        let mut bits = Self::default();
        valid.iter().for_each(|&v| bits.push(v));
        bits
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
                    built: Built::Basic(wit::Column {
                        values: wit::Values::$variant(b.values),
                        validity: b.validity.finish(),
                    }),
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
            built: Built::Basic(wit::Column {
                values: wit::Values::Utf8(wit::Utf8Values {
                    offsets: b.offsets,
                    data: b.data,
                }),
                validity: b.validity.finish(),
            }),
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
            built: Built::Basic(wit::Column {
                values: wit::Values::Boolean(b.bits),
                validity: b.validity.finish(),
            }),
        }
    }
}

/// A finished column of any type, ready to be put into an [`Output`].
#[derive(Debug, Clone)]
pub struct ColumnBuilder {
    pub(crate) rows: usize,
    pub(crate) built: Built,
}

/// A column as it will cross to the host: in the basic `column` form
/// when it is one of the four basic types, else as a type tree and one
/// array per node (the element's and fields' nodes after their parent's;
/// node 0's name is set when the column is named in an [`Output`]).
#[derive(Debug, Clone)]
pub(crate) enum Built {
    Basic(wit::Column),
    Typed {
        nodes: Vec<wit::TypeNode>,
        arrays: Vec<wit::ArrayNode>,
    },
}

impl ColumnBuilder {
    /// The basic WIT column, if it is one (lookup keys).
    pub(crate) fn into_basic(self) -> Option<wit::Column> {
        match self.built {
            Built::Basic(c) => Some(c),
            Built::Typed { .. } => None,
        }
    }

    /// The column as a type tree and arrays, whatever its type.
    pub(crate) fn into_typed(self) -> (Vec<wit::TypeNode>, Vec<wit::ArrayNode>) {
        match self.built {
            Built::Typed { nodes, arrays } => (nodes, arrays),
            Built::Basic(c) => crate::typed_output::basic_as_typed(c, self.rows),
        }
    }
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

    /// The rows as they cross to the host: the basic `output` record when
    /// every column is of a basic type (what every host reads), else the
    /// typed one (`emit-typed`).
    pub(crate) fn into_wire(self) -> Wire {
        let num_rows = self.num_rows() as u32;
        if self
            .columns
            .iter()
            .all(|(_, c)| matches!(c.built, Built::Basic(_)))
        {
            return Wire::Basic(wit::Output {
                num_rows,
                columns: self
                    .columns
                    .into_iter()
                    .filter_map(|(name, c)| {
                        Some(wit::OutputColumn {
                            name,
                            column: c.into_basic()?,
                        })
                    })
                    .collect(),
            });
        }
        Wire::Typed(wit::TypedOutput {
            num_rows,
            columns: self
                .columns
                .into_iter()
                .map(|(name, c)| {
                    let (mut nodes, arrays) = c.into_typed();
                    if let Some(root) = nodes.first_mut() {
                        root.name = name;
                    }
                    wit::TypedOutputColumn {
                        type_: wit::ColumnType { nodes },
                        column: wit::ArrayColumn { nodes: arrays },
                    }
                })
                .collect(),
        })
    }

    /// The rows in the form `process` returns: typed rows go to the
    /// `default` output through `emit-typed`, and the call returns none.
    pub(crate) fn into_returned(self) -> wit::Output {
        match self.into_wire() {
            Wire::Basic(output) => output,
            Wire::Typed(typed) => {
                crate::bindings::weir::operator::outputs::emit_typed(
                    crate::outputs::DEFAULT,
                    &typed,
                );
                wit::Output {
                    num_rows: 0,
                    columns: Vec::new(),
                }
            }
        }
    }
}

/// An [`Output`] ready to cross to the host.
pub(crate) enum Wire {
    Basic(wit::Output),
    Typed(wit::TypedOutput),
}
