//! A real-time epoch's operator instances: one per task, each kept for
//! the whole epoch ([`super::realtime`]).
//!
//! Each part's rows go through the same exchange as a micro-batch epoch's
//! ([`crate::exchange`]), and every task's instance processes its share of
//! the part on a thread of its own, with its own view of the state limited
//! to its key groups. The host's dedup writes to the epoch's own view
//! (`host`), which the tasks' changes are merged into at the close, to be
//! committed as one. With one task, that task's instance holds the epoch's
//! view itself, as before tasks.

use super::tasks::Tasks;
use crate::operator_state;
use crate::versions::runner::{EpochAt, Runner, Running};
use anyhow::Result;
use arrow_array::RecordBatch;
use weir_core::progress::TaskProgress;
use weir_core::source::row_count;
use weir_host::{EpochEnv, LoadedOperator, OperatorFailure};

/// The epoch's instances, task by task.
pub(super) struct Instances {
    /// The epoch's view of the state when there are several tasks (the
    /// host's dedup writes here); `None` with one task, whose instance
    /// holds it.
    host: Option<EpochEnv>,
    tasks: Vec<Running>,
    routing: Tasks,
    /// Each task's rows and operator time so far (several tasks only).
    progress: Vec<TaskProgress>,
}

/// One part's output (or the timers'), task by task.
pub(super) type Shares = Vec<Vec<RecordBatch>>;

impl Instances {
    /// Starts one instance per task of `tasks` over `env`, the epoch's
    /// view of the state (each runs `migrate` on the first epoch after a
    /// swap, over its own key groups).
    pub fn start(
        runner: &Runner,
        operator: &LoadedOperator,
        config: &str,
        at: EpochAt,
        mut env: EpochEnv,
        tasks: &Tasks,
    ) -> Result<Self, OperatorFailure> {
        if tasks.count <= 1 {
            return Ok(Instances {
                host: None,
                tasks: vec![runner.start(operator, config, at, env)?],
                routing: Tasks::one(),
                progress: Vec::new(),
            });
        }
        let envs = operator_state::task_envs(&mut env, tasks.count, tasks.key.as_deref());
        let running = envs
            .into_iter()
            .map(|task_env| runner.start(operator, config, at, task_env))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Instances {
            host: Some(env),
            progress: (0..tasks.count).map(TaskProgress::of).collect(),
            tasks: running,
            routing: tasks.clone(),
        })
    }

    /// Each task's share of the epoch so far (empty with one task).
    pub fn progress(&self) -> Vec<TaskProgress> {
        self.progress.clone()
    }

    /// Whether `migrate` ran (in any task).
    pub fn migrated(&self) -> bool {
        self.tasks.iter().any(|t| t.migrated)
    }

    /// The epoch's view of the state, which the host's dedup writes to.
    pub fn host_env(&mut self) -> &mut EpochEnv {
        match &mut self.host {
            Some(env) => env,
            None => self.tasks[0].env_mut(),
        }
    }

    /// Runs `process` over a part's batches: each task over its share, in
    /// input order. The outer error is the exchange's; the inner one the
    /// first failing task's.
    pub fn process(
        &mut self,
        batches: Vec<RecordBatch>,
    ) -> Result<Result<Shares, OperatorFailure>> {
        if let [only] = self.tasks.as_mut_slice() {
            return Ok(process_all(only, batches).map(|out| vec![out]));
        }
        let routed = crate::exchange::route(&batches, self.routing.routing(), self.routing.count)?;
        drop(batches);
        self.each(routed, process_all)
    }

    /// Fires the timers the epoch's watermark reached, in every task.
    pub fn fire_timers(&mut self) -> Result<Result<Shares, OperatorFailure>> {
        if let [only] = self.tasks.as_mut_slice() {
            return Ok(only.fire_timers().map(|out| vec![out]));
        }
        let none = vec![Vec::new(); self.tasks.len()];
        self.each(none, |task, _| task.fire_timers())
    }

    /// Runs `work` for every task with its input, each on a thread of its
    /// own; the outputs in task order, or the first failure by task.
    fn each(
        &mut self,
        inputs: Vec<Vec<RecordBatch>>,
        work: impl Fn(&mut Running, Vec<RecordBatch>) -> Result<Vec<RecordBatch>, OperatorFailure>
            + Sync,
    ) -> Result<Result<Shares, OperatorFailure>> {
        let rows_in: Vec<u64> = inputs.iter().map(|rows| row_count(rows)).collect();
        let ran = super::tasks::on_threads(
            "weir-task",
            self.tasks.iter_mut().zip(inputs),
            |(task, rows)| work(task, rows),
        )?;
        let mut outputs = Vec::with_capacity(ran.len());
        for (((out, took), p), rows_in) in ran.into_iter().zip(&mut self.progress).zip(rows_in) {
            p.count_run(rows_in, out.as_deref().unwrap_or_default(), took);
            outputs.push(out);
        }
        Ok(outputs.into_iter().collect())
    }

    /// Ends every instance; the epoch's view of the state, with every
    /// task's changes merged in.
    pub fn finish(self) -> EpochEnv {
        let mut tasks = self.tasks.into_iter();
        match self.host {
            None => tasks
                .next()
                .map(Running::finish)
                .expect("one task at least"),
            Some(mut env) => {
                for task in tasks {
                    operator_state::absorb(&mut env, task.finish());
                }
                env
            }
        }
    }
}

/// `process` over each batch in turn, keeping the outputs with rows.
fn process_all(
    task: &mut Running,
    batches: Vec<RecordBatch>,
) -> Result<Vec<RecordBatch>, OperatorFailure> {
    let mut outputs = Vec::new();
    for batch in batches {
        outputs.extend(task.process(batch)?);
    }
    Ok(outputs)
}
