//! Tools for people writing operators: `weir operator test` runs a
//! component over sample rows outside any pipeline, and `weir operator new`
//! scaffolds a buildable operator project in Rust, Python or JavaScript
//! ([`scaffold`]).

mod epochs;
pub mod scaffold;
mod seed;

pub use epochs::{test_epochs, EpochOutput};

use anyhow::{bail, Context, Result};
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};
use weir_core::artifacts::Artifacts;
use weir_engine::config::{ColumnConfig, PipelineConfig};
use weir_engine::versions::runner::Runner;
use weir_engine::versions::validate::{self, Checks, Setup};
use weir_host::{Grants, Limits, WasmHost};
use weir_state::{SnapshotPolicy, StateStore};

/// What `weir operator test` runs.
#[derive(Debug, Clone, Default)]
pub struct TestOptions {
    pub component: PathBuf,
    /// JSON lines in the source schema: one epoch per file.
    pub inputs: Vec<PathBuf>,
    /// Operator config (.json or .toml); default: the pipeline's, else `{}`.
    pub config: Option<PathBuf>,
    /// A pipeline file to take the source schema, config, limits and grants from.
    pub pipeline: Option<PathBuf>,
    /// The exact output rows expected (JSON lines).
    pub expect: Option<PathBuf>,
    /// Keyed state to start from (JSON lines, see the `seed` module); default: empty.
    pub state: Option<PathBuf>,
    /// The named output whose rows are printed and checked; default: the
    /// rows `process` returns.
    pub output: Option<String>,
    /// Artifacts (name, file) over the pipeline's `[operator] artifacts`.
    pub artifacts: Vec<(String, PathBuf)>,
}

/// What a test run produced.
#[derive(Debug, Clone)]
pub struct TestReport {
    pub rows_in: u64,
    /// The output's columns, in the operator's order.
    pub columns: Vec<String>,
    pub rows: Vec<Map<String, Value>>,
}

impl TestReport {
    /// Row `row` as one JSON line, its columns in the operator's order.
    pub fn line(&self, row: &Map<String, Value>) -> String {
        let mut out = String::from("{");
        let ordered = self
            .columns
            .iter()
            .filter_map(|c| row.get_key_value(c))
            .chain(row.iter().filter(|(k, _)| !self.columns.contains(k)));
        for (i, (key, value)) in ordered.enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str(&Value::String(key.clone()).to_string());
            out.push(':');
            out.push_str(&value.to_string());
        }
        out.push('}');
        out
    }
}

#[derive(serde::Deserialize)]
struct SchemaDoc {
    schema: Vec<ColumnConfig>,
}

/// The columns of the demo's payments: the default input schema.
pub fn demo_schema() -> Result<Vec<ColumnConfig>> {
    let doc: SchemaDoc = toml::from_str(weir_connectors::generator::payments::SCHEMA_TOML)
        .context("the built-in payment schema")?;
    Ok(doc.schema)
}

/// Whether the test must run as a pipeline's epochs ([`test_epochs`])
/// even over one input: the pipeline file gives the operator reference
/// tables or event time (so timers, which fire in a no-data epoch at the
/// end), which one sample run has neither of.
pub fn needs_epochs(opts: &TestOptions) -> Result<bool> {
    if opts.inputs.len() > 1 {
        return Ok(true);
    }
    let Some(path) = &opts.pipeline else {
        return Ok(false);
    };
    let p = PipelineConfig::load(path)?;
    Ok(opts.output.is_none() && (!p.lookups.is_empty() || p.event_time.is_some()))
}

/// Runs the component over the sample input as one epoch, against an
/// empty keyed state (or `opts.state`); with `expect`, the output must match it row by row.
pub fn test_operator(host: &WasmHost, opts: &TestOptions) -> Result<TestReport> {
    let pipeline = opts
        .pipeline
        .as_deref()
        .map(PipelineConfig::load)
        .transpose()?;
    let (schema, limits, grants, batch_rows) = match &pipeline {
        Some(p) => {
            let schema = p.source.columns().to_vec();
            (schema, p.operator.limits, p.operator.grants, p.batch_rows)
        }
        None => (demo_schema()?, Limits::default(), Grants::default(), 10_000),
    };
    let namespace = pipeline.as_ref().map_or_else(
        || "operator".to_string(),
        |p| p.operator.state_namespace.clone(),
    );
    let config = match (&opts.config, &pipeline) {
        (Some(path), _) => weir_admin::client::config_json(path)?,
        (None, Some(p)) => p.operator.config_json.clone(),
        (None, None) => "{}".to_string(),
    };
    let mut artifacts = match &pipeline {
        Some(p) => p.operator_artifacts()?,
        None => Default::default(),
    };
    for (name, path) in &opts.artifacts {
        artifacts.insert(name.clone(), read(path)?);
    }
    let setup = Setup {
        config_json: config,
        artifacts: std::sync::Arc::new(Artifacts::in_memory(artifacts)),
    };
    let wasm = read(&opts.component)?;
    let input = match opts.inputs.as_slice() {
        [one] => read(one)?,
        _ => bail!("one input per run here; several go through `test_epochs`"),
    };
    in_scratch(|scratch| {
        if let Some(path) = &opts.state {
            seed::seed_file(path, scratch, &namespace)?;
        }
        let (state, _) = StateStore::open(scratch, SnapshotPolicy::default(), None)
            .context("creating a scratch state store")?;
        let checks = Checks {
            runner: Runner::new("operator-test", limits),
            host: host.clone(),
            grants,
            namespace,
            state: state.reader(),
            input_schema: weir_core::schema::arrow_schema(&schema),
            batch_rows,
            lookups: Default::default(),
        };
        let operator = checks
            .component(&wasm, &setup)
            .map_err(|why| anyhow::anyhow!("{}: {why}", opts.component.display()))?;
        let sampled = checks
            .sample(
                &operator,
                &setup,
                &input,
                "sample input",
                opts.output
                    .as_deref()
                    .unwrap_or(weir_core::outputs::DEFAULT),
            )
            .map_err(|why| anyhow::anyhow!("{why}"))?;
        if let Some(path) = &opts.expect {
            check_expected(path, &sampled.rows)?;
        }
        Ok(TestReport {
            rows_in: sampled.rows_in,
            columns: sampled.columns,
            rows: sampled.rows,
        })
    })
}

/// Runs `f` in a new scratch directory under the system's temporary one,
/// removed afterwards whatever `f` returned.
pub(crate) fn in_scratch<T>(f: impl FnOnce(&Path) -> Result<T>) -> Result<T> {
    let scratch = std::env::temp_dir().join(format!("weir-operator-test-{}", uuid::Uuid::new_v4()));
    let result = f(&scratch);
    let _ = std::fs::remove_dir_all(&scratch);
    result
}

/// `got` must equal the rows of the `--expect` file at `path`, row by row.
fn check_expected(path: &Path, got: &[Map<String, Value>]) -> Result<()> {
    let expected = validate::parse_rows(&read(path)?)
        .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    if let Err(why) = validate::compare(&expected, got) {
        bail!("{}: {why}", path.display());
    }
    Ok(())
}

fn read(path: &Path) -> Result<Vec<u8>> {
    std::fs::read(path).with_context(|| format!("reading {}", path.display()))
}
