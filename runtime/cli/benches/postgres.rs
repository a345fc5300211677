//! `cargo bench -p weir-runtime --bench postgres`: the PostgreSQL sink
//! against a real server (a temp cluster on 127.0.0.1, started and stopped
//! here). Prints rows/s for 1M alert rows in one epoch through the bulk path
//! (binary COPY) and through row-by-row prepared INSERTs, measured in the
//! same run, then the time per epoch of both paths for small epochs, which
//! is where `auto`'s switch-over (`copy_threshold`) comes from.
//! `BENCH_PG_ROWS` changes the 1M.

use weir_test_support::pg;

use arrow_array::{ArrayRef, Float64Array, Int64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema};
use std::sync::Arc;
use std::time::{Duration, Instant};
use weir_connectors::postgres::table::TableName;
use weir_connectors::postgres::{PostgresSink, PostgresSinkSettings, WriteMethod};
use weir_core::sink::Sink;

const BATCH_ROWS: usize = 10_000;

/// Alert rows shaped like fraud-rules' output, in batches of 10k.
fn alerts(total: usize, offset: usize) -> Vec<RecordBatch> {
    let schema = Arc::new(Schema::new(vec![
        Field::new("txn_id", DataType::Utf8, true),
        Field::new("card_id", DataType::Utf8, true),
        Field::new("amount", DataType::Float64, true),
        Field::new("score", DataType::Float64, true),
        Field::new("reasons", DataType::Utf8, true),
        Field::new("ts", DataType::Int64, true),
    ]));
    (0..total)
        .step_by(BATCH_ROWS)
        .map(|start| {
            let rows = (start..(start + BATCH_ROWS).min(total)).map(|i| i + offset);
            let columns: Vec<ArrayRef> = vec![
                Arc::new(StringArray::from_iter_values(
                    rows.clone().map(|i| format!("t-{i:012}")),
                )),
                Arc::new(StringArray::from_iter_values(
                    rows.clone().map(|i| format!("c-{:05}", i % 5_000)),
                )),
                Arc::new(Float64Array::from_iter_values(
                    rows.clone().map(|i| 5.0 + (i % 300_000) as f64 / 100.0),
                )),
                Arc::new(Float64Array::from_iter_values(
                    rows.clone().map(|i| 0.7 + (i % 30) as f64 / 100.0),
                )),
                Arc::new(StringArray::from_iter_values(rows.clone().map(|i| {
                    ["amount_above", "country_mismatch,merchant_in"][i % 2]
                }))),
                Arc::new(Int64Array::from_iter_values(
                    rows.map(|i| 1_767_225_600_000 + i as i64 * 37),
                )),
            ];
            RecordBatch::try_new(schema.clone(), columns).expect("alert batch")
        })
        .collect()
}

fn sink(server: &pg::PgServer, table: &str, method: WriteMethod) -> PostgresSink {
    let table = TableName {
        schema: "public".into(),
        table: table.into(),
    };
    PostgresSink::new(PostgresSinkSettings {
        write_method: method,
        ..PostgresSinkSettings::new(&server.url("postgres"), table, "bench")
    })
    .expect("connecting the sink")
}

/// Writes `epochs` epochs of `batches` each; returns the time.
fn write(sink: &mut PostgresSink, epochs: &[Vec<RecordBatch>]) -> Duration {
    let started = Instant::now();
    for (e, batches) in epochs.iter().enumerate() {
        sink.write_epoch(e as u64, batches)
            .expect("writing an epoch");
    }
    started.elapsed()
}

fn main() {
    let total: usize = std::env::var("BENCH_PG_ROWS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    let server = pg::PgServer::start();
    println!("PostgreSQL sink, {total} alert rows in one epoch (one transaction each)\n");
    println!("| path | time | rows/s | vs row-by-row |");
    println!("|---|---|---|---|");
    let batches = vec![alerts(total, 0)];
    let mut results = Vec::new();
    for (name, table, method) in [
        (
            "row-by-row INSERT (prepared)",
            "bulk_insert",
            WriteMethod::Insert,
        ),
        ("binary COPY (bulk path)", "bulk_copy", WriteMethod::Copy),
    ] {
        let mut s = sink(&server, table, method);
        let t = write(&mut s, &batches);
        let count: i64 = server.count(&format!("SELECT count(*) FROM {table}"));
        assert_eq!(count as usize, total, "{table} holds every row");
        results.push((name, t));
    }
    let base = results[0].1;
    for (name, t) in &results {
        println!(
            "| {name} | {:.2} s | {:.0} | {:.1}x |",
            t.as_secs_f64(),
            total as f64 / t.as_secs_f64(),
            base.as_secs_f64() / t.as_secs_f64()
        );
    }

    println!("\nSmall epochs: time per epoch (median of 50), INSERT vs COPY\n");
    println!("| rows per epoch | INSERT | COPY | COPY / INSERT |");
    println!("|---|---|---|---|");
    for rows in [1usize, 2, 3, 5, 10, 100, 1_000] {
        let mut per_method = Vec::new();
        for (tag, method) in [("i", WriteMethod::Insert), ("c", WriteMethod::Copy)] {
            let table = format!("small_{tag}_{rows}");
            let mut s = sink(&server, &table, method);
            let mut times: Vec<Duration> = (0..50)
                .map(|e| {
                    let epoch = alerts(rows, e * rows);
                    let started = Instant::now();
                    s.write_epoch(e as u64, &epoch).expect("small epoch");
                    started.elapsed()
                })
                .collect();
            times.sort();
            per_method.push(times[times.len() / 2]);
        }
        let (insert, copy) = (per_method[0], per_method[1]);
        println!(
            "| {rows} | {:.2} ms | {:.2} ms | {:.2} |",
            insert.as_secs_f64() * 1e3,
            copy.as_secs_f64() * 1e3,
            copy.as_secs_f64() / insert.as_secs_f64()
        );
    }
}
