//! A worker's figures for its admin API: the progress records, health and
//! `/metrics` of every partition it runs, as one. Each record says its
//! partition; each series carries a `partition` label.

use super::Partitions;
use crate::observe::health::{Health, Verdict};
use crate::observe::metrics::merge;
use crate::observe::{Observe, Polled, ProgressReport, Totals};
use std::sync::Arc;
use weir_core::source::Backlog;

/// The figures of the partitions a worker runs.
pub struct WorkerTelemetry {
    partitions: Arc<Partitions>,
    pipeline: String,
    started_ms: i64,
}

impl WorkerTelemetry {
    pub(super) fn new(partitions: Arc<Partitions>, pipeline: &str, started_ms: i64) -> Self {
        WorkerTelemetry {
            partitions,
            pipeline: pipeline.to_string(),
            started_ms,
        }
    }
}

impl Observe for WorkerTelemetry {
    /// Every partition's records after its own epoch `after`, newest
    /// `limit` of them by the time they finished; the worst partition's
    /// health; lag and totals summed.
    fn report(&self, after: Option<u64>, limit: usize) -> ProgressReport {
        let reports: Vec<(i32, ProgressReport)> = self
            .partitions
            .telemetries()
            .into_iter()
            .map(|(p, t)| (p, t.report(after, limit)))
            .collect();
        let mut epochs: Vec<_> = reports
            .iter()
            .flat_map(|(_, r)| r.epochs.iter().cloned())
            .collect();
        epochs.sort_by_key(|e| (e.finished_ms, e.partition));
        epochs.drain(..epochs.len().saturating_sub(limit));
        let mut totals = Totals::default();
        for (_, r) in &reports {
            totals.epochs += r.totals.epochs;
            totals.rows_in += r.totals.rows_in;
            totals.rows_out += r.totals.rows_out;
            totals.dead_letters += r.totals.dead_letters;
            totals.late_rows += r.totals.late_rows;
        }
        ProgressReport {
            pipeline: self.pipeline.clone(),
            started_ms: self.started_ms,
            trigger_interval_ms: self.partitions.cfg.trigger.interval_ms(),
            health: worst(&reports),
            source: summed_lag(&reports),
            totals,
            epochs,
            recent_errors: crate::observe::recent::events(),
        }
    }

    fn metrics_text(&self) -> String {
        let texts: Vec<String> = self
            .partitions
            .telemetries()
            .iter()
            .map(|(_, t)| t.metrics_text())
            .collect();
        merge(&texts)
    }
}

fn rank(v: Verdict) -> u8 {
    match v {
        Verdict::NoData => 0,
        Verdict::KeepingUp => 1,
        Verdict::AtRisk => 2,
        Verdict::BacklogGrowing => 3,
    }
}

/// The health of the partition that is worst off, naming it.
fn worst(reports: &[(i32, ProgressReport)]) -> Health {
    reports
        .iter()
        .max_by_key(|(_, r)| rank(r.health.verdict))
        .map(|(p, r)| Health {
            verdict: r.health.verdict,
            reason: format!(
                "partition {p} (the worst of {}): {}",
                reports.len(),
                r.health.reason
            ),
        })
        .unwrap_or_else(|| Health {
            verdict: Verdict::NoData,
            reason: "this worker runs no partition yet".into(),
        })
}

/// The partitions' lag, summed (they all count records).
fn summed_lag(reports: &[(i32, ProgressReport)]) -> Option<Polled> {
    let polled: Vec<&Polled> = reports
        .iter()
        .filter_map(|(_, r)| r.source.as_ref())
        .collect();
    let first = polled.first()?;
    let mut backlog: Backlog = first.backlog;
    for p in &polled[1..] {
        backlog.planned += p.backlog.planned;
        backlog.pending += p.backlog.pending;
    }
    Some(Polled {
        at_ms: polled.iter().map(|p| p.at_ms).max().unwrap_or(first.at_ms),
        backlog,
    })
}
