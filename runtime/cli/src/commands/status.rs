//! `weir status`: what a running pipeline runs and whether it keeps up.

use super::{or_null, TargetArgs};
use anyhow::Result;
use weir_engine::observe::{ClusterStatus, ProgressReport};
use weir_engine::versions::Status;

/// The arguments of `weir status` (its help text is the command's).
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    target: TargetArgs,
    /// Print JSON (with every shadow report kept).
    #[arg(long)]
    json: bool,
}

/// `weir status`: what runs and whether it keeps up.
pub fn run(args: Args) -> Result<()> {
    let Args { target, json } = args;
    let target = target.target();
    let status = target.status()?;
    let progress = target.progress(if json { 100 } else { 5 })?;
    if json {
        let doc = serde_json::json!({
            "status": status,
            "progress": progress,
            "shadow_reports": target.shadow_reports()?,
        });
        println!("{}", serde_json::to_string_pretty(&doc)?);
    } else {
        print!("{}", status_text(&status));
        print!("{}", progress_text(&progress));
    }
    Ok(())
}

fn status_text(s: &Status) -> String {
    let mut out = format!("pipeline {}\n", s.pipeline);
    let a = s.active.as_ref();
    out += &format!(
        "  active   version {} {}{}\n",
        or_null(a.map(|a| a.number)),
        a.map_or(String::new(), |a| a.digest.to_string()),
        s.active_since_epoch
            .map(|e| format!(" (since epoch {e})"))
            .unwrap_or_else(|| " (no epoch yet)".into())
    );
    if let Some(sh) = &s.shadow {
        out += &format!(
            "  shadow   version {} over {} epochs: {} agreed; rows added {}, removed {}, changed {}; {} failed\n",
            sh.version.number,
            sh.epochs,
            sh.epochs_agreeing,
            sh.added,
            sh.removed,
            sh.changed,
            sh.failed_epochs,
        );
    }
    if let Some(e) = &s.last_epoch {
        out += &format!(
            "  last     epoch {} on version {}: {} rows in, {} out, {:.1} ms\n",
            e.epoch,
            or_null(e.version),
            e.rows_in,
            e.rows_out,
            e.total_ms
        );
    }
    if let Some(c) = &s.cluster {
        out += &cluster_text(c);
    }
    out
}

/// The workers lines of `weir status` for a `[cluster]` pipeline: each
/// worker, whether its record is fresh, and its partitions' newest epochs.
fn cluster_text(c: &ClusterStatus) -> String {
    let live = c.workers.iter().filter(|w| w.live).count();
    let mut out = format!(
        "  cluster  group {}: {} workers live{} (answered by {})\n",
        c.group,
        live,
        match c.workers.len() - live {
            0 => String::new(),
            gone => format!(", {gone} gone"),
        },
        c.answered_by
    );
    for w in &c.workers {
        let r = &w.record;
        out += &format!(
            "  worker   {}{} pid {}{}: {} partitions\n",
            r.worker,
            if w.live { "" } else { " (gone)" },
            r.pid,
            r.admin_url
                .as_ref()
                .map(|u| format!(" at {u}"))
                .unwrap_or_default(),
            r.partitions.len()
        );
        for p in &r.partitions {
            let last = p.last_epoch.as_ref().map_or_else(
                || "no epoch yet".to_string(),
                |e| {
                    format!(
                        "epoch {} on version {}, {} rows in, {} out",
                        e.epoch,
                        or_null(e.version),
                        e.rows_in,
                        e.rows_out
                    )
                },
            );
            out += &format!("    partition {:<3} {:<8} {last}\n", p.partition, p.state);
        }
    }
    out
}

/// The health, rates, lag and state lines of `weir status`.
fn progress_text(p: &ProgressReport) -> String {
    let mut out = format!(
        "  health   {}: {}\n",
        serde_json::to_value(p.health.verdict)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_else(|| "?".into()),
        p.health.reason
    );
    if let Some(last) = p.epochs.last() {
        out += &format!(
            "  rates    {:.0} rows/s in, {:.0} rows/s processed (epoch {}, {:.1} ms{})\n",
            last.input_rows_per_sec,
            last.processed_rows_per_sec,
            last.epoch,
            last.total.as_secs_f64() * 1e3,
            p.trigger_interval_ms
                .map(|i| format!(" of a {i} ms trigger"))
                .unwrap_or_default(),
        );
        out += &format!(
            "  state    {} keys, {} bytes\n",
            last.state_keys, last.state_bytes
        );
        if let Some(l) = &last.latency {
            out += &format!(
                "  latency  event to sink: p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms ({} rows, epoch {})\n",
                l.p50_ms, l.p99_ms, l.max_ms, l.rows, last.epoch
            );
        }
    }
    if let Some(b) = p.source.map(|s| s.backlog) {
        out += &format!(
            "  lag      {} {} waiting at the source{}\n",
            b.pending,
            b.unit.as_str(),
            b.pending_files
                .map(|f| format!(" ({f} files)"))
                .unwrap_or_default()
        );
    }
    let errors = p.recent_errors.len();
    if errors > 0 {
        out += &format!("  log      {errors} recent warnings/errors (see the dashboard)\n");
    }
    out
}
