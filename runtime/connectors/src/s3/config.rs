//! `kind = "s3"` in `[source]`.

use super::{ObjectStoreSettings, S3Client, S3Source, S3Url};
use crate::connector::{SourceConnector, SourceContext};
use anyhow::{bail, Result};
use arrow_schema::SchemaRef;
use serde::Deserialize;
use std::path::{Path, PathBuf};
use weir_core::json::{JsonDecoder, MalformedPolicy};
use weir_core::schema::{self, ColumnConfig};

/// Objects under an `s3://bucket/prefix`, each planned once: the files
/// source over a bucket. Credentials come only from the environment.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct S3SourceConfig {
    /// `s3://bucket/prefix`: every object under the prefix is input.
    pub url: String,
    /// The columns of each record.
    pub schema: Vec<ColumnConfig>,
    /// Most objects one epoch takes (default 100).
    #[serde(default = "default_max_files")]
    pub max_files_per_trigger: usize,
    /// What a line that does not parse does (default: fail the epoch).
    #[serde(default)]
    pub on_malformed: MalformedPolicy,
    /// Directory for dead letters; default `<checkpoint>/dead-letter`.
    #[serde(default)]
    pub dead_letter: Option<PathBuf>,
    /// The store's URL, for servers other than AWS (`http://127.0.0.1:9000`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// The region (default: `AWS_REGION`, else `us-east-1`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
    /// Allow a plain `http://` endpoint (off by default).
    #[serde(default)]
    pub allow_http: bool,
    /// PEM file of extra authorities for an `https://` endpoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_file: Option<PathBuf>,
}

fn default_max_files() -> usize {
    100
}

impl S3SourceConfig {
    fn store_settings(&self) -> ObjectStoreSettings {
        ObjectStoreSettings {
            endpoint: self.endpoint.clone(),
            region: self.region.clone(),
            allow_http: self.allow_http,
            ca_file: self.ca_file.clone(),
        }
    }
}

impl SourceConnector for S3SourceConfig {
    const KIND: &'static str = "s3";
    type Source = S3Source;

    fn validate(&self) -> Result<()> {
        S3Url::parse(&self.url).map_err(|e| anyhow::anyhow!("`source.url`: {e:#}"))?;
        if self.max_files_per_trigger == 0 {
            bail!("`source.max_files_per_trigger` must be at least 1");
        }
        self.store_settings().check("source")?;
        schema::check(&self.schema)
    }

    fn paths(&mut self) -> Vec<&mut PathBuf> {
        let mut paths: Vec<&mut PathBuf> = self.dead_letter.as_mut().into_iter().collect();
        paths.extend(self.ca_file.as_mut());
        paths
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

    fn open(&self, ctx: &SourceContext<'_>) -> Result<S3Source> {
        let client = S3Client::open(&self.url, &self.store_settings())?;
        let decoder = JsonDecoder::new(
            schema::arrow_schema(&self.schema),
            ctx.batch_rows,
            self.on_malformed,
        );
        Ok(S3Source::new(client, decoder, self.max_files_per_trigger))
    }
}
