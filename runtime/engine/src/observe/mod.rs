//! What a running pipeline tells the people watching it: the progress
//! record of every epoch ([`weir_core::progress`]) kept for the last epochs in
//! the checkpoint ([`history`]), Prometheus metrics ([`metrics`]), whether
//! it keeps up ([`health`]) and the recent warnings and errors
//! ([`recent`]). The engine reports into a [`Telemetry`]; the admin API
//! (`/v1/pipelines/{name}/progress`, `/metrics`, the dashboard) and
//! `weir status` read from it. Nothing here feeds back into what epochs
//! compute.

pub mod backfill;
pub mod health;
pub mod history;
pub mod metrics;
pub mod recent;
pub mod workers;

use anyhow::Result;
use health::Health;
use history::History;
use metrics::Metrics;
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};
use weir_core::clock::now_ms;
use weir_core::progress::EpochProgress;
use weir_core::source::Backlog;
pub use workers::ClusterStatus;

/// The source's lag as last polled (also between epochs, while idle).
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct Polled {
    pub at_ms: i64,
    pub backlog: Backlog,
}

/// What the admin API, `weir status` and the dashboard read of a running
/// pipeline — or of a cluster's worker, which runs several
/// ([`crate::cluster::WorkerTelemetry`]).
pub trait Observe: Send + Sync {
    /// Progress records after epoch `after`, at most `limit`, with the
    /// verdict and totals.
    fn report(&self, after: Option<u64>, limit: usize) -> ProgressReport;
    /// `/metrics` in Prometheus' text format.
    fn metrics_text(&self) -> String;
}

impl Observe for Telemetry {
    fn report(&self, after: Option<u64>, limit: usize) -> ProgressReport {
        Telemetry::report(self, after, limit)
    }

    fn metrics_text(&self) -> String {
        Telemetry::metrics_text(self)
    }
}

/// The pipeline's figures, shared by the engine (writer) and the admin API.
pub struct Telemetry {
    pipeline: String,
    trigger_interval_ms: Option<u64>,
    history: Mutex<History>,
    metrics: Metrics,
    polled: Mutex<Option<Polled>>,
    started_ms: i64,
}

/// What `/v1/pipelines/{name}/progress` answers.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ProgressReport {
    pub pipeline: String,
    /// When this process started the pipeline, Unix ms.
    pub started_ms: i64,
    pub trigger_interval_ms: Option<u64>,
    pub health: Health,
    /// The source's lag at the last poll.
    pub source: Option<Polled>,
    /// Totals of the records below.
    pub totals: Totals,
    /// Progress records, oldest first.
    pub epochs: Vec<EpochProgress>,
    /// Recent warnings and errors of the process, oldest first.
    pub recent_errors: Vec<recent::LogEvent>,
}

/// Sums over the kept records.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub struct Totals {
    pub epochs: u64,
    pub rows_in: u64,
    pub rows_out: u64,
    pub dead_letters: u64,
    pub late_rows: u64,
}

impl Telemetry {
    /// Telemetry whose history lives in `dir` (`checkpoint/progress`); a
    /// cluster partition's metrics carry a `partition` label.
    pub fn open(
        dir: &Path,
        pipeline: &str,
        trigger_interval_ms: Option<u64>,
        retain: usize,
        partition: Option<i32>,
    ) -> Result<Arc<Self>> {
        Ok(Arc::new(Telemetry {
            pipeline: pipeline.to_string(),
            trigger_interval_ms,
            history: Mutex::new(History::open(dir, retain)?),
            metrics: Metrics::new(pipeline, partition),
            polled: Mutex::new(None),
            started_ms: now_ms(),
        }))
    }

    fn history(&self) -> MutexGuard<'_, History> {
        self.history.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The source was asked for new data and had `backlog` waiting.
    pub fn source_polled(&self, backlog: Option<Backlog>) {
        let Some(backlog) = backlog else { return };
        self.metrics.backlog(&backlog);
        *self.polled.lock().unwrap_or_else(|p| p.into_inner()) = Some(Polled {
            at_ms: now_ms(),
            backlog,
        });
    }

    /// An epoch committed.
    pub fn epoch_done(&self, p: &EpochProgress) {
        self.metrics.epoch(p);
        let mut history = self.history();
        history.push(p);
        let health = health::assess(&history.last(health::WINDOW));
        self.metrics
            .backlog_growing(health.verdict == health::Verdict::BacklogGrowing);
    }

    /// An epoch failed (its error is logged by whoever handles it).
    pub fn epoch_failed(&self) {
        self.metrics.failure();
    }

    /// The operator failed on `n` records, which were set aside.
    pub fn records_isolated(&self, n: u64) {
        self.metrics.isolated(n);
    }

    /// A failing new version was rolled back automatically.
    pub fn rolled_back(&self) {
        self.metrics.rolled_back();
    }

    /// Progress records after epoch `after`, at most `limit`, with the
    /// verdict and totals.
    pub fn report(&self, after: Option<u64>, limit: usize) -> ProgressReport {
        let (epochs, health, totals) = {
            let history = self.history();
            let all = history.last(usize::MAX);
            let mut totals = Totals::default();
            for p in &all {
                totals.epochs += 1;
                totals.rows_in += p.rows_in;
                totals.rows_out += p.rows_out;
                totals.dead_letters += p.dead_letters;
                totals.late_rows += p.late_rows;
            }
            (
                history.since(after, limit),
                health::assess(&history.last(health::WINDOW)),
                totals,
            )
        };
        ProgressReport {
            pipeline: self.pipeline.clone(),
            started_ms: self.started_ms,
            trigger_interval_ms: self.trigger_interval_ms,
            health,
            source: *self.polled.lock().unwrap_or_else(|p| p.into_inner()),
            totals,
            epochs,
            recent_errors: recent::events(),
        }
    }

    /// `/metrics` in Prometheus' text format.
    pub fn metrics_text(&self) -> String {
        self.metrics.encode()
    }
}
