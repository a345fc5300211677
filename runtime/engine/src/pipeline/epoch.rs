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
//!
//! **An epoch is a value** that moves from phase to phase and carries what
//! the next one needs: [`Planned`] (phases 1–2) → [`ReadEpoch`] (3) →
//! [`RanEpoch`] (4–5) → [`Closing`] (6, the sink has it) → the progress
//! record (7–9, committed). Nothing passes between phases through the
//! pipeline's fields; the parts ([`super::Pipeline`]) are asked and told
//! through their methods. An epoch that closes works mostly on the log,
//! the state and the source, the next one that runs on the versions, the
//! input and the sinks; where they meet (the watermark restored after a
//! commit, the reports to the control plane) is a handful of calls.

use super::report::Started;
use super::resilience::{PreparedInput, Ran};
use super::retry::{Closing, Reached};
use super::{Pipeline, Prepared};
use crate::config::TriggerConfig;
use crate::dedup::Dropped;
use crate::event_time::Observed;
use crate::operator_state;
use anyhow::{Context, Result};
use arrow_array::RecordBatch;
use std::time::{Duration, Instant};
use weir_core::clock::now_ms;
use weir_core::faults::FaultPoint;
use weir_core::latency::Histogram;
use weir_core::progress::{Phases, ShadowReport};
use weir_core::source::{Backlog, DeadLetter, EpochInput, PlanLimit};
use weir_core::wal::{OffsetEntry, ENTRY_FORMAT};
use weir_host::WasmHost;

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

/// Epoch N after phases 1–2, as the run loop hands it on.
pub(super) struct Planned {
    pub epoch: u64,
    /// Planned by an earlier run or attempt: run again exactly as recorded.
    pub replay: bool,
    /// `offsets/<epoch>` is written (all but a live real-time epoch, which
    /// plans as it runs).
    pub logged: bool,
    /// Planning's share of the phases (micro-batch epochs planned just now).
    pub phases: Phases,
    pub backlog: Option<Backlog>,
}

impl Planned {
    /// An epoch whose `offsets/N` an earlier run or attempt wrote.
    pub fn replay(epoch: u64) -> Self {
        Planned {
            replay: true,
            ..Planned::logged(epoch, Phases::default(), None)
        }
    }

    /// An epoch whose `offsets/N` was just written.
    pub fn logged(epoch: u64, phases: Phases, backlog: Option<Backlog>) -> Self {
        Planned {
            epoch,
            replay: false,
            logged: true,
            phases,
            backlog,
        }
    }

    /// A live real-time epoch, which writes its `offsets/N` as it opens.
    pub fn live(epoch: u64) -> Self {
        Planned {
            logged: false,
            ..Planned::logged(epoch, Phases::default(), None)
        }
    }
}

/// Epoch N after phase 3: its entry and exactly the input it records.
pub(super) struct ReadEpoch {
    replay: bool,
    phases: Phases,
    backlog: Option<Backlog>,
    started: Started,
    entry: OffsetEntry,
    input: EpochInput,
}

/// Epoch N after phases 4–5: the operator's output and state changes, and
/// the shadow's report.
pub(super) struct RanEpoch {
    replay: bool,
    phases: Phases,
    backlog: Option<Backlog>,
    started: Started,
    rows_in: u64,
    micro_batches: usize,
    /// The source's dead letters (malformed records).
    dead_letters: Vec<DeadLetter>,
    ran: Ran,
    shadow: Option<ShadowReport>,
}

/// What an epoch did, for its progress record (micro-batch or real-time).
pub(super) struct Done {
    pub epoch: u64,
    pub replay: bool,
    pub started: Started,
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
    pub(super) fn plan(&mut self, epoch: u64) -> Result<Option<Planned>> {
        let mut phases = Phases::default();
        let limit = match self.trigger {
            TriggerConfig::Once => PlanLimit::Unbounded,
            _ => PlanLimit::PerTrigger,
        };
        let planned = timed(&mut phases.plan, || self.source.plan(limit))?;
        let backlog = self.source.backlog();
        self.reporter.source_polled(backlog);
        let Some(range) = planned else {
            return Ok(None);
        };
        timed(&mut phases.wal, || {
            self.write_offsets(epoch, range, EntryKind::MicroBatch)
        })?;
        Ok(Some(Planned::logged(epoch, phases, backlog)))
    }

    /// Writes `offsets/<epoch>` for `range` with the active operator, the
    /// watermark, the task split and the reference tables' versions.
    pub(super) fn write_offsets(
        &mut self,
        epoch: u64,
        range: serde_json::Value,
        kind: EntryKind,
    ) -> Result<OffsetEntry> {
        for note in self.input.refresh_tables(self.log.checkpoint()) {
            self.versions.record("lookup-refresh-failed", note);
        }
        let active = self.versions.active();
        let entry = OffsetEntry {
            migrate_from: self.log.migrate_from(active.digest),
            format: ENTRY_FORMAT,
            epoch,
            epoch_time_ms: now_ms(),
            source: range,
            operator: active.operator_ref(),
            watermark_ms: self.input.watermark(),
            previous_watermark_ms: self.log.last_watermark(),
            isolated: Vec::new(),
            real_time: kind == EntryKind::RealTime,
            no_data: kind == EntryKind::NoData,
            tasks: self.tasks.split(),
            lookups: self.input.table_versions(),
        };
        self.log.write_offsets(entry, kind == EntryKind::MicroBatch)
    }

    /// Phases 3–6 of an epoch whose `offsets/N` is durable (planned just
    /// now, or by a run that did not commit it: a replay). Returns the
    /// epoch as the sink has it, for [`Pipeline::close`] to commit
    /// (phases 7–9).
    pub(super) fn execute(&mut self, host: &WasmHost, planned: Planned) -> Result<Closing> {
        let read = self.read(planned)?;
        let ran = self.run_read(host, read)?;
        self.write(ran)
    }

    /// Phase 3: exactly the range `offsets/N` records.
    fn read(&mut self, p: Planned) -> Result<ReadEpoch> {
        let Planned {
            epoch,
            replay,
            mut phases,
            backlog,
            ..
        } = p;
        let started = self.reporter.start(phases.plan + phases.wal);
        let entry = self.log.entry(epoch)?;
        self.log.fault(FaultPoint::OffsetsWritten, epoch)?;
        let input = timed(&mut phases.read, || self.read_input(&entry))?;
        Ok(ReadEpoch {
            replay,
            phases,
            backlog,
            started,
            entry,
            input,
        })
    }

    /// Phases 4–5: prepares the input and runs the operator under the
    /// failure rules, then the shadow candidate over the same input.
    fn run_read(&mut self, host: &WasmHost, r: ReadEpoch) -> Result<RanEpoch> {
        let ReadEpoch {
            replay,
            mut phases,
            backlog,
            started,
            entry,
            input,
        } = r;
        let (rows_in, micro_batches) = (input.rows(), input.batches.len());
        let ran = timed(&mut phases.operator, || {
            self.run_resilient(host, entry, input.batches)
        })?;
        let shadow = timed(&mut phases.shadow, || {
            self.shadow_hook(host, &ran.entry, &ran.prepared.batches, &ran.outputs)
        });
        Ok(RanEpoch {
            replay,
            phases,
            backlog,
            started,
            rows_in,
            micro_batches,
            dead_letters: input.dead_letters,
            ran,
            shadow,
        })
    }

    /// Phase 6: dead letters and output to the sinks; the epoch is then a
    /// [`Closing`] value whose state changes are still to commit.
    fn write(&mut self, e: RanEpoch) -> Result<Closing> {
        let RanEpoch {
            replay,
            mut phases,
            backlog,
            started,
            rows_in,
            micro_batches,
            mut dead_letters,
            ran,
            shadow,
        } = e;
        let Ran {
            entry,
            prepared,
            outputs,
            env,
            migrated,
            isolated,
            tasks,
        } = ran;
        // The input rows are not needed past the operator and its shadow:
        // free them before the sink and the state commit need memory.
        let PreparedInput {
            batches: _,
            observed,
            dropped,
        } = prepared;
        let epoch = entry.epoch;
        dead_letters.extend(isolated);
        let changes = operator_state::changes(env);
        self.state
            .warn_if_timers_cannot_fire(epoch, &changes, self.input.has_event_time());
        timed(&mut phases.sink, || {
            self.write_sink(epoch, &dead_letters, &tasks.shares(&outputs))
        })?;
        let mut latency = Histogram::default();
        self.input.measure_latency(&outputs, &mut latency);
        let done = Done {
            epoch,
            replay,
            started,
            rows_in,
            rows_out: weir_core::outputs::default_rows(&outputs),
            named_rows: weir_core::outputs::named_rows(&outputs),
            micro_batches,
            dead_letters: dead_letters.len() as u64,
            observed,
            dropped,
            backlog,
            phases,
            latency,
            parts: None,
            tasks: tasks.progress,
        };
        let ranges = match entry.no_data {
            true => Vec::new(),
            false => vec![entry.source.clone()],
        };
        Ok(Closing {
            max_event_time_ms: self.input.max_through(&done.observed),
            entry,
            done,
            migrated,
            shadow,
            ranges,
            reached: Reached::SinkWritten(changes),
        })
    }

    /// Phase 3: exactly the recorded range (a real-time epoch's: its logged
    /// parts, one after the other, as they ran).
    pub(super) fn read_input(&mut self, entry: &OffsetEntry) -> Result<EpochInput> {
        let name = &self.name;
        let read = |source: &mut Box<dyn weir_core::source::DynSource>,
                    range: &serde_json::Value| {
            source
                .read(range)
                .with_context(|| format!("pipeline `{name}` epoch {}: reading input", entry.epoch))
        };
        if entry.no_data {
            return Ok(EpochInput::default());
        }
        if !entry.real_time {
            return read(&mut self.source, &entry.source);
        }
        let mut all = EpochInput::default();
        for part in self.log.checkpoint().parts.read(entry.epoch)? {
            let input = read(&mut self.source, &part.range)?;
            all.batches.extend(input.batches);
            all.dead_letters.extend(input.dead_letters);
        }
        Ok(all)
    }

    /// Phase 4: the epoch's view of the state, and its input after
    /// event-time accounting and the host's dedup.
    pub(super) fn prepare(
        &mut self,
        entry: &OffsetEntry,
        batches: Vec<RecordBatch>,
    ) -> Result<Prepared> {
        let mut state = self.state.view(entry)?;
        let (batches, observed, dropped) = self.input.apply(entry, batches, Some(&mut state))?;
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
        self.log.fault(FaultPoint::Sink, epoch)?;
        self.log.write_dead_letters(epoch, dead_letters)?;
        self.sinks.write_epoch(epoch, shares).with_context(|| {
            format!(
                "pipeline `{}` epoch {epoch}: writing to the sink",
                self.name
            )
        })
    }

    /// Phase 9 after the source was told: snapshots, compaction, watermark.
    pub(super) fn after_commit(
        &mut self,
        epoch: u64,
        max_event_time_ms: Option<i64>,
    ) -> Result<()> {
        if self.state.snapshot_due(epoch) {
            self.log.fault(FaultPoint::Snapshot, epoch)?;
        }
        self.state.after_commit(epoch)?;
        self.compact_logs(epoch)?;
        self.input.restore_event_time(max_event_time_ms);
        Ok(())
    }

    /// Every `wal.compact_every` epochs, folds the logs up to `epoch`
    /// (just committed) and deletes entries no start needs: all but the
    /// newest `wal.retain`, keeping those a state rebuild may replay; then
    /// the lookup versions only the deleted entries named
    /// ([`super::blob_gc`]).
    fn compact_logs(&mut self, epoch: u64) -> Result<()> {
        if !self.log.compaction_due(epoch) {
            return Ok(());
        }
        self.log.fault(FaultPoint::Compaction, epoch)?;
        let keep_from = self
            .log
            .keep_from(epoch, self.state.rebuild_replays_from()?);
        let source = self.source.planned_so_far()?;
        let freed = self.lookup_versions_freed_by(keep_from)?;
        self.log
            .checkpoint()
            .compact(epoch, source, keep_from)
            .with_context(|| format!("compacting the offset and commit logs at epoch {epoch}"))?;
        self.remove_lookup_versions(freed)?;
        weir_core::memory::release_free_memory();
        Ok(())
    }
}
