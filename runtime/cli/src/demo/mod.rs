//! `weir demo`: the whole product in one command, with no services and no
//! config. It writes a synthetic payment stream with planted fraud into a
//! fresh directory, writes a pipeline file next to it, runs that pipeline
//! with the bundled `fraud-velocity` operator (the `fraud-rules` rules plus a
//! per-card velocity rule over keyed state), and summarises the alerts.
//!
//! `--mode real-time` runs the same operator in real-time mode over the
//! `generator` source instead of files: payments are generated at `--rate`
//! per second for `--seconds`, scored as they arrive, and the summary adds
//! their event→alert latency.

use weir_connectors::generator::payments as generator;

use anyhow::{Context, Result};
use serde::Deserialize;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::time::Duration;
use weir_core::progress::EpochProgress;
use weir_engine::config::PipelineConfig;
use weir_engine::OpenOptions;
use weir_host::WasmHost;

/// Demo parameters.
#[derive(Debug, Clone)]
pub struct DemoOptions {
    /// Working directory; a new one under the temp dir if `None`.
    pub dir: Option<PathBuf>,
    /// Total payments generated.
    pub payments: u64,
    /// Number of input files they are split into.
    pub files: u64,
    /// Files per epoch.
    pub files_per_epoch: usize,
    /// Stream seed.
    pub seed: u64,
    /// Which bundled operator scores the payments.
    pub operator: DemoOperator,
    /// Micro-batch over files, or real-time over the generator.
    pub mode: DemoMode,
}

/// How the demo runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DemoMode {
    /// Files of payments, a few files per epoch (`payments`, `files`).
    #[default]
    MicroBatch,
    /// The generator source at `rate` payments per second for `seconds`,
    /// in real-time mode (`payments` = rate × seconds).
    RealTime { rate: u64, seconds: u64 },
}

/// The bundled operators the demo can run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum DemoOperator {
    /// `fraud-rules`: per-payment rules only, no state.
    Rules,
    /// `fraud-velocity`: the same rules plus "more than 5 payments on a card
    /// in 60 s of event time", kept in the host's state.
    #[default]
    Velocity,
    /// `fraud-windows`: Spark's semantics for the same job — payments
    /// counted per card in 60 s event-time tumbling windows, every payment
    /// of a window scored with its final count when the 10 s watermark
    /// closes it (timers, and a final no-data epoch at the end of input).
    Windows,
    /// `fraud-model`: a gradient-boosted-tree model (ONNX, the version's
    /// artifact `model`) scored inside the sandbox, with the card's home
    /// country and registered devices from the `cards` lookup table and
    /// its payments in the last 60 s from state. Catches the taken-over
    /// cards no rule does.
    Model,
}

impl DemoOperator {
    /// The component's file name, as the demo writes it.
    pub fn file(self) -> &'static str {
        match self {
            DemoOperator::Rules => "fraud_rules.wasm",
            DemoOperator::Velocity => "fraud_velocity.wasm",
            DemoOperator::Windows => "fraud_windows.wasm",
            DemoOperator::Model => "fraud_model.wasm",
        }
    }

    /// The bundled component.
    pub fn wasm(self) -> &'static [u8] {
        match self {
            DemoOperator::Rules => crate::FRAUD_RULES_WASM,
            DemoOperator::Velocity => crate::FRAUD_VELOCITY_WASM,
            DemoOperator::Windows => crate::FRAUD_WINDOWS_WASM,
            DemoOperator::Model => crate::FRAUD_MODEL_WASM,
        }
    }

    /// The `[operator.config]` table.
    pub fn config_toml(self) -> String {
        match self {
            DemoOperator::Rules => RULES_TOML.to_string(),
            DemoOperator::Model => MODEL_TOML.to_string(),
            DemoOperator::Velocity | DemoOperator::Windows => format!(
                "{RULES_TOML}
{VELOCITY_TOML}"
            ),
        }
    }

    /// Whether the operator is built to catch planted fraud of `kind`.
    pub fn targets(self, kind: generator::Planted) -> bool {
        self == DemoOperator::Model || kind.rules_catch()
    }

    /// The `[event_time]` table, for operators that need a watermark.
    fn event_time_toml(self) -> &'static str {
        match self {
            DemoOperator::Windows => EVENT_TIME_TOML,
            DemoOperator::Rules | DemoOperator::Velocity | DemoOperator::Model => "",
        }
    }
}

impl Default for DemoOptions {
    fn default() -> Self {
        DemoOptions {
            dir: None,
            payments: 200_000,
            files: 20,
            files_per_epoch: 2,
            seed: 0x5EED,
            operator: DemoOperator::default(),
            mode: DemoMode::default(),
        }
    }
}

/// The fraud rules the demo runs, as the pipeline file's `[operator.config]`.
pub const RULES_TOML: &str = r#"[operator.config]
alert_threshold = 0.7
rules = [
  { rule = "amount_above", threshold = 2500.0, weight = 0.5 },
  { rule = "country_mismatch", weight = 0.4 },
  { rule = "merchant_in", merchants = ["m-0666", "m-0777", "m-0999"], weight = 0.7 },
  { rule = "currency_not_in", currencies = ["USD", "EUR", "GBP"], weight = 0.2 },
]"#;

/// `fraud-model`'s settings and its model, with the `cards` table it reads.
pub const MODEL_TOML: &str = r#"artifacts = { model = "model.onnx" }
# tract, the inference library inside the component, references files,
# clocks and randomness it never uses when scoring: link WASI as inert,
# deterministic stand-ins (no directories, a stopped clock, seeded bytes).
grants = { inert_wasi = true }

[operator.config]
threshold = 0.5
risky_merchants = ["m-0666", "m-0777", "m-0999"]

# Each card's home country and registered devices, read by the model's
# features; edit the file and the next epoch reads the new version.
[[lookup]]
name = "cards"
key = "card_id"
path = "cards.jsonl"
refresh = "10s"
schema = [
  { name = "card_id", type = "utf8" },
  { name = "home_country", type = "utf8" },
  { name = "devices", type = "utf8" },
]"#;

/// The velocity rule `fraud-velocity` adds to [`RULES_TOML`].
pub const VELOCITY_TOML: &str = "velocity = { window_ms = 60000, max_payments = 5, weight = 0.7 }";

/// Event time and its watermark: 10 s behind the latest payment seen.
pub const EVENT_TIME_TOML: &str = "[event_time]
column = \"ts\"
allowed_lateness = \"10s\"
";

/// One alert as written by the sink.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Alert {
    pub txn_id: String,
    pub card_id: String,
    /// The amount as the sink wrote it: the exact decimal (`"3012.34"`).
    #[serde(deserialize_with = "as_text")]
    pub amount: String,
    pub score: f64,
    pub reasons: String,
    /// The event time as the sink wrote it: RFC 3339
    /// (`"2026-01-01T00:00:37.037Z"`).
    #[serde(deserialize_with = "as_text")]
    pub ts: String,
    /// The card's payments in the velocity window (`fraud-velocity` only).
    #[serde(default)]
    pub window_count: Option<i64>,
}

/// A JSON string as it is, any other value as its JSON text: the alert
/// fields kept as written, never through a float.
fn as_text<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    Ok(match serde_json::Value::deserialize(d)? {
        serde_json::Value::String(s) => s,
        other => other.to_string(),
    })
}

/// What the demo did.
#[derive(Debug)]
pub struct DemoReport {
    pub dir: PathBuf,
    pub pipeline_file: PathBuf,
    pub alerts_dir: PathBuf,
    pub alerts: Vec<Alert>,
    /// Planted fraud of the kinds the operator is built to catch (the rules
    /// operators: all but takeovers; the model: all), and how much of it
    /// made an alert.
    pub planted: u64,
    pub planted_caught: u64,
    /// Planted and caught per kind, every kind.
    pub by_kind: Vec<KindCount>,
    pub epochs: u64,
    pub rows_in: u64,
    /// Payments written with their score to the Delta table (`fraud-velocity`).
    pub scored: u64,
    pub elapsed: Duration,
    /// Event→alert latency over the whole run (real-time mode).
    pub latency: Option<weir_core::latency::LatencySummary>,
}

/// Planted fraud of one kind and how much of it the operator caught.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KindCount {
    pub kind: &'static str,
    pub planted: u64,
    pub caught: u64,
}

/// The pipeline file the demo writes (paths relative to the demo directory).
pub fn pipeline_toml(files_per_epoch: usize, operator: DemoOperator) -> String {
    format!(
        r#"# Written by `weir demo`; run it again with `weir run pipeline.toml`.
name = "fraud-demo"
checkpoint = "checkpoint"
# One task per core (`parallelism`); each card's payments meet one task,
# which keeps that card's state.
key = "card_id"

[trigger]
mode = "available-now"

[source]
kind = "files"
path = "input"
max_files_per_trigger = {files_per_epoch}
{schema}

{event_time}
{operator_and_sink}"#,
        schema = generator::TYPED_SCHEMA_TOML,
        event_time = operator.event_time_toml(),
        operator_and_sink = operator_and_sink(operator),
    )
}

/// The `[operator]` and `[sink]` tables both demo pipelines share:
/// alerts to JSON-lines files; with `fraud-velocity`, every payment's score
/// (its `scores` output) to a Delta table beside them.
fn operator_and_sink(operator: DemoOperator) -> String {
    let sinks = match operator {
        DemoOperator::Velocity | DemoOperator::Model => {
            r#"# The alerts (the rows the operator returns) to JSON-lines files, and
# every payment with its score (its `scores` output) to a Delta table.
[[sink]]
name = "alerts"
kind = "files"
path = "alerts"

[[sink]]
output = "scores"
kind = "delta"
path = "lake/scores"
"#
        }
        _ => {
            r#"[sink]
kind = "files"
path = "alerts"
"#
        }
    };
    format!(
        r#"[operator]
path = "{file}"
deadline = "10s"
memory = "256MiB"
{rules}

{sinks}"#,
        file = operator.file(),
        rules = operator.config_toml(),
    )
}

/// The real-time demo's pipeline file: generated payments, scored as they
/// arrive, alerts written part by part.
pub fn real_time_toml(seed: u64, rate: u64, seconds: u64, operator: DemoOperator) -> String {
    format!(
        r#"# Written by `weir demo --mode real-time`; run it again with `weir run pipeline.toml`
# (a new run continues the stream where it stopped).
name = "fraud-demo-real-time"
checkpoint = "checkpoint"

[trigger]
mode = "real-time"
checkpoint_interval = "1s"

[source]
kind = "generator"
rate = {rate}
seed = {seed}
rows = {rows}
# `amount` decimal(18,2), `ts` timestamp(ms, UTC), `device` a struct.
typed = true

{EVENT_TIME_TOML}
{operator_and_sink}"#,
        rows = rate * seconds,
        operator_and_sink = operator_and_sink(operator),
    )
}

fn fresh_dir() -> Result<PathBuf> {
    let base = std::env::temp_dir();
    for n in 0..1000u32 {
        let dir = base.join(format!("weir-demo-{}-{n}", std::process::id()));
        if std::fs::create_dir(&dir).is_ok() {
            return Ok(dir);
        }
    }
    anyhow::bail!("could not create a demo directory under {}", base.display())
}

/// Writes input, operator and pipeline file into `dir`; returns the pipeline file.
pub fn prepare(dir: &Path, opts: &DemoOptions) -> Result<PathBuf> {
    std::fs::write(dir.join(opts.operator.file()), opts.operator.wasm())
        .context("writing the bundled operator")?;
    if opts.operator == DemoOperator::Model {
        std::fs::write(dir.join("model.onnx"), crate::FRAUD_MODEL_ONNX)
            .context("writing the model")?;
        std::fs::write(dir.join("cards.jsonl"), generator::cards_json_lines())
            .context("writing the cards table")?;
    }
    let pipeline_file = dir.join("pipeline.toml");
    if let DemoMode::RealTime { rate, seconds } = opts.mode {
        let toml = real_time_toml(opts.seed, rate, seconds, opts.operator);
        std::fs::write(&pipeline_file, toml).context("writing pipeline.toml")?;
        return Ok(pipeline_file);
    }
    let input = dir.join("input");
    std::fs::create_dir_all(&input).with_context(|| format!("creating {}", input.display()))?;
    let files = opts.files.max(1);
    let per_file = opts.payments.div_ceil(files);
    let mut start = 0;
    for f in 0..files {
        let count = per_file.min(opts.payments - start);
        let bytes = generator::json_lines(opts.seed, start, count);
        weir_core::fsutil::write_atomic(&input.join(format!("payments-{f:04}.jsonl")), &bytes)?;
        start += count;
    }
    std::fs::write(
        &pipeline_file,
        pipeline_toml(opts.files_per_epoch, opts.operator),
    )
    .context("writing pipeline.toml")?;
    Ok(pipeline_file)
}

/// Reads every alert the file sink wrote, in epoch order.
pub fn read_alerts(alerts_dir: &Path) -> Result<Vec<Alert>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(alerts_dir)
        .with_context(|| format!("listing {}", alerts_dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .collect();
    files.sort();
    let mut alerts = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(&f)?;
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            alerts.push(
                serde_json::from_str(line)
                    .with_context(|| format!("bad alert line in {}", f.display()))?,
            );
        }
    }
    Ok(alerts)
}

/// Runs the demo, reporting each epoch to `on_epoch`.
pub fn run(opts: &DemoOptions, on_epoch: &mut dyn FnMut(&EpochProgress)) -> Result<DemoReport> {
    let dir = match &opts.dir {
        Some(d) => {
            std::fs::create_dir_all(d).with_context(|| format!("creating {}", d.display()))?;
            d.clone()
        }
        None => fresh_dir()?,
    };
    let pipeline_file = prepare(&dir, opts)?;
    let cfg = PipelineConfig::load(&pipeline_file)?;
    let host = WasmHost::new(weir_host::default_cache_root())?;
    let mut pipeline = weir_engine::open(
        &cfg,
        &host,
        OpenOptions {
            ephemeral_checkpoint_ok: true,
            ..Default::default()
        },
    )?;
    let mut latency = weir_core::latency::Histogram::default();
    let mut scored = 0;
    let summary = pipeline.run(&host, &AtomicBool::new(false), &mut |p| {
        if let Some(h) = &p.latency_histogram {
            latency.merge(h);
        }
        scored += p.named_rows.get("scores").copied().unwrap_or(0);
        on_epoch(p)
    })?;
    let alerts_dir = dir.join("alerts");
    let alerts = read_alerts(&alerts_dir)?;
    let payments = match opts.mode {
        DemoMode::MicroBatch => opts.payments,
        DemoMode::RealTime { rate, seconds } => rate * seconds,
    };
    let alerted: std::collections::HashSet<&str> =
        alerts.iter().map(|a| a.txn_id.as_str()).collect();
    let mut kinds: BTreeMap<&'static str, KindCount> = BTreeMap::new();
    let (mut planted, mut planted_caught) = (0, 0);
    for i in 0..payments {
        let (p, Some(kind)) = generator::payment(opts.seed, i) else {
            continue;
        };
        let caught = alerted.contains(p.txn_id.as_str());
        let count = kinds.entry(kind.name()).or_insert(KindCount {
            kind: kind.name(),
            planted: 0,
            caught: 0,
        });
        count.planted += 1;
        count.caught += u64::from(caught);
        if opts.operator.targets(kind) {
            planted += 1;
            planted_caught += u64::from(caught);
        }
    }
    Ok(DemoReport {
        dir,
        pipeline_file,
        alerts_dir,
        alerts,
        planted,
        planted_caught,
        by_kind: kinds.into_values().collect(),
        epochs: summary.epochs,
        rows_in: summary.rows_in,
        scored,
        elapsed: summary.elapsed,
        latency: latency.summary(),
    })
}

/// The human summary `weir demo` prints at the end.
pub fn summary_text(r: &DemoReport) -> String {
    let mut by_reason: BTreeMap<&str, usize> = BTreeMap::new();
    let mut by_card: HashMap<&str, usize> = HashMap::new();
    for a in &r.alerts {
        *by_reason.entry(a.reasons.as_str()).or_default() += 1;
        *by_card.entry(a.card_id.as_str()).or_default() += 1;
    }
    let mut cards: Vec<(&str, usize)> = by_card.into_iter().collect();
    cards.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    let secs = r.elapsed.as_secs_f64().max(1e-9);
    let mut s = format!(
        "\n{} payments in {} epochs, {:.2}s ({:.0} payments/s)\n{} alerts; planted fraud caught: {} of {}\n",
        r.rows_in,
        r.epochs,
        secs,
        r.rows_in as f64 / secs,
        r.alerts.len(),
        r.planted_caught,
        r.planted
    );
    s.push_str("planted fraud by kind (caught of planted):");
    for k in &r.by_kind {
        s.push_str(&format!(" {} {}/{}", k.kind, k.caught, k.planted));
    }
    s.push('\n');
    if let Some(l) = &r.latency {
        s.push_str(&format!(
            "event to alert latency: p50 {:.1} ms, p99 {:.1} ms, p99.9 {:.1} ms, max {:.1} ms\n",
            l.p50_ms, l.p99_ms, l.p999_ms, l.max_ms
        ));
    }
    s.push_str("\nalerts by reason:\n");
    for (reason, n) in &by_reason {
        s.push_str(&format!("  {n:>6}  {reason}\n"));
    }
    s.push_str("\ncards with most alerts:\n");
    for (card, n) in cards.iter().take(5) {
        s.push_str(&format!("  {n:>6}  {card}\n"));
    }
    s.push_str(&format!(
        "\nalerts:     {}/epoch-*.jsonl\n",
        r.alerts_dir.display()
    ));
    if r.scored > 0 {
        s.push_str(&format!(
            "scores:     {} (a Delta table: {} payments with their score)\n",
            r.dir.join("lake/scores").display(),
            r.scored
        ));
    }
    s.push_str(&format!(
        "checkpoint: {}\nrun again:  {} run {}\n",
        r.dir.join("checkpoint").display(),
        std::env::current_exe()
            .map(|p| p.display().to_string())
            .unwrap_or_else(|_| "weir".into()),
        r.pipeline_file.display()
    ));
    s
}
