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

mod blob_gc;
mod epoch;
pub mod explain;
mod instances;
mod realtime;
mod recovery;
mod resilience;
mod retry;
mod shadow_hook;
mod sinks;
mod tasks;

use retry::{Closing, Resume};
pub(crate) use sinks::{PipelineSinks, WriterIdentity};
use tasks::TaskRun;
pub use tasks::Tasks;

use crate::config::{FailurePolicy, OnError, TriggerConfig, WalConfig};
use crate::dedup::{Dedup, Dropped};
use crate::deploy::Control;
use crate::event_time::{EventTime, Observed};
use crate::observe::Telemetry;
use crate::operator_cache::OperatorCache;
use crate::registry::Version;
use crate::runner::{EpochAt, Runner};
use anyhow::{Context, Result};
use arrow_array::RecordBatch;
use epoch::EntryKind;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use weir_core::backoff::Backoff;
use weir_core::checkpoint::Checkpoint;
use weir_core::latency::Histogram;
use weir_core::progress::{EpochProgress, Phases};
use weir_core::sink::Fenced;
use weir_core::source::DynSource;
use weir_core::wal::{OffsetEntry, OperatorRef};
use weir_core::Digest;
use weir_host::{EpochEnv, LoadedOperator, OperatorFailure, RunOutput, WasmHost};
use weir_state::{Opened, StateStore, TimerSpace};

/// Longest wait between attempts at an epoch that cannot proceed.
const EPOCH_RETRY_MAX: Duration = Duration::from_secs(30);

/// An operator call failed during an epoch. Carries what an on-call engineer
/// needs: which pipeline, which epoch, which operator version, and why.
#[derive(Debug, thiserror::Error)]
#[error("pipeline `{pipeline}` epoch {epoch}: operator {digest} {cause}{}", note_suffix(.note))]
pub struct EpochFailed {
    pub pipeline: String,
    pub epoch: u64,
    pub digest: Digest,
    /// Shown in the message, not chained as its source: `{:#}` would
    /// print it twice.
    pub cause: OperatorFailure,
    /// Why no failure rule could keep the epoch going, after the cause
    /// (the cause first: it is what the reader needs to fix).
    pub note: Option<String>,
}

fn note_suffix(note: &Option<String>) -> String {
    note.as_ref().map_or_else(String::new, |n| format!(". {n}"))
}

/// The state store failed while the operator ran (a read hit an I/O error
/// or corruption): the epoch fails as a storage fault, never as the
/// operator's or a record's, so no version is rolled back and no record
/// is set aside for it.
#[derive(Debug, thiserror::Error)]
#[error(
    "pipeline `{pipeline}` epoch {epoch}: storage fault, not the operator's or a record's: \
     {fault}. The epoch is retried; if the state store reports corruption, stop the pipeline \
     and run `weir checkpoint repair` to rebuild the state from its newest good snapshot"
)]
pub struct StorageFault {
    pub pipeline: String,
    pub epoch: u64,
    pub fault: String,
}

/// The operator version new epochs are planned with.
#[derive(Debug, Clone)]
pub struct ActiveOperator {
    /// Registry number (see [`crate::registry`]).
    pub version: u32,
    pub digest: Digest,
    pub config_digest: Digest,
    /// Its artifact manifest, if it has artifacts.
    pub artifacts: Option<Digest>,
}

impl ActiveOperator {
    /// What `offsets/N` records of the epochs it runs.
    pub fn operator_ref(&self) -> OperatorRef {
        OperatorRef {
            digest: self.digest,
            config_digest: self.config_digest,
            artifacts: self.artifacts,
        }
    }
}

/// One attempt at an epoch, as the run loop hands it on.
struct Attempt {
    epoch: u64,
    /// Planned by an earlier run or attempt: run again exactly as recorded.
    replay: bool,
    /// `offsets/<epoch>` is written (all but a live real-time epoch, which
    /// plans as it runs).
    planned: bool,
    /// Planning's share of the phases (micro-batch epochs planned just now).
    phases: Phases,
    backlog: Option<weir_core::source::Backlog>,
}

/// What one turn of the run loop came to.
enum Step {
    /// No new data and no timer due.
    Idle,
    Committed(Box<EpochProgress>),
    /// Epoch `epoch` failed; `resume` says where its retry starts.
    Failed {
        epoch: u64,
        resume: Resume,
        cause: anyhow::Error,
    },
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

impl RunSummary {
    /// Counts a committed epoch.
    fn add(&mut self, p: &EpochProgress) {
        self.epochs += 1;
        self.replayed += u64::from(p.replay);
        self.rows_in += p.rows_in;
        self.rows_out += p.rows_out;
        self.dead_letters += p.dead_letters;
    }
}

/// A pipeline bound to its checkpoint, source, operator and sink.
pub struct Pipeline {
    pub(crate) name: String,
    pub(crate) checkpoint: Checkpoint,
    pub(crate) source: Box<dyn DynSource>,
    /// Every sink's writers, one per task ([`sinks`]).
    pub(crate) sinks: PipelineSinks,
    pub(crate) trigger: TriggerConfig,
    pub(crate) active: ActiveOperator,
    /// How every version is run (name and limits): epochs, replays, shadow.
    pub(crate) runner: Runner,
    pub(crate) grants: weir_host::Grants,
    pub(crate) dead_letter_dir: PathBuf,
    pub(crate) configs: HashMap<Digest, String>,
    /// Versions' artifacts by manifest digest, read from the blobs once.
    pub(crate) artifacts: HashMap<Digest, Arc<weir_core::artifacts::Artifacts>>,
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
    /// The reference tables and their versions ([`crate::lookups`]).
    pub(crate) lookups: crate::lookups::LookupSet,
    /// Lookup refreshes that failed since the last progress record.
    pub(crate) lookup_failures: u64,
    /// Where operator swaps come from (admin API, `--watch`).
    pub(crate) control: Arc<Control>,
    /// Compiled versions, shared with `control`.
    pub(crate) operators: Arc<OperatorCache>,
    /// Component digest of the newest planned epoch: a different active
    /// digest at planning time means the next epoch is the first of a new
    /// version and runs its `migrate` hook.
    pub(crate) last_digest: Option<Digest>,
    /// Watermark of the newest planned epoch: a higher one for the next
    /// epoch may fire timers even without new data.
    pub(crate) last_watermark: Option<i64>,
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
    /// A range the source planned that no `offsets/N` holds yet: a
    /// real-time part the operator failed on live ([`weir_core::parts`]),
    /// or a range whose `offsets/N` write failed. It runs next, as a
    /// micro-batch epoch of its own.
    pub(crate) carried: Option<serde_json::Value>,
    /// A real-time part the operator failed on live whose deferral could
    /// not be written (epoch, part): the retry writes it before replaying,
    /// instead of running the part again as an ordinary one.
    pub(crate) defer_pending: Option<(u64, u32)>,
    /// How epochs are divided among tasks ([`tasks`]).
    pub(crate) tasks: Tasks,
    /// What the last operator run's tasks did: their shares for the
    /// progress record and their outputs for the sink writers.
    pub(crate) task_run: TaskRun,
    /// The source partition this pipeline runs, on a cluster's worker.
    pub(crate) partition: Option<i32>,
    /// Whether the run said that its timers cannot fire (no event time).
    pub(crate) warned_timers: bool,
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

    /// Takes ownership of the sink's output: a writer that held it before
    /// (another worker, a zombie) has its later writes refused
    /// ([`weir_core::sink::Sink::fence`]). A cluster worker calls it before
    /// running a partition it was just assigned.
    pub fn fence(&mut self) -> Result<()> {
        self.sinks.fence()
    }

    /// Takes up what the control plane says new epochs run with. Called
    /// between epochs only, so a swap happens at an epoch boundary.
    fn follow_control(&mut self) {
        let Some(planned) = self.control.planned() else {
            return;
        };
        let a = &planned.active;
        if a.operator_ref() != self.active.operator_ref() {
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
                digest: a.digest,
                config_digest: a.config_digest,
                artifacts: a.artifacts,
            };
        }
        self.shadow = planned.shadow;
    }

    /// Runs epochs according to the trigger until the trigger is done or
    /// `stop` is set (checked between epochs). `on_epoch` sees each epoch's
    /// progress as it finishes. A continuous pipeline retries a failed
    /// epoch with backoff from where it can be retried ([`retry`]).
    pub fn run(
        &mut self,
        host: &WasmHost,
        stop: &AtomicBool,
        on_epoch: &mut dyn FnMut(&EpochProgress),
    ) -> Result<RunSummary> {
        let started = Instant::now();
        let mut summary = RunSummary::default();
        let (mut next, pending) = self.recover(host)?;
        let mut resume = pending.map(Resume::Rerun);
        let mut retry: Option<Backoff> = None;
        loop {
            if stop.load(Ordering::Relaxed) {
                tracing::info!(pipeline = %self.name, "stop requested; last epoch committed");
                break;
            }
            self.follow_control();
            let trigger_start = Instant::now();
            let progress = match self.step(host, stop, next, resume.take())? {
                Step::Idle => {
                    if matches!(
                        self.trigger,
                        TriggerConfig::Once | TriggerConfig::AvailableNow
                    ) {
                        break;
                    }
                    self.wait_for_trigger(trigger_start, stop);
                    continue;
                }
                Step::Committed(progress) => progress,
                Step::Failed {
                    epoch,
                    resume: then,
                    cause,
                } => {
                    self.telemetry.epoch_failed();
                    if !self.retries_failed_epochs() || lost_ownership(&cause) {
                        return Err(cause);
                    }
                    self.wait_to_retry(epoch, &cause, &mut retry, stop);
                    resume = Some(then);
                    continue;
                }
            };
            if let Some(b) = retry.take() {
                tracing::info!(
                    pipeline = %self.name,
                    epoch = progress.epoch,
                    "epoch committed after {} failed attempts",
                    b.attempts()
                );
            }
            summary.add(&progress);
            on_epoch(&progress);
            next = progress.epoch + 1;
            if self.real_time().is_some()
                && self.source.is_exhausted()
                && !self.timers_due_without_data(host)?
            {
                tracing::info!(
                    pipeline = %self.name,
                    "the source has nothing more; every record is committed"
                );
                break;
            }
            if self.trigger == TriggerConfig::Once {
                break;
            }
            self.wait_for_trigger(trigger_start, stop);
        }
        summary.elapsed = started.elapsed();
        Ok(summary)
    }

    /// One attempt at the next epoch, or at finishing or re-running the
    /// one that failed (`resume`). The outer error is one no retry can be
    /// placed for (the checkpoint cannot be read to tell).
    fn step(
        &mut self,
        host: &WasmHost,
        stop: &AtomicBool,
        next: u64,
        resume: Option<Resume>,
    ) -> Result<Step> {
        let pending = match resume {
            Some(Resume::Finish(closing)) => return Ok(self.close_step(*closing)),
            Some(Resume::Rerun(epoch)) => Some(epoch),
            Some(Resume::Plan) | None => None,
        };
        let attempt = match self.next_attempt(host, next, pending) {
            Ok(Some(attempt)) => attempt,
            Ok(None) => return Ok(Step::Idle),
            Err(cause) => return self.failed_before_sink(next, cause),
        };
        let epoch = attempt.epoch;
        match self.run_epoch(host, stop, attempt) {
            Ok(closing) => Ok(self.close_step(closing)),
            Err(cause) => self.failed_before_sink(epoch, cause),
        }
    }

    fn close_step(&mut self, closing: Closing) -> Step {
        let epoch = closing.entry.epoch;
        match self.close(closing) {
            Ok(progress) => Step::Committed(Box::new(progress)),
            Err(retry::Unfinished { closing, cause }) => Step::Failed {
                epoch,
                resume: Resume::Finish(closing),
                cause,
            },
        }
    }

    fn failed_before_sink(&mut self, epoch: u64, cause: anyhow::Error) -> Result<Step> {
        let resume = self
            .resume_before_sink(epoch)
            .with_context(|| format!("after epoch {epoch} failed: {cause:#}"))?;
        Ok(Step::Failed {
            epoch,
            resume,
            cause,
        })
    }

    /// The epoch to run next: the one planned but not committed (`pending`),
    /// a real-time part deferred by the epoch before (as a micro-batch
    /// epoch), a real-time epoch (which plans as it runs), a newly planned
    /// one, or one without input whose watermark fires timers (`None` if
    /// there is neither new data nor a timer due).
    fn next_attempt(
        &mut self,
        host: &WasmHost,
        next: u64,
        pending: Option<u64>,
    ) -> Result<Option<Attempt>> {
        let fresh = |epoch, phases, backlog| Attempt {
            epoch,
            replay: false,
            planned: true,
            phases,
            backlog,
        };
        if let Some(epoch) = pending {
            return Ok(Some(Attempt {
                replay: true,
                ..fresh(epoch, Phases::default(), None)
            }));
        }
        if let Some(range) = self.carried.take() {
            let mut phases = Phases::default();
            epoch::timed(&mut phases.wal, || {
                self.write_offsets(next, range, EntryKind::MicroBatch)
            })?;
            return Ok(Some(fresh(next, phases, None)));
        }
        if self.real_time().is_some() {
            return Ok(Some(Attempt {
                planned: false,
                ..fresh(next, Phases::default(), None)
            }));
        }
        if let Some((phases, backlog)) = self.plan(next)? {
            return Ok(Some(fresh(next, phases, backlog)));
        }
        if !self.timers_due_without_data(host)? {
            return Ok(None);
        }
        let mut phases = Phases::default();
        epoch::timed(&mut phases.wal, || {
            self.write_offsets(next, serde_json::Value::Null, EntryKind::NoData)
        })?;
        Ok(Some(fresh(next, phases, None)))
    }

    /// Whether an epoch without input would fire timers: the next epoch's
    /// watermark is past the last one's, the active version handles
    /// timers, and the earliest committed timer is at or before it. As
    /// Spark runs a no-data micro-batch when the watermark moved, so that
    /// windows close without waiting for more input (and at the end of an
    /// `available-now` run).
    fn timers_due_without_data(&mut self, host: &WasmHost) -> Result<bool> {
        let Some(watermark) = self.event_time.as_ref().and_then(EventTime::watermark) else {
            return Ok(false);
        };
        if self.last_watermark.is_some_and(|last| last >= watermark) {
            return Ok(false);
        }
        let digest = self.active.digest;
        if !self.operator_for(host, &digest)?.handles_timers() {
            return Ok(false);
        }
        let earliest = TimerSpace::of(&self.state_namespace).earliest(&self.state.reader())?;
        Ok(earliest.is_some_and(|at| at <= watermark))
    }

    /// Sleeps until the processing-time trigger is due again (real-time and
    /// available-now runs go on at once).
    fn wait_for_trigger(&self, trigger_start: Instant, stop: &AtomicBool) {
        if let TriggerConfig::ProcessingTime { interval } = self.trigger {
            sleep_until(trigger_start + interval, stop);
        }
    }

    /// Logs a failed attempt at `epoch` and waits the next backoff delay.
    fn wait_to_retry(
        &self,
        epoch: u64,
        e: &anyhow::Error,
        retry: &mut Option<Backoff>,
        stop: &AtomicBool,
    ) {
        let backoff =
            retry.get_or_insert_with(|| Backoff::new(Duration::from_secs(1), EPOCH_RETRY_MAX));
        let delay = backoff.next_delay();
        tracing::error!(
            pipeline = %self.name,
            epoch,
            attempt = backoff.attempts(),
            "epoch cannot proceed: {e:#}; retrying in {delay:.1?}, nothing is \
             skipped. Fix the cause, or deploy or roll back the operator \
             (`weir rollback`): the retry runs the active version."
        );
        sleep_until(Instant::now() + delay, stop);
    }

    /// `epoch_env` with the reference tables the epoch recorded.
    pub(crate) fn env_for(
        &mut self,
        state: weir_state::epoch::EpochState,
        entry: &OffsetEntry,
    ) -> Result<EpochEnv> {
        let mut env = crate::operator_state::epoch_env(state, &self.state_namespace, entry);
        env.artifacts = self.artifacts_for(entry.operator.artifacts.as_ref())?;
        env.lookups = self
            .lookups
            .for_epoch(&entry.lookups, &self.checkpoint)
            .with_context(|| format!("epoch {}'s lookup tables", entry.epoch))?;
        Ok(env)
    }

    /// Adds the event→emit latency of `outputs`, just acknowledged by the
    /// sink, to `into`: now minus each row's event time, for output rows
    /// that carry the `[event_time]` column (int64 Unix ms or a timestamp).
    fn measure_latency(&self, outputs: &[RecordBatch], into: &mut Histogram) {
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

    /// The checkpoint interval, in real-time mode.
    fn real_time(&self) -> Option<Duration> {
        match self.trigger {
            TriggerConfig::RealTime {
                checkpoint_interval,
            } => Some(checkpoint_interval),
            _ => None,
        }
    }

    /// Runs an epoch in the mode it was planned in: a replay of a real-time
    /// epoch is real-time even if the pipeline file changed mode, and a
    /// deferred real-time part runs as a micro-batch epoch.
    fn run_epoch(&mut self, host: &WasmHost, stop: &AtomicBool, a: Attempt) -> Result<Closing> {
        if !a.planned {
            let interval = self.real_time().unwrap_or_default();
            return self.execute_real_time(host, a.epoch, false, interval, stop);
        }
        if a.replay && self.offset_entry(a.epoch)?.real_time {
            return self.execute_real_time(host, a.epoch, true, Duration::ZERO, stop);
        }
        self.execute(host, a.epoch, a.replay, a.phases, a.backlog)
    }

    /// Whether a failed epoch is retried (with backoff, the admin API up)
    /// rather than ending `run`: for continuous pipelines that do not ask
    /// to stop on operator errors. A `once` or `available-now` run is a
    /// batch job and fails visibly instead.
    fn retries_failed_epochs(&self) -> bool {
        self.failure.on_error == OnError::DeadLetter
            && matches!(
                self.trigger,
                TriggerConfig::ProcessingTime { .. } | TriggerConfig::RealTime { .. }
            )
    }

    /// Runs the epoch's operator version over every micro-batch, with the
    /// epoch's view of the state; returns the output and the state changes.
    fn run_operator(
        &mut self,
        host: &WasmHost,
        entry: &OffsetEntry,
        batches: &[RecordBatch],
        env: EpochEnv,
    ) -> Result<RunOutput> {
        let run = VersionRun::of(entry, &self.tasks);
        self.run_version(host, &run, batches, env)?
            .map_err(|cause| self.epoch_failed(entry, cause))
    }

    /// Runs one version over the batches with [`Runner::run`]. The outer
    /// error is the host's (loading the version); the inner one the
    /// operator's.
    fn run_version(
        &mut self,
        host: &WasmHost,
        run: &VersionRun,
        batches: &[RecordBatch],
        env: EpochEnv,
    ) -> Result<Result<RunOutput, OperatorFailure>> {
        let operator = self.operator_for(host, &run.operator.digest)?;
        let config = self.config_for(&run.operator.config_digest)?;
        // A shadow run's version may have other artifacts than the epoch's.
        let mut env = env;
        env.artifacts = self.artifacts_for(run.operator.artifacts.as_ref())?;
        if run.tasks.count <= 1 {
            self.task_run = TaskRun::default();
            return Ok(self.runner.run(&operator, &config, run.at, batches, env));
        }
        let (out, report) = tasks::run_tasks(
            &self.runner,
            &operator,
            &config,
            run.at,
            batches,
            env,
            &run.tasks,
        )?;
        self.task_run = report;
        Ok(out)
    }

    /// How the pipeline's epochs are divided among tasks.
    pub fn tasks(&self) -> &Tasks {
        &self.tasks
    }

    fn operator_for(&mut self, host: &WasmHost, digest: &Digest) -> Result<Arc<LoadedOperator>> {
        if let Some(op) = self.operators.get(digest) {
            return Ok(op);
        }
        let wasm = self.blob(digest)?;
        let op = Arc::new(
            host.load(&wasm, self.grants)
                .with_context(|| format!("loading operator {digest} from the checkpoint"))?,
        );
        self.operators.insert(op.clone());
        Ok(op)
    }

    /// A blob from the control plane's store (a cluster's shared one), or
    /// the checkpoint's own.
    fn blob(&self, digest: &Digest) -> Result<Vec<u8>> {
        self.control
            .blobs()
            .get(digest)
            .or_else(|e| self.checkpoint.get_blob(digest).map_err(|_| e))
    }

    /// The artifacts of the version with manifest `manifest` (none for
    /// `None`), from the blobs the first time.
    fn artifacts_for(
        &mut self,
        manifest: Option<&Digest>,
    ) -> Result<Arc<weir_core::artifacts::Artifacts>> {
        let Some(digest) = manifest else {
            return Ok(Default::default());
        };
        if let Some(a) = self.artifacts.get(digest) {
            return Ok(a.clone());
        }
        let loaded = Arc::new(
            weir_core::artifacts::Artifacts::load(self.control.blobs(), Some(digest))
                .with_context(|| format!("the operator's artifacts ({digest})"))?,
        );
        self.artifacts.insert(*digest, loaded.clone());
        Ok(loaded)
    }

    fn config_for(&mut self, digest: &Digest) -> Result<String> {
        if let Some(c) = self.configs.get(digest) {
            return Ok(c.clone());
        }
        let text = String::from_utf8(self.blob(digest)?)
            .with_context(|| format!("operator config {digest} is not UTF-8"))?;
        self.configs.insert(*digest, text.clone());
        Ok(text)
    }
}

/// Which version to run over an epoch's batches, as which epoch, and as
/// how many tasks.
struct VersionRun {
    operator: OperatorRef,
    at: EpochAt,
    tasks: Tasks,
}

impl VersionRun {
    /// The run an offsets entry records (its task split included; the
    /// pipeline's `tasks` add what the source decides, its partitions).
    fn of(entry: &OffsetEntry, tasks: &Tasks) -> Self {
        VersionRun {
            operator: entry.operator,
            at: EpochAt::of(entry),
            tasks: tasks.of_entry(entry),
        }
    }
}

/// Whether `e` says another writer holds this pipeline's checkpoint or
/// output: a newer owner fenced the sink ([`Fenced`]), or wrote an epoch's
/// entry first ([`weir_core::wal::EntryTaken`]). Retrying cannot help;
/// [`Pipeline::run`] returns it at once.
pub fn lost_ownership(e: &anyhow::Error) -> bool {
    Fenced::is_in(e) || e.chain().any(|c| c.is::<weir_core::wal::EntryTaken>())
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
