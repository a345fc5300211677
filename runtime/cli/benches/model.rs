//! `cargo bench -p weir-cli --bench model`: what enrichment and a model
//! cost, each against a baseline measured in the same run.
//!
//! 1. The fraud model (`fraud-model`, tract) inside the component vs the
//!    same library natively, scoring 10k and 100k rows of features.
//! 2. A reference table read through `weir:operator/lookup` (one batched
//!    call per batch) vs the same table in the operator's config
//!    (`card-home` both ways; it is built by the tests: run them first).
//! 3. End to end: `weir demo` payments/s with `fraud-model` vs
//!    `fraud-velocity`.

use arrow_array::{ArrayRef, Float64Array, RecordBatch};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};
use weir_cli::demo::{self, DemoOperator, DemoOptions};
use weir_connectors::generator::payments as generator;
use weir_host::{EpochEnv, Grants, Limits, WasmHost};

const RUNS: usize = 7;

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// `rows` feature rows of the demo's payments, as the model sees them.
fn features(rows: usize) -> Vec<f32> {
    let cards: std::collections::HashMap<String, generator::Card> = (0..generator::CARDS)
        .map(|c| {
            let card = generator::card(c);
            (card.card_id.clone(), card)
        })
        .collect();
    let risky: Vec<String> = generator::BAD_MERCHANTS
        .iter()
        .map(|m| m.to_string())
        .collect();
    (0..rows as u64)
        .flat_map(|i| {
            let (p, _) = generator::payment(7, i);
            let card = &cards[&p.card_id];
            fraud_model::features::row(
                &fraud_model::features::Payment {
                    amount: p.amount,
                    country: &p.country,
                    merchant_id: &p.merchant_id,
                    device_id: p.device_id.as_deref(),
                },
                &fraud_model::features::CardFacts {
                    home_country: Some(&card.home_country),
                    devices: Some(&card.devices),
                    payments_in_window: 1,
                },
                &risky,
            )
        })
        .collect()
}

/// The features as the batch of `f_<name>` columns the component scores
/// as they are.
fn feature_batch(rows: &[f32]) -> RecordBatch {
    let width = fraud_model::features::WIDTH;
    let columns: Vec<(String, ArrayRef)> = fraud_model::features::NAMES
        .iter()
        .enumerate()
        .map(|(f, name)| {
            let values: Float64Array = rows.chunks(width).map(|r| Some(f64::from(r[f]))).collect();
            (format!("f_{name}"), Arc::new(values) as ArrayRef)
        })
        .collect();
    RecordBatch::try_from_iter(columns).unwrap()
}

fn model_in_wasm_vs_native(host: &WasmHost) {
    let artifacts = weir_core::artifacts::Artifacts::in_memory(
        [("model".to_string(), weir_cli::FRAUD_MODEL_ONNX.to_vec())].into(),
    );
    let grants = Grants {
        inert_wasi: true,
        ..Grants::default()
    };
    // `BENCH_BASELINE_WASM=<fraud_model.wasm>` also times another build of
    // the component (say, with other guest flags) in the same run.
    let mut builds = vec![("shipped", weir_cli::FRAUD_MODEL_WASM.to_vec())];
    if let Ok(path) = std::env::var("BENCH_BASELINE_WASM") {
        builds.push((
            "baseline",
            std::fs::read(&path).expect("BENCH_BASELINE_WASM"),
        ));
    }
    let native = fraud_model::model::Model::load(weir_cli::FRAUD_MODEL_ONNX).unwrap();
    println!("\n1. the fraud model scoring rows of features, median of {RUNS}\n");
    println!("| build | rows | native (tract) | in Wasm (tract in fraud-model) | native rows/s | Wasm rows/s | Wasm vs native |");
    println!("|---|---|---|---|---|---|---|");
    for ((build, wasm), rows) in builds.iter().flat_map(|b| [(b, 10_000), (b, 100_000)]) {
        let operator = host.load(wasm, grants).unwrap();
        let x = features(rows);
        let batch = feature_batch(&x);
        let (mut n, mut w) = (Vec::new(), Vec::new());
        for _ in 0..RUNS {
            let t = Instant::now();
            std::hint::black_box(native.score(&x).unwrap());
            n.push(t.elapsed());
            let env = EpochEnv {
                artifacts: Arc::new(artifacts.clone()),
                ..EpochEnv::default()
            };
            let limits = Limits {
                memory_bytes: 1 << 30,
                ..Limits::default()
            };
            let mut instance = operator.instantiate("bench", 0, limits, "{}", env).unwrap();
            let t = Instant::now();
            let out = instance.process("bench", 0, 0, batch.clone()).unwrap();
            w.push(t.elapsed());
            assert_eq!(out.iter().map(|b| b.num_rows()).sum::<usize>(), rows);
        }
        let (n, w) = (median(n).as_secs_f64(), median(w).as_secs_f64());
        println!(
            "| {build} | {rows} | {:.2} ms | {:.2} ms | {:.0} | {:.0} | {:.2}x |",
            n * 1e3,
            w * 1e3,
            rows as f64 / n,
            rows as f64 / w,
            w / n
        );
    }
}

/// 10,000 demo payments as one batch in the source schema.
fn payments_batch() -> RecordBatch {
    let cfg = weir_engine::config::PipelineConfig::parse(
        &format!(
            "name = \"b\"\ncheckpoint = \"c\"\n[source]\nkind = \"files\"\npath = \"i\"\n{}\n[operator]\npath = \"x.wasm\"\n[sink]\nkind = \"console\"\n",
            generator::SCHEMA_TOML
        ),
        Path::new("."),
    )
    .unwrap();
    let decoder = weir_core::json::JsonDecoder::new(
        cfg.source.schema().unwrap(),
        10_000,
        weir_engine::config::MalformedPolicy::Fail,
    );
    let bytes = generator::json_lines(7, 0, 10_000);
    decoder
        .decode_lines(&bytes, "bench")
        .unwrap()
        .batches
        .remove(0)
}

fn lookup_vs_config(host: &WasmHost) {
    let path = Path::new(weir_cli::GUEST_DIR).join("card_home.wasm");
    let Ok(wasm) = std::fs::read(&path) else {
        eprintln!(
            "{} missing: it is built by the tests (cargo test -p weir-cli --test all lookup)",
            path.display()
        );
        return;
    };
    let operator = host.load(&wasm, Grants::default()).unwrap();
    let batch = payments_batch();
    let cards: Vec<generator::Card> = (0..generator::CARDS).map(generator::card).collect();
    let table = {
        let schema = Arc::new(arrow_schema::Schema::new(
            ["card_id", "home_country", "devices"]
                .map(|n| arrow_schema::Field::new(n, arrow_schema::DataType::Utf8, false))
                .to_vec(),
        ));
        let bytes = generator::cards_json_lines();
        let rows =
            weir_connectors::lookup::read_table(Path::new("cards.jsonl"), bytes.clone(), &schema)
                .unwrap();
        weir_core::lookup::LookupTable::new("cards", "card_id", rows, &bytes).unwrap()
    };
    let tables: weir_core::lookup::EpochTables = [("cards".to_string(), Arc::new(table))].into();
    let tables = Arc::new(tables);
    let config_map: serde_json::Map<String, serde_json::Value> = cards
        .iter()
        .map(|c| (c.card_id.clone(), c.home_country.clone().into()))
        .collect();
    let in_config = serde_json::json!({ "cards": config_map }).to_string();
    let measure = |config: &str, env: &dyn Fn() -> EpochEnv| {
        let (mut inits, mut runs) = (Vec::new(), Vec::new());
        for _ in 0..RUNS {
            let t = Instant::now();
            let mut instance = operator
                .instantiate("bench", 0, Limits::default(), config, env())
                .unwrap();
            inits.push(t.elapsed());
            let t = Instant::now();
            instance.process("bench", 0, 0, batch.clone()).unwrap();
            runs.push(t.elapsed());
        }
        (median(inits), median(runs))
    };
    let (lookup_init, lookup_run) = measure("{}", &|| EpochEnv {
        lookups: tables.clone(),
        ..EpochEnv::default()
    });
    let (config_init, config_run) = measure(&in_config, &EpochEnv::default);
    let rows = batch.num_rows() as f64;
    println!(
        "\n2. the cards table ({} cards) for a 10,000-payment batch (card-home), median of {RUNS}\n",
        cards.len()
    );
    println!(
        "| table from | instantiate + init per epoch | process 10k rows | per row | config JSON |"
    );
    println!("|---|---|---|---|---|");
    for (what, init, run, size) in [
        ("lookup (batched host call)", lookup_init, lookup_run, 2),
        ("operator config", config_init, config_run, in_config.len()),
    ] {
        println!(
            "| {what} | {:.2} ms | {:.2} ms | {:.0} ns | {size} B |",
            init.as_secs_f64() * 1e3,
            run.as_secs_f64() * 1e3,
            run.as_secs_f64() * 1e9 / rows,
        );
    }
    println!(
        "\nlookup vs config: init {:.2}x, process {:.2}x",
        lookup_init.as_secs_f64() / config_init.as_secs_f64(),
        lookup_run.as_secs_f64() / config_run.as_secs_f64()
    );
}

fn demo_throughput() {
    println!("\n3. weir demo end to end, 200,000 payments (best of 3)\n");
    println!("| operator | payments/s | alerts | planted caught | vs fraud-velocity |");
    println!("|---|---|---|---|---|");
    let mut base = None;
    for operator in [DemoOperator::Velocity, DemoOperator::Model] {
        let mut best: Option<demo::DemoReport> = None;
        for _ in 0..3 {
            let dir = tempfile::tempdir().unwrap();
            let opts = DemoOptions {
                dir: Some(dir.path().to_path_buf()),
                operator,
                ..DemoOptions::default()
            };
            let r = demo::run(&opts, &mut |_| {}).unwrap();
            if best.as_ref().is_none_or(|b| r.elapsed < b.elapsed) {
                best = Some(r);
            }
        }
        let r = best.unwrap();
        let rate = r.rows_in as f64 / r.elapsed.as_secs_f64();
        let base = *base.get_or_insert(rate);
        let kinds: Vec<String> = r
            .by_kind
            .iter()
            .map(|k| format!("{} {}/{}", k.kind, k.caught, k.planted))
            .collect();
        println!(
            "| {operator:?} | {rate:.0} | {} | {} | {:.2}x |",
            r.alerts.len(),
            kinds.join(", "),
            rate / base
        );
    }
}

fn main() {
    let cache = tempfile::tempdir().unwrap();
    let host = WasmHost::new(Some(cache.path().to_path_buf())).unwrap();
    model_in_wasm_vs_native(&host);
    lookup_vs_config(&host);
    demo_throughput();
}
