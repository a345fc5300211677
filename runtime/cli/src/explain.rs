//! `weir explain`: one decision replayed from the checkpoint alone — the
//! input row, the operator, config and artifact digests and the lookup
//! versions its epoch recorded, the state it read — with the score it gets
//! now compared bit for bit with the one the sink logged, and, for an
//! operator that reports its features (`f_<name>` columns, as
//! `fraud-model`'s `scores` output does), each feature's contribution.

use anyhow::{bail, Context, Result};
use arrow_array::{ArrayRef, Float64Array, RecordBatch};
use serde_json::{json, Map, Value};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use weir_core::outputs::output_of;
use weir_engine::config::PipelineConfig;
use weir_engine::explain::replay_epoch;
use weir_engine::pipeline::EpochReplay;
use weir_engine::versions::shadow::rows_as_json;
use weir_host::WasmHost;

/// What to explain.
pub struct ExplainRequest {
    pub pipeline: PathBuf,
    pub epoch: u64,
    /// The value of `column` that names the row (e.g. a `txn_id`).
    pub key: String,
    pub column: String,
}

/// Replays the epoch and describes the row, as JSON (`print_text` shows it
/// to a person).
pub fn explain(host: &WasmHost, req: &ExplainRequest) -> Result<Value> {
    let cfg = PipelineConfig::load(&req.pipeline)?;
    crate::devtools::in_scratch(|scratch| {
        std::fs::create_dir_all(scratch)
            .with_context(|| format!("creating {}", scratch.display()))?;
        explain_in(host, req, &cfg, scratch)
    })
}

fn explain_in(
    host: &WasmHost,
    req: &ExplainRequest,
    cfg: &PipelineConfig,
    scratch: &Path,
) -> Result<Value> {
    let (mut pipeline, replay) = replay_epoch(cfg, host, req.epoch, scratch)?;
    let outputs = matching_outputs(&replay, req)?;
    let emitted = outputs
        .values()
        .any(|rows| rows.as_array().is_some_and(|r| !r.is_empty()));
    let input = match matching_rows(&replay.input, &req.column, &req.key)?
        .into_iter()
        .next()
    {
        Some(row) => Some((req.epoch, row)),
        None if emitted => buffered_input(&mut pipeline, req)?,
        None => bail!(
            "epoch {} has no input or output row with {} = {:?}",
            req.epoch,
            req.column,
            req.key
        ),
    };
    let control = pipeline.control();
    let entry = &replay.entry;
    let artifacts =
        weir_core::artifacts::Artifacts::load(control.blobs(), entry.operator.artifacts.as_ref())?;
    let logged = logged_rows(cfg, req.epoch, req)?;
    // The state under the row's key: the input's, or for a row whose input
    // is gone from the log, the output's.
    let keyed_row = match &input {
        Some((_, row)) => Some(row.clone()),
        None => first_row(&outputs),
    };
    let state = match &keyed_row {
        Some(row) => state_read(cfg, &replay, row)?,
        None => Value::Null,
    };
    let mut report = json!({
        "pipeline": cfg.name,
        "epoch": entry.epoch,
        "epoch_time_ms": entry.epoch_time_ms,
        "operator": entry.operator.digest.to_string(),
        "version": control.version_of(&entry.operator),
        "config": entry.operator.config_digest.to_string(),
        "artifacts": artifacts.digests(),
        "lookups": entry.lookups,
        "watermark_ms": entry.watermark_ms,
        "input": input.as_ref().map(|(_, row)| row.clone()),
        "input_epoch": input.as_ref().map(|(epoch, _)| *epoch),
        "state": state,
        "outputs": outputs,
        "logged": logged,
    });
    if !emitted {
        report["emitted_in"] = match later_emission(cfg, req)? {
            Some((epoch, rows)) => json!({"epoch": epoch, "rows": rows}),
            None => Value::Null,
        };
    }
    if let Some(scored) = scored_row(&report["outputs"]) {
        report["score"] = score_report(&mut pipeline, host, &replay, &scored, &report["logged"])?;
    }
    Ok(report)
}

/// The replayed outputs' rows that match, by output.
fn matching_outputs(replay: &EpochReplay, req: &ExplainRequest) -> Result<Map<String, Value>> {
    let mut outputs = Map::new();
    for name in output_names(&replay.outputs) {
        let batches: Vec<RecordBatch> = replay
            .outputs
            .iter()
            .filter(|b| output_of(b) == name)
            .cloned()
            .collect();
        let rows = matching_rows(&batches, &req.column, &req.key)?;
        outputs.insert(
            name,
            Value::Array(rows.into_iter().map(Value::Object).collect()),
        );
    }
    Ok(outputs)
}

fn first_row(outputs: &Map<String, Value>) -> Option<Map<String, Value>> {
    outputs
        .values()
        .filter_map(Value::as_array)
        .flatten()
        .find_map(|row| row.as_object().cloned())
}

/// How many epochs an explanation looks through, before or after the one
/// asked about, for where a row held in state came in or went out.
const SCAN_EPOCHS: u64 = 1_000;

/// A row the epoch emitted without reading it: an operator held it in
/// state (a window) and a timer emitted it. Its input is looked for in the
/// epochs before, newest first, as far back as the offset log reaches and
/// at most [`SCAN_EPOCHS`]; `None` if it is not there (compaction took the
/// epoch that read it, or its input can no longer be read).
fn buffered_input(
    pipeline: &mut weir_engine::pipeline::Pipeline,
    req: &ExplainRequest,
) -> Result<Option<(u64, Map<String, Value>)>> {
    for epoch in (req.epoch.saturating_sub(SCAN_EPOCHS)..req.epoch).rev() {
        let batches = match pipeline.recorded_input(epoch) {
            Ok(Some(batches)) => batches,
            Ok(None) => return Ok(None),
            Err(e) => {
                tracing::warn!(
                    "epoch {epoch}'s input cannot be read again; looking no further back: {e:#}"
                );
                return Ok(None);
            }
        };
        if let Some(row) = matching_rows(&batches, &req.column, &req.key)?
            .into_iter()
            .next()
        {
            return Ok(Some((epoch, row)));
        }
    }
    Ok(None)
}

/// For a row read in epoch N that no output of N carries: the first later
/// committed epoch (at most [`SCAN_EPOCHS`] on) whose files sinks logged it (an operator that buffers
/// rows, as a window does, emits them when a timer fires).
fn later_emission(cfg: &PipelineConfig, req: &ExplainRequest) -> Result<Option<(u64, Value)>> {
    let commits = cfg.checkpoint.dir().join("commits");
    let mut epoch = req.epoch + 1;
    while epoch <= req.epoch + SCAN_EPOCHS && commits.join(epoch.to_string()).exists() {
        let logged = logged_rows(cfg, epoch, req)?;
        if logged
            .values()
            .any(|rows| rows.as_array().is_some_and(|r| !r.is_empty()))
        {
            return Ok(Some((epoch, Value::Object(logged))));
        }
        epoch += 1;
    }
    Ok(None)
}

/// The outputs present, `default` first.
fn output_names(batches: &[RecordBatch]) -> Vec<String> {
    let mut names: Vec<String> = batches.iter().map(|b| output_of(b).to_string()).collect();
    names.sort_by_key(|n| (n != weir_core::outputs::DEFAULT, n.clone()));
    names.dedup();
    names
}

/// The rows of `batches` whose `column` reads `key`, as JSON objects.
fn matching_rows(
    batches: &[RecordBatch],
    column: &str,
    key: &str,
) -> Result<Vec<Map<String, Value>>> {
    let mut out = Vec::new();
    for batch in batches {
        let Some(values) = batch.column_by_name(column) else {
            continue;
        };
        // A text column is compared as it is; only the matching rows
        // become JSON (an explanation may look through many epochs).
        if let Some(text) = values.as_any().downcast_ref::<arrow_array::StringArray>() {
            for (i, _) in text.iter().enumerate().filter(|(_, v)| *v == Some(key)) {
                out.extend(rows_as_json(&[batch.slice(i, 1)])?);
            }
            continue;
        }
        for row in rows_as_json(std::slice::from_ref(batch))? {
            if row.get(column).is_some_and(|v| text_of(v) == key) {
                out.push(row);
            }
        }
    }
    Ok(out)
}

fn text_of(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// What the files sinks of the real pipeline wrote for the row in
/// `epoch`, by output (other sinks are not read back here).
fn logged_rows(
    cfg: &PipelineConfig,
    epoch: u64,
    req: &ExplainRequest,
) -> Result<Map<String, Value>> {
    let mut logged = Map::new();
    for sink in cfg.sink.iter() {
        let identity = sink.settings.identity()?;
        let Some(dir) = identity.strip_prefix("files:") else {
            continue;
        };
        let files = weir_connectors::files::FileSink::epoch_files(Path::new(dir), epoch)?;
        let mut rows = Vec::new();
        for f in files {
            let text =
                std::fs::read_to_string(&f).with_context(|| format!("reading {}", f.display()))?;
            for line in text.lines().filter(|l| !l.trim().is_empty()) {
                let row: Map<String, Value> = serde_json::from_str(line)
                    .with_context(|| format!("a line of {}", f.display()))?;
                if row.get(&req.column).is_some_and(|v| text_of(v) == req.key) {
                    rows.push(Value::Object(row));
                }
            }
        }
        logged.insert(sink.output.clone(), Value::Array(rows));
    }
    Ok(logged)
}

/// The operator's committed state under the row's routing key (the
/// pipeline's `key` column), as the epoch read it.
fn state_read(
    cfg: &PipelineConfig,
    replay: &EpochReplay,
    row: &Map<String, Value>,
) -> Result<Value> {
    let Some(key_column) = &cfg.key else {
        return Ok(Value::Null);
    };
    let Some(key) = row.get(key_column).map(text_of) else {
        return Ok(Value::Null);
    };
    let mut full = weir_state::epoch::namespace_prefix(&replay.namespace);
    full.extend_from_slice(key.as_bytes());
    let value = replay.state.get(&full)?;
    Ok(json!({
        "key": key,
        "bytes": value.as_ref().map(Vec::len),
        "hex": value.map(|v| v.iter().take(64).map(|b| format!("{b:02x}")).collect::<String>()),
    }))
}

/// The replayed row that carries a `score` (and features), from any output.
fn scored_row(outputs: &Value) -> Option<(String, Map<String, Value>)> {
    let outputs = outputs.as_object()?;
    let mut best: Option<(String, Map<String, Value>)> = None;
    for (name, rows) in outputs {
        for row in rows.as_array()?.iter().filter_map(Value::as_object) {
            if !row.contains_key("score") {
                continue;
            }
            let features = row.keys().any(|k| k.starts_with("f_"));
            if best.is_none() || features {
                best = Some((name.clone(), row.clone()));
            }
        }
    }
    best
}

/// The replayed score against the logged one, and each feature's
/// contribution: how much the score falls when the feature alone is set
/// to 0, by the same version (same code, model and tables).
fn score_report(
    pipeline: &mut weir_engine::pipeline::Pipeline,
    host: &WasmHost,
    replay: &EpochReplay,
    (output, row): &(String, Map<String, Value>),
    logged: &Value,
) -> Result<Value> {
    let score = row["score"].as_f64().context("`score` is not a number")?;
    // The score as a files sink logged it: this output's, else any other
    // output's row with a score (the alerts carry the same score).
    let logged_in = std::iter::once(output.as_str())
        .chain(
            logged
                .as_object()
                .into_iter()
                .flatten()
                .map(|(k, _)| k.as_str()),
        )
        .find_map(|o| {
            let row = logged[o]
                .as_array()?
                .iter()
                .find(|r| r["score"].is_number())?;
            Some((o.to_string(), row["score"].as_f64()?))
        });
    let logged_score = logged_in.as_ref().map(|(_, s)| *s);
    let mut report = json!({
        "output": output,
        "replayed": score,
        "logged": logged_score,
        "logged_output": logged_in.map(|(o, _)| o),
        "identical": logged_score.map(|l| l.to_bits() == score.to_bits()),
    });
    let features: Vec<(String, f64)> = row
        .iter()
        .filter_map(|(k, v)| Some((k.strip_prefix("f_")?.to_string(), v.as_f64()?)))
        .collect();
    if features.is_empty() {
        return Ok(report);
    }
    let n = features.len();
    let columns: Vec<(String, ArrayRef)> = features
        .iter()
        .enumerate()
        .map(|(f, (name, value))| {
            let values: Float64Array = (0..=n)
                .map(|r| Some(if r == f + 1 { 0.0 } else { *value }))
                .collect();
            (format!("f_{name}"), Arc::new(values) as ArrayRef)
        })
        .collect();
    let batch = RecordBatch::try_from_iter(columns)?;
    let scored = pipeline.score_with(host, &replay.entry, batch)?;
    let rows = rows_as_json(
        &scored
            .into_iter()
            .filter(|b| output_of(b) == weir_core::outputs::DEFAULT)
            .collect::<Vec<_>>(),
    )?;
    let scores: Vec<f64> = rows.iter().filter_map(|r| r["score"].as_f64()).collect();
    if scores.len() != n + 1 {
        return Ok(report);
    }
    report["rescored"] = scores[0].into();
    report["features"] = features
        .iter()
        .enumerate()
        .map(|(f, (name, value))| json!({"name": name, "value": value, "contribution": scores[0] - scores[f + 1]}))
        .collect();
    Ok(report)
}

/// The report for a person.
pub fn print_text(r: &Value) {
    println!(
        "epoch {} of `{}` (epoch time {} ms)",
        r["epoch"],
        r["pipeline"].as_str().unwrap_or(""),
        r["epoch_time_ms"]
    );
    let version = r["version"]
        .as_u64()
        .map(|v| format!(" (version {v})"))
        .unwrap_or_default();
    println!(
        "  operator   {}{version}",
        r["operator"].as_str().unwrap_or("")
    );
    println!("  config     {}", r["config"].as_str().unwrap_or(""));
    for (name, digest) in r["artifacts"].as_object().into_iter().flatten() {
        println!("  artifact   {name} = {}", digest.as_str().unwrap_or(""));
    }
    for (name, digest) in r["lookups"].as_object().into_iter().flatten() {
        println!("  lookup     {name} = {}", digest.as_str().unwrap_or(""));
    }
    if let Some(w) = r["watermark_ms"].as_i64() {
        println!("  watermark  {w}");
    }
    print_input(r);
    if !r["state"].is_null() {
        let s = &r["state"];
        match s["bytes"].as_u64() {
            Some(b) => println!(
                "state  key {} held {b} bytes: {}",
                s["key"],
                s["hex"].as_str().unwrap_or("")
            ),
            None => println!("state  key {} held nothing", s["key"]),
        }
    }
    for (name, rows) in r["outputs"].as_object().into_iter().flatten() {
        for row in rows.as_array().into_iter().flatten() {
            println!("output {name}: {row}");
        }
    }
    print_emitted_later(r);
    let s = &r["score"];
    if s.is_null() {
        return;
    }
    match (s["logged"].as_f64(), s["identical"].as_bool()) {
        (Some(l), Some(true)) => println!(
            "score  {} (logged {l} in output `{}`: identical, bit for bit)",
            s["replayed"],
            s["logged_output"].as_str().unwrap_or("")
        ),
        (Some(l), _) => println!("score  {} (logged {l}: DIFFERENT)", s["replayed"]),
        (None, _) => println!(
            "score  {} (no files sink logged this output)",
            s["replayed"]
        ),
    }
    if let Some(features) = s["features"].as_array() {
        println!(
            "\n  feature          value   contribution (score minus score with the feature at 0)"
        );
        for f in features {
            println!(
                "  {:<14} {:>12}   {:+.6}",
                f["name"].as_str().unwrap_or(""),
                f["value"].to_string(),
                f["contribution"].as_f64().unwrap_or(0.0)
            );
        }
    }
}

/// The input row, and where it was read when that was an earlier epoch.
fn print_input(r: &Value) {
    match r["input_epoch"].as_u64() {
        Some(epoch) if Some(epoch) == r["epoch"].as_u64() => println!("input  {}", r["input"]),
        Some(epoch) => println!(
            "input  read in epoch {epoch} and held in the operator's state until a timer \
             fired in this epoch (watermark {}): {}",
            r["watermark_ms"], r["input"]
        ),
        None => println!(
            "input  held in the operator's state and emitted by a timer in this epoch; no \
             earlier epoch that can still be read (the offset log's, at most {SCAN_EPOCHS}) \
             has it"
        ),
    }
}

/// For a row this epoch read but did not emit: the later epoch that did.
fn print_emitted_later(r: &Value) {
    let Some(later) = r.get("emitted_in") else {
        return;
    };
    let Some(epoch) = later["epoch"].as_u64() else {
        println!(
            "note   no output of this epoch carries the row, and no files sink logged it in \
             the {SCAN_EPOCHS} committed epochs after: the operator dropped it, or holds it \
             in state (a window still open)"
        );
        return;
    };
    println!(
        "note   no output of this epoch carries the row: the operator held it in state, and \
         epoch {epoch} emitted it (`weir explain --epoch {epoch}` explains that)"
    );
    for (name, rows) in later["rows"].as_object().into_iter().flatten() {
        for row in rows.as_array().into_iter().flatten() {
            println!("       epoch {epoch} output {name}: {row}");
        }
    }
}
