//! Turns a validated [`PipelineConfig`] into a running [`Pipeline`]: opens
//! (or creates) the checkpoint, builds source and sink, stores the operator
//! and its config in the checkpoint's blobs, and checks at start — not at the
//! first epoch — that the operator loads and accepts its configuration.

use crate::config::{CheckpointLocation, PipelineConfig};
use crate::dedup::Dedup;
use crate::event_time::EventTime;
use crate::pipeline::{
    EpochLog, InputPrep, KeyedState, Pipeline, PipelineSinks, Reporter, Tasks, WriterIdentity,
};
use crate::versions::registry::Registry;
use crate::versions::runner::Runner;
use crate::versions::validate::Checks;
use crate::versions::Control;
use crate::versions::{ActiveOperator, ControlPlane, Versions, VersionsSetup};
use anyhow::{Context, Result};
use std::path::Path;
use std::sync::Arc;
use weir_connectors::connector::SourceContext;
use weir_connectors::s3::S3Remote;
use weir_core::checkpoint::{Checkpoint, Metadata, SchemaColumn, FORMAT_VERSION};
use weir_core::mirror::Mirror;
use weir_core::source::DynSource;
use weir_host::LoadedOperator;
use weir_host::WasmHost;
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
/// (loaded and `init`-checked), the control plane, telemetry.
pub fn open(cfg: &PipelineConfig, host: &WasmHost, opts: OpenOptions) -> Result<Pipeline> {
    let source = cfg.source.open(&SourceContext {
        pipeline: &cfg.name,
        batch_rows: cfg.batch_rows,
        partition: opts.partition,
        checkpoint: cfg.checkpoint.dir(),
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
    let last_committed = checkpoint.commits.latest()?.map(|(e, _)| e);
    let (mut state, state_opened) =
        StateStore::open_with(&checkpoint.root().join("state"), cfg.state, last_committed)
            .context("opening the state store")?;
    if let Some(mirror) = checkpoint.mirror() {
        state.set_mirror(mirror.clone())?;
    }

    let lookups = crate::lookups::LookupSet::open(&cfg.lookups, &checkpoint)?;
    let runner = Runner::new(&cfg.name, cfg.operator.limits);
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
        failure: cfg.operator.failure,
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
    let mirror = match &cfg.checkpoint {
        CheckpointLocation::ObjectStore { url, cache, store } => {
            let remote = S3Remote::open(url, store)
                .with_context(|| format!("opening the checkpoint {url}"))?;
            Some(Mirror::checking_snapshots(
                Arc::new(remote),
                cache,
                Some(Arc::new(verify_pulled_snapshot)),
            ))
        }
        CheckpointLocation::Local(_) => None,
    };
    Checkpoint::open_mirrored(
        cfg.checkpoint.dir(),
        expected,
        opts.ephemeral_checkpoint_ok,
        mirror,
    )
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
