//! Real-time mode (`[trigger] mode = "real-time"`): a record goes to the
//! operator as soon as it arrives and its output to the sink at once, not at
//! the end of the epoch. Epochs remain the unit of the logs, of state
//! commits, of swaps and of progress records: one every
//! `checkpoint_interval`. Within epoch N, each poll of the source that finds
//! records makes a **part** — whatever arrived since the previous one, in
//! micro-batches of at most `batch_rows` — run through the epoch's
//! operator instances: one per task (`offsets/N` records how many), each
//! kept for the epoch, a part's rows dealt to them by the exchange
//! ([`super::instances`]), and each task's share of the part written by
//! its own sink writer.
//!
//! The phases of a real-time epoch N, and the order crash safety rests on:
//!
//! 1. **open** — `offsets/N` (operator version, epoch time, watermark;
//!    `real_time`, no range) durable, as in micro-batch mode;
//! 2. per part i: **plan** (the source's next range) → **log** it in
//!    `offsets/N.parts` (written now, synced in step 4) → **read** →
//!    **prepare** (event time, the host's dedup against the epoch's state)
//!    → **run** (`process` on the epoch's instance) → **sync the part log**
//!    → **write part i to the sink** (idempotent per `(N, i)`);
//! 3. **close** — dead letters, the sink's `end_epoch`; then, as in
//!    micro-batch mode ([`super::retry`]), **commit the state**,
//!    **`commits/N`**, tell the source.
//!
//! Part i's range is durable before any of its output reaches the sink
//! (step 2), the sink has every part before the state commits, the state
//! before `commits/N` (step 3). A crash re-runs N from `offsets/N` and its
//! part log: the same parts with the same boundaries, version, time and
//! watermark, so the operator emits the same rows, the sink's per-part
//! write makes the repeat harmless, and the state store has undone the
//! uncommitted epoch. A part logged but never synced had no output
//! delivered; a torn line is ignored ([`weir_core::parts`]). The replayed
//! epoch ends with its logged parts; new records go to epoch N+1. A
//! replay reads its parts [`REPLAY_READ_PARTS`] at a time
//! ([`weir_core::source::Source::read_each`]: one Kafka fetch for all of
//! them), so it takes about as long as reading the epoch's records.
//!
//! **When the operator fails on part i live** (a bad record, a bad new
//! version), nothing of part i was delivered, but parts before it were, so
//! the epoch cannot be re-planned as a micro-batch epoch is
//! ([`super::resilience`]). Instead part i is **deferred**: the part log
//! ends the epoch before it (durably), the epoch is replayed with parts
//! 0..i on a fresh instance (its state view holds no half-run part) and
//! committed, and part i's range runs as epoch N+1, a micro-batch epoch,
//! under every failure rule of micro-batch mode: re-plan with a rolled-back
//! version, auto-rollback of a version on probation, isolation of the
//! records it fails on. Real-time epochs resume at N+2.
//!
//! A **shadow** candidate runs at the close of each epoch over all of its
//! parts' input, against the committed state, as in micro-batch mode.

use super::epoch::{Done, EntryKind};
use super::instances::{Instances, Shares};
use super::retry::{Closing, Reached};
use super::{EpochFailed, Pipeline};
use crate::dedup::Dropped;
use crate::event_time::Observed;
use crate::operator_state;
use anyhow::{Context, Result};
use arrow_array::RecordBatch;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use weir_core::faults::FaultPoint;
use weir_core::latency::Histogram;
use weir_core::parts::{Decoded, PartEntry, PartWriter};
use weir_core::progress::Phases;
use weir_core::source::{row_count, DeadLetter, EpochInput, PlanLimit};
use weir_core::wal::OffsetEntry;
use weir_host::WasmHost;

/// Logged parts a replay reads together (one Kafka fetch): bounded so a
/// replay holds a few hundred parts' records at a time, not a whole long
/// epoch's.
const REPLAY_READ_PARTS: usize = 256;

/// How long a real-time epoch waits between polls of a source that had
/// nothing new: short, since it is the latency floor for a quiet source.
const IDLE_POLL: Duration = Duration::from_micros(500);

/// What a real-time epoch did so far.
#[derive(Default)]
struct Totals {
    parts: u32,
    rows_in: u64,
    rows_out: u64,
    named_rows: std::collections::BTreeMap<String, u64>,
    micro_batches: usize,
    observed: Observed,
    dropped: Dropped,
    dead_letters: Vec<DeadLetter>,
    /// The ranges of the parts, for the source's `committed`.
    ranges: Vec<serde_json::Value>,
    /// Event→emit latency of the output rows.
    latency: Histogram,
    /// With a shadow candidate: every part's input (as the operator got
    /// it) and output, for the comparison at the epoch's close.
    shadowed: Option<(Vec<RecordBatch>, Vec<RecordBatch>)>,
}

impl Totals {
    /// Counts a part whose output (task by task) the sink now has.
    fn delivered(&mut self, shares: &Shares, measure: impl Fn(&[RecordBatch], &mut Histogram)) {
        for outputs in shares {
            measure(outputs, &mut self.latency);
            self.rows_out += weir_core::outputs::default_rows(outputs);
            for (name, rows) in weir_core::outputs::named_rows(outputs) {
                *self.named_rows.entry(name).or_insert(0) += rows;
            }
        }
        self.parts += 1;
    }
}

/// Each task's output as the slices the sink's writers take.
fn as_slices(shares: &Shares) -> Vec<&[RecordBatch]> {
    shares.iter().map(Vec::as_slice).collect()
}

/// How the live parts of an epoch ended.
enum LiveEnd {
    /// The interval passed, a stop was asked, or the source ended.
    Closed,
    /// The operator failed on the last part, which is deferred.
    Deferred,
}

impl Pipeline {
    /// Runs real-time epoch `epoch`: live, taking parts as records arrive
    /// until `interval` has passed (or `stop`), or — `replay` — exactly the
    /// parts its log holds.
    pub(super) fn execute_real_time(
        &mut self,
        host: &WasmHost,
        epoch: u64,
        replay: bool,
        interval: Duration,
        stop: &AtomicBool,
    ) -> Result<Closing> {
        let started = self.reporter.start(Duration::ZERO);
        let mut phases = Phases::default();
        let log = if replay {
            self.log.write_pending_defer(epoch)?;
            Some(self.log.checkpoint().parts.read_log(epoch)?)
        } else {
            None
        };
        let entry = match &log {
            Some(log) => self.replay_entry(epoch, log)?,
            None => self.write_offsets(epoch, serde_json::Value::Null, EntryKind::RealTime)?,
        };
        self.log.fault(FaultPoint::OffsetsWritten, epoch)?;
        let mut running = self.start_instances(host, &entry)?;
        let mut totals = Totals {
            shadowed: self.versions.shadow().map(|_| Default::default()),
            ..Totals::default()
        };
        let mut deferred = None;
        if let Some(log) = log {
            self.replay_parts(&mut running, &entry, log.parts, &mut totals, &mut phases)?;
            deferred = log.deferred;
        } else {
            let deadline = started.at + interval;
            let mut run = LiveRun {
                running: &mut running,
                totals: &mut totals,
                phases: &mut phases,
            };
            if let LiveEnd::Deferred = self.live_parts(&entry, deadline, stop, &mut run)? {
                drop(running);
                return self.execute_real_time(host, epoch, true, Duration::ZERO, stop);
            }
        }
        self.timers_part(&mut running, &entry, &mut totals, &mut phases)?;
        let migrated = running.migrated();
        let task_progress = running.progress();
        let changes = operator_state::changes(running.finish());
        self.state
            .warn_if_timers_cannot_fire(epoch, &changes, self.input.has_event_time());
        let shadow = totals.shadowed.take().and_then(|(input, output)| {
            super::epoch::timed(&mut phases.shadow, || {
                self.shadow_hook(host, &entry, &input, &output)
            })
        });
        super::epoch::timed(&mut phases.sink, || -> Result<()> {
            self.log.fault(FaultPoint::Sink, epoch)?;
            self.log.write_dead_letters(epoch, &totals.dead_letters)?;
            self.sinks.end_epoch(epoch)
        })?;
        // A deferred part runs next (a range whose logging failed may be
        // carried already).
        if let Some(part) = deferred.filter(|_| replay) {
            self.log.carry(part.range);
        }
        let backlog = self.source.backlog();
        self.reporter.source_polled(backlog);
        let max_event_time_ms = self.input.max_through(&totals.observed);
        let done = Done {
            epoch,
            replay,
            started,
            rows_in: totals.rows_in,
            rows_out: totals.rows_out,
            named_rows: totals.named_rows,
            micro_batches: totals.micro_batches,
            dead_letters: totals.dead_letters.len() as u64,
            observed: totals.observed,
            dropped: totals.dropped,
            backlog,
            phases,
            latency: totals.latency,
            parts: Some(totals.parts),
            tasks: task_progress,
        };
        Ok(Closing {
            entry,
            done,
            migrated,
            shadow,
            max_event_time_ms,
            ranges: totals.ranges,
            reached: Reached::SinkWritten(changes),
        })
    }

    /// `offsets/<epoch>` for a replay. An epoch that delivered nothing (no
    /// part logged: its instance failed to start, say) is re-planned with
    /// the active version first if another was activated meanwhile (a
    /// `weir rollback` while it was stuck), as a micro-batch epoch is.
    fn replay_entry(&mut self, epoch: u64, log: &Decoded) -> Result<OffsetEntry> {
        let entry = self.log.entry(epoch)?;
        let Some(active) = self.versions.planned_active() else {
            return Ok(entry);
        };
        let same = active.operator_ref() == entry.operator;
        if same || !log.parts.is_empty() || log.deferred.is_some() {
            return Ok(entry);
        }
        tracing::warn!(
            pipeline = %self.name,
            epoch,
            version = active.number,
            "real-time epoch delivered nothing before it failed; re-planning it with the \
             active version {}",
            active.number
        );
        self.replan(entry, &active)
    }

    /// Step 2, live: polls the source and runs each part it finds until
    /// `deadline`, a stop request, or the end of a bounded source; or
    /// until the operator fails on a part, which is then deferred.
    fn live_parts(
        &mut self,
        entry: &OffsetEntry,
        deadline: Instant,
        stop: &AtomicBool,
        run: &mut LiveRun<'_>,
    ) -> Result<LiveEnd> {
        let mut log = self.log.checkpoint().parts.create(entry.epoch)?;
        while Instant::now() < deadline && !stop.load(Ordering::Relaxed) {
            let planned =
                super::epoch::timed(&mut run.phases.plan, || self.source.plan(PlanLimit::Live))?;
            let Some(range) = planned else {
                if self.source.is_exhausted() {
                    break;
                }
                std::thread::sleep(
                    IDLE_POLL.min(deadline.saturating_duration_since(Instant::now())),
                );
                continue;
            };
            let part = PartEntry {
                part: run.totals.parts,
                range,
            };
            if let Err(e) = log.append(&part) {
                // The source counts the range as planned, and no log holds
                // it: the next epoch takes it up (as a deferred part).
                self.log.carry(part.range);
                return Err(e);
            }
            let number = part.part;
            let ran = self.run_part(
                run.running,
                entry,
                part,
                None,
                Some(&mut log),
                run.totals,
                run.phases,
            );
            match ran {
                Ok(()) => {}
                Err(e) if e.downcast_ref::<EpochFailed>().is_some() => {
                    let deferred = self
                        .log
                        .fault(FaultPoint::Defer, entry.epoch)
                        .and_then(|()| log.defer(number));
                    if let Err(io) = deferred {
                        self.log.defer_later(entry.epoch, number);
                        return Err(io).context(format!(
                            "the operator failed on part {number} ({e:#}); writing that the \
                             part runs as the next epoch failed, and is retried"
                        ));
                    }
                    tracing::warn!(
                        pipeline = %self.name,
                        epoch = entry.epoch,
                        part = number,
                        "the operator failed on a part before any of its output was delivered; \
                         the epoch ends before it and the part runs as the next epoch, under \
                         the failure rules of micro-batch mode: {e:#}"
                    );
                    return Ok(LiveEnd::Deferred);
                }
                Err(e) => return Err(e),
            }
        }
        Ok(LiveEnd::Closed)
    }

    /// The epoch's instances (one per task `offsets/N` records), over the
    /// epoch's view of the state.
    fn start_instances(&mut self, host: &WasmHost, entry: &OffsetEntry) -> Result<Instances> {
        let state = self.state.view(entry)?;
        let env = self.env_for(state, entry)?;
        self.start_instances_of(host, entry, env)?
            .map_err(|cause| self.epoch_failed(entry, cause))
    }

    /// A replay's logged parts, read [`REPLAY_READ_PARTS`] at a time
    /// (one Kafka fetch for all of them, not one each) and run in order.
    fn replay_parts(
        &mut self,
        running: &mut Instances,
        entry: &OffsetEntry,
        parts: Vec<PartEntry>,
        totals: &mut Totals,
        phases: &mut Phases,
    ) -> Result<()> {
        let (count, started) = (parts.len(), Instant::now());
        let mut reads = 0;
        let mut parts = parts.into_iter().peekable();
        while parts.peek().is_some() {
            let chunk: Vec<PartEntry> = parts.by_ref().take(REPLAY_READ_PARTS).collect();
            let ranges: Vec<serde_json::Value> = chunk.iter().map(|p| p.range.clone()).collect();
            let inputs = super::epoch::timed(&mut phases.read, || self.source.read_each(&ranges))
                .with_context(|| {
                format!(
                    "pipeline `{}` epoch {}: reading the logged parts",
                    self.name, entry.epoch
                )
            })?;
            reads += 1;
            for (part, input) in chunk.into_iter().zip(inputs) {
                self.run_part(running, entry, part, Some(input), None, totals, phases)?;
            }
        }
        tracing::info!(
            pipeline = %self.name,
            epoch = entry.epoch,
            parts = count,
            reads,
            "replayed a real-time epoch: {count} logged parts read in {reads} reads, run in {:.1?}",
            started.elapsed()
        );
        Ok(())
    }

    /// One part: read (unless a replay read it with the others), prepare,
    /// run; then, once its log line is durable, its output to the sink.
    #[allow(clippy::too_many_arguments)]
    fn run_part(
        &mut self,
        running: &mut Instances,
        entry: &OffsetEntry,
        part: PartEntry,
        input: Option<EpochInput>,
        log: Option<&mut PartWriter>,
        totals: &mut Totals,
        phases: &mut Phases,
    ) -> Result<()> {
        let input = match input {
            Some(input) => input,
            None => super::epoch::timed(&mut phases.read, || self.source.read(&part.range))
                .with_context(|| {
                    format!(
                        "pipeline `{}` epoch {} part {}: reading input",
                        self.name, entry.epoch, part.part
                    )
                })?,
        };
        let shares = super::epoch::timed(&mut phases.operator, || {
            self.process_part(running, entry, input.batches, totals)
        })?;
        super::epoch::timed(&mut phases.sink, || -> Result<()> {
            if let Some(log) = log {
                log.sync()?;
            }
            self.log.fault(FaultPoint::Sink, entry.epoch)?;
            self.sinks
                .write_part(entry.epoch, part.part, &as_slices(&shares))
                .with_context(|| {
                    format!(
                        "pipeline `{}` epoch {} part {}: writing to the sink",
                        self.name, entry.epoch, part.part
                    )
                })
        })?;
        totals.delivered(&shares, |outputs, latency| {
            self.input.measure_latency(outputs, latency)
        });
        totals.dead_letters.extend(input.dead_letters);
        totals.ranges.push(part.range);
        Ok(())
    }

    /// Event time, the host's dedup (against the epoch's state, which holds
    /// the earlier parts' writes) and the operator, batch by batch.
    fn process_part(
        &mut self,
        running: &mut Instances,
        entry: &OffsetEntry,
        batches: Vec<RecordBatch>,
        totals: &mut Totals,
    ) -> Result<Shares> {
        totals.rows_in += row_count(&batches);
        let batches = self.input.apply_part(
            entry,
            batches,
            operator_state::epoch_state_mut(running.host_env()),
            &mut totals.observed,
            &mut totals.dropped,
        )?;
        totals.micro_batches += batches.len();
        if let Some((input, _)) = &mut totals.shadowed {
            input.extend(batches.iter().cloned());
        }
        let shares = running
            .process(batches)?
            .map_err(|cause| self.epoch_failed(entry, cause))?;
        if let Some((_, output)) = &mut totals.shadowed {
            output.extend(shares.iter().flatten().cloned());
        }
        Ok(shares)
    }

    /// Step 3 begins with the timers the epoch's watermark reached: their
    /// `on-timers` output is the epoch's last part. It is not logged: a
    /// replay runs the same logged parts over the same state and watermark,
    /// so it fires the same timers into a part with the same number, and
    /// the sink's per-part write makes the repeat harmless.
    fn timers_part(
        &mut self,
        running: &mut Instances,
        entry: &OffsetEntry,
        totals: &mut Totals,
        phases: &mut Phases,
    ) -> Result<()> {
        let shares = super::epoch::timed(&mut phases.operator, || running.fire_timers())?
            .map_err(|cause| self.epoch_failed(entry, cause))?;
        if shares.iter().all(Vec::is_empty) {
            return Ok(());
        }
        super::epoch::timed(&mut phases.sink, || {
            self.sinks
                .write_part(entry.epoch, totals.parts, &as_slices(&shares))
        })
        .with_context(|| {
            format!(
                "pipeline `{}` epoch {}: writing the timers' output to the sink",
                self.name, entry.epoch
            )
        })?;
        totals.delivered(&shares, |outputs, latency| {
            self.input.measure_latency(outputs, latency)
        });
        if let Some((_, output)) = &mut totals.shadowed {
            output.extend(shares.into_iter().flatten());
        }
        Ok(())
    }
}

/// A live epoch's instance and running figures.
struct LiveRun<'a> {
    running: &'a mut Instances,
    totals: &'a mut Totals,
    phases: &'a mut Phases,
}
