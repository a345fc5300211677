//! The shadow hook: after the active version ran an epoch, a candidate
//! version (`weir deploy --shadow`) runs over the same input against the
//! committed state, its writes dropped, and its output is compared with the
//! active version's ([`crate::versions::shadow`]). It never affects the
//! epoch: a candidate that fails is reported, not retried.

use super::run::VersionRun;
use super::Pipeline;
use crate::versions::runner::EpochAt;
use crate::versions::shadow;
use arrow_array::RecordBatch;
use std::time::Instant;
use weir_core::progress::ShadowReport;
use weir_core::wal::OffsetEntry;
use weir_host::WasmHost;
use weir_state::EpochState;

impl Pipeline {
    /// Runs the shadow candidate over the epoch's input (against the
    /// committed state; its writes are dropped) and compares its output
    /// with the active version's: `batches` is what the active version
    /// got (after event time and dedup), `outputs` what it emitted.
    pub(super) fn shadow_hook(
        &mut self,
        host: &WasmHost,
        entry: &OffsetEntry,
        batches: &[RecordBatch],
        outputs: &[RecordBatch],
    ) -> Option<ShadowReport> {
        let (candidate, key) = self.versions.shadow().cloned()?;
        let active_version = self.versions.version_of(&entry.operator);
        let started = Instant::now();
        let state = EpochState::new(self.state.reader(), entry.epoch, entry.epoch_time_ms);
        let env = match self.env_for(state, entry) {
            Ok(env) => env,
            Err(e) => {
                tracing::warn!(epoch = entry.epoch, "shadow run skipped: {e:#}");
                return None;
            }
        };
        let run = VersionRun {
            operator: candidate.operator_ref(),
            // The candidate's own `migrate` is not run: its writes are dropped.
            at: EpochAt {
                migrate_from: None,
                ..EpochAt::of(entry)
            },
            tasks: self.tasks.of_entry(entry),
        };
        let result = self.run_version(host, &run, batches, env);
        let mut report = match result.map(|ran| ran.result) {
            Ok(Ok(theirs)) => shadow::compare(key.as_deref(), outputs, &theirs.batches),
            Ok(Err(failure)) => ShadowReport {
                error: Some(failure.to_string()),
                ..ShadowReport::default()
            },
            Err(e) => ShadowReport {
                error: Some(format!("{e:#}")),
                ..ShadowReport::default()
            },
        };
        report.epoch = entry.epoch;
        report.active_version = active_version.unwrap_or(0);
        report.candidate_version = candidate.number;
        report.candidate_ms = started.elapsed().as_secs_f64() * 1e3;
        if let Some(e) = &report.error {
            tracing::warn!(
                pipeline = %self.name,
                epoch = entry.epoch,
                candidate = candidate.number,
                "shadow version failed on this epoch (the pipeline is not affected): {e}"
            );
        }
        Some(report)
    }
}
