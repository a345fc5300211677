//! `[[lookup]]`: reference tables the host keeps for the operator.

use anyhow::{bail, Result};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::time::Duration;
use weir_core::schema::{self, ColumnConfig};

/// One reference table: a file, keyed by one of its columns.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LookupConfig {
    /// The name operators look it up by (`cards`).
    pub name: String,
    /// The key column (utf8 or int64), unique per row.
    pub key: String,
    /// The file: `.csv` (with a header row), `.jsonl` or `.parquet`;
    /// relative to the pipeline file.
    pub path: PathBuf,
    /// The table's columns, the key among them.
    pub schema: Vec<ColumnConfig>,
    /// How often to look at the file for a new version, e.g. "30s"; a
    /// changed file is loaded and takes effect at the next epoch. Default
    /// 0: loaded once, at start.
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
