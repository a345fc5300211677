//! The cluster's control plane, one per worker and the same on all of
//! them: the operator registry and the versions' blobs live once, under
//! `cluster/` in the shared checkpoint, beside the partitions' own
//! checkpoints. Every partition a worker runs follows it, so a deploy,
//! rollback or promotion made through any worker's admin API reaches every
//! partition on every worker at its next epoch boundary, and each
//! partition's `offsets/N` records the version that epoch ran.
//!
//! - **Writes** are conditional replaces of the registry version a worker
//!   read ([`crate::versions::registry::Registry::shared`]), so two workers changing
//!   it at once both get their change in, one after the other.
//! - **Reads**: each worker follows the registry ([`Control::follow`]),
//!   compiling a new active version before it takes it up.
//! - **Checks**: an upload is validated on the worker it reaches, as a
//!   single process validates it, except that `init` and golden runs read
//!   an empty state: a worker holds no single partition's state.

use crate::config::{CheckpointLocation, PipelineConfig};
use crate::versions::registry::Registry;
use crate::versions::runner::Runner;
use crate::versions::validate::Checks;
use crate::versions::Control;
use crate::versions::ControlPlane;
use anyhow::{Context, Result};
use std::path::Path;
use std::sync::Arc;
use weir_connectors::s3::S3Remote;
use weir_core::checkpoint::Blobs;
use weir_core::mirror::Mirror;
use weir_host::WasmHost;
use weir_state::StateStore;

/// The object store prefix of the cluster-wide part of the checkpoint.
pub const CLUSTER_PREFIX: &str = "cluster";

/// A worker's view of the cluster's control plane.
pub struct ClusterPlane {
    pub control: Arc<Control>,
    /// The shared `cluster/` prefix (workers' records live there too).
    pub mirror: Arc<Mirror>,
    /// The empty state store uploads' `init` checks read; kept open while
    /// the control plane may check one.
    _scratch_state: StateStore,
}

impl ClusterPlane {
    /// Opens the control plane of the cluster `cfg` describes, cached in
    /// `cache/cluster`: registers the pipeline file's operator there and
    /// decides what runs as a single process would (the file's operator if
    /// it changed since the last start of any worker, else what was
    /// deployed last).
    pub fn open(cfg: &PipelineConfig, host: &WasmHost, cache: &Path) -> Result<Self> {
        let CheckpointLocation::ObjectStore { url, store, .. } = &cfg.checkpoint else {
            anyhow::bail!("a cluster's checkpoint must be in an object store");
        };
        let url = format!("{}/{CLUSTER_PREFIX}", url.trim_end_matches('/'));
        let remote = S3Remote::open(&url, store)
            .with_context(|| format!("opening the cluster's control plane at {url}"))?;
        let root = cache.join(CLUSTER_PREFIX);
        let mirror = Mirror::new(Arc::new(remote), &root);
        let registry = Registry::shared(&root, mirror.clone())?;
        let (scratch_state, _) =
            StateStore::open_with(&root.join("scratch-state"), cfg.state, None)
                .context("opening the scratch state uploads are checked against")?;
        let checks = Checks {
            runner: Runner::new(&cfg.name, cfg.operator.limits),
            host: host.clone(),
            grants: cfg.operator.grants,
            namespace: cfg.operator.state_namespace.clone(),
            state: scratch_state.reader(),
            input_schema: cfg.source.schema()?,
            batch_rows: cfg.batch_rows,
            // The workers' own tables are not at hand here: a candidate's
            // golden run on the cluster's plane reads none.
            lookups: Default::default(),
        };
        weir_core::fsutil::create_dir_durable(&root.join("blobs"))?;
        let blobs = Blobs::new(root.join("blobs"), Some(mirror.clone()));
        let plane = ControlPlane::open(cfg, host, checks, registry, blobs, &root)?;
        tracing::info!(
            control_plane = %url,
            version = plane.active.number,
            digest = %plane.active.digest,
            "the cluster runs operator version {}",
            plane.active.number
        );
        Ok(ClusterPlane {
            control: plane.control,
            mirror,
            _scratch_state: scratch_state,
        })
    }
}
