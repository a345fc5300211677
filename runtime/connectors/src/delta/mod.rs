//! Delta Lake: a table (a local directory or an `s3://` prefix) the sink
//! appends one commit per epoch to, for analysts' Spark, Trino, DuckDB or
//! delta-rs readers. Weir writes the log itself ([`log`]): Parquet data
//! files, `add` and `txn` actions in JSON commits created only if absent.
//! `deltalake` (delta-rs) builds on arrow 59 and Weir on arrow 60, and
//! `delta_kernel` brings a second object store, HTTP and TLS stack to the
//! build; an appending writer needs a small part of the protocol, and the
//! tests read every table Weir writes with delta-rs's own Python reader.

pub mod log;
pub mod schema;
pub mod sink;
pub mod store;

pub use sink::DeltaSink;

use crate::connector::{SinkConnector, SinkContext};
use crate::s3::{ObjectStoreSettings, S3Url};
use anyhow::{anyhow, bail, Result};
use serde::Deserialize;
use std::path::{Path, PathBuf};
use store::TableStore;
use weir_core::sink::Sink;

/// `kind = "delta"` in `[sink]`: a Delta table, one commit per epoch.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeltaSinkConfig {
    /// The table: a directory (`lake/alerts`, relative to the pipeline
    /// file) or `s3://bucket/prefix`. Created on the first epoch with the
    /// operator's output schema if it has no log yet.
    pub path: PathBuf,
    /// For `s3://` tables: the store's URL, for servers other than AWS.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// For `s3://` tables: the region (default `AWS_REGION`, else us-east-1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
    /// For `s3://` tables: allow a plain `http://` endpoint.
    #[serde(default)]
    pub allow_http: bool,
    /// PEM file of extra authorities for an `https://` endpoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_file: Option<PathBuf>,
}

impl DeltaSinkConfig {
    fn store_settings(&self) -> ObjectStoreSettings {
        ObjectStoreSettings {
            endpoint: self.endpoint.clone(),
            region: self.region.clone(),
            allow_http: self.allow_http,
            ca_file: self.ca_file.clone(),
        }
    }

    fn s3_url(&self) -> Option<&str> {
        self.path.to_str().filter(|p| p.starts_with("s3://"))
    }
}

impl SinkConnector for DeltaSinkConfig {
    const KIND: &'static str = "delta";

    fn validate(&self) -> Result<()> {
        match self.s3_url() {
            Some(url) => {
                S3Url::parse(url).map_err(|e| anyhow!("`sink.path`: {e:#}"))?;
                self.store_settings().check("sink")?;
            }
            None if self.endpoint.is_some() || self.region.is_some() => {
                bail!("`sink.endpoint` and `sink.region` are for s3:// tables only")
            }
            None => {}
        }
        Ok(())
    }

    fn paths(&mut self) -> Vec<&mut PathBuf> {
        let local = self.s3_url().is_none();
        let mut paths: Vec<&mut PathBuf> = self.ca_file.as_mut().into_iter().collect();
        if local {
            paths.push(&mut self.path);
        }
        paths
    }

    fn output_dir(&self) -> Option<&Path> {
        self.s3_url().is_none().then_some(self.path.as_path())
    }

    fn identity(&self) -> Result<String> {
        Ok(format!("delta:{}", self.path.display()))
    }

    fn open(&self, ctx: &SinkContext<'_>) -> Result<Box<dyn Sink>> {
        let store = TableStore::open(&self.path, &self.store_settings())?;
        Ok(Box::new(DeltaSink::open(
            store,
            ctx.query_id,
            &ctx.writer_id(),
        )?))
    }
}
