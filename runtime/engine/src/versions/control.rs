//! Changing the operator of a running pipeline: the control plane shared by
//! the admin API, `weir run --watch` and the epoch loop.
//!
//! Uploads are validated here, beside the pipeline ([`super::validate`]), then
//! registered in the checkpoint's [`Registry`]. Activation only changes what
//! the registry says new epochs run with; the epoch loop takes it up
//! between epochs (`Versions::follow_control` asks [`Control::planned`]),
//! so a swap always takes
//! effect at an epoch boundary and `offsets/N` records the version epoch N
//! ran with. A version running in shadow is fed the same epochs and its
//! differences from the active version are reported ([`super::shadow`]).

use super::cache::OperatorCache;
use super::registry::{Actor, GoldenCheck, Origin, Registry, Shadow, Version};
use super::shadow::ShadowReport;
use super::validate::{Checks, Golden, Setup};
use crate::observe::ClusterStatus;
use anyhow::Context;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use weir_core::artifacts::Artifacts;
use weir_core::checkpoint::Blobs;
use weir_core::progress::EpochProgress;
use weir_core::wal::OperatorRef;
use weir_core::Digest;

/// Why a deploy request was refused; the admin API maps each to a status.
#[derive(Debug, thiserror::Error)]
pub enum DeployError {
    /// The candidate failed validation.
    #[error("{0}")]
    Refused(String),
    /// The request itself is malformed.
    #[error("{0}")]
    BadRequest(String),
    /// No such version or pipeline.
    #[error("{0}")]
    NotFound(String),
    /// The request contradicts the current state, e.g. rolling back to the
    /// active version.
    #[error("{0}")]
    Conflict(String),
    /// The host failed, not the request.
    #[error("{0:#}")]
    Internal(#[from] anyhow::Error),
}

/// An uploaded version, before validation.
pub struct Upload {
    pub wasm: Vec<u8>,
    /// JSON text for `init`; `None` keeps the active version's config.
    pub config_json: Option<String>,
    /// Named files (a model) by name: they replace the active version's
    /// artifacts of the same names, which the new version keeps otherwise.
    pub artifacts: std::collections::BTreeMap<String, Vec<u8>>,
    pub golden: Option<Golden>,
    pub label: Option<String>,
    pub origin: Origin,
}

/// What to do with a version once it passed validation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Then {
    /// Only register it.
    Stage,
    /// Run it from the next epoch on.
    Activate,
    /// Run it in shadow beside the active version, matching rows on `key`.
    Shadow { key: Option<String> },
}

/// What new epochs run with: the engine's view of the registry.
pub struct Planned {
    pub active: Version,
    pub shadow: Option<(Version, Option<String>)>,
}

/// The last epoch the pipeline finished.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LastEpoch {
    pub epoch: u64,
    /// Registry number of the version it ran with (none for an unregistered digest).
    pub version: Option<u32>,
    pub digest: Digest,
    pub rows_in: u64,
    pub rows_out: u64,
    pub replay: bool,
    pub total_ms: f64,
}

/// `GET /v1/pipelines/NAME`: what runs now. The admin server answers
/// with it and `weir status` reads it (the one definition of the shape).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Status {
    pub pipeline: String,
    pub active: Option<Version>,
    pub shadow: Option<ShadowStatus>,
    pub last_epoch: Option<LastEpoch>,
    /// The first epoch this process ran with the active version, once it has.
    pub active_since_epoch: Option<u64>,
    /// Every worker of the cluster and the partitions it runs, as the
    /// worker that answered last read their records (a `[cluster]`
    /// pipeline only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<ClusterStatus>,
}

/// The shadow candidate and its totals since it was deployed.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ShadowStatus {
    pub version: Version,
    pub key: Option<String>,
    pub epochs: u64,
    pub epochs_agreeing: u64,
    pub added: u64,
    pub removed: u64,
    pub changed: u64,
    pub failed_epochs: u64,
}

/// A registered version as listed by `weir versions`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Listed {
    #[serde(flatten)]
    pub version: Version,
    pub active: bool,
    pub shadow: bool,
}

/// Shadow reports kept in memory for the API (all are also in the file).
const REPORTS_KEPT: usize = 1000;

struct Inner {
    registry: Registry,
    cluster: Option<ClusterStatus>,
    last_epoch: Option<LastEpoch>,
    active_since: Option<(u32, u64)>,
    reports: VecDeque<ShadowReport>,
    shadow_totals: Option<(u32, ShadowTotals)>,
}

#[derive(Default, Clone, Copy)]
struct ShadowTotals {
    epochs: u64,
    agreeing: u64,
    added: u64,
    removed: u64,
    changed: u64,
    failed: u64,
}

/// The control plane of one pipeline. Cheap to share (`Arc`); every method
/// is safe to call from any thread while the pipeline runs.
pub struct Control {
    checks: Checks,
    blobs: Blobs,
    /// Compiled versions, shared with the epoch loop.
    operators: Arc<OperatorCache>,
    reports_path: PathBuf,
    inner: Mutex<Inner>,
}

impl Control {
    /// A control plane over `registry`, whose active version must be set and
    /// compiled in `operators`, where the versions it validates go too.
    pub fn new(
        checks: Checks,
        blobs: Blobs,
        registry: Registry,
        checkpoint_root: &std::path::Path,
        operators: Arc<OperatorCache>,
    ) -> Self {
        Control {
            checks,
            blobs,
            operators,
            reports_path: checkpoint_root
                .join("operators")
                .join("shadow-reports.jsonl"),
            inner: Mutex::new(Inner {
                registry,
                cluster: None,
                last_epoch: None,
                active_since: None,
                reports: VecDeque::new(),
                shadow_totals: None,
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock leaves plain data behind; go on.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The pipeline this controls.
    pub fn pipeline(&self) -> &str {
        self.checks.runner.pipeline()
    }

    /// Validates an upload and registers it; then stages, activates or
    /// shadows it. The pipeline keeps running its active version throughout.
    pub fn upload(&self, upload: Upload, then: Then, by: &Actor) -> Result<Listed, DeployError> {
        let active = self.lock().registry.active().cloned();
        let active = active.ok_or_else(|| DeployError::Conflict("no active version".into()))?;
        let config_json = match upload.config_json {
            Some(c) => c,
            None => self.config_text(&active.config_digest)?,
        };
        let artifacts = self.upload_artifacts(&active, upload.artifacts)?;
        let setup = Setup {
            config_json,
            artifacts,
        };
        let started = std::time::Instant::now();
        let loaded = self
            .checks
            .component(&upload.wasm, &setup)
            .map_err(DeployError::Refused)?;
        let golden = match &upload.golden {
            None => None,
            Some(g) => {
                let passed = self
                    .checks
                    .golden(&loaded, &setup, g)
                    .map_err(DeployError::Refused)?;
                Some(GoldenCheck {
                    input_digest: self.blobs.put(&g.input)?,
                    expected_digest: self.blobs.put(&g.expected)?,
                    rows_in: passed.rows_in,
                    rows_out: passed.rows_out,
                })
            }
        };
        let digest = self.blobs.put(&upload.wasm)?;
        let config_digest = self.blobs.put(setup.config_json.as_bytes())?;
        let mut inner = self.lock();
        let candidate = Version {
            number: 0,
            digest,
            config_digest,
            artifacts: setup.artifacts.manifest(),
            registered_ms: weir_core::clock::now_ms(),
            origin: upload.origin,
            label: upload.label,
            size: upload.wasm.len() as u64,
            golden,
        };
        let version = inner
            .registry
            .change(by, |r| r.register(candidate.clone()))?;
        self.operators.insert(Arc::new(loaded));
        tracing::info!(
            pipeline = %self.checks.runner.pipeline(),
            version = version.number,
            digest = %version.digest,
            elapsed = ?started.elapsed(),
            "operator version validated and registered"
        );
        drop(inner);
        match then {
            Then::Stage => {}
            Then::Activate => {
                self.activate(version.number, by)?;
            }
            Then::Shadow { key } => {
                self.shadow(version.number, key, by)?;
            }
        }
        self.listed(version.number)
    }

    /// The artifacts of an upload's version: `given` over those of
    /// `active` (same name: replaced), stored in the blobs.
    fn upload_artifacts(
        &self,
        active: &Version,
        given: std::collections::BTreeMap<String, Vec<u8>>,
    ) -> Result<Arc<Artifacts>, DeployError> {
        let kept = Artifacts::load(&self.blobs, active.artifacts.as_ref())?;
        if given.is_empty() {
            return Ok(Arc::new(kept));
        }
        let mut all: std::collections::BTreeMap<String, Vec<u8>> = kept
            .digests()
            .keys()
            .filter_map(|n| Some((n.clone(), kept.get(n)?.as_ref().clone())))
            .collect();
        all.extend(given);
        let manifest = weir_core::artifacts::store(&self.blobs, &all)
            .map_err(|e| DeployError::BadRequest(format!("{e:#}")))?;
        Ok(Arc::new(Artifacts::load(&self.blobs, manifest.as_ref())?))
    }

    /// The setup `version`'s instances get: its config and artifacts.
    pub fn setup_of(&self, version: &OperatorRef) -> Result<Setup, DeployError> {
        Ok(Setup {
            config_json: self.config_text(&version.config_digest)?,
            artifacts: Arc::new(Artifacts::load(&self.blobs, version.artifacts.as_ref())?),
        })
    }

    fn config_text(&self, digest: &Digest) -> Result<String, DeployError> {
        let bytes = self.blobs.get(digest)?;
        String::from_utf8(bytes)
            .map_err(|_| DeployError::Internal(anyhow::anyhow!("config {digest} is not UTF-8")))
    }

    /// Loads a registered version compiled by an earlier process (e.g. for
    /// a rollback after a restart), checking `init` again.
    fn ensure_loaded(&self, number: u32) -> Result<Version, DeployError> {
        let version = self
            .lock()
            .registry
            .get(number)
            .cloned()
            .ok_or_else(|| DeployError::NotFound(format!("there is no version {number}")))?;
        self.load(&version)?;
        Ok(version)
    }

    /// Compiles `version` from the blobs and checks its `init`, unless it
    /// is compiled already.
    fn load(&self, version: &Version) -> Result<(), DeployError> {
        if self.operators.contains(&version.digest) {
            return Ok(());
        }
        let wasm = self.blobs.get(&version.digest)?;
        let setup = self.setup_of(&version.operator_ref())?;
        let loaded = self
            .checks
            .component(&wasm, &setup)
            .map_err(DeployError::Refused)?;
        self.operators.insert(Arc::new(loaded));
        Ok(())
    }

    /// Takes up a change another worker made to the cluster's shared
    /// registry (a deploy, rollback or promotion through its admin API, an
    /// automatic rollback of its partitions): the versions it runs are
    /// compiled first, so the epochs that pick it up do not wait for that.
    /// Returns whether anything changed; a pipeline of its own has nothing
    /// to follow.
    pub fn follow(&self) -> anyhow::Result<bool> {
        let (source, tag) = {
            let inner = self.lock();
            let tag = inner.registry.shared_tag().map(str::to_string);
            (inner.registry.shared_source(), tag)
        };
        let Some(source) = source else {
            return Ok(false);
        };
        let Some(fetched) = source.fetch(tag.as_deref())? else {
            return Ok(false);
        };
        for version in fetched.to_run() {
            if let Err(e) = self.load(&version) {
                tracing::error!(
                    version = version.number,
                    "another worker made version {} current, and it does not load here: {e}",
                    version.number
                );
            }
        }
        let mut inner = self.lock();
        let before = inner.registry.active().map(|v| v.number);
        let changed = inner.registry.install(fetched)?;
        let after = inner.registry.active().map(|v| v.number);
        drop(inner);
        if let (true, Some(n)) = (before != after, after) {
            self.log_change("another worker made active", n);
        }
        Ok(changed)
    }

    /// [`Control::follow`] before an answer about versions or status, so
    /// that one worker lists what was changed through another a moment
    /// ago (its housekeeping follows only once a second). If the store
    /// cannot be read, the answer is what this worker last saw.
    pub fn catch_up(&self) {
        if let Err(e) = self.follow() {
            tracing::warn!("reading the cluster's operator registry: {e:#}");
        }
    }

    /// The blobs versions are stored in (the cluster's shared ones, for a
    /// worker): where epochs load a version they have not compiled yet.
    pub fn blobs(&self) -> &Blobs {
        &self.blobs
    }

    /// The compiled versions, shared by every pipeline this controls.
    pub fn operators(&self) -> &Arc<OperatorCache> {
        &self.operators
    }

    /// Makes version `number` the one new epochs run with.
    pub fn activate(&self, number: u32, by: &Actor) -> Result<Listed, DeployError> {
        self.ensure_loaded(number)?;
        self.lock()
            .registry
            .change(by, |r| r.activate(number, "activate", None))?;
        self.log_change("activated", number);
        self.listed(number)
    }

    /// Goes back to the previously active version, or to `to`.
    pub fn roll_back(&self, to: Option<u32>, by: &Actor) -> Result<Listed, DeployError> {
        let target = {
            let inner = self.lock();
            match to {
                Some(n) => n,
                None => inner.registry.previous_version().ok_or_else(|| {
                    DeployError::Conflict("there is no earlier version to roll back to".into())
                })?,
            }
        };
        self.ensure_loaded(target)?;
        let n = self
            .lock()
            .registry
            .change(by, |r| r.roll_back(Some(target)))
            .map_err(|e| DeployError::Conflict(format!("{e:#}")))?;
        self.log_change("rolled back to", n);
        self.listed(n)
    }

    /// Rolls the failing active version `from` back to the version before
    /// it (the engine calls this when that version handles an epoch the
    /// new one fails on); recorded in the history as `auto-rollback`.
    /// Returns the version now active.
    pub fn auto_roll_back(&self, from: u32, reason: &str) -> anyhow::Result<Version> {
        let mut inner = self.lock();
        let to = inner.registry.change(&Actor::engine(), |r| {
            if r.active().map(|v| v.number) != Some(from) {
                anyhow::bail!("version {from} is no longer the active version");
            }
            r.roll_back_as(None, "auto-rollback", Some(reason))
        })?;
        let version = inner
            .registry
            .get(to)
            .cloned()
            .with_context(|| format!("version {to} vanished from the registry"))?;
        drop(inner);
        self.log_change("automatically rolled back to", to);
        Ok(version)
    }

    /// The version a plain rollback would return to.
    pub fn previous_version(&self) -> Option<Version> {
        let inner = self.lock();
        let n = inner.registry.previous_version()?;
        inner.registry.get(n).cloned()
    }

    /// Runs version `number` in shadow from the next epoch on.
    pub fn shadow(
        &self,
        number: u32,
        key: Option<String>,
        by: &Actor,
    ) -> Result<Listed, DeployError> {
        self.ensure_loaded(number)?;
        let mut inner = self.lock();
        inner
            .registry
            .change(by, |r| {
                r.set_shadow(Some(Shadow {
                    version: number,
                    key: key.clone(),
                }))
            })
            .map_err(|e| DeployError::Conflict(format!("{e:#}")))?;
        inner.shadow_totals = Some((number, ShadowTotals::default()));
        drop(inner);
        self.log_change("shadowing", number);
        self.listed(number)
    }

    /// Stops the shadow run.
    pub fn unshadow(&self, by: &Actor) -> Result<(), DeployError> {
        let mut inner = self.lock();
        inner
            .registry
            .change(by, |r| r.set_shadow(None))
            .map_err(|e| DeployError::Conflict(format!("{e:#}")))?;
        inner.shadow_totals = None;
        Ok(())
    }

    /// Makes the shadow candidate active.
    pub fn promote(&self, by: &Actor) -> Result<Listed, DeployError> {
        let n = self
            .lock()
            .registry
            .change(by, Registry::promote)
            .map_err(|e| DeployError::Conflict(format!("{e:#}")))?;
        self.lock().shadow_totals = None;
        self.log_change("promoted", n);
        self.listed(n)
    }

    fn log_change(&self, what: &str, number: u32) {
        tracing::info!(
            pipeline = %self.checks.runner.pipeline(),
            version = number,
            "{what} version {number}; takes effect at the next epoch boundary"
        );
    }

    fn listed(&self, number: u32) -> Result<Listed, DeployError> {
        let inner = self.lock();
        let version = inner
            .registry
            .get(number)
            .cloned()
            .ok_or_else(|| DeployError::NotFound(format!("there is no version {number}")))?;
        Ok(Listed {
            active: inner.registry.active().is_some_and(|a| a.number == number),
            shadow: inner
                .registry
                .shadow()
                .is_some_and(|(s, _)| s.number == number),
            version,
        })
    }

    /// Every registered version, oldest first.
    pub fn versions(&self) -> Vec<Listed> {
        let numbers: Vec<u32> = self
            .lock()
            .registry
            .versions()
            .iter()
            .map(|v| v.number)
            .collect();
        numbers
            .into_iter()
            .filter_map(|n| self.listed(n).ok())
            .collect()
    }

    /// Every change of what runs (register, activate, rollback, shadow,
    /// promote, unshadow) and lookup refresh failure still in the registry
    /// (the newest thousand), oldest first, for the dashboard and `weir audit`.
    pub fn events(&self) -> Vec<crate::versions::registry::Event> {
        self.lock().registry.events().to_vec()
    }

    /// Records in the audit trail that Weir itself did or saw `action`
    /// (a lookup table's refresh failing). A failure to record it is
    /// logged, not raised: the epoch goes on.
    pub fn record(&self, action: &str, note: String) {
        if let Err(e) = self.lock().registry.record(&Actor::engine(), action, note) {
            tracing::error!("recording `{action}` in the audit trail: {e:#}");
        }
    }

    /// What runs now.
    pub fn status(&self) -> Status {
        let inner = self.lock();
        let active = inner.registry.active().cloned();
        Status {
            pipeline: self.checks.runner.pipeline().to_string(),
            active_since_epoch: match (&active, inner.active_since) {
                (Some(a), Some((n, e))) if a.number == n => Some(e),
                _ => None,
            },
            active,
            shadow: inner.registry.shadow().map(|(v, s)| {
                let t = match inner.shadow_totals {
                    Some((n, t)) if n == v.number => t,
                    _ => ShadowTotals::default(),
                };
                ShadowStatus {
                    version: v.clone(),
                    key: s.key.clone(),
                    epochs: t.epochs,
                    epochs_agreeing: t.agreeing,
                    added: t.added,
                    removed: t.removed,
                    changed: t.changed,
                    failed_epochs: t.failed,
                }
            }),
            last_epoch: inner.last_epoch.clone(),
            cluster: inner.cluster.clone(),
        }
    }

    /// Records what the cluster's workers last said of themselves, for
    /// [`Control::status`] (a worker's housekeeping calls it).
    pub fn set_cluster(&self, status: ClusterStatus) {
        self.lock().cluster = Some(status);
    }

    /// Shadow reports of epochs after `after` (all kept, if `None`).
    pub fn shadow_reports(&self, after: Option<u64>) -> Vec<ShadowReport> {
        self.lock()
            .reports
            .iter()
            .filter(|r| after.is_none_or(|a| r.epoch > a))
            .cloned()
            .collect()
    }

    /// What the next epoch runs with (called by the epoch loop).
    pub fn planned(&self) -> Option<Planned> {
        let inner = self.lock();
        let active = inner.registry.active()?.clone();
        let shadow = inner
            .registry
            .shadow()
            .map(|(v, s)| (v.clone(), s.key.clone()));
        Some(Planned { active, shadow })
    }

    /// The registry number of a (component, config, artifacts) triple.
    pub fn version_of(&self, operator: &OperatorRef) -> Option<u32> {
        self.lock().registry.find(operator).map(|v| v.number)
    }

    /// Records a finished epoch (called by the epoch loop).
    pub fn epoch_done(&self, p: &EpochProgress) {
        let mut inner = self.lock();
        let version = p.operator_version;
        if let (Some(v), Some(active)) = (version, inner.registry.active().map(|a| a.number)) {
            if v == active && inner.active_since.is_none_or(|(n, _)| n != v) {
                inner.active_since = Some((v, p.epoch));
            }
        }
        inner.last_epoch = Some(LastEpoch {
            epoch: p.epoch,
            version,
            digest: p.operator_digest,
            rows_in: p.rows_in,
            rows_out: p.rows_out,
            replay: p.replay,
            total_ms: p.total.as_secs_f64() * 1e3,
        });
    }

    /// Records a shadow report: kept in memory for the API and appended to
    /// `operators/shadow-reports.jsonl`.
    pub fn shadow_done(&self, report: ShadowReport) {
        if let Err(e) = append_line(&self.reports_path, &report) {
            tracing::warn!(path = %self.reports_path.display(), "could not record shadow report: {e:#}");
        }
        let mut inner = self.lock();
        if let Some((n, t)) = &mut inner.shadow_totals {
            if *n == report.candidate_version {
                t.epochs += 1;
                t.agreeing += u64::from(report.agrees());
                t.added += report.added;
                t.removed += report.removed;
                t.changed += report.changed;
                t.failed += u64::from(report.error.is_some());
            }
        }
        inner.reports.push_back(report);
        let excess = inner.reports.len().saturating_sub(REPORTS_KEPT);
        inner.reports.drain(..excess);
    }

    /// The JSON config text of a version (from the checkpoint's blobs).
    pub fn config_of(&self, config_digest: &Digest) -> anyhow::Result<String> {
        self.config_text(config_digest)
            .map_err(|e| anyhow::anyhow!("{e}"))
    }
}

fn append_line<T: Serialize>(path: &std::path::Path, value: &T) -> anyhow::Result<()> {
    use std::io::Write;
    let mut line = serde_json::to_vec(value)?;
    line.push(b'\n');
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?;
    f.write_all(&line)?;
    Ok(())
}
