//! `cargo bench -p weir-runtime --bench polyglot`: the same fraud rules as
//! an operator in Rust, Python (componentize-py) and JavaScript
//! (componentize-js): component size, load time (compile with Cranelift,
//! and from the compile cache), instantiate + `init` per epoch, and
//! records/s of `process` on a 10,000-row batch of demo payments, with
//! ratios against Rust measured in the same run. The Python and JavaScript
//! components come from `scripts/build-polyglot.sh`.

use arrow_array::RecordBatch;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use weir_host::{EpochEnv, Grants, Limits, WasmHost};

const ROWS: u64 = 10_000;
const RUNS: usize = 15;

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn batch() -> RecordBatch {
    let cfg = weir_engine::config::PipelineConfig::parse(
        &format!(
            "name = \"b\"\ncheckpoint = \"c\"\n[source]\nkind = \"files\"\npath = \"i\"\n{}\n[operator]\npath = \"x.wasm\"\n[sink]\nkind = \"console\"\n",
            weir_cli::demo::generator::SCHEMA_TOML
        ),
        Path::new("."),
    )
    .unwrap();
    let schema = cfg.source.schema().unwrap();
    let bytes = weir_cli::demo::generator::json_lines(7, 0, ROWS);
    let decoder = weir_core::json::JsonDecoder::new(
        schema,
        ROWS as usize,
        weir_engine::config::MalformedPolicy::Fail,
    );
    let mut decoded = decoder.decode_lines(&bytes, "bench").unwrap();
    decoded.batches.remove(0)
}

fn config() -> String {
    let toml = weir_cli::demo::RULES_TOML.replace("[operator.config]", "");
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

fn main() {
    let batch = batch();
    let config = config();
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
}
