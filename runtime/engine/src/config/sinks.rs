//! `[sink]` or `[[sink]]`: where each of the operator's outputs goes.
//!
//! One `[sink]` table is today's pipeline: the operator's default output
//! to one connector. `[[sink]]` tables route named outputs, each to its own
//! connector (`output = "scores"`), the default output where a table names
//! none; several sinks may take one output. Each table is a connector's own
//! settings plus `name` (default: the output's name; it keeps the sink's
//! writes apart from the others', e.g. Kafka transactional ids) and
//! `output`.

use super::SinkConfig;
use anyhow::{anyhow, bail, Result};
use serde::Deserialize;
use std::collections::HashSet;
use weir_connectors::registry;
use weir_core::outputs::{self, DEFAULT};

/// The keys every `[sink]` and `[[sink]]` table has besides its
/// connector's. One `[sink]` takes the operator's default output (the rows
/// `process` returns); `[[sink]]` tables route the operator's named
/// outputs, each to its own connector, and several sinks may take one
/// output.
// Read from the two keys it names (the rest of the table is the
// connector's), so unknown keys are the connector's to refuse.
#[derive(Debug, Deserialize)]
pub struct SinkRouting {
    /// The operator output the sink takes: a name the operator emits to
    /// (e.g. `scores`), or `default` for the rows `process` returns.
    #[serde(default = "default_output")]
    pub output: String,
    /// The sink's name, unique in the pipeline: it keeps the sink's writes
    /// apart from the others' (Kafka transactional ids, the PostgreSQL
    /// progress rows). Default: the output's name.
    pub name: Option<String>,
}

fn default_output() -> String {
    "default".into()
}

/// One sink of the pipeline.
#[derive(Debug, Clone)]
pub struct OutputSink {
    /// The sink's name, unique in the pipeline.
    pub name: String,
    /// The operator output it takes.
    pub output: String,
    /// The connector and its settings.
    pub settings: SinkConfig,
}

/// The pipeline's sinks, at least one, in the file's order.
#[derive(Debug, Clone)]
pub struct Sinks(Vec<OutputSink>);

impl Sinks {
    /// The sinks, in the file's order.
    pub fn iter(&self) -> std::slice::Iter<'_, OutputSink> {
        self.0.iter()
    }

    /// The sinks, to change their settings (paths made absolute).
    pub fn iter_mut(&mut self) -> std::slice::IterMut<'_, OutputSink> {
        self.0.iter_mut()
    }

    /// Whether the pipeline has one sink for the default output: the
    /// layout of a pipeline file from before named outputs.
    fn is_single(&self) -> bool {
        matches!(self.0.as_slice(), [only] if only.name == DEFAULT && only.output == DEFAULT)
    }

    /// The identity recorded in the checkpoint: the sink's own for a
    /// single one (as before named outputs), else every sink's
    /// `name=identity`. A checkpoint belongs to its set of sinks: an
    /// epoch committed there was delivered to each of them.
    pub fn identity(&self) -> Result<String> {
        if self.is_single() {
            return self.0[0].settings.identity();
        }
        let each: Vec<String> = self
            .0
            .iter()
            .map(|s| Ok(format!("{}={}", s.name, s.settings.identity()?)))
            .collect::<Result<_>>()?;
        Ok(each.join(", "))
    }

    /// Checks each sink's settings, the names, and that no two sinks write
    /// to the same place.
    pub fn validate(&self) -> Result<()> {
        let (mut names, mut places) = (HashSet::new(), HashSet::new());
        for s in &self.0 {
            s.settings
                .validate()
                .map_err(|e| anyhow!("sink `{}`: {e:#}", s.name))?;
            if !names.insert(&s.name) {
                bail!(
                    "two sinks are named `{}`: give each `[[sink]]` its own `name`",
                    s.name
                );
            }
            let place = s.settings.identity()?;
            if !places.insert(place.clone()) {
                bail!(
                    "sinks write to the same place twice ({place}); each sink needs its own \
                     table, topic or directory"
                );
            }
        }
        Ok(())
    }

    /// The same sinks (names and outputs), each a files sink under
    /// `dir/<name>`: what a replay that must touch nothing real opens
    /// (`weir explain`).
    pub fn as_scratch_files(&self, dir: &std::path::Path) -> Result<Sinks> {
        let tables = self
            .0
            .iter()
            .map(|s| {
                let mut t = toml::Table::new();
                t.insert("name".into(), s.name.clone().into());
                t.insert("output".into(), s.output.clone().into());
                t.insert("kind".into(), "files".into());
                let path = dir.join(&s.name).display().to_string();
                t.insert("path".into(), path.into());
                toml::Value::Table(t)
            })
            .collect();
        Sinks::parse(toml::Value::Array(tables))
    }

    fn parse(value: toml::Value) -> Result<Self> {
        let tables = match value {
            toml::Value::Table(t) => vec![t],
            toml::Value::Array(items) => items
                .into_iter()
                .map(|i| match i {
                    toml::Value::Table(t) => Ok(t),
                    other => Err(anyhow!("each `[[sink]]` must be a table, not {other}")),
                })
                .collect::<Result<_>>()?,
            other => bail!("`sink` must be a table (`[sink]`) or tables (`[[sink]]`), not {other}"),
        };
        if tables.is_empty() {
            bail!("`sink` needs at least one table");
        }
        let sinks = tables
            .into_iter()
            .enumerate()
            .map(|(i, t)| one_sink(t).map_err(|e| anyhow!("sink {}: {e:#}", i + 1)))
            .collect::<Result<_>>()?;
        Ok(Sinks(sinks))
    }
}

/// A sink's table: `name` and `output` taken off, the rest the connector's.
fn one_sink(mut table: toml::Table) -> Result<OutputSink> {
    let mut routing = toml::Table::new();
    for key in ["output", "name"] {
        match table.remove(key) {
            Some(value @ toml::Value::String(_)) => {
                routing.insert(key.into(), value);
            }
            Some(other) => bail!("`sink.{key}` must be a string, not {other}"),
            None => {}
        }
    }
    let routing: SinkRouting = toml::Value::Table(routing)
        .try_into()
        .map_err(|e| anyhow!("`sink`: {e}"))?;
    let output = routing.output;
    let name = routing.name.unwrap_or_else(|| output.clone());
    outputs::check_name(&output).map_err(|e| anyhow!("`sink.output`: {e:#}"))?;
    outputs::check_name(&name).map_err(|e| anyhow!("`sink.name`: {e:#}"))?;
    let settings = SinkConfig(registry::sink_settings(table)?);
    Ok(OutputSink {
        name,
        output,
        settings,
    })
}

impl<'de> Deserialize<'de> for Sinks {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let value = toml::Value::deserialize(d)?;
        Sinks::parse(value).map_err(|e| serde::de::Error::custom(format!("{e:#}")))
    }
}
