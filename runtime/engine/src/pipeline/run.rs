//! Running a version over an epoch's batches: the version comes from the
//! versions seam ([`crate::versions::Versions::load`]), the epoch's rows
//! are divided among its tasks ([`super::tasks`]) or, in real-time mode,
//! among the epoch's instances ([`super::instances`]).

use super::instances::Instances;
use super::tasks::{self, TaskRun, Tasks};
use super::Pipeline;
use crate::versions::runner::EpochAt;
use anyhow::Result;
use arrow_array::RecordBatch;
use weir_core::wal::{OffsetEntry, OperatorRef};
use weir_host::{EpochEnv, OperatorFailure, RunOutput, WasmHost};

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
/// error is the operator's), and each task's share of it.
pub(super) struct VersionRan {
    pub result: Result<RunOutput, OperatorFailure>,
    pub tasks: TaskRun,
}

impl Pipeline {
    /// Runs one version over the batches, divided among its tasks. The
    /// error is the host's (loading the version, a task's thread).
    pub(super) fn run_version(
        &mut self,
        host: &WasmHost,
        run: &VersionRun,
        batches: &[RecordBatch],
        mut env: EpochEnv,
    ) -> Result<VersionRan> {
        let loaded = self.versions.load(host, &run.operator)?;
        // A shadow run's version may have other artifacts than the epoch's.
        env.artifacts = loaded.artifacts;
        let runner = self.versions.runner();
        if run.tasks.count <= 1 {
            return Ok(VersionRan {
                result: runner.run(&loaded.operator, &loaded.config, run.at, batches, env),
                tasks: TaskRun::default(),
            });
        }
        let (result, tasks) = tasks::run_tasks(
            runner,
            &loaded.operator,
            &loaded.config,
            run.at,
            batches,
            env,
            &run.tasks,
        )?;
        Ok(VersionRan { result, tasks })
    }

    /// A real-time epoch's instances of the version `entry` records, one
    /// per task, over `env`. The outer error is the host's.
    pub(super) fn start_instances_of(
        &mut self,
        host: &WasmHost,
        entry: &OffsetEntry,
        env: EpochEnv,
    ) -> Result<Result<Instances, OperatorFailure>> {
        let loaded = self.versions.load(host, &entry.operator)?;
        let tasks = self.tasks.of_entry(entry);
        Ok(Instances::start(
            self.versions.runner(),
            &loaded.operator,
            &loaded.config,
            EpochAt::of(entry),
            env,
            &tasks,
        ))
    }
}
