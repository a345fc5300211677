//! `kind = "generator"`: demo payments at a steady rate, with no service to
//! run — Spark's `rate` source, made for fraud. It lets the demo, the tests
//! and the latency benchmark run anywhere.
//!
//! Payment `i` is generated at `origin + i / rate` and carries that time as
//! its event time (`ts`), so event→alert latency is measured from the
//! moment a payment came into being. Its contents depend only on `(seed, i)`
//! ([`payments::payment`]), and `origin` is recorded in every range, so a
//! replay regenerates exactly the same records.

pub mod payments;

use crate::connector::{SourceConnector, SourceContext};
use anyhow::{bail, Result};
use arrow_array::builder::StringBuilder;
use arrow_array::{
    ArrayRef, Decimal128Array, Float64Array, Int64Array, RecordBatch, StringArray, StructArray,
    TimestampMillisecondArray,
};
use arrow_buffer::NullBuffer;
use arrow_schema::{DataType, Schema, SchemaRef};
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::sync::{Arc, LazyLock};
use weir_core::clock::now_ms;
use weir_core::schema::{self, ColumnConfig};
use weir_core::source::{Backlog, BacklogUnit, EpochInput, PlanLimit, RowOrigin, Source};

/// Payments per second beyond which `rate` is refused: far above what one
/// pipeline processes, so a typo (an extra zero or three) is caught.
const MAX_RATE: u64 = 10_000_000;

/// Synthetic payments with planted fraud, generated at `rate` per second:
/// the demo's stream, for trying a pipeline out and for load tests. A
/// payment's number and the seed decide its content, so a replay reads the
/// same rows.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GeneratorSourceConfig {
    /// Payments per second (default 1000).
    #[serde(default = "default_rate")]
    pub rate: u64,
    /// Which stream: the same seed gives the same payments (default 1).
    #[serde(default = "default_seed")]
    pub seed: u64,
    /// Stop generating after this many payments (default: never).
    #[serde(default)]
    pub rows: Option<u64>,
    /// Most payments one epoch takes (default: all generated so far).
    #[serde(default)]
    pub max_rows_per_trigger: Option<u64>,
    /// When payment 0 is generated (Unix ms); default: when the query first
    /// plans. A time in the past makes every payment due by now available
    /// at once (a backfill), and fixes the event times, so that two runs
    /// produce the same rows.
    #[serde(default)]
    pub start_ms: Option<i64>,
    /// Declare the payments' money, time and device typed: `amount`
    /// `decimal(18,2)`, `ts` `timestamp(ms, UTC)` and `device` a struct of
    /// `id`, `ip` and `fingerprint` (default false: `amount` `float64`,
    /// `ts` `int64` milliseconds and `device_id` `utf8`, the columns an
    /// operator built before typed columns reads).
    #[serde(default)]
    pub typed: bool,
}

fn default_rate() -> u64 {
    1_000
}

fn default_seed() -> u64 {
    1
}

/// The generator's columns: the demo's payment schema.
static COLUMNS: LazyLock<Vec<ColumnConfig>> = LazyLock::new(payments::columns);

/// The generator's columns with `typed = true`.
static TYPED_COLUMNS: LazyLock<Vec<ColumnConfig>> = LazyLock::new(payments::typed_columns);

impl GeneratorSourceConfig {
    fn declared(&self) -> &'static [ColumnConfig] {
        if self.typed {
            &TYPED_COLUMNS
        } else {
            &COLUMNS
        }
    }
}

impl SourceConnector for GeneratorSourceConfig {
    const KIND: &'static str = "generator";
    type Source = GeneratorSource;

    fn validate(&self) -> Result<()> {
        if self.rate == 0 || self.rate > MAX_RATE {
            bail!(
                "`source.rate` must be between 1 and {MAX_RATE} payments per second, not {}",
                self.rate
            );
        }
        if self.max_rows_per_trigger == Some(0) {
            bail!("`source.max_rows_per_trigger` must be at least 1");
        }
        Ok(())
    }

    fn dead_letter(&self) -> Option<&Path> {
        None
    }

    fn columns(&self) -> &[ColumnConfig] {
        self.declared()
    }

    fn schema(&self) -> Result<SchemaRef> {
        Ok(schema::arrow_schema(self.declared()))
    }

    fn open(&self, ctx: &SourceContext<'_>) -> Result<GeneratorSource> {
        Ok(GeneratorSource {
            settings: self.clone(),
            schema: schema::arrow_schema(self.declared()),
            batch_rows: ctx.batch_rows.max(1),
            origin_ms: self.start_ms,
            next: 0,
            backlog: None,
        })
    }
}

/// One epoch's payments: offsets `start..end` of the stream that began at
/// `origin_ms`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct GeneratorRange {
    pub start: u64,
    pub end: u64,
    /// When payment 0 was generated (Unix ms); fixed for the query's life.
    pub origin_ms: i64,
}

/// The open generator.
pub struct GeneratorSource {
    settings: GeneratorSourceConfig,
    schema: SchemaRef,
    batch_rows: usize,
    /// Set by the first plan of a new query, or restored from its ranges.
    origin_ms: Option<i64>,
    /// The first offset not planned yet.
    next: u64,
    backlog: Option<Backlog>,
}

impl GeneratorSource {
    /// When payment `i` is generated (Unix ms).
    fn time_of(&self, origin_ms: i64, i: u64) -> i64 {
        origin_ms + (u128::from(i) * 1000 / u128::from(self.settings.rate)) as i64
    }

    /// Payments generated by `now_ms` (all of them, with `rows`, once due).
    fn generated_by(&self, origin_ms: i64, now_ms: i64) -> u64 {
        let elapsed = now_ms.saturating_sub(origin_ms).max(0) as u128;
        let due = (elapsed * u128::from(self.settings.rate) / 1000 + 1).min(u128::from(u64::MAX));
        let due = due as u64;
        self.settings.rows.map_or(due, |rows| due.min(rows))
    }

    fn batch(&self, range: &GeneratorRange, from: u64, to: u64) -> Result<RecordBatch> {
        let mut columns = PaymentColumns::with_capacity((to - from) as usize);
        for i in from..to {
            let (p, _) = payments::payment(self.settings.seed, i);
            columns.push(&p, self.time_of(range.origin_ms, i));
        }
        let arrays = if self.settings.typed {
            columns.finish_typed(&self.schema)?
        } else {
            columns.finish_basic()
        };
        Ok(RecordBatch::try_new(self.schema.clone(), arrays)?)
    }
}

/// Builders for one batch of payments, in either schema.
struct PaymentColumns {
    /// `txn_id`, `card_id`, `merchant_id`, `currency`, `country`,
    /// `card_country`.
    text: [StringBuilder; 6],
    amount_cents: Vec<i64>,
    ts: Vec<i64>,
    devices: Vec<Option<payments::Device>>,
}

impl PaymentColumns {
    fn with_capacity(n: usize) -> Self {
        PaymentColumns {
            text: std::array::from_fn(|_| StringBuilder::with_capacity(n, n * 8)),
            amount_cents: Vec::with_capacity(n),
            ts: Vec::with_capacity(n),
            devices: Vec::with_capacity(n),
        }
    }

    fn push(&mut self, p: &payments::Payment, ts: i64) {
        let text = [
            &p.txn_id,
            &p.card_id,
            &p.merchant_id,
            &p.currency,
            &p.country,
            &p.card_country,
        ];
        for (b, v) in self.text.iter_mut().zip(text) {
            b.append_value(v);
        }
        self.amount_cents.push(p.amount_cents());
        self.ts.push(ts);
        self.devices.push(p.device.clone());
    }

    /// The columns in schema order, `amount`, `ts` and the device placed by
    /// the caller.
    fn finish(self, amount: ArrayRef, ts: ArrayRef, device: ArrayRef) -> Vec<ArrayRef> {
        let [txn, card, merchant, currency, country, card_country] =
            self.text.map(|mut b| Arc::new(b.finish()) as ArrayRef);
        vec![
            txn,
            card,
            merchant,
            amount,
            currency,
            country,
            card_country,
            ts,
            device,
        ]
    }

    fn finish_basic(mut self) -> Vec<ArrayRef> {
        let amount =
            Float64Array::from_iter_values(self.amount_cents.iter().map(|&c| c as f64 / 100.0));
        let ts = Int64Array::from(std::mem::take(&mut self.ts));
        let device: StringArray = self
            .devices
            .iter()
            .map(|d| d.as_ref().map(|d| d.id.as_str()))
            .collect();
        self.finish(Arc::new(amount), Arc::new(ts), Arc::new(device))
    }

    fn finish_typed(mut self, schema: &Schema) -> Result<Vec<ArrayRef>> {
        let amount = Decimal128Array::from(
            std::mem::take(&mut self.amount_cents)
                .into_iter()
                .map(i128::from)
                .collect::<Vec<_>>(),
        )
        .with_precision_and_scale(18, 2)?;
        let zone = match schema.field_with_name("ts")?.data_type() {
            DataType::Timestamp(_, zone) => zone.clone(),
            other => bail!("the typed payments' `ts` is {other}, not a timestamp"),
        };
        let ts =
            TimestampMillisecondArray::from(std::mem::take(&mut self.ts)).with_timezone_opt(zone);
        let device = device_struct(schema, &self.devices)?;
        Ok(self.finish(Arc::new(amount), Arc::new(ts), Arc::new(device)))
    }
}

/// The nested `device` column: null where a payment names no device.
fn device_struct(schema: &Schema, devices: &[Option<payments::Device>]) -> Result<StructArray> {
    let field = |d: fn(&payments::Device) -> &str| -> ArrayRef {
        Arc::new(
            devices
                .iter()
                .map(|x| Some(x.as_ref().map_or("", d)))
                .collect::<StringArray>(),
        )
    };
    let fields = match schema.field_with_name("device")?.data_type() {
        DataType::Struct(fields) => fields.clone(),
        other => bail!("the typed payments' `device` is {other}, not a struct"),
    };
    let present = NullBuffer::from(devices.iter().map(Option::is_some).collect::<Vec<_>>());
    Ok(StructArray::try_new(
        fields,
        vec![
            field(|d| &d.id),
            field(|d| &d.ip),
            field(|d| &d.fingerprint),
        ],
        Some(present),
    )?)
}

impl Source for GeneratorSource {
    type Range = GeneratorRange;

    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    /// The seed and rate: a checkpoint's recorded event times assume them.
    fn identity(&self) -> String {
        format!(
            "generator:seed={},rate={}",
            self.settings.seed, self.settings.rate
        )
    }

    fn restore(&mut self, range: &GeneratorRange) -> Result<()> {
        self.origin_ms.get_or_insert(range.origin_ms);
        self.next = self.next.max(range.end);
        Ok(())
    }

    fn planned_so_far(&self) -> Result<GeneratorRange> {
        Ok(GeneratorRange {
            start: 0,
            end: self.next,
            origin_ms: self.origin_ms.unwrap_or_else(now_ms),
        })
    }

    fn plan(&mut self, limit: PlanLimit) -> Result<Option<GeneratorRange>> {
        let origin_ms = *self.origin_ms.get_or_insert_with(now_ms);
        let generated = self.generated_by(origin_ms, now_ms());
        let mut end = generated;
        if let (true, Some(max)) = (limit.per_trigger(), self.settings.max_rows_per_trigger) {
            end = end.min(self.next.saturating_add(max));
        }
        let start = self.next;
        self.backlog = Some(Backlog {
            unit: BacklogUnit::Records,
            planned: end.saturating_sub(start),
            pending: generated.saturating_sub(end.max(start)),
            pending_files: None,
            changed_files: None,
        });
        if end <= start {
            return Ok(None);
        }
        self.next = end;
        Ok(Some(GeneratorRange {
            start,
            end,
            origin_ms,
        }))
    }

    fn read(&mut self, range: &GeneratorRange) -> Result<EpochInput> {
        let mut out = EpochInput::default();
        let mut from = range.start;
        while from < range.end {
            let to = range.end.min(from + self.batch_rows as u64);
            out.batches.push(self.batch(range, from, to)?);
            from = to;
        }
        Ok(out)
    }

    fn describe(&self, range: &GeneratorRange) -> String {
        format!(
            "{} payments (offsets {}..{})",
            range.end - range.start,
            range.start,
            range.end
        )
    }

    fn backlog(&self) -> Option<Backlog> {
        self.backlog
    }

    fn is_exhausted(&self) -> bool {
        self.settings.rows.is_some_and(|rows| self.next >= rows)
    }

    fn locate(&mut self, range: &GeneratorRange, row: u64) -> Result<Option<RowOrigin>> {
        Ok((range.start + row < range.end).then(|| RowOrigin {
            origin: format!(
                "generator seed {} offset {}",
                self.settings.seed,
                range.start + row
            ),
            line: None,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::cast::AsArray;
    use arrow_array::Array;

    fn source(rate: u64, rows: Option<u64>) -> GeneratorSource {
        open(GeneratorSourceConfig {
            rate,
            seed: 7,
            rows,
            max_rows_per_trigger: None,
            start_ms: None,
            typed: false,
        })
    }

    fn open(cfg: GeneratorSourceConfig) -> GeneratorSource {
        cfg.validate().unwrap();
        cfg.open(&SourceContext {
            pipeline: "p",
            batch_rows: 100,
            partition: None,
            checkpoint: Path::new("unused"),
        })
        .unwrap()
    }

    #[test]
    fn a_range_reads_the_same_payments_every_time() {
        let started = GeneratorRange {
            start: 0,
            end: 0,
            origin_ms: now_ms() - 10_000,
        };
        let mut a = source(1_000, Some(1_000));
        a.restore(&started).unwrap();
        let range = a
            .plan(PlanLimit::PerTrigger)
            .unwrap()
            .expect("payments due");
        assert_eq!((range.start, range.end), (0, 1_000), "all generated by now");
        let first = a.read(&range).unwrap();
        assert_eq!(first.batches.len(), 10);
        assert_eq!(a.plan(PlanLimit::PerTrigger).unwrap(), None, "planned once");
        // A new process (a replay after a crash) regenerates them exactly.
        let mut b = source(1_000, Some(1_000));
        b.restore(&range).unwrap();
        assert_eq!(b.read(&range).unwrap().batches, first.batches);
        let locate = b.locate(&range, 5).unwrap().unwrap();
        assert_eq!(locate.origin, "generator seed 7 offset 5");
    }

    #[test]
    fn typed_payments_carry_exact_money_instants_and_a_nested_device() {
        let mut s = open(GeneratorSourceConfig {
            typed: true,
            ..source(1_000, Some(100)).settings
        });
        let range = GeneratorRange {
            start: 0,
            end: 100,
            origin_ms: 1_000_000,
        };
        s.restore(&range).unwrap();
        let batch = &s.read(&range).unwrap().batches[0];
        let amount = batch
            .column(3)
            .as_primitive::<arrow_array::types::Decimal128Type>();
        assert_eq!(amount.data_type(), &DataType::Decimal128(18, 2));
        let ts = batch.column(7);
        assert!(matches!(
            ts.data_type(),
            DataType::Timestamp(arrow_schema::TimeUnit::Millisecond, Some(_))
        ));
        let device = batch.column(8).as_struct();
        let (mut nulls, mut ids) = (0, 0);
        for i in 0..100 {
            let p = payments::payment(7, i).0;
            assert_eq!(amount.value(i as usize), i128::from(p.amount_cents()));
            match &p.device {
                None => {
                    assert!(device.is_null(i as usize));
                    nulls += 1;
                }
                Some(d) => {
                    let id = device.column(0).as_string::<i32>().value(i as usize);
                    let ip = device.column(1).as_string::<i32>().value(i as usize);
                    assert_eq!((id, ip), (d.id.as_str(), d.ip.as_str()));
                    assert_eq!(p.device_id.as_deref(), Some(id));
                    ids += 1;
                }
            }
        }
        assert!(
            nulls > 0 && ids > nulls,
            "{nulls} without a device, {ids} with"
        );
        assert_eq!(batch.schema().as_ref(), s.schema().as_ref());
    }

    #[test]
    fn event_time_is_generation_time_and_rows_end_the_stream() {
        let mut s = source(1_000, Some(5));
        let range = GeneratorRange {
            start: 0,
            end: 5,
            origin_ms: 1_000_000,
        };
        s.restore(&range).unwrap();
        let batch = &s.read(&range).unwrap().batches[0];
        let ts = batch
            .column_by_name("ts")
            .unwrap()
            .as_any()
            .downcast_ref::<Int64Array>()
            .unwrap();
        assert_eq!(
            ts.values(),
            &[1_000_000, 1_000_001, 1_000_002, 1_000_003, 1_000_004]
        );
        assert_eq!(
            s.plan(PlanLimit::Unbounded).unwrap(),
            None,
            "5 rows and no more"
        );
    }

    #[test]
    fn plans_only_what_was_generated_by_now() {
        let s = source(2_000, None);
        assert_eq!(s.generated_by(0, 0), 1, "payment 0 at the origin");
        assert_eq!(s.generated_by(0, 1_000), 2_001);
        assert_eq!(
            s.generated_by(500, 0),
            1,
            "a clock step back plans nothing new"
        );
    }

    #[test]
    fn bad_settings_are_named() {
        let bad = GeneratorSourceConfig {
            rate: 0,
            seed: 1,
            rows: None,
            max_rows_per_trigger: None,
            start_ms: None,
            typed: false,
        };
        assert!(format!("{:#}", bad.validate().unwrap_err()).contains("source.rate"));
    }
}
