//! `weir operator test` over several inputs: one epoch per input file,
//! through a real pipeline in a scratch directory (files source, the
//! engine, its state store and WALs, a files sink), so that what an
//! operator keeps across epochs — keyed state, lists, timers — is tested
//! too, and the final no-data epoch closes what the watermark passed.
//! Schema, `[event_time]`, limits, grants and config come from the
//! pipeline file when given, as they would in production; `--state` seeds
//! the state before the first epoch.

use super::TestOptions;
use anyhow::{Context, Result};
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, SystemTime};
use weir_connectors::files::FileSink;
use weir_engine::config::PipelineConfig;
use weir_engine::versions::validate;
use weir_host::WasmHost;

/// What one epoch of the test took in and gave out.
#[derive(Debug, Clone)]
pub struct EpochOutput {
    pub epoch: u64,
    pub rows_in: u64,
    /// Run without input so timers the watermark passed fire.
    pub no_data: bool,
    /// Output rows as JSON lines, columns in the operator's order.
    pub lines: Vec<String>,
}

/// Runs `opts.inputs` through the component, one epoch per input.
pub fn test_epochs(host: &WasmHost, opts: &TestOptions) -> Result<Vec<EpochOutput>> {
    super::in_scratch(|scratch| run_in(host, opts, scratch))
}

fn run_in(host: &WasmHost, opts: &TestOptions, dir: &Path) -> Result<Vec<EpochOutput>> {
    stage_inputs(&opts.inputs, &dir.join("input"))?;
    let toml = pipeline_toml(opts, dir)?;
    // Paths the user's pipeline file gives (lookup tables, artifacts) are
    // relative to it; the scratch ones are absolute.
    let base = match opts.pipeline.as_deref().and_then(Path::parent) {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        Some(_) => std::path::PathBuf::from("."),
        None => dir.to_path_buf(),
    };
    let cfg = PipelineConfig::parse(&toml, &base).context("the test pipeline")?;
    if let Some(path) = &opts.state {
        let root = dir.join("checkpoint").join("state");
        super::seed::seed_file(path, &root, &cfg.operator.state_namespace)?;
    }
    let options = weir_engine::OpenOptions {
        ephemeral_checkpoint_ok: true,
        ..Default::default()
    };
    let mut pipeline = weir_engine::open(&cfg, host, options)?;
    let mut progress = Vec::new();
    pipeline.run(host, &AtomicBool::new(false), &mut |p| {
        progress.push(p.clone())
    })?;
    drop(pipeline);
    let mut epochs = Vec::with_capacity(progress.len());
    for p in progress {
        let mut text = String::new();
        for file in FileSink::epoch_files(&dir.join("out"), p.epoch)? {
            text += &std::fs::read_to_string(&file)
                .with_context(|| format!("reading {}", file.display()))?;
        }
        epochs.push(EpochOutput {
            epoch: p.epoch,
            rows_in: p.rows_in,
            no_data: p.rows_in == 0,
            lines: text.lines().map(String::from).collect(),
        });
    }
    if let Some(path) = &opts.expect {
        let all: Vec<String> = epochs.iter().flat_map(|e| e.lines.clone()).collect();
        let got = validate::parse_rows(all.join("\n").as_bytes())
            .map_err(|e| anyhow::anyhow!("reading the output: {e}"))?;
        super::check_expected(path, &got)?;
    }
    Ok(epochs)
}

/// Copies the inputs into the source directory, dated in order so the
/// files source reads one per epoch, first to last.
fn stage_inputs(inputs: &[std::path::PathBuf], to: &Path) -> Result<()> {
    std::fs::create_dir_all(to).with_context(|| format!("creating {}", to.display()))?;
    for (n, input) in inputs.iter().enumerate() {
        let staged = to.join(format!("epoch-{n:04}.jsonl"));
        std::fs::copy(input, &staged).with_context(|| format!("reading {}", input.display()))?;
        let t = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000 + n as u64);
        std::fs::File::options()
            .write(true)
            .open(&staged)
            .and_then(|f| f.set_modified(t))
            .with_context(|| format!("dating {}", staged.display()))?;
    }
    Ok(())
}

/// The scratch pipeline: the user's pipeline file (if any) for the source
/// schema, `[event_time]`, `batch_rows` and `[operator]`, with the source,
/// sink, trigger and checkpoint replaced by the scratch ones.
fn pipeline_toml(opts: &TestOptions, dir: &Path) -> Result<String> {
    let mut doc: toml::Table = match &opts.pipeline {
        Some(path) => {
            let text = String::from_utf8(super::read(path)?)
                .with_context(|| format!("{} is not UTF-8", path.display()))?;
            toml::from_str(&text)
                .with_context(|| format!("{} is not valid TOML", path.display()))?
        }
        None => toml::Table::new(),
    };
    let schema = match doc
        .get("source")
        .and_then(|s| s.get("schema"))
        .or_else(|| doc.get("schema"))
    {
        Some(schema) => schema.clone(),
        None => toml::from_str::<toml::Table>(weir_connectors::generator::payments::SCHEMA_TOML)
            .context("the built-in payment schema")?
            .remove("schema")
            .context("the built-in payment schema has no columns")?,
    };
    let mut operator = doc
        .remove("operator")
        .and_then(|o| o.as_table().cloned())
        .unwrap_or_default();
    let component = std::fs::canonicalize(&opts.component)
        .with_context(|| format!("reading {}", opts.component.display()))?;
    operator.insert("path".into(), path_value(&component));
    operator.insert("on_error".into(), "fail".into());
    if let Some(path) = &opts.config {
        let json: serde_json::Value =
            serde_json::from_str(&weir_admin::client::config_json(path)?)?;
        let config = toml::Value::try_from(json)
            .with_context(|| format!("{}: TOML has no null; leave the key out", path.display()))?;
        operator.insert("config".into(), config);
    }
    let mut source = toml::Table::new();
    source.insert("kind".into(), "files".into());
    source.insert("path".into(), path_value(&dir.join("input")));
    source.insert("max_files_per_trigger".into(), 1.into());
    source.insert("schema".into(), schema);
    let mut sink = toml::Table::new();
    sink.insert("kind".into(), "files".into());
    sink.insert("path".into(), path_value(&dir.join("out")));
    if let Some(output) = &opts.output {
        sink.insert("output".into(), output.as_str().into());
    }
    let mut trigger = toml::Table::new();
    trigger.insert("mode".into(), "available-now".into());
    doc.remove("schema");
    doc.insert("name".into(), "operator-test".into());
    doc.insert("checkpoint".into(), path_value(&dir.join("checkpoint")));
    doc.insert("trigger".into(), trigger.into());
    doc.insert("source".into(), source.into());
    doc.insert("sink".into(), sink.into());
    doc.insert("operator".into(), operator.into());
    // The scratch run's own state, WAL and progress settings.
    for key in ["admin", "progress", "state", "wal"] {
        doc.remove(key);
    }
    toml::to_string(&doc).context("writing the test pipeline")
}

fn path_value(path: &Path) -> toml::Value {
    toml::Value::String(path.display().to_string())
}
