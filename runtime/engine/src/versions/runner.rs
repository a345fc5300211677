//! The one way the engine runs an operator version. The epoch loop, shadow
//! runs, the deploy checks (`init`, golden files) and `weir operator test`
//! all go through a [`Runner`], so a version is called the same way wherever
//! it runs: the same pipeline name in its logs, the same limits, the same
//! epoch context. Which compiled version and which config to run is the
//! caller's business ([`crate::versions::cache`], the registry).

use arrow_array::RecordBatch;
use weir_core::wal::OffsetEntry;
use weir_core::Digest;
use weir_host::{
    EpochCall, EpochEnv, Limits, LoadedOperator, OperatorFailure, OperatorInstance, RunOutput,
};

/// Runs operator versions for one pipeline.
#[derive(Debug, Clone)]
pub struct Runner {
    pipeline: String,
    limits: Limits,
}

/// The epoch a run belongs to: what the guest's epoch context shows.
#[derive(Debug, Clone, Copy)]
pub struct EpochAt {
    pub epoch: u64,
    /// The only clock the guest sees (Unix ms).
    pub epoch_time_ms: i64,
    /// The previous component, on the first epoch after a swap.
    pub migrate_from: Option<Digest>,
}

impl EpochAt {
    /// Outside any epoch: deploy checks and `weir operator test` run as
    /// epoch 0 at time 0, so their output does not depend on when they ran.
    pub const OUTSIDE: EpochAt = EpochAt {
        epoch: 0,
        epoch_time_ms: 0,
        migrate_from: None,
    };

    /// The epoch an `offsets/N` entry records (replays see the same).
    pub fn of(entry: &OffsetEntry) -> Self {
        EpochAt {
            epoch: entry.epoch,
            epoch_time_ms: entry.epoch_time_ms,
            migrate_from: entry.migrate_from,
        }
    }
}

impl Runner {
    /// A runner for `pipeline` whose calls get `limits`.
    pub fn new(pipeline: impl Into<String>, limits: Limits) -> Self {
        Runner {
            pipeline: pipeline.into(),
            limits,
        }
    }

    /// The pipeline's name, as operators' logs are tagged.
    pub fn pipeline(&self) -> &str {
        &self.pipeline
    }

    /// Instantiates `operator` and runs its `init` with `config` (what it
    /// writes to state stays in `env`, which the caller drops or commits).
    pub fn init(
        &self,
        operator: &LoadedOperator,
        config: &str,
        env: EpochEnv,
    ) -> Result<(), OperatorFailure> {
        let at = EpochAt::OUTSIDE;
        operator
            .instantiate(&self.pipeline, at.epoch, self.limits, config, env)
            .map(drop)
    }

    /// Runs `operator` over `batches` as epoch `at` ([`LoadedOperator::run`]).
    pub fn run(
        &self,
        operator: &LoadedOperator,
        config: &str,
        at: EpochAt,
        batches: &[RecordBatch],
        env: EpochEnv,
    ) -> Result<RunOutput, OperatorFailure> {
        let call = EpochCall {
            pipeline: &self.pipeline,
            epoch: at.epoch,
            epoch_time_ms: at.epoch_time_ms,
            limits: self.limits,
            config,
            migrate_from: at.migrate_from,
        };
        operator.run(&call, batches, env)
    }

    /// Starts `operator` for a real-time epoch: one instance for all of the
    /// epoch's batches, which arrive one at a time ([`Running::process`]).
    /// Runs `migrate` first on the first epoch after a swap.
    pub fn start(
        &self,
        operator: &LoadedOperator,
        config: &str,
        at: EpochAt,
        env: EpochEnv,
    ) -> Result<Running, OperatorFailure> {
        let mut instance =
            operator.instantiate(&self.pipeline, at.epoch, self.limits, config, env)?;
        let migrated = match at.migrate_from {
            Some(from) => instance.migrate(&from.to_string())?,
            None => false,
        };
        Ok(Running {
            pipeline: self.pipeline.clone(),
            at,
            instance,
            migrated,
        })
    }
}

/// An operator instance kept for the length of a real-time epoch.
pub struct Running {
    pipeline: String,
    at: EpochAt,
    instance: OperatorInstance,
    /// Whether `migrate` ran when it started.
    pub migrated: bool,
}

impl Running {
    /// Runs `process` over one batch: its output batches with rows (the
    /// returned ones, then those emitted to named outputs).
    pub fn process(&mut self, batch: RecordBatch) -> Result<Vec<RecordBatch>, OperatorFailure> {
        self.instance
            .process(&self.pipeline, self.at.epoch, self.at.epoch_time_ms, batch)
    }

    /// Fires the timers the epoch's watermark reached (at the epoch's
    /// close, after every part), returning `on-timers`' output.
    pub fn fire_timers(&mut self) -> Result<Vec<RecordBatch>, OperatorFailure> {
        self.instance
            .fire_timers(&self.pipeline, self.at.epoch, self.at.epoch_time_ms)
    }

    /// The environment between batches (the host's dedup writes to its
    /// state).
    pub fn env_mut(&mut self) -> &mut EpochEnv {
        self.instance.env_mut()
    }

    /// Ends the instance; its environment holds the epoch's state changes.
    pub fn finish(self) -> EpochEnv {
        self.instance.into_env()
    }
}
