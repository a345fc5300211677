//! Every connector Weir has, by `kind`: the one place a new connector is
//! registered (one line in [`SOURCES`] or [`SINKS`]). The pipeline file's
//! `[source]` and `[sink]` tables are turned into typed settings here.

use crate::connector::{SinkConnector, SinkSettings, SourceConnector, SourceSettings};
use crate::{console, delta, files, generator, kafka, parquet, postgres, s3};
use anyhow::{anyhow, Result};
use serde::de::DeserializeOwned;

/// A source connector's entry: its kind and how its table is parsed.
pub struct SourceKind {
    /// `kind = "…"` in `[source]`.
    pub kind: &'static str,
    /// Parses the table (without `kind`) into the connector's settings.
    pub parse: fn(toml::Table) -> Result<Box<dyn SourceSettings>>,
}

/// A sink connector's entry: its kind and how its table is parsed.
pub struct SinkKind {
    /// `kind = "…"` in `[sink]`.
    pub kind: &'static str,
    /// Parses the table (without `kind`) into the connector's settings.
    pub parse: fn(toml::Table) -> Result<Box<dyn SinkSettings>>,
}

/// The source connectors.
pub const SOURCES: &[SourceKind] = &[
    source::<files::FilesSourceConfig>(),
    source::<kafka::KafkaSourceConfig>(),
    source::<generator::GeneratorSourceConfig>(),
    source::<s3::S3SourceConfig>(),
];

/// The sink connectors.
pub const SINKS: &[SinkKind] = &[
    sink::<files::FilesSinkConfig>(),
    sink::<console::ConsoleSinkConfig>(),
    sink::<kafka::KafkaSinkConfig>(),
    sink::<postgres::PostgresSinkConfig>(),
    sink::<parquet::ParquetSinkConfig>(),
    sink::<delta::DeltaSinkConfig>(),
];

const fn source<C: SourceConnector>() -> SourceKind {
    SourceKind {
        kind: C::KIND,
        parse: parse_source::<C>,
    }
}

const fn sink<C: SinkConnector>() -> SinkKind {
    SinkKind {
        kind: C::KIND,
        parse: parse_sink::<C>,
    }
}

/// A connector's table as its typed settings (unknown keys named).
fn typed<C: DeserializeOwned>(table: toml::Table) -> Result<C> {
    toml::Value::Table(table)
        .try_into()
        .map_err(|e| anyhow!("{e}"))
}

fn parse_source<C: SourceConnector>(table: toml::Table) -> Result<Box<dyn SourceSettings>> {
    Ok(Box::new(typed::<C>(table)?))
}

fn parse_sink<C: SinkConnector>(table: toml::Table) -> Result<Box<dyn SinkSettings>> {
    Ok(Box::new(typed::<C>(table)?))
}

/// Splits `kind` off a `[source]`/`[sink]` table.
fn kind_of(section: &str, mut table: toml::Table, known: &[&str]) -> Result<(String, toml::Table)> {
    match table.remove("kind") {
        Some(toml::Value::String(kind)) => Ok((kind, table)),
        Some(other) => Err(anyhow!("`{section}.kind` must be a string, not {other}")),
        None => Err(anyhow!(
            "missing field `kind` in `[{section}]`; one of: {}",
            known.join(", ")
        )),
    }
}

/// The settings of the `[source]` table `table`.
pub fn source_settings(table: toml::Table) -> Result<Box<dyn SourceSettings>> {
    let known: Vec<&str> = SOURCES.iter().map(|s| s.kind).collect();
    let (kind, rest) = kind_of("source", table, &known)?;
    let entry = SOURCES
        .iter()
        .find(|s| s.kind == kind)
        .ok_or_else(|| anyhow!("unknown source kind `{kind}`; one of: {}", known.join(", ")))?;
    (entry.parse)(rest)
}

/// The settings of the `[sink]` table `table`.
pub fn sink_settings(table: toml::Table) -> Result<Box<dyn SinkSettings>> {
    let known: Vec<&str> = SINKS.iter().map(|s| s.kind).collect();
    let (kind, rest) = kind_of("sink", table, &known)?;
    let entry = SINKS
        .iter()
        .find(|s| s.kind == kind)
        .ok_or_else(|| anyhow!("unknown sink kind `{kind}`; one of: {}", known.join(", ")))?;
    (entry.parse)(rest)
}
