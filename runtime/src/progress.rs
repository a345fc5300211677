//! What one epoch did, in the spirit of Spark's `StreamingQueryProgress`:
//! rows in and out, rates, and the time spent in each phase of the epoch
//! protocol, so a slow phase is visible at a glance.

use serde::Serialize;
use std::fmt;
use std::time::Duration;

/// Time spent in each phase of one epoch.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Phases {
    /// Asking the source for its next range.
    pub plan: Duration,
    /// Writing `offsets/<N>`.
    pub wal: Duration,
    /// Reading and parsing the planned range.
    pub read: Duration,
    /// Instantiating the operator and running `process` on every micro-batch.
    pub operator: Duration,
    /// Writing output (and dead letters).
    pub sink: Duration,
    /// Writing `commits/<N>`.
    pub commit: Duration,
    /// Running the shadow candidate and comparing its output (not part of
    /// the other phases).
    pub shadow: Duration,
}

/// The report of one finished epoch.
#[derive(Debug, Clone, Serialize)]
pub struct EpochProgress {
    pub pipeline: String,
    pub epoch: u64,
    /// Whether this run re-executed an epoch planned by an earlier run.
    pub replay: bool,
    pub rows_in: u64,
    pub rows_out: u64,
    pub dead_letters: u64,
    /// Rows older than the epoch's watermark.
    pub late_rows: u64,
    /// Rows the host's dedup dropped as repeats.
    pub duplicates: u64,
    /// The watermark the epoch ran with (Unix ms).
    pub watermark_ms: Option<i64>,
    pub micro_batches: usize,
    pub operator_digest: String,
    /// Registry number of the version the epoch ran with.
    pub operator_version: Option<u32>,
    /// Whether the epoch ran the new version's `migrate` hook first.
    pub migrated: bool,
    /// How a version running in shadow differed on this epoch.
    pub shadow: Option<crate::deploy::shadow::ShadowReport>,
    /// Human summary of the source range.
    pub range: String,
    pub phases: Phases,
    pub total: Duration,
}

impl EpochProgress {
    /// Input rows per second of wall time for the whole epoch.
    pub fn rows_per_sec(&self) -> f64 {
        let secs = self.total.as_secs_f64();
        if secs > 0.0 {
            self.rows_in as f64 / secs
        } else {
            0.0
        }
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
            self.rows_per_sec(),
            ms(p.plan),
            ms(p.wal),
            ms(p.read),
            ms(p.operator),
            ms(p.sink),
            ms(p.commit),
            self.range,
        )?;
        if let Some(w) = self.watermark_ms {
            write!(f, "  watermark {w} late {}", self.late_rows)?;
        }
        if self.duplicates > 0 {
            write!(f, " duplicates dropped {}", self.duplicates)?;
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
