//! Malformed input under both policies, and bad configuration through the
//! real `weir` binary: every error names the file and line or the key.

mod common;

use common::{guest, pipeline_toml, sink_files, DEMO_RULES_INLINE};
use std::path::Path;
use std::process::Command;
use std::sync::atomic::AtomicBool;
use weir::operator::WasmHost;

const GOOD: &str = r#"{"txn_id":"t1","card_id":"c1","merchant_id":"m-0666","amount":3000.5,"currency":"USD","country":"US","card_country":"US","ts":1,"device_id":null}"#;
const GOOD2: &str = r#"{"txn_id":"t4","card_id":"c1","merchant_id":"m-0777","amount":10.0,"currency":"USD","country":"US","card_country":"US","ts":4}"#;

fn write_mixed_input(dir: &Path) {
    let input = dir.join("input");
    std::fs::create_dir_all(&input).unwrap();
    let lines = [
        GOOD,
        r#"{"txn_id":"t2","card_id":"c1","merchant_id""#, // line 2: truncated
        r#"{"txn_id":"t3","card_id":"c1","amount":"lots","ts":3}"#, // line 3: wrong type, missing fields
        "",                                                         // blank lines are fine
        GOOD2,                                                      // line 5
        r#"[1, 2, 3]"#,                                             // line 6: not an object
    ];
    std::fs::write(input.join("mixed.jsonl"), lines.join("\n")).unwrap();
}

fn open_and_run(dir: &Path, extra_source: &str) -> anyhow::Result<()> {
    let host = WasmHost::new(None)?;
    let toml = pipeline_toml(
        dir,
        &guest("fraud_rules"),
        DEMO_RULES_INLINE,
        extra_source,
        "",
    );
    let mut p = common::open_pipeline(dir, &toml, &host)?;
    p.run(&host, &AtomicBool::new(false), &mut |_| {})?;
    Ok(())
}

#[test]
fn malformed_line_fails_the_epoch_naming_file_and_line_by_default() {
    let dir = tempfile::tempdir().unwrap();
    write_mixed_input(dir.path());
    let err = open_and_run(dir.path(), "").unwrap_err();
    let text = format!("{err:#}");
    assert!(text.contains("mixed.jsonl line 2"), "{text}");
    assert!(
        text.contains("dead-letter"),
        "the error says how to set lines aside: {text}"
    );
    assert!(
        !dir.path().join("checkpoint/commits/0").exists(),
        "nothing committed"
    );
    assert!(
        sink_files(&dir.path().join("out")).is_empty(),
        "nothing written"
    );
}

#[test]
fn dead_letter_policy_sets_bad_lines_aside_and_keeps_the_good_ones() {
    let dir = tempfile::tempdir().unwrap();
    write_mixed_input(dir.path());
    let dlq = dir.path().join("dlq");
    open_and_run(
        dir.path(),
        &format!(
            "on_malformed = \"dead-letter\"\ndead_letter = \"{}\"",
            dlq.display()
        ),
    )
    .unwrap();

    let letters = std::fs::read_to_string(dlq.join("epoch-0000000000.jsonl")).unwrap();
    let letters: Vec<serde_json::Value> = letters
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let lines: Vec<u64> = letters
        .iter()
        .map(|l| l["line"].as_u64().unwrap())
        .collect();
    assert_eq!(lines, vec![2, 3, 6]);
    for l in &letters {
        assert!(l["origin"].as_str().unwrap().ends_with("mixed.jsonl"));
        assert!(!l["reason"].as_str().unwrap().is_empty());
    }
    assert!(letters[1]["raw"].as_str().unwrap().contains("lots"));

    // Both good lines reached the operator: both are high-risk merchants.
    let out = sink_files(&dir.path().join("out"));
    let text = String::from_utf8(out[0].1.clone()).unwrap();
    assert!(text.contains("\"t1\"") && text.contains("\"t4\""), "{text}");
    let commit = std::fs::read_to_string(dir.path().join("checkpoint/commits/0")).unwrap();
    assert!(commit.contains("\"rows_in\": 2"), "{commit}");
}

fn weir_run(config: &str) -> (bool, String) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("pipeline.toml");
    std::fs::write(&file, config).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_weir"))
        .arg("run")
        .arg(&file)
        .env("WEIR_LOG", "error")
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn config_errors_name_the_key() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("input")).unwrap();
    let good = pipeline_toml(dir.path(), &guest("fraud_rules"), DEMO_RULES_INLINE, "", "");

    let (ok, err) = weir_run(&good.replace("name = \"test\"\n", ""));
    assert!(!ok && err.contains("missing field `name`"), "{err}");

    let (ok, err) =
        weir_run(&good.replace("max_files_per_trigger = 1", "max_files_per_trigger = 0"));
    assert!(!ok && err.contains("source.max_files_per_trigger"), "{err}");

    let (ok, err) =
        weir_run(&good.replace("max_files_per_trigger = 1", "max_files_per_triger = 1"));
    assert!(!ok && err.contains("max_files_per_triger"), "{err}");

    let (ok, err) = weir_run(&good.replace("mode = \"available-now\"", "mode = \"sometimes\""));
    assert!(!ok && err.contains("sometimes"), "{err}");

    let (ok, err) = weir_run(&good.replace(
        &format!("path = \"{}\"", guest("fraud_rules").display()),
        "path = \"/nonexistent/op.wasm\"",
    ));
    assert!(!ok && err.contains("/nonexistent/op.wasm"), "{err}");

    let (ok, err) = weir_run("this is not toml");
    assert!(!ok && err.contains("pipeline.toml"), "{err}");

    // The source directory does not exist.
    std::fs::remove_dir(dir.path().join("input")).unwrap();
    let (ok, err) = weir_run(&good);
    assert!(!ok && err.contains("source directory"), "{err}");
}
