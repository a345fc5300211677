//! The versions part: which operator version new epochs are planned with,
//! which one runs in shadow, and how any recorded version is found and run
//! — compiled once ([`OperatorCache`]), its config and artifacts read from
//! the blobs once, and called through the one [`Runner`]. The epoch loop
//! asks this part and never the registry: what the control plane decided
//! is taken up only between epochs ([`Versions::follow_control`]).

use super::instances::Instances;
use super::tasks::{self, TaskRun, Tasks};
use super::ActiveOperator;
use crate::deploy::Control;
use crate::operator_cache::OperatorCache;
use crate::registry::Version;
use crate::runner::{EpochAt, Runner};
use anyhow::{Context, Result};
use arrow_array::RecordBatch;
use std::collections::HashMap;
use std::sync::Arc;
use weir_core::artifacts::Artifacts;
use weir_core::checkpoint::Blobs;
use weir_core::wal::{OffsetEntry, OperatorRef};
use weir_core::Digest;
use weir_host::{EpochEnv, Grants, LoadedOperator, OperatorFailure, RunOutput, WasmHost};

/// Which version to run over an epoch's batches, as which epoch, and as
/// how many tasks.
pub(super) struct VersionRun {
    pub operator: OperatorRef,
    pub at: EpochAt,
    pub tasks: Tasks,
}

impl VersionRun {
    /// The run an offsets entry records (its task split included; the
    /// pipeline's `tasks` add what the source decides, its partitions).
    pub fn of(entry: &OffsetEntry, tasks: &Tasks) -> Self {
        VersionRun {
            operator: entry.operator,
            at: EpochAt::of(entry),
            tasks: tasks.of_entry(entry),
        }
    }
}

/// A version's run over an epoch's batches: the operator's result (the
/// inner error is the operator's), and each task's share of it.
pub(super) struct VersionRan {
    pub result: Result<RunOutput, OperatorFailure>,
    pub tasks: TaskRun,
}

/// The operator versions one pipeline runs.
pub(crate) struct Versions {
    pipeline: String,
    active: ActiveOperator,
    /// The version running in shadow, and the key its rows are matched on.
    shadow: Option<(Version, Option<String>)>,
    /// How every version is run (name and limits): epochs, replays, shadow.
    runner: Runner,
    grants: Grants,
    /// Versions' configs by digest, read from the blobs once.
    configs: HashMap<Digest, String>,
    /// Versions' artifacts by manifest digest, read from the blobs once.
    artifacts: HashMap<Digest, Arc<Artifacts>>,
    /// Where operator swaps come from (admin API, `--watch`).
    control: Arc<Control>,
    /// Compiled versions, shared with `control`.
    operators: Arc<OperatorCache>,
    /// The checkpoint's own blobs, where the control plane's store (a
    /// cluster's shared one) lacks one.
    own_blobs: Blobs,
}

/// What [`Versions`] starts from.
pub(crate) struct VersionsSetup {
    pub active: ActiveOperator,
    pub runner: Runner,
    pub grants: Grants,
    pub configs: HashMap<Digest, String>,
    pub control: Arc<Control>,
    pub own_blobs: Blobs,
}

impl Versions {
    /// The versions of `pipeline`, new epochs planned with `setup.active`.
    pub fn new(pipeline: &str, setup: VersionsSetup) -> Self {
        let operators = setup.control.operators().clone();
        Versions {
            pipeline: pipeline.to_string(),
            active: setup.active,
            shadow: None,
            runner: setup.runner,
            grants: setup.grants,
            configs: setup.configs,
            artifacts: HashMap::new(),
            control: setup.control,
            operators,
            own_blobs: setup.own_blobs,
        }
    }

    /// The control plane the versions follow.
    pub fn control(&self) -> &Arc<Control> {
        &self.control
    }

    /// The version new epochs are planned with.
    pub fn active(&self) -> &ActiveOperator {
        &self.active
    }

    /// The version running in shadow, and the key its rows are matched on.
    pub fn shadow(&self) -> Option<&(Version, Option<String>)> {
        self.shadow.as_ref()
    }

    /// Takes up what the control plane says new epochs run with. Called
    /// between epochs only, so a swap happens at an epoch boundary.
    pub fn follow_control(&mut self) {
        let Some(planned) = self.control.planned() else {
            return;
        };
        let a = &planned.active;
        if a.operator_ref() != self.active.operator_ref() {
            tracing::info!(
                pipeline = %self.pipeline,
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

    /// Runs one version over the batches with [`Runner::run`], divided
    /// among its tasks. The outer error is the host's (loading the
    /// version, a task's thread).
    pub(super) fn run(
        &mut self,
        host: &WasmHost,
        run: &VersionRun,
        batches: &[RecordBatch],
        mut env: EpochEnv,
    ) -> Result<VersionRan> {
        let operator = self.operator_for(host, &run.operator.digest)?;
        let config = self.config_for(&run.operator.config_digest)?;
        // A shadow run's version may have other artifacts than the epoch's.
        env.artifacts = self.artifacts_for(run.operator.artifacts.as_ref())?;
        if run.tasks.count <= 1 {
            return Ok(VersionRan {
                result: self.runner.run(&operator, &config, run.at, batches, env),
                tasks: TaskRun::default(),
            });
        }
        let (result, tasks) = tasks::run_tasks(
            &self.runner,
            &operator,
            &config,
            run.at,
            batches,
            env,
            &run.tasks,
        )?;
        Ok(VersionRan { result, tasks })
    }

    /// A real-time epoch's instances of the version `entry` records, one
    /// per task of `tasks`, over `env`. The outer error is the host's.
    pub(super) fn start_instances(
        &mut self,
        host: &WasmHost,
        entry: &OffsetEntry,
        env: EpochEnv,
        tasks: &Tasks,
    ) -> Result<Result<Instances, OperatorFailure>> {
        let operator = self.operator_for(host, &entry.operator.digest)?;
        let config = self.config_for(&entry.operator.config_digest)?;
        Ok(Instances::start(
            &self.runner,
            &operator,
            &config,
            EpochAt::of(entry),
            env,
            tasks,
        ))
    }

    /// Whether the active version has an `on-timers` hook.
    pub fn active_handles_timers(&mut self, host: &WasmHost) -> Result<bool> {
        let digest = self.active.digest;
        Ok(self.operator_for(host, &digest)?.handles_timers())
    }

    /// The compiled version with component `digest`, loaded from the blobs
    /// the first time.
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
            .or_else(|e| self.own_blobs.get(digest).map_err(|_| e))
    }

    /// The artifacts of the version with manifest `manifest` (none for
    /// `None`), from the blobs the first time.
    pub fn artifacts_for(&mut self, manifest: Option<&Digest>) -> Result<Arc<Artifacts>> {
        let Some(digest) = manifest else {
            return Ok(Default::default());
        };
        if let Some(a) = self.artifacts.get(digest) {
            return Ok(a.clone());
        }
        let loaded = Arc::new(
            Artifacts::load(self.control.blobs(), Some(digest))
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
