//! The sinks' writers: for each sink (`[sink]`, or each `[[sink]]`), one
//! writer per task, so that the tasks of an epoch write their shares side
//! by side, each to a file, a claim or a transaction of its own
//! ([`weir_connectors::connector::SinkContext::task`]). Each sink gets the
//! rows of the operator output it takes ([`weir_core::outputs`]).
//!
//! The epoch protocol is unchanged: phase 6 returns only after **every**
//! sink's every task's writer has the epoch, and only then do the state
//! and `commits/N` follow. Each writer makes its own repeated write
//! harmless, and a replay gives each task the same rows, since `offsets/N`
//! records how the epoch was divided ([`weir_core::wal::TaskSplit`]).

use crate::config::sinks::Sinks;
use anyhow::{Context, Result};
use arrow_array::RecordBatch;
use std::collections::HashSet;
use std::path::PathBuf;
use weir_connectors::connector::{SinkContext, SinkSettings};
use weir_core::outputs;
use weir_core::sink::Sink;

/// Who the writers write for: what every sink's writers share of their
/// [`SinkContext`].
#[derive(Clone)]
pub(crate) struct WriterIdentity {
    pub pipeline: String,
    pub query_id: String,
    /// The source partition a cluster worker runs.
    pub partition: Option<i32>,
    /// The checkpoint's directory.
    pub checkpoint: PathBuf,
}

/// Every sink's writers, and which output each takes.
pub(crate) struct PipelineSinks {
    routes: Vec<Route>,
    /// Outputs the operator emitted that no sink takes (said once each).
    unrouted: HashSet<String>,
}

struct Route {
    name: String,
    output: String,
    writers: TaskSinks,
}

impl PipelineSinks {
    /// Opens every sink's first writer (a sink that cannot be reached or
    /// configured fails the start).
    pub fn open(sinks: &Sinks, identity: &WriterIdentity) -> Result<Self> {
        let routes = sinks
            .iter()
            .map(|s| {
                let writers = TaskSinks::open(&*s.settings, &s.name, identity)
                    .with_context(|| format!("sink `{}`", s.name))?;
                Ok(Route {
                    name: s.name.clone(),
                    output: s.output.clone(),
                    writers,
                })
            })
            .collect::<Result<_>>()?;
        Ok(PipelineSinks {
            routes,
            unrouted: HashSet::new(),
        })
    }

    /// Takes ownership of every sink's output ([`TaskSinks::fence`]).
    pub fn fence(&mut self) -> Result<()> {
        self.routes.iter_mut().try_for_each(|r| {
            r.writers
                .fence()
                .with_context(|| format!("sink `{}`", r.name))
        })
    }

    /// Writes `epoch` to every sink: each gets each task's rows of its
    /// output ([`TaskSinks::write_epoch`]).
    pub fn write_epoch(&mut self, epoch: u64, shares: &[&[RecordBatch]]) -> Result<()> {
        self.each_route(shares, |writers, routed| writers.write_epoch(epoch, routed))
    }

    /// Real-time mode: part `part` of `epoch` to every sink.
    pub fn write_part(&mut self, epoch: u64, part: u32, shares: &[&[RecordBatch]]) -> Result<()> {
        self.each_route(shares, |writers, routed| {
            writers.write_part(epoch, part, routed)
        })
    }

    /// Runs `write` for each sink with each task's rows of its output, one
    /// sink after another.
    fn each_route(
        &mut self,
        shares: &[&[RecordBatch]],
        write: impl Fn(&mut TaskSinks, &[&[RecordBatch]]) -> Result<()>,
    ) -> Result<()> {
        self.note_unrouted(shares);
        for route in &mut self.routes {
            let routed = route_shares(shares, &route.output)?;
            let refs: Vec<&[RecordBatch]> = routed.iter().map(Vec::as_slice).collect();
            write(&mut route.writers, &refs).with_context(|| format!("sink `{}`", route.name))?;
        }
        Ok(())
    }

    /// Real-time mode: every sink's end of `epoch`.
    pub fn end_epoch(&mut self, epoch: u64) -> Result<()> {
        self.routes.iter_mut().try_for_each(|r| {
            r.writers
                .end_epoch(epoch)
                .with_context(|| format!("sink `{}`", r.name))
        })
    }

    /// Says once per output that rows of it go to no sink.
    fn note_unrouted(&mut self, shares: &[&[RecordBatch]]) {
        for share in shares {
            for name in outputs::names(share) {
                if !self.routes.iter().any(|r| r.output == name)
                    && self.unrouted.insert(name.clone())
                {
                    tracing::warn!(
                        output = %name,
                        "the operator emits rows to output `{name}`, which no sink takes; they \
                         are dropped. Add a `[[sink]]` with `output = \"{name}\"` to keep them."
                    );
                }
            }
        }
    }
}

/// Each task's rows of `output`, unmarked.
fn route_shares(shares: &[&[RecordBatch]], output: &str) -> Result<Vec<Vec<RecordBatch>>> {
    shares.iter().map(|s| outputs::rows_of(s, output)).collect()
}

/// One sink's writers by task, opened as tasks first need them.
pub(crate) struct TaskSinks {
    settings: Box<dyn SinkSettings>,
    name: String,
    identity: WriterIdentity,
    writers: Vec<Box<dyn Sink>>,
    /// Whether writers take ownership as they open ([`TaskSinks::fence`]).
    fencing: bool,
}

impl TaskSinks {
    /// Opens the first task's writer at once, so that a sink that cannot
    /// be reached or configured fails the start.
    pub fn open(
        settings: &dyn SinkSettings,
        name: &str,
        identity: &WriterIdentity,
    ) -> Result<Self> {
        let mut sinks = TaskSinks {
            settings: settings.clone_box(),
            name: name.to_string(),
            identity: identity.clone(),
            writers: Vec::new(),
            fencing: false,
        };
        sinks.ensure(1)?;
        Ok(sinks)
    }

    /// Opens writers up to task `count - 1`.
    fn ensure(&mut self, count: usize) -> Result<()> {
        while self.writers.len() < count {
            let task = u16::try_from(self.writers.len()).context("too many tasks")?;
            let writer = self
                .settings
                .open(&SinkContext {
                    name: &self.name,
                    pipeline: &self.identity.pipeline,
                    query_id: &self.identity.query_id,
                    task,
                    partition: self.identity.partition,
                    checkpoint: &self.identity.checkpoint,
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
