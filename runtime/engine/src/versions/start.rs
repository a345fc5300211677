//! How a pipeline's versions start: the operator the pipeline file names
//! is loaded, `init`-checked and registered, and the version to run is
//! chosen — the file's when it changed since the last start, else the
//! version deployed last, checked again — so a restart never quietly
//! undoes a deploy. A cluster's pipelines follow the shared control plane
//! instead ([`ControlPlane::follow`]).

use super::cache::OperatorCache;
use super::registry::{Actor, Origin, Registry, Version};
use super::validate::{Checks, Setup};
use super::Control;
use crate::config::PipelineConfig;
use anyhow::{Context, Result};
use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use weir_core::artifacts::Artifacts;
use weir_core::checkpoint::Blobs;
use weir_core::Digest;
use weir_host::{LoadedOperator, OperatorFailure, WasmHost};

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
    /// version to start with chosen (`choose_active`).
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
    pub fn follow(control: Arc<Control>, host: &WasmHost, cfg: &PipelineConfig) -> Result<Self> {
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
            config_json: cfg.operator.config_json.clone(),
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
