//! `cargo bench -p weir-cli --bench lake`: the lake's formats against the
//! JSON lines they sit beside (issue 19), measured in one run:
//!
//! 1. input: the demo's payments decoded from JSON lines and from Parquet
//!    by the files source's own readers (rows/s; median of 5);
//! 2. output: one epoch's rows written by the files sink and by the
//!    Parquet sink, 1k, 20k and 200k rows (ms per epoch, median of 5).
//!
//! `BENCH_LAKE_ROWS` changes the 200k input rows.

use arrow_array::RecordBatch;
use std::time::{Duration, Instant};
use weir_connectors::files::parquet_input;
use weir_connectors::files::FileSink;
use weir_connectors::generator::payments::{columns, json_lines};
use weir_connectors::parquet::{sink::encode, PARQUET};
use weir_core::json::{JsonDecoder, MalformedPolicy};
use weir_core::sink::Sink;

const RUNS: usize = 5;
const BATCH_ROWS: usize = 10_000;

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

fn timed(mut f: impl FnMut()) -> Duration {
    median(
        (0..RUNS)
            .map(|_| {
                let started = Instant::now();
                f();
                started.elapsed()
            })
            .collect(),
    )
}

fn rows(batches: &[RecordBatch]) -> usize {
    batches.iter().map(RecordBatch::num_rows).sum()
}

fn main() {
    let total: u64 = std::env::var("BENCH_LAKE_ROWS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200_000);
    let schema = weir_core::schema::arrow_schema(&columns());
    let decoder = JsonDecoder::new(schema.clone(), BATCH_ROWS, MalformedPolicy::Fail);
    let lines = json_lines(19, 0, total);
    let batches = decoder
        .decode_lines(&lines, "bench")
        .expect("decode")
        .batches;
    let parquet = encode(&batches).expect("encode").expect("rows");

    println!(
        "1. Input: {total} demo payments, decoded into the source's schema (median of {RUNS})\n"
    );
    println!("| format | bytes | time | rows/s | vs JSON lines |");
    println!("|---|---|---|---|---|");
    let json_time = timed(|| {
        let d = decoder.decode_lines(&lines, "bench").expect("decode");
        assert_eq!(rows(&d.batches), total as usize);
    });
    let parquet_time = timed(|| {
        let b = parquet_input::decode(parquet.clone(), &schema, BATCH_ROWS, "bench").expect("read");
        assert_eq!(rows(&b), total as usize);
    });
    for (name, bytes, time) in [
        ("JSON lines", lines.len(), json_time),
        ("Parquet (Snappy)", parquet.len(), parquet_time),
    ] {
        println!(
            "| {name} | {bytes} | {:.1} ms | {:.0} | {:.2}x |",
            time.as_secs_f64() * 1e3,
            total as f64 / time.as_secs_f64(),
            json_time.as_secs_f64() / time.as_secs_f64()
        );
    }

    println!("\n2. Output: one epoch written by each sink, to a temp dir (median of {RUNS})\n");
    println!(
        "| rows | files (JSON lines) | parquet | parquet / files | parquet bytes / JSON bytes |"
    );
    println!("|---|---|---|---|---|");
    let dir = tempfile::tempdir().expect("tempdir");
    let all = arrow_select::concat::concat_batches(&schema, &batches).expect("concat");
    for n in [1_000usize, 20_000, 200_000] {
        let n = n.min(all.num_rows());
        let epoch: Vec<RecordBatch> = (0..n)
            .step_by(BATCH_ROWS)
            .map(|s| all.slice(s, BATCH_ROWS.min(n - s)))
            .collect();
        let mut files = FileSink::new(dir.path().join(format!("files-{n}")), 0).expect("sink");
        let mut lake = FileSink::with_format(dir.path().join(format!("parquet-{n}")), 0, PARQUET)
            .expect("sink");
        let files_time = timed(|| files.write_epoch(1, &epoch).expect("write"));
        let parquet_time = timed(|| lake.write_epoch(1, &epoch).expect("write"));
        let size = |p: std::path::PathBuf| std::fs::metadata(p).map_or(0, |m| m.len()) as f64;
        let ratio = size(
            dir.path()
                .join(format!("parquet-{n}/epoch-0000000001.parquet")),
        ) / size(dir.path().join(format!("files-{n}/epoch-0000000001.jsonl")));
        println!(
            "| {n} | {:.2} ms | {:.2} ms | {:.2}x | {ratio:.2} |",
            files_time.as_secs_f64() * 1e3,
            parquet_time.as_secs_f64() * 1e3,
            parquet_time.as_secs_f64() / files_time.as_secs_f64()
        );
    }
}
