//! `weir checkpoint`: a checkpoint directory, read (or repaired) without
//! a running pipeline.

use anyhow::Result;
use std::path::PathBuf;
use weir_core::checkpoint::Checkpoint;

/// The arguments of `weir checkpoint` (its help text is the command's).
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
}

/// What `weir checkpoint` does.
#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// List epochs with their offsets, operator digests and commit status.
    Show {
        /// The checkpoint directory.
        dir: PathBuf,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Verify the state store (every block's checksum, in the working copy
    /// and in every snapshot) and move each corrupt one aside. The next
    /// `weir run` rebuilds the state from the newest good snapshot and
    /// re-runs the operator over the epochs since; their output is not
    /// written again. Refused while a pipeline runs on the checkpoint.
    Repair {
        /// The checkpoint directory.
        dir: PathBuf,
    },
    /// Print the checkpoint's whole audit trail (see `weir audit`).
    Audit {
        /// The checkpoint directory.
        dir: PathBuf,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

/// `weir checkpoint`.
pub fn run(args: Args) -> Result<()> {
    match args.command {
        Command::Show { dir, json } => show(dir, json),
        Command::Repair { dir } => repair(dir),
        Command::Audit { dir, json } => crate::security::checkpoint_audit(dir, json),
    }
}

/// `weir checkpoint repair`.
fn repair(dir: PathBuf) -> Result<()> {
    Checkpoint::inspect(&dir)?;
    let _lock = weir_core::checkpoint::WriterLock::take(&dir)?;
    let report = weir_state::verify::repair(&dir.join("state"))?;
    for (path, entries) in &report.sound {
        println!("sound    {} ({entries} entries)", path.display());
    }
    for (path, aside, why) in &report.set_aside {
        println!("CORRUPT  {}: {why}", path.display());
        println!("         moved to {}", aside.display());
    }
    if report.repaired() {
        println!(
            "The next `weir run` rebuilds the state from the newest good snapshot and the offset \
             log; the epochs it re-runs write no output again."
        );
    } else {
        println!("Nothing to repair.");
    }
    Ok(())
}

/// `weir checkpoint show`.
fn show(dir: PathBuf, json: bool) -> Result<()> {
    let ckpt = Checkpoint::inspect(&dir)?;
    let committed: std::collections::HashSet<u64> = ckpt.commits.epochs()?.into_iter().collect();
    let mut rows = Vec::new();
    for epoch in ckpt.offsets.epochs()? {
        let Some(entry) = ckpt.offsets.get(epoch)? else {
            continue;
        };
        let commit = ckpt.commits.get(epoch)?;
        // A real-time epoch's range is its logged parts.
        let source = if entry.real_time {
            let log = ckpt.parts.read_log(epoch)?;
            let parts: Vec<_> = log.parts.into_iter().map(|p| p.range).collect();
            match log.deferred.map(|p| p.range) {
                Some(d) => serde_json::json!({ "parts": parts, "deferred": d }),
                None => serde_json::json!({ "parts": parts }),
            }
        } else {
            entry.source
        };
        rows.push(serde_json::json!({
            "epoch": epoch,
            "committed": committed.contains(&epoch),
            "epoch_time_ms": entry.epoch_time_ms,
            "operator": entry.operator.digest,
            "operator_config": entry.operator.config_digest,
            "source": source,
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
            .unwrap_or_else(|| match &r["source"] {
                serde_json::Value::Null => "no data: the watermark fired timers".to_string(),
                other => other.to_string(),
            });
        println!(
            "{:>6}  {:<9}  {:>8}  {:>8}  {:<19}  {}",
            r["epoch"].as_u64().unwrap_or_default(),
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
