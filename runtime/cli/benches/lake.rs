//! `cargo bench -p weir-cli --bench lake`: the lake's formats against the
//! JSON lines they sit beside, measured in one run:
//!
//! 1. input: the demo's payments decoded from JSON lines and from Parquet
//!    by the files source's own readers (rows/s; median of 5);
//! 2. output: one epoch's rows written by the files sink, the Parquet
//!    sink and the Delta sink (a local table, one commit per epoch), 1k,
//!    20k and 200k rows (ms per epoch, median of 5);
//! 3. reading: the same payments as 20 files in a local directory (the
//!    files source) and as 20 objects in an S3-compatible server on
//!    127.0.0.1 (s3s-fs, the S3 source), planned and read as one epoch.
//!
//! `BENCH_LAKE_ROWS` changes the 200k input rows.

use weir_test_support::s3;

use arrow_array::RecordBatch;
use std::time::{Duration, Instant};
use weir_connectors::files::parquet_input;
use weir_connectors::files::FileSink;
use weir_connectors::generator::payments::{columns, json_lines};
use weir_connectors::parquet::{sink::encode, PARQUET};
use weir_core::json::{JsonDecoder, MalformedPolicy};
use weir_core::sink::Sink;
use weir_core::source::{PlanLimit, Source};

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
        let b = parquet_input::decode(parquet.clone().into(), &schema, BATCH_ROWS, "bench")
            .expect("read");
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
        "| rows | files (JSON lines) | parquet | delta | parquet / files | delta / files | \
         parquet bytes / JSON bytes |"
    );
    println!("|---|---|---|---|---|---|---|");
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
        let table = weir_connectors::delta::store::TableStore::open(
            &dir.path().join(format!("delta-{n}")),
            &Default::default(),
        )
        .expect("table");
        let mut delta =
            weir_connectors::delta::DeltaSink::open(table, "bench", "bench").expect("delta sink");
        let files_time = timed(|| files.write_epoch(1, &epoch).expect("write"));
        let parquet_time = timed(|| lake.write_epoch(1, &epoch).expect("write"));
        // Each write a new epoch: a repeated one is skipped, not written.
        let mut next = 0;
        let delta_time = timed(|| {
            delta.write_epoch(next, &epoch).expect("write");
            next += 1;
        });
        let size = |p: std::path::PathBuf| std::fs::metadata(p).map_or(0, |m| m.len()) as f64;
        let ratio = size(
            dir.path()
                .join(format!("parquet-{n}/epoch-0000000001.parquet")),
        ) / size(dir.path().join(format!("files-{n}/epoch-0000000001.jsonl")));
        let ms = |t: Duration| t.as_secs_f64() * 1e3;
        println!(
            "| {n} | {:.2} ms | {:.2} ms | {:.2} ms | {:.2}x | {:.2}x | {ratio:.2} |",
            ms(files_time),
            ms(parquet_time),
            ms(delta_time),
            parquet_time.as_secs_f64() / files_time.as_secs_f64(),
            delta_time.as_secs_f64() / files_time.as_secs_f64()
        );
    }
    read_rates(&decoder, &lines, &batches);
}

/// Objects (or files) the payments are cut into for the read comparison.
const OBJECTS: usize = 20;

/// Section 3: the files source over a directory against the S3 source
/// over a server, for the same bytes in JSON lines and in Parquet.
fn read_rates(decoder: &JsonDecoder, lines: &[u8], batches: &[RecordBatch]) {
    let server = s3::S3Server::start();
    let dir = tempfile::tempdir().expect("tempdir");
    let schema = decoder.schema().clone();
    let total = rows(batches);
    let line_ends: Vec<usize> = memchr_newlines(lines);
    println!(
        "\n3. Reading: {total} payments as {OBJECTS} files or objects, planned and read as one \
         epoch (median of {RUNS})\n"
    );
    println!("| format | local files | S3 (s3s-fs on 127.0.0.1) | S3 time / local time |");
    println!("|---|---|---|---|");
    for format in ["jsonl", "parquet"] {
        let local = dir.path().join(format);
        std::fs::create_dir_all(&local).expect("dir");
        for i in 0..OBJECTS {
            let (from, to) = (total * i / OBJECTS, total * (i + 1) / OBJECTS);
            let bytes = if format == "jsonl" {
                let start = if from == 0 {
                    0
                } else {
                    line_ends[from - 1] + 1
                };
                lines[start..line_ends[to - 1] + 1].to_vec()
            } else {
                let all = arrow_select::concat::concat_batches(&schema, batches).expect("concat");
                encode(&[all.slice(from, to - from)])
                    .expect("encode")
                    .expect("rows")
            };
            let name = format!("payments-{i:04}.{format}");
            std::fs::write(local.join(&name), &bytes).expect("write");
            server.put(&format!("{format}/{name}"), &bytes);
        }
        let columns = weir_core::schema::arrow_schema(&columns());
        let local_time = timed(|| {
            let source = weir_connectors::files::FileSource::new(
                local.clone(),
                columns.clone(),
                OBJECTS,
                BATCH_ROWS,
                MalformedPolicy::Fail,
            )
            .expect("files source");
            assert_eq!(read_all(source), total);
        });
        let s3_time = timed(|| {
            let client = weir_connectors::s3::S3Client::open(
                &format!("s3://{}/{format}", s3::BUCKET),
                &server.settings(),
            )
            .expect("client");
            let decoder = JsonDecoder::new(columns.clone(), BATCH_ROWS, MalformedPolicy::Fail);
            let source = weir_connectors::s3::S3Source::new(client, decoder, OBJECTS);
            assert_eq!(read_all(source), total);
        });
        let rate = |t: Duration| format!("{:.0} rows/s", total as f64 / t.as_secs_f64());
        println!(
            "| {format} | {} | {} | {:.2}x |",
            rate(local_time),
            rate(s3_time),
            s3_time.as_secs_f64() / local_time.as_secs_f64()
        );
    }
}

/// Plans everything `source` has and reads it; the rows read.
fn read_all<S: Source>(mut source: S) -> usize {
    let range = source
        .plan(PlanLimit::Unbounded)
        .expect("plan")
        .expect("input");
    let input = source.read(&range).expect("read");
    input.rows() as usize
}

/// The positions of the newlines in `bytes`.
fn memchr_newlines(bytes: &[u8]) -> Vec<usize> {
    bytes
        .iter()
        .enumerate()
        .filter(|(_, &b)| b == b'\n')
        .map(|(i, _)| i)
        .collect()
}
