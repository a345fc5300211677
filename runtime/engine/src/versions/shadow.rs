//! Shadow scoring: what a candidate version would have emitted differently
//! from the active one on the same epoch. Rows are matched by a key column
//! (the first output column unless the deploy names one); a key only the
//! candidate emits is *added*, one only the active version emits is
//! *removed*, and a key both emit with any other column different is
//! *changed* (counted per column, e.g. `score`).

use anyhow::{Context, Result};
use arrow_array::RecordBatch;
use serde_json::{Map, Value};
use std::collections::HashMap;
pub use weir_core::progress::ShadowReport;

/// Keys listed per kind of difference in one report; counts are always complete.
pub const KEYS_LISTED: usize = 100;

/// Rows of `batches` as JSON objects, the form sinks write them in.
pub fn rows_as_json(batches: &[RecordBatch]) -> Result<Vec<Map<String, Value>>> {
    let text = weir_core::sink::to_json_lines(batches)?;
    text.split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_slice(l).context("re-reading rows as JSON"))
        .collect()
}

fn key_text(row: &Map<String, Value>, key: &str) -> String {
    match row.get(key) {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Null) | None => "null".into(),
        Some(other) => other.to_string(),
    }
}

/// The key column: `wanted`, else the first column of either output.
pub fn key_column(
    wanted: Option<&str>,
    active: &[RecordBatch],
    candidate: &[RecordBatch],
) -> String {
    if let Some(k) = wanted {
        return k.to_string();
    }
    active
        .iter()
        .chain(candidate)
        .find_map(|b| b.schema().fields().first().map(|f| f.name().clone()))
        .unwrap_or_default()
}

/// Compares the two outputs row by row on `key`. Rows sharing a key are
/// paired in output order; unpaired ones count as added or removed.
pub fn diff(
    key: &str,
    active: &[Map<String, Value>],
    candidate: &[Map<String, Value>],
) -> ShadowReport {
    let mut report = ShadowReport {
        key: key.to_string(),
        active_rows: active.len() as u64,
        candidate_rows: candidate.len() as u64,
        ..ShadowReport::default()
    };
    let mut pending: HashMap<String, Vec<&Map<String, Value>>> = HashMap::new();
    for row in active.iter().rev() {
        pending.entry(key_text(row, key)).or_default().push(row);
    }
    for row in candidate {
        let k = key_text(row, key);
        match pending.get_mut(&k).and_then(Vec::pop) {
            None => {
                report.added += 1;
                listed(&mut report.added_keys, &k);
            }
            Some(before) => {
                let mut differs = false;
                for column in before
                    .keys()
                    .chain(row.keys().filter(|c| !before.contains_key(*c)))
                {
                    let (a, b) = (before.get(column), row.get(column));
                    if !same_value(a, b) {
                        *report.changed_columns.entry(column.clone()).or_default() += 1;
                        differs = true;
                    }
                }
                if differs {
                    report.changed += 1;
                    listed(&mut report.changed_keys, &k);
                }
            }
        }
    }
    // What is left was emitted only by the active version, in its order.
    for row in active {
        let k = key_text(row, key);
        if let Some(rows) = pending.get_mut(&k) {
            if rows.pop().is_some() {
                report.removed += 1;
                listed(&mut report.removed_keys, &k);
            }
        }
    }
    report
}

fn listed(keys: &mut Vec<String>, key: &str) {
    if keys.len() < KEYS_LISTED {
        keys.push(key.to_string());
    }
}

/// Values are equal; numbers within a relative 1e-12 (float formatting).
pub(crate) fn same_value(a: Option<&Value>, b: Option<&Value>) -> bool {
    let null = Value::Null;
    let (a, b) = (a.unwrap_or(&null), b.unwrap_or(&null));
    match (a.as_f64(), b.as_f64()) {
        (Some(x), Some(y)) if a.is_number() && b.is_number() => {
            x == y || (x - y).abs() <= 1e-12 * x.abs().max(y.abs())
        }
        _ => a == b,
    }
}

/// The report of one shadow run: the active version's `ours` against the
/// candidate's `theirs`, rows matched on `key` (default: the first
/// column both have).
pub fn compare(key: Option<&str>, ours: &[RecordBatch], theirs: &[RecordBatch]) -> ShadowReport {
    let key = key_column(key, ours, theirs);
    match (rows_as_json(ours), rows_as_json(theirs)) {
        (Ok(a), Ok(b)) => diff(&key, &a, &b),
        (Err(e), _) | (_, Err(e)) => ShadowReport {
            error: Some(format!("{e:#}")),
            ..ShadowReport::default()
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::collections::BTreeMap;

    fn rows(v: Value) -> Vec<Map<String, Value>> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|r| r.as_object().unwrap().clone())
            .collect()
    }

    #[test]
    fn added_removed_and_changed_by_key() {
        let active = rows(json!([
            {"txn_id": "a", "score": 0.5, "reasons": "x"},
            {"txn_id": "b", "score": 0.9, "reasons": "y"},
            {"txn_id": "c", "score": 0.7, "reasons": "z"},
        ]));
        let candidate = rows(json!([
            {"txn_id": "a", "score": 0.5, "reasons": "x"},
            {"txn_id": "b", "score": 0.8, "reasons": "y"},
            {"txn_id": "d", "score": 0.6, "reasons": "w"},
        ]));
        let r = diff("txn_id", &active, &candidate);
        assert_eq!((r.added, r.removed, r.changed), (1, 1, 1));
        assert_eq!(r.added_keys, ["d"]);
        assert_eq!(r.removed_keys, ["c"]);
        assert_eq!(r.changed_keys, ["b"]);
        assert_eq!(r.changed_columns, BTreeMap::from([("score".into(), 1)]));
        assert!(!r.agrees());
        assert!(diff("txn_id", &active, &active).agrees());
    }

    #[test]
    fn repeated_keys_pair_in_order_and_missing_columns_count_as_null() {
        let active = rows(json!([{"k": 1, "v": 1}, {"k": 1, "v": 2}]));
        let candidate = rows(json!([{"k": 1, "v": 1}, {"k": 1, "v": 2, "extra": true}, {"k": 1}]));
        let r = diff("k", &active, &candidate);
        assert_eq!((r.added, r.removed, r.changed), (1, 0, 1));
        assert_eq!(r.changed_columns, BTreeMap::from([("extra".into(), 1)]));
        assert_eq!(r.added_keys, ["1"]);
    }
}
