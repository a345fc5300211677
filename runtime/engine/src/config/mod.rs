//! The pipeline file (`PIPELINE.toml`): what to read, which operator to run
//! with which limits, where to write, how often to trigger. Parsing is strict
//! (unknown keys are errors) and every error names the key at fault.

pub mod admin;
pub mod cluster;
pub mod lookup;
pub mod sinks;

pub use admin::{AdminConfig, AdminSettings, AdminTlsConfig, ConnectionLimits};
pub use cluster::{Assignment, ClusterConfig};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::Duration;
use weir_connectors::connector::{SinkSettings, SourceSettings};
use weir_connectors::registry;
use weir_connectors::s3::{ObjectStoreSettings, S3Url};
use weir_host::{Grants, Limits};

/// A whole pipeline definition.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PipelineConfig {
    /// Pipeline name; recorded in the checkpoint, shown in logs and errors.
    pub name: String,
    /// Checkpoint directory (offset WAL, commit WAL, state, metadata). When
    /// the pipeline file gives an `s3://bucket/prefix` URL instead, this is
    /// its local cache ([`PipelineConfig::checkpoint_cache`]) and the URL is
    /// in [`PipelineConfig::checkpoint_url`].
    pub checkpoint: PathBuf,
    /// The local cache of an `s3://` checkpoint: the working copy of the
    /// state and a copy of the logs, rebuilt from the object store when it
    /// is empty or stale (default `.weir-cache/<name>` beside the pipeline
    /// file).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint_cache: Option<PathBuf>,
    /// `[object_store]`: how to reach the store an `s3://` checkpoint is in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object_store: Option<ObjectStoreSettings>,
    /// The `s3://bucket/prefix` the checkpoint is kept in, if it is not a
    /// local directory (taken from `checkpoint` when the file is parsed).
    #[serde(skip)]
    pub checkpoint_url: Option<String>,
    /// Tasks that run the operator side by side, each on a thread of its
    /// own over its share of every epoch (default: one per core; see
    /// docs/parallelism.md). Changing it between runs rescales: the
    /// tasks own other ranges of key groups, nothing stored moves.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parallelism: Option<u16>,
    /// The input column whose value decides which task a row goes to, so
    /// that all rows of one key (a card) meet the same task and its state.
    /// Without it rows are split evenly, which suits stateless operators.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// When epochs run.
    #[serde(default)]
    pub trigger: TriggerConfig,
    /// Where rows come from.
    pub source: SourceConfig,
    /// The Wasm operator.
    pub operator: OperatorConfig,
    /// Where output rows go: `[sink]`, or `[[sink]]` tables that route the
    /// operator's named outputs ([`sinks`]).
    pub sink: sinks::Sinks,
    /// Largest micro-batch handed to one `process` call, in rows.
    #[serde(default = "default_batch_rows")]
    pub batch_rows: usize,
    /// Snapshots of the keyed state.
    #[serde(default)]
    pub state: StateConfig,
    /// Compaction of the offset and commit logs.
    #[serde(default)]
    pub wal: WalConfig,
    /// The event-time column and allowed lateness (the watermark).
    #[serde(default)]
    pub event_time: Option<EventTimeConfig>,
    /// Host-provided deduplication on a key column within the watermark.
    #[serde(default)]
    pub dedup: Option<DedupConfig>,
    /// Reference tables the operator looks rows up in (`[[lookup]]`).
    #[serde(default, rename = "lookup", skip_serializing_if = "Vec::is_empty")]
    pub lookups: Vec<lookup::LookupConfig>,
    /// The admin HTTP API (deploy, roll back, shadow). Off unless present.
    /// Not part of the config hash: where the API listens and its token
    /// change nothing about what epochs compute.
    #[serde(default, skip_serializing)]
    pub admin: Option<AdminConfig>,
    /// Progress records kept in the checkpoint. Not part of the config hash.
    #[serde(default, skip_serializing)]
    pub progress: ProgressConfig,
    /// `[cluster]`: this file runs on several workers that share its
    /// partitions ([`crate::cluster`]). Off unless present.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<ClusterConfig>,
}

/// `[wal]`: the offset and commit logs are compacted every `compact_every`
/// epochs (everything up to then folded into one `offsets/<N>.compact`
/// entry), keeping the newest `retain` entries of each, so a start reads a
/// bounded number of files however long the pipeline has run. Entries a
/// state rebuild may replay (after the newest state snapshot) are kept too.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WalConfig {
    /// Epochs between compactions (default 100; 0 never compacts).
    #[serde(default = "default_wal_every")]
    pub compact_every: u64,
    /// Newest entries kept in `offsets/` and `commits/` (default 100).
    #[serde(default = "default_wal_retain")]
    pub retain: u64,
}

impl Default for WalConfig {
    fn default() -> Self {
        WalConfig {
            compact_every: default_wal_every(),
            retain: default_wal_retain(),
        }
    }
}

fn default_wal_every() -> u64 {
    100
}

fn default_wal_retain() -> u64 {
    100
}

/// `[progress]`: how many per-epoch progress records are kept under
/// `checkpoint/progress/` (what the dashboard and
/// `/v1/pipelines/{name}/progress` show after a restart).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProgressConfig {
    /// Records kept, newest first (default 100).
    #[serde(default = "default_progress_retain")]
    pub retain: usize,
}

impl ProgressConfig {
    /// Records kept when `[progress]` does not say.
    pub const DEFAULT_RETAIN: usize = 100;
}

impl Default for ProgressConfig {
    fn default() -> Self {
        ProgressConfig {
            retain: default_progress_retain(),
        }
    }
}

fn default_progress_retain() -> usize {
    ProgressConfig::DEFAULT_RETAIN
}

/// Which column holds event time and how late rows may arrive: the
/// watermark is the largest event time seen minus `allowed_lateness`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EventTimeConfig {
    /// An int64 column of Unix milliseconds.
    pub column: String,
    #[serde(default, with = "humantime_serde_compat")]
    pub allowed_lateness: Duration,
}

/// Drop rows whose key was already seen within the watermark (Spark's
/// `dropDuplicatesWithinWatermark`). Needs `[event_time]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DedupConfig {
    /// A utf8 or int64 column.
    pub column: String,
}

/// Snapshots of the keyed state (`checkpoint/state/snapshots/<N>`), from
/// which a lost or corrupt working copy is rebuilt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StateConfig {
    /// A snapshot after every this many epochs; 0 turns snapshots off.
    #[serde(default = "default_snapshot_every")]
    pub snapshot_every: u64,
    /// How many snapshots are kept.
    #[serde(default = "default_snapshots_retained")]
    pub snapshots_retained: usize,
    /// Memory RocksDB may keep for the state: half block cache, half
    /// memtables (e.g. "16MiB", the default). More keeps more of a large
    /// state's blocks in memory; the minimum is 4MiB.
    #[serde(default = "default_state_memory")]
    pub memory: String,
}

impl Default for StateConfig {
    fn default() -> Self {
        let p = weir_state::SnapshotPolicy::default();
        StateConfig {
            snapshot_every: p.every,
            snapshots_retained: p.retain,
            memory: default_state_memory(),
        }
    }
}

fn default_state_memory() -> String {
    format!("{}MiB", weir_state::DEFAULT_STATE_MEMORY >> 20)
}

fn default_snapshot_every() -> u64 {
    StateConfig::default().snapshot_every
}

fn default_snapshots_retained() -> usize {
    StateConfig::default().snapshots_retained
}

impl StateConfig {
    /// The store's snapshot policy.
    pub fn policy(&self) -> weir_state::SnapshotPolicy {
        weir_state::SnapshotPolicy {
            every: self.snapshot_every,
            retain: self.snapshots_retained,
        }
    }

    /// How the state store is opened (snapshots and memory).
    pub fn options(&self) -> Result<weir_state::StoreOptions> {
        Ok(weir_state::StoreOptions {
            snapshots: self.policy(),
            memory: parse_size(&self.memory).context("`state.memory`")?,
        })
    }

    fn validate(&self) -> Result<()> {
        if self.snapshot_every > 0 && self.snapshots_retained == 0 {
            bail!("`state.snapshots_retained` must be at least 1 while snapshots are taken");
        }
        let memory = self.options()?.memory;
        if memory < weir_state::MIN_STATE_MEMORY {
            bail!(
                "`state.memory` = {} is too small: RocksDB needs at least {}MiB",
                self.memory,
                weir_state::MIN_STATE_MEMORY >> 20
            );
        }
        fits_machine_memory("state.memory", &self.memory, memory)
    }
}

fn default_batch_rows() -> usize {
    10_000
}

/// Largest `batch_rows`: one `process` call's batch must fit an operator's
/// memory (at most 4 GiB for a 32-bit Wasm guest) with room to spare.
pub const MAX_BATCH_ROWS: usize = 1_000_000;

/// Largest `operator.memory`: a 32-bit Wasm guest cannot address more.
pub const MAX_OPERATOR_MEMORY: usize = 4 << 30;

/// Physical memory of this machine (Linux `MemTotal`), if known.
fn machine_memory() -> Option<usize> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: usize = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// An error if the size `text` of setting `key` (`bytes` parsed) is more
/// than this machine's memory.
fn fits_machine_memory(key: &str, text: &str, bytes: usize) -> Result<()> {
    if let Some(total) = machine_memory().filter(|&t| bytes > t) {
        bail!(
            "`{key}` = {text} is more than this machine's memory ({} MiB)",
            total >> 20
        );
    }
    Ok(())
}

/// How epochs are triggered (Spark's `Trigger`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "mode", rename_all = "kebab-case", deny_unknown_fields)]
pub enum TriggerConfig {
    /// An epoch every `interval` while new data exists; runs until stopped.
    ProcessingTime {
        #[serde(with = "humantime_serde_compat")]
        interval: Duration,
    },
    /// One epoch over everything available now (ignoring per-trigger limits), then stop.
    Once,
    /// Epochs until everything available at start is processed, honouring per-trigger limits, then stop.
    AvailableNow,
    /// Real-time mode: records go to the operator as they arrive and output
    /// to the sink at once; an epoch (logs, state commit, swaps, progress)
    /// every `checkpoint_interval` (default 1 s). Runs until stopped.
    RealTime {
        #[serde(
            default = "default_checkpoint_interval",
            with = "humantime_serde_compat"
        )]
        checkpoint_interval: Duration,
    },
}

fn default_checkpoint_interval() -> Duration {
    Duration::from_secs(1)
}

impl TriggerConfig {
    /// The processing-time interval in ms: the time an epoch has before the
    /// next is due (`None` for `once` and `available-now`).
    pub fn interval_ms(&self) -> Option<u64> {
        match self {
            TriggerConfig::ProcessingTime { interval } => Some(interval.as_millis() as u64),
            _ => None,
        }
    }
}

impl Default for TriggerConfig {
    fn default() -> Self {
        TriggerConfig::ProcessingTime {
            interval: Duration::from_secs(1),
        }
    }
}

pub(crate) use weir_core::duration as humantime_serde_compat;
pub use weir_core::schema::{arrow_schema, ColumnConfig, ColumnType};

pub use weir_core::json::MalformedPolicy;

/// `[source]`: where rows come from — one connector's own settings,
/// chosen by `kind` from [`weir_connectors::registry::SOURCES`].
pub struct SourceConfig(Box<dyn SourceSettings>);

/// `[sink]`: where output goes — one connector's own settings, chosen by
/// `kind` from [`weir_connectors::registry::SINKS`].
pub struct SinkConfig(pub(crate) Box<dyn SinkSettings>);

macro_rules! erased_config {
    ($config:ident, $settings:ident, $parse:path) => {
        impl std::ops::Deref for $config {
            type Target = dyn $settings;
            fn deref(&self) -> &Self::Target {
                &*self.0
            }
        }
        impl std::ops::DerefMut for $config {
            fn deref_mut(&mut self) -> &mut Self::Target {
                &mut *self.0
            }
        }
        impl Clone for $config {
            fn clone(&self) -> Self {
                $config(self.0.clone_box())
            }
        }
        impl std::fmt::Debug for $config {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                self.0.fmt(f)
            }
        }
        impl Serialize for $config {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                self.0
                    .to_json()
                    .map_err(serde::ser::Error::custom)?
                    .serialize(s)
            }
        }
        impl<'de> Deserialize<'de> for $config {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let table = toml::Table::deserialize(d)?;
                $parse(table)
                    .map($config)
                    .map_err(|e| serde::de::Error::custom(format!("{e:#}")))
            }
        }
    };
}

erased_config!(SourceConfig, SourceSettings, registry::source_settings);
erased_config!(SinkConfig, SinkSettings, registry::sink_settings);

/// An operator config file as the JSON `init` receives: a `.toml` file is
/// converted, anything else must be JSON. (`operator.config_file`, and the
/// `--config` of `weir deploy` and `weir operator test`.)
pub fn config_file_json(path: &Path) -> Result<String> {
    Ok(config_file_value(path)?.to_string())
}

/// [`config_file_json`], as a value (for `operator.config_files`, which
/// puts several into one config).
fn config_file_value(path: &Path) -> Result<serde_json::Value> {
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let text =
        String::from_utf8(bytes).with_context(|| format!("{} is not UTF-8", path.display()))?;
    if path.extension().is_some_and(|e| e == "toml") {
        let value: toml::Value = toml::from_str(&text)
            .with_context(|| format!("{} is not valid TOML", path.display()))?;
        return Ok(serde_json::to_value(&value)?);
    }
    serde_json::from_str(&text).with_context(|| {
        format!(
            "{} is not valid JSON (use a .toml name for TOML)",
            path.display()
        )
    })
}

/// Upper bound of `operator.max_isolated`: each isolated record costs about
/// `2 log2(rows)` operator runs to find, some of them up to the deadline.
pub const MAX_ISOLATED: usize = 1000;

/// The operator and its sandbox.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OperatorConfig {
    /// The component file (`.wasm`).
    pub path: PathBuf,
    /// JSON-compatible configuration passed to the operator's `init`.
    #[serde(default = "empty_table")]
    pub config: toml::Value,
    /// The configuration in a file of its own instead (`.json`, or `.toml`
    /// converted to JSON; relative to the pipeline file): rules the fraud
    /// team edits apart from the pipeline. Read when the pipeline file is;
    /// its digest is recorded like an inline config's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_file: Option<PathBuf>,
    /// Named parts of the config from files of their own, each put under
    /// its name in the config `init` receives, beside `config` or
    /// `config_file`: `{ high_risk_merchants = "merchants.json" }` for a
    /// list kept as a plain JSON array (or any JSON or `.toml` value).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub config_files: std::collections::BTreeMap<String, PathBuf>,
    /// The JSON `init` receives when files make up some of it
    /// (`config_file`, `config_files`).
    #[serde(skip)]
    pub config_from_file: Option<String>,
    /// Named files the operator reads through `weir:operator/artifacts`
    /// (`{ model = "model.onnx" }`, relative to the pipeline file): stored
    /// by digest and recorded with every epoch, like the component.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub artifacts: std::collections::BTreeMap<String, PathBuf>,
    /// CPU deadline per call, e.g. "2s".
    #[serde(default = "default_deadline", with = "humantime_serde_compat")]
    pub deadline: Duration,
    /// Memory cap per instance, e.g. "256MiB".
    #[serde(default = "default_memory")]
    pub memory: String,
    /// Extra capabilities.
    #[serde(default)]
    pub grants: Grants,
    /// Namespace of the operator's keyed state. Every version of the
    /// operator deployed under it sees the same state.
    #[serde(default = "default_state_namespace")]
    pub state_namespace: String,
    /// What a deterministic operator failure on an epoch (trap, deadline,
    /// `failed`, invalid output, memory cap) does: `"dead-letter"` finds
    /// the offending records by bisection, sets them aside and processes
    /// the rest; `"fail"` stops the pipeline (the behaviour before 0.2).
    #[serde(default)]
    pub on_error: OnError,
    /// For how many epochs after a swap a failing version is suspected
    /// before its input: if the version before it handles the epoch, the
    /// new one is rolled back automatically.
    #[serde(default = "default_probation_epochs")]
    pub probation_epochs: u64,
    /// Most records one epoch may set aside under `on_error =
    /// "dead-letter"`; past it the failure is taken for the version's, not
    /// the records', and the epoch waits (retried with backoff) for a fix.
    #[serde(default = "default_max_isolated")]
    pub max_isolated: usize,
}

/// `operator.on_error`: see [`OperatorConfig::on_error`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OnError {
    /// Isolate the failing records into the dead-letter output; go on.
    #[default]
    DeadLetter,
    /// Stop the pipeline with the failure.
    Fail,
}

/// How the engine treats operator failures (from [`OperatorConfig`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FailurePolicy {
    pub on_error: OnError,
    pub probation_epochs: u64,
    pub max_isolated: usize,
}

impl OperatorConfig {
    /// The failure handling this operator runs under.
    pub fn failure_policy(&self) -> FailurePolicy {
        FailurePolicy {
            on_error: self.on_error,
            probation_epochs: self.probation_epochs,
            max_isolated: self.max_isolated,
        }
    }
}

fn default_probation_epochs() -> u64 {
    3
}

fn default_max_isolated() -> usize {
    10
}

fn default_state_namespace() -> String {
    "operator".into()
}

fn empty_table() -> toml::Value {
    toml::Value::Table(Default::default())
}

fn default_deadline() -> Duration {
    Limits::default().deadline
}

fn default_memory() -> String {
    "512MiB".into()
}

/// Parses sizes like `512MiB`, `1GiB`, `65536`.
pub fn parse_size(text: &str) -> Result<usize> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: usize = num
        .parse()
        .with_context(|| format!("`{text}` is not a size; write e.g. \"256MiB\""))?;
    let mult: usize = match unit.trim() {
        "" | "B" => 1,
        "KiB" | "K" | "KB" => 1 << 10,
        "MiB" | "M" | "MB" => 1 << 20,
        "GiB" | "G" | "GB" => 1 << 30,
        other => bail!("`{text}`: unknown size unit `{other}` (use B, KiB, MiB or GiB)"),
    };
    n.checked_mul(mult)
        .with_context(|| format!("`{text}` is too large"))
}

/// A TOML error as toml prints it (with the lines it points at), unless
/// those lines may hold a secret (a password, token or key written in
/// clear, or a connection string with a password): then only the
/// message and the line number, so a refusal never repeats the secret.
fn describe_toml_error(text: &str, e: &toml::de::Error) -> String {
    let Some(span) = e.span() else {
        return e.to_string();
    };
    let start = text[..span.start.min(text.len())]
        .rfind('\n')
        .map_or(0, |i| i + 1);
    let end = text[span.end.min(text.len())..]
        .find('\n')
        .map_or(text.len(), |i| span.end + i);
    let shown = text[start..end].to_ascii_lowercase();
    let secret_like = ["password", "secret", "token", "passphrase", "private"]
        .iter()
        .any(|word| shown.contains(word))
        || shown.contains("://") && shown.contains('@');
    if !secret_like {
        return e.to_string();
    }
    let line = text[..start].matches('\n').count() + 1;
    format!(
        "TOML error at line {line} (the line is not shown: it may hold a secret)\n{}",
        e.message()
    )
}

impl PipelineConfig {
    /// Reads and validates a pipeline file; relative paths are taken from the
    /// file's directory.
    pub fn load(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading pipeline config {}", path.display()))?;
        let base = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        Self::parse(&text, base).with_context(|| format!("in pipeline config {}", path.display()))
    }

    /// Parses and validates config text; relative paths are joined to `base`.
    pub fn parse(text: &str, base: &Path) -> Result<Self> {
        let mut cfg: PipelineConfig = toml::from_str(text)
            .map_err(|e| anyhow::anyhow!("{}", describe_toml_error(text, &e)))?;
        cfg.validate()?;
        cfg.take_checkpoint_url()?;
        cfg.check_cluster()?;
        // One place, one spelling: the checkpoint records source and sink
        // paths, and `cd dir && weir run pipeline.toml` must name the
        // same ones as `weir run dir/pipeline.toml`.
        let base = base.canonicalize().unwrap_or_else(|_| base.to_path_buf());
        cfg.resolve_paths(&base);
        cfg.check_outputs_outside_source()?;
        cfg.read_config_file()?;
        Ok(cfg)
    }

    /// Reads `operator.config_file` (refused beside an inline config) and
    /// `operator.config_files`, into the JSON `init` receives.
    fn read_config_file(&mut self) -> Result<()> {
        let op = &self.operator;
        if op.config_file.is_none() && op.config_files.is_empty() {
            return Ok(());
        }
        let inline = op.config.as_table().is_none_or(|t| !t.is_empty());
        let mut config = match &op.config_file {
            Some(_) if inline => bail!(
                "`operator.config` and `operator.config_file` are both set; keep one (the file \
                 for rules edited apart from the pipeline), and put lists kept in files of \
                 their own under `operator.config_files`"
            ),
            Some(path) => config_file_value(path).context("`operator.config_file`")?,
            None => serde_json::to_value(&op.config)?,
        };
        for (name, path) in &op.config_files {
            let Some(object) = config.as_object_mut() else {
                bail!(
                    "`operator.config_files` puts `{name}` into the config, but the config is not \
                     a table (a JSON object)"
                );
            };
            if object.contains_key(name) {
                bail!("`operator.config_files.{name}`: the config already has `{name}`; keep one");
            }
            let part = config_file_value(path)
                .with_context(|| format!("`operator.config_files.{name}`"))?;
            object.insert(name.clone(), part);
        }
        self.operator.config_from_file = Some(config.to_string());
        Ok(())
    }

    /// Refuses a sink, dead-letter or checkpoint directory inside the files
    /// source's directory: what the pipeline writes would come back as
    /// input (dead letters doubled every epoch until the disk filled).
    fn check_outputs_outside_source(&self) -> Result<()> {
        let Some(source) = self.source.input_dir() else {
            return Ok(());
        };
        let mut outputs = vec![("checkpoint", self.checkpoint.as_path())];
        outputs.extend(self.source.dead_letter().map(|d| ("source.dead_letter", d)));
        outputs.extend(
            self.sink
                .iter()
                .filter_map(|s| s.settings.output_dir().map(|d| ("sink.path", d))),
        );
        for (key, out) in outputs {
            if out.starts_with(source) {
                bail!(
                    "`{key}` = {} is inside the source directory {}: what the pipeline writes \
                     there would be read back as input. Put it outside `source.path`.",
                    out.display(),
                    source.display()
                );
            }
        }
        Ok(())
    }

    /// Moves an `s3://` `checkpoint` into [`PipelineConfig::checkpoint_url`]
    /// and puts its local cache in `checkpoint`; refuses other URL schemes,
    /// and the object-store keys beside a local checkpoint.
    fn take_checkpoint_url(&mut self) -> Result<()> {
        let text = self.checkpoint.to_string_lossy().into_owned();
        if text.starts_with("s3://") {
            S3Url::parse(&text).context("`checkpoint`")?;
            self.checkpoint = match &self.checkpoint_cache {
                Some(cache) => cache.clone(),
                None => Path::new(".weir-cache").join(&self.name),
            };
            self.checkpoint_url = Some(text);
            return Ok(());
        }
        if let Some((scheme, _)) = text.split_once("://") {
            bail!(
                "`checkpoint` = {text}: `{scheme}://` is not supported; give a local directory \
                 or an s3://bucket/prefix URL"
            );
        }
        for (key, set) in [
            ("checkpoint_cache", self.checkpoint_cache.is_some()),
            ("[object_store]", self.object_store.is_some()),
        ] {
            if set {
                bail!("`{key}` is only for a checkpoint in an object store (`checkpoint = \"s3://bucket/prefix\"`)");
            }
        }
        Ok(())
    }

    /// A cluster's workers share their source by partition and their
    /// checkpoint through an object store.
    fn check_cluster(&self) -> Result<()> {
        let Some(cluster) = &self.cluster else {
            return Ok(());
        };
        cluster.validate()?;
        if !self.source.partitioned() {
            bail!(
                "`[cluster]` needs a source the workers can share by partition (kafka); the {} \
                 source has none",
                self.source.kind()
            );
        }
        if self.checkpoint_url.is_none() {
            bail!(
                "`[cluster]` needs the checkpoint in an object store that every worker reaches \
                 (`checkpoint = \"s3://bucket/prefix\"`): a worker takes a partition over from it"
            );
        }
        if matches!(
            self.trigger,
            TriggerConfig::Once | TriggerConfig::AvailableNow
        ) {
            bail!(
                "`[cluster]` is for continuous pipelines; use a `processing-time` or `real-time` \
                 trigger (a batch run needs no workers)"
            );
        }
        Ok(())
    }

    fn resolve_paths(&mut self, base: &Path) {
        let fix = |p: &mut PathBuf| {
            *p = weir_core::fsutil::normalize(&base.join(&*p));
        };
        fix(&mut self.checkpoint);
        fix(&mut self.operator.path);
        if let Some(file) = &mut self.operator.config_file {
            fix(file);
        }
        self.operator.config_files.values_mut().for_each(fix);
        self.operator.artifacts.values_mut().for_each(fix);
        for l in &mut self.lookups {
            if let Some(p) = &mut l.path {
                fix(p);
            }
        }
        if let Some(ca) = self.object_store.as_mut().and_then(|o| o.ca_file.as_mut()) {
            fix(ca);
        }
        if let Some(admin) = &mut self.admin {
            admin.tokens_file.iter_mut().for_each(fix);
            if let Some(tls) = &mut admin.tls {
                fix(&mut tls.cert_file);
                fix(&mut tls.key_file);
                tls.client_ca_file.iter_mut().for_each(fix);
            }
        }
        self.source.paths().into_iter().for_each(fix);
        for sink in self.sink.iter_mut() {
            sink.settings.paths().into_iter().for_each(fix);
        }
    }

    fn validate(&self) -> Result<()> {
        if self.name.trim().is_empty() {
            bail!("`name` must not be empty");
        }
        if self.batch_rows == 0 || self.batch_rows > MAX_BATCH_ROWS {
            bail!("`batch_rows` must be between 1 and {MAX_BATCH_ROWS}");
        }
        match self.trigger {
            TriggerConfig::ProcessingTime { interval } if interval.is_zero() => {
                bail!("`trigger.interval` must be longer than zero");
            }
            TriggerConfig::RealTime {
                checkpoint_interval,
            } if checkpoint_interval.is_zero() => {
                bail!("`trigger.checkpoint_interval` must be longer than zero");
            }
            _ => {}
        }
        if let Some(n) = self.parallelism {
            if n == 0 || n > weir_state::KEY_GROUPS {
                bail!(
                    "`parallelism` must be between 1 and {} (the number of key groups the \
                     state is divided into)",
                    weir_state::KEY_GROUPS
                );
            }
        }
        if self.key.as_deref().is_some_and(|k| k.trim().is_empty()) {
            bail!("`key` must name an input column (or be left out)");
        }
        self.source.validate()?;
        self.sink.validate()?;
        let mut names = std::collections::HashSet::new();
        for l in &self.lookups {
            l.validate()?;
            weir_core::schema::check_lookup_columns(&l.schema)
                .with_context(|| format!("lookup `{}`", l.name))?;
            if !names.insert(&l.name) {
                bail!("two `[[lookup]]` tables are named `{}`", l.name);
            }
        }
        if self.operator.state_namespace.trim().is_empty()
            || self.operator.state_namespace.len() > 255
            || self.operator.state_namespace.starts_with("weir.")
        {
            bail!(
                "`operator.state_namespace` must be 1 to 255 bytes and not start with `weir.` \
                 (the host's own namespaces)"
            );
        }
        if self.dedup.is_some() && self.event_time.is_none() {
            bail!(
                "`dedup` needs `[event_time]`: keys are remembered until the watermark passes \
                 them (add e.g. [event_time] column = \"ts\", allowed_lateness = \"1m\")"
            );
        }
        if self.wal.retain == 0 {
            bail!("`wal.retain` must be at least 1");
        }
        self.state.validate()?;
        if self.operator.deadline.is_zero() {
            bail!("`operator.deadline` must be longer than zero");
        }
        if self.operator.max_isolated == 0 || self.operator.max_isolated > MAX_ISOLATED {
            bail!("`operator.max_isolated` must be between 1 and {MAX_ISOLATED}");
        }
        if let Some(admin) = &self.admin {
            AdminSettings::resolve(admin).context("`[admin]`")?;
        }
        let memory = parse_size(&self.operator.memory).context("`operator.memory`")?;
        if memory < (1 << 20) {
            bail!("`operator.memory` must be at least 1MiB");
        }
        if memory > MAX_OPERATOR_MEMORY {
            bail!(
                "`operator.memory` = {} is more than a 32-bit Wasm operator can address \
                 (at most 4GiB)",
                self.operator.memory
            );
        }
        fits_machine_memory("operator.memory", &self.operator.memory, memory)?;
        self.operator_config_json().context("`operator.config`")?;
        Ok(())
    }

    /// The operator's limits.
    pub fn limits(&self) -> Result<Limits> {
        Ok(Limits {
            deadline: self.operator.deadline,
            memory_bytes: parse_size(&self.operator.memory).context("`operator.memory`")?,
        })
    }

    /// The bytes of each `operator.artifacts` file, by name.
    pub fn operator_artifacts(&self) -> Result<std::collections::BTreeMap<String, Vec<u8>>> {
        let mut out = std::collections::BTreeMap::new();
        for (name, path) in &self.operator.artifacts {
            weir_core::artifacts::check_name(name).context("`operator.artifacts`")?;
            let bytes = std::fs::read(path).with_context(|| {
                format!("reading `operator.artifacts.{name}` ({})", path.display())
            })?;
            out.insert(name.clone(), bytes);
        }
        Ok(out)
    }

    /// The operator config as the JSON text `init` receives: from
    /// `config_file` if set, else the inline `config`, with the parts of
    /// `config_files` under their names.
    pub fn operator_config_json(&self) -> Result<String> {
        match &self.operator.config_from_file {
            Some(json) => Ok(json.clone()),
            None => Ok(serde_json::to_string(&self.operator.config)?),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
name = "fraud"
checkpoint = "ckpt"
[trigger]
mode = "available-now"
[source]
kind = "files"
path = "in"
schema = [ { name = "txn_id", type = "utf8" }, { name = "amount", type = "float64" } ]
[operator]
path = "op.wasm"
config = { alert_threshold = 0.5 }
[sink]
kind = "files"
path = "out"
"#;

    #[test]
    fn an_s3_checkpoint_keeps_its_url_and_caches_beside_the_file() {
        let text = GOOD.replace(
            "checkpoint = \"ckpt\"\n",
            "checkpoint = \"s3://weir-ckpt/fraud/\"\n",
        ) + "[object_store]\nendpoint = \"http://127.0.0.1:9000\"\nallow_http = true\n";
        let cfg = PipelineConfig::parse(&text, Path::new("/base")).unwrap();
        assert_eq!(cfg.checkpoint_url.as_deref(), Some("s3://weir-ckpt/fraud/"));
        assert_eq!(cfg.checkpoint, PathBuf::from("/base/.weir-cache/fraud"));
        let text = text.replace(
            "[trigger]",
            "checkpoint_cache = \"/var/cache/weir\"\n[trigger]",
        );
        let cfg = PipelineConfig::parse(&text, Path::new("/base")).unwrap();
        assert_eq!(cfg.checkpoint, PathBuf::from("/var/cache/weir"));
    }

    #[test]
    fn object_store_keys_need_an_object_store_checkpoint() {
        let gs = GOOD.replace("checkpoint = \"ckpt\"", "checkpoint = \"gs://b/p\"");
        assert!(
            err_of(&gs).contains("`gs://` is not supported"),
            "{}",
            err_of(&gs)
        );
        let bucket = GOOD.replace("checkpoint = \"ckpt\"", "checkpoint = \"s3://B\"");
        assert!(
            err_of(&bucket).contains("is not a bucket name"),
            "{}",
            err_of(&bucket)
        );
        let stray = GOOD.to_string() + "[object_store]\nallow_http = true\n";
        assert!(
            err_of(&stray).contains("only for a checkpoint in an object store"),
            "{}",
            err_of(&stray)
        );
    }

    #[test]
    fn a_cluster_needs_kafka_an_object_store_and_a_continuous_trigger() {
        let cluster =
            GOOD.replace(
                "checkpoint = \"ckpt\"",
                "checkpoint = \"s3://weir-ckpt/fraud\"",
            )
            .replace(
                "mode = \"available-now\"",
                "mode = \"processing-time\"\ninterval = \"1s\"",
            )
            .replace(
                "kind = \"files\"\npath = \"in\"",
                "kind = \"kafka\"\nbootstrap_servers = \"k:9092\"\ntopics = [\"payments\"]",
            ) + "[cluster]\ngroup = \"fraud\"\n";
        let cfg = PipelineConfig::parse(&cluster, Path::new("/base")).unwrap();
        let c = cfg.cluster.unwrap();
        assert_eq!(c.session_timeout, Duration::from_secs(10));
        assert_eq!(c.assignment.librdkafka(), "roundrobin");
        for (change, said) in [
            (
                ("s3://weir-ckpt/fraud", "ckpt"),
                "checkpoint in an object store",
            ),
            (
                ("processing-time\"\ninterval = \"1s\"", "once\""),
                "continuous pipelines",
            ),
            (("group = \"fraud\"", "group = \" \""), "`cluster.group`"),
            (
                (
                    "group = \"fraud\"",
                    "group = \"f\"\nsession_timeout = \"10m\"",
                ),
                "between",
            ),
            (
                (
                    "group = \"fraud\"",
                    "group = \"f\"\nassignment = \"sticky\"",
                ),
                "unknown variant",
            ),
        ] {
            let text = cluster.replace(change.0, change.1);
            assert!(err_of(&text).contains(said), "{}", err_of(&text));
        }
        let files = GOOD
            .replace(
                "checkpoint = \"ckpt\"",
                "checkpoint = \"s3://weir-ckpt/fraud\"",
            )
            .to_string()
            + "[cluster]\ngroup = \"fraud\"\n";
        assert!(
            err_of(&files).contains("share by partition"),
            "{}",
            err_of(&files)
        );
    }

    /// A `[source]` or `[sink]` table for each connector kind; a new
    /// connector must add one here (the test below fails until it does).
    fn sample(section: &str, kind: &str) -> &'static str {
        match (section, kind) {
            ("source", "files") => "path = \"in\"\nschema = [ { name = \"a\", type = \"utf8\" } ]",
            ("source", "kafka") => {
                "bootstrap_servers = \"127.0.0.1:9092\"\ntopics = [\"payments\"]\n\
                 schema = [ { name = \"a\", type = \"utf8\" } ]"
            }
            ("source", "generator") => "rate = 5000\nseed = 3",
            ("source", "s3") => {
                "url = \"s3://payments/day=2026-12-01\"\n\
                 schema = [ { name = \"a\", type = \"utf8\" } ]"
            }
            ("sink", "files") | ("sink", "parquet") | ("sink", "delta") => "path = \"out\"",
            ("sink", "console") => "",
            ("sink", "kafka") => "bootstrap_servers = \"127.0.0.1:9092\"\ntopic = \"alerts\"",
            ("sink", "postgres") => {
                "url = \"postgresql://weir@127.0.0.1:5432/fraud\"\ntable = \"alerts\""
            }
            _ => panic!("no sample [{section}] for connector kind `{kind}`: add one"),
        }
    }

    #[test]
    fn every_registered_connector_is_built_from_a_pipeline_file() {
        let file = |source: &str, sink: &str| {
            format!(
                "name = \"p\"\ncheckpoint = \"ckpt\"\n[operator]\npath = \"op.wasm\"\n\
                 [source]\nkind = \"{source}\"\n{}\n[sink]\nkind = \"{sink}\"\n{}\n",
                sample("source", source),
                sample("sink", sink)
            )
        };
        for s in registry::SOURCES {
            let cfg = PipelineConfig::parse(&file(s.kind, "console"), Path::new("/base")).unwrap();
            assert_eq!(cfg.source.kind(), s.kind);
            assert_eq!(cfg.source.to_json().unwrap()["kind"], s.kind);
            assert!(!cfg.source.schema().unwrap().fields().is_empty());
        }
        for k in registry::SINKS {
            let cfg = PipelineConfig::parse(&file("files", k.kind), Path::new("/base")).unwrap();
            let only = cfg.sink.iter().next().unwrap();
            assert_eq!(only.settings.kind(), k.kind);
            assert!(cfg.sink.identity().unwrap().starts_with(k.kind));
            assert_eq!(serde_json::to_value(&cfg).unwrap()["sink"]["kind"], k.kind);
        }
        let text = err_of(&file("files", "console").replace("kind = \"console\"", "kind = \"s4\""));
        assert!(text.contains("unknown sink kind `s4`"), "{text}");
        assert!(text.contains("files, console, kafka, postgres"), "{text}");
    }

    #[test]
    fn the_operator_config_may_come_from_a_file_beside_the_pipeline() {
        let dir = tempfile::tempdir().unwrap();
        let with_file = |name: &str| {
            GOOD.replace(
                "config = { alert_threshold = 0.5 }",
                &format!("config_file = \"{name}\""),
            )
        };
        std::fs::write(dir.path().join("rules.json"), r#"{"alert_threshold": 0.9}"#).unwrap();
        let cfg = PipelineConfig::parse(&with_file("rules.json"), dir.path()).unwrap();
        assert_eq!(
            cfg.operator_config_json().unwrap(),
            r#"{"alert_threshold":0.9}"#
        );
        std::fs::write(dir.path().join("rules.toml"), "alert_threshold = 0.9\n").unwrap();
        let cfg = PipelineConfig::parse(&with_file("rules.toml"), dir.path()).unwrap();
        assert_eq!(
            cfg.operator_config_json().unwrap(),
            r#"{"alert_threshold":0.9}"#
        );

        let err =
            |text: &str| format!("{:#}", PipelineConfig::parse(text, dir.path()).unwrap_err());
        let missing = err(&with_file("nope.json"));
        assert!(
            missing.contains("`operator.config_file`") && missing.contains("nope.json"),
            "{missing}"
        );
        std::fs::write(dir.path().join("bad.json"), "{ not json").unwrap();
        assert!(err(&with_file("bad.json")).contains("is not valid JSON"));
        let both = GOOD.replace(
            "config = { alert_threshold = 0.5 }",
            "config = { alert_threshold = 0.5 }\nconfig_file = \"rules.json\"",
        );
        assert!(err(&both).contains("both set"), "{}", err(&both));
    }

    #[test]
    fn named_parts_of_the_config_may_come_from_files_beside_an_inline_config() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("merchants.json"), r#"["m-0666", "m-0777"]"#).unwrap();
        let with_parts = |parts: &str| {
            GOOD.replace(
                "config = { alert_threshold = 0.5 }",
                &format!("config = {{ alert_threshold = 0.5 }}\nconfig_files = {{ {parts} }}"),
            )
        };
        let cfg = PipelineConfig::parse(&with_parts(r#"merchants = "merchants.json""#), dir.path())
            .unwrap();
        assert_eq!(
            cfg.operator_config_json().unwrap(),
            r#"{"alert_threshold":0.5,"merchants":["m-0666","m-0777"]}"#
        );
        let err =
            |text: &str| format!("{:#}", PipelineConfig::parse(text, dir.path()).unwrap_err());
        let twice = err(&with_parts(r#"alert_threshold = "merchants.json""#));
        assert!(twice.contains("already has `alert_threshold`"), "{twice}");
        let missing = err(&with_parts(r#"merchants = "nope.json""#));
        assert!(
            missing.contains("`operator.config_files.merchants`") && missing.contains("nope.json"),
            "{missing}"
        );
    }

    fn err_of(text: &str) -> String {
        format!(
            "{:#}",
            PipelineConfig::parse(text, Path::new("/base")).unwrap_err()
        )
    }

    #[test]
    fn sources_take_every_type_and_lookups_the_basic_ones() {
        let source = "name = \"x\"\ncheckpoint = \"c\"\n[source]\nkind = \"files\"\n\
                      path = \"in\"\nschema = [ { name = \"amount\", type = \"decimal(18,2)\" } ]\n\
                      [operator]\npath = \"op.wasm\"\n[sink]\nkind = \"files\"\npath = \"out\"\n";
        PipelineConfig::parse(source, Path::new(".")).unwrap();
        let lookup = format!(
            "{source}[[lookup]]\nname = \"limits\"\nkey = \"card_id\"\npath = \"limits.jsonl\"\n\
             schema = [ {{ name = \"card_id\", type = \"utf8\" }}, \
             {{ name = \"limit\", type = \"decimal(18,2)\" }} ]\n"
        );
        let err = format!(
            "{:#}",
            PipelineConfig::parse(&lookup, Path::new(".")).unwrap_err()
        );
        assert!(err.contains("lookup `limits`"), "{err}");
        assert!(err.contains("column `limit` is a decimal(18,2)"), "{err}");
        assert!(err.contains("lookup tables hold only"), "{err}");
    }

    #[test]
    fn a_refusal_never_shows_a_line_holding_a_secret() {
        let text = "name = \"x\"\ncheckpoint = \"c\"\nsource = { kind = \"kafka\", \
                    bootstrap_servers = \"b:1\", topics = [\"t\"], sasl = { mechanism = \"PLAIN\", \
                    username = \"u\", password = \"hunter2-in-clear\" } }\n";
        let err = format!(
            "{:#}",
            PipelineConfig::parse(text, Path::new(".")).unwrap_err()
        );
        assert!(!err.contains("hunter2-in-clear"), "{err}");
        assert!(err.contains("line 3"), "{err}");
        let plain = "name = 1\n";
        let err = format!(
            "{:#}",
            PipelineConfig::parse(plain, Path::new(".")).unwrap_err()
        );
        assert!(
            err.contains("name = 1"),
            "other errors show their line: {err}"
        );
    }

    #[test]
    fn parses_and_resolves_relative_paths() {
        let cfg = PipelineConfig::parse(GOOD, Path::new("/base")).unwrap();
        assert_eq!(cfg.checkpoint, PathBuf::from("/base/ckpt"));
        assert_eq!(cfg.operator.path, PathBuf::from("/base/op.wasm"));
        assert_eq!(
            cfg.operator_config_json().unwrap(),
            r#"{"alert_threshold":0.5}"#
        );
        assert_eq!(cfg.trigger, TriggerConfig::AvailableNow);
        assert_eq!(cfg.batch_rows, 10_000);
    }

    #[test]
    fn missing_key_is_named() {
        let text = GOOD.replace("checkpoint = \"ckpt\"\n", "");
        assert!(
            err_of(&text).contains("missing field `checkpoint`"),
            "{}",
            err_of(&text)
        );
    }

    #[test]
    fn unknown_key_is_named() {
        let text = GOOD.replace("path = \"in\"", "path = \"in\"\nmax_file_per_trigger = 3");
        assert!(
            err_of(&text).contains("max_file_per_trigger"),
            "{}",
            err_of(&text)
        );
    }

    #[test]
    fn invalid_values_are_named() {
        let text = GOOD.replace("type = \"float64\"", "type = \"float\"");
        assert!(err_of(&text).contains("float"), "{}", err_of(&text));
        let text = GOOD.replace(
            "path = \"op.wasm\"",
            "path = \"op.wasm\"\nmemory = \"lots\"",
        );
        assert!(
            err_of(&text).contains("operator.memory"),
            "{}",
            err_of(&text)
        );
        let text = GOOD.replace(
            "mode = \"available-now\"",
            "mode = \"processing-time\"\ninterval = \"soon\"",
        );
        assert!(err_of(&text).contains("soon"), "{}", err_of(&text));
        let text = GOOD.replace("kind = \"files\"\npath = \"out\"", "kind = \"pulsar\"");
        assert!(err_of(&text).contains("pulsar"), "{}", err_of(&text));
    }

    #[test]
    fn outputs_inside_the_source_directory_are_refused() {
        for (from, to, key) in [
            ("path = \"out\"", "path = \"in/out\"", "`sink.path`"),
            (
                "checkpoint = \"ckpt\"",
                "checkpoint = \"in/ckpt\"",
                "`checkpoint`",
            ),
            (
                "path = \"in\"",
                "path = \"in\"\ndead_letter = \"./in/../in/dl\"",
                "`source.dead_letter`",
            ),
        ] {
            let text = err_of(&GOOD.replace(from, to));
            assert!(text.contains(key), "{text}");
            assert!(text.contains("inside the source directory"), "{text}");
        }
    }

    #[test]
    fn the_state_memory_is_a_size_of_at_least_4mib() {
        let parsed = PipelineConfig::parse(GOOD, Path::new("/base")).unwrap();
        assert_eq!(parsed.state.options().unwrap().memory, 16 << 20);
        let with = |memory: &str| GOOD.to_string() + &format!("\n[state]\nmemory = \"{memory}\"\n");
        let parsed = PipelineConfig::parse(&with("64MiB"), Path::new("/base")).unwrap();
        assert_eq!(parsed.state.options().unwrap().memory, 64 << 20);
        for (memory, says) in [
            ("1MiB", "`state.memory` = 1MiB is too small"),
            ("lots", "`state.memory`"),
            ("100000GiB", "more than this machine's memory"),
        ] {
            let text = err_of(&with(memory));
            assert!(text.contains(says), "{memory}: {text}");
        }
    }

    #[test]
    fn sizes_and_rows_are_bounded() {
        let text = GOOD.replace(
            "checkpoint = \"ckpt\"",
            "checkpoint = \"ckpt\"\nbatch_rows = 1000000000",
        );
        assert!(
            err_of(&text).contains("`batch_rows` must be between"),
            "{}",
            err_of(&text)
        );
        let text = GOOD.replace(
            "path = \"op.wasm\"",
            "path = \"op.wasm\"\nmemory = \"100000GiB\"",
        );
        assert!(err_of(&text).contains("at most 4GiB"), "{}", err_of(&text));
        let text = GOOD.replace(
            "path = \"op.wasm\"",
            "path = \"op.wasm\"\non_error = \"ignore\"",
        );
        assert!(err_of(&text).contains("ignore"), "{}", err_of(&text));
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("512MiB").unwrap(), 512 << 20);
        assert_eq!(parse_size("1GiB").unwrap(), 1 << 30);
        assert_eq!(parse_size("4096").unwrap(), 4096);
        assert!(parse_size("12 parsecs").is_err());
    }
}
