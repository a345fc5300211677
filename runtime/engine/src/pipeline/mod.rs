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
mod input;
mod instances;
mod keyed;
mod log;
mod realtime;
mod recovery;
mod replay;
mod report;
mod resilience;
mod retry;
mod run;
mod shadow_hook;
mod sinks;
mod tasks;

use epoch::{EntryKind, Planned};
pub(crate) use input::InputPrep;
pub(crate) use keyed::KeyedState;
pub(crate) use log::EpochLog;
pub use replay::EpochReplay;
pub(crate) use report::Reporter;
use retry::{Closing, Resume};
use run::VersionRun;
pub(crate) use sinks::{PipelineSinks, WriterIdentity};
pub use tasks::Tasks;

use crate::config::{FailurePolicy, OnError, TriggerConfig};
use crate::dedup::Dropped;
use crate::event_time::Observed;
use crate::observe::Telemetry;
use crate::versions::{Control, Versions};
use anyhow::{Context, Result};
use arrow_array::RecordBatch;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use weir_core::backoff::Backoff;
use weir_core::checkpoint::Checkpoint;
use weir_core::progress::{EpochProgress, Phases};
use weir_core::sink::Fenced;
use weir_core::source::DynSource;
use weir_core::wal::OffsetEntry;
use weir_core::Digest;
use weir_host::{EpochEnv, OperatorFailure, RunOutput, WasmHost};

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

/// A pipeline bound to its checkpoint, source, operator and sink: the
/// epoch loop over parts that each own one concern. Between phases and
/// between epochs, state moves in the epoch values (the `epoch` module) or through
/// a part's methods, never through a field one phase sets for another.
pub struct Pipeline {
    pub(crate) name: String,
    pub(crate) trigger: TriggerConfig,
    /// How epochs are divided among tasks ([`tasks`]).
    pub(crate) tasks: Tasks,
    /// What operator failures do (see [`resilience`]).
    pub(crate) failure: FailurePolicy,
    /// The source partition this pipeline runs, on a cluster's worker.
    pub(crate) partition: Option<i32>,
    pub(crate) source: Box<dyn DynSource>,
    /// Every sink's writers, one per task ([`sinks`]).
    pub(crate) sinks: PipelineSinks,
    /// The offset, commit and part logs, and the planning cursor ([`log`]).
    pub(crate) log: EpochLog,
    /// The versions that run ([`crate::versions::Versions`]).
    pub(crate) versions: Versions,
    /// Event time, dedup and reference tables ([`input`]).
    pub(crate) input: InputPrep,
    /// The operator's keyed state ([`keyed`]).
    pub(crate) state: KeyedState,
    /// Progress records and metrics ([`report`]).
    pub(crate) reporter: Reporter,
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
        self.log.checkpoint()
    }

    /// The control plane: deploy, roll back and shadow operator versions
    /// while [`Pipeline::run`] runs (the admin API and `--watch` use it).
    pub fn control(&self) -> Arc<Control> {
        self.versions.control().clone()
    }

    /// Progress records, metrics and the backlog verdict, for the admin API
    /// and the dashboard.
    pub fn telemetry(&self) -> Arc<Telemetry> {
        self.reporter.telemetry().clone()
    }

    /// How the pipeline's epochs are divided among tasks.
    pub fn tasks(&self) -> &Tasks {
        &self.tasks
    }

    /// Takes ownership of the sink's output: a writer that held it before
    /// (another worker, a zombie) has its later writes refused
    /// ([`weir_core::sink::Sink::fence`]). A cluster worker calls it before
    /// running a partition it was just assigned.
    pub fn fence(&mut self) -> Result<()> {
        self.sinks.fence()
    }

    /// Runs epochs according to the trigger until the trigger is done or
    /// `stop` is set (checked between epochs). `on_epoch` sees each epoch's
    /// progress as it finishes. A continuous pipeline retries a failed
    /// epoch with backoff from where it can be retried (the `retry` module).
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
            self.versions.follow_control();
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
                    self.reporter.epoch_failed();
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
        let planned = match self.next_epoch(host, next, pending) {
            Ok(Some(planned)) => planned,
            Ok(None) => return Ok(Step::Idle),
            Err(cause) => return self.failed_before_sink(next, cause),
        };
        let epoch = planned.epoch;
        match self.run_epoch(host, stop, planned) {
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
    fn next_epoch(
        &mut self,
        host: &WasmHost,
        next: u64,
        pending: Option<u64>,
    ) -> Result<Option<Planned>> {
        if let Some(epoch) = pending {
            return Ok(Some(Planned::replay(epoch)));
        }
        if let Some(range) = self.log.take_carried() {
            let mut phases = Phases::default();
            epoch::timed(&mut phases.wal, || {
                self.write_offsets(next, range, EntryKind::MicroBatch)
            })?;
            return Ok(Some(Planned::logged(next, phases, None)));
        }
        if self.real_time().is_some() {
            return Ok(Some(Planned::live(next)));
        }
        if let Some(planned) = self.plan(next)? {
            return Ok(Some(planned));
        }
        if !self.timers_due_without_data(host)? {
            return Ok(None);
        }
        let mut phases = Phases::default();
        epoch::timed(&mut phases.wal, || {
            self.write_offsets(next, serde_json::Value::Null, EntryKind::NoData)
        })?;
        Ok(Some(Planned::logged(next, phases, None)))
    }

    /// Whether an epoch without input would fire timers: the next epoch's
    /// watermark is past the last one's, the active version handles
    /// timers, and the earliest committed timer is at or before it. As
    /// Spark runs a no-data micro-batch when the watermark moved, so that
    /// windows close without waiting for more input (and at the end of an
    /// `available-now` run).
    fn timers_due_without_data(&mut self, host: &WasmHost) -> Result<bool> {
        let Some(watermark) = self.input.watermark() else {
            return Ok(false);
        };
        if self
            .log
            .last_watermark()
            .is_some_and(|last| last >= watermark)
        {
            return Ok(false);
        }
        if !self.versions.active_handles_timers(host)? {
            return Ok(false);
        }
        let earliest = self.state.earliest_timer()?;
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

    /// The operator's environment for epoch `entry` over `state`: the
    /// state under the operator's namespace, the watermarks, and the
    /// artifacts and reference tables the epoch recorded.
    fn env_for(
        &mut self,
        state: weir_state::epoch::EpochState,
        entry: &OffsetEntry,
    ) -> Result<EpochEnv> {
        let mut env = crate::operator_state::epoch_env(state, self.state.namespace(), entry);
        env.artifacts = self
            .versions
            .artifacts_for(entry.operator.artifacts.as_ref())?;
        env.lookups = self.input.tables_for(entry, self.log.checkpoint())?;
        Ok(env)
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
    fn run_epoch(&mut self, host: &WasmHost, stop: &AtomicBool, p: Planned) -> Result<Closing> {
        if !p.logged {
            let interval = self.real_time().unwrap_or_default();
            return self.execute_real_time(host, p.epoch, false, interval, stop);
        }
        if p.replay && self.log.entry(p.epoch)?.real_time {
            return self.execute_real_time(host, p.epoch, true, Duration::ZERO, stop);
        }
        self.execute(host, p)
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
    /// epoch's view of the state; returns the output and the state changes
    /// (a state rebuild and `weir explain` run epochs so, with no sink).
    fn run_operator(
        &mut self,
        host: &WasmHost,
        entry: &OffsetEntry,
        batches: &[RecordBatch],
        env: EpochEnv,
    ) -> Result<RunOutput> {
        let run = VersionRun::of(entry, &self.tasks);
        self.run_version(host, &run, batches, env)?
            .result
            .map_err(|cause| self.epoch_failed(entry, cause))
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
