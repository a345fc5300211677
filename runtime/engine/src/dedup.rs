//! Host-provided deduplication on a key column within the watermark
//! (Spark's `dropDuplicatesWithinWatermark`), so a payment delivered twice
//! is scored once whatever the operator does. The first row of each key is
//! kept; a later row with the same key is dropped while the key is
//! remembered. A key is remembered, in the host's state namespace
//! `weir.dedup`, until the watermark passes its event time; rows older than
//! the watermark cannot be checked any more and are dropped as late.
//!
//! State layout: `k<key>` → event time (8 bytes), plus an index
//! `t<sortable event time><key>` so that expiry is a range scan.

use crate::event_time;
use anyhow::{bail, Result};
use arrow_array::{Array, BooleanArray, Int64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Schema};
use std::collections::HashSet;
use weir_state::{namespace_prefix, EpochState};

/// The host's namespace for dedup keys.
pub const NAMESPACE: &str = "weir.dedup";

/// Dedup on one key column.
#[derive(Debug, Clone)]
pub struct Dedup {
    key: usize,
    key_name: String,
    time: usize,
    time_name: String,
    prefix: Vec<u8>,
}

/// What dedup did to an epoch's input.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Dropped {
    pub duplicates: u64,
    pub late: u64,
}

/// Event time as bytes that sort like the numbers.
fn sortable(t: i64) -> [u8; 8] {
    ((t as u64) ^ (1 << 63)).to_be_bytes()
}

enum Keys<'a> {
    Utf8(&'a StringArray),
    Int(&'a Int64Array),
}

impl Keys<'_> {
    fn get(&self, row: usize) -> Option<Vec<u8>> {
        match self {
            Keys::Utf8(a) => a.is_valid(row).then(|| a.value(row).as_bytes().to_vec()),
            Keys::Int(a) => a.is_valid(row).then(|| a.value(row).to_be_bytes().to_vec()),
        }
    }
}

impl Dedup {
    /// Dedup on `column` (utf8 or int64) of `schema`, with event time at `time`.
    pub fn new(column: &str, schema: &Schema, time: usize) -> Result<Self> {
        let Ok(key) = schema.index_of(column) else {
            bail!("`dedup.column`: the source has no column `{column}`");
        };
        if !matches!(
            schema.field(key).data_type(),
            DataType::Utf8 | DataType::Int64
        ) {
            bail!(
                "`dedup.column`: `{column}` is {}; dedup keys must be utf8 or int64",
                schema.field(key).data_type()
            );
        }
        Ok(Dedup {
            key,
            key_name: column.to_string(),
            time,
            time_name: schema.field(time).name().clone(),
            prefix: namespace_prefix(NAMESPACE),
        })
    }

    /// Forgets keys the watermark has passed, then drops duplicate and late
    /// rows from `batches`, remembering the keys it keeps.
    pub fn apply(
        &self,
        batches: Vec<RecordBatch>,
        watermark: Option<i64>,
        state: &mut EpochState,
    ) -> Result<(Vec<RecordBatch>, Dropped)> {
        if let Some(w) = watermark {
            self.expire(w, state)?;
        }
        let mut dropped = Dropped::default();
        let mut out = Vec::with_capacity(batches.len());
        for batch in batches {
            let keys = match batch.column(self.key).data_type() {
                DataType::Utf8 => Keys::Utf8(downcast(&batch, self.key, &self.key_name)?),
                _ => Keys::Int(downcast(&batch, self.key, &self.key_name)?),
            };
            let times = event_time::column(&batch, self.time, &self.time_name)?;
            let rows = batch.num_rows();
            let row_keys: Vec<Option<Vec<u8>>> = (0..rows).map(|r| keys.get(r)).collect();
            let lookups: Vec<Vec<u8>> = row_keys
                .iter()
                .flatten()
                .map(|k| [b"k".as_slice(), k].concat())
                .collect();
            let refs: Vec<&[u8]> = lookups.iter().map(Vec::as_slice).collect();
            let mut known = state.get_many(&self.prefix, &refs)?.into_iter();
            let mut in_batch: HashSet<&[u8]> = HashSet::new();
            let mut keep = Vec::with_capacity(rows);
            for (r, key) in row_keys.iter().enumerate() {
                let t = times.is_valid(r).then(|| times.value(r));
                let Some(key) = key else {
                    keep.push(true); // no key: nothing to compare
                    continue;
                };
                let seen_before = known.next().flatten().is_some();
                if t.zip(watermark).is_some_and(|(t, w)| t < w) {
                    dropped.late += 1;
                    keep.push(false);
                } else if seen_before || !in_batch.insert(key) {
                    dropped.duplicates += 1;
                    keep.push(false);
                } else {
                    keep.push(true);
                    if let Some(t) = t {
                        self.remember(state, key, t);
                    }
                }
            }
            if keep.iter().all(|&k| k) {
                out.push(batch);
            } else {
                let mask = BooleanArray::from(keep);
                let kept = arrow_select::filter::filter_record_batch(&batch, &mask)?;
                if kept.num_rows() > 0 {
                    out.push(kept);
                }
            }
        }
        Ok((out, dropped))
    }

    fn remember(&self, state: &mut EpochState, key: &[u8], t: i64) {
        state.put(
            &self.prefix,
            &[b"k".as_slice(), key].concat(),
            &t.to_be_bytes(),
            None,
        );
        let index = [b"t".as_slice(), &sortable(t), key].concat();
        state.put(&self.prefix, &index, &[], None);
    }

    /// Deletes every key whose event time is below `watermark`.
    fn expire(&self, watermark: i64, state: &mut EpochState) -> Result<()> {
        let until = [b"t".as_slice(), &sortable(watermark)].concat();
        for index in state.keys_between(&self.prefix, b"t", &until)? {
            let key = index.get(9..).unwrap_or_default();
            state.delete(&self.prefix, &[b"k".as_slice(), key].concat());
            state.delete(&self.prefix, &index);
        }
        Ok(())
    }
}

fn downcast<'a, T: 'static>(batch: &'a RecordBatch, index: usize, name: &str) -> Result<&'a T> {
    batch
        .column(index)
        .as_any()
        .downcast_ref::<T>()
        .ok_or_else(|| anyhow::anyhow!("dedup column `{name}` changed type"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_schema::Field;
    use std::sync::Arc;
    use weir_state::{SnapshotPolicy, StateStore};

    fn batch(rows: &[(&str, i64)]) -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Utf8, true),
            Field::new("ts", DataType::Int64, true),
        ]));
        RecordBatch::try_new(
            schema,
            vec![
                Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.0))),
                Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.1))),
            ],
        )
        .unwrap()
    }

    fn ids(batches: &[RecordBatch]) -> Vec<String> {
        batches
            .iter()
            .flat_map(|b| {
                let a = b.column(0).as_any().downcast_ref::<StringArray>().unwrap();
                (0..a.len())
                    .map(|i| a.value(i).to_string())
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    #[test]
    fn duplicates_are_dropped_across_batches_and_epochs_until_the_watermark_passes() {
        let dir = tempfile::tempdir().unwrap();
        let (mut store, _) = StateStore::open(dir.path(), SnapshotPolicy::default(), None).unwrap();
        let d = Dedup::new("id", &batch(&[]).schema(), 1).unwrap();

        let mut e0 = EpochState::new(store.reader(), 0, 0);
        let input = vec![
            batch(&[("a", 10), ("b", 20), ("a", 11)]),
            batch(&[("b", 21), ("c", 30)]),
        ];
        let (out, dropped) = d.apply(input, None, &mut e0).unwrap();
        assert_eq!(ids(&out), ["a", "b", "c"]);
        assert_eq!(
            dropped,
            Dropped {
                duplicates: 2,
                late: 0
            }
        );
        store.commit(0, &e0.into_changes()).unwrap();

        // Watermark 15: `a` (10) is forgotten, and a row older than 15 is late.
        let mut e1 = EpochState::new(store.reader(), 0, 0);
        let input = vec![batch(&[("b", 25), ("c", 31), ("a", 16), ("d", 12)])];
        let (out, dropped) = d.apply(input, Some(15), &mut e1).unwrap();
        assert_eq!(ids(&out), ["a"]);
        assert_eq!(
            dropped,
            Dropped {
                duplicates: 2,
                late: 1
            }
        );
    }
}
