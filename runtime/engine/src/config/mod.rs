//! The pipeline file (`PIPELINE.toml`): what to read, which operator to run
//! with which limits, where to write, how often to trigger. Parsing is strict
//! (unknown keys are errors) and every error names the key at fault.

pub mod admin;

pub use admin::{AdminConfig, AdminSettings, ConnectionLimits};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::Duration;
use weir_host::{Grants, Limits};

/// A whole pipeline definition.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PipelineConfig {
    /// Pipeline name; recorded in the checkpoint, shown in logs and errors.
    pub name: String,
    /// Checkpoint directory (offset WAL, commit WAL, state, metadata).
    pub checkpoint: PathBuf,
    /// When epochs run.
    #[serde(default)]
    pub trigger: TriggerConfig,
    /// Where rows come from.
    pub source: SourceConfig,
    /// The Wasm operator.
    pub operator: OperatorConfig,
    /// Where output rows go.
    pub sink: SinkConfig,
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
    /// The admin HTTP API (deploy, roll back, shadow). Off unless present.
    /// Not part of the config hash: where the API listens and its token
    /// change nothing about what epochs compute.
    #[serde(default, skip_serializing)]
    pub admin: Option<AdminConfig>,
    /// Progress records kept in the checkpoint. Not part of the config hash.
    #[serde(default, skip_serializing)]
    pub progress: ProgressConfig,
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

impl Default for ProgressConfig {
    fn default() -> Self {
        ProgressConfig {
            retain: default_progress_retain(),
        }
    }
}

fn default_progress_retain() -> usize {
    crate::observe::DEFAULT_RETAIN
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StateConfig {
    /// A snapshot after every this many epochs; 0 turns snapshots off.
    #[serde(default = "default_snapshot_every")]
    pub snapshot_every: u64,
    /// How many snapshots are kept.
    #[serde(default = "default_snapshots_retained")]
    pub snapshots_retained: usize,
}

impl Default for StateConfig {
    fn default() -> Self {
        let p = weir_state::SnapshotPolicy::default();
        StateConfig {
            snapshot_every: p.every,
            snapshots_retained: p.retain,
        }
    }
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

pub(crate) mod humantime_serde_compat {
    use serde::{Deserialize, Deserializer, Serializer};
    use std::time::Duration;

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&humantime::format_duration(*d).to_string())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let text = String::deserialize(d)?;
        humantime::parse_duration(&text).map_err(|e| {
            serde::de::Error::custom(format!(
                "`{text}` is not a duration ({e}); write e.g. \"500ms\" or \"2s\""
            ))
        })
    }
}

/// Type of a declared source column.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ColumnType {
    Int64,
    Float64,
    Boolean,
    Utf8,
}

/// One declared column of the source schema.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ColumnConfig {
    pub name: String,
    #[serde(rename = "type")]
    pub data_type: ColumnType,
    #[serde(default)]
    pub nullable: bool,
}

pub use weir_core::json::MalformedPolicy;

/// Where rows come from.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum SourceConfig {
    /// A directory of JSON-lines files.
    Files {
        path: PathBuf,
        schema: Vec<ColumnConfig>,
        #[serde(default = "default_max_files")]
        max_files_per_trigger: usize,
        #[serde(default)]
        on_malformed: MalformedPolicy,
        /// Directory for dead letters; default `<checkpoint>/dead-letter`.
        #[serde(default)]
        dead_letter: Option<PathBuf>,
        /// Plan a file only once it has been unchanged this long, e.g. "2s",
        /// for writers that append in place instead of renaming a finished
        /// file into the directory (default 0: plan at once).
        #[serde(default, with = "humantime_serde_compat")]
        settle: Duration,
    },
    /// Kafka topics; the runtime owns the offsets (see `source::kafka`).
    Kafka {
        bootstrap_servers: String,
        topics: Vec<String>,
        #[serde(default)]
        starting_offsets: weir_connectors::kafka::StartingOffsets,
        #[serde(default)]
        max_offsets_per_trigger: Option<u64>,
        #[serde(default = "yes")]
        fail_on_data_loss: bool,
        #[serde(default)]
        value_format: weir_connectors::kafka::ValueFormat,
        /// Columns of JSON values (`value_format = "json"`).
        #[serde(default)]
        schema: Vec<ColumnConfig>,
        #[serde(default)]
        on_malformed: MalformedPolicy,
        #[serde(default)]
        dead_letter: Option<PathBuf>,
        /// Also commit end offsets to this consumer group after each epoch,
        /// only so that standard lag tools can see progress.
        #[serde(default)]
        commit_to_group: Option<String>,
        /// Extra librdkafka settings, e.g. `{ "security.protocol" = "ssl" }`.
        #[serde(default)]
        options: std::collections::BTreeMap<String, String>,
        /// How long metadata and offset requests may take before failing.
        #[serde(default = "default_kafka_timeout", with = "humantime_serde_compat")]
        timeout: Duration,
    },
}

fn default_max_files() -> usize {
    100
}

fn yes() -> bool {
    true
}

fn default_kafka_timeout() -> Duration {
    Duration::from_secs(10)
}

fn check_schema(schema: &[ColumnConfig]) -> Result<()> {
    if schema.is_empty() {
        bail!("`source.schema` must declare at least one column");
    }
    for (i, c) in schema.iter().enumerate() {
        if c.name.is_empty() {
            bail!("`source.schema[{i}].name` must not be empty");
        }
        if schema[..i].iter().any(|o| o.name == c.name) {
            bail!("`source.schema` declares column `{}` twice", c.name);
        }
    }
    Ok(())
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

/// Where output rows go.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum SinkConfig {
    /// One JSON-lines file per epoch in `path`, written atomically.
    Files { path: PathBuf },
    /// Rows printed to stdout (at-least-once: a replayed epoch prints again).
    Console,
    /// One JSON message per row to a Kafka topic (see `sink::kafka`).
    Kafka {
        bootstrap_servers: String,
        topic: String,
        /// Output column used as the message key.
        #[serde(default)]
        key_column: Option<String>,
        /// One transaction per epoch (exactly-once); needs a broker with
        /// KIP-98 transactions. Default: at-least-once with epoch headers.
        #[serde(default)]
        transactional: bool,
        #[serde(default)]
        options: std::collections::BTreeMap<String, String>,
        #[serde(default = "default_kafka_timeout", with = "humantime_serde_compat")]
        timeout: Duration,
    },
    /// Rows into a PostgreSQL table, one transaction per epoch, exactly
    /// once (see `sink::postgres`).
    Postgres {
        /// Connection string (URL or `key=value`); else read from `url_env`.
        #[serde(default)]
        url: Option<String>,
        /// Environment variable holding the connection string, so the
        /// password stays out of the pipeline file.
        #[serde(default)]
        url_env: Option<String>,
        /// PostgreSQL schema of `table` and `progress_table`.
        #[serde(default = "default_pg_schema")]
        schema: String,
        table: String,
        /// This sink's name in the progress table; default: `table`.
        #[serde(default)]
        name: Option<String>,
        /// Records the epochs each query has written.
        #[serde(default = "default_progress_table")]
        progress_table: String,
        /// Create `table` from the operator's output columns if missing.
        #[serde(default = "yes")]
        create_table: bool,
        #[serde(default)]
        write_method: weir_connectors::postgres::WriteMethod,
        /// Rows from which `write_method = "auto"` uses COPY.
        #[serde(default = "default_copy_threshold")]
        copy_threshold: usize,
        /// How long start-up waits for the server.
        #[serde(default = "default_pg_timeout", with = "humantime_serde_compat")]
        timeout: Duration,
    },
}

/// The variable a PostgreSQL sink without `url` takes its connection string from.
pub const DEFAULT_POSTGRES_URL_ENV: &str = "WEIR_POSTGRES_URL";

fn default_pg_schema() -> String {
    "public".into()
}

fn default_progress_table() -> String {
    weir_connectors::postgres::DEFAULT_PROGRESS_TABLE.into()
}

fn default_pg_timeout() -> Duration {
    weir_connectors::postgres::DEFAULT_TIMEOUT
}

fn default_copy_threshold() -> usize {
    weir_connectors::postgres::DEFAULT_COPY_THRESHOLD
}

impl SinkConfig {
    /// Identity recorded in the checkpoint metadata; a checkpoint made for
    /// another sink is refused. Never holds credentials.
    pub fn identity(&self) -> Result<String> {
        Ok(match self {
            SinkConfig::Files { path } => format!("files:{}", path.display()),
            SinkConfig::Console => "console".into(),
            SinkConfig::Kafka {
                bootstrap_servers,
                topic,
                ..
            } => format!("kafka:{bootstrap_servers}/{topic}"),
            SinkConfig::Postgres {
                schema,
                table,
                timeout,
                ..
            } => {
                let cfg = weir_connectors::postgres::connection_config(
                    &self.postgres_url()?,
                    *timeout,
                    "weir",
                )?;
                format!(
                    "postgres:{}/{schema}.{table}",
                    weir_connectors::postgres::location(&cfg)
                )
            }
        })
    }

    /// The PostgreSQL connection string, from `url` or the environment.
    pub fn postgres_url(&self) -> Result<String> {
        let SinkConfig::Postgres { url, url_env, .. } = self else {
            bail!("not a PostgreSQL sink");
        };
        if let Some(url) = url {
            return Ok(url.clone());
        }
        let var = url_env.as_deref().unwrap_or(DEFAULT_POSTGRES_URL_ENV);
        match std::env::var(var) {
            Ok(v) if !v.trim().is_empty() => Ok(v),
            _ => bail!(
                "`sink.url` is not set and the environment variable {var} (`sink.url_env`) is \
                 empty; set one of them to a connection string such as \
                 postgresql://user:password@127.0.0.1:5432/fraud"
            ),
        }
    }
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
        let mut cfg: PipelineConfig = toml::from_str(text).map_err(|e| anyhow::anyhow!("{e}"))?;
        cfg.validate()?;
        // One place, one spelling: the checkpoint records source and sink
        // paths, and `cd dir && weir run pipeline.toml` must name the
        // same ones as `weir run dir/pipeline.toml`.
        let base = base.canonicalize().unwrap_or_else(|_| base.to_path_buf());
        cfg.resolve_paths(&base);
        cfg.check_outputs_outside_source()?;
        Ok(cfg)
    }

    /// Refuses a sink, dead-letter or checkpoint directory inside the files
    /// source's directory: what the pipeline writes would come back as
    /// input (dead letters doubled every epoch until the disk filled).
    fn check_outputs_outside_source(&self) -> Result<()> {
        let SourceConfig::Files {
            path: source,
            dead_letter,
            ..
        } = &self.source
        else {
            return Ok(());
        };
        let mut outputs = vec![("checkpoint", &self.checkpoint)];
        if let Some(d) = dead_letter {
            outputs.push(("source.dead_letter", d));
        }
        if let SinkConfig::Files { path } = &self.sink {
            outputs.push(("sink.path", path));
        }
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

    fn resolve_paths(&mut self, base: &Path) {
        let fix = |p: &mut PathBuf| {
            *p = weir_core::fsutil::normalize(&base.join(&*p));
        };
        fix(&mut self.checkpoint);
        fix(&mut self.operator.path);
        match &mut self.source {
            SourceConfig::Files {
                path, dead_letter, ..
            } => {
                fix(path);
                if let Some(d) = dead_letter {
                    fix(d);
                }
            }
            SourceConfig::Kafka { dead_letter, .. } => {
                if let Some(d) = dead_letter {
                    fix(d);
                }
            }
        }
        if let SinkConfig::Files { path } = &mut self.sink {
            fix(path);
        }
    }

    fn validate(&self) -> Result<()> {
        if self.name.trim().is_empty() {
            bail!("`name` must not be empty");
        }
        if self.batch_rows == 0 || self.batch_rows > MAX_BATCH_ROWS {
            bail!("`batch_rows` must be between 1 and {MAX_BATCH_ROWS}");
        }
        if let TriggerConfig::ProcessingTime { interval } = self.trigger {
            if interval.is_zero() {
                bail!("`trigger.interval` must be longer than zero");
            }
        }
        match &self.source {
            SourceConfig::Files {
                schema,
                max_files_per_trigger,
                ..
            } => {
                if *max_files_per_trigger == 0 {
                    bail!("`source.max_files_per_trigger` must be at least 1");
                }
                check_schema(schema)?;
            }
            SourceConfig::Kafka {
                bootstrap_servers,
                topics,
                max_offsets_per_trigger,
                value_format,
                schema,
                timeout,
                ..
            } => {
                if bootstrap_servers.trim().is_empty() {
                    bail!("`source.bootstrap_servers` must not be empty");
                }
                if topics.is_empty() || topics.iter().any(|t| t.trim().is_empty()) {
                    bail!("`source.topics` must name at least one topic, none of them empty");
                }
                if *max_offsets_per_trigger == Some(0) {
                    bail!("`source.max_offsets_per_trigger` must be at least 1");
                }
                if timeout.is_zero() {
                    bail!("`source.timeout` must be longer than zero");
                }
                match value_format {
                    weir_connectors::kafka::ValueFormat::Json => check_schema(schema)?,
                    weir_connectors::kafka::ValueFormat::Raw if !schema.is_empty() => {
                        bail!("`source.schema` is only for `value_format = \"json\"`")
                    }
                    weir_connectors::kafka::ValueFormat::Raw => {}
                }
            }
        }
        if let SinkConfig::Postgres {
            url,
            url_env,
            schema,
            table,
            name,
            progress_table,
            timeout,
            ..
        } = &self.sink
        {
            if url.is_some() && url_env.is_some() {
                bail!("`sink.url` and `sink.url_env` are both set; keep one");
            }
            if let Some(url) = url {
                weir_connectors::postgres::connection_config(url, *timeout, "weir")
                    .context("`sink.url`")?;
            }
            for (key, value) in [
                ("schema", Some(schema)),
                ("table", Some(table)),
                ("name", name.as_ref()),
                ("progress_table", Some(progress_table)),
                ("url_env", url_env.as_ref()),
            ] {
                if value.is_some_and(|v| v.trim().is_empty()) {
                    bail!("`sink.{key}` must not be empty");
                }
            }
            if timeout.is_zero() {
                bail!("`sink.timeout` must be longer than zero");
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
        if self.state.snapshot_every > 0 && self.state.snapshots_retained == 0 {
            bail!("`state.snapshots_retained` must be at least 1 while snapshots are taken");
        }
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
        if let Some(total) = machine_memory().filter(|&t| memory > t) {
            bail!(
                "`operator.memory` = {} is more than this machine's memory ({} MiB)",
                self.operator.memory,
                total >> 20
            );
        }
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

    /// The operator config as the JSON text `init` receives.
    pub fn operator_config_json(&self) -> Result<String> {
        Ok(serde_json::to_string(&self.operator.config)?)
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

    fn err_of(text: &str) -> String {
        format!(
            "{:#}",
            PipelineConfig::parse(text, Path::new("/base")).unwrap_err()
        )
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
