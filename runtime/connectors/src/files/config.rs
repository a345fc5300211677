//! `kind = "files"` in `[source]` and `[sink]`.

use super::{FileSink, FileSource};
use crate::connector::{SinkConnector, SinkContext, SourceConnector, SourceContext};
use anyhow::{bail, Result};
use arrow_schema::SchemaRef;
use serde::Deserialize;
use std::path::{Path, PathBuf};
use std::time::Duration;
use weir_core::json::MalformedPolicy;
use weir_core::schema::{self, ColumnConfig};
use weir_core::sink::Sink;

/// A directory of JSON-lines files, each file planned once.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FilesSourceConfig {
    /// The directory read.
    pub path: PathBuf,
    /// The columns of each record.
    pub schema: Vec<ColumnConfig>,
    /// Most files one epoch takes (default 100).
    #[serde(default = "default_max_files")]
    pub max_files_per_trigger: usize,
    /// What a line that does not parse does (default: fail the epoch).
    #[serde(default)]
    pub on_malformed: MalformedPolicy,
    /// Directory for dead letters; default `<checkpoint>/dead-letter`.
    #[serde(default)]
    pub dead_letter: Option<PathBuf>,
    /// Plan a file only once it has been unchanged this long, e.g. "2s",
    /// for writers that append in place instead of renaming a finished
    /// file into the directory (default 0: plan at once).
    #[serde(default, with = "weir_core::duration")]
    pub settle: Duration,
}

fn default_max_files() -> usize {
    100
}

impl SourceConnector for FilesSourceConfig {
    const KIND: &'static str = "files";
    type Source = FileSource;

    fn validate(&self) -> Result<()> {
        if self.max_files_per_trigger == 0 {
            bail!("`source.max_files_per_trigger` must be at least 1");
        }
        schema::check(&self.schema)
    }

    fn paths(&mut self) -> Vec<&mut PathBuf> {
        let mut paths = vec![&mut self.path];
        paths.extend(self.dead_letter.as_mut());
        paths
    }

    fn input_dir(&self) -> Option<&Path> {
        Some(&self.path)
    }

    fn dead_letter(&self) -> Option<&Path> {
        self.dead_letter.as_deref()
    }

    fn columns(&self) -> &[ColumnConfig] {
        &self.schema
    }

    fn schema(&self) -> Result<SchemaRef> {
        Ok(schema::arrow_schema(&self.schema))
    }

    fn open(&self, ctx: &SourceContext<'_>) -> Result<FileSource> {
        FileSource::with_settle(
            self.path.clone(),
            schema::arrow_schema(&self.schema),
            self.max_files_per_trigger,
            ctx.batch_rows,
            self.on_malformed,
            self.settle,
        )
    }
}

/// One JSON-lines file per epoch in `path`, written atomically.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FilesSinkConfig {
    /// The directory written.
    pub path: PathBuf,
}

impl SinkConnector for FilesSinkConfig {
    const KIND: &'static str = "files";

    fn paths(&mut self) -> Vec<&mut PathBuf> {
        vec![&mut self.path]
    }

    fn output_dir(&self) -> Option<&Path> {
        Some(&self.path)
    }

    fn identity(&self) -> Result<String> {
        Ok(format!("files:{}", self.path.display()))
    }

    fn open(&self, ctx: &SinkContext<'_>) -> Result<Box<dyn Sink>> {
        Ok(Box::new(FileSink::new(
            sink_dir(&self.path, ctx),
            ctx.task,
        )?))
    }
}

/// Where a sink configured with directory `path` writes: a cluster's
/// worker writes each partition's epochs under `partition-<p>/`, since
/// every partition numbers its epochs from 0.
pub fn sink_dir(path: &Path, ctx: &SinkContext<'_>) -> PathBuf {
    match ctx.partition {
        Some(p) => path.join(format!("partition-{p}")),
        None => path.to_path_buf(),
    }
}
