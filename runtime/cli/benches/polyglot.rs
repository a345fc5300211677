//! `cargo bench -p weir-runtime --bench polyglot`: the same fraud rules as
//! an operator in Rust, Python (componentize-py) and JavaScript
//! (componentize-js): component size, load time (compile with Cranelift,
//! and from the compile cache), instantiate + `init` per epoch, and
//! records/s of `process` on a 10,000-row batch of demo payments, with
//! ratios against Rust measured in the same run. The Python and JavaScript
//! components come from `scripts/build-polyglot.sh`.
//!
//! Then the stateful job end to end: the demo's velocity pipeline (the
//! rules plus "more than 5 payments on a card in 60 s of event time", each
//! card's recent payment times in RocksDB state; alerts to files, every
//! scored payment to Delta) over 2M payments, 10 epochs, one task, with
//! `fraud-velocity` in Rust and in Python (`fraud-velocity-py`, the SDK):
//! events/s, the operator phase per epoch, load from the compile cache and
//! instantiate + init, 3 runs each in alternation (ratios are medians of
//! the pairs' ratios), and a check that both wrote the same alerts.
//! `BENCH_BASELINE_PY_VELOCITY=<component>` adds another build of
//! `fraud-velocity-py` (say, the previous commit's) to the same run. `BENCH_JOB_PAYMENTS` sets the input's size,
//! `BENCH_JOB=0` skips it.

use arrow_array::RecordBatch;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use weir_cli::demo::{DemoOperator, DemoOptions};
use weir_engine::config::PipelineConfig;
use weir_host::{EpochEnv, Grants, Limits, WasmHost};

const ROWS: u64 = 10_000;
const RUNS: usize = 15;

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn batch() -> RecordBatch {
    let cfg = PipelineConfig::parse(
        &format!(
            "name = \"b\"\ncheckpoint = \"c\"\n[source]\nkind = \"files\"\npath = \"i\"\n{}\n[operator]\npath = \"x.wasm\"\n[sink]\nkind = \"console\"\n",
            weir_connectors::generator::payments::SCHEMA_TOML
        ),
        Path::new("."),
    )
    .unwrap();
    let schema = cfg.source.schema().unwrap();
    let bytes = weir_connectors::generator::payments::json_lines(7, 0, ROWS);
    let decoder = weir_core::json::JsonDecoder::new(
        schema,
        ROWS as usize,
        weir_engine::config::MalformedPolicy::Fail,
    );
    let mut decoded = decoder.decode_lines(&bytes, "bench").unwrap();
    decoded.batches.remove(0)
}

/// An operator's `[operator.config]` table as the JSON `init` gets.
fn config_json(table: &str) -> String {
    let toml = table.replace("[operator.config]", "");
    let value: toml::Value = toml::from_str(&toml).unwrap();
    serde_json::to_string(&value).unwrap()
}

struct Row {
    language: &'static str,
    size: usize,
    compile: Duration,
    cached: Duration,
    instantiate: Duration,
    process: Duration,
}

fn measure(language: &'static str, path: &Path, batch: &RecordBatch, config: &str) -> Row {
    let wasm = std::fs::read(path).unwrap();
    let host = WasmHost::new(None).unwrap();
    let t = Instant::now();
    let operator = host.load(&wasm, Grants::default()).unwrap();
    let compile = t.elapsed();
    let cache = tempfile::tempdir().unwrap();
    WasmHost::new(Some(cache.path().to_path_buf()))
        .unwrap()
        .load(&wasm, Grants::default())
        .unwrap();
    let cached_host = WasmHost::new(Some(cache.path().to_path_buf())).unwrap();
    let t = Instant::now();
    cached_host.load(&wasm, Grants::default()).unwrap();
    let cached = t.elapsed();
    let (mut inits, mut runs) = (Vec::new(), Vec::new());
    for _ in 0..RUNS {
        let t = Instant::now();
        let mut instance = operator
            .instantiate("bench", 0, Limits::default(), config, EpochEnv::default())
            .unwrap();
        inits.push(t.elapsed());
        let t = Instant::now();
        let out = instance.process("bench", 0, 0, batch.clone()).unwrap();
        runs.push(t.elapsed());
        assert!(out.iter().map(|b| b.num_rows()).sum::<usize>() > 0);
    }
    Row {
        language,
        size: wasm.len(),
        compile,
        cached,
        instantiate: median(inits),
        process: median(runs),
    }
}

/// One end-to-end run of the job.
struct JobRun {
    wall: Duration,
    rows: u64,
    epochs: u64,
    operator: Duration,
    /// The alerts, sorted, as the sink wrote them.
    alerts: Vec<String>,
}

/// Runs the demo pipeline in `dir` with the operator at `component`, in a
/// checkpoint and sink of its own (`own`).
fn run_job(dir: &Path, component: &Path, own: &str, host: &WasmHost) -> JobRun {
    let text = std::fs::read_to_string(dir.join("pipeline.toml"))
        .unwrap()
        .replace(
            &format!("path = \"{}\"", DemoOperator::Velocity.file()),
            &format!("path = \"{}\"", component.display()),
        )
        .replace(
            "checkpoint = \"checkpoint\"",
            &format!("checkpoint = \"checkpoint-{own}\""),
        )
        .replace("path = \"alerts\"", &format!("path = \"alerts-{own}\""))
        .replace("path = \"lake/scores\"", &format!("path = \"lake-{own}\""));
    let cfg = PipelineConfig::parse(&text, dir).unwrap();
    let opts = weir_engine::OpenOptions {
        ephemeral_checkpoint_ok: true,
        ..Default::default()
    };
    let wall = Instant::now();
    let mut pipeline = weir_engine::open(&cfg, host, opts).unwrap();
    let stop = std::sync::atomic::AtomicBool::new(false);
    let (mut operator, mut epochs) = (Duration::ZERO, 0);
    let summary = pipeline
        .run(host, &stop, &mut |p| {
            operator += p.phases.operator;
            epochs += 1;
        })
        .unwrap();
    let wall = wall.elapsed();
    let mut alerts: Vec<String> = std::fs::read_dir(dir.join(format!("alerts-{own}")))
        .unwrap()
        .flat_map(|f| {
            let text = std::fs::read_to_string(f.unwrap().path()).unwrap();
            text.lines().map(str::to_string).collect::<Vec<_>>()
        })
        .collect();
    alerts.sort();
    JobRun {
        wall,
        rows: summary.rows_in,
        epochs,
        operator,
        alerts,
    }
}

/// Load from the compile cache and instantiate + init of the velocity
/// component, medians.
fn job_load_and_init(component: &Path, cache: &Path) -> (Duration, Duration) {
    let wasm = std::fs::read(component).unwrap();
    let config = config_json(&DemoOperator::Velocity.config_toml());
    let (mut loads, mut inits) = (Vec::new(), Vec::new());
    for _ in 0..5 {
        let host = WasmHost::new(Some(cache.to_path_buf())).unwrap();
        let t = Instant::now();
        let operator = host.load(&wasm, Grants::default()).unwrap();
        loads.push(t.elapsed());
        let t = Instant::now();
        operator
            .instantiate("bench", 0, Limits::default(), &config, EpochEnv::default())
            .unwrap();
        inits.push(t.elapsed());
    }
    (median(loads), median(inits))
}

/// The stateful job in Rust and Python, end to end.
fn job_table(polyglot: &Path) {
    if std::env::var("BENCH_JOB").is_ok_and(|v| v == "0") {
        return;
    }
    let python = polyglot.join("fraud_velocity_py.wasm");
    if !python.exists() {
        eprintln!(
            "{} missing: run scripts/build-polyglot.sh",
            python.display()
        );
        return;
    }
    let payments: u64 = std::env::var("BENCH_JOB_PAYMENTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2_000_000);
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path();
    let opts = DemoOptions {
        payments,
        operator: DemoOperator::Velocity,
        ..Default::default()
    };
    weir_cli::demo::prepare(dir, &opts).unwrap();
    let cache = dir.join("cache");
    let host = WasmHost::new(Some(cache.clone())).unwrap();
    let mut jobs = vec![
        (
            "Rust",
            Path::new(weir_cli::GUEST_DIR).join("fraud_velocity.wasm"),
        ),
        ("Python", python),
    ];
    if let Some(baseline) = std::env::var_os("BENCH_BASELINE_PY_VELOCITY") {
        jobs.push(("Python, baseline build", PathBuf::from(baseline)));
    }
    // The builds alternate, so a shift of the machine's speed moves them
    // all; each ratio is the median of the runs' pairwise ratios.
    let inits: Vec<(Duration, Duration)> = jobs
        .iter()
        .map(|(_, component)| job_load_and_init(component, &cache))
        .collect();
    let mut runs: Vec<Vec<JobRun>> = jobs.iter().map(|_| Vec::new()).collect();
    for i in 0..3 {
        for (j, (language, component)) in jobs.iter().enumerate() {
            let run = run_job(dir, component, &format!("{language}-{i}"), &host);
            assert_eq!(run.rows, payments, "every payment read");
            runs[j].push(run);
        }
    }
    let per_epoch = |r: &JobRun| r.operator.as_secs_f64() / r.epochs.max(1) as f64;
    let median_of = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    println!(
        "\nthe stateful velocity job end to end, {payments} payments, {} epochs, one task, \
         the builds alternating, medians of 3 runs (ratios: of the runs' pairwise ratios)\n",
        runs[0][0].epochs
    );
    println!("| language | events/s | time vs Rust | operator phase per epoch | vs Rust | load (cached) | instantiate + init | alerts |");
    println!("|---|---|---|---|---|---|---|---|");
    for (j, (language, _)) in jobs.iter().enumerate() {
        let pairs = runs[0].iter().zip(&runs[j]);
        let wall_ratio = median_of(
            pairs
                .clone()
                .map(|(r, o)| o.wall.as_secs_f64() / r.wall.as_secs_f64())
                .collect(),
        );
        let operator_ratio = median_of(pairs.map(|(r, o)| per_epoch(o) / per_epoch(r)).collect());
        let rate = median_of(
            runs[j]
                .iter()
                .map(|r| r.rows as f64 / r.wall.as_secs_f64())
                .collect(),
        );
        let operator = median_of(runs[j].iter().map(per_epoch).collect());
        let same = runs[j].iter().all(|r| r.alerts == runs[0][0].alerts);
        let (load, init) = inits[j];
        println!(
            "| {language} | {rate:.0} | {wall_ratio:.2}x | {:.0} ms | {operator_ratio:.2}x | {:.0} ms | {:.2} ms | {} {} |",
            operator * 1e3,
            load.as_secs_f64() * 1e3,
            init.as_secs_f64() * 1e3,
            runs[j][0].alerts.len(),
            if same { "(= Rust)" } else { "(DIFFER from Rust)" },
        );
    }
}

fn main() {
    let batch = batch();
    let config = config_json(weir_cli::demo::RULES_TOML);
    let polyglot = Path::new(weir_cli::GUEST_DIR).join("../../polyglot");
    let mut candidates: Vec<(&str, PathBuf)> = vec![(
        "Rust",
        Path::new(weir_cli::GUEST_DIR).join("fraud_rules.wasm"),
    )];
    for (language, file) in [
        ("Python", "fraud_rules_py.wasm"),
        ("JavaScript", "fraud_rules_js.wasm"),
    ] {
        let path = polyglot.join(file);
        if path.exists() {
            candidates.push((language, path));
        } else {
            eprintln!(
                "{} missing: run scripts/install-polyglot.sh and scripts/build-polyglot.sh",
                path.display()
            );
        }
    }
    let rows: Vec<Row> = candidates
        .iter()
        .map(|(language, path)| measure(language, path, &batch, &config))
        .collect();
    let rust = rows[0].process.as_secs_f64();
    println!(
        "\nfraud rules as a Wasm operator, one 10,000-row batch of demo payments, median of {RUNS}\n"
    );
    println!("| language | component | compile (load, no cache) | load from cache | instantiate + init | process 10k rows | records/s | time vs Rust |");
    println!("|---|---|---|---|---|---|---|---|");
    for r in &rows {
        let secs = r.process.as_secs_f64();
        println!(
            "| {} | {:.1} MB | {:.2} s | {:.1} ms | {:.2} ms | {:.2} ms | {:.0} | {:.1}x |",
            r.language,
            r.size as f64 / 1e6,
            r.compile.as_secs_f64(),
            r.cached.as_secs_f64() * 1e3,
            r.instantiate.as_secs_f64() * 1e3,
            secs * 1e3,
            ROWS as f64 / secs,
            secs / rust
        );
    }
    job_table(&polyglot);
}
