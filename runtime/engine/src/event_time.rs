//! Event time and the watermark, after Spark: the watermark an epoch runs
//! with is the largest event time seen in *earlier* epochs minus the
//! allowed lateness. It is fixed when the epoch is planned and recorded in
//! `offsets/N`, so a replay runs with the same watermark; the running
//! maximum is recorded in `commits/N`, so a restart continues from it.
//! Rows older than the watermark are late: counted in the epoch's progress
//! and dropped by the host's dedup (the operator sees them otherwise and can
//! compare with `event-time.watermark()`).

use crate::config::EventTimeConfig;
use anyhow::{bail, Context, Result};
use arrow_array::{Array, Int64Array, RecordBatch};
use arrow_schema::{DataType, Schema};

/// The pipeline's event-time column and its running maximum.
#[derive(Debug, Clone)]
pub struct EventTime {
    column: String,
    index: usize,
    lateness_ms: i64,
    /// Largest event time of all committed epochs.
    max_seen: Option<i64>,
}

/// What one epoch's input says about event time.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Observed {
    /// Largest event time in the input.
    pub max: Option<i64>,
    /// Rows older than the epoch's watermark.
    pub late: u64,
}

/// The event-time value of each row (`None` for a null).
pub fn column<'a>(batch: &'a RecordBatch, index: usize, name: &str) -> Result<&'a Int64Array> {
    batch
        .column(index)
        .as_any()
        .downcast_ref::<Int64Array>()
        .with_context(|| format!("event-time column `{name}` is not int64"))
}

impl EventTime {
    /// Checks that `cfg.column` is an int64 (Unix ms) column of `schema`.
    pub fn new(cfg: &EventTimeConfig, schema: &Schema) -> Result<Self> {
        let Ok(index) = schema.index_of(&cfg.column) else {
            bail!(
                "`event_time.column`: the source has no column `{}` (it has: {})",
                cfg.column,
                schema
                    .fields()
                    .iter()
                    .map(|f| f.name().as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        };
        if schema.field(index).data_type() != &DataType::Int64 {
            bail!(
                "`event_time.column`: `{}` is {}, but event time must be int64 Unix milliseconds",
                cfg.column,
                schema.field(index).data_type()
            );
        }
        Ok(EventTime {
            column: cfg.column.clone(),
            index,
            lateness_ms: i64::try_from(cfg.allowed_lateness.as_millis()).unwrap_or(i64::MAX),
            max_seen: None,
        })
    }

    /// The event-time column's name (output rows that carry it are measured
    /// for event→emit latency).
    pub fn column(&self) -> &str {
        &self.column
    }

    /// Position of the event-time column in the source's batches.
    pub fn index(&self) -> usize {
        self.index
    }

    /// Continues from the maximum recorded in the newest `commits/N`.
    pub fn restore(&mut self, max_seen: Option<i64>) {
        self.max_seen = max_seen;
    }

    /// The watermark for the next epoch to be planned.
    pub fn watermark(&self) -> Option<i64> {
        self.max_seen.map(|m| m.saturating_sub(self.lateness_ms))
    }

    /// The largest event time and the late rows of an epoch's input.
    pub fn observe(&self, batches: &[RecordBatch], watermark: Option<i64>) -> Result<Observed> {
        let mut seen = Observed::default();
        for batch in batches {
            let times = column(batch, self.index, &self.column)?;
            for t in times.iter().flatten() {
                seen.max = Some(seen.max.map_or(t, |m| m.max(t)));
                if watermark.is_some_and(|w| t < w) {
                    seen.late += 1;
                }
            }
        }
        Ok(seen)
    }

    /// The running maximum including an epoch's input.
    pub fn max_through(&self, observed: &Observed) -> Option<i64> {
        match (self.max_seen, observed.max) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_schema::Field;
    use std::sync::Arc;
    use std::time::Duration;

    fn cfg(lateness_ms: u64) -> EventTimeConfig {
        EventTimeConfig {
            column: "ts".into(),
            allowed_lateness: Duration::from_millis(lateness_ms),
        }
    }

    fn batch(ts: Vec<Option<i64>>) -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![Field::new("ts", DataType::Int64, true)]));
        RecordBatch::try_new(schema, vec![Arc::new(Int64Array::from(ts))]).unwrap()
    }

    #[test]
    fn watermark_trails_the_maximum_of_committed_epochs() {
        let mut et = EventTime::new(&cfg(100), &batch(vec![]).schema()).unwrap();
        assert_eq!(et.watermark(), None);
        let seen = et
            .observe(&[batch(vec![Some(1_000), None, Some(900)])], None)
            .unwrap();
        assert_eq!(
            seen,
            Observed {
                max: Some(1_000),
                late: 0
            }
        );
        et.restore(et.max_through(&seen));
        assert_eq!(et.watermark(), Some(900));
        let seen = et
            .observe(
                &[batch(vec![Some(899), Some(950), Some(800)])],
                et.watermark(),
            )
            .unwrap();
        assert_eq!(seen.late, 2);
        assert_eq!(
            et.max_through(&seen),
            Some(1_000),
            "the maximum never goes back"
        );
    }

    #[test]
    fn a_missing_or_mistyped_column_is_named() {
        let schema = Schema::new(vec![Field::new("ts", DataType::Utf8, true)]);
        let err = EventTime::new(&cfg(0), &schema).unwrap_err().to_string();
        assert!(err.contains("must be int64"), "{err}");
        let mut c = cfg(0);
        c.column = "when".into();
        let err = EventTime::new(&c, &schema).unwrap_err().to_string();
        assert!(
            err.contains("no column `when`") && err.contains("ts"),
            "{err}"
        );
    }
}
