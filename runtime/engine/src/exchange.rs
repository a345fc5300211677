//! The in-process exchange: an epoch's input rows dealt out to the tasks
//! of a parallel pipeline ([`crate::pipeline::Tasks`]).
//!
//! With a routing key (`key = "card_id"`), a row goes to the task that owns
//! the key group of its key's bytes ([`weir_state::key_group`]), so every
//! row of one card meets the same task, and that task owns the card's
//! state. Without one, a source with partitions (Kafka) has each
//! partition read by one task (partition `p` by task `p mod N`, as Kafka
//! consumers share a group's partitions), and other sources' rows are
//! split into even contiguous shares (for stateless operators). Either way a task's rows keep their input order,
//! and input batch `i` gives each task at most one batch, so every task
//! sees the batch boundaries a single task would.

use anyhow::{bail, Context, Result};
use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use arrow_array::{RecordBatch, UInt32Array};
use arrow_schema::{DataType, Schema};
use weir_state::{key_group, KeyGroups};

/// Which input column types can route rows, and how their values become
/// the bytes that are hashed: text as its UTF-8 bytes, an int64 as its 8
/// big-endian bytes (an operator keying state by the number stores it so).
pub fn check_key_column(schema: &Schema, column: &str) -> Result<()> {
    let field = schema.field_with_name(column).map_err(|_| {
        let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
        anyhow::anyhow!(
            "`key` = \"{column}\" is not an input column; the input has: {}",
            names.join(", ")
        )
    })?;
    match field.data_type() {
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View | DataType::Int64 => Ok(()),
        other => bail!(
            "`key` = \"{column}\" is of type {other}; a routing key must be text (utf8) or int64"
        ),
    }
}

/// What decides a row's task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Routing<'a> {
    /// The key group of this column's value.
    Key(&'a str),
    /// This int64 column's source partition, modulo the task count.
    Partition(&'a str),
    /// Even contiguous shares.
    Even,
}

/// `batches` dealt out to `tasks` tasks: one list of batches per task.
pub fn route(
    batches: &[RecordBatch],
    routing: Routing<'_>,
    tasks: u16,
) -> Result<Vec<Vec<RecordBatch>>> {
    let tasks = tasks.max(1);
    match routing {
        Routing::Key(column) => deal(batches, tasks, |b| owners(b, column, tasks)),
        Routing::Partition(column) => deal(batches, tasks, |b| partitions(b, column, tasks)),
        Routing::Even => Ok(evenly(batches, tasks)),
    }
}

/// Each row of `batches` to the task `task_of` names for it, keeping the
/// rows' order within each task.
fn deal(
    batches: &[RecordBatch],
    tasks: u16,
    task_of: impl Fn(&RecordBatch) -> Result<Vec<u16>>,
) -> Result<Vec<Vec<RecordBatch>>> {
    let mut out = vec![Vec::new(); usize::from(tasks)];
    for batch in batches {
        let owners = task_of(batch)?;
        let mut rows: Vec<Vec<u32>> = vec![Vec::new(); usize::from(tasks)];
        for (row, owner) in owners.into_iter().enumerate() {
            rows[usize::from(owner)].push(row as u32);
        }
        for (task, rows) in rows.into_iter().enumerate() {
            if rows.len() == batch.num_rows() {
                out[task].push(batch.clone());
            } else if !rows.is_empty() {
                let taken = arrow_select::take::take_record_batch(batch, &UInt32Array::from(rows))
                    .context("dealing rows out to tasks")?;
                out[task].push(taken);
            }
        }
    }
    Ok(out)
}

/// The task of each row of `batch`, by its key's group (a null key: task 0).
fn owners(batch: &RecordBatch, column: &str, tasks: u16) -> Result<Vec<u16>> {
    let values = batch
        .column_by_name(column)
        .with_context(|| format!("the routing key column `{column}` is not in the input"))?;
    let owner = |bytes: Option<&[u8]>| match bytes {
        Some(b) => KeyGroups::owner(key_group(b), tasks),
        None => 0,
    };
    let values = values.as_ref();
    if let Some(a) = values.as_string_opt::<i32>() {
        return Ok(a.iter().map(|v| owner(v.map(str::as_bytes))).collect());
    }
    if let Some(a) = values.as_string_opt::<i64>() {
        return Ok(a.iter().map(|v| owner(v.map(str::as_bytes))).collect());
    }
    if let Some(a) = values.as_string_view_opt() {
        return Ok(a.iter().map(|v| owner(v.map(str::as_bytes))).collect());
    }
    if let Some(a) = values.as_primitive_opt::<Int64Type>() {
        return Ok(a
            .iter()
            .map(|v| owner(v.map(|n| n.to_be_bytes()).as_ref().map(|b| &b[..])))
            .collect());
    }
    bail!(
        "the routing key column `{column}` is of type {}; it must be text or int64",
        values.data_type()
    )
}

/// The task of each row of `batch` by its source partition (`p mod
/// tasks`; a null partition: task 0).
fn partitions(batch: &RecordBatch, column: &str, tasks: u16) -> Result<Vec<u16>> {
    let values = batch
        .column_by_name(column)
        .with_context(|| format!("the partition column `{column}` is not in the input"))?;
    let values = values
        .as_primitive_opt::<Int64Type>()
        .with_context(|| format!("the partition column `{column}` is not int64"))?;
    Ok(values
        .iter()
        .map(|p| p.map_or(0, |p| p.rem_euclid(i64::from(tasks)) as u16))
        .collect())
}

/// Task `t` gets rows `[t·R/N, (t+1)·R/N)` of the epoch's `R` rows, as
/// slices of the input batches (no copy).
fn evenly(batches: &[RecordBatch], tasks: u16) -> Vec<Vec<RecordBatch>> {
    let n = usize::from(tasks);
    let total: usize = batches.iter().map(RecordBatch::num_rows).sum();
    let bounds: Vec<usize> = (0..=n).map(|t| t * total / n).collect();
    let mut out = vec![Vec::new(); n];
    let mut first_row = 0;
    for batch in batches {
        let last_row = first_row + batch.num_rows();
        for (task, share) in bounds.windows(2).enumerate() {
            let (lo, hi) = (share[0].max(first_row), share[1].min(last_row));
            if lo < hi {
                out[task].push(batch.slice(lo - first_row, hi - lo));
            }
        }
        first_row = last_row;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::{Int64Array, StringArray};
    use arrow_schema::Field;
    use std::sync::Arc;

    fn batch(cards: &[Option<&str>], seq: std::ops::Range<i64>) -> RecordBatch {
        let schema = Schema::new(vec![
            Field::new("card", DataType::Utf8, true),
            Field::new("seq", DataType::Int64, false),
        ]);
        RecordBatch::try_new(
            Arc::new(schema),
            vec![
                Arc::new(StringArray::from(cards.to_vec())),
                Arc::new(Int64Array::from_iter_values(seq)),
            ],
        )
        .unwrap()
    }

    fn seqs(batches: &[RecordBatch]) -> Vec<i64> {
        batches
            .iter()
            .flat_map(|b| b.column(1).as_primitive::<Int64Type>().values().to_vec())
            .collect()
    }

    #[test]
    fn rows_of_a_key_meet_one_task_in_input_order() {
        let cards: Vec<String> = (0..200).map(|i| format!("card-{}", i % 17)).collect();
        let cards: Vec<Option<&str>> = cards.iter().map(|c| Some(c.as_str())).collect();
        let input = vec![batch(&cards[..120], 0..120), batch(&cards[120..], 120..200)];
        let routed = route(&input, Routing::Key("card"), 3).unwrap();
        let mut all: Vec<i64> = routed.iter().flat_map(|t| seqs(t)).collect();
        all.sort();
        assert_eq!(all, (0..200).collect::<Vec<_>>(), "every row once");
        for (task, batches) in routed.iter().enumerate() {
            assert!(batches.len() <= 2, "one batch per input batch at most");
            let seq = seqs(batches);
            assert!(seq.windows(2).all(|w| w[0] < w[1]), "input order kept");
            for s in seq {
                let group = key_group(cards[s as usize].unwrap().as_bytes());
                assert_eq!(usize::from(KeyGroups::owner(group, 3)), task);
            }
        }
        let nulls = batch(&[None, None], 0..2);
        assert_eq!(
            seqs(&route(&[nulls], Routing::Key("card"), 4).unwrap()[0]),
            [0, 1]
        );
    }

    #[test]
    fn without_a_key_rows_are_split_evenly_and_contiguously() {
        let cards = [Some("x"); 10];
        let input = vec![batch(&cards[..3], 0..3), batch(&cards[3..], 3..10)];
        let routed = route(&input, Routing::Even, 4).unwrap();
        let shares: Vec<Vec<i64>> = routed.iter().map(|t| seqs(t)).collect();
        assert_eq!(
            shares,
            [vec![0, 1], vec![2, 3, 4], vec![5, 6], vec![7, 8, 9]]
        );
    }

    #[test]
    fn without_a_key_each_partition_goes_to_one_task() {
        // `seq` stands for Kafka's partition column here: 0, 1, …, 6.
        let cards = [Some("x"); 7];
        let input = vec![batch(&cards[..4], 0..4), batch(&cards[4..], 4..7)];
        let routed = route(&input, Routing::Partition("seq"), 3).unwrap();
        let shares: Vec<Vec<i64>> = routed.iter().map(|t| seqs(t)).collect();
        assert_eq!(shares, [vec![0, 3, 6], vec![1, 4], vec![2, 5]]);
        let err = route(&input, Routing::Partition("card"), 2)
            .unwrap_err()
            .to_string();
        assert!(err.contains("`card` is not int64"), "{err}");
    }

    #[test]
    fn a_bad_key_column_is_named() {
        let input = vec![batch(&[Some("a")], 0..1)];
        let err = route(&input, Routing::Key("nope"), 2)
            .unwrap_err()
            .to_string();
        assert!(err.contains("`nope` is not in the input"), "{err}");
        let schema = input[0].schema();
        let err = check_key_column(&schema, "nope").unwrap_err().to_string();
        assert!(err.contains("the input has: card, seq"), "{err}");
        assert!(check_key_column(&schema, "seq").is_ok());
    }
}
