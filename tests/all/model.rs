//! The fraud model inside the sandbox (`fraud-model`): the
//! component scores exactly what the same model scores natively; a new
//! model alone is a new version, deployed with `weir deploy --artifact`,
//! shadowed, promoted and recorded in `offsets/N`.

use crate::common::Running;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use weir_connectors::generator::payments as generator;

const TOKEN: &str = "test-token-model-0123456789";

/// The model the demo ships, and the older one that never saw takeovers.
const MODEL: &[u8] = weir_cli::FRAUD_MODEL_ONNX;
const MODEL_BEFORE_TAKEOVERS: &[u8] =
    include_bytes!("../../operators/fraud-model/model/model-before-takeovers.onnx");

/// A pipeline scoring `dir/input` with `fraud-model` and `dir/model.onnx`:
/// alerts to `dir/alerts`, every score (with its features) to
/// `dir/scores`. `trigger` and `extra` are TOML lines.
fn model_pipeline(dir: &Path, trigger: &str, extra: &str) -> PathBuf {
    std::fs::write(dir.join("fraud_model.wasm"), weir_cli::FRAUD_MODEL_WASM).unwrap();
    std::fs::write(dir.join("cards.jsonl"), generator::cards_json_lines()).unwrap();
    std::fs::create_dir_all(dir.join("input")).unwrap();
    let toml = format!(
        r#"name = "model"
checkpoint = "checkpoint"
{trigger}
[source]
kind = "files"
path = "input"
max_files_per_trigger = 1
{schema}

[operator]
path = "fraud_model.wasm"
deadline = "60s"
{operator}

[[sink]]
name = "alerts"
kind = "files"
path = "alerts"

[[sink]]
output = "scores"
kind = "files"
path = "scores"
{extra}
"#,
        schema = generator::SCHEMA_TOML,
        operator = weir_cli::demo::MODEL_TOML,
    );
    let path = dir.join("pipeline.toml");
    std::fs::write(&path, toml).unwrap();
    path
}

/// Every row the files sink wrote under `dir/out`, in file order.
fn rows(out: &Path) -> Vec<Value> {
    crate::common::sink_files(out)
        .iter()
        .flat_map(|(_, bytes)| {
            String::from_utf8_lossy(bytes)
                .lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect::<Vec<Value>>()
        })
        .collect()
}

#[test]
fn the_component_scores_what_the_same_model_scores_natively() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("model.onnx"), MODEL).unwrap();
    crate::common::write_input(dir.path(), 0x5EED, 2, 5_000);
    let pipeline = model_pipeline(dir.path(), "[trigger]\nmode = \"available-now\"", "");
    let out = Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(["run", "--quiet"])
        .arg(&pipeline)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let scores = rows(&dir.path().join("scores"));
    assert_eq!(scores.len(), 10_000, "every payment is scored");
    let names = fraud_model::features::NAMES;
    let features: Vec<f32> = scores
        .iter()
        .flat_map(|r| {
            names
                .iter()
                .map(|n| r[format!("f_{n}")].as_f64().unwrap() as f32)
                .collect::<Vec<_>>()
        })
        .collect();
    let native = fraud_model::model::Model::load(MODEL)
        .unwrap()
        .score(&features)
        .unwrap();
    let mut worst = 0f64;
    for (row, n) in scores.iter().zip(&native) {
        let wasm = row["score"].as_f64().unwrap();
        worst = worst.max((wasm - f64::from(*n)).abs());
    }
    assert!(worst <= 1e-6, "largest difference {worst}");
    // The scores are a model's, not a constant: honest payments low,
    // the takeovers the rules miss high.
    let takeovers: Vec<f64> = (0..10_000)
        .filter(|&i| generator::payment(0x5EED, i).1 == Some(generator::Planted::Takeover))
        .map(|i| scores[i as usize]["score"].as_f64().unwrap())
        .collect();
    assert!(
        takeovers.len() >= 20,
        "{} takeovers planted",
        takeovers.len()
    );
    let caught = takeovers.iter().filter(|s| **s >= 0.5).count();
    assert!(
        caught * 10 >= takeovers.len() * 8,
        "{caught} of {takeovers:?}"
    );
    let digest = weir_core::Digest::of(MODEL).to_string();
    assert!(scores.iter().all(|r| r["model"] == digest.as_str()));

    // `weir explain` replays a takeover's alert from the checkpoint alone
    // and gets the logged score bit for bit, with the new device (and the
    // foreign country) among what raised it.
    let alerts = rows(&dir.path().join("alerts"));
    let takeover = alerts
        .iter()
        .find(|a| {
            let i: u64 = a["txn_id"].as_str().unwrap()[7..].parse().unwrap();
            generator::payment(0x5EED, i).1 == Some(generator::Planted::Takeover)
        })
        .expect("a takeover alert");
    let txn = takeover["txn_id"].as_str().unwrap();
    let epoch = (0..2)
        .find(|e| {
            weir_connectors::files::FileSink::epoch_files(&dir.path().join("alerts"), *e)
                .unwrap()
                .iter()
                .any(|f| std::fs::read_to_string(f).unwrap().contains(txn))
        })
        .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(["explain", "-p"])
        .arg(&pipeline)
        .args(["--epoch", &epoch.to_string(), "--txn", txn, "--json"])
        .env("WEIR_LOG", "warn")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["input"]["txn_id"], txn);
    assert_eq!(report["artifacts"]["model"], digest.as_str());
    assert!(report["lookups"]["cards"]
        .as_str()
        .unwrap()
        .starts_with("sha256:"));
    let score = &report["score"];
    assert_eq!(score["identical"], true, "{score}");
    assert_eq!(score["replayed"].as_f64(), takeover["score"].as_f64());
    assert_eq!(score["rescored"], score["replayed"]);
    let contribution = |name: &str| {
        score["features"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["name"] == name)
            .unwrap()["contribution"]
            .as_f64()
            .unwrap()
    };
    assert!(contribution("new_device") > 0.0, "{score}");
    assert!(contribution("abroad") > 0.0, "{score}");
}

/// `weir <args> --pipeline model --admin URL`.
fn weir(run: &Running, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(args)
        .args(["--pipeline", "model", "--admin", &run.url])
        .env("WEIR_ADMIN_TOKEN", TOKEN)
        .env("WEIR_LOG", "warn")
        .output()
        .unwrap()
}

fn ok(out: Output) -> String {
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "command failed: {text}");
    text
}

/// Writes input file `n` (payments `n * 2000 .. (n + 1) * 2000`) whole:
/// staged beside the input, then renamed into it, as the pipeline runs.
fn feed(dir: &Path, n: u64) {
    let staging = dir.join("staging");
    std::fs::create_dir_all(&staging).unwrap();
    let file = format!("payments-{n:04}.jsonl");
    let bytes = generator::json_lines(0x5EED, n * 2_000, 2_000);
    std::fs::write(staging.join(&file), bytes).unwrap();
    std::fs::rename(staging.join(&file), dir.join("input").join(&file)).unwrap();
}

fn offsets(ckpt: &Path, epoch: u64) -> Value {
    serde_json::from_slice(&std::fs::read(ckpt.join("offsets").join(epoch.to_string())).unwrap())
        .unwrap()
}

#[test]
fn a_new_model_alone_is_deployed_shadowed_promoted_and_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let ckpt = dir.path().join("checkpoint");
    // Version 1 runs yesterday's model, which never saw a takeover.
    std::fs::write(dir.path().join("model.onnx"), MODEL_BEFORE_TAKEOVERS).unwrap();
    std::fs::write(dir.path().join("model-v2.onnx"), MODEL).unwrap();
    let pipeline = model_pipeline(
        dir.path(),
        "[trigger]\nmode = \"processing-time\"\ninterval = \"50ms\"",
        "[admin]\nlisten = \"127.0.0.1:0\"",
    );
    let run = Running::start(&pipeline, &ckpt, cache.path(), TOKEN, &[]);
    feed(dir.path(), 0);
    crate::common::wait_for("the first file", || {
        crate::common::committed_rows(&ckpt) >= 2_000
    });

    // Only the model changes: the same component, `--artifact`, in shadow.
    let wasm = dir.path().join("fraud_model.wasm");
    let said = ok(weir(
        &run,
        &[
            "deploy",
            wasm.to_str().unwrap(),
            "--artifact",
            &format!("model={}", dir.path().join("model-v2.onnx").display()),
            "--shadow",
            "--key",
            "txn_id",
            "--label",
            "model aware of takeovers",
        ],
    ));
    assert!(said.contains("version 2"), "{said}");
    for n in 1..4 {
        feed(dir.path(), n);
    }
    crate::common::wait_for("the shadowed files", || {
        crate::common::committed_rows(&ckpt) >= 8_000
    });
    let reports = std::fs::read_to_string(ckpt.join("operators/shadow-reports.jsonl")).unwrap();
    let reports: Vec<Value> = reports
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(!reports.is_empty());
    let added: u64 = reports.iter().map(|r| r["added"].as_u64().unwrap()).sum();
    assert!(
        added >= 5,
        "the new model alerts on takeovers the old one misses: {reports:?}"
    );
    let errors: Vec<&Value> = reports.iter().filter(|r| !r["error"].is_null()).collect();
    assert!(errors.is_empty(), "{errors:?}");

    ok(weir(&run, &["promote"]));
    feed(dir.path(), 4);
    crate::common::wait_for("a file on version 2", || {
        crate::common::committed_rows(&ckpt) >= 10_000
    });
    drop(run);

    // offsets/N names the model: the first epoch's manifest lists the old
    // model's digest, the last one's the new model's; the component is the
    // same in both.
    let epochs = crate::common::latest_entry(&ckpt.join("offsets")).unwrap();
    let (first, last) = (offsets(&ckpt, 0), offsets(&ckpt, epochs));
    assert_eq!(first["operator"]["digest"], last["operator"]["digest"]);
    let model_of = |entry: &Value| -> String {
        let manifest = entry["operator"]["artifacts"].as_str().unwrap();
        let hex = manifest.trim_start_matches("sha256:");
        let bytes = std::fs::read(ckpt.join("blobs").join(hex)).unwrap();
        let listed: Value = serde_json::from_slice(&bytes).unwrap();
        listed["model"].as_str().unwrap().to_string()
    };
    assert_eq!(
        model_of(&first),
        weir_core::Digest::of(MODEL_BEFORE_TAKEOVERS).to_string()
    );
    assert_eq!(model_of(&last), weir_core::Digest::of(MODEL).to_string());
    let scores = rows(&dir.path().join("scores"));
    let new_model = weir_core::Digest::of(MODEL).to_string();
    assert!(scores.iter().any(|r| r["model"] == new_model.as_str()));
}
