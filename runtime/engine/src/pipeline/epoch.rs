//! The epoch protocol, in one place, after Spark Structured Streaming's
//! `MicroBatchExecution`. One epoch N goes through these phases, each a
//! named function below, each timed into the progress record by [`timed`]:
//!
//! 1. **plan** — ask the source for its next range (Spark's `latestOffset`);
//! 2. **write `offsets/N`** — the range, the operator version, the epoch's
//!    time and watermark, durable before anything reads;
//! 3. **read** — exactly the recorded range;
//! 4. **prepare** — event time, the host's dedup, the epoch's state view;
//! 5. **run the operator** — the recorded version, under the failure rules
//!    of [`super::resilience`] (re-plan, auto-rollback, isolate records);
//!    then the **shadow** hook, if a candidate version runs in shadow;
//! 6. **write the sink** — output and dead letters, idempotent per epoch;
//! 7. **commit the state** — the operator's and the dedup's changes;
//! 8. **write `commits/N`**;
//! 9. **tell the source** — mirroring only (e.g. a consumer group), then
//!    compaction of the logs.
//!
//! **Crash safety** rests on this order and on nothing else: `offsets/N` is
//! durable before epoch N reads (2 before 3); the sink has epoch N before
//! the state commits it (6 before 7); the state before `commits/N` (7 before
//! 8). A crash anywhere re-runs N from `offsets/N` with the same range,
//! version, time and isolated rows: sinks make a repeated epoch write
//! harmless, and the state store undoes an uncommitted epoch
//! ([`super::recovery`]). The SIGKILL tests (`tests/all/crash.rs`) check it.
//!
//! **A failure in a running process** is retried from the last phase that
//! became durable, never from the top once the sink has the epoch: phases
//! 7–9 run from a [`Closing`] value that the retry takes up
//! ([`super::retry`], the table of where each retry starts).

use super::resilience::{PreparedInput, Ran};
use super::retry::{Closing, Reached};
use super::{Pipeline, Prepared};
use crate::config::TriggerConfig;
use crate::dedup::Dropped;
use crate::event_time::{EventTime, Observed};
use crate::operator_state::{self, epoch_state};
use anyhow::{Context, Result};
use arrow_array::RecordBatch;
use std::time::{Duration, Instant};
use weir_core::clock::now_ms;
use weir_core::faults::{self, FaultPoint};
use weir_core::fsutil;
use weir_core::latency::Histogram;
use weir_core::progress::{rate, EpochProgress, Phases, ShadowReport};
use weir_core::source::{Backlog, DeadLetter, EpochInput, PlanLimit};
use weir_core::wal::{CommitEntry, OffsetEntry, ENTRY_FORMAT};
use weir_host::WasmHost;
use weir_state::{Changes, TimerSpace};

/// Runs `f` and adds the time it took to `phase`, a field of the progress
/// record's [`Phases`]: the one way the epoch loop is timed.
pub(super) fn timed<T>(phase: &mut Duration, f: impl FnOnce() -> T) -> T {
    let started = Instant::now();
    let out = f();
    *phase += started.elapsed();
    out
}

/// What kind of epoch an `offsets/N` entry plans.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum EntryKind {
    /// A source range, read at once.
    MicroBatch,
    /// Parts logged as they run ([`super::realtime`]).
    RealTime,
    /// No input, to fire timers the watermark reached.
    NoData,
}

/// What an epoch did, for its progress record (micro-batch or real-time).
pub(super) struct Done {
    pub epoch: u64,
    pub replay: bool,
    pub started: Instant,
    pub started_ms: i64,
    pub since_previous: Option<Duration>,
    pub rows_in: u64,
    pub rows_out: u64,
    /// Rows of each named output.
    pub named_rows: std::collections::BTreeMap<String, u64>,
    pub micro_batches: usize,
    pub dead_letters: u64,
    pub observed: Observed,
    pub dropped: Dropped,
    pub backlog: Option<Backlog>,
    pub phases: Phases,
    pub latency: Histogram,
    /// A real-time epoch's part count (its range is its parts).
    pub parts: Option<u32>,
    /// Each task's share, when more than one ran the operator.
    pub tasks: Vec<weir_core::progress::TaskProgress>,
}

impl Pipeline {
    /// Phases 1–2: plans epoch `epoch` and makes `offsets/<epoch>` durable;
    /// `None` if the source has no new data.
    pub(super) fn plan(&mut self, epoch: u64) -> Result<Option<(Phases, Option<Backlog>)>> {
        let mut phases = Phases::default();
        let limit = match self.trigger {
            TriggerConfig::Once => PlanLimit::Unbounded,
            _ => PlanLimit::PerTrigger,
        };
        let planned = timed(&mut phases.plan, || self.source.plan(limit))?;
        let backlog = self.source.backlog();
        self.telemetry.source_polled(backlog);
        let Some(range) = planned else {
            return Ok(None);
        };
        timed(&mut phases.wal, || {
            self.write_offsets(epoch, range, EntryKind::MicroBatch)
        })?;
        Ok(Some((phases, backlog)))
    }

    /// Phases 3–6 of epoch `epoch`, whose `offsets/<epoch>` is durable
    /// (planned just now, or by a run that did not commit it: `replay`).
    /// Returns the epoch as the sink has it, for [`Pipeline::close`] to
    /// commit (phases 7–9).
    pub(super) fn execute(
        &mut self,
        host: &WasmHost,
        epoch: u64,
        replay: bool,
        mut phases: Phases,
        backlog: Option<Backlog>,
    ) -> Result<Closing> {
        let planning = phases.plan + phases.wal;
        let started = Instant::now() - planning;
        let started_ms = now_ms() - planning.as_millis() as i64;
        let since_previous = self
            .previous_start
            .replace(started)
            .map(|p| started.duration_since(p));
        let entry = self.offset_entry(epoch)?;
        self.fault(FaultPoint::OffsetsWritten, epoch)?;

        let mut input = timed(&mut phases.read, || self.read_input(&entry))?;
        let (rows_in, micro_batches) = (input.rows(), input.batches.len());
        let batches = std::mem::take(&mut input.batches);
        let ran = timed(&mut phases.operator, || {
            self.run_resilient(host, entry, batches)
        })?;
        // The last operator run was the epoch's (the shadow's comes next).
        let task_run = std::mem::take(&mut self.task_run);
        let shadow = timed(&mut phases.shadow, || {
            self.shadow_hook(host, &ran.entry, &ran.prepared.batches, &ran.outputs)
        });
        let Ran {
            entry,
            prepared,
            outputs,
            env,
            migrated,
            isolated,
        } = ran;
        // The input rows are not needed past the operator and its shadow:
        // free them before the sink and the state commit need memory.
        let PreparedInput {
            batches: _,
            observed,
            dropped,
        } = prepared;
        input.dead_letters.extend(isolated);
        let changes = operator_state::changes(env);
        self.warn_if_timers_cannot_fire(epoch, &changes);
        timed(&mut phases.sink, || {
            self.write_sink(epoch, &input.dead_letters, &task_run.shares(&outputs))
        })?;
        let mut latency = Histogram::default();
        self.measure_latency(&outputs, &mut latency);
        let max_event_time_ms = self
            .event_time
            .as_ref()
            .and_then(|et| et.max_through(&observed));
        let done = Done {
            epoch,
            replay,
            started,
            started_ms,
            since_previous,
            rows_in,
            rows_out: weir_core::outputs::default_rows(&outputs),
            named_rows: weir_core::outputs::named_rows(&outputs),
            micro_batches,
            dead_letters: input.dead_letters.len() as u64,
            observed,
            dropped,
            backlog,
            phases,
            latency,
            parts: None,
            tasks: task_run.progress,
        };
        let ranges = match entry.no_data {
            true => Vec::new(),
            false => vec![entry.source.clone()],
        };
        Ok(Closing {
            entry,
            done,
            migrated,
            shadow,
            max_event_time_ms,
            ranges,
            reached: Reached::SinkWritten(changes),
        })
    }

    /// Says so, once per run, when the operator sets event-time timers in
    /// a pipeline without `[event_time]`: no watermark would ever fire them,
    /// so its windows would never close and its state would only grow,
    /// silently. (An error, not a failed epoch: a pipeline that ran so
    /// before must not stop at its next start.)
    pub(super) fn warn_if_timers_cannot_fire(&mut self, epoch: u64, changes: &Changes) {
        if self.event_time.is_some()
            || self.warned_timers
            || !TimerSpace::of(&self.state_namespace).set_in(changes)
        {
            return;
        }
        self.warned_timers = true;
        tracing::error!(
            pipeline = %self.name,
            epoch,
            "the operator sets event-time timers, but the pipeline has no `[event_time]`: \
             without a watermark no timer ever fires (its windows never close and its state \
             grows). Add `[event_time]` with the event-time column (README, \"Event time\"), \
             or run a version that sets no timers"
        );
    }

    /// Loads the lookup tables due for a refresh; a table that begins
    /// failing to load is recorded in the audit trail.
    fn refresh_lookups(&mut self) {
        let failed_before = self.lookups.failed_refreshes;
        for failure in self.lookups.refresh(&self.checkpoint) {
            // The whole cause is in the log; the trail keeps its start.
            let cause: String = failure.error.chars().take(300).collect();
            self.control.record(
                "lookup-refresh-failed",
                format!(
                    "lookup `{}` keeps version {}: {cause}",
                    failure.lookup, failure.kept
                ),
            );
        }
        self.lookup_failures += self.lookups.failed_refreshes - failed_before;
    }

    /// Writes `offsets/<epoch>` for `range` with the active operator.
    pub(super) fn write_offsets(
        &mut self,
        epoch: u64,
        range: serde_json::Value,
        kind: EntryKind,
    ) -> Result<OffsetEntry> {
        let migrate_from = self.last_digest.filter(|d| *d != self.active.digest);
        self.refresh_lookups();
        let entry = OffsetEntry {
            migrate_from,
            format: ENTRY_FORMAT,
            epoch,
            epoch_time_ms: now_ms(),
            source: range,
            operator: self.active.operator_ref(),
            watermark_ms: self.event_time.as_ref().and_then(EventTime::watermark),
            previous_watermark_ms: self.last_watermark,
            isolated: Vec::new(),
            real_time: kind == EntryKind::RealTime,
            no_data: kind == EntryKind::NoData,
            tasks: self.tasks.split(),
            lookups: self.lookups.versions(),
        };
        let written = self
            .fault(FaultPoint::Offsets, epoch)
            .and_then(|()| self.checkpoint.offsets.write(epoch, &entry))
            .with_context(|| format!("writing offsets/{epoch}"));
        if let Err(e) = written {
            // The source counts the range as planned: the next attempt
            // takes it up again, as a range no `offsets/N` holds yet.
            if kind == EntryKind::MicroBatch {
                self.carried = Some(entry.source);
            }
            return Err(e);
        }
        self.last_digest = Some(entry.operator.digest);
        self.last_watermark = entry.watermark_ms;
        Ok(entry)
    }

    /// Phase 3: exactly the recorded range (a real-time epoch's: its logged
    /// parts, one after the other, as they ran).
    pub(super) fn read_input(&mut self, entry: &OffsetEntry) -> Result<EpochInput> {
        let read = |source: &mut Box<dyn weir_core::source::DynSource>,
                    range: &serde_json::Value| {
            source.read(range).with_context(|| {
                format!(
                    "pipeline `{}` epoch {}: reading input",
                    self.name, entry.epoch
                )
            })
        };
        if entry.no_data {
            return Ok(EpochInput::default());
        }
        if !entry.real_time {
            return read(&mut self.source, &entry.source);
        }
        let mut all = EpochInput::default();
        for part in self.checkpoint.parts.read(entry.epoch)? {
            let input = read(&mut self.source, &part.range)?;
            all.batches.extend(input.batches);
            all.dead_letters.extend(input.dead_letters);
        }
        Ok(all)
    }

    /// The epoch's view of the state, and its input after event-time
    /// accounting and the host's dedup.
    pub(super) fn prepare(
        &mut self,
        entry: &OffsetEntry,
        batches: Vec<RecordBatch>,
    ) -> Result<Prepared> {
        let mut state = epoch_state(self.state.reader(), &self.state_namespace, entry)?;
        let observed = match &self.event_time {
            Some(et) => et.observe(&batches, entry.watermark_ms)?,
            None => Observed::default(),
        };
        let (batches, dropped) = match &self.dedup {
            Some(d) => d.apply(batches, entry.watermark_ms, &mut state)?,
            None => (batches, Dropped::default()),
        };
        let env = self.env_for(state, entry)?;
        Ok(Prepared {
            batches,
            env,
            observed,
            dropped,
        })
    }

    /// Phase 6: the epoch's dead letters, then its output, each task's
    /// share by that task's writer ([`super::sinks`]). Every write is
    /// idempotent per epoch and task, so a replay after a crash repeats
    /// them safely.
    fn write_sink(
        &mut self,
        epoch: u64,
        dead_letters: &[DeadLetter],
        shares: &[&[RecordBatch]],
    ) -> Result<()> {
        self.fault(FaultPoint::Sink, epoch)?;
        self.write_dead_letters(epoch, dead_letters)?;
        self.sinks.write_epoch(epoch, shares).with_context(|| {
            format!(
                "pipeline `{}` epoch {epoch}: writing to the sink",
                self.name
            )
        })
    }

    pub(super) fn write_dead_letters(&self, epoch: u64, letters: &[DeadLetter]) -> Result<()> {
        if letters.is_empty() {
            return Ok(());
        }
        fsutil::create_dir_durable(&self.dead_letter_dir)?;
        let mut bytes = Vec::new();
        for letter in letters {
            serde_json::to_writer(&mut bytes, letter)?;
            bytes.push(b'\n');
        }
        let path = self
            .dead_letter_dir
            .join(format!("epoch-{epoch:010}.jsonl"));
        tracing::warn!(
            pipeline = %self.name,
            epoch,
            count = letters.len(),
            path = %path.display(),
            "records set aside to the dead-letter output (malformed, or the operator failed on them)"
        );
        // The default place is inside the checkpoint: kept in the object
        // store with it, where the checkpoint is in one.
        let mirror = self
            .checkpoint
            .mirror()
            .filter(|_| path.starts_with(self.checkpoint.root()));
        weir_core::mirror::write_through(mirror.map(|m| m.as_ref()), &path, &bytes)
    }

    pub(super) fn commit_state(&mut self, epoch: u64, changes: &Changes) -> Result<()> {
        self.state
            .commit(epoch, changes)
            .with_context(|| format!("pipeline `{}` epoch {epoch}: committing state", self.name))
    }

    /// Phase 8: `commits/<epoch>`, the epoch's end.
    pub(super) fn write_commit(
        &mut self,
        epoch: u64,
        rows_in: u64,
        rows_out: u64,
        max_event_time_ms: Option<i64>,
    ) -> Result<()> {
        let commit = CommitEntry {
            format: ENTRY_FORMAT,
            epoch,
            committed_at_ms: now_ms(),
            rows_in,
            rows_out,
            max_event_time_ms,
        };
        self.checkpoint
            .commits
            .write(epoch, &commit)
            .or_else(|e| {
                // A replay may find its commit written by the run that crashed
                // right after committing: same epoch, other timestamp.
                match self.checkpoint.commits.get(epoch)? {
                    Some(c) if c.rows_in == rows_in && c.rows_out == rows_out => Ok(()),
                    _ => Err(e),
                }
            })
            .with_context(|| format!("writing commits/{epoch}"))
    }

    /// Phase 9 after the source was told: snapshots, compaction, watermark.
    pub(super) fn after_commit(
        &mut self,
        epoch: u64,
        max_event_time_ms: Option<i64>,
    ) -> Result<()> {
        if self.state.snapshot_due(epoch) {
            self.fault(FaultPoint::Snapshot, epoch)?;
        }
        self.state.after_commit(epoch)?;
        self.compact_logs(epoch)?;
        if let Some(et) = &mut self.event_time {
            et.restore(max_event_time_ms);
        }
        Ok(())
    }

    /// Every `wal.compact_every` epochs, folds the logs up to `epoch`
    /// (just committed) and deletes entries no start needs: all but the
    /// newest `wal.retain`, keeping those a state rebuild may replay; then
    /// the lookup versions only the deleted entries named
    /// ([`super::blob_gc`]).
    fn compact_logs(&mut self, epoch: u64) -> Result<()> {
        let every = self.wal.compact_every;
        if every == 0 || !(epoch + 1).is_multiple_of(every) {
            return Ok(());
        }
        self.fault(FaultPoint::Compaction, epoch)?;
        let keep_from = (epoch + 1)
            .saturating_sub(self.wal.retain)
            .min(self.state.rebuild_replays_from()?);
        let source = self.source.planned_so_far()?;
        let freed = self.lookup_versions_freed_by(keep_from)?;
        self.checkpoint
            .compact(epoch, source, keep_from)
            .with_context(|| format!("compacting the offset and commit logs at epoch {epoch}"))?;
        self.remove_lookup_versions(freed)?;
        weir_core::memory::release_free_memory();
        Ok(())
    }

    /// The progress record of a finished epoch, handed to the control plane
    /// and telemetry.
    pub(super) fn report(
        &mut self,
        done: Done,
        entry: &OffsetEntry,
        migrated: bool,
        shadow: Option<ShadowReport>,
    ) -> EpochProgress {
        let total = done.started.elapsed();
        let (state_keys, state_bytes) = self.state.size();
        let (range, source) = match done.parts {
            Some(n) => (
                format!("{n} parts (real-time)"),
                serde_json::json!({ "parts": n }),
            ),
            None if entry.no_data => (
                "no data: the watermark reached timers".to_string(),
                serde_json::json!({ "no_data": true }),
            ),
            None => (self.source.describe(&entry.source), entry.source.clone()),
        };
        let progress = EpochProgress {
            pipeline: self.name.clone(),
            partition: self.partition,
            epoch: done.epoch,
            started_ms: done.started_ms,
            finished_ms: now_ms(),
            epoch_time_ms: entry.epoch_time_ms,
            replay: done.replay,
            rows_in: done.rows_in,
            input_rows_per_sec: rate(done.rows_in, done.since_previous.unwrap_or(total)),
            processed_rows_per_sec: rate(done.rows_in, total),
            rows_out: done.rows_out,
            named_rows: done.named_rows,
            lookups: entry.lookups.clone(),
            lookup_refresh_failures: std::mem::take(&mut self.lookup_failures),
            dead_letters: done.dead_letters,
            isolated_rows: entry.isolated.len() as u64,
            late_rows: done.observed.late,
            duplicates: done.dropped.duplicates,
            watermark_ms: entry.watermark_ms,
            micro_batches: done.micro_batches,
            operator_digest: entry.operator.digest,
            operator_version: self.control.version_of(&entry.operator),
            migrated,
            shadow,
            range,
            source,
            backlog: done.backlog,
            state_keys,
            state_bytes,
            trigger_interval_ms: self.trigger.interval_ms(),
            phases: done.phases,
            total,
            latency: done.latency.summary(),
            latency_histogram: Some(done.latency),
            tasks: done.tasks,
        };
        self.control.epoch_done(&progress);
        self.telemetry.epoch_done(&progress);
        progress
    }

    /// An injected fault at `point` of `epoch`, if a test armed one
    /// ([`weir_core::faults`]).
    pub(super) fn fault(&self, point: FaultPoint, epoch: u64) -> Result<()> {
        faults::hit(self.checkpoint.root(), point, epoch)
            .with_context(|| format!("pipeline `{}` epoch {epoch}", self.name))
    }

    pub(super) fn offset_entry(&self, epoch: u64) -> Result<OffsetEntry> {
        self.checkpoint
            .offsets
            .get(epoch)?
            .with_context(|| format!("offsets/{epoch} disappeared"))
    }
}
