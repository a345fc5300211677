//! The sink's writers: one per task, so that the tasks of an epoch write
//! their shares side by side, each to a file, a claim or a transaction of
//! its own ([`weir_connectors::connector::SinkContext::task`]).
//!
//! The epoch protocol is unchanged: phase 6 returns only after **every**
//! task's writer has the epoch, and only then do the state and
//! `commits/N` follow. Each writer makes its own repeated write harmless,
//! and a replay gives each task the same rows, since `offsets/N` records
//! how the epoch was divided ([`weir_core::wal::TaskSplit`]).

use anyhow::{Context, Result};
use arrow_array::RecordBatch;
use weir_connectors::connector::{SinkContext, SinkSettings};
use weir_core::sink::Sink;

/// The sink's writers by task, opened as tasks first need them.
pub(crate) struct TaskSinks {
    settings: Box<dyn SinkSettings>,
    pipeline: String,
    query_id: String,
    partition: Option<i32>,
    writers: Vec<Box<dyn Sink>>,
    /// Whether writers take ownership as they open ([`TaskSinks::fence`]).
    fencing: bool,
}

impl TaskSinks {
    /// Opens the first task's writer at once, so that a sink that cannot
    /// be reached or configured fails the start.
    /// `partition` is the source partition a cluster worker runs.
    pub fn open(
        settings: &dyn SinkSettings,
        pipeline: &str,
        query_id: &str,
        partition: Option<i32>,
    ) -> Result<Self> {
        let mut sinks = TaskSinks {
            settings: settings.clone_box(),
            pipeline: pipeline.to_string(),
            query_id: query_id.to_string(),
            partition,
            writers: Vec::new(),
            fencing: false,
        };
        sinks.ensure(1)?;
        Ok(sinks)
    }

    /// The first task's writer: the one a one-task epoch (and real-time
    /// mode) writes with.
    pub fn first(&mut self) -> &mut dyn Sink {
        self.writers[0].as_mut()
    }

    /// Opens writers up to task `count - 1`.
    fn ensure(&mut self, count: usize) -> Result<()> {
        while self.writers.len() < count {
            let task = u16::try_from(self.writers.len()).context("too many tasks")?;
            let writer = self
                .settings
                .open(&SinkContext {
                    pipeline: &self.pipeline,
                    query_id: &self.query_id,
                    task,
                    partition: self.partition,
                })
                .with_context(|| format!("opening task {task}'s sink writer"))?;
            self.writers.push(writer);
            if self.fencing {
                self.fence_from(self.writers.len() - 1)?;
            }
        }
        Ok(())
    }

    /// Takes ownership of the output for every writer, now and as more
    /// tasks' writers open ([`Sink::fence`]): a worker's first step with a
    /// partition it was assigned.
    pub fn fence(&mut self) -> Result<()> {
        self.fencing = true;
        self.fence_from(0)
    }

    fn fence_from(&mut self, first: usize) -> Result<()> {
        for (task, writer) in self.writers.iter_mut().enumerate().skip(first) {
            writer
                .fence()
                .with_context(|| format!("task {task}'s writer taking ownership"))?;
        }
        Ok(())
    }

    /// Writes each task's share of `epoch` (`shares[t]` is task `t`'s) with
    /// that task's writer, side by side; returns once every one is written,
    /// or with the first task's error that failed.
    pub fn write_epoch(&mut self, epoch: u64, shares: &[&[RecordBatch]]) -> Result<()> {
        self.each(shares, |writer, share| writer.write_epoch(epoch, share))
    }

    /// Real-time mode: each task's share of part `part` of `epoch`, as
    /// [`TaskSinks::write_epoch`].
    pub fn write_part(&mut self, epoch: u64, part: u32, shares: &[&[RecordBatch]]) -> Result<()> {
        self.each(shares, |writer, share| {
            writer.write_part(epoch, part, share)
        })
    }

    /// Real-time mode: every writer's end of `epoch`.
    pub fn end_epoch(&mut self, epoch: u64) -> Result<()> {
        for (task, writer) in self.writers.iter_mut().enumerate() {
            writer
                .end_epoch(epoch)
                .with_context(|| format!("task {task}'s writer ending epoch {epoch}"))?;
        }
        Ok(())
    }

    /// Runs `write` for each task's writer with its share, side by side
    /// (on the calling thread when there is one share).
    fn each(
        &mut self,
        shares: &[&[RecordBatch]],
        write: impl Fn(&mut dyn Sink, &[RecordBatch]) -> Result<()> + Sync,
    ) -> Result<()> {
        self.ensure(shares.len())?;
        if let [only] = shares {
            return write(self.writers[0].as_mut(), only);
        }
        let ran = super::tasks::on_threads(
            "weir-sink",
            self.writers.iter_mut().zip(shares),
            |(writer, share)| write(writer.as_mut(), share),
        )?;
        ran.into_iter()
            .enumerate()
            .try_for_each(|(task, (written, _))| {
                written.with_context(|| format!("task {task}'s share"))
            })
    }
}
