//! `weir run`.

use crate::watch::Watcher;
use anyhow::{Context, Result};
use std::path::PathBuf;
use std::sync::Arc;
use weir_admin::{AdminServer, AdminSettings};
use weir_engine::config::{PipelineConfig, TriggerConfig};
use weir_engine::OpenOptions;
use weir_host::{default_cache_root, WasmHost};

/// The arguments of `weir run` (its help text is the command's).
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The pipeline file (see docs/pipelines.md).
    pipeline: PathBuf,
    /// Print only the summary, not a line per epoch.
    #[arg(long, short)]
    quiet: bool,
    /// Redeploy the operator whenever its .wasm file changes (development).
    #[arg(long)]
    watch: bool,
    /// Serve the admin API on this address (overrides `admin.listen`;
    /// `127.0.0.1:0` picks a free port, written to <checkpoint>/admin-url,
    /// or <checkpoint_cache>/<worker>/admin-url for a cluster's worker).
    #[arg(long, value_name = "HOST:PORT")]
    admin: Option<String>,
    /// This worker's name, with `[cluster]` (default: the host name).
    /// Workers on one machine need names of their own: each keeps its
    /// cache of the checkpoint under `<checkpoint_cache>/<name>`.
    #[arg(long, value_name = "NAME")]
    worker: Option<String>,
}

/// `weir run`: runs the pipeline (or, with `[cluster]`, this worker's
/// share of it) until its trigger is done or Ctrl-C.
pub fn run(args: Args) -> Result<()> {
    let Args {
        pipeline: path,
        quiet,
        watch,
        admin,
        worker,
    } = args;
    let mut cfg = PipelineConfig::load(&path)?;
    if let Some(listen) = admin {
        cfg.admin.get_or_insert_with(Default::default).listen = listen;
    }
    let admin = cfg
        .admin
        .as_ref()
        .map(AdminSettings::resolve)
        .transpose()
        .context("`[admin]`")?;
    if cfg.cluster.is_some() {
        return run_worker(&cfg, quiet, watch, admin, worker);
    }
    if worker.is_some() {
        anyhow::bail!("`--worker` is for a pipeline with a `[cluster]` section");
    }
    let host = WasmHost::new(default_cache_root())?;
    let mut pipeline = weir_engine::open(&cfg, &host, OpenOptions::default())?;
    let _server = admin
        .map(|settings| {
            AdminServer::start(
                settings,
                pipeline.control(),
                pipeline.telemetry(),
                Some(pipeline.checkpoint().root().join("admin-url")),
            )
        })
        .transpose()?;
    let _watcher = if watch {
        Some(
            Watcher::start(
                cfg.operator.path.clone(),
                cfg.operator.config_json.clone(),
                pipeline.control(),
            )
            .context("starting the operator watcher")?,
        )
    } else {
        None
    };
    let stop = super::stop_flag()?;
    let backfill = matches!(
        cfg.trigger,
        TriggerConfig::AvailableNow | TriggerConfig::Once
    );
    let mut bar = backfill
        .then(weir_engine::observe::backfill::BackfillBar::new)
        .filter(|b| b.visible());
    let result = pipeline.run(&host, &stop, &mut |p| match &mut bar {
        Some(bar) => bar.epoch(p, (!quiet).then(|| p.to_string())),
        None if !quiet => println!("{p}"),
        None => {}
    });
    if let Some(bar) = &bar {
        bar.finish();
    }
    let summary = result?;
    println!(
        "{}: {} epochs ({} replayed), {} rows in, {} rows out, {} dead letters, {:.2}s",
        cfg.name,
        summary.epochs,
        summary.replayed,
        summary.rows_in,
        summary.rows_out,
        summary.dead_letters,
        summary.elapsed.as_secs_f64()
    );
    Ok(())
}

/// `weir run` of a pipeline with `[cluster]`: this process is one worker,
/// running the partitions the group gives it until Ctrl-C. Its admin API
/// (if any) deploys to, and reports on, the whole cluster.
fn run_worker(
    cfg: &PipelineConfig,
    quiet: bool,
    watch: bool,
    admin: Option<AdminSettings>,
    worker: Option<String>,
) -> Result<()> {
    let worker = match worker {
        Some(w) => w,
        None => host_name()?,
    };
    let host = WasmHost::new(default_cache_root())?;
    let stop = super::stop_flag()?;
    let on_epoch: weir_engine::cluster::partition::OnEpoch = Arc::new(move |p, e| {
        if !quiet {
            println!("partition {p}: {e}");
        }
    });
    let node = weir_engine::cluster::Worker::open(cfg, &host, &worker, on_epoch)?;
    let _server = match admin {
        Some(settings) => {
            let server = AdminServer::start(
                settings,
                node.control(),
                node.telemetry(),
                Some(node.cache().join("admin-url")),
            )?;
            node.set_admin_url(server.url());
            Some(server)
        }
        None => None,
    };
    let _watcher = watch
        .then(|| {
            Watcher::start(
                cfg.operator.path.clone(),
                cfg.operator.config_json.clone(),
                node.control(),
            )
            .context("starting the operator watcher")
        })
        .transpose()?;
    node.run(&stop)?;
    println!("{}: worker {worker} stopped", cfg.name);
    Ok(())
}

/// The machine's name, the default worker name.
fn host_name() -> Result<String> {
    let name = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .context("reading the host name; name the worker with `--worker NAME`")?;
    Ok(name.trim().to_string())
}
