//! Recovery at start, after Spark's: the source is told every range
//! planned so far (from the compacted log and the `offsets/N` after it),
//! the state store is brought to the last commit (an uncommitted epoch's
//! changes undone; after a rebuild from a snapshot, the operator re-run
//! over the epochs since), and the one epoch that may be planned but not
//! committed is handed back to the loop to run again exactly as recorded.

use super::resilience::without_isolated;
use super::Pipeline;
use anyhow::{bail, Context, Result};
use weir_host::WasmHost;

impl Pipeline {
    /// Rebuilds the source's view of what was planned and brings the state
    /// to the last commit. Returns the next epoch number and the one
    /// planned-but-uncommitted epoch, if any, which `run` executes first.
    pub(super) fn recover(&mut self, host: &WasmHost) -> Result<(u64, Option<u64>)> {
        let checkpoint = self.log.checkpoint();
        let planned = checkpoint.offsets.epochs()?;
        let folded = checkpoint.compacted()?;
        if let Some(c) = &folded {
            self.source.restore(&c.source).with_context(|| {
                format!("restoring source progress from offsets/{}.compact", c.epoch)
            })?;
        }
        let folded = folded.map(|c| c.epoch);
        for &epoch in planned.iter().filter(|&&e| folded.is_none_or(|f| e > f)) {
            let entry = self.log.entry(epoch)?;
            self.restore_source(&entry)
                .with_context(|| format!("restoring source progress from offsets/{epoch}"))?;
        }
        let planned = if planned.is_empty() {
            folded.into_iter().collect()
        } else {
            planned
        };
        let latest = self.log.checkpoint().commits.latest()?;
        let last_committed = latest.as_ref().map(|(e, _)| *e);
        self.input
            .restore_event_time(latest.and_then(|(_, c)| c.max_event_time_ms));
        self.recover_state(host, last_committed)?;
        let Some(&last_planned) = planned.last() else {
            return Ok((0, None));
        };
        let last = self.log.entry(last_planned)?;
        self.log.note_planned(&last);
        if last_committed.is_some_and(|c| c >= last_planned) {
            // A part deferred by the last epoch runs next (see `realtime`).
            if let Some(part) = self.log.checkpoint().parts.deferred(last_planned)? {
                self.log.carry(part.range);
            }
            return Ok((last_planned + 1, None));
        }
        let expected = last_committed.map_or(0, |c| c + 1);
        if last_planned != expected {
            bail!(
                "checkpoint {} is inconsistent: epochs up to {last_planned} are planned but only \
                 up to {last_committed:?} committed; only the newest epoch may be uncommitted",
                self.log.checkpoint().root().display()
            );
        }
        let entry = self.log.entry(last_planned)?;
        tracing::info!(
            pipeline = %self.name,
            epoch = last_planned,
            operator = %entry.operator.digest,
            "re-running epoch planned by an earlier run but never committed"
        );
        Ok((last_planned, Some(last_planned)))
    }

    /// Tells the source an epoch's range was planned: the recorded range,
    /// or a real-time epoch's logged parts (and the part it deferred).
    fn restore_source(&mut self, entry: &weir_core::wal::OffsetEntry) -> Result<()> {
        if entry.no_data {
            return Ok(());
        }
        if !entry.real_time {
            return self.source.restore(&entry.source);
        }
        let log = self.log.checkpoint().parts.read_log(entry.epoch)?;
        for part in log.parts.into_iter().chain(log.deferred) {
            self.source.restore(&part.range)?;
        }
        Ok(())
    }

    /// Brings the state to the last committed epoch: undoes the state of an
    /// epoch that never committed, and after a rebuild from a snapshot
    /// re-runs the operator (not the sink) over the epochs since.
    fn recover_state(&mut self, host: &WasmHost, last_committed: Option<u64>) -> Result<()> {
        if let (Some(from), Some(last)) = (self.state.recover(last_committed)?, last_committed) {
            for epoch in from..=last {
                let entry = self.log.entry(epoch)?;
                let input = self.read_input(&entry)?;
                let prepared = self.prepare(&entry, without_isolated(&entry, input.batches)?)?;
                let ran = self.run_operator(host, &entry, &prepared.batches, prepared.env)?;
                self.state
                    .commit(epoch, &crate::operator_state::changes(ran.env))?;
            }
            tracing::info!(
                pipeline = %self.name,
                epochs = last + 1 - from.min(last + 1),
                "state rebuilt by replaying the operator over the epochs after the snapshot"
            );
        }
        self.state.recovered();
        Ok(())
    }
}
