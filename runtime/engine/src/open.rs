//! Turns a validated [`PipelineConfig`] into a running [`Pipeline`]: opens
//! (or creates) the checkpoint, builds source and sink, stores the operator
//! and its config in the checkpoint's blobs, and checks at start — not at the
//! first epoch — that the operator loads and accepts its configuration.

use crate::config::{PipelineConfig, TriggerConfig};
use crate::dedup::Dedup;
use crate::deploy::validate::{Checks, Setup};
use crate::deploy::Control;
use crate::event_time::EventTime;
use crate::operator_cache::OperatorCache;
use crate::pipeline::{
    ActiveOperator, EpochLog, InputPrep, KeyedState, Pipeline, PipelineSinks, Reporter, Tasks,
    Versions, VersionsSetup, WriterIdentity,
};
use crate::registry::{Actor, Origin, Registry, Version};
use crate::runner::Runner;
use anyhow::{Context, Result};
use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use weir_connectors::connector::SourceContext;
use weir_connectors::s3::S3Remote;
use weir_core::artifacts::Artifacts;
use weir_core::checkpoint::{Blobs, Checkpoint, Metadata, SchemaColumn, FORMAT_VERSION};
use weir_core::mirror::Mirror;
use weir_core::source::DynSource;
use weir_core::Digest;
use weir_host::LoadedOperator;
use weir_host::{OperatorFailure, WasmHost};
use weir_state::StateStore;

/// Options that are not part of the pipeline file.
#[derive(Clone, Default)]
pub struct OpenOptions {
    /// Do not warn about a checkpoint on tmpfs or under /tmp (the demo's own).
    pub ephemeral_checkpoint_ok: bool,
    /// Read only this partition of the source: a cluster worker opens one
    /// pipeline per partition it owns ([`crate::cluster`]).
    pub partition: Option<i32>,
    /// The control plane to follow instead of one of the pipeline's own:
    /// a cluster's partitions all run what the cluster's shared registry
    /// says ([`crate::cluster::plane`]).
    pub control: Option<Arc<Control>>,
}

/// Opens the pipeline described by `cfg`, in dependency order: the source
/// (its schema shapes everything after), the checkpoint (refused if it
/// belongs to another pipeline), the sink, the state store, the operator
/// (loaded and `init`-checked), the deploy control plane, telemetry.
pub fn open(cfg: &PipelineConfig, host: &WasmHost, opts: OpenOptions) -> Result<Pipeline> {
    let source = cfg.source.open(&SourceContext {
        pipeline: &cfg.name,
        batch_rows: cfg.batch_rows,
        partition: opts.partition,
        checkpoint: &cfg.checkpoint,
    })?;
    let (event_time, dedup) = input_preparation(cfg, source.as_ref())?;
    let checkpoint = open_checkpoint(cfg, source.as_ref(), &opts)?;
    let sinks = PipelineSinks::open(
        &cfg.sink,
        &WriterIdentity {
            pipeline: cfg.name.clone(),
            query_id: checkpoint.metadata.query_id.clone(),
            partition: opts.partition,
            checkpoint: checkpoint.root().to_path_buf(),
        },
    )?;
    if matches!(cfg.trigger, TriggerConfig::RealTime { .. }) {
        if let Some(name) = sinks.without_parts() {
            anyhow::bail!(
                "sink `{name}` cannot write real-time parts; use a micro-batch trigger with it"
            );
        }
    }
    let last_committed = checkpoint.commits.latest()?.map(|(e, _)| e);
    let (mut state, state_opened) = StateStore::open_with(
        &checkpoint.root().join("state"),
        cfg.state.options()?,
        last_committed,
    )
    .context("opening the state store")?;
    if let Some(mirror) = checkpoint.mirror() {
        state.set_mirror(mirror.clone())?;
    }

    let lookups = crate::lookups::LookupSet::open(&cfg.lookups, &checkpoint)?;
    let runner = Runner::new(&cfg.name, cfg.limits()?);
    let checks = Checks {
        lookups: lookups.current(),
        runner: runner.clone(),
        host: host.clone(),
        grants: cfg.operator.grants,
        namespace: cfg.operator.state_namespace.clone(),
        state: state.reader(),
        input_schema: source.schema(),
        batch_rows: cfg.batch_rows,
    };
    let plane = match opts.control {
        Some(control) => ControlPlane::follow(control, host, cfg)?,
        None => {
            let registry =
                Registry::open(checkpoint.root())?.mirrored(checkpoint.mirror().cloned());
            ControlPlane::open(
                cfg,
                host,
                checks,
                registry,
                checkpoint.blobs(),
                checkpoint.root(),
            )?
        }
    };
    let ControlPlane {
        control,
        active,
        active_loaded,
        configs,
    } = plane;
    let tasks = tasks_of(cfg, source.as_ref(), &active_loaded)?;
    let dead_letter_dir = cfg
        .source
        .dead_letter()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| checkpoint.root().join("dead-letter"));
    let telemetry = crate::observe::Telemetry::open(
        &checkpoint.root().join("progress"),
        &cfg.name,
        cfg.trigger.interval_ms(),
        cfg.progress.retain,
        opts.partition,
    )?;
    tracing::info!(
        pipeline = %cfg.name,
        checkpoint = %checkpoint.root().display(),
        query_id = %checkpoint.metadata.query_id,
        operator = %active.digest,
        version = active.number,
        tasks = tasks.count,
        routing = %tasks.describe_routing(),
        "pipeline opened"
    );
    let name = &cfg.name;
    let versions = Versions::new(
        name,
        VersionsSetup {
            active: ActiveOperator {
                version: active.number,
                digest: active.digest,
                config_digest: active.config_digest,
                artifacts: active.artifacts,
            },
            runner,
            grants: cfg.operator.grants,
            configs,
            control,
            own_blobs: checkpoint.blobs(),
        },
    );
    Ok(Pipeline {
        name: name.clone(),
        trigger: cfg.trigger,
        tasks,
        failure: cfg.operator.failure_policy(),
        partition: opts.partition,
        source,
        sinks,
        log: EpochLog::new(name, checkpoint, cfg.wal, dead_letter_dir),
        versions,
        input: InputPrep::new(event_time, dedup, lookups),
        state: KeyedState::new(
            name,
            state,
            state_opened,
            cfg.operator.state_namespace.clone(),
        ),
        reporter: Reporter::new(telemetry),
    })
}

/// How many tasks run the operator, and what routes rows to them. The
/// default is one task per core, but one when no `key` routes the rows
/// and the operator imports keyed state: its state would be spread over
/// tasks at random, and the first state call would fail.
fn tasks_of(
    cfg: &PipelineConfig,
    source: &dyn DynSource,
    operator: &LoadedOperator,
) -> Result<Tasks> {
    if let Some(key) = &cfg.key {
        crate::exchange::check_key_column(&source.schema(), key)?;
    }
    let keyed_state = operator
        .imports()
        .iter()
        .any(|i| i.starts_with("weir:operator/state"));
    let count = match cfg.parallelism {
        Some(n) => n,
        None if cfg.key.is_none() && keyed_state => {
            tracing::info!(
                pipeline = %cfg.name,
                "one task: the operator keeps keyed state and no `key` routes rows to tasks \
                 (set `key` to the column its state is keyed by to use every core)"
            );
            1
        }
        None => std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .min(usize::from(weir_state::KEY_GROUPS)) as u16,
    };
    Ok(Tasks {
        count,
        key: cfg.key.clone(),
        partition_column: source.partition_column().map(str::to_string),
    })
}

/// The host's own work on the input before the operator sees it: the
/// event-time column and watermark, and deduplication (which needs both).
fn input_preparation(
    cfg: &PipelineConfig,
    source: &dyn DynSource,
) -> Result<(Option<EventTime>, Option<Dedup>)> {
    let schema = source.schema();
    let event_time = cfg
        .event_time
        .as_ref()
        .map(|c| EventTime::new(c, &schema))
        .transpose()?;
    let dedup = match (&cfg.dedup, &event_time) {
        (Some(d), Some(et)) => Some(Dedup::new(&d.column, &schema, et.index())?),
        _ => None,
    };
    Ok((event_time, dedup))
}

/// Opens (or creates) the checkpoint, refusing one written for another
/// pipeline, source, sink or schema.
fn open_checkpoint(
    cfg: &PipelineConfig,
    source: &dyn DynSource,
    opts: &OpenOptions,
) -> Result<Checkpoint> {
    let expected = Metadata {
        format_version: FORMAT_VERSION,
        query_id: uuid::Uuid::new_v4().to_string(),
        created_ms: weir_core::clock::now_ms(),
        pipeline: cfg.name.clone(),
        source: source.identity(),
        sink: cfg.sink.identity()?,
        schema: Some(SchemaColumn::of(&source.schema())),
    };
    let mirror = match &cfg.checkpoint_url {
        Some(url) => {
            let settings = cfg.object_store.clone().unwrap_or_default();
            let remote = S3Remote::open(url, &settings)
                .with_context(|| format!("opening the checkpoint {url}"))?;
            Some(Mirror::checking_snapshots(
                Arc::new(remote),
                &cfg.checkpoint,
                Some(Arc::new(verify_pulled_snapshot)),
            ))
        }
        None => None,
    };
    Checkpoint::open_mirrored(
        &cfg.checkpoint,
        expected,
        opts.ephemeral_checkpoint_ok,
        mirror,
    )
}

/// A pipeline's control plane as it opens: the version it starts with,
/// compiled, and the configs it knows.
pub struct ControlPlane {
    pub control: Arc<Control>,
    pub active: Version,
    pub active_loaded: Arc<LoadedOperator>,
    /// Operator configs by digest, so epochs need not read them back.
    pub configs: HashMap<Digest, String>,
}

impl ControlPlane {
    /// A control plane over `registry`: the pipeline file's operator is
    /// loaded, checked and registered (its bytes put in `blobs`), and the
    /// version to start with chosen ([`choose_active`]).
    pub fn open(
        cfg: &PipelineConfig,
        host: &WasmHost,
        checks: Checks,
        registry: Registry,
        blobs: Blobs,
        root: &Path,
    ) -> Result<Self> {
        let file_operator = FileOperator::load(cfg, host, &checks, &blobs)?;
        let from_file = file_operator.register(cfg, &blobs)?;
        let configs = HashMap::from([(
            from_file.config_digest,
            file_operator.setup.config_json.clone(),
        )]);
        let (registry, active, active_loaded) =
            choose_active(registry, &blobs, &checks, from_file, file_operator.loaded)?;
        let operators = Arc::new(OperatorCache::default());
        operators.insert(active_loaded.clone());
        let control = Arc::new(Control::new(checks, blobs, registry, root, operators));
        Ok(ControlPlane {
            control,
            active,
            active_loaded,
            configs,
        })
    }

    /// A pipeline's view of a control plane it shares (a cluster's):
    /// it starts with what that plane runs now.
    fn follow(control: Arc<Control>, host: &WasmHost, cfg: &PipelineConfig) -> Result<Self> {
        let active = control
            .planned()
            .context("the cluster's registry has no active version")?
            .active;
        let active_loaded = match control.operators().get(&active.digest) {
            Some(loaded) => loaded,
            None => {
                let wasm = control.blobs().get(&active.digest)?;
                let loaded =
                    Arc::new(host.load(&wasm, cfg.operator.grants).with_context(|| {
                        format!(
                            "loading operator version {} ({})",
                            active.number, active.digest
                        )
                    })?);
                control.operators().insert(loaded.clone());
                loaded
            }
        };
        Ok(ControlPlane {
            control,
            active,
            active_loaded,
            configs: HashMap::new(),
        })
    }
}

/// The operator the pipeline file names, loaded and `init`-checked at
/// start (a config it rejects fails `weir run` now, not at the first epoch).
struct FileOperator {
    wasm: Vec<u8>,
    setup: Setup,
    loaded: LoadedOperator,
}

impl FileOperator {
    fn load(cfg: &PipelineConfig, host: &WasmHost, checks: &Checks, blobs: &Blobs) -> Result<Self> {
        let path = &cfg.operator.path;
        let wasm = std::fs::read(path)
            .with_context(|| format!("reading operator component {}", path.display()))?;
        let loaded = host
            .load(&wasm, cfg.operator.grants)
            .with_context(|| format!("loading operator {}", path.display()))?;
        checks
            .check_input_types(&loaded)
            .map_err(anyhow::Error::msg)
            .with_context(|| format!("operator {}", path.display()))?;
        let artifacts = weir_core::artifacts::store(blobs, &cfg.operator_artifacts()?)?;
        let setup = Setup {
            config_json: cfg.operator_config_json()?,
            artifacts: Arc::new(Artifacts::load(blobs, artifacts.as_ref())?),
        };
        match checks.init(&loaded, &setup) {
            Ok(()) => {}
            Err(e @ OperatorFailure::InvalidConfig(_)) => {
                return Err(anyhow::Error::new(e))
                    .with_context(|| format!("operator {} ({})", path.display(), loaded.digest()))
            }
            Err(e) => {
                return Err(anyhow::Error::new(e))
                    .with_context(|| format!("operator {} failed in `init`", path.display()))
            }
        }
        Ok(FileOperator {
            wasm,
            setup,
            loaded,
        })
    }

    /// Stores the component and config in the blobs: the registry entry
    /// the file's operator gets.
    fn register(&self, cfg: &PipelineConfig, blobs: &Blobs) -> Result<Version> {
        Ok(Version {
            number: 0,
            digest: blobs.put(&self.wasm)?,
            config_digest: blobs.put(self.setup.config_json.as_bytes())?,
            artifacts: self.setup.artifacts.manifest(),
            registered_ms: weir_core::clock::now_ms(),
            origin: Origin::File {
                path: cfg.operator.path.clone(),
            },
            label: None,
            size: self.wasm.len() as u64,
            golden: None,
        })
    }
}

/// Registers the pipeline file's operator and decides which version runs:
/// the file's when it changed since the last start (or on a new
/// checkpoint), else the version deployed last, so a restart never quietly
/// undoes a deploy. A deployed version is checked again (`init` with its
/// config) before the pipeline starts.
fn choose_active(
    mut registry: Registry,
    blobs: &Blobs,
    checks: &Checks,
    from_file: Version,
    file_operator: LoadedOperator,
) -> Result<(Registry, Version, Arc<LoadedOperator>)> {
    let file_version = registry.change(&Actor::named("pipeline-file"), |registry| {
        let file_version = registry.register(from_file.clone())?;
        let edited = registry.set_file_version(file_version.number)?;
        if edited || registry.active().is_none() {
            if let Some(old) = registry
                .active()
                .filter(|a| a.number != file_version.number)
            {
                tracing::info!(
                    replaced = old.number,
                    "the pipeline file names a new operator; it replaces deployed version {}",
                    old.number
                );
            }
            registry.activate(
                file_version.number,
                "activate",
                Some("pipeline file".into()),
            )?;
        }
        Ok(file_version)
    })?;
    let active = registry
        .active()
        .cloned()
        .context("the registry has no active version")?;
    if active.number == file_version.number {
        return Ok((registry, active, Arc::new(file_operator)));
    }
    tracing::info!(
        version = active.number,
        digest = %active.digest,
        "running deployed version {} (the pipeline file's operator is unchanged since the last start; \
         edit it, or `weir rollback`, to change that)",
        active.number
    );
    let wasm = blobs.get(&active.digest)?;
    let setup = Setup {
        config_json: String::from_utf8(blobs.get(&active.config_digest)?)
            .context("the deployed version's config is not UTF-8")?,
        artifacts: Arc::new(Artifacts::load(blobs, active.artifacts.as_ref())?),
    };
    let loaded = checks.component(&wasm, &setup).map_err(|why| {
        anyhow::anyhow!(
            "deployed operator version {} ({}) no longer passes its checks: {why}",
            active.number,
            active.digest
        )
    })?;
    Ok((registry, active, Arc::new(loaded)))
}

/// The object-store pull's check of a state snapshot: every block's
/// checksum ([`weir_state::verify`]); a corruption is the snapshot's damage,
/// any other failure (descriptors, permissions) an error.
fn verify_pulled_snapshot(dir: &Path) -> Result<Option<String>> {
    match weir_state::verify::verify(dir) {
        Ok(_) => Ok(None),
        Err(e) if weir_state::verify::is_corruption(&e) => Ok(Some(format!("{e:#}"))),
        Err(e) => Err(e),
    }
}
