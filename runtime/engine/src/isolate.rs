//! Finding the records an operator fails on (a "poison record"), so one bad
//! payment cannot stop all fraud scoring.
//!
//! An operator that fails deterministically on an epoch — a trap, the
//! deadline, `failed`, invalid output, the memory cap — is run again over
//! halves of the epoch's rows, recursing into the halves that still fail,
//! until single rows remain: those rows are *isolated*. This costs about
//! `2 log2(rows)` runs per isolated row. The rest of the epoch then runs
//! as usual, and the isolated rows are recorded in `offsets/N`
//! ([`weir_core::wal::IsolatedRow`]) so a replay leaves out exactly the same
//! rows without searching again.
//!
//! A failure that no half shows on its own (it needs rows from both) is
//! not isolable: the failure is then the batch's as a whole, not a
//! record's, and the epoch cannot proceed.

use anyhow::{Context, Result};
use arrow_array::{RecordBatch, UInt32Array};

/// What the search found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Isolation {
    /// These rows each fail alone, with the failure's text, ascending.
    Found(Vec<(u64, String)>),
    /// The failure needs rows from both halves of a failing set.
    NotIsolable,
    /// More than the allowed number of rows fail.
    TooMany,
}

/// Searches `candidates` (ascending row numbers on which `probe` fails)
/// for rows that fail alone. `probe` runs the operator over a subset and
/// returns its failure, if any; at most `max` rows are looked for.
pub fn isolate(
    candidates: &[u64],
    max: usize,
    probe: &mut dyn FnMut(&[u64]) -> Result<Option<String>>,
    first_failure: String,
) -> Result<Isolation> {
    let mut found = Vec::new();
    match search(candidates, first_failure, max, probe, &mut found)? {
        Search::Done if found.is_empty() => Ok(Isolation::NotIsolable),
        Search::Done => Ok(Isolation::Found(found)),
        Search::Stuck => Ok(Isolation::NotIsolable),
        Search::Full => Ok(Isolation::TooMany),
    }
}

enum Search {
    Done,
    /// A failing set whose halves both pass.
    Stuck,
    /// `max` rows found and more fail.
    Full,
}

fn search(
    rows: &[u64],
    failure: String,
    max: usize,
    probe: &mut dyn FnMut(&[u64]) -> Result<Option<String>>,
    found: &mut Vec<(u64, String)>,
) -> Result<Search> {
    if let [row] = rows {
        if found.len() >= max {
            return Ok(Search::Full);
        }
        found.push((*row, failure));
        return Ok(Search::Done);
    }
    let (left, right) = rows.split_at(rows.len() / 2);
    let left_failure = probe(left)?;
    let right_failure = probe(right)?;
    if left_failure.is_none() && right_failure.is_none() {
        return Ok(Search::Stuck);
    }
    for (half, failure) in [(left, left_failure), (right, right_failure)] {
        if let Some(failure) = failure {
            match search(half, failure, max, probe, found)? {
                Search::Done => {}
                other => return Ok(other),
            }
        }
    }
    Ok(Search::Done)
}

/// The rows of `batches` (numbered across all batches, in order) whose
/// numbers are in `rows` (ascending), keeping the batch boundaries.
pub fn select_rows(batches: &[RecordBatch], rows: &[u64]) -> Result<Vec<RecordBatch>> {
    let mut out = Vec::new();
    let mut first = 0u64;
    let mut rest = rows;
    for batch in batches {
        let end = first + batch.num_rows() as u64;
        let here = rest.partition_point(|&r| r < end);
        let (mine, later) = rest.split_at(here);
        rest = later;
        if !mine.is_empty() {
            let indices: UInt32Array = mine.iter().map(|&r| (r - first) as u32).collect();
            out.push(
                arrow_select::take::take_record_batch(batch, &indices)
                    .context("selecting rows of the epoch's input")?,
            );
        }
        first = end;
    }
    Ok(out)
}

/// Row numbers `0..total` without `excluded` (ascending).
pub fn all_rows_except(total: u64, excluded: &[u64]) -> Vec<u64> {
    let excluded: std::collections::BTreeSet<u64> = excluded.iter().copied().collect();
    (0..total).filter(|r| !excluded.contains(r)).collect()
}

/// One row of `batches` as a JSON object, for the dead-letter record.
pub fn row_as_json(batches: &[RecordBatch], row: u64) -> Result<String> {
    let one = select_rows(batches, &[row])?;
    // As every JSON Weir writes: decimals as their exact digits.
    let text = weir_core::sink::to_json_lines(&one).context("writing a row as JSON")?;
    Ok(String::from_utf8_lossy(&text).trim_end().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::Int64Array;
    use std::sync::Arc;

    /// A probe that fails when any of `bad` is in the subset, or (with
    /// `pair`) only when both of the pair are.
    fn probe_for<'a>(
        bad: &'static [u64],
        pair: Option<(u64, u64)>,
        runs: &'a mut u32,
    ) -> impl FnMut(&[u64]) -> Result<Option<String>> + 'a {
        move |rows: &[u64]| {
            *runs += 1;
            if let Some(b) = rows.iter().find(|r| bad.contains(r)) {
                return Ok(Some(format!("trap on {b}")));
            }
            if let Some((a, b)) = pair {
                if rows.contains(&a) && rows.contains(&b) {
                    return Ok(Some("pair".into()));
                }
            }
            Ok(None)
        }
    }

    #[test]
    fn finds_one_poison_row_in_about_two_log_n_runs() {
        let rows: Vec<u64> = (0..10_000).collect();
        let mut runs = 0;
        let found = isolate(
            &rows,
            10,
            &mut probe_for(&[4_321], None, &mut runs),
            "x".into(),
        )
        .unwrap();
        assert_eq!(
            found,
            Isolation::Found(vec![(4_321, "trap on 4321".into())])
        );
        assert!(runs <= 2 * 14, "{runs} runs");
    }

    #[test]
    fn finds_several_and_stops_at_the_limit() {
        let rows: Vec<u64> = (0..100).collect();
        let mut runs = 0;
        let found = isolate(
            &rows,
            10,
            &mut probe_for(&[3, 50, 99], None, &mut runs),
            "x".into(),
        )
        .unwrap();
        let Isolation::Found(found) = found else {
            panic!("{found:?}")
        };
        assert_eq!(
            found.iter().map(|f| f.0).collect::<Vec<_>>(),
            vec![3, 50, 99]
        );
        let many: &'static [u64] = &[1, 2, 3, 4, 5];
        let found = isolate(&rows, 3, &mut probe_for(many, None, &mut runs), "x".into());
        assert_eq!(found.unwrap(), Isolation::TooMany);
    }

    #[test]
    fn a_failure_that_needs_two_rows_is_not_isolable() {
        let rows: Vec<u64> = (0..64).collect();
        let mut runs = 0;
        let found = isolate(
            &rows,
            10,
            &mut probe_for(&[], Some((5, 40)), &mut runs),
            "pair".into(),
        )
        .unwrap();
        assert_eq!(found, Isolation::NotIsolable);
    }

    #[test]
    fn select_rows_across_batches_and_row_json() {
        let schema = Arc::new(arrow_schema::Schema::new(vec![arrow_schema::Field::new(
            "n",
            arrow_schema::DataType::Int64,
            false,
        )]));
        let batch = |r: std::ops::Range<i64>| {
            RecordBatch::try_new(
                schema.clone(),
                vec![Arc::new(Int64Array::from_iter_values(r))],
            )
            .unwrap()
        };
        let batches = vec![batch(0..3), batch(3..5), batch(5..9)];
        let picked = select_rows(&batches, &all_rows_except(9, &[0, 4, 8])).unwrap();
        let values: Vec<i64> = picked
            .iter()
            .flat_map(|b| {
                let col = b.column(0).as_any().downcast_ref::<Int64Array>().unwrap();
                col.values().to_vec()
            })
            .collect();
        assert_eq!(values, vec![1, 2, 3, 5, 6, 7]);
        assert_eq!(picked.len(), 3, "batch boundaries kept");
        assert_eq!(row_as_json(&batches, 6).unwrap(), r#"{"n":6}"#);
    }
}
