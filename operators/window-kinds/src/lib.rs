//! `window-kinds`, a test guest: the SDK's [`Windows`] of the configured
//! kind and output mode over `card_id`, `ts` and `amount`, emitting one
//! row per window reported — `"update"` rows from `add` in update mode,
//! `"close"` rows when the watermark closes a window — with its aggregate
//! and the `txn_id`s it collected. The tests compare them with windows
//! computed offline.
//!
//! Config: `{"kind": "tumbling" | "sliding" | "session", "size_ms",
//! "slide_ms", "gap_ms", "emit": "close" | "update"}`.

use serde::Deserialize;
use weir_sdk::window::{Emit, Row, Window, Windows};
use weir_sdk::{
    Batch, EpochContext, Error, Float64Builder, Int64Builder, Operator, Output, Timer, Utf8Builder,
};

#[derive(Deserialize)]
struct Config {
    kind: String,
    #[serde(default)]
    size_ms: i64,
    #[serde(default)]
    slide_ms: i64,
    #[serde(default)]
    gap_ms: i64,
    emit: String,
}

struct Kinds(Windows);

#[derive(Default)]
struct Rows {
    what: Utf8Builder,
    card: Utf8Builder,
    start: Int64Builder,
    end: Int64Builder,
    count: Int64Builder,
    sum: Float64Builder,
    min: Float64Builder,
    max: Float64Builder,
    txns: Utf8Builder,
}

impl Rows {
    fn push(&mut self, what: &str, w: &Window) {
        self.what.push(what);
        self.card.push(&String::from_utf8_lossy(&w.key));
        self.start.push(w.start_ms);
        self.end.push(w.end_ms);
        self.count.push(w.agg.count as i64);
        self.sum.push(w.agg.sum);
        self.min.push(w.agg.min);
        self.max.push(w.agg.max);
        let txns: Vec<String> = w
            .rows
            .iter()
            .map(|r| String::from_utf8_lossy(r).into_owned())
            .collect();
        self.txns.push(&txns.join(","));
    }

    fn build(self) -> Result<Output, Error> {
        Output::new()
            .with("what", self.what)
            .with("card_id", self.card)
            .with("start", self.start)
            .with("end", self.end)
            .with("count", self.count)
            .with("sum", self.sum)
            .with("min", self.min)
            .with("max", self.max)
            .with("txns", self.txns)
            .build()
    }
}

impl Operator for Kinds {
    fn init(config: &str) -> Result<Self, Error> {
        let c: Config =
            serde_json::from_str(config).map_err(|e| Error::config(format!("config: {e}")))?;
        let windows = match c.kind.as_str() {
            "tumbling" => Windows::tumbling(c.size_ms)?,
            "sliding" => Windows::sliding(c.size_ms, c.slide_ms)?,
            "session" => Windows::session(c.gap_ms)?,
            other => return Err(Error::config(format!("unknown kind {other:?}"))),
        };
        let emit = if c.emit == "update" {
            Emit::OnUpdate
        } else {
            Emit::OnClose
        };
        Ok(Kinds(windows.emit(emit).collect_rows(true)))
    }

    fn process(&mut self, _ctx: &EpochContext, batch: &Batch) -> Result<Output, Error> {
        let (card, ts, amount, txn) = (
            batch.utf8("card_id")?,
            batch.i64("ts")?,
            batch.f64("amount")?,
            batch.utf8("txn_id")?,
        );
        let rows: Vec<Row<'_>> = (0..batch.num_rows())
            .filter_map(|r| {
                Some(Row {
                    key: card.get_bytes(r)?,
                    ts_ms: ts.get(r)?,
                    value: amount.get(r)?,
                    payload: txn.get_bytes(r)?,
                })
            })
            .collect();
        let added = self.0.add(&rows)?;
        let mut out = Rows::default();
        for w in &added.updated {
            out.push("update", w);
        }
        out.build()
    }

    fn on_timers(&mut self, _ctx: &EpochContext, fired: &[Timer]) -> Result<Output, Error> {
        let mut out = Rows::default();
        for w in self.0.close(fired)? {
            out.push("close", &w);
        }
        out.build()
    }
}

weir_sdk::export_operator!(Kinds);
