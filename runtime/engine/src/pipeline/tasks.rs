//! Parallel tasks: one epoch's operator run divided among `parallelism`
//! tasks, each a fresh operator instance on a thread of its own.
//!
//! The epoch protocol does not change: one `offsets/N` before anything is
//! read, one `commits/N` after the sink and the state. Only the **run**
//! phase fans out:
//!
//! 1. the exchange deals the epoch's rows to the tasks
//!    ([`crate::exchange`]): by the key group of the routing key, or evenly;
//! 2. each task runs the epoch's version (the one in `offsets/N`, so all
//!    tasks swap together) over its rows, with its own view of the state
//!    limited to its key groups ([`crate::operator_state::task_envs`]): a
//!    state call outside them fails the epoch
//!    ([`weir_host::OperatorFailure::KeyNotOwned`]);
//! 3. the tasks' outputs are joined in task order and their state changes
//!    merged into the epoch's, to be written and committed as one.
//!
//! A failing task fails the epoch, which runs again as a whole: a task is
//! not a unit of recovery. Per key, a task sees exactly the rows and the
//! state one task would, so every parallelism gives the same output rows
//! (as a multiset) and the same state.

use crate::exchange::Routing;
use crate::operator_state;
use crate::versions::runner::{EpochAt, Runner};
use anyhow::{anyhow, Result};
use arrow_array::RecordBatch;
use std::time::{Duration, Instant};
use weir_core::progress::TaskProgress;
use weir_core::source::row_count;
use weir_core::wal::{OffsetEntry, TaskSplit};
use weir_host::{EpochEnv, LoadedOperator, OperatorFailure, RunOutput};

/// How a pipeline's epochs are divided among tasks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tasks {
    /// How many tasks (1: the whole epoch on the epoch loop's thread).
    pub count: u16,
    /// The input column rows are routed by (`key` in the pipeline file).
    pub key: Option<String>,
    /// The source's partition column (Kafka's), which routes rows when no
    /// `key` does: partition `p` goes to task `p mod count`.
    pub partition_column: Option<String>,
}

impl Tasks {
    /// One task, as before parallelism.
    pub fn one() -> Self {
        Tasks {
            count: 1,
            key: None,
            partition_column: None,
        }
    }

    /// What a new epoch's `offsets/N` records of the split (nothing for
    /// one task).
    pub fn split(&self) -> Option<TaskSplit> {
        (self.count > 1).then(|| TaskSplit {
            count: self.count,
            key: self.key.clone(),
        })
    }

    /// The tasks epoch `entry` runs as: the split it recorded, whatever
    /// this run's `parallelism` is.
    pub fn of_entry(&self, entry: &OffsetEntry) -> Tasks {
        match &entry.tasks {
            Some(split) => Tasks {
                count: split.count,
                key: split.key.clone(),
                partition_column: self.partition_column.clone(),
            },
            None => Tasks::one(),
        }
    }

    /// How rows reach the tasks, for the log.
    pub fn describe_routing(&self) -> String {
        match self.routing() {
            Routing::Key(key) => format!("by the key group of `{key}`"),
            Routing::Partition(_) => "by source partition (p mod tasks)".into(),
            Routing::Even => "in even shares".into(),
        }
    }

    /// How the exchange deals rows to these tasks.
    pub(super) fn routing(&self) -> Routing<'_> {
        match (&self.key, &self.partition_column) {
            (Some(key), _) => Routing::Key(key),
            (None, Some(column)) => Routing::Partition(column),
            (None, None) => Routing::Even,
        }
    }
}

/// What one parallel operator run left for the rest of the epoch: each
/// task's share for the progress record, and how many of the joined
/// output batches each task produced (in task order), so that each task's
/// output goes to its own sink writer.
#[derive(Debug, Default)]
pub(crate) struct TaskRun {
    pub progress: Vec<TaskProgress>,
    pub batches: Vec<usize>,
}

impl TaskRun {
    /// `outputs` (the joined output of this run) cut into each task's
    /// share; one share of everything after a one-task run.
    pub fn shares<'a>(&self, outputs: &'a [RecordBatch]) -> Vec<&'a [RecordBatch]> {
        if self.batches.is_empty() {
            return vec![outputs];
        }
        let mut rest = outputs;
        self.batches
            .iter()
            .map(|&n| {
                let (share, after) = rest.split_at(n.min(rest.len()));
                rest = after;
                share
            })
            .collect()
    }
}

/// One epoch's run of `operator` over `batches`, divided among `tasks`.
/// The outer error is the host's (routing, a thread); the inner one the
/// operator's, of the first failing task.
pub(super) fn run_tasks(
    runner: &Runner,
    operator: &LoadedOperator,
    config: &str,
    at: EpochAt,
    batches: &[RecordBatch],
    mut env: EpochEnv,
    tasks: &Tasks,
) -> Result<(Result<RunOutput, OperatorFailure>, TaskRun)> {
    let routed = crate::exchange::route(batches, tasks.routing(), tasks.count)?;
    let envs = operator_state::task_envs(&mut env, tasks.count, tasks.key.as_deref());
    let ran = on_threads("weir-task", routed.iter().zip(envs), |(rows, task_env)| {
        runner.run(operator, config, at, rows, task_env)
    })?;
    Ok(join(env, &routed, ran))
}

/// Runs `work` over each input on a named thread of its own (`name-i`),
/// side by side; each result with the time its thread took, in input order.
pub(super) fn on_threads<I: Send, O: Send>(
    name: &str,
    inputs: impl IntoIterator<Item = I>,
    work: impl Fn(I) -> O + Sync,
) -> Result<Vec<(O, Duration)>> {
    let work = &work;
    std::thread::scope(|scope| {
        let mut running = Vec::new();
        for (i, input) in inputs.into_iter().enumerate() {
            let handle = std::thread::Builder::new()
                .name(format!("{name}-{i}"))
                .spawn_scoped(scope, move || {
                    let started = Instant::now();
                    let out = work(input);
                    (out, started.elapsed())
                })?;
            running.push(handle);
        }
        running
            .into_iter()
            .enumerate()
            .map(|(i, h)| {
                h.join()
                    .map_err(|_| anyhow!("{name}-{i}'s thread panicked"))
            })
            .collect()
    })
}

/// The tasks' runs as the epoch's: outputs in task order, state changes
/// merged into `env`; or the first failure, by task number.
fn join(
    mut env: EpochEnv,
    routed: &[Vec<RecordBatch>],
    ran: Vec<(Result<RunOutput, OperatorFailure>, Duration)>,
) -> (Result<RunOutput, OperatorFailure>, TaskRun) {
    let mut batches = Vec::new();
    let mut migrated = false;
    let mut report = TaskRun::default();
    let mut failed = None;
    for (task, ((out, took), rows)) in ran.into_iter().zip(routed).enumerate() {
        let mut progress = TaskProgress::of(task as u16);
        let output = out.as_ref().map_or(&[][..], |o| o.batches.as_slice());
        progress.count_run(row_count(rows), output, took);
        match out {
            Ok(out) if failed.is_none() => {
                report.batches.push(out.batches.len());
                migrated |= out.migrated;
                batches.extend(out.batches);
                operator_state::absorb(&mut env, out.env);
            }
            Ok(_) => {}
            Err(f) => {
                failed.get_or_insert(f);
            }
        }
        report.progress.push(progress);
    }
    let result = match failed {
        Some(f) => Err(f),
        None => Ok(RunOutput {
            batches,
            env,
            migrated,
        }),
    };
    (result, report)
}
