//! `cargo bench -p weir-cli --bench types`: what exact money costs.
//!
//! One rule, `amount > 2500.00` emitting the matching rows (the
//! `amount-rule` guest), over the demo's payments in 10k-row batches, with
//! the amount as `float64` (the baseline) and as `decimal(18,2)` — the same
//! values — read as `Decimal` values and as unscaled integers. Printed:
//! `process()` per batch (median of alternating runs), ns per row and the
//! ratio to the float64 rule in the same run.

use arrow_array::{Array, ArrayRef, Decimal128Array, Float64Array, RecordBatch};
use arrow_schema::{DataType, Field, Schema};
use std::sync::Arc;
use std::time::{Duration, Instant};
use weir_cli::demo::generator;
use weir_host::{Limits, OperatorInstance, WasmHost};
use weir_test_support::guests;

const ROWS: u64 = 10_000;
const THRESHOLD: &str = "2500.00";

/// The demo's payments: `txn_id` and `amount` (float64), 10k rows.
fn payments() -> RecordBatch {
    let schema = Arc::new(Schema::new(vec![
        Field::new("txn_id", DataType::Utf8, false),
        Field::new("amount", DataType::Float64, false),
    ]));
    let mut decoder = arrow_json::ReaderBuilder::new(schema)
        .with_batch_size(ROWS as usize)
        .build_decoder()
        .unwrap();
    decoder.decode(&generator::json_lines(1, 0, ROWS)).unwrap();
    decoder.flush().unwrap().unwrap()
}

/// The same batch with the amount as decimal(18,2): each float rounded to
/// cents (the generator writes two decimals).
fn as_decimal(batch: &RecordBatch) -> RecordBatch {
    let floats = batch
        .column(1)
        .as_any()
        .downcast_ref::<Float64Array>()
        .unwrap();
    let cents: Decimal128Array = floats
        .iter()
        .map(|v| v.map(|a| (a * 100.0).round() as i128))
        .collect::<Decimal128Array>()
        .with_precision_and_scale(18, 2)
        .unwrap();
    let schema = Arc::new(Schema::new(vec![
        Field::new("txn_id", DataType::Utf8, false),
        Field::new("amount", DataType::Decimal128(18, 2), false),
    ]));
    RecordBatch::try_new(
        schema,
        vec![batch.column(0).clone(), Arc::new(cents) as ArrayRef],
    )
    .unwrap()
}

fn instance(host: &WasmHost, wasm: &[u8], mode: &str) -> OperatorInstance {
    let loaded = host.load(wasm, Default::default()).unwrap();
    loaded
        .instantiate(
            "bench",
            0,
            Limits::default(),
            &format!("\"{mode} {THRESHOLD}\""),
            Default::default(),
        )
        .unwrap()
}

fn run(instance: &mut OperatorInstance, batch: &RecordBatch) -> usize {
    instance
        .process("bench", 0, 0, batch.clone())
        .unwrap()
        .iter()
        .map(RecordBatch::num_rows)
        .sum()
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn main() {
    let floats = payments();
    let decimals = as_decimal(&floats);
    let wasm = std::fs::read(guests::guest("amount_rule")).unwrap();
    let host = WasmHost::new(None).unwrap();
    let mut cases = [
        (
            "float64, f64 compare",
            instance(&host, &wasm, "float"),
            &floats,
        ),
        (
            "decimal(18,2), Decimal compare",
            instance(&host, &wasm, "decimal"),
            &decimals,
        ),
        (
            "decimal(18,2), unscaled i128 compare",
            instance(&host, &wasm, "unscaled"),
            &decimals,
        ),
    ];
    let matches: Vec<usize> = cases.iter_mut().map(|(_, i, b)| run(i, b)).collect();
    assert!(
        matches.windows(2).all(|w| w[0] == w[1]),
        "every way finds the same rows: {matches:?}"
    );
    let iters = std::env::var("BENCH_ITERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300);
    let mut samples = vec![Vec::with_capacity(iters); cases.len()];
    for round in 0..iters + iters / 10 {
        for (k, (_, instance, batch)) in cases.iter_mut().enumerate() {
            let t = Instant::now();
            std::hint::black_box(run(instance, batch));
            if round >= iters / 10 {
                samples[k].push(t.elapsed());
            }
        }
    }
    let medians: Vec<Duration> = samples.into_iter().map(median).collect();
    println!(
        "\n`amount > {THRESHOLD}` over {ROWS} payments ({} match), process() per batch, median of {iters}\n",
        matches[0]
    );
    println!("| amount column, rule | per batch | per row | vs float64 |");
    println!("|---|---|---|---|");
    for ((name, _, _), d) in cases.iter().zip(&medians) {
        println!(
            "| {name} | {:.0} µs | {:.1} ns | {:.2}× |",
            d.as_secs_f64() * 1e6,
            d.as_secs_f64() * 1e9 / ROWS as f64,
            d.as_secs_f64() / medians[0].as_secs_f64()
        );
    }
}
