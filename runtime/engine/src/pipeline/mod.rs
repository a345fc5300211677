//! The epoch loop (Spark's MicroBatchExecution). Data flows one way:
//!
//! ```text
//! source.plan ─▶ offsets/N (durable) ─▶ source.read ─▶ operator ─▶ sink ─▶ commits/N
//! ```
//!
//! Nothing is read before its range is in the offset WAL, and nothing is
//! committed before the sink has it. On start, an epoch that was planned but
//! not committed is run again with the recorded range, operator digest and
//! operator config, so its output is the same as the first attempt's.

mod resilience;

use crate::config::{FailurePolicy, OnError, TriggerConfig, WalConfig};
use crate::dedup::{Dedup, Dropped};
use crate::deploy::shadow::{self, ShadowReport};
use crate::deploy::Control;
use crate::event_time::{EventTime, Observed};
use crate::observe::Telemetry;
use crate::operator_state::{self, epoch_env};
use crate::registry::Version;
use anyhow::{bail, Context, Result};
use arrow_array::RecordBatch;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use weir_core::backoff::Backoff;
use weir_core::checkpoint::Checkpoint;
use weir_core::clock::now_ms;
use weir_core::fsutil;
use weir_core::progress::{rate, EpochProgress, Phases};
use weir_core::sink::Sink;
use weir_core::source::{Backlog, DeadLetter, PlanLimit, Source, SourceBatch};
use weir_core::wal::{CommitEntry, OffsetEntry, OperatorRef, ENTRY_FORMAT};
use weir_host::{EpochCall, EpochEnv, Limits, LoadedOperator, OperatorFailure, WasmHost};
use weir_state::{EpochState, Opened, StateStore};

use resilience::{without_isolated, Ran};

/// Longest wait between attempts at an epoch that cannot proceed.
const EPOCH_RETRY_MAX: Duration = Duration::from_secs(30);

/// An operator call failed during an epoch. Carries what an on-call engineer
/// needs: which pipeline, which epoch, which operator version, and why.
#[derive(Debug, thiserror::Error)]
#[error("pipeline `{pipeline}` epoch {epoch}: operator {digest} {cause}")]
pub struct EpochFailed {
    pub pipeline: String,
    pub epoch: u64,
    pub digest: String,
    #[source]
    pub cause: OperatorFailure,
}

/// The operator version new epochs are planned with.
#[derive(Debug, Clone)]
pub struct ActiveOperator {
    /// Registry number (see [`crate::registry`]).
    pub version: u32,
    pub digest: String,
    pub config_digest: String,
    pub limits: Limits,
}

/// Totals of one `run`.
#[derive(Debug, Clone, Default)]
pub struct RunSummary {
    pub epochs: u64,
    pub replayed: u64,
    pub rows_in: u64,
    pub rows_out: u64,
    pub dead_letters: u64,
    pub elapsed: Duration,
}

/// A pipeline bound to its checkpoint, source, operator and sink.
pub struct Pipeline {
    pub(crate) name: String,
    pub(crate) checkpoint: Checkpoint,
    pub(crate) source: Box<dyn Source>,
    pub(crate) sink: Box<dyn Sink>,
    pub(crate) trigger: TriggerConfig,
    pub(crate) active: ActiveOperator,
    pub(crate) grants: weir_host::Grants,
    pub(crate) dead_letter_dir: PathBuf,
    pub(crate) config_hash: String,
    pub(crate) configs: HashMap<String, String>,
    /// Keyed state, committed with each epoch.
    pub(crate) state: StateStore,
    /// Whether opening the state rebuilt it from a snapshot (replay needed).
    pub(crate) state_opened: Opened,
    /// The operator's state namespace.
    pub(crate) state_namespace: String,
    /// The event-time column and running maximum, with `[event_time]`.
    pub(crate) event_time: Option<EventTime>,
    /// The host's dedup, with `[dedup]`.
    pub(crate) dedup: Option<Dedup>,
    /// Where operator swaps come from (admin API, `--watch`).
    pub(crate) control: Arc<Control>,
    /// Component digest of the newest planned epoch: a different active
    /// digest at planning time means the next epoch is the first of a new
    /// version and runs its `migrate` hook.
    pub(crate) last_digest: Option<String>,
    /// The version running in shadow, and the key its rows are matched on.
    pub(crate) shadow: Option<(Version, Option<String>)>,
    /// Where progress records and metrics go (the admin API reads them).
    pub(crate) telemetry: Arc<Telemetry>,
    /// When the previous epoch started, for the input rate.
    pub(crate) previous_start: Option<Instant>,
    /// What operator failures do (see [`resilience`]).
    pub(crate) failure: FailurePolicy,
    /// How the offset and commit logs are compacted.
    pub(crate) wal: WalConfig,
}

/// An epoch's input as the operator gets it, with the state view.
struct Prepared {
    batches: Vec<RecordBatch>,
    env: EpochEnv,
    observed: Observed,
    dropped: Dropped,
}

impl Pipeline {
    /// The pipeline's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The checkpoint directory.
    pub fn checkpoint(&self) -> &Checkpoint {
        &self.checkpoint
    }

    /// The control plane: deploy, roll back and shadow operator versions
    /// while [`Pipeline::run`] runs (the admin API and `--watch` use it).
    pub fn control(&self) -> Arc<Control> {
        self.control.clone()
    }

    /// Progress records, metrics and the backlog verdict, for the admin API
    /// and the dashboard.
    pub fn telemetry(&self) -> Arc<Telemetry> {
        self.telemetry.clone()
    }

    /// Takes up what the control plane says new epochs run with. Called
    /// between epochs only, so a swap happens at an epoch boundary.
    fn follow_control(&mut self) {
        let Some(planned) = self.control.planned() else {
            return;
        };
        let a = &planned.active;
        if a.digest != self.active.digest || a.config_digest != self.active.config_digest {
            tracing::info!(
                pipeline = %self.name,
                from = self.active.version,
                to = a.number,
                digest = %a.digest,
                "operator swap: new epochs run version {}",
                a.number
            );
            self.active = ActiveOperator {
                version: a.number,
                digest: a.digest.clone(),
                config_digest: a.config_digest.clone(),
                limits: self.active.limits,
            };
        }
        self.shadow = planned.shadow;
    }

    /// Runs epochs according to the trigger until the trigger is done or
    /// `stop` is set (checked between epochs). `on_epoch` sees each epoch's
    /// progress as it finishes.
    pub fn run(
        &mut self,
        host: &WasmHost,
        stop: &AtomicBool,
        on_epoch: &mut dyn FnMut(&EpochProgress),
    ) -> Result<RunSummary> {
        let started = Instant::now();
        let mut summary = RunSummary::default();
        let mut tally = |p: &EpochProgress, summary: &mut RunSummary| {
            summary.epochs += 1;
            summary.replayed += u64::from(p.replay);
            summary.rows_in += p.rows_in;
            summary.rows_out += p.rows_out;
            summary.dead_letters += p.dead_letters;
            on_epoch(p);
        };
        let (mut next, mut pending) = self.recover(host)?;
        let mut retry: Option<Backoff> = None;
        loop {
            if stop.load(Ordering::Relaxed) {
                tracing::info!(pipeline = %self.name, "stop requested; last epoch committed");
                break;
            }
            self.follow_control();
            let trigger_start = Instant::now();
            let attempt = match pending.take() {
                // Planned by an earlier run (or an earlier attempt of this
                // one) but not committed: run again exactly as recorded.
                Some(epoch) => Some((epoch, Phases::default(), None, true)),
                None => self
                    .plan(next)?
                    .map(|(phases, backlog)| (next, phases, backlog, false)),
            };
            match attempt {
                Some((epoch, phases, backlog, replay)) => {
                    match self.execute(host, epoch, replay, phases, backlog) {
                        Ok(progress) => {
                            if let Some(b) = retry.take() {
                                tracing::info!(
                                    pipeline = %self.name,
                                    epoch,
                                    "epoch committed after {} failed attempts",
                                    b.attempts()
                                );
                            }
                            tally(&progress, &mut summary);
                            next = epoch + 1;
                        }
                        Err(e) => {
                            self.telemetry.epoch_failed();
                            if !self.retries_failed_epochs() {
                                return Err(e);
                            }
                            let backoff = retry.get_or_insert_with(|| {
                                Backoff::new(Duration::from_secs(1), EPOCH_RETRY_MAX)
                            });
                            let delay = backoff.next_delay();
                            tracing::error!(
                                pipeline = %self.name,
                                epoch,
                                attempt = backoff.attempts(),
                                "epoch cannot proceed: {e:#}; retrying in {delay:.1?}, nothing is \
                                 skipped. Fix the cause, or deploy or roll back the operator \
                                 (`weir rollback`): the retry runs the active version."
                            );
                            pending = Some(epoch);
                            sleep_until(Instant::now() + delay, stop);
                            continue;
                        }
                    }
                }
                None if matches!(
                    self.trigger,
                    TriggerConfig::Once | TriggerConfig::AvailableNow
                ) =>
                {
                    break
                }
                None => {}
            }
            match self.trigger {
                TriggerConfig::Once => break,
                TriggerConfig::AvailableNow => {}
                TriggerConfig::ProcessingTime { interval } => {
                    sleep_until(trigger_start + interval, stop);
                }
            }
        }
        summary.elapsed = started.elapsed();
        Ok(summary)
    }

    /// Whether a failed epoch is retried (with backoff, the admin API up)
    /// rather than ending `run`: for continuous pipelines that do not ask
    /// to stop on operator errors. A `once` or `available-now` run is a
    /// batch job and fails visibly instead.
    fn retries_failed_epochs(&self) -> bool {
        self.failure.on_error == OnError::DeadLetter
            && matches!(self.trigger, TriggerConfig::ProcessingTime { .. })
    }

    /// Asks the source for the next range and makes `offsets/<epoch>`
    /// durable; `None` if there is no new data.
    fn plan(&mut self, epoch: u64) -> Result<Option<(Phases, Option<Backlog>)>> {
        let limit = match self.trigger {
            TriggerConfig::Once => PlanLimit::Unbounded,
            _ => PlanLimit::PerTrigger,
        };
        let plan_started = Instant::now();
        let planned = self.source.plan(limit)?;
        let plan = plan_started.elapsed();
        let backlog = self.source.backlog();
        self.telemetry.source_polled(backlog);
        let Some(range) = planned else {
            return Ok(None);
        };
        let wal_started = Instant::now();
        self.write_offsets(epoch, range)?;
        let phases = Phases {
            plan,
            wal: wal_started.elapsed(),
            ..Phases::default()
        };
        Ok(Some((phases, backlog)))
    }

    /// Rebuilds the source's view of what was planned and brings the state
    /// to the last commit. Returns the next epoch number and the one
    /// planned-but-uncommitted epoch, if any, which `run` executes first.
    fn recover(&mut self, host: &WasmHost) -> Result<(u64, Option<u64>)> {
        let planned = self.checkpoint.offsets.epochs()?;
        let folded = self.checkpoint.compacted()?;
        if let Some(c) = &folded {
            self.source.restore(&c.source).with_context(|| {
                format!("restoring source progress from offsets/{}.compact", c.epoch)
            })?;
        }
        let folded = folded.map(|c| c.epoch);
        for &epoch in planned.iter().filter(|&&e| folded.is_none_or(|f| e > f)) {
            let entry = self.offset_entry(epoch)?;
            self.source
                .restore(&entry.source)
                .with_context(|| format!("restoring source progress from offsets/{epoch}"))?;
        }
        let planned = if planned.is_empty() {
            folded.into_iter().collect()
        } else {
            planned
        };
        let latest = self.checkpoint.commits.latest()?;
        let last_committed = latest.as_ref().map(|(e, _)| *e);
        if let Some(et) = &mut self.event_time {
            et.restore(latest.and_then(|(_, c)| c.max_event_time_ms));
        }
        self.recover_state(host, last_committed)?;
        let Some(&last_planned) = planned.last() else {
            return Ok((0, None));
        };
        self.last_digest = Some(self.offset_entry(last_planned)?.operator.digest);
        if last_committed.is_some_and(|c| c >= last_planned) {
            return Ok((last_planned + 1, None));
        }
        let expected = last_committed.map_or(0, |c| c + 1);
        if last_planned != expected {
            bail!(
                "checkpoint {} is inconsistent: epochs up to {last_planned} are planned but only \
                 up to {last_committed:?} committed; only the newest epoch may be uncommitted",
                self.checkpoint.root().display()
            );
        }
        let entry = self.offset_entry(last_planned)?;
        tracing::info!(
            pipeline = %self.name,
            epoch = last_planned,
            operator = %entry.operator.digest,
            "re-running epoch planned by an earlier run but never committed"
        );
        Ok((last_planned, Some(last_planned)))
    }

    /// Brings the state to the last committed epoch: undoes the state of an
    /// epoch that never committed, and after a rebuild from a snapshot
    /// re-runs the operator (not the sink) over the epochs since.
    fn recover_state(&mut self, host: &WasmHost, last_committed: Option<u64>) -> Result<()> {
        self.state.roll_back_uncommitted(last_committed)?;
        if let (Opened::Restored { .. }, Some(last)) = (self.state_opened, last_committed) {
            let from = self.state.replay_from()?;
            for epoch in from..=last {
                let entry = self.offset_entry(epoch)?;
                let input = self.read_input(&entry)?;
                let prepared = self.prepare(&entry, without_isolated(&entry, input.batches)?)?;
                let (_, env, _) =
                    self.run_operator(host, &entry, &prepared.batches, prepared.env)?;
                self.commit_state(epoch, env)?;
            }
            tracing::info!(
                pipeline = %self.name,
                epochs = last + 1 - from.min(last + 1),
                "state rebuilt by replaying the operator over the epochs after the snapshot"
            );
        }
        self.state_opened = Opened::Working;
        Ok(())
    }

    fn commit_state(&mut self, epoch: u64, env: EpochEnv) -> Result<()> {
        let changes = operator_state::changes(env);
        self.state
            .commit(epoch, changes)
            .with_context(|| format!("pipeline `{}` epoch {epoch}: committing state", self.name))
    }

    fn read_input(&mut self, entry: &OffsetEntry) -> Result<SourceBatch> {
        self.source.read(&entry.source).with_context(|| {
            format!(
                "pipeline `{}` epoch {}: reading input",
                self.name, entry.epoch
            )
        })
    }

    /// The epoch's view of the state, and its input after event-time
    /// accounting and the host's dedup.
    fn prepare(&self, entry: &OffsetEntry, batches: Vec<RecordBatch>) -> Result<Prepared> {
        let mut state = EpochState::new(self.state.reader(), entry.epoch_time_ms);
        let observed = match &self.event_time {
            Some(et) => et.observe(&batches, entry.watermark_ms)?,
            None => Observed::default(),
        };
        let (batches, dropped) = match &self.dedup {
            Some(d) => d.apply(batches, entry.watermark_ms, &mut state)?,
            None => (batches, Dropped::default()),
        };
        let env = epoch_env(state, &self.state_namespace, entry.watermark_ms);
        Ok(Prepared {
            batches,
            env,
            observed,
            dropped,
        })
    }

    /// Runs the epoch's operator version over every micro-batch, with the
    /// epoch's view of the state; returns the output and the state changes.
    fn run_operator(
        &mut self,
        host: &WasmHost,
        entry: &OffsetEntry,
        batches: &[RecordBatch],
        env: EpochEnv,
    ) -> Result<(Vec<RecordBatch>, EpochEnv, bool)> {
        let run = VersionRun::of(entry);
        match self.run_version(host, &run, batches, env)? {
            Ok(done) => Ok(done),
            Err(cause) => Err(EpochFailed {
                pipeline: self.name.clone(),
                epoch: entry.epoch,
                digest: entry.operator.digest.clone(),
                cause,
            }
            .into()),
        }
    }

    /// Runs one version over the batches ([`LoadedOperator::run`]). The
    /// outer error is the host's (loading the version); the inner one the
    /// operator's.
    #[allow(clippy::type_complexity)]
    fn run_version(
        &mut self,
        host: &WasmHost,
        run: &VersionRun<'_>,
        batches: &[RecordBatch],
        env: EpochEnv,
    ) -> Result<Result<(Vec<RecordBatch>, EpochEnv, bool), OperatorFailure>> {
        let operator = self.operator_for(host, run.digest)?;
        let config = self.config_for(run.config_digest)?;
        let call = EpochCall {
            pipeline: &self.name,
            epoch: run.epoch,
            epoch_time_ms: run.epoch_time_ms,
            limits: self.active.limits,
            config: &config,
            migrate_from: run.migrate_from,
        };
        Ok(operator.run(&call, batches, env))
    }

    /// Runs the shadow candidate over the epoch's input (against the
    /// committed state; its writes are dropped) and compares its output
    /// with the active version's.
    fn run_shadow(
        &mut self,
        host: &WasmHost,
        entry: &OffsetEntry,
        batches: &[RecordBatch],
        outputs: &[RecordBatch],
        active_version: Option<u32>,
    ) -> Option<ShadowReport> {
        let (candidate, key) = self.shadow.clone()?;
        let started = Instant::now();
        let env = epoch_env(
            EpochState::new(self.state.reader(), entry.epoch_time_ms),
            &self.state_namespace,
            entry.watermark_ms,
        );
        let run = VersionRun {
            epoch: entry.epoch,
            epoch_time_ms: entry.epoch_time_ms,
            digest: &candidate.digest,
            config_digest: &candidate.config_digest,
            migrate_from: None,
        };
        let result = self.run_version(host, &run, batches, env);
        let mut report = match result {
            Ok(Ok((theirs, _, _))) => {
                let key = shadow::key_column(key.as_deref(), outputs, &theirs);
                match (shadow::rows_as_json(outputs), shadow::rows_as_json(&theirs)) {
                    (Ok(a), Ok(b)) => shadow::diff(&key, &a, &b),
                    (Err(e), _) | (_, Err(e)) => ShadowReport {
                        error: Some(format!("{e:#}")),
                        ..ShadowReport::default()
                    },
                }
            }
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

    fn offset_entry(&self, epoch: u64) -> Result<OffsetEntry> {
        self.checkpoint
            .offsets
            .get(epoch)?
            .with_context(|| format!("offsets/{epoch} disappeared"))
    }

    /// Writes `offsets/<epoch>` for `range` with the active operator.
    fn write_offsets(&mut self, epoch: u64, range: serde_json::Value) -> Result<()> {
        let migrate_from = self
            .last_digest
            .as_ref()
            .filter(|d| **d != self.active.digest)
            .cloned();
        let entry = OffsetEntry {
            migrate_from,
            format: ENTRY_FORMAT,
            epoch,
            epoch_time_ms: now_ms(),
            source: range,
            operator: OperatorRef {
                digest: self.active.digest.clone(),
                config_digest: self.active.config_digest.clone(),
            },
            config_hash: self.config_hash.clone(),
            watermark_ms: self.event_time.as_ref().and_then(EventTime::watermark),
            isolated: Vec::new(),
        };
        self.checkpoint
            .offsets
            .write(epoch, &entry)
            .with_context(|| format!("writing offsets/{epoch}"))?;
        self.last_digest = Some(entry.operator.digest.clone());
        Ok(())
    }

    fn operator_for(&mut self, host: &WasmHost, digest: &str) -> Result<Arc<LoadedOperator>> {
        if let Some(op) = self.control.loaded(digest) {
            return Ok(op);
        }
        let wasm = self.checkpoint.get_blob(digest)?;
        let op = Arc::new(
            host.load(&wasm, self.grants)
                .with_context(|| format!("loading operator {digest} from the checkpoint"))?,
        );
        self.control.remember(op.clone());
        Ok(op)
    }

    fn config_for(&mut self, digest: &str) -> Result<String> {
        if let Some(c) = self.configs.get(digest) {
            return Ok(c.clone());
        }
        let text = String::from_utf8(self.checkpoint.get_blob(digest)?)
            .with_context(|| format!("operator config {digest} is not UTF-8"))?;
        self.configs.insert(digest.to_string(), text.clone());
        Ok(text)
    }

    /// Runs planned epoch `epoch` (its `offsets/<epoch>` is durable):
    /// read → operator → sink → commit.
    fn execute(
        &mut self,
        host: &WasmHost,
        epoch: u64,
        replay: bool,
        mut phases: Phases,
        backlog: Option<Backlog>,
    ) -> Result<EpochProgress> {
        let started = Instant::now() - phases.plan - phases.wal;
        let started_ms = now_ms() - (phases.plan + phases.wal).as_millis() as i64;
        let since_previous = self.previous_start.map(|p| started.duration_since(p));
        self.previous_start = Some(started);
        let entry = self.offset_entry(epoch)?;

        let t = Instant::now();
        let mut input = self.read_input(&entry)?;
        phases.read = t.elapsed();
        let rows_in = input.rows();
        let micro_batches = input.batches.len();

        let t = Instant::now();
        let ran = self.run_resilient(host, entry, std::mem::take(&mut input.batches))?;
        let Ran {
            entry,
            prepared,
            outputs,
            env,
            migrated,
            isolated,
        } = ran;
        let entry = &entry;
        input.dead_letters.extend(isolated);
        phases.operator = t.elapsed();
        let t = Instant::now();
        let version = self
            .control
            .version_of(&entry.operator.digest, &entry.operator.config_digest);
        let shadow = self.run_shadow(host, entry, &prepared.batches, &outputs, version);
        phases.shadow = t.elapsed();
        let max_event_time_ms = self
            .event_time
            .as_ref()
            .and_then(|et| et.max_through(&prepared.observed));

        let t = Instant::now();
        self.write_dead_letters(epoch, &input.dead_letters)?;
        self.sink.write_epoch(epoch, &outputs).with_context(|| {
            format!(
                "pipeline `{}` epoch {epoch}: writing to the sink",
                self.name
            )
        })?;
        phases.sink = t.elapsed();

        let rows_out = outputs.iter().map(|b| b.num_rows() as u64).sum();
        let t = Instant::now();
        self.commit_state(epoch, env)?;
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
            .with_context(|| format!("writing commits/{epoch}"))?;
        self.source.committed(&entry.source)?;
        self.state.after_commit(epoch)?;
        self.compact_logs(epoch)?;
        if let Some(et) = &mut self.event_time {
            et.restore(max_event_time_ms);
        }
        phases.commit = t.elapsed();

        if let Some(report) = &shadow {
            self.control.shadow_done(report.clone());
        }
        let total = started.elapsed();
        let (state_keys, state_bytes) = self.state.size();
        let progress = EpochProgress {
            pipeline: self.name.clone(),
            epoch,
            started_ms,
            finished_ms: now_ms(),
            epoch_time_ms: entry.epoch_time_ms,
            replay,
            rows_in,
            input_rows_per_sec: rate(rows_in, since_previous.unwrap_or(total)),
            processed_rows_per_sec: rate(rows_in, total),
            rows_out,
            dead_letters: input.dead_letters.len() as u64,
            isolated_rows: entry.isolated.len() as u64,
            late_rows: prepared.observed.late,
            duplicates: prepared.dropped.duplicates,
            watermark_ms: entry.watermark_ms,
            micro_batches,
            operator_digest: entry.operator.digest.clone(),
            operator_version: version,
            migrated,
            shadow,
            range: self.source.describe(&entry.source),
            source: entry.source.clone(),
            backlog,
            state_keys,
            state_bytes,
            trigger_interval_ms: self.trigger.interval_ms(),
            phases,
            total,
        };
        self.control.epoch_done(&progress);
        self.telemetry.epoch_done(&progress);
        Ok(progress)
    }

    /// Every `wal.compact_every` epochs, folds the logs up to `epoch`
    /// (just committed) and deletes entries no start needs: all but the
    /// newest `wal.retain`, keeping those a state rebuild may replay.
    fn compact_logs(&mut self, epoch: u64) -> Result<()> {
        let every = self.wal.compact_every;
        if every == 0 || (epoch + 1) % every != 0 {
            return Ok(());
        }
        let keep_from = (epoch + 1)
            .saturating_sub(self.wal.retain)
            .min(self.state.rebuild_replays_from()?);
        let source = self.source.planned_so_far()?;
        self.checkpoint
            .compact(epoch, source, keep_from)
            .with_context(|| format!("compacting the offset and commit logs at epoch {epoch}"))?;
        fsutil::release_free_memory();
        Ok(())
    }

    fn write_dead_letters(&self, epoch: u64, letters: &[DeadLetter]) -> Result<()> {
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
        fsutil::write_atomic(&path, &bytes)
    }
}

/// Which version to run over an epoch's batches, and how.
struct VersionRun<'a> {
    epoch: u64,
    epoch_time_ms: i64,
    digest: &'a str,
    config_digest: &'a str,
    migrate_from: Option<&'a str>,
}

impl<'a> VersionRun<'a> {
    /// The run an offsets entry records.
    fn of(entry: &'a OffsetEntry) -> Self {
        VersionRun {
            epoch: entry.epoch,
            epoch_time_ms: entry.epoch_time_ms,
            digest: &entry.operator.digest,
            config_digest: &entry.operator.config_digest,
            migrate_from: entry.migrate_from.as_deref(),
        }
    }
}

fn sleep_until(deadline: Instant, stop: &AtomicBool) {
    while !stop.load(Ordering::Relaxed) {
        let now = Instant::now();
        if now >= deadline {
            return;
        }
        std::thread::sleep((deadline - now).min(Duration::from_millis(50)));
    }
}
