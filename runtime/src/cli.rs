//! The `weir` command line.

use crate::checkpoint::Checkpoint;
use crate::config::PipelineConfig;
use crate::demo::{self, DemoOperator, DemoOptions};
use crate::operator::{default_cache_root, Grants, WasmHost};
use crate::pipeline::{self, OpenOptions};
use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Weir runs stream pipelines whose operators are sandboxed WebAssembly
/// components: the host owns sources, the offset and commit logs, sinks and
/// recovery; operators only turn micro-batches into rows.
#[derive(Debug, Parser)]
#[command(name = "weir", version, propagate_version = true)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run a pipeline until its trigger is done or Ctrl-C (the current epoch finishes first).
    ///
    /// Resumes from the checkpoint: an epoch planned but not committed by an
    /// earlier run is re-run first, with the same input and operator version.
    Run {
        /// The pipeline file (see README, "Pipeline config").
        pipeline: PathBuf,
        /// Print only the summary, not a line per epoch.
        #[arg(long, short)]
        quiet: bool,
    },
    /// Generate payments with planted fraud and score them with the bundled operator.
    ///
    /// Needs no services and no config. Everything is written to a fresh
    /// directory (printed at the end), including a pipeline.toml to re-run.
    Demo {
        /// Directory to work in (default: a new directory under the temp dir).
        #[arg(long)]
        dir: Option<PathBuf>,
        /// Number of payments to generate.
        #[arg(long, default_value_t = 200_000)]
        payments: u64,
        /// Number of input files to split them into.
        #[arg(long, default_value_t = 20)]
        files: u64,
        /// Input files per epoch.
        #[arg(long, default_value_t = 2)]
        files_per_epoch: usize,
        /// Seed of the generated stream.
        #[arg(long, default_value_t = 0x5EED)]
        seed: u64,
        /// The bundled operator: `velocity` (rules + per-card velocity over
        /// keyed state) or `rules` (stateless rules only).
        #[arg(long, value_enum, default_value_t = DemoOperator::Velocity)]
        operator: DemoOperator,
        /// Print only the summary.
        #[arg(long, short)]
        quiet: bool,
    },
    /// Produce synthetic payments (with planted fraud) to a Kafka topic.
    ///
    /// Drives examples/kafka-fraud; each payment's `ts` is its production
    /// time, so alert latency can be read off the sink.
    Feed {
        /// Kafka bootstrap servers.
        #[arg(long, default_value = "127.0.0.1:9092")]
        bootstrap_servers: String,
        /// Topic to produce to.
        #[arg(long, default_value = "payments")]
        topic: String,
        /// Number of payments.
        #[arg(long, default_value_t = 100_000)]
        payments: u64,
        /// Payments per second (default: as fast as possible).
        #[arg(long)]
        rate: Option<u64>,
        /// Seed of the generated stream.
        #[arg(long, default_value_t = 0x5EED)]
        seed: u64,
        /// Index of the first payment, to continue an earlier feed.
        #[arg(long, default_value_t = 0)]
        start: u64,
    },
    /// Inspect a checkpoint directory.
    Checkpoint {
        #[command(subcommand)]
        command: CheckpointCommand,
    },
    /// Work with operator components.
    Operator {
        #[command(subcommand)]
        command: OperatorCommand,
    },
}

#[derive(Debug, Subcommand)]
enum CheckpointCommand {
    /// List epochs with their offsets, operator digests and commit status.
    Show {
        /// The checkpoint directory.
        dir: PathBuf,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Subcommand)]
enum OperatorCommand {
    /// Check that a component implements the `weir:operator` world and what it imports.
    Check {
        /// The component (`.wasm`).
        file: PathBuf,
        /// Check as if the pipeline granted this capability (clocks, random).
        #[arg(long = "grant", value_parser = ["clocks", "random"])]
        grants: Vec<String>,
    },
}

/// Entry point of the `weir` binary; returns the process exit code.
pub fn main() -> i32 {
    init_tracing();
    let cli = Cli::parse();
    match dispatch(cli) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("error: {e:#}");
            1
        }
    }
}

fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("WEIR_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .try_init();
}

fn stop_flag() -> Result<Arc<AtomicBool>> {
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    ctrlc::set_handler(move || {
        if flag.swap(true, Ordering::SeqCst) {
            eprintln!(
                "second interrupt: exiting now; the uncommitted epoch will be re-run on restart"
            );
            std::process::exit(130);
        }
        eprintln!("stopping after the current epoch (interrupt again to exit now)");
    })
    .context("installing the Ctrl-C handler")?;
    Ok(stop)
}

fn dispatch(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Run { pipeline, quiet } => run(pipeline, quiet),
        Command::Demo {
            dir,
            payments,
            files,
            files_per_epoch,
            seed,
            operator,
            quiet,
        } => {
            anyhow::ensure!(payments > 0, "--payments must be at least 1");
            anyhow::ensure!(files > 0, "--files must be at least 1");
            anyhow::ensure!(files_per_epoch > 0, "--files-per-epoch must be at least 1");
            let opts = DemoOptions {
                dir,
                payments,
                files,
                files_per_epoch,
                seed,
                operator,
            };
            println!("weir demo: {payments} payments in {files} files, {files_per_epoch} files per epoch");
            let report = demo::run(&opts, &mut |p| {
                if !quiet {
                    println!("{p}");
                }
            })?;
            print!("{}", demo::summary_text(&report));
            Ok(())
        }
        Command::Feed {
            bootstrap_servers,
            topic,
            payments,
            rate,
            seed,
            start,
        } => {
            let started = std::time::Instant::now();
            let sent = crate::feed::feed(&crate::feed::FeedOptions {
                bootstrap_servers,
                topic: topic.clone(),
                payments,
                rate,
                seed,
                start,
            })?;
            println!(
                "produced {sent} payments to `{topic}` in {:.2?}",
                started.elapsed()
            );
            Ok(())
        }
        Command::Checkpoint {
            command: CheckpointCommand::Show { dir, json },
        } => show_checkpoint(dir, json),
        Command::Operator {
            command: OperatorCommand::Check { file, grants },
        } => check_operator(file, grants),
    }
}

fn run(path: PathBuf, quiet: bool) -> Result<()> {
    let cfg = PipelineConfig::load(&path)?;
    let host = WasmHost::new(default_cache_root())?;
    let mut pipeline = pipeline::open(&cfg, &host, OpenOptions::default())?;
    let stop = stop_flag()?;
    let summary = pipeline.run(&host, &stop, &mut |p| {
        if !quiet {
            println!("{p}");
        }
    })?;
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

fn show_checkpoint(dir: PathBuf, json: bool) -> Result<()> {
    let ckpt = Checkpoint::inspect(&dir)?;
    let committed: std::collections::HashSet<u64> = ckpt.commits.epochs()?.into_iter().collect();
    let mut rows = Vec::new();
    for epoch in ckpt.offsets.epochs()? {
        let Some(entry) = ckpt.offsets.get(epoch)? else {
            continue;
        };
        let commit = ckpt.commits.get(epoch)?;
        rows.push(serde_json::json!({
            "epoch": epoch,
            "committed": committed.contains(&epoch),
            "epoch_time_ms": entry.epoch_time_ms,
            "operator": entry.operator.digest,
            "operator_config": entry.operator.config_digest,
            "source": entry.source,
            "rows_in": commit.as_ref().map(|c| c.rows_in),
            "rows_out": commit.as_ref().map(|c| c.rows_out),
        }));
    }
    if json {
        let doc = serde_json::json!({ "metadata": ckpt.metadata, "epochs": rows });
        println!("{}", serde_json::to_string_pretty(&doc)?);
        return Ok(());
    }
    let m = &ckpt.metadata;
    println!(
        "checkpoint {}\n  pipeline {}  query {}  format v{}\n  source {}\n  sink   {}\n",
        dir.display(),
        m.pipeline,
        m.query_id,
        m.format_version,
        m.source,
        m.sink
    );
    println!(
        "{:>6}  {:<9}  {:>8}  {:>8}  {:<19}  source range",
        "epoch", "status", "rows in", "rows out", "operator"
    );
    for r in &rows {
        let digest = r["operator"].as_str().unwrap_or("");
        let short = digest.get(..19).unwrap_or(digest);
        let files = r["source"]["files"]
            .as_array()
            .map(|f| {
                f.iter()
                    .filter_map(|x| x["name"].as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            })
            .unwrap_or_else(|| r["source"].to_string());
        println!(
            "{:>6}  {:<9}  {:>8}  {:>8}  {:<19}  {}",
            r["epoch"],
            if r["committed"].as_bool() == Some(true) {
                "committed"
            } else {
                "PLANNED"
            },
            r["rows_in"].as_u64().map_or("-".into(), |n| n.to_string()),
            r["rows_out"].as_u64().map_or("-".into(), |n| n.to_string()),
            short,
            files
        );
    }
    if rows.iter().any(|r| r["committed"].as_bool() != Some(true)) {
        println!("\nPLANNED: offsets written, commit missing; the next run re-runs that epoch.");
    }
    Ok(())
}

fn check_operator(file: PathBuf, grant_names: Vec<String>) -> Result<()> {
    let wasm = std::fs::read(&file).with_context(|| format!("reading {}", file.display()))?;
    let grants = Grants {
        clocks: grant_names.iter().any(|g| g == "clocks"),
        random: grant_names.iter().any(|g| g == "random"),
    };
    let host = WasmHost::new(None)?;
    let report = host
        .inspect(&wasm, grants)
        .with_context(|| format!("{} is not a WebAssembly component", file.display()))?;
    println!(
        "{}\n  digest  {}\n  size    {} bytes",
        file.display(),
        report.digest,
        report.size
    );
    println!("  exports");
    for e in &report.exports {
        println!("    {e}");
    }
    println!("  imports");
    for i in &report.imports {
        println!("    {i}");
    }
    match report.verdict {
        Ok(()) => {
            println!(
                "ok: implements weir:operator/operator@0.1.0 and imports only what is granted"
            );
            Ok(())
        }
        Err(why) => anyhow::bail!("{} cannot run: {why}", file.display()),
    }
}
