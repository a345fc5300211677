//! What the epoch loop does when the operator fails on an epoch, so that
//! one bad version or one bad record never stops the pipeline.
//!
//! In this order, each time the epoch's operator run fails:
//!
//! 1. **Another version was activated** since the epoch was planned (a
//!    `weir rollback` while it was stuck): the epoch is re-planned with it.
//! 2. **A bad version**: the failing version is still on probation (fewer
//!    than `operator.probation_epochs` committed epochs since its swap) and
//!    the version before it handles the same input. The new version is
//!    rolled back in the registry (`auto-rollback` in its history) and the
//!    epoch is re-planned with the old one.
//! 3. **A bad record** (not a state key outside the task's key groups,
//!    which no record causes alone): under `operator.on_error = "dead-letter"` the rows
//!    the version fails on alone are found by bisection
//!    ([`crate::isolate`]) and recorded in `offsets/N`; the epoch runs
//!    without them and they go to the dead-letter output.
//!
//! None of this applies when the host failed under the operator (the
//! state store could not be read, [`OperatorFailure::Host`]): that fails
//! the epoch as a [`StorageFault`] at once.
//!
//! Re-planning amends `offsets/N` ([`weir_core::wal::Log::amend`]): safe
//! because the operator runs before the sink, so nothing of the epoch has
//! been delivered; a replay after a crash runs the amended entry. Failures
//! that fit none of these (a failure that needs the whole batch, more
//! failing rows than `operator.max_isolated`, `on_error = "fail"`) fail the
//! epoch; [`super::Pipeline::run`] retries it with backoff on continuous
//! pipelines, keeping the admin API up for a fix or a rollback.

use super::run::VersionRun;
use super::tasks::TaskRun;
use super::{EpochFailed, Pipeline, Prepared, StorageFault};
use crate::config::OnError;
use crate::isolate::{self, Isolation};
use crate::versions::registry::Version;
use anyhow::Result;
use arrow_array::RecordBatch;
use weir_core::source::DeadLetter;
use weir_core::wal::{IsolatedRow, OffsetEntry, OperatorRef};
use weir_host::{EpochEnv, OperatorFailure, WasmHost};

/// An epoch's operator run that succeeded, possibly after re-planning.
pub(super) struct Ran {
    /// The epoch's entry as it finally ran (amended if re-planned).
    pub entry: OffsetEntry,
    pub prepared: PreparedInput,
    pub outputs: Vec<RecordBatch>,
    pub env: EpochEnv,
    pub migrated: bool,
    /// Dead letters for the rows the operator failed on.
    pub isolated: Vec<DeadLetter>,
    /// What each task ran, when several did.
    pub tasks: TaskRun,
}

/// [`Prepared`] without the operator's environment, which the run took:
/// the batches as the operator got them (for the shadow) and what event
/// time and dedup counted.
pub(super) struct PreparedInput {
    pub batches: Vec<RecordBatch>,
    pub observed: crate::event_time::Observed,
    pub dropped: crate::dedup::Dropped,
}

impl Pipeline {
    /// Runs the operator over the epoch's `input` as the failure rules of
    /// this module's docs say.
    pub(super) fn run_resilient(
        &mut self,
        host: &WasmHost,
        mut entry: OffsetEntry,
        input: Vec<RecordBatch>,
    ) -> Result<Ran> {
        loop {
            let prepared = self.prepare(&entry, without_isolated(&entry, input.clone())?)?;
            let Prepared {
                batches,
                env,
                observed,
                dropped,
            } = prepared;
            let run = VersionRun::of(&entry, &self.tasks);
            let ran = self.run_version(host, &run, &batches, env)?;
            let failure = match ran.result {
                Ok(output) => {
                    let isolated = self.isolated_letters(&entry, &input)?;
                    return Ok(Ran {
                        prepared: PreparedInput {
                            batches,
                            observed,
                            dropped,
                        },
                        entry,
                        outputs: output.batches,
                        env: output.env,
                        migrated: output.migrated,
                        isolated,
                        tasks: ran.tasks,
                    });
                }
                Err(failure) => failure,
            };
            // The state store failed under the operator: a storage fault,
            // which no other version and no record is to blame for.
            if failure.is_host_fault() {
                return Err(self.epoch_failed(&entry, failure));
            }
            if let Some(target) = self.fallback_version(host, &entry, &input, &failure)? {
                entry = self.replan(entry, &target)?;
                continue;
            }
            // A state key outside the task's groups is a fault of how rows
            // are routed, not of any one record: nothing to isolate.
            let routing = matches!(failure, OperatorFailure::KeyNotOwned(_));
            if self.failure.on_error == OnError::Fail || routing {
                return Err(self.epoch_failed(&entry, failure));
            }
            let found = self.isolate_rows(host, &entry, &input, &failure)?;
            match found {
                Isolation::Found(rows) => {
                    tracing::warn!(
                        pipeline = %self.name,
                        epoch = entry.epoch,
                        rows = ?rows.iter().map(|r| r.0).collect::<Vec<_>>(),
                        operator = %entry.operator.digest,
                        "operator failed on {} record(s) of the epoch; they go to the dead-letter \
                         output and the rest of the epoch is processed: {failure}",
                        rows.len()
                    );
                    self.reporter.records_isolated(rows.len() as u64);
                    entry.isolated.extend(
                        rows.into_iter()
                            .map(|(row, error)| IsolatedRow { row, error }),
                    );
                    entry.isolated.sort_by_key(|r| r.row);
                    self.log.amend(&entry, "recording isolated rows")?;
                }
                Isolation::NotIsolable => {
                    let note = "No single record fails alone: the failure needs several rows of \
                                the epoch together, so none is set aside";
                    return Err(self.epoch_failed_with(&entry, failure, Some(note.into())));
                }
                Isolation::TooMany => {
                    let note = format!(
                        "More than `operator.max_isolated` = {} records fail (every record \
                         tried does): taken for a fault of the version, not of the records",
                        self.failure.max_isolated
                    );
                    return Err(self.epoch_failed_with(&entry, failure, Some(note)));
                }
            }
        }
    }

    /// The error of epoch `entry` when its operator failed with `cause`.
    pub(super) fn epoch_failed(
        &self,
        entry: &OffsetEntry,
        cause: OperatorFailure,
    ) -> anyhow::Error {
        self.epoch_failed_with(entry, cause, None)
    }

    /// [`Pipeline::epoch_failed`] with a note on why no rule applied.
    fn epoch_failed_with(
        &self,
        entry: &OffsetEntry,
        cause: OperatorFailure,
        note: Option<String>,
    ) -> anyhow::Error {
        if let OperatorFailure::Host(fault) = cause {
            return StorageFault {
                pipeline: self.name.clone(),
                epoch: entry.epoch,
                fault,
            }
            .into();
        }
        EpochFailed {
            pipeline: self.name.clone(),
            epoch: entry.epoch,
            digest: entry.operator.digest,
            cause,
            note,
        }
        .into()
    }

    /// The version to re-plan a failing epoch with, if any (rules 1 and 2
    /// of the module docs).
    fn fallback_version(
        &mut self,
        host: &WasmHost,
        entry: &OffsetEntry,
        input: &[RecordBatch],
        failure: &OperatorFailure,
    ) -> Result<Option<Version>> {
        let Some(active) = self.versions.planned_active() else {
            return Ok(None);
        };
        if active.operator_ref() != entry.operator {
            tracing::warn!(
                pipeline = %self.name,
                epoch = entry.epoch,
                version = active.number,
                "epoch failed on the version it was planned with; re-planning it with the \
                 active version {}",
                active.number
            );
            return Ok(Some(active));
        }
        if self.committed_on(&entry.operator, entry.epoch)? >= self.failure.probation_epochs {
            return Ok(None);
        }
        let Some(previous) = self.versions.previous_version() else {
            return Ok(None);
        };
        let probe = OffsetEntry {
            operator: previous.operator_ref(),
            migrate_from: None,
            isolated: Vec::new(),
            ..entry.clone()
        };
        if self.failure_on(host, &probe, input.to_vec())?.is_some() {
            return Ok(None);
        }
        let reason = format!(
            "epoch {} failed on version {} and version {} handles it: {failure}",
            entry.epoch, active.number, previous.number
        );
        tracing::warn!(
            pipeline = %self.name,
            epoch = entry.epoch,
            from = active.number,
            to = previous.number,
            "rolling back a failing new version automatically: {reason}"
        );
        let to = self.versions.auto_roll_back(active.number, &reason)?;
        self.reporter.rolled_back();
        Ok(Some(to))
    }

    /// How many epochs just before `epoch` ran `operator` and committed,
    /// counting back until another version or `probation_epochs`.
    fn committed_on(&self, operator: &OperatorRef, epoch: u64) -> Result<u64> {
        let checkpoint = self.log.checkpoint();
        let mut n = 0;
        let mut e = epoch;
        while n < self.failure.probation_epochs && e > 0 {
            e -= 1;
            let same = checkpoint
                .offsets
                .get(e)?
                .is_some_and(|o| o.operator == *operator);
            if !same || checkpoint.commits.get(e)?.is_none() {
                break;
            }
            n += 1;
        }
        Ok(n)
    }

    /// `entry` re-planned with `target`: nothing of the epoch was
    /// delivered, so `offsets/N` is amended and the epoch runs again.
    pub(super) fn replan(&mut self, entry: OffsetEntry, target: &Version) -> Result<OffsetEntry> {
        let before = match entry.epoch.checked_sub(1) {
            Some(e) => self
                .log
                .checkpoint()
                .offsets
                .get(e)?
                .map(|o| o.operator.digest),
            None => None,
        };
        let replanned = OffsetEntry {
            operator: target.operator_ref(),
            // The state was last written by the epoch before's version.
            migrate_from: before.filter(|d| *d != target.digest),
            isolated: Vec::new(),
            ..entry
        };
        self.log.amend(&replanned, "re-planning")?;
        Ok(replanned)
    }

    /// Bisects the epoch's rows (without those already isolated) for the
    /// ones the entry's version fails on alone.
    fn isolate_rows(
        &mut self,
        host: &WasmHost,
        entry: &OffsetEntry,
        input: &[RecordBatch],
        failure: &OperatorFailure,
    ) -> Result<Isolation> {
        let total: u64 = input.iter().map(|b| b.num_rows() as u64).sum();
        let already: Vec<u64> = entry.isolated.iter().map(|r| r.row).collect();
        let candidates = isolate::all_rows_except(total, &already);
        let room = self.failure.max_isolated.saturating_sub(already.len());
        if room == 0 {
            return Ok(Isolation::TooMany);
        }
        let probe_entry = OffsetEntry {
            isolated: Vec::new(),
            ..entry.clone()
        };
        let mut probe = |rows: &[u64]| -> Result<Option<String>> {
            let subset = isolate::select_rows(input, rows)?;
            Ok(self
                .failure_on(host, &probe_entry, subset)?
                .map(|f| f.to_string()))
        };
        isolate::isolate(&candidates, room, &mut probe, failure.to_string())
    }

    /// The entry's version's failure on `batches` (a fresh view of the
    /// committed state; nothing is kept), if it fails.
    fn failure_on(
        &mut self,
        host: &WasmHost,
        entry: &OffsetEntry,
        batches: Vec<RecordBatch>,
    ) -> Result<Option<OperatorFailure>> {
        let prepared = self.prepare(entry, batches)?;
        let run = VersionRun::of(entry, &self.tasks);
        match self
            .run_version(host, &run, &prepared.batches, prepared.env)?
            .result
        {
            Ok(_) => Ok(None),
            Err(f) if f.is_host_fault() => Err(self.epoch_failed(entry, f)),
            Err(f) => Ok(Some(f)),
        }
    }

    /// Dead-letter records for the entry's isolated rows: where each came
    /// from, the row as JSON, the version and its error.
    fn isolated_letters(
        &mut self,
        entry: &OffsetEntry,
        input: &[RecordBatch],
    ) -> Result<Vec<DeadLetter>> {
        let mut letters = Vec::with_capacity(entry.isolated.len());
        for r in &entry.isolated {
            let origin = self
                .source
                .locate(&entry.source, r.row)
                .unwrap_or_else(|e| {
                    tracing::warn!(
                        "could not locate row {} of epoch {}: {e:#}",
                        r.row,
                        entry.epoch
                    );
                    None
                });
            let (origin, line) = match origin {
                Some(o) => (o.origin, o.line),
                None => (format!("epoch {} row {}", entry.epoch, r.row), None),
            };
            letters.push(DeadLetter {
                origin,
                line,
                reason: format!("the operator failed on this record: {}", r.error),
                raw: isolate::row_as_json(input, r.row)?,
                operator: Some(entry.operator.digest),
                row: Some(r.row),
            });
        }
        Ok(letters)
    }
}

/// The epoch's input without the rows its entry isolated.
pub(super) fn without_isolated(
    entry: &OffsetEntry,
    input: Vec<RecordBatch>,
) -> Result<Vec<RecordBatch>> {
    if entry.isolated.is_empty() {
        return Ok(input);
    }
    let total: u64 = input.iter().map(|b| b.num_rows() as u64).sum();
    let skip: Vec<u64> = entry.isolated.iter().map(|r| r.row).collect();
    isolate::select_rows(&input, &isolate::all_rows_except(total, &skip))
}
