//! Columns of every type between the generated WIT types and
//! [`weir_core::column_tree`], where they are described and checked.
//! Moves the guest's buffers; copies only for the owned answers the
//! generated traits need (input columns are lowered by `lowering`).

use super::bindings::weir::operator::types as wit;
use anyhow::Result;
use arrow_array::Array;
use arrow_schema::{Field, TimeUnit};
use weir_core::column_tree::{self as tree, NodeKind};

/// `field`'s whole type, as `batch.typed-schema` answers it.
pub fn column_type(field: &Field) -> Result<wit::ColumnType> {
    let nodes = tree::type_nodes(field)?
        .into_iter()
        .map(|n| wit::TypeNode {
            name: n.name,
            kind: wit_kind(n.kind),
            nullable: n.nullable,
        })
        .collect();
    Ok(wit::ColumnType { nodes })
}

fn wit_kind(kind: NodeKind) -> wit::NodeKind {
    match kind {
        NodeKind::Int64 => wit::NodeKind::Int64,
        NodeKind::Float64 => wit::NodeKind::Float64,
        NodeKind::Boolean => wit::NodeKind::Boolean,
        NodeKind::Utf8 => wit::NodeKind::Utf8,
        NodeKind::Binary => wit::NodeKind::Binary,
        NodeKind::Date32 => wit::NodeKind::Date32,
        NodeKind::Decimal128 { precision, scale } => {
            wit::NodeKind::Decimal128(wit::DecimalType { precision, scale })
        }
        NodeKind::Timestamp { unit, timezone } => wit::NodeKind::Timestamp(wit::TimestampType {
            unit: match unit {
                TimeUnit::Second => wit::TimeUnit::Second,
                TimeUnit::Millisecond => wit::TimeUnit::Millisecond,
                TimeUnit::Microsecond => wit::TimeUnit::Microsecond,
                TimeUnit::Nanosecond => wit::TimeUnit::Nanosecond,
            },
            timezone,
        }),
        NodeKind::List(child) => wit::NodeKind::List(child),
        NodeKind::Struct(children) => wit::NodeKind::Struct(children),
    }
}

fn core_kind(kind: wit::NodeKind) -> NodeKind {
    match kind {
        wit::NodeKind::Int64 => NodeKind::Int64,
        wit::NodeKind::Float64 => NodeKind::Float64,
        wit::NodeKind::Boolean => NodeKind::Boolean,
        wit::NodeKind::Utf8 => NodeKind::Utf8,
        wit::NodeKind::Binary => NodeKind::Binary,
        wit::NodeKind::Date32 => NodeKind::Date32,
        wit::NodeKind::Decimal128(d) => NodeKind::Decimal128 {
            precision: d.precision,
            scale: d.scale,
        },
        wit::NodeKind::Timestamp(t) => NodeKind::Timestamp {
            unit: match t.unit {
                wit::TimeUnit::Second => TimeUnit::Second,
                wit::TimeUnit::Millisecond => TimeUnit::Millisecond,
                wit::TimeUnit::Microsecond => TimeUnit::Microsecond,
                wit::TimeUnit::Nanosecond => TimeUnit::Nanosecond,
            },
            timezone: t.timezone,
        },
        wit::NodeKind::List(child) => NodeKind::List(child),
        wit::NodeKind::Struct(children) => NodeKind::Struct(children),
    }
}

/// A guest's typed rows, moved into the form [`tree::to_batch`] checks.
pub fn output(rows: wit::TypedOutput) -> tree::TypedOutput {
    tree::TypedOutput {
        num_rows: rows.num_rows,
        columns: rows
            .columns
            .into_iter()
            .map(|c| tree::TypedColumn {
                nodes: c
                    .type_
                    .nodes
                    .into_iter()
                    .map(|n| tree::TypeNode {
                        name: n.name,
                        kind: core_kind(n.kind),
                        nullable: n.nullable,
                    })
                    .collect(),
                arrays: c
                    .column
                    .nodes
                    .into_iter()
                    .map(|a| tree::ArrayNode {
                        len: a.len,
                        validity: a.validity,
                        offsets: a.offsets,
                        values: a.values,
                    })
                    .collect(),
            })
            .collect(),
    }
}

/// An owned copy of `array` as the generated bindings return it.
pub fn array_column(array: &dyn Array) -> Result<wit::ArrayColumn> {
    Ok(wit::ArrayColumn {
        nodes: tree::array_nodes(array)?
            .into_iter()
            .map(|a| wit::ArrayNode {
                len: a.len,
                validity: a.validity,
                offsets: a.offsets,
                values: a.values,
            })
            .collect(),
    })
}
