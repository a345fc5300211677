//! What one epoch did, in the spirit of Spark's `StreamingQueryProgress`:
//! rows in and out, rates, the time spent in each phase of the epoch
//! protocol, the source's lag, the state's size and the operator version,
//! so a slow phase or a growing backlog is visible at a glance. The engine
//! hands each record to the engine's `observe` module, which keeps the recent ones in
//! the checkpoint and turns them into metrics.
//!
//! In JSON, durations are milliseconds (`f64`).

use crate::latency::{Histogram, LatencySummary};
use crate::source::Backlog;
use crate::Digest;
use arrow_array::RecordBatch;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

/// Serde form of a [`Duration`] as fractional milliseconds.
mod millis {
    use super::*;

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(d.as_secs_f64() * 1e3)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let ms = f64::deserialize(d)?;
        Ok(Duration::try_from_secs_f64(ms / 1e3).unwrap_or_default())
    }
}

/// Time spent in each phase of one epoch.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Phases {
    /// Asking the source for its next range (Spark's `latestOffset`).
    #[serde(with = "millis")]
    pub plan: Duration,
    /// Writing `offsets/<N>`.
    #[serde(with = "millis")]
    pub wal: Duration,
    /// Reading and parsing the planned range.
    #[serde(with = "millis")]
    pub read: Duration,
    /// Instantiating the operator and running `process` on every micro-batch.
    #[serde(with = "millis")]
    pub operator: Duration,
    /// Writing output (and dead letters).
    #[serde(with = "millis")]
    pub sink: Duration,
    /// Writing `commits/<N>`.
    #[serde(with = "millis")]
    pub commit: Duration,
    /// Running the shadow candidate and comparing its output (not part of
    /// the other phases).
    #[serde(with = "millis")]
    pub shadow: Duration,
}

impl Phases {
    /// Every phase with its name, in the order an epoch runs them (the
    /// shadow last): for metrics and reports that list them all.
    pub fn named(&self) -> [(&'static str, Duration); 7] {
        [
            ("plan", self.plan),
            ("wal", self.wal),
            ("read", self.read),
            ("operator", self.operator),
            ("sink", self.sink),
            ("commit", self.commit),
            ("shadow", self.shadow),
        ]
    }
}

/// The report of one finished epoch.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EpochProgress {
    pub pipeline: String,
    /// The source partition this epoch belongs to, on a cluster's worker
    /// (each partition has epochs of its own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition: Option<i32>,
    pub epoch: u64,
    /// Wall-clock time the epoch's planning started, Unix ms.
    pub started_ms: i64,
    /// Wall-clock time `commits/N` was written, Unix ms.
    pub finished_ms: i64,
    /// The epoch's time as recorded in `offsets/N` (what operators see).
    pub epoch_time_ms: i64,
    /// Whether this run re-executed an epoch planned by an earlier run.
    pub replay: bool,
    pub rows_in: u64,
    /// Rows arriving per second: input rows over the time since the
    /// previous epoch started (Spark's `inputRowsPerSecond`).
    pub input_rows_per_sec: f64,
    /// Rows processed per second: input rows over this epoch's duration
    /// (Spark's `processedRowsPerSecond`).
    pub processed_rows_per_sec: f64,
    /// Rows of the operator's default output (the rows `process` returns).
    pub rows_out: u64,
    /// Rows of each named output the operator emitted to (`scores`), by
    /// name; empty for an operator with one output.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub named_rows: BTreeMap<String, u64>,
    /// The version of each reference table the epoch read (`[[lookup]]`),
    /// as its `offsets/N` records: what an audit of its decisions needs.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub lookups: BTreeMap<String, Digest>,
    /// Lookup refreshes that failed while this epoch was planned (bad data,
    /// an unreadable file, an unreachable database): the tables kept the
    /// versions before.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub lookup_refresh_failures: u64,
    pub dead_letters: u64,
    /// Rows the operator failed on, set aside (they are among the dead
    /// letters; see `operator.on_error`).
    #[serde(default)]
    pub isolated_rows: u64,
    /// Rows older than the epoch's watermark.
    pub late_rows: u64,
    /// Rows the host's dedup dropped as repeats.
    pub duplicates: u64,
    /// The watermark the epoch ran with (Unix ms).
    pub watermark_ms: Option<i64>,
    pub micro_batches: usize,
    pub operator_digest: Digest,
    /// Registry number of the version the epoch ran with.
    pub operator_version: Option<u32>,
    /// Whether the epoch ran the new version's `migrate` hook first.
    pub migrated: bool,
    /// How a version running in shadow differed on this epoch.
    pub shadow: Option<ShadowReport>,
    /// Human summary of the source range.
    pub range: String,
    /// The source range as recorded in `offsets/N` (files and sizes, or
    /// Kafka partitions with start and end offsets).
    pub source: serde_json::Value,
    /// What the source still had waiting after planning this epoch (`None`
    /// for a replay, which does not plan).
    pub backlog: Option<Backlog>,
    /// Keys in the state store after the epoch committed.
    pub state_keys: u64,
    /// Approximate bytes of the state store after the epoch committed.
    pub state_bytes: u64,
    /// The processing-time trigger's interval (`None` for `once` and
    /// `available-now`): the time an epoch has before the next one is due.
    pub trigger_interval_ms: Option<u64>,
    pub phases: Phases,
    #[serde(with = "millis")]
    pub total: Duration,
    /// Event→emit latency of the epoch's output rows (with `[event_time]`).
    #[serde(default)]
    pub latency: Option<LatencySummary>,
    /// The same as a histogram, for `/metrics` (not kept on disk).
    #[serde(skip)]
    pub latency_histogram: Option<Histogram>,
    /// Each task's share of the epoch, when the operator ran as more than
    /// one task (`parallelism`); empty for one task.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tasks: Vec<TaskProgress>,
}

/// What one task of a parallel epoch did: its rows and the time its
/// operator instance ran, to see whether the key spreads the load evenly.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TaskProgress {
    pub task: u16,
    pub rows_in: u64,
    pub rows_out: u64,
    /// The task's operator run: instance, `process`, timers.
    #[serde(with = "millis")]
    pub operator: Duration,
}

impl TaskProgress {
    /// Task `task`, before it ran.
    pub fn of(task: u16) -> Self {
        TaskProgress {
            task,
            ..TaskProgress::default()
        }
    }

    /// Counts one run of the task's operator: the rows it got, the rows it
    /// gave back (none if it failed) and the time it took.
    pub fn count_run(&mut self, rows_in: u64, output: &[RecordBatch], took: Duration) {
        self.rows_in += rows_in;
        self.rows_out += crate::outputs::default_rows(output);
        self.operator += took;
    }
}

impl EpochProgress {
    /// Spark's rule for a pipeline falling behind, applied to one epoch:
    /// it took longer than the trigger interval *and* rows arrived faster
    /// than it processed them. Always false without an interval.
    pub fn falling_behind(&self) -> bool {
        let Some(interval) = self.trigger_interval_ms else {
            return false;
        };
        self.total.as_secs_f64() * 1e3 > interval as f64
            && self.input_rows_per_sec > self.processed_rows_per_sec
    }
}

/// How the candidate's output of one epoch differs from the active version's.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ShadowReport {
    pub epoch: u64,
    pub active_version: u32,
    pub candidate_version: u32,
    /// The column rows were matched on.
    pub key: String,
    pub active_rows: u64,
    pub candidate_rows: u64,
    pub added: u64,
    pub removed: u64,
    pub changed: u64,
    /// For changed rows: how many differ in each column.
    pub changed_columns: BTreeMap<String, u64>,
    /// The first listed keys of each kind.
    pub added_keys: Vec<String>,
    pub removed_keys: Vec<String>,
    pub changed_keys: Vec<String>,
    /// Why the candidate produced no output for this epoch, if it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Time the candidate took, in ms.
    pub candidate_ms: f64,
}

impl ShadowReport {
    /// Whether the candidate agreed with the active version on every row.
    pub fn agrees(&self) -> bool {
        self.error.is_none() && self.added == 0 && self.removed == 0 && self.changed == 0
    }
}

impl EpochProgress {
    /// An empty record of epoch `n` of a pipeline named `p`, for the tests
    /// of this and other crates to fill in.
    #[doc(hidden)]
    pub fn sample(n: u64) -> Self {
        EpochProgress {
            pipeline: "p".into(),
            partition: None,
            epoch: n,
            started_ms: 0,
            finished_ms: 0,
            epoch_time_ms: 0,
            replay: false,
            rows_in: 0,
            input_rows_per_sec: 0.0,
            processed_rows_per_sec: 0.0,
            rows_out: 0,
            named_rows: Default::default(),
            lookups: Default::default(),
            lookup_refresh_failures: 0,
            dead_letters: 0,
            isolated_rows: 0,
            late_rows: 0,
            duplicates: 0,
            watermark_ms: None,
            micro_batches: 0,
            operator_digest: Digest::of(b"sample"),
            operator_version: None,
            migrated: false,
            shadow: None,
            range: String::new(),
            source: serde_json::Value::Null,
            backlog: None,
            state_keys: 0,
            state_bytes: 0,
            trigger_interval_ms: None,
            phases: Phases::default(),
            total: Duration::ZERO,
            latency: None,
            latency_histogram: None,
            tasks: Vec::new(),
        }
    }
}

/// Rows per second, 0 for an empty interval.
pub fn rate(rows: u64, over: Duration) -> f64 {
    let secs = over.as_secs_f64();
    if secs > 0.0 {
        rows as f64 / secs
    } else {
        0.0
    }
}

/// Output whose median event time is at least this old when emitted is
/// taken for a backfill of historical data: the progress line shows its
/// age instead of a latency.
pub const BACKFILL_AGE: Duration = Duration::from_secs(3_600);

/// An age in ms as hours or days, to one decimal.
fn age(ms: f64) -> String {
    let hours = ms / 3_600_000.0;
    if hours < 48.0 {
        format!("{hours:.1} h")
    } else {
        format!("{:.1} days", hours / 24.0)
    }
}

fn ms(d: Duration) -> String {
    format!("{:.1}ms", d.as_secs_f64() * 1e3)
}

impl fmt::Display for EpochProgress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let p = &self.phases;
        write!(
            f,
            "epoch {:>4}{} in {:>7} out {:>5} dead {:>3} {:>9.0} rows/s  plan {} wal {} read {} op {} sink {} commit {}  [{}]",
            self.epoch,
            if self.replay { " (replay)" } else { "" },
            self.rows_in,
            self.rows_out,
            self.dead_letters,
            self.processed_rows_per_sec,
            ms(p.plan),
            ms(p.wal),
            ms(p.read),
            ms(p.operator),
            ms(p.sink),
            ms(p.commit),
            self.range,
        )?;
        if let Some(b) = self.backlog {
            write!(f, "  lag {} {}", b.pending, b.unit.as_str())?;
        }
        if let Some(w) = self.watermark_ms {
            write!(f, "  watermark {w} late {}", self.late_rows)?;
        }
        match &self.latency {
            // Historical event times (a backfill): their age is not a
            // latency, and printing it as one reads like an outage.
            Some(l) if l.p50_ms >= BACKFILL_AGE.as_millis() as f64 => write!(
                f,
                "  events {} old (backfill; latency not measured)",
                age(l.p50_ms)
            )?,
            Some(l) => write!(f, "  latency p99 {:.1} ms", l.p99_ms)?,
            None => {}
        }
        if self.duplicates > 0 {
            write!(f, " duplicates dropped {}", self.duplicates)?;
        }
        if self.isolated_rows > 0 {
            write!(
                f,
                "  operator failed on {} (dead-lettered)",
                self.isolated_rows
            )?;
        }
        if let Some(n) = self
            .backlog
            .and_then(|b| b.changed_files)
            .filter(|&n| n > 0)
        {
            write!(f, "  {n} file(s) changed after planning (ignored)")?;
        }
        if let Some(v) = self.operator_version {
            write!(f, "  v{v}")?;
        }
        if self.migrated {
            write!(f, " (migrated)")?;
        }
        if let Some(s) = &self.shadow {
            match &s.error {
                Some(e) => write!(f, "  shadow v{} FAILED: {e}", s.candidate_version)?,
                None => write!(
                    f,
                    "  shadow v{} +{} -{} ~{} ({})",
                    s.candidate_version,
                    s.added,
                    s.removed,
                    s.changed,
                    ms(self.phases.shadow)
                )?,
            }
        }
        Ok(())
    }
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_latency(p50_ms: f64, p99_ms: f64) -> String {
        let mut p = EpochProgress::sample(3);
        p.latency = Some(LatencySummary {
            rows: 10,
            p50_ms,
            p99_ms,
            p999_ms: p99_ms,
            max_ms: p99_ms,
        });
        p.to_string()
    }

    #[test]
    fn a_backfill_shows_the_age_of_its_events_not_a_latency() {
        let live = with_latency(2.0, 17.6);
        assert!(live.contains("latency p99 17.6 ms"), "{live}");
        let backfill = with_latency(96_573_840_012.7, 96_573_840_012.7);
        assert!(!backfill.contains("latency p99"), "{backfill}");
        assert!(backfill.contains("events 1117.8 days old"), "{backfill}");
        assert!(backfill.contains("backfill"), "{backfill}");
    }
}
