//! Named outputs: an operator may send rows to several outputs (`alerts`
//! for the case tool, `scores` for the lake), each routed to its own sinks
//! (`[[sink]] output = "scores"`). The rows a call returns are the
//! **default** output; rows it emits by name (`weir:operator/outputs.emit`)
//! carry the name in their schema's metadata ([`OUTPUT_KEY`]) from the host
//! to the sinks, so that every stage between — tasks, real-time parts,
//! isolation, progress — keeps handling plain batches, and replay gives
//! every output the same rows. The sink layer routes batches by it and
//! strips it before a sink sees them.

use anyhow::{bail, Result};
use arrow_array::{RecordBatch, RecordBatchOptions};
use arrow_schema::Schema;
use std::sync::Arc;

/// The output a sink takes when it names none, and the one a call's
/// returned rows go to.
pub const DEFAULT: &str = "default";

/// The schema metadata key that names a batch's output.
pub const OUTPUT_KEY: &str = "weir.output";

/// Checks an output name: 1 to 64 lowercase ASCII letters, digits, `_`
/// or `-`, starting with a letter (it appears in sink settings, metrics
/// and file names).
pub fn check_name(name: &str) -> Result<()> {
    let ok = (1..=64).contains(&name.len())
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-');
    if !ok {
        bail!(
            "`{name}` is not an output name: 1 to 64 lowercase letters, digits, `_` or `-`, \
             starting with a letter"
        );
    }
    Ok(())
}

/// `batch` marked as rows of output `name` (the default output is left
/// unmarked).
pub fn tag(batch: RecordBatch, name: &str) -> Result<RecordBatch> {
    if name == DEFAULT {
        return Ok(batch);
    }
    let mut metadata = batch.schema_ref().metadata().clone();
    metadata.insert(OUTPUT_KEY.to_string(), name.to_string());
    with_metadata(&batch, metadata)
}

/// `batch` with its schema's metadata replaced; the same columns.
fn with_metadata(batch: &RecordBatch, metadata: arrow_schema::Metadata) -> Result<RecordBatch> {
    let schema = Arc::new(Schema::new_with_metadata(
        batch.schema_ref().fields().clone(),
        metadata,
    ));
    let options = RecordBatchOptions::new().with_row_count(Some(batch.num_rows()));
    Ok(RecordBatch::try_new_with_options(
        schema,
        batch.columns().to_vec(),
        &options,
    )?)
}

/// The output `batch` belongs to.
pub fn output_of(batch: &RecordBatch) -> &str {
    batch
        .schema_ref()
        .metadata()
        .get(OUTPUT_KEY)
        .map_or(DEFAULT, String::as_str)
}

/// The batches of `batches` that belong to `output`, unmarked, as a sink
/// should see them.
pub fn rows_of(batches: &[RecordBatch], output: &str) -> Result<Vec<RecordBatch>> {
    batches
        .iter()
        .filter(|b| output_of(b) == output)
        .map(untag)
        .collect()
}

/// `batch` without its output mark.
pub fn untag(batch: &RecordBatch) -> Result<RecordBatch> {
    let metadata = batch.schema_ref().metadata();
    if !metadata.contains_key(OUTPUT_KEY) {
        return Ok(batch.clone());
    }
    let mut metadata = metadata.clone();
    metadata.remove(OUTPUT_KEY);
    with_metadata(batch, metadata)
}

/// Rows of the default output in `batches`: a progress record's
/// `rows_out`, as before named outputs.
pub fn default_rows(batches: &[RecordBatch]) -> u64 {
    batches
        .iter()
        .filter(|b| output_of(b) == DEFAULT)
        .map(|b| b.num_rows() as u64)
        .sum()
}

/// Rows of each named output in `batches` (the default one left out).
pub fn named_rows(batches: &[RecordBatch]) -> std::collections::BTreeMap<String, u64> {
    let mut rows = std::collections::BTreeMap::new();
    for b in batches {
        let name = output_of(b);
        if name != DEFAULT {
            *rows.entry(name.to_string()).or_insert(0) += b.num_rows() as u64;
        }
    }
    rows
}

/// The names of the outputs `batches` hold rows of, sorted, each once.
pub fn names(batches: &[RecordBatch]) -> Vec<String> {
    let mut names: Vec<String> = batches.iter().map(|b| output_of(b).to_string()).collect();
    names.sort();
    names.dedup();
    names
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::Int64Array;
    use arrow_schema::{DataType, Field};

    fn batch(n: i64) -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![Field::new("n", DataType::Int64, false)]));
        RecordBatch::try_new(schema, vec![Arc::new(Int64Array::from(vec![n]))]).unwrap()
    }

    #[test]
    fn batches_are_routed_by_their_mark_and_reach_sinks_unmarked() {
        let all = vec![
            batch(1),
            tag(batch(2), "scores").unwrap(),
            tag(batch(3), DEFAULT).unwrap(),
        ];
        assert_eq!(names(&all), ["default", "scores"]);
        let scores = rows_of(&all, "scores").unwrap();
        assert_eq!(scores.len(), 1);
        assert!(scores[0].schema().metadata().is_empty());
        assert_eq!(scores[0], batch(2));
        assert_eq!(rows_of(&all, DEFAULT).unwrap(), vec![batch(1), batch(3)]);
        assert!(rows_of(&all, "alerts").unwrap().is_empty());
    }

    #[test]
    fn output_names_are_checked() {
        for good in ["scores", "alerts_v2", "a-b", "x1"] {
            check_name(good).unwrap();
        }
        for bad in ["", "Scores", "1x", "a b", "ä", &"a".repeat(65)] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
    }
}
