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
use arrow_schema::{DataType, Schema, TimeUnit};

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

/// Whether a column of type `t` can carry event time: int64 Unix
/// milliseconds, or a timestamp of any unit (an instant with a zone, or a
/// wall-clock time without one, read as UTC).
pub fn is_event_time(t: &DataType) -> bool {
    matches!(t, DataType::Int64 | DataType::Timestamp(..))
}

/// The event time of each row in Unix milliseconds (null stays null): an
/// int64 column as it is, a timestamp converted from its unit, rounded
/// down to the millisecond.
pub fn column(batch: &RecordBatch, index: usize, name: &str) -> Result<Int64Array> {
    millis(batch.column(index).as_ref())
        .with_context(|| format!("event-time column `{name}` is neither int64 nor a timestamp"))
}

/// `array` as Unix milliseconds, if it is int64 or a timestamp; shares the
/// buffers where it already holds milliseconds.
pub fn millis(array: &dyn Array) -> Option<Int64Array> {
    let unit = match array.data_type() {
        DataType::Int64 => TimeUnit::Millisecond,
        DataType::Timestamp(unit, _) => *unit,
        _ => return None,
    };
    // Both are 64-bit counts: read them as int64 without a copy.
    let counts = array.to_data().into_builder().data_type(DataType::Int64);
    let counts = Int64Array::from(counts.build().ok()?);
    Some(match unit {
        TimeUnit::Second => counts.unary(|v: i64| v.saturating_mul(1_000)),
        TimeUnit::Millisecond => counts,
        TimeUnit::Microsecond => counts.unary(|v: i64| v.div_euclid(1_000)),
        TimeUnit::Nanosecond => counts.unary(|v: i64| v.div_euclid(1_000_000)),
    })
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
        if !is_event_time(schema.field(index).data_type()) {
            bail!(
                "`event_time.column`: `{}` is {}, but event time must be a timestamp or int64 Unix milliseconds",
                cfg.column,
                weir_core::schema::type_name(schema.field(index).data_type())
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
        assert!(err.contains("must be a timestamp or int64"), "{err}");
        let mut c = cfg(0);
        c.column = "when".into();
        let err = EventTime::new(&c, &schema).unwrap_err().to_string();
        assert!(
            err.contains("no column `when`") && err.contains("ts"),
            "{err}"
        );
    }

    #[test]
    fn timestamps_of_every_unit_are_event_times_in_milliseconds() {
        use arrow_array::{TimestampMicrosecondArray, TimestampSecondArray};
        let micros = TimestampMicrosecondArray::from(vec![Some(1_500), None, Some(-1)])
            .with_timezone("+00:00");
        assert_eq!(
            millis(&micros).unwrap(),
            Int64Array::from(vec![Some(1), None, Some(-1)]),
            "rounded down, nulls kept"
        );
        let secs = TimestampSecondArray::from(vec![3]);
        assert_eq!(millis(&secs).unwrap(), Int64Array::from(vec![3_000]));
        let schema = Schema::new(vec![Field::new(
            "ts",
            DataType::Timestamp(TimeUnit::Millisecond, Some("+00:00".into())),
            true,
        )]);
        let et = EventTime::new(&cfg(0), &schema).unwrap();
        let batch = RecordBatch::try_new(
            Arc::new(schema),
            vec![Arc::new(
                arrow_array::TimestampMillisecondArray::from(vec![5, 9]).with_timezone("+00:00"),
            )],
        )
        .unwrap();
        assert_eq!(
            et.observe(&[batch], Some(6)).unwrap(),
            Observed {
                max: Some(9),
                late: 1
            }
        );
    }
}
