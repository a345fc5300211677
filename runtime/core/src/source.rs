//! Sources: where rows come from. The runtime, not the source, owns
//! progress: a source proposes the next range, the engine records it in
//! `offsets/<N>`, and the source must then be able to read exactly that
//! range again on any later run.

use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A line of input that could not be turned into a row.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeadLetter {
    /// Where it came from (a file path, a topic-partition-offset, ...).
    pub origin: String,
    /// 1-based line number within the origin, if the origin has lines.
    pub line: Option<u64>,
    /// Why it was rejected.
    pub reason: String,
    /// The raw input, lossily decoded as UTF-8 (for a record the operator
    /// failed on: the row as JSON, as the operator got it).
    pub raw: String,
    /// For a record the operator failed on: the operator version's digest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operator: Option<crate::Digest>,
    /// For a record the operator failed on: its row in the epoch's input
    /// (0-based, in read order), as recorded in `offsets/N`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub row: Option<u64>,
}

/// Where a row of an epoch's input came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowOrigin {
    /// A file path, a topic-partition-offset, ...
    pub origin: String,
    /// 1-based line, for line-oriented origins.
    pub line: Option<u64>,
}

/// An epoch's input: the rows of one planned range, in micro-batches,
/// and what the malformed-record policy set aside.
#[derive(Debug, Default)]
pub struct EpochInput {
    /// Rows in bounded micro-batches (at most the pipeline's `batch_rows` each).
    pub batches: Vec<RecordBatch>,
    /// Input that the malformed-record policy set aside.
    pub dead_letters: Vec<DeadLetter>,
}

impl EpochInput {
    /// Number of rows across all batches.
    pub fn rows(&self) -> u64 {
        row_count(&self.batches)
    }
}

/// Number of rows across `batches`.
pub fn row_count(batches: &[RecordBatch]) -> u64 {
    batches.iter().map(|b| b.num_rows() as u64).sum()
}

/// What a source had waiting when it last planned: the lag behind the
/// source, in the source's own unit, for progress, metrics and ETAs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Backlog {
    /// What the unit counts: `records` (Kafka offsets) or `bytes` (files,
    /// whose row counts are unknown until read).
    pub unit: BacklogUnit,
    /// Units in the range the last `plan` proposed (0 if it proposed none).
    pub planned: u64,
    /// Units available at the source but not yet planned.
    pub pending: u64,
    /// Files available but not yet planned (file sources only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending_files: Option<u64>,
    /// Files that changed after they were planned (appended to or
    /// re-created); their new bytes are not read (file sources only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub changed_files: Option<u64>,
}

/// The unit of a [`Backlog`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BacklogUnit {
    Records,
    Bytes,
}

impl BacklogUnit {
    /// The unit's name, as metrics and the dashboard show it.
    pub fn as_str(self) -> &'static str {
        match self {
            BacklogUnit::Records => "records",
            BacklogUnit::Bytes => "bytes",
        }
    }
}

/// How much the next epoch (or real-time part) may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlanLimit {
    /// Respect the source's per-trigger rate limit.
    PerTrigger,
    /// Take everything available (the `once` trigger).
    Unbounded,
    /// Real-time mode: what arrived since the last plan, within the
    /// per-trigger limit, answered at once (it is called again and again,
    /// a fraction of a millisecond apart). A source may keep a reader open
    /// between calls and hand what it read to the `read` of the range it
    /// proposed, rather than ask its system twice.
    Live,
}

impl PlanLimit {
    /// Whether the source's per-trigger limit applies.
    pub fn per_trigger(self) -> bool {
        matches!(self, PlanLimit::PerTrigger | PlanLimit::Live)
    }
}

/// A replayable source of rows, with its own typed range: what one epoch
/// reads (files and their sizes, Kafka partitions and offsets). The engine
/// records each range in `offsets/N` and hands it back, unchanged, on any
/// later run; the source never keeps progress of its own. Implement this;
/// the engine holds sources as [`DynSource`], which (de)serializes ranges
/// in one place.
pub trait Source: Send {
    /// One epoch's range, as recorded in `offsets/N`. Must round-trip
    /// through JSON exactly.
    type Range: Serialize + DeserializeOwned;

    /// The schema of every batch this source yields.
    fn schema(&self) -> SchemaRef;

    /// Identity recorded in the checkpoint metadata; a checkpoint made for a
    /// different identity is refused.
    fn identity(&self) -> String;

    /// Tells the source that `range` was planned by an earlier run, so that
    /// `plan` never proposes it again.
    fn restore(&mut self, range: &Self::Range) -> anyhow::Result<()>;

    /// Everything planned so far (by `plan` and `restore`), as one range
    /// that `restore` accepts: the compacted offset log keeps this instead
    /// of every epoch's range ([`crate::wal::Compacted`]).
    fn planned_so_far(&self) -> anyhow::Result<Self::Range>;

    /// Proposes the range for the next epoch, or `None` if no new data exists.
    /// The proposal counts as planned from here on.
    fn plan(&mut self, limit: PlanLimit) -> anyhow::Result<Option<Self::Range>>;

    /// Reads exactly `range`, as recorded in the offset WAL.
    fn read(&mut self, range: &Self::Range) -> anyhow::Result<EpochInput>;

    /// Reads each of `ranges` (the parts of a replayed real-time epoch, in
    /// order), exactly as [`Source::read`] would one at a time. A source
    /// whose every read has a fixed cost (a Kafka fetch) reads them
    /// together.
    fn read_each(&mut self, ranges: &[Self::Range]) -> anyhow::Result<Vec<EpochInput>> {
        ranges.iter().map(|r| self.read(r)).collect()
    }

    /// One-line human description of a range, for logs and `checkpoint show`.
    fn describe(&self, range: &Self::Range) -> String;

    /// What the last `plan` saw waiting at the source (`None` before the
    /// first plan, or if the source cannot tell).
    fn backlog(&self) -> Option<Backlog> {
        None
    }

    /// Where row `row` (0-based, in read order) of `range` came from, for
    /// the dead-letter record of a row the operator failed on. Called only
    /// then, so it may read the range again. `None` if the source cannot
    /// tell (the row's own columns then identify it).
    fn locate(&mut self, range: &Self::Range, row: u64) -> anyhow::Result<Option<RowOrigin>> {
        let _ = (range, row);
        Ok(None)
    }

    /// Whether the source will never have anything new (a bounded source,
    /// all of it planned): a real-time run then ends after committing it.
    fn is_exhausted(&self) -> bool {
        false
    }

    /// The int64 column holding each row's source partition, if the source
    /// has partitions (Kafka): without a routing `key`, parallel tasks
    /// share the partitions, each read by one task.
    fn partition_column(&self) -> Option<&str> {
        None
    }

    /// Called after `commits/<N>` is durable for `range`. Progress lives in
    /// the WAL; this is only for mirroring it elsewhere (e.g. a Kafka
    /// consumer group for lag tools), and must not affect correctness.
    fn committed(&mut self, range: &Self::Range) -> anyhow::Result<()> {
        let _ = range;
        Ok(())
    }
}

/// A [`Source`] as the engine holds it: ranges as the JSON recorded in
/// `offsets/N`. Every source gets this by the blanket impl; the
/// (de)serialization of ranges lives here and nowhere else.
pub trait DynSource: Send {
    /// See [`Source::schema`].
    fn schema(&self) -> SchemaRef;
    /// See [`Source::identity`].
    fn identity(&self) -> String;
    /// See [`Source::restore`].
    fn restore(&mut self, range: &Value) -> anyhow::Result<()>;
    /// See [`Source::planned_so_far`].
    fn planned_so_far(&self) -> anyhow::Result<Value>;
    /// See [`Source::plan`].
    fn plan(&mut self, limit: PlanLimit) -> anyhow::Result<Option<Value>>;
    /// See [`Source::read`].
    fn read(&mut self, range: &Value) -> anyhow::Result<EpochInput>;
    /// See [`Source::read_each`].
    fn read_each(&mut self, ranges: &[Value]) -> anyhow::Result<Vec<EpochInput>>;
    /// See [`Source::describe`].
    fn describe(&self, range: &Value) -> String;
    /// See [`Source::backlog`].
    fn backlog(&self) -> Option<Backlog>;
    /// See [`Source::locate`].
    fn locate(&mut self, range: &Value, row: u64) -> anyhow::Result<Option<RowOrigin>>;
    /// See [`Source::committed`].
    fn committed(&mut self, range: &Value) -> anyhow::Result<()>;
    /// See [`Source::is_exhausted`].
    fn is_exhausted(&self) -> bool;
    /// See [`Source::partition_column`].
    fn partition_column(&self) -> Option<&str>;
}

/// A range from `offsets/N`, typed for source `S`.
fn typed<S: Source>(range: &Value) -> anyhow::Result<S::Range> {
    S::Range::deserialize(range).map_err(|e| {
        anyhow::anyhow!("the range recorded in the offset log is not this source's: {e}")
    })
}

/// A range as recorded in `offsets/N`.
fn recorded<R: Serialize>(range: &R) -> anyhow::Result<Value> {
    Ok(serde_json::to_value(range)?)
}

impl<S: Source> DynSource for S {
    fn schema(&self) -> SchemaRef {
        Source::schema(self)
    }

    fn identity(&self) -> String {
        Source::identity(self)
    }

    fn restore(&mut self, range: &Value) -> anyhow::Result<()> {
        Source::restore(self, &typed::<S>(range)?)
    }

    fn planned_so_far(&self) -> anyhow::Result<Value> {
        recorded(&Source::planned_so_far(self)?)
    }

    fn plan(&mut self, limit: PlanLimit) -> anyhow::Result<Option<Value>> {
        Source::plan(self, limit)?
            .as_ref()
            .map(recorded)
            .transpose()
    }

    fn read(&mut self, range: &Value) -> anyhow::Result<EpochInput> {
        Source::read(self, &typed::<S>(range)?)
    }

    fn read_each(&mut self, ranges: &[Value]) -> anyhow::Result<Vec<EpochInput>> {
        let typed = ranges
            .iter()
            .map(typed::<S>)
            .collect::<anyhow::Result<Vec<_>>>()?;
        Source::read_each(self, &typed)
    }

    fn describe(&self, range: &Value) -> String {
        match typed::<S>(range) {
            Ok(r) => Source::describe(self, &r),
            Err(e) => format!("unreadable range: {e:#}"),
        }
    }

    fn backlog(&self) -> Option<Backlog> {
        Source::backlog(self)
    }

    fn locate(&mut self, range: &Value, row: u64) -> anyhow::Result<Option<RowOrigin>> {
        Source::locate(self, &typed::<S>(range)?, row)
    }

    fn committed(&mut self, range: &Value) -> anyhow::Result<()> {
        Source::committed(self, &typed::<S>(range)?)
    }

    fn is_exhausted(&self) -> bool {
        Source::is_exhausted(self)
    }

    fn partition_column(&self) -> Option<&str> {
        Source::partition_column(self)
    }
}
