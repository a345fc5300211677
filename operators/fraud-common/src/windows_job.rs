//! The job's pieces — config, rules verdicts on arrival, scoring of a
//! closed window, alert columns — shared by `fraud-windows` and the
//! benchmark's hand-buffered baseline.

use crate::columns::{Amounts, Columns};
use crate::rules::{Amount, Rule, RuleSet};
use crate::windows_payload::Buffered;
use serde::Deserialize;
use weir_sdk::window::{Row, Windows};
use weir_sdk::{
    log, Batch, ColumnBuilder, DataType, DecimalBuilder, EpochContext, Error, Float64Builder,
    Int64Builder, Operator, Output, TimeUnit, Timer, TimestampBuilder, Utf8Builder, Utf8Column,
};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Velocity {
    #[serde(default = "one_minute")]
    window_ms: i64,
    max_payments: u64,
    weight: f64,
}

fn one_minute() -> i64 {
    60_000
}

#[derive(Debug, Deserialize, Default, PartialEq, Eq, Clone, Copy)]
#[serde(rename_all = "lowercase")]
pub enum Late {
    #[default]
    Drop,
    Score,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    alert_threshold: f64,
    #[serde(default)]
    rules: Vec<Rule>,
    velocity: Velocity,
    #[serde(default)]
    late: Late,
}

/// The operator: rules, the window aggregation and the velocity rule.
pub struct FraudWindows {
    pub rules: RuleSet,
    pub windows: Windows,
    velocity: Velocity,
    pub late: Late,
}

/// Alerts being built, column by column.
#[derive(Default)]
pub struct Alerts {
    txn: Utf8Builder,
    card: Utf8Builder,
    reasons: Utf8Builder,
    /// Amounts and times as the payments carried them; their columns are
    /// built at the end, of the input's types.
    amounts: Vec<Option<Amount>>,
    /// `decimal(P,S)` of the exact amounts (the first one's).
    decimal_type: Option<(u8, u8)>,
    times: Vec<i64>,
    typed_times: usize,
    score: Float64Builder,
    count: Int64Builder,
    start: Int64Builder,
}

impl Alerts {
    pub fn push(
        &mut self,
        card: &str,
        b: &Buffered,
        score: f64,
        reasons: &str,
        w: Option<(u64, i64)>,
    ) {
        self.txn.push(&b.txn_id);
        self.card.push(card);
        if let Some(Amount::Exact(d)) = b.amount {
            self.decimal_type.get_or_insert((b.precision, d.scale()));
        }
        self.amounts.push(b.amount);
        self.score.push(score);
        self.reasons.push(reasons);
        self.times.push(b.ts);
        self.typed_times += usize::from(b.ts_typed);
        self.count.push_option(w.map(|w| w.0 as i64));
        self.start.push_option(w.map(|w| w.1));
    }

    /// The `amount` column: decimals of the input's type, or floats.
    fn amount_column(&self) -> Result<ColumnBuilder, Error> {
        let Some((precision, scale)) = self.decimal_type else {
            let mut floats = Float64Builder::with_capacity(self.amounts.len());
            for a in &self.amounts {
                match a {
                    Some(Amount::Float(f)) => floats.push(*f),
                    _ => floats.push_null(),
                }
            }
            return Ok(floats.into());
        };
        let mut exact = DecimalBuilder::new(precision, scale)?;
        for a in &self.amounts {
            match a {
                Some(Amount::Exact(d)) => exact.push(*d)?,
                Some(Amount::Float(_)) => {
                    return Err(Error::failed(
                        "one window holds both decimal and float amounts: the input's \
                         `amount` changed type while windows were open",
                    ))
                }
                None => exact.push_null(),
            }
        }
        Ok(exact.into())
    }

    /// The `ts` column: `timestamp(ms, UTC)` where the payments' times were
    /// timestamps, Unix milliseconds otherwise.
    fn ts_column(&self) -> Result<ColumnBuilder, Error> {
        if self.typed_times == 0 {
            let mut ms = Int64Builder::with_capacity(self.times.len());
            self.times.iter().for_each(|&t| ms.push(t));
            return Ok(ms.into());
        }
        if self.typed_times != self.times.len() {
            return Err(Error::failed(
                "one window holds both timestamp and int64 times: the input's `ts` \
                 changed type while windows were open",
            ));
        }
        let mut ts = TimestampBuilder::new(TimeUnit::Millisecond, Some("UTC"));
        self.times.iter().for_each(|&t| ts.push_count(t));
        Ok(ts.into())
    }

    /// The output, in the operator's column order.
    pub fn build(self) -> Result<Output, Error> {
        let (amount, ts) = (self.amount_column()?, self.ts_column()?);
        Output::new()
            .with("txn_id", self.txn)
            .with("card_id", self.card)
            .with("amount", amount)
            .with("score", self.score)
            .with("reasons", self.reasons)
            .with("ts", ts)
            .with("window_count", self.count)
            .with("window_start", self.start)
            .build()
    }
}

/// A batch's payments ready to buffer: (row, ts) of each payment with a
/// card and a time, its encoded [`Buffered`], and the card column.
pub struct Arrivals {
    pub rows: Vec<(usize, i64)>,
    pub payloads: Vec<Vec<u8>>,
    pub cards: Utf8Column,
    pub scores: Vec<f64>,
    pub fired: Vec<u64>,
}

impl FraudWindows {
    /// Parses and checks the config (see the crate docs).
    pub fn from_config(config: &str) -> Result<Self, Error> {
        let c: Config = serde_json::from_str(config)
            .map_err(|e| Error::config(format!("fraud-windows config: {e}")))?;
        if c.velocity.window_ms <= 0 {
            return Err(Error::config(
                "fraud-windows config: `velocity.window_ms` must be positive",
            ));
        }
        Ok(FraudWindows {
            rules: RuleSet::new(c.alert_threshold, c.rules).map_err(Error::config)?,
            windows: Windows::tumbling(c.velocity.window_ms)?.collect_rows(true),
            velocity: c.velocity,
            late: c.late,
        })
    }

    /// Scores a batch on the rules and encodes each payment for its window.
    pub fn arrivals(&self, batch: &Batch) -> Result<Arrivals, Error> {
        let columns = Columns::read(batch)?;
        let (scores, fired) = self.rules.score_rows(&columns);
        let (txn, card, ts) = (
            batch.utf8("txn_id")?,
            batch.utf8("card_id")?,
            batch.millis("ts")?,
        );
        let ts_typed = matches!(batch.data_type("ts")?, DataType::Timestamp { .. });
        let precision = match &columns.amount {
            Amounts::Exact(c) => c.precision_scale().0,
            Amounts::Float(_) => 0,
        };
        let (mut rows, mut payloads) = (Vec::new(), Vec::new());
        for row in 0..batch.num_rows() {
            let (Some(_), Some(t)) = (card.get(row), ts.get(row)) else {
                continue;
            };
            payloads.push(
                Buffered {
                    txn_id: txn.get(row).unwrap_or_default().to_string(),
                    amount: columns.amount.get(row),
                    precision,
                    ts: t,
                    ts_typed,
                    score: scores[row],
                    fired: fired[row],
                }
                .encode(),
            );
            rows.push((row, t));
        }
        Ok(Arrivals {
            rows,
            payloads,
            cards: card,
            scores,
            fired,
        })
    }

    /// The window length configured (`velocity.window_ms`).
    pub fn window_ms(&self) -> i64 {
        self.velocity.window_ms
    }

    /// Adds the alerts of a closed window of `card` (its final `count`,
    /// its `start`) over its buffered payments.
    pub fn score_window<'b>(
        &self,
        card: &str,
        count: u64,
        start_ms: i64,
        payloads: impl Iterator<Item = &'b [u8]>,
        alerts: &mut Alerts,
    ) -> Result<(), Error> {
        let busy = count > self.velocity.max_payments;
        for bytes in payloads {
            let b = Buffered::decode(bytes)
                .ok_or_else(|| Error::failed("a buffered payment is corrupt"))?;
            let (mut score, mut reasons) = (b.score, self.rules.reasons(b.fired));
            if busy {
                score += self.velocity.weight;
                if !reasons.is_empty() {
                    reasons.push(',');
                }
                reasons.push_str("velocity");
            }
            if !reasons.is_empty() && score >= self.rules.alert_threshold() {
                alerts.push(card, &b, score, &reasons, Some((count, start_ms)));
            }
        }
        Ok(())
    }
}

/// The job as an operator: `fraud-windows` exports it.
impl Operator for FraudWindows {
    fn init(config: &str) -> Result<Self, Error> {
        FraudWindows::from_config(config)
    }

    /// Buffers each payment in its card's window with the rules' verdict;
    /// alerts come when the window closes ([`Self::on_timers`]).
    fn process(&mut self, _ctx: &EpochContext, batch: &Batch) -> Result<Output, Error> {
        let arrivals = self.arrivals(batch)?;
        let rows: Vec<Row<'_>> = arrivals
            .rows
            .iter()
            .zip(&arrivals.payloads)
            .map(|(&(row, t), p)| Row {
                key: arrivals.cards.get_bytes(row).unwrap_or_default(),
                ts_ms: t,
                value: 1.0,
                payload: p,
            })
            .collect();
        let added = self.windows.add(&rows)?;
        if added.late.is_empty() {
            return Output::empty();
        }
        log::warn(&format!(
            "{} payments arrived after their window closed ({})",
            added.late.len(),
            if self.late == Late::Drop {
                "dropped, as Spark does"
            } else {
                "scored on the rules alone"
            }
        ));
        let mut alerts = Alerts::default();
        if self.late == Late::Score {
            for &i in &added.late {
                let row = arrivals.rows[i].0;
                let c = arrivals.cards.get(row).unwrap_or_default();
                let b = Buffered::decode(&arrivals.payloads[i])
                    .ok_or_else(|| Error::failed("payload"))?;
                let (score, fired) = (arrivals.scores[row], arrivals.fired[row]);
                if fired != 0 && score >= self.rules.alert_threshold() {
                    alerts.push(c, &b, score, &self.rules.reasons(fired), None);
                }
            }
        }
        alerts.build()
    }

    /// Scores every payment of each closed window with its final count.
    fn on_timers(&mut self, _ctx: &EpochContext, fired: &[Timer]) -> Result<Output, Error> {
        let mut alerts = Alerts::default();
        for w in self.windows.close(fired)? {
            let card = String::from_utf8_lossy(&w.key);
            let payloads = w.rows.iter().map(Vec::as_slice);
            self.score_window(&card, w.agg.count, w.start_ms, payloads, &mut alerts)?;
        }
        alerts.build()
    }
}
