//! Output builders for decimals, timestamps, dates and bytes, nested
//! columns ([`ColumnBuilder::struct_of`], [`ColumnBuilder::list_of`]),
//! and input columns passed through (`From<AnyColumn>`).

use crate::bindings::weir::operator::types as wit;
use crate::output::{Built, ColumnBuilder, ValidityBuilder};
use crate::{AnyColumn, DataType, Date, Decimal, Error, Field, TimeUnit, Timestamp};

fn node(kind: wit::NodeKind) -> wit::TypeNode {
    wit::TypeNode {
        name: String::new(),
        kind,
        nullable: true,
    }
}

fn typed(rows: usize, kind: wit::NodeKind, array: wit::ArrayNode) -> ColumnBuilder {
    ColumnBuilder {
        rows,
        built: Built::Typed {
            nodes: vec![node(kind)],
            arrays: vec![array],
        },
    }
}

fn array(
    len: usize,
    validity: ValidityBuilder,
    offsets: Vec<i32>,
    values: Vec<u8>,
) -> wit::ArrayNode {
    wit::ArrayNode {
        len: len as u32,
        validity: validity.finish(),
        offsets,
        values,
    }
}

/// Builds a `decimal(P,S)` output column from exact [`Decimal`]s.
#[derive(Debug, Clone)]
pub struct DecimalBuilder {
    precision: u8,
    scale: u8,
    values: Vec<u8>,
    validity: ValidityBuilder,
}

impl DecimalBuilder {
    /// An empty `decimal(precision, scale)` column; an error unless
    /// 1 ≤ precision ≤ 38 and scale ≤ precision.
    pub fn new(precision: u8, scale: u8) -> Result<Self, Error> {
        if !(1..=crate::decimal::MAX_PRECISION).contains(&precision) || scale > precision {
            return Err(Error::failed(format!(
                "decimal({precision},{scale}) is not a decimal type (precision 1 to 38, scale 0 \
                 to precision)"
            )));
        }
        Ok(DecimalBuilder {
            precision,
            scale,
            values: Vec::new(),
            validity: ValidityBuilder::default(),
        })
    }

    /// Appends `value` at the column's scale; an error if that would
    /// drop a digit or it has more digits than the precision (never
    /// rounded).
    pub fn push(&mut self, value: Decimal) -> Result<(), Error> {
        let fits = value
            .rescale(self.scale)
            .map(Decimal::unscaled)
            .filter(|u| u.unsigned_abs() < 10u128.pow(u32::from(self.precision)));
        let Some(unscaled) = fits else {
            return Err(Error::failed(format!(
                "{value} does not fit decimal({},{}) exactly",
                self.precision, self.scale
            )));
        };
        self.values.extend_from_slice(&unscaled.to_le_bytes());
        self.validity.push(true);
        Ok(())
    }

    /// Appends a null.
    pub fn push_null(&mut self) {
        self.values.extend_from_slice(&[0; 16]);
        self.validity.push(false);
    }

    /// Appends a value or a null.
    pub fn push_option(&mut self, value: Option<Decimal>) -> Result<(), Error> {
        match value {
            Some(v) => self.push(v),
            None => {
                self.push_null();
                Ok(())
            }
        }
    }
}

impl From<DecimalBuilder> for ColumnBuilder {
    fn from(b: DecimalBuilder) -> Self {
        let rows = b.validity.len;
        let kind = wit::NodeKind::Decimal128(wit::DecimalType {
            precision: b.precision,
            scale: b.scale,
        });
        typed(rows, kind, array(rows, b.validity, Vec::new(), b.values))
    }
}

/// Builds a `timestamp` output column.
#[derive(Debug, Clone)]
pub struct TimestampBuilder {
    unit: TimeUnit,
    timezone: Option<String>,
    values: Vec<u8>,
    validity: ValidityBuilder,
}

impl TimestampBuilder {
    /// An empty column of `unit` counts in `timezone` (`UTC`, `+01:00`;
    /// `None` for wall-clock times).
    pub fn new(unit: TimeUnit, timezone: Option<&str>) -> Self {
        TimestampBuilder {
            unit,
            timezone: timezone.map(str::to_string),
            values: Vec::new(),
            validity: ValidityBuilder::default(),
        }
    }

    /// Appends a count of the column's unit.
    pub fn push_count(&mut self, count: i64) {
        self.values.extend_from_slice(&count.to_le_bytes());
        self.validity.push(true);
    }

    /// Appends an instant; an error if it is in another unit (convert it
    /// first: a silent truncation would move the instant).
    pub fn push(&mut self, value: Timestamp) -> Result<(), Error> {
        if value.unit != self.unit {
            return Err(Error::failed(format!(
                "a {:?} timestamp pushed to a {:?} column",
                value.unit, self.unit
            )));
        }
        self.push_count(value.count);
        Ok(())
    }

    /// Appends a null.
    pub fn push_null(&mut self) {
        self.values.extend_from_slice(&[0; 8]);
        self.validity.push(false);
    }
}

impl From<TimestampBuilder> for ColumnBuilder {
    fn from(b: TimestampBuilder) -> Self {
        let rows = b.validity.len;
        let kind = wit::NodeKind::Timestamp(wit::TimestampType {
            unit: crate::time::to_wit(b.unit),
            timezone: b.timezone,
        });
        typed(rows, kind, array(rows, b.validity, Vec::new(), b.values))
    }
}

/// Builds a `date` output column.
#[derive(Debug, Clone, Default)]
pub struct DateBuilder {
    values: Vec<u8>,
    validity: ValidityBuilder,
}

impl DateBuilder {
    /// An empty column.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends a date.
    pub fn push(&mut self, value: Date) {
        self.values.extend_from_slice(&value.0.to_le_bytes());
        self.validity.push(true);
    }

    /// Appends a null.
    pub fn push_null(&mut self) {
        self.values.extend_from_slice(&[0; 4]);
        self.validity.push(false);
    }
}

impl From<DateBuilder> for ColumnBuilder {
    fn from(b: DateBuilder) -> Self {
        let rows = b.validity.len;
        typed(
            rows,
            wit::NodeKind::Date32,
            array(rows, b.validity, Vec::new(), b.values),
        )
    }
}

/// Builds a `binary` output column.
#[derive(Debug, Clone)]
pub struct BinaryBuilder {
    offsets: Vec<i32>,
    data: Vec<u8>,
    validity: ValidityBuilder,
}

impl Default for BinaryBuilder {
    fn default() -> Self {
        BinaryBuilder {
            offsets: vec![0],
            data: Vec::new(),
            validity: ValidityBuilder::default(),
        }
    }
}

impl BinaryBuilder {
    /// An empty column.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends bytes.
    pub fn push(&mut self, value: &[u8]) {
        self.data.extend_from_slice(value);
        self.offsets.push(self.data.len() as i32);
        self.validity.push(true);
    }

    /// Appends a null.
    pub fn push_null(&mut self) {
        self.offsets.push(self.data.len() as i32);
        self.validity.push(false);
    }
}

impl From<BinaryBuilder> for ColumnBuilder {
    fn from(b: BinaryBuilder) -> Self {
        let rows = b.validity.len;
        typed(
            rows,
            wit::NodeKind::Binary,
            array(rows, b.validity, b.offsets, b.data),
        )
    }
}

/// `nodes` of a child placed at `at` in its parent's list: its indices move
/// by `at`.
fn shifted(nodes: Vec<wit::TypeNode>, at: u32) -> impl Iterator<Item = wit::TypeNode> {
    nodes.into_iter().map(move |mut n| {
        n.kind = match n.kind {
            wit::NodeKind::List(c) => wit::NodeKind::List(c + at),
            wit::NodeKind::Struct(cs) => {
                wit::NodeKind::Struct(cs.into_iter().map(|c| c + at).collect())
            }
            other => other,
        };
        n
    })
}

impl ColumnBuilder {
    /// A `struct` column of `fields` (each with one entry per row); with
    /// `valid`, row `i` is null where `valid[i]` is false.
    pub fn struct_of(
        fields: Vec<(&str, ColumnBuilder)>,
        valid: Option<&[bool]>,
    ) -> Result<ColumnBuilder, Error> {
        let rows = valid.map_or_else(|| fields.first().map_or(0, |(_, c)| c.rows), <[bool]>::len);
        let mut nodes = vec![node(wit::NodeKind::Struct(Vec::new()))];
        let mut arrays = vec![array(
            rows,
            ValidityBuilder::from_flags(valid.unwrap_or(&[])),
            Vec::new(),
            Vec::new(),
        )];
        if valid.is_none() {
            arrays[0].validity = None;
        }
        let mut children = Vec::with_capacity(fields.len());
        for (name, column) in fields {
            if column.rows != rows {
                return Err(Error::failed(format!(
                    "struct field `{name}` has {} rows where the struct has {rows}",
                    column.rows
                )));
            }
            let at = nodes.len() as u32;
            let (mut child_nodes, child_arrays) = column.into_typed();
            child_nodes[0].name = name.to_string();
            children.push(at);
            nodes.extend(shifted(child_nodes, at));
            arrays.extend(child_arrays);
        }
        nodes[0].kind = wit::NodeKind::Struct(children);
        Ok(ColumnBuilder {
            rows,
            built: Built::Typed { nodes, arrays },
        })
    }

    /// A `list` column: row `i`'s elements are `items[offsets[i]..offsets[i+1]]`
    /// (`offsets` has one entry more than rows, from 0, never decreasing,
    /// ending at the items' length); with `valid`, row `i` is null where
    /// `valid[i]` is false.
    pub fn list_of(
        offsets: Vec<i32>,
        items: ColumnBuilder,
        valid: Option<&[bool]>,
    ) -> Result<ColumnBuilder, Error> {
        let rows = offsets.len().saturating_sub(1);
        let ok = offsets.first() == Some(&0)
            && offsets.windows(2).all(|w| w[0] <= w[1])
            && offsets.last().is_some_and(|&l| l as usize == items.rows)
            && valid.is_none_or(|v| v.len() == rows);
        if !ok {
            return Err(Error::failed(format!(
                "list offsets must start at 0, never decrease and end at the {} items (and \
                 validity cover every row)",
                items.rows
            )));
        }
        let (child_nodes, child_arrays) = items.into_typed();
        let mut nodes = vec![node(wit::NodeKind::List(1))];
        nodes.extend(shifted(child_nodes, 1).enumerate().map(|(i, mut n)| {
            if i == 0 {
                n.name = "item".into();
            }
            n
        }));
        let validity = match valid {
            Some(v) => ValidityBuilder::from_flags(v),
            None => ValidityBuilder::default(),
        };
        let mut arrays = vec![array(rows, validity, offsets, Vec::new())];
        arrays.extend(child_arrays);
        Ok(ColumnBuilder {
            rows,
            built: Built::Typed { nodes, arrays },
        })
    }
}

/// The type tree of `field`, its children after it in pre-order.
fn type_nodes(field: &Field, nodes: &mut Vec<wit::TypeNode>) {
    let at = nodes.len();
    nodes.push(wit::TypeNode {
        name: field.name.clone(),
        kind: wit::NodeKind::Int64,
        nullable: field.nullable,
    });
    nodes[at].kind = match &field.data_type {
        DataType::Int64 => wit::NodeKind::Int64,
        DataType::Float64 => wit::NodeKind::Float64,
        DataType::Boolean => wit::NodeKind::Boolean,
        DataType::Utf8 => wit::NodeKind::Utf8,
        DataType::Binary => wit::NodeKind::Binary,
        DataType::Date => wit::NodeKind::Date32,
        DataType::Decimal { precision, scale } => wit::NodeKind::Decimal128(wit::DecimalType {
            precision: *precision,
            scale: *scale,
        }),
        DataType::Timestamp { unit, timezone } => wit::NodeKind::Timestamp(wit::TimestampType {
            unit: crate::time::to_wit(*unit),
            timezone: timezone.clone(),
        }),
        DataType::List(item) => {
            let child = nodes.len() as u32;
            type_nodes(item, nodes);
            wit::NodeKind::List(child)
        }
        DataType::Struct(fields) => {
            let mut children = Vec::new();
            for f in fields {
                children.push(nodes.len() as u32);
                type_nodes(f, nodes);
            }
            wit::NodeKind::Struct(children)
        }
    };
}

fn arrays(column: AnyColumn, out: &mut Vec<wit::ArrayNode>) {
    out.push(wit::ArrayNode {
        len: column.len as u32,
        validity: column.validity.0,
        offsets: column.offsets,
        values: column.values,
    });
    for child in column.children {
        arrays(child, out);
    }
}

impl From<AnyColumn> for ColumnBuilder {
    /// An input column (or a gather of its rows) passed to the output as
    /// it is, whatever its type.
    fn from(column: AnyColumn) -> Self {
        let rows = column.len;
        let mut nodes = Vec::new();
        type_nodes(&column.field, &mut nodes);
        let mut out = Vec::new();
        arrays(column, &mut out);
        ColumnBuilder {
            rows,
            built: Built::Typed { nodes, arrays: out },
        }
    }
}

/// A basic column as a one-node tree (its values' bytes, little-endian).
pub(crate) fn basic_as_typed(
    column: wit::Column,
    rows: usize,
) -> (Vec<wit::TypeNode>, Vec<wit::ArrayNode>) {
    let le = |bytes: Vec<[u8; 8]>| bytes.concat();
    let (kind, offsets, values) = match column.values {
        wit::Values::Int64(v) => (
            wit::NodeKind::Int64,
            Vec::new(),
            le(v.iter().map(|x| x.to_le_bytes()).collect()),
        ),
        wit::Values::Float64(v) => (
            wit::NodeKind::Float64,
            Vec::new(),
            le(v.iter().map(|x| x.to_le_bytes()).collect()),
        ),
        wit::Values::Boolean(bits) => (wit::NodeKind::Boolean, Vec::new(), bits),
        wit::Values::Utf8(u) => (wit::NodeKind::Utf8, u.offsets, u.data),
    };
    let array = wit::ArrayNode {
        len: rows as u32,
        validity: column.validity,
        offsets,
        values,
    };
    (vec![node(kind)], vec![array])
}
