//! `[[lookup]]`: reference tables the host keeps for the operator.

use anyhow::{bail, Result};
use serde::Deserialize;
use std::path::PathBuf;
use std::time::Duration;
use weir_core::schema::{self, ColumnConfig};

/// One reference table: a file or a PostgreSQL query, keyed by one of its
/// columns.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LookupConfig {
    /// The name operators look it up by (`cards`).
    pub name: String,
    /// The key column (utf8 or int64), unique per row.
    pub key: String,
    /// The file: `.csv` (with a header row), `.jsonl` or `.parquet`;
    /// relative to the pipeline file. Or:
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<PathBuf>,
    /// A PostgreSQL query whose rows are the table (columns by name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub query: Option<String>,
    /// For `query`: the connection string; else read from `url_env`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// For `query`: the environment variable holding the connection string
    /// (default `WEIR_POSTGRES_URL`), so the password stays out of the file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url_env: Option<String>,
    /// The table's columns, the key among them.
    pub schema: Vec<ColumnConfig>,
    /// How often to look for a new version, e.g. "30s": a changed file is
    /// read, a query run again; new content takes effect at the next epoch.
    /// Default 0: loaded once, at start.
    #[serde(default, with = "weir_core::duration")]
    pub refresh: Duration,
}

impl LookupConfig {
    /// Checks the settings without reading the file, naming the bad key.
    pub fn validate(&self) -> Result<()> {
        let name_ok = !self.name.is_empty()
            && self.name.len() <= 64
            && self
                .name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-');
        if !name_ok {
            bail!(
                "`lookup.name` = `{}`: 1 to 64 lowercase letters, digits, `_` or `-`",
                self.name
            );
        }
        match (&self.path, &self.query) {
            (Some(_), None) if self.url.is_some() || self.url_env.is_some() => bail!(
                "lookup `{}`: `url` and `url_env` go with `query`, not `path`",
                self.name
            ),
            (Some(_), None) | (None, Some(_)) => {}
            _ => bail!(
                "lookup `{}`: give either `path` (a file) or `query` (PostgreSQL)",
                self.name
            ),
        }
        schema::check(&self.schema)?;
        match self.schema.iter().find(|c| c.name == self.key) {
            None => bail!(
                "lookup `{}`: the key `{}` is not among its columns",
                self.name,
                self.key
            ),
            Some(c)
                if !matches!(
                    c.data_type,
                    schema::ColumnType::Utf8 | schema::ColumnType::Int64
                ) =>
            {
                bail!(
                    "lookup `{}`: the key `{}` must be utf8 or int64",
                    self.name,
                    self.key
                )
            }
            Some(_) => Ok(()),
        }
    }
}

impl LookupConfig {
    /// The connection string of a `query` table, from `url` or the
    /// environment.
    pub fn connection_string(&self) -> Result<String> {
        if let Some(url) = &self.url {
            return Ok(url.clone());
        }
        let var = self
            .url_env
            .as_deref()
            .unwrap_or(weir_connectors::postgres::config::DEFAULT_URL_ENV);
        match std::env::var(var) {
            Ok(v) if !v.trim().is_empty() => Ok(v),
            _ => bail!(
                "lookup `{}`: `url` is not set and the environment variable {var} is empty",
                self.name
            ),
        }
    }

    /// Where the rows come from, for messages (never a password).
    pub fn origin(&self) -> String {
        match &self.path {
            Some(p) => p.display().to_string(),
            None => "a PostgreSQL query".to_string(),
        }
    }
}
