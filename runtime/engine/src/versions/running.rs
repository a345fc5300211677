//! The versions a running pipeline uses — the seam between the epoch loop
//! and everything else about versions. It says which version new epochs
//! are planned with and which runs in shadow (taken up from the control
//! plane only between epochs, [`Versions::follow_control`]), loads any
//! recorded version — compiled once ([`OperatorCache`]), its config and
//! artifacts read from the blobs once — and tells the control plane what
//! became of epochs: committed (probation counts them), shadow reports,
//! automatic rollbacks. The epoch loop asks it, not the registry or the
//! control plane; what it hands out to run a version is the one
//! [`Runner`] and a [`Loaded`] version.

use super::cache::OperatorCache;
use super::registry::Version;
use super::runner::Runner;
use super::Control;
use anyhow::{Context, Result};
use std::collections::HashMap;
use std::sync::Arc;
use weir_core::artifacts::Artifacts;
use weir_core::checkpoint::Blobs;
use weir_core::progress::{EpochProgress, ShadowReport};
use weir_core::wal::OperatorRef;
use weir_core::Digest;
use weir_host::{Grants, LoadedOperator, WasmHost};

/// The version new epochs are planned with.
#[derive(Debug, Clone)]
pub struct ActiveOperator {
    /// Registry number (see [`super::registry`]).
    pub version: u32,
    pub digest: Digest,
    pub config_digest: Digest,
    /// Its artifact manifest, if it has artifacts.
    pub artifacts: Option<Digest>,
}

impl ActiveOperator {
    /// What `offsets/N` records of the epochs it runs.
    pub fn operator_ref(&self) -> OperatorRef {
        OperatorRef {
            digest: self.digest,
            config_digest: self.config_digest,
            artifacts: self.artifacts,
        }
    }
}

/// A recorded version, ready to run: compiled, with its config and
/// artifacts.
pub struct Loaded {
    pub operator: Arc<LoadedOperator>,
    pub config: String,
    pub artifacts: Arc<Artifacts>,
}

/// The operator versions one pipeline runs.
pub struct Versions {
    pipeline: String,
    active: ActiveOperator,
    /// The version running in shadow, and the key its rows are matched on.
    shadow: Option<(Version, Option<String>)>,
    /// How every version is run (name and limits): epochs, replays, shadow.
    runner: Runner,
    grants: Grants,
    /// Versions' configs by digest, read from the blobs once.
    configs: HashMap<Digest, String>,
    /// Versions' artifacts by manifest digest, read from the blobs once.
    artifacts: HashMap<Digest, Arc<Artifacts>>,
    /// Where operator swaps come from (admin API, `--watch`).
    control: Arc<Control>,
    /// Compiled versions, shared with `control`.
    operators: Arc<OperatorCache>,
    /// The checkpoint's own blobs, where the control plane's store (a
    /// cluster's shared one) lacks one.
    own_blobs: Blobs,
}

/// What [`Versions`] starts from.
pub struct VersionsSetup {
    pub active: ActiveOperator,
    pub runner: Runner,
    pub grants: Grants,
    pub configs: HashMap<Digest, String>,
    pub control: Arc<Control>,
    pub own_blobs: Blobs,
}

impl Versions {
    /// The versions of `pipeline`, new epochs planned with `setup.active`.
    pub fn new(pipeline: &str, setup: VersionsSetup) -> Self {
        let operators = setup.control.operators().clone();
        Versions {
            pipeline: pipeline.to_string(),
            active: setup.active,
            shadow: None,
            runner: setup.runner,
            grants: setup.grants,
            configs: setup.configs,
            artifacts: HashMap::new(),
            control: setup.control,
            operators,
            own_blobs: setup.own_blobs,
        }
    }

    /// The control plane the versions follow.
    pub fn control(&self) -> &Arc<Control> {
        &self.control
    }

    /// The version new epochs are planned with.
    pub fn active(&self) -> &ActiveOperator {
        &self.active
    }

    /// The version running in shadow, and the key its rows are matched on.
    pub fn shadow(&self) -> Option<&(Version, Option<String>)> {
        self.shadow.as_ref()
    }

    /// Takes up what the control plane says new epochs run with. Called
    /// between epochs only, so a swap happens at an epoch boundary.
    pub fn follow_control(&mut self) {
        let Some(planned) = self.control.planned() else {
            return;
        };
        let a = &planned.active;
        if a.operator_ref() != self.active.operator_ref() {
            tracing::info!(
                pipeline = %self.pipeline,
                from = self.active.version,
                to = a.number,
                digest = %a.digest,
                "operator swap: new epochs run version {}",
                a.number
            );
            self.active = ActiveOperator {
                version: a.number,
                digest: a.digest,
                config_digest: a.config_digest,
                artifacts: a.artifacts,
            };
        }
        self.shadow = planned.shadow;
    }

    /// The version `operator` names, ready to run (loaded from the
    /// blobs the first time).
    pub fn load(&mut self, host: &WasmHost, operator: &OperatorRef) -> Result<Loaded> {
        Ok(Loaded {
            operator: self.operator_for(host, &operator.digest)?,
            config: self.config_for(&operator.config_digest)?,
            artifacts: self.artifacts_for(operator.artifacts.as_ref())?,
        })
    }

    /// How every version is run (the pipeline's name and limits).
    pub fn runner(&self) -> &Runner {
        &self.runner
    }

    /// The registry number of the version `operator` names, if registered.
    pub fn version_of(&self, operator: &OperatorRef) -> Option<u32> {
        self.control.version_of(operator)
    }

    /// What the control plane plans new epochs with now: a version
    /// activated since an epoch was planned re-plans it.
    pub fn planned_active(&self) -> Option<Version> {
        self.control.planned().map(|p| p.active)
    }

    /// The version active before the current one, if any.
    pub fn previous_version(&self) -> Option<Version> {
        self.control.previous_version()
    }

    /// Rolls the failing version `from` back, recording `reason`; returns
    /// the version now active.
    pub fn auto_roll_back(&self, from: u32, reason: &str) -> Result<Version> {
        self.control.auto_roll_back(from, reason)
    }

    /// An epoch committed: probation and the last epoch's status.
    pub fn epoch_done(&self, progress: &EpochProgress) {
        self.control.epoch_done(progress);
    }

    /// A shadow run's report, for the shadow's status.
    pub fn shadow_done(&self, report: ShadowReport) {
        self.control.shadow_done(report);
    }

    /// An entry in the audit trail (a lookup table that failed to refresh).
    pub fn record(&self, action: &str, note: String) {
        self.control.record(action, note);
    }

    /// Whether the active version has an `on-timers` hook.
    pub fn active_handles_timers(&mut self, host: &WasmHost) -> Result<bool> {
        let digest = self.active.digest;
        Ok(self.operator_for(host, &digest)?.handles_timers())
    }

    /// The compiled version with component `digest`, loaded from the blobs
    /// the first time.
    fn operator_for(&mut self, host: &WasmHost, digest: &Digest) -> Result<Arc<LoadedOperator>> {
        if let Some(op) = self.operators.get(digest) {
            return Ok(op);
        }
        let wasm = self.blob(digest)?;
        let op = Arc::new(
            host.load(&wasm, self.grants)
                .with_context(|| format!("loading operator {digest} from the checkpoint"))?,
        );
        self.operators.insert(op.clone());
        Ok(op)
    }

    /// A blob from the control plane's store (a cluster's shared one), or
    /// the checkpoint's own.
    fn blob(&self, digest: &Digest) -> Result<Vec<u8>> {
        self.control
            .blobs()
            .get(digest)
            .or_else(|e| self.own_blobs.get(digest).map_err(|_| e))
    }

    /// The artifacts of the version with manifest `manifest` (none for
    /// `None`), from the blobs the first time.
    pub fn artifacts_for(&mut self, manifest: Option<&Digest>) -> Result<Arc<Artifacts>> {
        let Some(digest) = manifest else {
            return Ok(Default::default());
        };
        if let Some(a) = self.artifacts.get(digest) {
            return Ok(a.clone());
        }
        let loaded = Arc::new(
            Artifacts::load(self.control.blobs(), Some(digest))
                .with_context(|| format!("the operator's artifacts ({digest})"))?,
        );
        self.artifacts.insert(*digest, loaded.clone());
        Ok(loaded)
    }

    fn config_for(&mut self, digest: &Digest) -> Result<String> {
        if let Some(c) = self.configs.get(digest) {
            return Ok(c.clone());
        }
        let text = String::from_utf8(self.blob(digest)?)
            .with_context(|| format!("operator config {digest} is not UTF-8"))?;
        self.configs.insert(*digest, text.clone());
        Ok(text)
    }
}
