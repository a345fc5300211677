//! A pipeline as the engine runs it ([`PipelineConfig`], the plan), built
//! from the pipeline file (`PIPELINE.toml`, the types in `file.rs`): what
//! to read, which operator to run with which limits, where to write, how
//! often to trigger. Parsing is strict (unknown keys are errors) and every
//! error names the key at fault; the sections both share (triggers, `[wal]`,
//! event time, …) are defined here.

pub mod admin;
pub mod cluster;
mod file;
pub mod lookup;
pub mod sinks;

pub use admin::{AdminConfig, AdminSettings, AdminTlsConfig, ConnectionLimits};
pub use cluster::{Assignment, ClusterConfig};
pub use file::{
    config_file_json, parse_size, OperatorSection, PipelineFile, StateSection, MAX_BATCH_ROWS,
    MAX_ISOLATED, MAX_OPERATOR_MEMORY,
};

use anyhow::{bail, Context, Result};
use serde::Deserialize;
use std::path::{Path, PathBuf};
use std::time::Duration;
use weir_connectors::connector::{SinkSettings, SourceSettings};
use weir_connectors::registry;
use weir_connectors::s3::ObjectStoreSettings;
use weir_host::{Grants, Limits};

/// A pipeline as the engine runs it: the pipeline file resolved by
/// [`PipelineFile::resolve`] (paths absolute, sizes in bytes, the
/// checkpoint's location typed, the operator's config read and checked).
#[derive(Debug, Clone)]
pub struct PipelineConfig {
    pub name: String,
    /// Where the checkpoint is.
    pub checkpoint: CheckpointLocation,
    /// Tasks that run the operator side by side (default: decided at open).
    pub parallelism: Option<u16>,
    /// The input column rows are routed to tasks by.
    pub key: Option<String>,
    pub trigger: TriggerConfig,
    pub source: SourceConfig,
    pub operator: OperatorPlan,
    pub sink: sinks::Sinks,
    pub batch_rows: usize,
    /// How the state store is opened.
    pub state: weir_state::StoreOptions,
    pub wal: WalConfig,
    pub event_time: Option<EventTimeConfig>,
    pub dedup: Option<DedupConfig>,
    pub lookups: Vec<lookup::LookupConfig>,
    /// The admin API, if served. Not part of what epochs compute.
    pub admin: Option<AdminConfig>,
    pub progress: ProgressConfig,
    pub cluster: Option<ClusterConfig>,
}

/// Where a pipeline's checkpoint is kept.
#[derive(Debug, Clone)]
pub enum CheckpointLocation {
    /// A local directory.
    Local(PathBuf),
    /// An object store under `url` (`s3://bucket/prefix`), with a local
    /// cache directory: the working copy of the state and a copy of the
    /// logs.
    ObjectStore {
        url: String,
        cache: PathBuf,
        store: ObjectStoreSettings,
    },
}

impl CheckpointLocation {
    /// The local directory the pipeline works in: the checkpoint, or the
    /// cache of one in an object store.
    pub fn dir(&self) -> &Path {
        match self {
            CheckpointLocation::Local(dir) => dir,
            CheckpointLocation::ObjectStore { cache, .. } => cache,
        }
    }

    /// The object store URL, for a checkpoint kept in one.
    pub fn url(&self) -> Option<&str> {
        match self {
            CheckpointLocation::Local(_) => None,
            CheckpointLocation::ObjectStore { url, .. } => Some(url),
        }
    }
}

/// The operator as the engine runs it.
#[derive(Debug, Clone)]
pub struct OperatorPlan {
    /// The component file.
    pub path: PathBuf,
    /// The JSON text `init` receives (inline, from `config_file`, with
    /// `config_files` put under their names).
    pub config_json: String,
    /// Named files the operator reads, by name.
    pub artifacts: std::collections::BTreeMap<String, PathBuf>,
    /// The deadline per call and the memory cap in bytes.
    pub limits: Limits,
    pub grants: Grants,
    /// Namespace of the operator's keyed state.
    pub state_namespace: String,
    /// What operator failures do.
    pub failure: FailurePolicy,
}

/// `[wal]`: the offset and commit logs are compacted every `compact_every`
/// epochs (everything up to then folded into one `offsets/<N>.compact`
/// entry), keeping the newest `retain` entries of each, so a start reads a
/// bounded number of files however long the pipeline has run. Entries a
/// state rebuild may replay (after the newest state snapshot) are kept too.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
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

impl WalConfig {
    fn validate(&self) -> Result<()> {
        if self.retain == 0 {
            bail!("`wal.retain` must be at least 1");
        }
        Ok(())
    }
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
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EventTimeConfig {
    /// The column: int64 Unix milliseconds, or a timestamp.
    pub column: String,
    /// How far behind the largest event time seen a row may be and still
    /// count, e.g. `"1m"`: the watermark trails by this much.
    #[serde(default, with = "humantime_serde_compat")]
    pub allowed_lateness: Duration,
}

/// Drop rows whose key was already seen within the watermark (Spark's
/// `dropDuplicatesWithinWatermark`). Needs `[event_time]`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DedupConfig {
    /// A utf8 or int64 column.
    pub column: String,
}

/// How epochs are triggered (Spark's `Trigger`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(tag = "mode", rename_all = "kebab-case", deny_unknown_fields)]
pub enum TriggerConfig {
    /// An epoch every `interval` while new data exists; runs until stopped.
    ProcessingTime {
        /// Time from one epoch's start to the next's, e.g. `"1s"`.
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
        /// Time between epochs, e.g. `"1s"`: how often the logs and the
        /// state are made durable and a swap can take effect.
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
    fn validate(&self) -> Result<()> {
        match self {
            TriggerConfig::ProcessingTime { interval } if interval.is_zero() => {
                bail!("`trigger.interval` must be longer than zero");
            }
            TriggerConfig::RealTime {
                checkpoint_interval,
            } if checkpoint_interval.is_zero() => {
                bail!("`trigger.checkpoint_interval` must be longer than zero");
            }
            _ => Ok(()),
        }
    }

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

/// `operator.on_error`: what a deterministic operator failure does.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OnError {
    /// Isolate the failing records into the dead-letter output; go on.
    #[default]
    DeadLetter,
    /// Stop the pipeline with the failure.
    Fail,
}

/// How the engine treats operator failures (`[operator]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FailurePolicy {
    pub on_error: OnError,
    pub probation_epochs: u64,
    pub max_isolated: usize,
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
    /// Reads and resolves a pipeline file; relative paths are taken from
    /// the file's directory.
    pub fn load(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading pipeline config {}", path.display()))?;
        let base = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        Self::parse(&text, base).with_context(|| format!("in pipeline config {}", path.display()))
    }

    /// Parses and resolves pipeline file text; relative paths are joined
    /// to `base`.
    pub fn parse(text: &str, base: &Path) -> Result<Self> {
        let file: PipelineFile = toml::from_str(text)
            .map_err(|e| anyhow::anyhow!("{}", describe_toml_error(text, &e)))?;
        file.resolve(base)
    }

    /// Refuses a sink, dead-letter or checkpoint directory inside the files
    /// source's directory: what the pipeline writes would come back as
    /// input (dead letters doubled every epoch until the disk filled).
    fn check_outputs_outside_source(&self) -> Result<()> {
        let Some(source) = self.source.input_dir() else {
            return Ok(());
        };
        let mut outputs = vec![("checkpoint", self.checkpoint.dir())];
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
        if self.checkpoint.url().is_none() {
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
        assert_eq!(cfg.checkpoint.url(), Some("s3://weir-ckpt/fraud/"));
        assert_eq!(cfg.checkpoint.dir(), Path::new("/base/.weir-cache/fraud"));
        let text = text.replace(
            "[trigger]",
            "checkpoint_cache = \"/var/cache/weir\"\n[trigger]",
        );
        let cfg = PipelineConfig::parse(&text, Path::new("/base")).unwrap();
        assert_eq!(cfg.checkpoint.dir(), Path::new("/var/cache/weir"));
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
            assert!(!cfg.source.schema().unwrap().fields().is_empty());
        }
        for k in registry::SINKS {
            let cfg = PipelineConfig::parse(&file("files", k.kind), Path::new("/base")).unwrap();
            let only = cfg.sink.iter().next().unwrap();
            assert_eq!(only.settings.kind(), k.kind);
            assert!(cfg.sink.identity().unwrap().starts_with(k.kind));
            assert_eq!(only.settings.kind(), k.kind);
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
        assert_eq!(cfg.operator.config_json, r#"{"alert_threshold":0.9}"#);
        std::fs::write(dir.path().join("rules.toml"), "alert_threshold = 0.9\n").unwrap();
        let cfg = PipelineConfig::parse(&with_file("rules.toml"), dir.path()).unwrap();
        assert_eq!(cfg.operator.config_json, r#"{"alert_threshold":0.9}"#);

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
            cfg.operator.config_json,
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
        assert_eq!(cfg.checkpoint.dir(), Path::new("/base/ckpt"));
        assert_eq!(cfg.operator.path, PathBuf::from("/base/op.wasm"));
        assert_eq!(cfg.operator.config_json, r#"{"alert_threshold":0.5}"#);
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
        assert_eq!(parsed.state.memory, 16 << 20);
        let with = |memory: &str| GOOD.to_string() + &format!("\n[state]\nmemory = \"{memory}\"\n");
        let parsed = PipelineConfig::parse(&with("64MiB"), Path::new("/base")).unwrap();
        assert_eq!(parsed.state.memory, 64 << 20);
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
