//! The reporting part: an epoch's progress record, built from what the
//! epoch did ([`Done`]) and what the parts hold after it (state size, the
//! source's description of the range, the version's number), then handed
//! to the control plane (probation, the last epoch) and to telemetry (the
//! admin API, metrics, the backlog verdict).

use super::epoch::Done;
use super::Pipeline;
use crate::observe::Telemetry;
use std::sync::Arc;
use std::time::{Duration, Instant};
use weir_core::clock::now_ms;
use weir_core::progress::{rate, EpochProgress, ShadowReport};
use weir_core::wal::OffsetEntry;

/// Where progress goes, and the pace of epochs for the input rate.
pub(crate) struct Reporter {
    telemetry: Arc<Telemetry>,
    /// When the previous epoch started.
    previous_start: Option<Instant>,
}

/// When an epoch started, as its progress record shows it.
pub(super) struct Started {
    pub at: Instant,
    /// Unix ms.
    pub ms: i64,
    /// Since the previous epoch's start: the input rate's interval.
    pub since_previous: Option<Duration>,
}

impl Reporter {
    /// Reports to `telemetry`.
    pub fn new(telemetry: Arc<Telemetry>) -> Self {
        Reporter {
            telemetry,
            previous_start: None,
        }
    }

    /// Progress records, metrics and the backlog verdict.
    pub fn telemetry(&self) -> &Arc<Telemetry> {
        &self.telemetry
    }

    /// An attempt at an epoch failed.
    pub fn epoch_failed(&self) {
        self.telemetry.epoch_failed();
    }

    /// The source was asked for new data; `backlog` is what it said waits.
    pub fn source_polled(&self, backlog: Option<weir_core::source::Backlog>) {
        self.telemetry.source_polled(backlog);
    }

    /// A failing version was rolled back automatically.
    pub fn rolled_back(&self) {
        self.telemetry.rolled_back();
    }

    /// `rows` records were set aside as the operator's failures.
    pub fn records_isolated(&self, rows: u64) {
        self.telemetry.records_isolated(rows);
    }

    /// An epoch starts, `planning` ago (its plan and `offsets/N` write).
    pub(super) fn start(&mut self, planning: Duration) -> Started {
        let at = Instant::now() - planning;
        Started {
            at,
            ms: now_ms() - planning.as_millis() as i64,
            since_previous: self
                .previous_start
                .replace(at)
                .map(|p| at.duration_since(p)),
        }
    }
}

impl Pipeline {
    /// The progress record of a finished epoch, handed to the control
    /// plane and telemetry.
    pub(super) fn report(
        &mut self,
        done: Done,
        entry: &OffsetEntry,
        migrated: bool,
        shadow: Option<ShadowReport>,
    ) -> EpochProgress {
        let total = done.started.at.elapsed();
        let (state_keys, state_bytes) = self.state.size();
        let (range, source) = match done.parts {
            Some(n) => (
                format!("{n} parts (real-time)"),
                serde_json::json!({ "parts": n }),
            ),
            None if entry.no_data => (
                "no data: the watermark reached timers".to_string(),
                serde_json::json!({ "no_data": true }),
            ),
            None => (self.source.describe(&entry.source), entry.source.clone()),
        };
        let progress = EpochProgress {
            pipeline: self.name.clone(),
            partition: self.partition,
            epoch: done.epoch,
            started_ms: done.started.ms,
            finished_ms: now_ms(),
            epoch_time_ms: entry.epoch_time_ms,
            replay: done.replay,
            rows_in: done.rows_in,
            input_rows_per_sec: rate(done.rows_in, done.started.since_previous.unwrap_or(total)),
            processed_rows_per_sec: rate(done.rows_in, total),
            rows_out: done.rows_out,
            named_rows: done.named_rows,
            lookups: entry.lookups.clone(),
            lookup_refresh_failures: self.input.take_refresh_failures(),
            dead_letters: done.dead_letters,
            isolated_rows: entry.isolated.len() as u64,
            late_rows: done.observed.late,
            duplicates: done.dropped.duplicates,
            watermark_ms: entry.watermark_ms,
            micro_batches: done.micro_batches,
            operator_digest: entry.operator.digest,
            operator_version: self.versions.version_of(&entry.operator),
            migrated,
            shadow,
            range,
            source,
            backlog: done.backlog,
            state_keys,
            state_bytes,
            trigger_interval_ms: self.trigger.interval_ms(),
            phases: done.phases,
            total,
            latency: done.latency.summary(),
            latency_histogram: Some(done.latency),
            tasks: done.tasks,
        };
        self.versions.epoch_done(&progress);
        self.reporter.telemetry.epoch_done(&progress);
        progress
    }
}
