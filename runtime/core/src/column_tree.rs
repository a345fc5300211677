//! Columns of every type as they cross the sandbox: a column's type as a
//! tree flattened into a list of nodes (WIT has no recursive types), and
//! its Arrow arrays as one node per type node, in the same pre-order.
//!
//! The host describes input columns with [`type_nodes`] and validates what
//! a guest sends back with [`to_batch`]: nothing a guest returns is
//! trusted. Type trees must be trees, in pre-order; every buffer must have
//! the length its type and row count imply; offsets, UTF-8 and bitmaps are
//! checked by Arrow's full validation, decimals against their precision.
//! This module has no Wasm in it so that it can be tested and fuzzed on
//! its own.

use crate::schema::arrow_zone;
use anyhow::{bail, ensure, Context, Result};
use arrow_array::{make_array, Array, ArrayRef, RecordBatch};
use arrow_buffer::{BooleanBuffer, Buffer, NullBuffer};
use arrow_data::ArrayData;
use arrow_schema::{DataType, Field, Fields, Schema, TimeUnit};
use std::sync::Arc;

/// The deepest nesting a guest may declare (a list of structs of lists…).
pub const MAX_DEPTH: usize = 32;

/// The most type nodes one output may declare, all columns together: the
/// host's work per node is larger than the guest's.
pub const MAX_NODES: usize = 10_000;

/// The longest name of a column, field or list element, in bytes.
pub const MAX_NAME: usize = 255;

/// The earliest and latest instants and dates a guest may emit
/// (0001-01-01 and 9999-12-31T23:59:59.999999999): what RFC 3339 text,
/// PostgreSQL and Delta all hold.
const FIRST_SECOND: i64 = -62_135_596_800;
const LAST_SECOND: i64 = 253_402_300_799;
const FIRST_DAY: i32 = -719_162;
const LAST_DAY: i32 = 2_932_896;

/// What one node of a column's type is (WIT `node-kind`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NodeKind {
    /// 64-bit integers.
    Int64,
    /// 64-bit floats.
    Float64,
    /// Booleans.
    Boolean,
    /// UTF-8 text.
    Utf8,
    /// Bytes.
    Binary,
    /// Days since 1970-01-01.
    Date32,
    /// An exact decimal.
    Decimal128 {
        /// Digits in all.
        precision: u8,
        /// Digits after the point.
        scale: u8,
    },
    /// A count of `unit`s since the epoch, in `timezone` if any.
    Timestamp {
        /// The unit.
        unit: TimeUnit,
        /// `UTC` or `+HH:MM`; none for a wall-clock time.
        timezone: Option<String>,
    },
    /// A list whose element is node `.0`.
    List(u32),
    /// A record whose fields are these nodes.
    Struct(Vec<u32>),
}

/// One node of a column's type (WIT `type-node`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TypeNode {
    /// The column's, field's or element's name.
    pub name: String,
    /// What it is.
    pub kind: NodeKind,
    /// Whether entries may be null.
    pub nullable: bool,
}

/// One node's array (WIT `array-node`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ArrayNode {
    /// Entries in this node.
    pub len: u32,
    /// Validity bitmap; `None`: every entry is valid.
    pub validity: Option<Vec<u8>>,
    /// `len + 1` offsets for utf8, binary and list nodes.
    pub offsets: Vec<i32>,
    /// The values buffer, little-endian.
    pub values: Vec<u8>,
}

/// A column of a guest's typed output: its type and its arrays.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TypedColumn {
    /// The type tree; node 0's name is the column's.
    pub nodes: Vec<TypeNode>,
    /// One array per type node, in the same order.
    pub arrays: Vec<ArrayNode>,
}

/// The rows of a guest's `emit-typed` call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TypedOutput {
    /// Rows every column must hold.
    pub num_rows: u32,
    /// The columns.
    pub columns: Vec<TypedColumn>,
}

/// `field`'s type as a flattened tree, in pre-order; an error for an Arrow
/// type the contract has no node for.
pub fn type_nodes(field: &Field) -> Result<Vec<TypeNode>> {
    let mut nodes = Vec::new();
    push_nodes(field, &mut nodes)?;
    Ok(nodes)
}

fn push_nodes(field: &Field, nodes: &mut Vec<TypeNode>) -> Result<()> {
    let at = nodes.len();
    nodes.push(TypeNode {
        name: field.name().clone(),
        kind: NodeKind::Int64,
        nullable: field.is_nullable(),
    });
    let kind = match field.data_type() {
        DataType::Int64 => NodeKind::Int64,
        DataType::Float64 => NodeKind::Float64,
        DataType::Boolean => NodeKind::Boolean,
        DataType::Utf8 => NodeKind::Utf8,
        DataType::Binary => NodeKind::Binary,
        DataType::Date32 => NodeKind::Date32,
        DataType::Decimal128(precision, scale) if *scale >= 0 => NodeKind::Decimal128 {
            precision: *precision,
            scale: *scale as u8,
        },
        DataType::Timestamp(unit, zone) => NodeKind::Timestamp {
            unit: *unit,
            timezone: zone.as_deref().map(wit_zone),
        },
        DataType::List(item) => {
            let child = nodes.len() as u32;
            push_nodes(item, nodes)?;
            NodeKind::List(child)
        }
        DataType::Struct(fields) => {
            let mut children = Vec::with_capacity(fields.len());
            for f in fields {
                children.push(nodes.len() as u32);
                push_nodes(f, nodes)?;
            }
            NodeKind::Struct(children)
        }
        other => bail!(
            "column `{}` is {other}, which cannot be passed to an operator",
            field.name()
        ),
    };
    nodes[at].kind = kind;
    Ok(())
}

/// The zone as operators see it: Arrow's `+00:00` is `UTC`.
fn wit_zone(zone: &str) -> String {
    match zone {
        "+00:00" => "UTC".to_string(),
        other => other.to_string(),
    }
}

/// The Arrow field a guest's type tree describes, after checking that it
/// is a tree in pre-order, at most [`MAX_DEPTH`] deep, with valid decimal
/// and timestamp parameters. Every level is made nullable, as the basic
/// output columns are.
pub fn field_of(nodes: &[TypeNode]) -> Result<Field> {
    ensure!(
        nodes.len() <= MAX_NODES,
        "the type has {} nodes, more than {MAX_NODES}",
        nodes.len()
    );
    let mut next = 0;
    let field = field_at(nodes, 0, &mut next, 0)?;
    ensure!(
        next == nodes.len(),
        "type node {next} is no node's child (a type is a tree in pre-order)"
    );
    Ok(field)
}

fn field_at(nodes: &[TypeNode], index: u32, next: &mut usize, depth: usize) -> Result<Field> {
    ensure!(
        depth < MAX_DEPTH,
        "types nest deeper than {MAX_DEPTH} levels"
    );
    ensure!(
        index as usize == *next,
        "type node {index} is out of pre-order (expected node {next})"
    );
    let node = nodes
        .get(index as usize)
        .with_context(|| format!("type node {index} does not exist"))?;
    *next += 1;
    ensure!(
        node.name.len() <= MAX_NAME,
        "a name of {} bytes is longer than {MAX_NAME}",
        node.name.len()
    );
    let data_type = match &node.kind {
        NodeKind::Int64 => DataType::Int64,
        NodeKind::Float64 => DataType::Float64,
        NodeKind::Boolean => DataType::Boolean,
        NodeKind::Utf8 => DataType::Utf8,
        NodeKind::Binary => DataType::Binary,
        NodeKind::Date32 => DataType::Date32,
        NodeKind::Decimal128 { precision, scale } => {
            ensure!(
                (1..=crate::schema::MAX_DECIMAL_PRECISION).contains(precision)
                    && scale <= precision,
                "`{}`: decimal({precision},{scale}) is not a decimal type (precision 1 to 38, \
                 scale 0 to precision)",
                node.name
            );
            DataType::Decimal128(*precision, *scale as i8)
        }
        NodeKind::Timestamp { unit, timezone } => {
            DataType::Timestamp(*unit, timezone.as_deref().map(checked_zone).transpose()?)
        }
        NodeKind::List(child) => {
            DataType::List(Arc::new(field_at(nodes, *child, next, depth + 1)?))
        }
        NodeKind::Struct(children) => {
            ensure!(
                !children.is_empty(),
                "struct `{}` has no fields (rows of nothing would cost nothing to emit)",
                node.name
            );
            let mut fields = Vec::with_capacity(children.len());
            let mut names = std::collections::HashSet::with_capacity(children.len());
            for child in children {
                let field = field_at(nodes, *child, next, depth + 1)?;
                ensure!(
                    names.insert(field.name().clone()),
                    "struct `{}` has field `{}` twice",
                    node.name,
                    field.name()
                );
                fields.push(field);
            }
            DataType::Struct(Fields::from(fields))
        }
    };
    Ok(Field::new(&node.name, data_type, true))
}

/// `UTC` (or `Z`) as `+00:00`, an offset `±HH:MM` as it is (`-00:00` as
/// `+00:00`): one spelling per zone, so that two emits of the same type
/// give the same Arrow type.
fn checked_zone(zone: &str) -> Result<Arc<str>> {
    let arrow = arrow_zone(zone);
    let b = arrow.as_bytes();
    let spelled = b.len() == 6
        && matches!(b[0], b'+' | b'-')
        && b[1..3].iter().chain(&b[4..6]).all(u8::is_ascii_digit)
        && b[3] == b':';
    ensure!(
        spelled && arrow.parse::<arrow_array::timezone::Tz>().is_ok(),
        "`{zone}` is not a time zone: UTC or an offset such as +01:00"
    );
    Ok(Arc::from(if arrow == "-00:00" { "+00:00" } else { arrow }))
}

/// Refuses an instant or date outside years 1 to 9999, which sinks cannot
/// write (their text would be an error message, not a time).
fn check_range(data: &ArrayData) -> Result<()> {
    use arrow_array::cast::AsArray;
    use arrow_array::types::{Date32Type, Int64Type};
    let array = make_array(data.clone());
    let (first, last) = match data.data_type() {
        DataType::Date32 => {
            let days = array.as_primitive::<Date32Type>();
            return match days
                .iter()
                .flatten()
                .find(|d| !(FIRST_DAY..=LAST_DAY).contains(d))
            {
                Some(d) => bail!("a date {d} days from 1970-01-01 is outside years 1 to 9999"),
                None => Ok(()),
            };
        }
        DataType::Timestamp(TimeUnit::Second, _) => (FIRST_SECOND, LAST_SECOND),
        DataType::Timestamp(TimeUnit::Millisecond, _) => {
            (FIRST_SECOND * 1_000, LAST_SECOND * 1_000 + 999)
        }
        DataType::Timestamp(TimeUnit::Microsecond, _) => {
            (FIRST_SECOND * 1_000_000, LAST_SECOND * 1_000_000 + 999_999)
        }
        // i64 nanoseconds reach only 1677 to 2262.
        _ => return Ok(()),
    };
    let counts = arrow_cast::cast(&array, &DataType::Int64)?;
    match counts
        .as_primitive::<Int64Type>()
        .iter()
        .flatten()
        .find(|c| !(first..=last).contains(c))
    {
        Some(c) => bail!(
            "a timestamp of {c} {} is outside years 1 to 9999",
            data.data_type()
        ),
        None => Ok(()),
    }
}

/// The Arrow array of type `field` from a guest's arrays, one per type
/// node in pre-order, checked in full: lengths, offsets, UTF-8, bitmaps
/// and decimal precision.
pub fn array_of(field: &Field, arrays: Vec<ArrayNode>, rows: usize) -> Result<ArrayRef> {
    let count = arrays.len();
    let mut arrays = arrays.into_iter();
    let data = data_of(field.data_type(), &mut arrays, rows)?;
    ensure!(
        arrays.next().is_none(),
        "has {count} arrays, more than its type has nodes"
    );
    Ok(make_array(data))
}

fn data_of(
    data_type: &DataType,
    arrays: &mut impl Iterator<Item = ArrayNode>,
    len: usize,
) -> Result<ArrayData> {
    let node = arrays
        .next()
        .context("has fewer arrays than its type has nodes")?;
    ensure!(
        node.len as usize == len,
        "the {data_type} array has {} entries where {len} are expected",
        node.len
    );
    let nulls = nulls(node.validity, len)?;
    let builder = ArrayData::builder(data_type.clone()).len(len).nulls(nulls);
    let builder = match data_type {
        DataType::Boolean => {
            ensure!(
                node.values.len() * 8 >= len,
                "boolean values have {} bytes, too few for {len} entries",
                node.values.len()
            );
            no_offsets(&node.offsets, data_type)?;
            builder.add_buffer(Buffer::from_vec(node.values))
        }
        DataType::Utf8 | DataType::Binary => {
            check_offsets(&node.offsets, len, data_type)?;
            builder
                .add_buffer(Buffer::from_vec(node.offsets))
                .add_buffer(Buffer::from_vec(node.values))
        }
        DataType::List(item) => {
            check_offsets(&node.offsets, len, data_type)?;
            let items = node.offsets.last().copied().unwrap_or(0) as usize;
            let child = data_of(item.data_type(), arrays, items)?;
            builder
                .add_buffer(Buffer::from_vec(node.offsets))
                .add_child_data(child)
        }
        DataType::Struct(fields) => {
            no_offsets(&node.offsets, data_type)?;
            ensure!(node.values.is_empty(), "a struct array has values");
            let mut children = Vec::with_capacity(fields.len());
            for f in fields {
                children.push(data_of(f.data_type(), arrays, len)?);
            }
            builder.child_data(children)
        }
        fixed => {
            let width = fixed
                .primitive_width()
                .with_context(|| format!("{fixed} is not a type operators can emit"))?;
            ensure!(
                node.values.len() == len * width,
                "the {fixed} array has {} value bytes where {len} entries take {}",
                node.values.len(),
                len * width
            );
            no_offsets(&node.offsets, data_type)?;
            builder.add_buffer(Buffer::from_vec(node.values))
        }
    };
    let data = builder.align_buffers(true).build()?;
    match data_type {
        DataType::Decimal128(precision, _) => arrow_array::Decimal128Array::from(data.clone())
            .validate_decimal_precision(*precision)
            .context("a decimal has more digits than its precision")?,
        DataType::Date32 | DataType::Timestamp(..) => check_range(&data)?,
        _ => {}
    }
    Ok(data)
}

fn nulls(validity: Option<Vec<u8>>, len: usize) -> Result<Option<NullBuffer>> {
    let Some(bits) = validity else {
        return Ok(None);
    };
    ensure!(
        bits.len() * 8 >= len,
        "validity bitmap has {} bytes, too few for {len} entries",
        bits.len()
    );
    let nulls = NullBuffer::new(BooleanBuffer::new(Buffer::from_vec(bits), 0, len));
    Ok((nulls.null_count() > 0).then_some(nulls))
}

fn check_offsets(offsets: &[i32], len: usize, data_type: &DataType) -> Result<()> {
    ensure!(
        offsets.len() == len + 1,
        "the {data_type} array has {} offsets where {len} entries take {}",
        offsets.len(),
        len + 1
    );
    ensure!(
        offsets[0] == 0 && offsets.windows(2).all(|w| w[0] <= w[1]),
        "{data_type} offsets must start at 0 and never decrease"
    );
    Ok(())
}

fn no_offsets(offsets: &[i32], data_type: &DataType) -> Result<()> {
    ensure!(offsets.is_empty(), "the {data_type} array has offsets");
    Ok(())
}

/// Validates a guest's typed rows and turns them into an Arrow batch.
pub fn to_batch(output: TypedOutput) -> Result<RecordBatch> {
    let rows = output.num_rows as usize;
    let nodes: usize = output.columns.iter().map(|c| c.nodes.len()).sum();
    ensure!(
        nodes <= MAX_NODES,
        "the output's types have {nodes} nodes, more than {MAX_NODES}"
    );
    let mut fields = Vec::with_capacity(output.columns.len());
    let mut names = std::collections::HashSet::with_capacity(output.columns.len());
    let mut arrays = Vec::with_capacity(output.columns.len());
    for (i, column) in output.columns.into_iter().enumerate() {
        let name = column
            .nodes
            .first()
            .map_or_else(|| format!("#{i}"), |n| n.name.clone());
        let field = field_of(&column.nodes).with_context(|| format!("output column `{name}`"))?;
        if !names.insert(field.name().clone()) {
            bail!("output column `{name}` appears twice");
        }
        let array = array_of(&field, column.arrays, rows)
            .with_context(|| format!("output column `{name}`"))?;
        fields.push(field);
        arrays.push(array);
    }
    let schema = Arc::new(Schema::new(fields));
    if arrays.is_empty() {
        ensure!(rows == 0, "output declares {rows} rows but has no columns");
        return Ok(RecordBatch::new_empty(schema));
    }
    Ok(RecordBatch::try_new(schema, arrays)?)
}

/// About how many bytes row `row` of `array` takes (its values, offsets
/// and validity; a list's items at their column's average size): what a
/// gather of it costs the host.
pub fn row_bytes(array: &dyn Array, row: usize) -> usize {
    use arrow_array::cast::AsArray;
    let bytes = match array.data_type() {
        DataType::Utf8 => {
            let o = array.as_string::<i32>().offsets();
            (o[row + 1] - o[row]) as usize + 4
        }
        DataType::Binary => {
            let o = array.as_binary::<i32>().offsets();
            (o[row + 1] - o[row]) as usize + 4
        }
        DataType::List(_) => {
            let list = array.as_list::<i32>();
            let items = list.values();
            let per_item = items.get_array_memory_size() / items.len().max(1);
            let o = list.offsets();
            (o[row + 1] - o[row]) as usize * per_item.max(1) + 4
        }
        DataType::Struct(_) => array
            .as_struct()
            .columns()
            .iter()
            .map(|c| row_bytes(c.as_ref(), row))
            .sum(),
        other => other.primitive_width().unwrap_or(1),
    };
    bytes + 1
}

/// `array`'s own arrays as the guest receives them: one node per type
/// node, sliced arrays rebased to start at 0. Copies only what slicing
/// leaves unaligned (a bitmap not starting on a byte, string and list
/// offsets not starting at 0); the host lowers the rest from the
/// array's buffers (`weir-host`'s lowering does the same without this
/// owned copy).
pub fn array_nodes(array: &dyn Array) -> Result<Vec<ArrayNode>> {
    let mut out = Vec::new();
    visit(array, &mut |view: NodeView| {
        out.push(ArrayNode {
            len: view.len as u32,
            validity: view.validity.map(|b| b.as_slice().to_vec()),
            offsets: view
                .offsets
                .map_or_else(Vec::new, |o| o.typed_data::<i32>().to_vec()),
            values: view.values.map_or_else(Vec::new, |v| v.as_slice().to_vec()),
        });
    })?;
    Ok(out)
}

/// One array node's buffers as Arrow holds them (shared, not copied).
pub struct NodeView {
    /// Entries.
    pub len: usize,
    /// Validity bits from bit 0.
    pub validity: Option<Buffer>,
    /// Offsets from 0 (`i32`s).
    pub offsets: Option<Buffer>,
    /// Values from entry 0.
    pub values: Option<Buffer>,
}

/// Calls `f` with every node of `array`'s tree in pre-order, buffers
/// rebased so that entry 0 is the first of each.
pub fn visit(array: &dyn Array, f: &mut dyn FnMut(NodeView)) -> Result<()> {
    use arrow_array::cast::AsArray;
    let len = array.len();
    let validity = array.nulls().map(|n| n.inner().sliced());
    let view = |offsets, values| NodeView {
        len,
        validity: validity.clone(),
        offsets,
        values,
    };
    match array.data_type() {
        DataType::Boolean => f(view(None, Some(array.as_boolean().values().sliced()))),
        DataType::Utf8 => {
            let s = array.as_string::<i32>();
            let (offsets, values) = rebased_bytes(s.offsets(), s.values());
            f(view(Some(offsets), Some(values)))
        }
        DataType::Binary => {
            let b = array.as_binary::<i32>();
            let (offsets, values) = rebased_bytes(b.offsets(), b.values());
            f(view(Some(offsets), Some(values)))
        }
        DataType::List(_) => {
            let list = array.as_list::<i32>();
            let offsets = list.offsets();
            let (first, last) = (offsets[0], offsets[offsets.len() - 1]);
            f(view(Some(rebased_offsets(offsets)), None));
            let items = list.values().slice(first as usize, (last - first) as usize);
            visit(items.as_ref(), f)?;
        }
        DataType::Struct(_) => {
            f(view(None, None));
            for child in array.as_struct().columns() {
                visit(child.as_ref(), f)?;
            }
        }
        fixed => {
            let width = fixed
                .primitive_width()
                .with_context(|| format!("{fixed} cannot be passed to an operator"))?;
            let data = array.to_data();
            let values = data.buffers()[0].slice_with_length(data.offset() * width, len * width);
            f(view(None, Some(values)))
        }
    }
    Ok(())
}

fn rebased_bytes(offsets: &arrow_buffer::OffsetBuffer<i32>, values: &Buffer) -> (Buffer, Buffer) {
    let (first, last) = (offsets[0], offsets[offsets.len() - 1]);
    let values = values.slice_with_length(first as usize, (last - first) as usize);
    (rebased_offsets(offsets), values)
}

fn rebased_offsets(offsets: &arrow_buffer::OffsetBuffer<i32>) -> Buffer {
    let first = offsets[0];
    if first == 0 {
        offsets.inner().inner().clone()
    } else {
        Buffer::from_vec(offsets.iter().map(|o| o - first).collect::<Vec<_>>())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::builder::{Decimal128Builder, ListBuilder, StringBuilder};
    use arrow_array::{
        BinaryArray, Date32Array, Decimal128Array, Int64Array, StructArray,
        TimestampMillisecondArray,
    };

    /// A payment-like batch: every node kind, nulls, nesting.
    fn payments() -> RecordBatch {
        let amount: ArrayRef = Arc::new(
            Decimal128Array::from(vec![Some(1999), None, Some(-5), Some(10_000_000)])
                .with_precision_and_scale(18, 2)
                .unwrap(),
        );
        let ts: ArrayRef =
            Arc::new(TimestampMillisecondArray::from(vec![1, 2, 3, 4]).with_timezone("+00:00"));
        let day: ArrayRef = Arc::new(Date32Array::from(vec![
            Some(20_000),
            None,
            Some(0),
            Some(-1),
        ]));
        let raw: ArrayRef = Arc::new(BinaryArray::from_opt_vec(vec![
            Some(b"\x00\xff"),
            Some(b""),
            None,
            Some(b"x"),
        ]));
        let mut tags = ListBuilder::new(StringBuilder::new());
        tags.append_value([Some("a"), None]);
        tags.append_null();
        tags.append_value([Some("bc")]);
        tags.append_value::<[Option<&str>; 0], _>([]);
        let tags: ArrayRef = Arc::new(tags.finish());
        let device: ArrayRef = Arc::new(StructArray::from(vec![
            (
                Arc::new(Field::new("id", DataType::Utf8, true)),
                Arc::new(arrow_array::StringArray::from(vec!["d1", "d2", "d3", "d4"])) as ArrayRef,
            ),
            (
                Arc::new(Field::new("score", DataType::Int64, true)),
                Arc::new(Int64Array::from(vec![Some(1), None, Some(3), Some(4)])) as ArrayRef,
            ),
        ]));
        let mut lines = ListBuilder::new(
            Decimal128Builder::new()
                .with_precision_and_scale(10, 3)
                .unwrap(),
        )
        .with_field(Field::new("line", DataType::Decimal128(10, 3), true));
        lines.append_value([Some(1), Some(2)]);
        lines.append_value([None]);
        lines.append_null();
        lines.append_value([Some(999_999)]);
        let lines: ArrayRef = Arc::new(lines.finish());
        RecordBatch::try_from_iter([
            ("amount", amount),
            ("ts", ts),
            ("day", day),
            ("raw", raw),
            ("tags", tags),
            ("device", device),
            ("lines", lines),
        ])
        .unwrap()
    }

    fn round_trip(batch: &RecordBatch) -> RecordBatch {
        let columns = batch
            .schema()
            .fields()
            .iter()
            .zip(batch.columns())
            .map(|(f, a)| TypedColumn {
                nodes: type_nodes(f).unwrap(),
                arrays: array_nodes(a.as_ref()).unwrap(),
            })
            .collect();
        to_batch(TypedOutput {
            num_rows: batch.num_rows() as u32,
            columns,
        })
        .unwrap()
    }

    #[test]
    fn every_type_crosses_and_comes_back_equal() {
        let batch = payments();
        let back = round_trip(&batch);
        assert_eq!(back.columns(), batch.columns());
        for sliced in [batch.slice(1, 3), batch.slice(3, 1), batch.slice(2, 0)] {
            assert_eq!(round_trip(&sliced).columns(), sliced.columns());
        }
    }

    #[test]
    fn utc_is_spelt_utc_to_guests_and_read_back() {
        let nodes = type_nodes(payments().schema().field(1)).unwrap();
        assert_eq!(
            nodes[0].kind,
            NodeKind::Timestamp {
                unit: TimeUnit::Millisecond,
                timezone: Some("UTC".into())
            }
        );
        assert_eq!(
            field_of(&nodes).unwrap().data_type(),
            &DataType::Timestamp(TimeUnit::Millisecond, Some("+00:00".into()))
        );
    }

    fn node(name: &str, kind: NodeKind) -> TypeNode {
        TypeNode {
            name: name.into(),
            kind,
            nullable: true,
        }
    }

    #[test]
    fn type_trees_that_are_not_trees_are_refused() {
        let cases: Vec<(Vec<TypeNode>, &str)> = vec![
            (vec![node("a", NodeKind::List(0))], "out of pre-order"),
            (vec![node("a", NodeKind::List(5))], "out of pre-order"),
            (
                vec![
                    node("a", NodeKind::Struct(vec![1, 1])),
                    node("b", NodeKind::Int64),
                ],
                "out of pre-order",
            ),
            (
                vec![node("a", NodeKind::Int64), node("b", NodeKind::Int64)],
                "no node's child",
            ),
            (
                vec![node(
                    "a",
                    NodeKind::Decimal128 {
                        precision: 39,
                        scale: 0,
                    },
                )],
                "not a decimal type",
            ),
            (
                vec![node(
                    "a",
                    NodeKind::Decimal128 {
                        precision: 4,
                        scale: 5,
                    },
                )],
                "not a decimal type",
            ),
            (
                vec![node(
                    "a",
                    NodeKind::Timestamp {
                        unit: TimeUnit::Second,
                        timezone: Some("Mars/Olympus".into()),
                    },
                )],
                "not a time zone",
            ),
            (vec![], "does not exist"),
            (vec![node("s", NodeKind::Struct(vec![]))], "has no fields"),
            (
                vec![node(&"n".repeat(256), NodeKind::Int64)],
                "longer than 255",
            ),
            (
                vec![node(
                    "a",
                    NodeKind::Timestamp {
                        unit: TimeUnit::Second,
                        timezone: Some("+0100".into()),
                    },
                )],
                "not a time zone",
            ),
        ];
        for (nodes, want) in cases {
            let err = format!("{:#}", field_of(&nodes).unwrap_err());
            assert!(err.contains(want), "{nodes:?}: {err}");
        }
        let minus_zero = vec![node(
            "a",
            NodeKind::Timestamp {
                unit: TimeUnit::Second,
                timezone: Some("-00:00".into()),
            },
        )];
        assert_eq!(
            field_of(&minus_zero).unwrap().data_type(),
            &DataType::Timestamp(TimeUnit::Second, Some("+00:00".into())),
            "one spelling per zone"
        );
        let wide = vec![node("a", NodeKind::Int64); MAX_NODES + 1];
        assert!(format!("{:#}", field_of(&wide).unwrap_err()).contains("more than 10000"));
        let deep: Vec<TypeNode> = (0..40)
            .map(|i| node("l", NodeKind::List(i + 1)))
            .chain([node("x", NodeKind::Int64)])
            .collect();
        assert!(format!("{:#}", field_of(&deep).unwrap_err()).contains("deeper than 32"));
    }

    fn output(nodes: Vec<TypeNode>, arrays: Vec<ArrayNode>, rows: u32) -> Result<RecordBatch> {
        to_batch(TypedOutput {
            num_rows: rows,
            columns: vec![TypedColumn { nodes, arrays }],
        })
    }

    #[test]
    fn bad_arrays_are_refused_naming_the_column() {
        let decimal = || {
            vec![node(
                "amount",
                NodeKind::Decimal128 {
                    precision: 3,
                    scale: 2,
                },
            )]
        };
        let values = |v: &[i128]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
        let ok = ArrayNode {
            len: 2,
            values: values(&[100, -999]),
            ..Default::default()
        };
        assert_eq!(
            output(decimal(), vec![ok.clone()], 2).unwrap().num_rows(),
            2
        );
        let cases: Vec<(Vec<TypeNode>, Vec<ArrayNode>, &str)> = vec![
            (
                decimal(),
                vec![ArrayNode {
                    values: values(&[1000, 0]),
                    ..ok.clone()
                }],
                "more digits than its precision",
            ),
            (
                decimal(),
                vec![ArrayNode {
                    values: vec![0; 31],
                    ..ok.clone()
                }],
                "31 value bytes",
            ),
            (
                decimal(),
                vec![ArrayNode {
                    len: 3,
                    ..ok.clone()
                }],
                "3 entries",
            ),
            (
                decimal(),
                vec![ok.clone(), ok.clone()],
                "more than its type has nodes",
            ),
            (
                vec![node(
                    "ts",
                    NodeKind::Timestamp {
                        unit: TimeUnit::Second,
                        timezone: None,
                    },
                )],
                vec![ArrayNode {
                    len: 2,
                    values: [0i64, i64::MAX]
                        .iter()
                        .flat_map(|v| v.to_le_bytes())
                        .collect(),
                    ..Default::default()
                }],
                "outside years 1 to 9999",
            ),
            (
                vec![node("day", NodeKind::Date32)],
                vec![ArrayNode {
                    len: 2,
                    values: [0i32, i32::MAX]
                        .iter()
                        .flat_map(|v| v.to_le_bytes())
                        .collect(),
                    ..Default::default()
                }],
                "outside years 1 to 9999",
            ),
            (decimal(), vec![], "fewer arrays"),
            (
                decimal(),
                vec![ArrayNode {
                    validity: Some(vec![]),
                    ..ok.clone()
                }],
                "too few for 2",
            ),
            (
                vec![node("s", NodeKind::Utf8)],
                vec![ArrayNode {
                    len: 2,
                    offsets: vec![0, 2, 1],
                    values: b"ab".to_vec(),
                    ..Default::default()
                }],
                "never decrease",
            ),
            (
                vec![node("s", NodeKind::Utf8)],
                vec![ArrayNode {
                    len: 2,
                    offsets: vec![0, 1, 5],
                    values: b"ab".to_vec(),
                    ..Default::default()
                }],
                "offset",
            ),
            (
                vec![node("s", NodeKind::Utf8)],
                vec![ArrayNode {
                    len: 2,
                    offsets: vec![0, 1, 1],
                    values: vec![0xff],
                    ..Default::default()
                }],
                "invalid utf8",
            ),
            (
                vec![node("l", NodeKind::List(1)), node("i", NodeKind::Int64)],
                vec![
                    ArrayNode {
                        len: 2,
                        offsets: vec![0, 1, 3],
                        ..Default::default()
                    },
                    ArrayNode {
                        len: 2,
                        values: vec![0; 16],
                        ..Default::default()
                    },
                ],
                "2 entries where 3",
            ),
        ];
        for (nodes, arrays, want) in cases {
            let err = format!("{:#}", output(nodes, arrays, 2).unwrap_err()).to_lowercase();
            assert!(err.contains(want), "{err}");
            assert!(err.starts_with("output column `"), "{err}");
        }
    }
}
