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
//! absolute times on shared machines are noise. Native and Wasm calls are
//! timed in alternation and the ratio is the median of each pair's, so a
//! shift of the machine's speed during the run moves both sides alike.
//!
//! `BENCH_BASELINE_WASM=<component>` also times another build of
//! `fraud-rules` (say, the previous commit's `target/guests/.../
//! fraud_rules.wasm`) in the same run: a before/after of a guest or SDK
//! change. `BENCH_PROCESS_ONLY=1` stops after table 1 (for profiling:
//! `WEIR_WASM_PERFMAP=1 perf record ...` names the guest's functions).

use arrow_array::builder::{Float64Builder, Int64Builder, StringBuilder};
use arrow_array::{Array, Float64Array, Int64Array, RecordBatch, StringArray};
use fraud_common::rules::{Amount, Hit, Payments, RuleSet};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};
use weir_cli::demo::{self, DemoOperator, DemoOptions};
use weir_connectors::generator::payments as generator;
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
    fn amount(&self, row: usize) -> Option<Amount> {
        self.amount
            .is_valid(row)
            .then(|| Amount::Float(self.amount.value(row)))
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
        o_amount.append_option(p.amount.is_valid(h.row).then(|| p.amount.value(h.row)));
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

/// Times `a` and `b` in alternation: their medians and the median of the
/// per-pair ratio `b / a`.
fn time_pair<A, B>(
    iters: usize,
    mut a: impl FnMut() -> A,
    mut b: impl FnMut() -> B,
) -> (Duration, Duration, f64) {
    for _ in 0..iters / 10 + 1 {
        std::hint::black_box(a());
        std::hint::black_box(b());
    }
    let pairs: Vec<(Duration, Duration)> = (0..iters)
        .map(|_| {
            let t = Instant::now();
            std::hint::black_box(a());
            let ta = t.elapsed();
            let t = Instant::now();
            std::hint::black_box(b());
            (ta, t.elapsed())
        })
        .collect();
    let mut ratios: Vec<f64> = pairs
        .iter()
        .map(|(a, b)| b.as_secs_f64() / a.as_secs_f64().max(1e-9))
        .collect();
    ratios.sort_by(f64::total_cmp);
    let ratio = ratios[ratios.len() / 2];
    (
        median(pairs.iter().map(|p| p.0).collect()),
        median(pairs.iter().map(|p| p.1).collect()),
        ratio,
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
        ..Default::default()
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

fn per_row(d: Duration, rows: u64) -> String {
    format!("{:.1} ns/row", d.as_nanos() as f64 / rows as f64)
}

/// Table 1: `process` native against Wasm, per call at each batch size,
/// and against a baseline build when one was given.
fn print_process_table(
    alerts: usize,
    (native, wasm, ratio, fresh): (Duration, Duration, f64, Duration),
    per_call: &[(usize, Duration, Duration, f64)],
    baseline: Option<&(String, f64, f64)>,
) {
    println!("\nweir benchmarks ({ROWS}-row batches, {alerts} alerts per batch)\n");
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
        format!("{ratio:.2}x"),
        "target <= 1.3x; median of paired calls",
    );
    row(
        "Wasm+instantiate / native ratio",
        format!("{:.2}x", fresh.as_secs_f64() / native.as_secs_f64()),
        "what each epoch pays",
    );
    for (n, native, wasm, ratio) in per_call {
        row(
            &format!("process on {n} rows: native / Wasm per call"),
            format!("{native:.2?} / {wasm:.2?}"),
            &format!(
                "{ratio:.2}x; Wasm {:.0} ns/row",
                wasm.as_nanos() as f64 / *n as f64
            ),
        );
    }
    if let Some((path, before_ratio, after_over_before)) = baseline {
        row(
            "baseline build: Wasm / native ratio",
            format!("{before_ratio:.2}x"),
            path,
        );
        row(
            "this build / baseline build (Wasm)",
            format!("{after_over_before:.2}x"),
            "below 1.0x = this build is faster",
        );
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
    // The native baseline reads float amounts: the pipeline with the
    // stream's untyped schema (the demo's own declares decimals).
    let text = std::fs::read_to_string(&pipeline_file)
        .unwrap()
        .replace(generator::TYPED_SCHEMA_TOML, generator::SCHEMA_TOML);
    std::fs::write(&pipeline_file, text).unwrap();
    let cfg = PipelineConfig::load(&pipeline_file).unwrap();
    let schema = cfg.source.schema().unwrap();
    let rules_json =
        std::env::var("BENCH_RULES").unwrap_or_else(|_| cfg.operator.config_json.clone());
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

    let host = WasmHost::new(None).unwrap();
    let limits = Limits::default();
    let instantiate = |wasm: &[u8]| {
        let loaded = host.load(wasm, Default::default()).unwrap();
        let instance = loaded
            .instantiate("bench", 0, limits, &rules_json, Default::default())
            .unwrap();
        (loaded, instance)
    };
    let (loaded, mut instance) = instantiate(weir_cli::FRAUD_RULES_WASM);
    let wasm_process = |instance: &mut weir_host::OperatorInstance, part: &RecordBatch| {
        instance
            .process("bench", 0, 0, part.clone())
            .unwrap()
            .iter()
            .map(RecordBatch::num_rows)
            .sum::<usize>()
    };
    assert_eq!(
        wasm_process(&mut instance, &batch),
        native_alerts,
        "both sides find the same alerts"
    );
    let (native, wasm, ratio) = time_pair(
        300,
        || native_process(&rules, &batch, &mut hits),
        || wasm_process(&mut instance, &batch),
    );
    let baseline = std::env::var("BENCH_BASELINE_WASM").ok().map(|path| {
        let bytes = std::fs::read(&path).expect("BENCH_BASELINE_WASM: a readable component");
        let (_, mut before) = instantiate(&bytes);
        let (_, _, before_ratio) = time_pair(
            300,
            || native_process(&rules, &batch, &mut hits),
            || wasm_process(&mut before, &batch),
        );
        let (_, _, after_over_before) = time_pair(
            300,
            || wasm_process(&mut before, &batch),
            || wasm_process(&mut instance, &batch),
        );
        (path, before_ratio, after_over_before)
    });
    let fresh = time(100, || {
        let mut i = loaded
            .instantiate("bench", 0, limits, &rules_json, Default::default())
            .unwrap();
        wasm_process(&mut i, &batch)
    });

    // 1b. The per-call cost at small batches (real-time mode's parts).
    let per_call: Vec<(usize, Duration, Duration, f64)> = [1usize, 10, 100, ROWS as usize]
        .into_iter()
        .map(|n| {
            let part = batch.slice(0, n);
            let iters = if n < 1000 { 3000 } else { 300 };
            let (native, wasm, ratio) = time_pair(
                iters,
                || native_process(&rules, &part, &mut hits),
                || wasm_process(&mut instance, &part),
            );
            (n, native, wasm, ratio)
        })
        .collect();
    let process_table = || {
        print_process_table(
            native_alerts,
            (native, wasm, ratio, fresh),
            &per_call,
            baseline.as_ref(),
        )
    };
    if std::env::var_os("BENCH_PROCESS_ONLY").is_some() {
        process_table();
        return;
    }

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

    process_table();
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
