//! `kind = "postgres"` in `[sink]`.

use super::table::TableName;
use super::{connection_config, location, PostgresSink, PostgresSinkSettings, WriteMethod};
use super::{DEFAULT_COPY_THRESHOLD, DEFAULT_PROGRESS_TABLE, DEFAULT_TIMEOUT};
use crate::connector::{SinkConnector, SinkContext};
use anyhow::{bail, Context, Result};
use serde::Deserialize;
use std::time::Duration;
use weir_core::sink::Sink;

/// The variable a PostgreSQL sink without `url` takes its connection string from.
pub const DEFAULT_URL_ENV: &str = "WEIR_POSTGRES_URL";

/// Rows into a PostgreSQL table, one transaction per epoch with the
/// epoch's progress row: exactly once.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PostgresSinkConfig {
    /// Connection string (URL or `key=value`); else read from `url_env`.
    #[serde(default)]
    pub url: Option<String>,
    /// Environment variable holding the connection string, so the
    /// password stays out of the pipeline file.
    #[serde(default)]
    pub url_env: Option<String>,
    /// PostgreSQL schema of `table` and `progress_table`.
    #[serde(default = "default_schema")]
    pub schema: String,
    /// The table written.
    pub table: String,
    /// This sink's name in the progress table; default: `table`.
    #[serde(default)]
    pub name: Option<String>,
    /// Records the epochs each query has written.
    #[serde(default = "default_progress_table")]
    pub progress_table: String,
    /// Create `table` from the operator's output columns if missing.
    #[serde(default = "yes")]
    pub create_table: bool,
    /// `auto` (default), `insert` or `copy`.
    #[serde(default)]
    pub write_method: WriteMethod,
    /// Rows from which `write_method = "auto"` uses COPY.
    #[serde(default = "default_copy_threshold")]
    pub copy_threshold: usize,
    /// How long start-up waits for the server.
    #[serde(default = "default_timeout", with = "weir_core::duration")]
    pub timeout: Duration,
}

fn default_schema() -> String {
    "public".into()
}

fn default_progress_table() -> String {
    DEFAULT_PROGRESS_TABLE.into()
}

fn yes() -> bool {
    true
}

fn default_copy_threshold() -> usize {
    DEFAULT_COPY_THRESHOLD
}

fn default_timeout() -> Duration {
    DEFAULT_TIMEOUT
}

impl PostgresSinkConfig {
    /// The connection string, from `url` or the environment.
    pub fn url(&self) -> Result<String> {
        if let Some(url) = &self.url {
            return Ok(url.clone());
        }
        let var = self.url_env.as_deref().unwrap_or(DEFAULT_URL_ENV);
        match std::env::var(var) {
            Ok(v) if !v.trim().is_empty() => Ok(v),
            _ => bail!(
                "`sink.url` is not set and the environment variable {var} (`sink.url_env`) is \
                 empty; set one of them to a connection string such as \
                 postgresql://user:password@127.0.0.1:5432/fraud"
            ),
        }
    }
}

impl SinkConnector for PostgresSinkConfig {
    const KIND: &'static str = "postgres";

    fn validate(&self) -> Result<()> {
        if self.url.is_some() && self.url_env.is_some() {
            bail!("`sink.url` and `sink.url_env` are both set; keep one");
        }
        if let Some(url) = &self.url {
            connection_config(url, self.timeout, "weir").context("`sink.url`")?;
        }
        for (key, value) in [
            ("schema", Some(&self.schema)),
            ("table", Some(&self.table)),
            ("name", self.name.as_ref()),
            ("progress_table", Some(&self.progress_table)),
            ("url_env", self.url_env.as_ref()),
        ] {
            if value.is_some_and(|v| v.trim().is_empty()) {
                bail!("`sink.{key}` must not be empty");
            }
        }
        if self.timeout.is_zero() {
            bail!("`sink.timeout` must be longer than zero");
        }
        Ok(())
    }

    fn identity(&self) -> Result<String> {
        let cfg = connection_config(&self.url()?, self.timeout, "weir")?;
        Ok(format!(
            "postgres:{}/{}.{}",
            location(&cfg),
            self.schema,
            self.table
        ))
    }

    fn open(&self, ctx: &SinkContext<'_>) -> Result<Box<dyn Sink>> {
        let table = |name: &str| TableName {
            schema: self.schema.clone(),
            table: name.to_string(),
        };
        Ok(Box::new(PostgresSink::new(PostgresSinkSettings {
            url: self.url()?,
            table: table(&self.table),
            progress_table: table(&self.progress_table),
            sink_name: task_sink_name(self.name.as_deref().unwrap_or(&self.table), ctx.task),
            create_table: self.create_table,
            write_method: self.write_method,
            copy_threshold: self.copy_threshold,
            timeout: self.timeout,
            query_id: ctx.query_id.to_string(),
            application_name: format!("weir:{}", ctx.pipeline),
        })?))
    }
}

/// The name task `task`'s writer claims epochs under in the progress
/// table: the sink's own for task 0, `<name>/task-<T>` for the others, so
/// each task's share of an epoch is claimed, written and skipped on replay
/// on its own.
fn task_sink_name(name: &str, task: u16) -> String {
    match task {
        0 => name.to_string(),
        t => format!("{name}/task-{t}"),
    }
}
