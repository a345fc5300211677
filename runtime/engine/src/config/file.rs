//! The pipeline file as it is written: the types serde reads it into
//! (unknown keys refused), and their doc comments, which are the reference
//! (`docs/config.md` is generated from them). The engine runs the plan, not
//! these: [`PipelineFile::resolve`] turns the file into the
//! [`PipelineConfig`] plan — paths absolute, sizes in bytes, the
//! checkpoint's location typed, the operator's config read — each section
//! checking itself on the way.

use super::admin::AdminConfig;
use super::cluster::ClusterConfig;
use super::lookup::LookupConfig;
use super::sinks::Sinks;
use super::{
    CheckpointLocation, DedupConfig, EventTimeConfig, OperatorPlan, PipelineConfig, ProgressConfig,
    SourceConfig, TriggerConfig, WalConfig,
};
use crate::config::{FailurePolicy, OnError};
use anyhow::{bail, Context, Result};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;
use weir_connectors::s3::{ObjectStoreSettings, S3Url};
use weir_host::{Grants, Limits};

/// A pipeline: where its rows come from, which operator runs over them
/// with which limits, where the output goes, and when epochs run. The
/// keys below are the file's top level; the tables after them are its
/// sections.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PipelineFile {
    /// The pipeline's name: recorded in the checkpoint, shown in logs,
    /// metrics and errors, and what admin commands name (`-p NAME`).
    pub name: String,
    /// Where the offset and commit logs, the state and the operator
    /// versions are kept: a directory (keep it off tmpfs and `/tmp`), or
    /// an `s3://bucket/prefix` URL for a checkpoint in an object store
    /// (with a local cache, `checkpoint_cache`).
    pub checkpoint: String,
    /// For an `s3://` checkpoint only: the local cache — the working copy
    /// of the state and a copy of the logs, rebuilt from the object store
    /// when it is empty or stale. Default `.weir-cache/<name>` beside the
    /// pipeline file.
    pub checkpoint_cache: Option<PathBuf>,
    /// For an `s3://` checkpoint only: how to reach the object store.
    pub object_store: Option<ObjectStoreSettings>,
    /// Tasks that run the operator side by side, each on a thread of its
    /// own over its share of every epoch (1 to 128; default: one per core,
    /// or one for an operator with keyed state and no `key`). Changing it
    /// between runs rescales: the tasks own other ranges of key groups,
    /// nothing stored moves (docs/parallelism.md).
    pub parallelism: Option<u16>,
    /// The input column (utf8 or int64) whose value decides which task a
    /// row goes to, so that all rows of one key (a card) meet the same
    /// task and its state. Without it rows are split evenly, which suits
    /// stateless operators.
    pub key: Option<String>,
    /// When epochs run.
    #[serde(default)]
    pub trigger: TriggerConfig,
    /// Where rows come from: one source connector, chosen by `kind`.
    pub source: SourceConfig,
    /// The operator (a Wasm component) and its sandbox.
    pub operator: OperatorSection,
    /// Where output rows go: one `[sink]`, or `[[sink]]` tables that each
    /// take one of the operator's outputs.
    pub sink: Sinks,
    /// Largest micro-batch handed to one `process` call, in rows (1 to
    /// 1,000,000).
    #[serde(default = "default_batch_rows")]
    pub batch_rows: usize,
    /// The operator's keyed state: snapshots and memory.
    #[serde(default)]
    pub state: StateSection,
    /// Compaction of the offset and commit logs.
    #[serde(default)]
    pub wal: WalConfig,
    /// The event-time column and how late rows may be (the watermark).
    /// Without it no timer fires and no window closes.
    pub event_time: Option<EventTimeConfig>,
    /// The host drops rows whose key was already seen within the
    /// watermark. Needs `[event_time]`.
    pub dedup: Option<DedupConfig>,
    /// Reference tables the operator looks rows up in, each a
    /// `[[lookup]]` table.
    #[serde(default, rename = "lookup")]
    pub lookups: Vec<LookupConfig>,
    /// The admin API (deploy, roll back, shadow; status, metrics, the
    /// dashboard). Off unless present.
    pub admin: Option<AdminConfig>,
    /// Per-epoch progress records kept in the checkpoint.
    #[serde(default)]
    pub progress: ProgressConfig,
    /// This file runs on several workers that share the Kafka source's
    /// partitions and an object-store checkpoint (docs/cluster.md). Off
    /// unless present.
    pub cluster: Option<ClusterConfig>,
}

/// `[operator]`: the component, its configuration, its limits, and what
/// its failures do.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OperatorSection {
    /// The component file (`.wasm`), implementing `weir:operator`.
    pub path: PathBuf,
    /// The configuration `init` receives, as JSON (a TOML table here;
    /// default: an empty table).
    #[serde(default = "empty_table")]
    pub config: toml::Value,
    /// The configuration in a file of its own instead (`.json`, or `.toml`
    /// converted to JSON): rules the fraud team edits apart from the
    /// pipeline. Read when the pipeline file is; its digest is recorded
    /// like an inline config's.
    pub config_file: Option<PathBuf>,
    /// Named parts of the config from files of their own, each put under
    /// its name in the config `init` receives, beside `config` or
    /// `config_file`: `{ high_risk_merchants = "merchants.json" }` for a
    /// list kept as a plain JSON array (or any JSON or `.toml` value).
    #[serde(default)]
    pub config_files: BTreeMap<String, PathBuf>,
    /// Named files the operator reads through `weir:operator/artifacts`
    /// (`{ model = "model.onnx" }`): stored by digest and recorded with
    /// every epoch, like the component.
    #[serde(default)]
    pub artifacts: BTreeMap<String, PathBuf>,
    /// CPU time one call (`init`, `process`, `on-timers`) may take before
    /// it is stopped.
    #[serde(default = "default_deadline", with = "weir_core::duration")]
    pub deadline: Duration,
    /// Linear-memory cap per instance, e.g. `"256MiB"` (1MiB to 4GiB, and
    /// at most the machine's memory).
    #[serde(default = "default_memory")]
    pub memory: String,
    /// Capabilities beyond the default sandbox.
    #[serde(default)]
    pub grants: Grants,
    /// Namespace of the operator's keyed state: every version deployed
    /// under it sees the same state (1 to 255 bytes, not starting with
    /// `weir.`).
    #[serde(default = "default_state_namespace")]
    pub state_namespace: String,
    /// What a deterministic operator failure on an epoch (trap, deadline,
    /// `failed`, invalid output, memory cap) does: `"dead-letter"` finds
    /// the records it fails on by bisection, sets them aside and processes
    /// the rest; `"fail"` stops the pipeline.
    #[serde(default)]
    pub on_error: OnError,
    /// For how many epochs after a swap a failing version is suspected
    /// before its input: if the version before it handles the epoch, the
    /// new one is rolled back automatically.
    #[serde(default = "default_probation_epochs")]
    pub probation_epochs: u64,
    /// Most records one epoch may set aside under `on_error =
    /// "dead-letter"` (1 to 1000); past it the failure is taken for the
    /// version's, not the records', and the epoch waits, retried with
    /// backoff, for a fix.
    #[serde(default = "default_max_isolated")]
    pub max_isolated: usize,
}

/// `[state]`: snapshots of the keyed state
/// (`checkpoint/state/snapshots/<N>`), from which a lost or corrupt
/// working copy is rebuilt, and the memory RocksDB may use.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StateSection {
    /// A snapshot after every this many epochs; 0 turns snapshots off.
    #[serde(default = "default_snapshot_every")]
    pub snapshot_every: u64,
    /// How many snapshots are kept.
    #[serde(default = "default_snapshots_retained")]
    pub snapshots_retained: usize,
    /// Memory RocksDB may keep for the state, half block cache and half
    /// memtables. More keeps more of a large state's blocks in memory; the
    /// minimum is `"4MiB"`.
    #[serde(default = "default_state_memory")]
    pub memory: String,
}

impl Default for StateSection {
    fn default() -> Self {
        StateSection {
            snapshot_every: default_snapshot_every(),
            snapshots_retained: default_snapshots_retained(),
            memory: default_state_memory(),
        }
    }
}

/// Largest `batch_rows`: one `process` call's batch must fit an operator's
/// memory (at most 4 GiB for a 32-bit Wasm guest) with room to spare.
pub const MAX_BATCH_ROWS: usize = 1_000_000;

/// Largest `operator.memory`: a 32-bit Wasm guest cannot address more.
pub const MAX_OPERATOR_MEMORY: usize = 4 << 30;

/// Upper bound of `operator.max_isolated`: each isolated record costs about
/// `2 log2(rows)` operator runs to find, some of them up to the deadline.
pub const MAX_ISOLATED: usize = 1000;

fn default_batch_rows() -> usize {
    10_000
}

fn default_snapshot_every() -> u64 {
    10
}

fn default_snapshots_retained() -> usize {
    3
}

fn default_state_memory() -> String {
    "16MiB".into()
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
    Duration::from_secs(10)
}

fn default_memory() -> String {
    "512MiB".into()
}

impl PipelineFile {
    /// The plan this file describes, with relative paths taken from `base`
    /// (made canonical: the checkpoint records source and sink paths, and
    /// `cd dir && weir run pipeline.toml` must name the same ones as `weir
    /// run dir/pipeline.toml`).
    pub fn resolve(mut self, base: &Path) -> Result<PipelineConfig> {
        let base = base.canonicalize().unwrap_or_else(|_| base.to_path_buf());
        let fix = |p: &mut PathBuf| *p = weir_core::fsutil::normalize(&base.join(&*p));
        self.check_top_level()?;
        self.trigger.validate()?;
        self.source.validate()?;
        self.sink.validate()?;
        self.wal.validate()?;
        check_lookups(&self.lookups)?;
        if self.dedup.is_some() && self.event_time.is_none() {
            bail!(
                "`dedup` needs `[event_time]`: keys are remembered until the watermark passes \
                 them (add e.g. [event_time] column = \"ts\", allowed_lateness = \"1m\")"
            );
        }
        let checkpoint = self.checkpoint_location(&fix)?;
        let state = self.state.resolve()?;
        let operator = self.operator.resolve(&fix)?;
        for l in &mut self.lookups {
            l.path.iter_mut().for_each(fix);
        }
        if let Some(admin) = &mut self.admin {
            admin.resolve_paths(&fix);
            super::AdminSettings::resolve(admin).context("`[admin]`")?;
        }
        self.source.paths().into_iter().for_each(fix);
        for sink in self.sink.iter_mut() {
            sink.settings.paths().into_iter().for_each(fix);
        }
        let cfg = PipelineConfig {
            name: self.name,
            checkpoint,
            parallelism: self.parallelism,
            key: self.key,
            trigger: self.trigger,
            source: self.source,
            operator,
            sink: self.sink,
            batch_rows: self.batch_rows,
            state,
            wal: self.wal,
            event_time: self.event_time,
            dedup: self.dedup,
            lookups: self.lookups,
            admin: self.admin,
            progress: self.progress,
            cluster: self.cluster,
        };
        cfg.check_cluster()?;
        cfg.check_outputs_outside_source()?;
        Ok(cfg)
    }

    fn check_top_level(&self) -> Result<()> {
        if self.name.trim().is_empty() {
            bail!("`name` must not be empty");
        }
        if self.batch_rows == 0 || self.batch_rows > MAX_BATCH_ROWS {
            bail!("`batch_rows` must be between 1 and {MAX_BATCH_ROWS}");
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
        Ok(())
    }

    /// `checkpoint` as a directory, or an `s3://` URL with its cache and
    /// store; other URL schemes, and the object-store keys beside a local
    /// checkpoint, are refused.
    fn checkpoint_location(&mut self, fix: &impl Fn(&mut PathBuf)) -> Result<CheckpointLocation> {
        let text = self.checkpoint.clone();
        if text.starts_with("s3://") {
            S3Url::parse(&text).context("`checkpoint`")?;
            let mut cache = match self.checkpoint_cache.take() {
                Some(cache) => cache,
                None => Path::new(".weir-cache").join(&self.name),
            };
            fix(&mut cache);
            let mut store = self.object_store.take().unwrap_or_default();
            store.ca_file.iter_mut().for_each(fix);
            return Ok(CheckpointLocation::ObjectStore {
                url: text,
                cache,
                store,
            });
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
        let mut dir = PathBuf::from(text);
        fix(&mut dir);
        Ok(CheckpointLocation::Local(dir))
    }
}

fn check_lookups(lookups: &[LookupConfig]) -> Result<()> {
    let mut names = std::collections::HashSet::new();
    for l in lookups {
        l.validate()?;
        weir_core::schema::check_lookup_columns(&l.schema)
            .with_context(|| format!("lookup `{}`", l.name))?;
        if !names.insert(&l.name) {
            bail!("two `[[lookup]]` tables are named `{}`", l.name);
        }
    }
    Ok(())
}

impl OperatorSection {
    /// The operator as the engine runs it: paths absolute, the config
    /// read into the JSON `init` receives, the limits in bytes.
    fn resolve(mut self, fix: &impl Fn(&mut PathBuf)) -> Result<OperatorPlan> {
        if self.state_namespace.trim().is_empty()
            || self.state_namespace.len() > 255
            || self.state_namespace.starts_with("weir.")
        {
            bail!(
                "`operator.state_namespace` must be 1 to 255 bytes and not start with `weir.` \
                 (the host's own namespaces)"
            );
        }
        if self.deadline.is_zero() {
            bail!("`operator.deadline` must be longer than zero");
        }
        if self.max_isolated == 0 || self.max_isolated > MAX_ISOLATED {
            bail!("`operator.max_isolated` must be between 1 and {MAX_ISOLATED}");
        }
        let memory = parse_size(&self.memory).context("`operator.memory`")?;
        if memory < (1 << 20) {
            bail!("`operator.memory` must be at least 1MiB");
        }
        if memory > MAX_OPERATOR_MEMORY {
            bail!(
                "`operator.memory` = {} is more than a 32-bit Wasm operator can address \
                 (at most 4GiB)",
                self.memory
            );
        }
        fits_machine_memory("operator.memory", &self.memory, memory)?;
        fix(&mut self.path);
        self.config_file.iter_mut().for_each(fix);
        self.config_files.values_mut().for_each(fix);
        self.artifacts.values_mut().for_each(fix);
        let config_json = self.config_json()?;
        Ok(OperatorPlan {
            path: self.path,
            config_json,
            artifacts: self.artifacts,
            limits: Limits {
                deadline: self.deadline,
                memory_bytes: memory,
            },
            grants: self.grants,
            state_namespace: self.state_namespace,
            failure: FailurePolicy {
                on_error: self.on_error,
                probation_epochs: self.probation_epochs,
                max_isolated: self.max_isolated,
            },
        })
    }

    /// The JSON `init` receives: `config_file` (refused beside an inline
    /// config) or the inline `config`, with the parts of `config_files`
    /// under their names.
    fn config_json(&self) -> Result<String> {
        let inline = self.config.as_table().is_none_or(|t| !t.is_empty());
        let mut config = match &self.config_file {
            Some(_) if inline => bail!(
                "`operator.config` and `operator.config_file` are both set; keep one (the file \
                 for rules edited apart from the pipeline), and put lists kept in files of \
                 their own under `operator.config_files`"
            ),
            Some(path) => config_file_value(path).context("`operator.config_file`")?,
            None => serde_json::to_value(&self.config).context("`operator.config`")?,
        };
        for (name, path) in &self.config_files {
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
        Ok(config.to_string())
    }
}

impl StateSection {
    /// How the state store is opened: the snapshot policy and the memory
    /// in bytes.
    fn resolve(&self) -> Result<weir_state::StoreOptions> {
        if self.snapshot_every > 0 && self.snapshots_retained == 0 {
            bail!("`state.snapshots_retained` must be at least 1 while snapshots are taken");
        }
        let memory = parse_size(&self.memory).context("`state.memory`")?;
        if memory < weir_state::MIN_STATE_MEMORY {
            bail!(
                "`state.memory` = {} is too small: RocksDB needs at least {}MiB",
                self.memory,
                weir_state::MIN_STATE_MEMORY >> 20
            );
        }
        fits_machine_memory("state.memory", &self.memory, memory)?;
        Ok(weir_state::StoreOptions {
            snapshots: weir_state::SnapshotPolicy {
                every: self.snapshot_every,
                retain: self.snapshots_retained,
            },
            memory,
        })
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;

    /// The file's defaults are written out for its reference; they are
    /// the state store's and the sandbox's own.
    #[test]
    fn the_files_defaults_are_the_runtimes() {
        let state = StateSection::default().resolve().unwrap();
        assert_eq!(state, weir_state::StoreOptions::default());
        assert_eq!(default_deadline(), Limits::default().deadline);
        assert_eq!(
            parse_size(&default_memory()).unwrap(),
            Limits::default().memory_bytes
        );
    }
}
