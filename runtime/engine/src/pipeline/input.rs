//! The input-preparation part: what the host does to an epoch's rows
//! before the operator sees them, and what it gives the operator besides
//! — event time and the watermark (`[event_time]`), the host's dedup
//! (`[dedup]`), and the reference tables at the versions the epoch
//! recorded (`[[lookup]]`). All of it is a function of `offsets/N` and
//! the state, so a replay prepares the same input.

use crate::dedup::{Dedup, Dropped};
use crate::event_time::{EventTime, Observed};
use crate::lookups::LookupSet;
use anyhow::{Context, Result};
use arrow_array::RecordBatch;
use std::collections::BTreeMap;
use std::sync::Arc;
use weir_core::checkpoint::Checkpoint;
use weir_core::latency::Histogram;
use weir_core::lookup::EpochTables;
use weir_core::wal::OffsetEntry;
use weir_core::Digest;
use weir_state::EpochState;

/// Event time, dedup and reference tables of one pipeline.
pub(crate) struct InputPrep {
    /// The event-time column and running maximum, with `[event_time]`.
    event_time: Option<EventTime>,
    /// The host's dedup, with `[dedup]`.
    dedup: Option<Dedup>,
    /// The reference tables and their versions ([`crate::lookups`]).
    lookups: LookupSet,
    /// Lookup refreshes that failed since the last progress record.
    lookup_failures: u64,
}

impl InputPrep {
    /// Preparation with the given parts (each optional but the tables).
    pub fn new(event_time: Option<EventTime>, dedup: Option<Dedup>, lookups: LookupSet) -> Self {
        InputPrep {
            event_time,
            dedup,
            lookups,
            lookup_failures: 0,
        }
    }

    /// Whether the pipeline has `[event_time]`.
    pub fn has_event_time(&self) -> bool {
        self.event_time.is_some()
    }

    /// The watermark the next epoch is planned with.
    pub fn watermark(&self) -> Option<i64> {
        self.event_time.as_ref().and_then(EventTime::watermark)
    }

    /// Continues event time from the maximum a commit recorded.
    pub fn restore_event_time(&mut self, max_event_time_ms: Option<i64>) {
        if let Some(et) = &mut self.event_time {
            et.restore(max_event_time_ms);
        }
    }

    /// The running maximum event time including `observed`.
    pub fn max_through(&self, observed: &Observed) -> Option<i64> {
        self.event_time
            .as_ref()
            .and_then(|et| et.max_through(observed))
    }

    /// Event time and dedup over `batches`, as `entry` plans them; dedup
    /// runs against `state`, the epoch's view (it records what it keeps
    /// there), and is skipped without one (a real-time epoch of several
    /// tasks, whose instances hold the views).
    pub fn apply(
        &self,
        entry: &OffsetEntry,
        batches: Vec<RecordBatch>,
        state: Option<&mut EpochState>,
    ) -> Result<(Vec<RecordBatch>, Observed, Dropped)> {
        let observed = match &self.event_time {
            Some(et) => et.observe(&batches, entry.watermark_ms)?,
            None => Observed::default(),
        };
        let (batches, dropped) = match (&self.dedup, state) {
            (Some(d), Some(state)) => d.apply(batches, entry.watermark_ms, state)?,
            _ => (batches, Dropped::default()),
        };
        Ok((batches, observed, dropped))
    }

    /// [`Self::apply`] over a real-time part's rows, its counts added to
    /// the epoch's `observed` and `dropped`.
    pub fn apply_part(
        &self,
        entry: &OffsetEntry,
        batches: Vec<RecordBatch>,
        state: Option<&mut EpochState>,
        observed: &mut Observed,
        dropped: &mut Dropped,
    ) -> Result<Vec<RecordBatch>> {
        let (kept, seen, gone) = self.apply(entry, batches, state)?;
        observed.late += seen.late;
        observed.max = observed.max.max(seen.max);
        dropped.duplicates += gone.duplicates;
        dropped.late += gone.late;
        Ok(kept)
    }

    /// The reference tables at the versions `entry` recorded.
    pub fn tables_for(
        &mut self,
        entry: &OffsetEntry,
        checkpoint: &Checkpoint,
    ) -> Result<Arc<EpochTables>> {
        self.lookups
            .for_epoch(&entry.lookups, checkpoint)
            .with_context(|| format!("epoch {}'s lookup tables", entry.epoch))
    }

    /// The newest version of every table, for the next `offsets/N`.
    pub fn table_versions(&self) -> BTreeMap<String, Digest> {
        self.lookups.versions()
    }

    /// Loads the lookup tables due for a refresh; returns, for the audit
    /// trail, a note on each table that began failing to load.
    pub fn refresh_tables(&mut self, checkpoint: &Checkpoint) -> Vec<String> {
        let failed_before = self.lookups.failed_refreshes;
        let notes = self
            .lookups
            .refresh(checkpoint)
            .into_iter()
            .map(|failure| {
                // The whole cause is in the log; the trail keeps its start.
                let cause: String = failure.error.chars().take(300).collect();
                format!(
                    "lookup `{}` keeps version {}: {cause}",
                    failure.lookup, failure.kept
                )
            })
            .collect();
        self.lookup_failures += self.lookups.failed_refreshes - failed_before;
        notes
    }

    /// The lookup refreshes that failed since the last call (for the
    /// progress record).
    pub fn take_refresh_failures(&mut self) -> u64 {
        std::mem::take(&mut self.lookup_failures)
    }

    /// Adds the event→emit latency of `outputs`, just acknowledged by the
    /// sink, to `into`: now minus each row's event time, for output rows
    /// that carry the `[event_time]` column (int64 Unix ms or a timestamp).
    pub fn measure_latency(&self, outputs: &[RecordBatch], into: &mut Histogram) {
        let Some(et) = &self.event_time else {
            return;
        };
        let now_us = weir_core::clock::now_us();
        // Latency is the default output's (the alerts), not that of rows
        // emitted to named outputs.
        let defaults = outputs
            .iter()
            .filter(|b| weir_core::outputs::output_of(b) == weir_core::outputs::DEFAULT);
        for batch in defaults {
            let Some(times) = batch
                .column_by_name(et.column())
                .and_then(|c| crate::event_time::millis(c.as_ref()))
            else {
                continue;
            };
            for ts in times.iter().flatten() {
                into.record(now_us.saturating_sub(ts.saturating_mul(1_000)).max(0) as u64);
            }
        }
    }
}
