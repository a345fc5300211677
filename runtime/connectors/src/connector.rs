//! What a connector is: a typed configuration that knows how to check
//! itself and open its source or sink. A connector implements
//! [`SourceConnector`] or [`SinkConnector`] on its config type and adds one
//! line to [`crate::registry`]; the engine only ever sees the erased forms
//! ([`SourceSettings`], [`SinkSettings`]), built from the pipeline file's
//! `[source]` / `[sink]` table by the registry.

use anyhow::{Context, Result};
use arrow_schema::SchemaRef;
use serde::de::DeserializeOwned;
use std::fmt::Debug;
use std::path::{Path, PathBuf};
use weir_core::schema::ColumnConfig;
use weir_core::sink::Sink;
use weir_core::source::{DynSource, Source};

/// What opening a source may use besides its own config.
#[derive(Debug, Clone, Copy)]
pub struct SourceContext<'a> {
    /// The pipeline's name.
    pub pipeline: &'a str,
    /// Most rows per micro-batch (`batch_rows`).
    pub batch_rows: usize,
    /// Read only this partition: a worker of a cluster runs each partition
    /// it owns as a pipeline of its own (`[cluster]`). `None` reads all.
    /// Only sources that say [`SourceConnector::PARTITIONED`] accept one.
    pub partition: Option<i32>,
    /// The pipeline's (local) checkpoint directory: a source records there
    /// what a replay must read again the same way (the Avro writer
    /// schemas a registry served).
    pub checkpoint: &'a Path,
}

/// What opening a sink may use besides its own config.
#[derive(Debug, Clone, Copy)]
pub struct SinkContext<'a> {
    /// The pipeline's name.
    pub pipeline: &'a str,
    /// The sink's name in the pipeline (`default` for a lone `[sink]`):
    /// a sink whose writes are named after the query (a Kafka
    /// transactional id, a Delta `txn` app id) adds it when it is not
    /// `default`, so that two sinks of one query never share a name.
    pub name: &'a str,
    /// The checkpoint's query id: stable across restarts, so a sink can
    /// tell its own earlier writes of an epoch (transactional ids, the
    /// progress table) from another query's.
    pub query_id: &'a str,
    /// Which parallel task's writer this is (0 for the first, and for a
    /// pipeline of one task). Each task's writer writes that task's share
    /// of an epoch and makes *its* repeated write harmless: a file, a
    /// claim or a transactional id of its own.
    pub task: u16,
    /// The source partition this pipeline runs, on a cluster's worker
    /// (`None` in a single process). Each partition has its own query id
    /// and epochs; a sink that names its output by epoch keeps the
    /// partitions' outputs apart by it.
    pub partition: Option<i32>,
    /// The checkpoint's directory: a sink records there what a replay
    /// must write alike (a schema registry's id for its values).
    pub checkpoint: &'a Path,
}

impl SinkContext<'_> {
    /// A name for this writer's own writes that no other writer of any
    /// query shares: the query id, then `-<sink name>` unless the sink is
    /// `default`, then `-task-<T>` for tasks after the first. A lone
    /// `[sink]`'s first task keeps the bare query id, as before named
    /// outputs.
    pub fn writer_id(&self) -> String {
        let mut id = self.query_id.to_string();
        if self.name != weir_core::outputs::DEFAULT {
            id.push('-');
            id.push_str(self.name);
        }
        if self.task > 0 {
            id.push_str(&format!("-task-{}", self.task));
        }
        id
    }
}

/// A source connector: its `[source]` table, typed. Implemented by the
/// config type itself.
pub trait SourceConnector: DeserializeOwned + Debug + Clone + Send + Sync + 'static {
    /// The `kind = "…"` that selects this connector.
    const KIND: &'static str;
    /// The source it opens.
    type Source: Source + 'static;
    /// Whether it can be opened for one partition
    /// ([`SourceContext::partition`]), so that the workers of a cluster
    /// can share it.
    const PARTITIONED: bool = false;

    /// Checks the settings without touching the outside world (no
    /// connection, no file access), naming the bad key.
    fn validate(&self) -> Result<()>;
    /// The paths in the settings, which are taken relative to the pipeline
    /// file's directory.
    fn paths(&mut self) -> Vec<&mut PathBuf> {
        Vec::new()
    }
    /// The directory rows are read from, if any: no output may be written
    /// inside it.
    fn input_dir(&self) -> Option<&Path> {
        None
    }
    /// Where malformed input goes, if the settings name a place.
    fn dead_letter(&self) -> Option<&Path>;
    /// The columns the settings declare for each record (`[[source.schema]]`),
    /// which a sample record for the operator holds.
    fn columns(&self) -> &[ColumnConfig];
    /// The schema the source's batches will have, from the settings alone.
    fn schema(&self) -> Result<SchemaRef>;
    /// Opens the source (may connect to a broker).
    fn open(&self, ctx: &SourceContext<'_>) -> Result<Self::Source>;
}

/// A sink connector: its `[sink]` table, typed. Implemented by the config
/// type itself. The sink it opens must make a repeated write of an epoch
/// harmless (see [`weir_core::sink`]).
pub trait SinkConnector: DeserializeOwned + Debug + Clone + Send + Sync + 'static {
    /// The `kind = "…"` that selects this connector.
    const KIND: &'static str;

    /// Checks the settings without touching the outside world, naming the
    /// bad key.
    fn validate(&self) -> Result<()> {
        Ok(())
    }
    /// The paths in the settings, taken relative to the pipeline file.
    fn paths(&mut self) -> Vec<&mut PathBuf> {
        Vec::new()
    }
    /// The directory output is written to, if any.
    fn output_dir(&self) -> Option<&Path> {
        None
    }
    /// Identity recorded in the checkpoint metadata (a checkpoint made for
    /// another sink is refused). Never holds credentials.
    fn identity(&self) -> Result<String>;
    /// Opens the sink (may connect to a server).
    fn open(&self, ctx: &SinkContext<'_>) -> Result<Box<dyn Sink>>;
}

/// A [`SourceConnector`] as the engine holds it, whatever its kind.
pub trait SourceSettings: Debug + Send + Sync {
    /// The connector's `kind`.
    fn kind(&self) -> &'static str;
    /// See [`SourceConnector::validate`].
    fn validate(&self) -> Result<()>;
    /// See [`SourceConnector::paths`].
    fn paths(&mut self) -> Vec<&mut PathBuf>;
    /// See [`SourceConnector::input_dir`].
    fn input_dir(&self) -> Option<&Path>;
    /// See [`SourceConnector::dead_letter`].
    fn dead_letter(&self) -> Option<&Path>;
    /// See [`SourceConnector::columns`].
    fn columns(&self) -> &[ColumnConfig];
    /// See [`SourceConnector::schema`].
    fn schema(&self) -> Result<SchemaRef>;
    /// See [`SourceConnector::PARTITIONED`].
    fn partitioned(&self) -> bool;
    /// Opens the source, ranges erased to the JSON `offsets/N` records.
    fn open(&self, ctx: &SourceContext<'_>) -> Result<Box<dyn DynSource>>;
    /// The settings as their own type, for code that needs one
    /// connector's (a cluster's workers, the Kafka source's).
    fn as_any(&self) -> &dyn std::any::Any;
    /// A copy.
    fn clone_box(&self) -> Box<dyn SourceSettings>;
}

/// A [`SinkConnector`] as the engine holds it, whatever its kind.
pub trait SinkSettings: Debug + Send + Sync {
    /// The connector's `kind`.
    fn kind(&self) -> &'static str;
    /// See [`SinkConnector::validate`].
    fn validate(&self) -> Result<()>;
    /// See [`SinkConnector::paths`].
    fn paths(&mut self) -> Vec<&mut PathBuf>;
    /// See [`SinkConnector::output_dir`].
    fn output_dir(&self) -> Option<&Path>;
    /// See [`SinkConnector::identity`].
    fn identity(&self) -> Result<String>;
    /// See [`SinkConnector::open`].
    fn open(&self, ctx: &SinkContext<'_>) -> Result<Box<dyn Sink>>;
    /// A copy.
    fn clone_box(&self) -> Box<dyn SinkSettings>;
}

impl<C: SourceConnector> SourceSettings for C {
    fn kind(&self) -> &'static str {
        C::KIND
    }
    fn validate(&self) -> Result<()> {
        SourceConnector::validate(self)
    }
    fn paths(&mut self) -> Vec<&mut PathBuf> {
        SourceConnector::paths(self)
    }
    fn input_dir(&self) -> Option<&Path> {
        SourceConnector::input_dir(self)
    }
    fn dead_letter(&self) -> Option<&Path> {
        SourceConnector::dead_letter(self)
    }
    fn columns(&self) -> &[ColumnConfig] {
        SourceConnector::columns(self)
    }
    fn schema(&self) -> Result<SchemaRef> {
        SourceConnector::schema(self)
    }
    fn partitioned(&self) -> bool {
        C::PARTITIONED
    }
    fn open(&self, ctx: &SourceContext<'_>) -> Result<Box<dyn DynSource>> {
        if let (Some(p), false) = (ctx.partition, C::PARTITIONED) {
            anyhow::bail!(
                "the {} source has no partitions to share among workers (asked for partition {p})",
                C::KIND
            );
        }
        let source = SourceConnector::open(self, ctx)
            .with_context(|| format!("opening the {} source", C::KIND))?;
        Ok(Box::new(source))
    }
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
    fn clone_box(&self) -> Box<dyn SourceSettings> {
        Box::new(self.clone())
    }
}

impl<C: SinkConnector> SinkSettings for C {
    fn kind(&self) -> &'static str {
        C::KIND
    }
    fn validate(&self) -> Result<()> {
        SinkConnector::validate(self)
    }
    fn paths(&mut self) -> Vec<&mut PathBuf> {
        SinkConnector::paths(self)
    }
    fn output_dir(&self) -> Option<&Path> {
        SinkConnector::output_dir(self)
    }
    fn identity(&self) -> Result<String> {
        SinkConnector::identity(self)
    }
    fn open(&self, ctx: &SinkContext<'_>) -> Result<Box<dyn Sink>> {
        SinkConnector::open(self, ctx).with_context(|| format!("opening the {} sink", C::KIND))
    }
    fn clone_box(&self) -> Box<dyn SinkSettings> {
        Box::new(self.clone())
    }
}
