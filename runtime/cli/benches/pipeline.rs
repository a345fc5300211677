//! `cargo bench -p weir-runtime`: prints a table of
//!
//! 1. `process` on a 10,000-row batch: the `fraud-rules` logic compiled
//!    natively over Arrow arrays vs the same crate as a Wasm component behind
//!    the operator host (columns copied in, output validated back out), and
//!    the cost of one call at 1, 10, 100 and 10k rows (real-time mode runs
//!    on small parts);
//! 2. the demo pipeline end to end (file source → WAL → operator → file sink
//!    → commit), against parsing the same input alone in the same run;
//! 3. parallel tasks: the demo input (200k payments) and a 2M-payment
//!    input through `fraud-rules` and `fraud-velocity` at `parallelism` 1,
//!    2 and 4, routed by `card_id`: events/s, the speed-up over one task
//!    and the cores kept busy (process CPU time over wall time), the median
//!    of three runs, with the epochs' shares of reading and of the operator.
//!    `BENCH_PARALLEL=0` skips it; `BENCH_PARALLEL_PAYMENTS` sets the
//!    larger input's size.
//!
//! Figures are medians; ratios compare runs made in this process, since
//! absolute times on shared machines are noise.

use arrow_array::builder::{Float64Builder, Int64Builder, StringBuilder};
use arrow_array::{Array, Float64Array, Int64Array, RecordBatch, StringArray};
use fraud_rules::rules::{Hit, Payments, RuleSet};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};
use weir_cli::demo::{self, generator, DemoOperator, DemoOptions};
use weir_engine::config::PipelineConfig;
use weir_host::{Limits, WasmHost};

const ROWS: u64 = 10_000;

fn col<'a, T: 'static>(batch: &'a RecordBatch, name: &str) -> &'a T {
    batch
        .column_by_name(name)
        .and_then(|c| c.as_any().downcast_ref::<T>())
        .expect("demo schema column")
}

/// The native baseline: the operator's own rule code over Arrow arrays.
struct ArrowPayments<'a> {
    amount: &'a Float64Array,
    currency: &'a StringArray,
    country: &'a StringArray,
    card_country: &'a StringArray,
    merchant_id: &'a StringArray,
}

fn opt_str(a: &StringArray, row: usize) -> Option<&str> {
    a.is_valid(row).then(|| a.value(row))
}

fn opt_bytes(a: &StringArray, row: usize) -> Option<&[u8]> {
    a.is_valid(row).then(|| a.value(row).as_bytes())
}

impl Payments for ArrowPayments<'_> {
    fn len(&self) -> usize {
        self.amount.len()
    }
    fn amount(&self, row: usize) -> Option<f64> {
        self.amount.is_valid(row).then(|| self.amount.value(row))
    }
    fn currency(&self, row: usize) -> Option<&[u8]> {
        opt_bytes(self.currency, row)
    }
    fn country(&self, row: usize) -> Option<&[u8]> {
        opt_bytes(self.country, row)
    }
    fn card_country(&self, row: usize) -> Option<&[u8]> {
        opt_bytes(self.card_country, row)
    }
    fn merchant_id(&self, row: usize) -> Option<&[u8]> {
        opt_bytes(self.merchant_id, row)
    }
}

/// What the guest does, natively: score, then build the same output columns.
fn native_process(rules: &RuleSet, batch: &RecordBatch, hits: &mut Vec<Hit>) -> usize {
    let p = ArrowPayments {
        amount: col(batch, "amount"),
        currency: col(batch, "currency"),
        country: col(batch, "country"),
        card_country: col(batch, "card_country"),
        merchant_id: col(batch, "merchant_id"),
    };
    hits.clear();
    rules.score_all(&p, hits);
    let (txn, card) = (
        col::<StringArray>(batch, "txn_id"),
        col::<StringArray>(batch, "card_id"),
    );
    let ts = col::<Int64Array>(batch, "ts");
    let (mut o_txn, mut o_card, mut o_reasons) = (
        StringBuilder::new(),
        StringBuilder::new(),
        StringBuilder::new(),
    );
    let (mut o_amount, mut o_score, mut o_ts) = (
        Float64Builder::new(),
        Float64Builder::new(),
        Int64Builder::new(),
    );
    for h in hits.iter() {
        o_txn.append_option(opt_str(txn, h.row));
        o_card.append_option(opt_str(card, h.row));
        o_amount.append_option(p.amount(h.row));
        o_score.append_value(h.score);
        o_reasons.append_value(rules.reasons(h.fired));
        o_ts.append_option(ts.is_valid(h.row).then(|| ts.value(h.row)));
    }
    let arrays: Vec<Arc<dyn Array>> = vec![
        Arc::new(o_txn.finish()),
        Arc::new(o_card.finish()),
        Arc::new(o_amount.finish()),
        Arc::new(o_score.finish()),
        Arc::new(o_reasons.finish()),
        Arc::new(o_ts.finish()),
    ];
    arrays[0].len()
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn time<T>(iters: usize, mut f: impl FnMut() -> T) -> Duration {
    for _ in 0..iters / 10 + 1 {
        std::hint::black_box(f());
    }
    median(
        (0..iters)
            .map(|_| {
                let t = Instant::now();
                std::hint::black_box(f());
                t.elapsed()
            })
            .collect(),
    )
}

fn decode(schema: arrow_schema::SchemaRef, bytes: &[u8], rows: usize) -> Vec<RecordBatch> {
    let mut d = arrow_json::ReaderBuilder::new(schema)
        .with_batch_size(rows)
        .build_decoder()
        .unwrap();
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < bytes.len() {
        let n = d.decode(&bytes[pos..]).unwrap();
        pos += n;
        if n == 0 || pos == bytes.len() {
            out.extend(d.flush().unwrap());
        }
    }
    out
}

/// User plus system CPU time of this process so far.
fn cpu_time() -> Duration {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage fills the struct it is given; RUSAGE_SELF is valid.
    #[allow(unsafe_code)]
    let usage = unsafe {
        libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr());
        usage.assume_init()
    };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1_000);
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

/// What one run at some task count measured.
struct ParallelRun {
    rows: u64,
    wall: Duration,
    /// Process CPU time over wall time.
    busy: f64,
    /// Shares of the epochs' time: reading and decoding, the operator.
    read_share: f64,
    operator_share: f64,
}

/// One run of a prepared demo directory's pipeline at `tasks` tasks, in a
/// checkpoint and sink of its own.
fn run_at(dir: &Path, host: &WasmHost, tasks: u16, attempt: usize) -> ParallelRun {
    let text = std::fs::read_to_string(dir.join("pipeline.toml")).unwrap();
    let own = format!("{tasks}-{attempt}");
    let text = format!("parallelism = {tasks}\n{text}")
        .replace(
            "checkpoint = \"checkpoint\"",
            &format!("checkpoint = \"checkpoint-{own}\""),
        )
        .replace("path = \"alerts\"", &format!("path = \"alerts-{own}\""));
    let cfg = PipelineConfig::parse(&text, dir).unwrap();
    let opts = weir_engine::OpenOptions {
        ephemeral_checkpoint_ok: true,
    };
    let mut pipeline = weir_engine::open(&cfg, host, opts).unwrap();
    let (cpu, wall) = (cpu_time(), Instant::now());
    let stop = std::sync::atomic::AtomicBool::new(false);
    let (mut read, mut operator, mut total) = (Duration::ZERO, Duration::ZERO, Duration::ZERO);
    let summary = pipeline
        .run(host, &stop, &mut |p| {
            read += p.phases.read;
            operator += p.phases.operator;
            total += p.total;
        })
        .unwrap();
    let (wall, cpu) = (wall.elapsed(), cpu_time() - cpu);
    let share = |d: Duration| d.as_secs_f64() / total.as_secs_f64();
    ParallelRun {
        rows: summary.rows_in,
        wall,
        busy: cpu.as_secs_f64() / wall.as_secs_f64(),
        read_share: share(read),
        operator_share: share(operator),
    }
}

/// The median of three runs by wall time (the first run of a fresh input
/// also pays for the page cache).
fn median_run(dir: &Path, host: &WasmHost, tasks: u16) -> ParallelRun {
    let mut runs: Vec<ParallelRun> = (0..3).map(|a| run_at(dir, host, tasks, a)).collect();
    runs.sort_by_key(|r| r.wall);
    runs.swap_remove(1)
}

/// Section 3: every (input, operator) at 1, 2 and 4 tasks.
fn parallel_table(scratch: &Path, host: &WasmHost) {
    if std::env::var("BENCH_PARALLEL").is_ok_and(|v| v == "0") {
        return;
    }
    let large: u64 = std::env::var("BENCH_PARALLEL_PAYMENTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2_000_000);
    println!(
        "\nparallel tasks (`key = \"card_id\"`; files decoded on every core at every task \
         count; median of 3 runs)\n"
    );
    println!(
        "| input | operator | tasks | events/s | vs 1 task | cores busy | read share | operator share |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for (input, payments) in [("demo 200k", 200_000u64), ("2M", large)] {
        for operator in [DemoOperator::Rules, DemoOperator::Velocity] {
            let dir = scratch.join(format!("par-{payments}-{operator:?}"));
            std::fs::create_dir_all(&dir).unwrap();
            let opts = DemoOptions {
                payments,
                operator,
                ..Default::default()
            };
            demo::prepare(&dir, &opts).unwrap();
            let mut one = None;
            for tasks in [1u16, 2, 4] {
                let run = median_run(&dir, host, tasks);
                assert_eq!(run.rows, payments, "every payment read");
                let rate = run.rows as f64 / run.wall.as_secs_f64();
                let base = *one.get_or_insert(rate);
                let name = format!("{operator:?}").to_lowercase();
                println!(
                    "| {input} | {name} | {tasks} | {rate:.0} | {:.2}x | {:.2} | {:.0}% | {:.0}% |",
                    rate / base,
                    run.busy,
                    run.read_share * 100.0,
                    run.operator_share * 100.0
                );
            }
            std::fs::remove_dir_all(&dir).ok();
        }
    }
}

fn row(name: &str, value: String, note: &str) {
    println!("| {name:<44} | {value:>16} | {note}");
}

fn main() {
    let scratch = tempfile::tempdir().unwrap();
    let pipeline_file = demo::prepare(
        scratch.path(),
        &DemoOptions {
            payments: 1,
            files: 1,
            operator: DemoOperator::Rules,
            ..Default::default()
        },
    )
    .unwrap();
    let cfg = PipelineConfig::load(&pipeline_file).unwrap();
    let schema = cfg.source.schema().unwrap();
    let rules_json =
        std::env::var("BENCH_RULES").unwrap_or_else(|_| cfg.operator_config_json().unwrap());
    let batch = decode(
        schema.clone(),
        &generator::json_lines(1, 0, ROWS),
        ROWS as usize,
    )
    .remove(0);
    assert_eq!(batch.num_rows(), ROWS as usize);

    // 1. process() on 10k rows.
    let rules = RuleSet::from_json(&rules_json).unwrap();
    let mut hits = Vec::new();
    let native_alerts = native_process(&rules, &batch, &mut hits);
    let native = time(300, || native_process(&rules, &batch, &mut hits));

    let host = WasmHost::new(None).unwrap();
    let loaded = host
        .load(weir_cli::FRAUD_RULES_WASM, Default::default())
        .unwrap();
    let limits = Limits::default();
    let mut instance = loaded
        .instantiate("bench", 0, limits, &rules_json, Default::default())
        .unwrap();
    let wasm_alerts = instance
        .process("bench", 0, 0, batch.clone())
        .unwrap()
        .num_rows();
    assert_eq!(
        wasm_alerts, native_alerts,
        "both sides find the same alerts"
    );
    let wasm = time(300, || {
        instance
            .process("bench", 0, 0, batch.clone())
            .unwrap()
            .num_rows()
    });
    let fresh = time(100, || {
        let mut i = loaded
            .instantiate("bench", 0, limits, &rules_json, Default::default())
            .unwrap();
        i.process("bench", 0, 0, batch.clone()).unwrap().num_rows()
    });

    // 1b. The per-call cost at small batches (real-time mode's parts).
    let per_call: Vec<(usize, Duration, Duration)> = [1usize, 10, 100, ROWS as usize]
        .into_iter()
        .map(|n| {
            let part = batch.slice(0, n);
            let iters = if n < 1000 { 3000 } else { 300 };
            let native = time(iters, || native_process(&rules, &part, &mut hits));
            let wasm = time(iters, || {
                instance
                    .process("bench", 0, 0, part.clone())
                    .unwrap()
                    .num_rows()
            });
            (n, native, wasm)
        })
        .collect();

    // 2. The demo pipeline end to end, and parsing alone as its baseline.
    let payments = 200_000u64;
    let run_demo = |operator: DemoOperator| {
        let dir = scratch.path().join(format!("e2e-{operator:?}"));
        let opts = DemoOptions {
            dir: Some(dir.clone()),
            payments,
            operator,
            ..DemoOptions::default()
        };
        (demo::run(&opts, &mut |_| {}).unwrap(), dir, opts)
    };
    let (velocity_report, _, _) = run_demo(DemoOperator::Velocity);
    let (report, dir, opts) = run_demo(DemoOperator::Rules);
    let e2e = report.elapsed;
    let e2e_velocity = velocity_report.elapsed;
    let mut input = Vec::new();
    for f in 0..opts.files {
        input.extend(std::fs::read(dir.join(format!("input/payments-{f:04}.jsonl"))).unwrap());
    }
    let parse = time(5, || decode(schema.clone(), &input, 10_000).len());
    // The file source's own decode: one record per line, numbers exact.
    let decoder = weir_core::json::JsonDecoder::new(
        schema.clone(),
        10_000,
        weir_engine::config::MalformedPolicy::Fail,
    );
    let source_decode = time(5, || {
        let records = weir_core::json::non_blank_lines(&input);
        decoder
            .decode_records(&input, records, || weir_core::json::lines(&input, "bench"))
            .unwrap()
            .batches
            .len()
    });

    let per_row =
        |d: Duration, rows: u64| format!("{:.1} ns/row", d.as_nanos() as f64 / rows as f64);
    println!(
        "\nweir benchmarks ({ROWS}-row batches, {} alerts per batch)\n",
        native_alerts
    );
    println!("| {:<44} | {:>16} | note", "measure", "value");
    println!("|{}|{}|------", "-".repeat(46), "-".repeat(18));
    row(
        "process, native (same crate, Arrow arrays)",
        format!("{native:.2?}"),
        &per_row(native, ROWS),
    );
    row(
        "process, Wasm (columns in + output validated)",
        format!("{wasm:.2?}"),
        &per_row(wasm, ROWS),
    );
    row(
        "process, Wasm incl. fresh instance + init",
        format!("{fresh:.2?}"),
        &per_row(fresh, ROWS),
    );
    row(
        "Wasm / native ratio",
        format!("{:.2}x", wasm.as_secs_f64() / native.as_secs_f64()),
        "target <= 1.3x",
    );
    row(
        "Wasm+instantiate / native ratio",
        format!("{:.2}x", fresh.as_secs_f64() / native.as_secs_f64()),
        "what each epoch pays",
    );
    for (n, native, wasm) in &per_call {
        row(
            &format!("process on {n} rows: native / Wasm per call"),
            format!("{native:.2?} / {wasm:.2?}"),
            &format!(
                "{:.2}x; Wasm {:.0} ns/row",
                wasm.as_secs_f64() / native.as_secs_f64(),
                wasm.as_nanos() as f64 / *n as f64
            ),
        );
    }
    let rate = |rows: u64, d: Duration| rows as f64 / d.as_secs_f64();
    row(
        "demo pipeline end to end (fraud-rules)",
        format!("{:.0} rec/s", rate(report.rows_in, e2e)),
        &format!("{} payments, {} epochs", report.rows_in, report.epochs),
    );
    row(
        "demo pipeline end to end (fraud-velocity)",
        format!("{:.0} rec/s", rate(velocity_report.rows_in, e2e_velocity)),
        &format!(
            "{:.2}x the fraud-rules time; keyed state per card",
            e2e_velocity.as_secs_f64() / e2e.as_secs_f64()
        ),
    );
    row(
        "JSON parse alone (baseline)",
        format!("{:.0} rec/s", rate(payments, parse)),
        "arrow-json, same input",
    );
    row(
        "source decode / plain arrow-json",
        format!("{:.2}x", source_decode.as_secs_f64() / parse.as_secs_f64()),
        "records per line counted, numbers checked exact",
    );
    row(
        "end to end / parse-alone time",
        format!("{:.2}x", e2e.as_secs_f64() / parse.as_secs_f64()),
        "1.0x = runtime adds nothing",
    );
    parallel_table(scratch.path(), &host);
}
