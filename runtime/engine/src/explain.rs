//! Replaying one committed epoch to explain its decisions (`weir explain`),
//! from the checkpoint alone and touching nothing real: the checkpoint is
//! copied to a scratch directory up to the epoch before (its state working
//! copy left out, so the state is rebuilt from a snapshot by re-running the
//! recorded versions), its sinks become scratch files, and the epoch runs
//! as recorded in `offsets/N` — operator, config, artifacts, lookup
//! versions, watermark — up to, not including, the sink phase.

use crate::config::{CheckpointLocation, PipelineConfig};
use crate::pipeline::{EpochReplay, Pipeline};
use crate::OpenOptions;
use anyhow::{bail, Context, Result};
use std::path::Path;
use weir_host::WasmHost;

/// Replays committed epoch `epoch` of the pipeline `cfg` describes, with
/// `scratch` (an empty directory) for the copy. The returned pipeline is
/// the scratch one, for [`Pipeline::score_with`].
pub fn replay_epoch(
    cfg: &PipelineConfig,
    host: &WasmHost,
    epoch: u64,
    scratch: &Path,
) -> Result<(Pipeline, EpochReplay)> {
    if cfg.cluster.is_some() {
        bail!("explain reads one checkpoint; a cluster's partitions each have their own");
    }
    let committed = cfg.checkpoint.dir().join("commits").join(epoch.to_string());
    if !committed.exists() {
        bail!(
            "epoch {epoch} of `{}` is not committed (no {}): only delivered decisions are explained",
            cfg.name,
            committed.display()
        );
    }
    let copy = scratch.join("checkpoint");
    copy_checkpoint(cfg.checkpoint.dir(), &copy, epoch)?;
    let mut scratch_cfg = cfg.clone();
    scratch_cfg.checkpoint = CheckpointLocation::Local(copy.clone());
    scratch_cfg.admin = None;
    scratch_cfg.sink = cfg.sink.as_scratch_files(&scratch.join("sinks"))?;
    rewrite_sink_identity(&copy, &scratch_cfg.sink.identity()?)?;
    let mut pipeline = crate::open(
        &scratch_cfg,
        host,
        OpenOptions {
            ephemeral_checkpoint_ok: true,
            ..Default::default()
        },
    )
    .context("opening the copy of the checkpoint")?;
    let replay = pipeline.replay_planned(host, epoch)?;
    Ok((pipeline, replay))
}

/// Copies the checkpoint at `from` to `to` as it was once epoch `epoch`
/// was planned: its commit and every later entry left out, and the state's
/// working copy too (recovery then rebuilds it from a snapshot).
fn copy_checkpoint(from: &Path, to: &Path, epoch: u64) -> Result<()> {
    copy_dir(from, to, &|rel: &Path| {
        let mut parts = rel.iter().map(|p| p.to_string_lossy());
        let (Some(top), next) = (parts.next(), parts.next()) else {
            return true;
        };
        let later = |n: Option<std::borrow::Cow<'_, str>>, keep_equal: bool| {
            n.and_then(|n| n.split('.').next()?.parse::<u64>().ok())
                .is_none_or(|e| e < epoch || (keep_equal && e == epoch))
        };
        match top.as_ref() {
            "commits" | "progress" => later(next, false),
            "offsets" | "parts" => later(next, true),
            "state" => next.as_deref() != Some("working"),
            _ => true,
        }
    })
    .with_context(|| format!("copying the checkpoint {}", from.display()))
}

fn copy_dir(from: &Path, to: &Path, keep: &dyn Fn(&Path) -> bool) -> Result<()> {
    fn walk(root: &Path, dir: &Path, to: &Path, keep: &dyn Fn(&Path) -> bool) -> Result<()> {
        for entry in std::fs::read_dir(dir)? {
            let path = entry?.path();
            let rel = path.strip_prefix(root)?;
            if !keep(rel) {
                continue;
            }
            let target = to.join(rel);
            if path.is_dir() {
                std::fs::create_dir_all(&target)?;
                walk(root, &path, to, keep)?;
            } else {
                std::fs::copy(&path, &target)
                    .with_context(|| format!("copying {}", path.display()))?;
            }
        }
        Ok(())
    }
    std::fs::create_dir_all(to)?;
    walk(from, from, to, keep)
}

/// The copy's recorded sink identity, made that of its scratch sinks (the
/// checkpoint refuses to open with other sinks than it was written for).
fn rewrite_sink_identity(checkpoint: &Path, identity: &str) -> Result<()> {
    let path = checkpoint.join("metadata");
    let mut meta: serde_json::Value = serde_json::from_slice(&std::fs::read(&path)?)
        .context("reading the checkpoint's metadata")?;
    meta["sink"] = identity.into();
    std::fs::write(&path, serde_json::to_vec_pretty(&meta)?)?;
    Ok(())
}
