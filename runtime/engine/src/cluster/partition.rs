//! One owned partition, run on a thread of its own as a pipeline of its
//! own: its checkpoint under `partitions/<p>/` in the object store (pulled
//! into this worker's cache when it opens), its keyed state, its epochs.

use crate::config::{CheckpointLocation, PipelineConfig};
use crate::observe::Telemetry;
use crate::open::{open, OpenOptions};
use crate::pipeline::lost_ownership;
use crate::versions::Control;
use anyhow::{Context, Result};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread::JoinHandle;
use std::time::Instant;
use weir_core::progress::EpochProgress;
use weir_host::WasmHost;

/// Called with each committed epoch of a partition.
pub type OnEpoch = Arc<dyn Fn(i32, &EpochProgress) + Send + Sync>;

/// How a partition's run ended.
#[derive(Debug, Clone)]
pub enum Ended {
    /// Told to stop (revoked, or the worker is stopping).
    Stopped,
    /// Another writer holds the partition: a newer owner fenced the sink,
    /// or wrote an epoch entry first. Not retried until the group has had
    /// time to tell this worker whether it still owns the partition.
    Conflict(String),
    /// Anything else (the object store or a sink out of reach at open, …).
    Failed(String),
}

/// A partition being run.
pub struct PartitionRun {
    stop: Arc<AtomicBool>,
    /// The pipeline's figures, once it has opened.
    telemetry: Arc<OnceLock<Arc<Telemetry>>>,
    thread: Option<JoinHandle<Ended>>,
    /// How the run ended, once it has.
    ended: Option<(Ended, Instant)>,
}

impl PartitionRun {
    /// Starts running partition `p` of `base` (the pipeline file) with this
    /// worker's cache under `cache`, running what `control` (the cluster's
    /// control plane) says.
    pub fn start(
        base: &PipelineConfig,
        cache: &Path,
        p: i32,
        host: &WasmHost,
        control: Arc<Control>,
        on_epoch: OnEpoch,
    ) -> Result<Self> {
        let cfg = config_for(base, cache, p)?;
        let stop = Arc::new(AtomicBool::new(false));
        let telemetry = Arc::new(OnceLock::new());
        let thread = {
            let (stop, host) = (stop.clone(), host.clone());
            let opened = Opened {
                control,
                telemetry: telemetry.clone(),
            };
            std::thread::Builder::new()
                .name(format!("weir-partition-{p}"))
                .spawn(move || run(&cfg, p, &host, &stop, opened, on_epoch))
                .context("starting a partition's thread")?
        };
        Ok(PartitionRun {
            stop,
            telemetry,
            thread: Some(thread),
            ended: None,
        })
    }

    /// The partition's figures, once its pipeline has opened.
    pub fn telemetry(&self) -> Option<Arc<Telemetry>> {
        self.telemetry.get().cloned()
    }

    /// `running`, `stopped`, or `conflict: …` / `failed: …` with why: what
    /// the worker's record says of the partition.
    pub fn state(&mut self) -> String {
        match self.ended() {
            None => "running".into(),
            Some((Ended::Stopped, _)) => "stopped".into(),
            Some((Ended::Conflict(why), _)) => format!("conflict: {why}"),
            Some((Ended::Failed(why), _)) => format!("failed: {why}"),
        }
    }

    /// Tells the run to stop after its current epoch, without waiting.
    pub fn tell_to_stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }

    /// Stops the run and waits for it: its current epoch finishes or
    /// fails, nothing more is written.
    pub fn stop(mut self) -> Ended {
        self.stop.store(true, Ordering::Relaxed);
        self.join();
        self.ended.map_or(Ended::Stopped, |(e, _)| e)
    }

    /// How and when the run ended, if it has.
    pub fn ended(&mut self) -> Option<&(Ended, Instant)> {
        if self.thread.as_ref().is_some_and(JoinHandle::is_finished) {
            self.join();
        }
        self.ended.as_ref()
    }

    fn join(&mut self) {
        if let Some(t) = self.thread.take() {
            let ended = t
                .join()
                .unwrap_or_else(|_| Ended::Failed("the partition's thread panicked".into()));
            self.ended = Some((ended, Instant::now()));
        }
    }
}

/// The pipeline file as partition `p`'s pipeline: its checkpoint at
/// `<checkpoint>/partitions/<p>` in the object store, cached in
/// `<cache>/partitions/<p>`.
pub fn config_for(base: &PipelineConfig, cache: &Path, p: i32) -> Result<PipelineConfig> {
    let CheckpointLocation::ObjectStore { url, store, .. } = &base.checkpoint else {
        anyhow::bail!("a cluster's checkpoint must be in an object store");
    };
    let mut cfg = base.clone();
    cfg.checkpoint = CheckpointLocation::ObjectStore {
        url: format!("{}/partitions/{p}", url.trim_end_matches('/')),
        cache: cache.join("partitions").join(p.to_string()),
        store: store.clone(),
    };
    Ok(cfg)
}

/// What a partition's pipeline shares with its worker.
struct Opened {
    /// The cluster's control plane, which the pipeline follows.
    control: Arc<Control>,
    /// Where the pipeline's telemetry is handed over once it opens.
    telemetry: Arc<OnceLock<Arc<Telemetry>>>,
}

fn run(
    cfg: &PipelineConfig,
    p: i32,
    host: &WasmHost,
    stop: &AtomicBool,
    opened: Opened,
    on_epoch: OnEpoch,
) -> Ended {
    match run_until_stopped(cfg, p, host, stop, opened, &on_epoch) {
        Ok(()) => Ended::Stopped,
        Err(e) if lost_ownership(&e) => {
            tracing::warn!(partition = p, "partition {p} stopped: {e:#}");
            Ended::Conflict(format!("{e:#}"))
        }
        Err(e) => {
            tracing::error!(partition = p, "partition {p} failed: {e:#}");
            Ended::Failed(format!("{e:#}"))
        }
    }
}

fn run_until_stopped(
    cfg: &PipelineConfig,
    p: i32,
    host: &WasmHost,
    stop: &AtomicBool,
    opened: Opened,
    on_epoch: &OnEpoch,
) -> Result<()> {
    let started = Instant::now();
    let opts = OpenOptions {
        partition: Some(p),
        control: Some(opened.control),
        ..OpenOptions::default()
    };
    let mut pipeline = open(cfg, host, opts).with_context(|| format!("opening partition {p}"))?;
    let _ = opened.telemetry.set(pipeline.telemetry());
    if stop.load(Ordering::Relaxed) {
        return Ok(());
    }
    pipeline.fence()?;
    tracing::info!(
        partition = p,
        "partition {p} taken over in {:.2?} (checkpoint pulled, state restored, sink fenced)",
        started.elapsed()
    );
    pipeline.run(host, stop, &mut |e| on_epoch(p, e))?;
    Ok(())
}
