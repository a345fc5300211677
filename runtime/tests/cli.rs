//! The `weir` binary as a user runs it: demo, checkpoint show, operator check.

mod common;

use common::guest;
use std::process::{Command, Output};

fn weir(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(args)
        .env("WEIR_LOG", "warn")
        .output()
        .unwrap()
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn demo_then_checkpoint_show() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let out = weir(&["demo", "--dir", d, "--payments", "4000", "--files", "4"]);
    let t = text(&out);
    assert!(out.status.success(), "{t}");
    assert!(
        t.contains("epoch    0") && t.contains("epoch    1"),
        "a line per epoch: {t}"
    );
    assert!(t.contains("planted fraud caught"), "{t}");
    assert!(t.contains("alerts:"), "{t}");

    let ck = dir.path().join("checkpoint");
    let out = weir(&["checkpoint", "show", ck.to_str().unwrap()]);
    let t = text(&out);
    assert!(out.status.success(), "{t}");
    assert!(t.contains("fraud-demo"), "{t}");
    assert_eq!(t.matches("committed").count(), 2, "{t}");
    assert!(
        t.contains("payments-0000.jsonl, payments-0001.jsonl"),
        "{t}"
    );
    assert!(t.contains("sha256:"), "{t}");

    // A planned-only epoch is shown as such.
    std::fs::remove_file(ck.join("commits/1")).unwrap();
    let t = text(&weir(&["checkpoint", "show", ck.to_str().unwrap()]));
    assert!(t.contains("PLANNED"), "{t}");

    let out = weir(&["checkpoint", "show", "--json", ck.to_str().unwrap()]);
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["epochs"][1]["committed"], false);
    assert_eq!(doc["metadata"]["pipeline"], "fraud-demo");

    let out = weir(&["checkpoint", "show", d]);
    assert!(!out.status.success());
    assert!(text(&out).contains("not a checkpoint"), "{}", text(&out));
}

#[test]
fn operator_check_reports_world_and_imports() {
    let ok = weir(&["operator", "check", guest("fraud_rules").to_str().unwrap()]);
    let t = text(&ok);
    assert!(ok.status.success(), "{t}");
    assert!(t.contains("process") && t.contains("init"), "{t}");
    assert!(t.contains("weir:operator/types@0.1.0"), "{t}");
    assert!(t.contains("ok: implements"), "{t}");

    let bad = weir(&[
        "operator",
        "check",
        guest("sandbox_escape").to_str().unwrap(),
    ]);
    let t = text(&bad);
    assert!(!bad.status.success());
    assert!(t.contains("wasi:filesystem/preopens"), "{t}");

    let dir = tempfile::tempdir().unwrap();
    let junk = dir.path().join("junk.wasm");
    std::fs::write(&junk, b"not wasm").unwrap();
    let out = weir(&["operator", "check", junk.to_str().unwrap()]);
    assert!(!out.status.success());
    assert!(
        text(&out).contains("not a WebAssembly component"),
        "{}",
        text(&out)
    );
}

#[test]
fn help_explains_every_command() {
    let t = text(&weir(&["--help"]));
    for cmd in ["run", "demo", "checkpoint", "operator"] {
        assert!(t.contains(cmd), "{t}");
    }
    let t = text(&weir(&["run", "--help"]));
    assert!(t.contains("Resumes from the checkpoint"), "{t}");
}

#[test]
fn demo_pipeline_reruns_from_its_own_directory_as_the_demo_says() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let out = weir(&["demo", "--dir", d, "--payments", "2000", "--files", "2"]);
    assert!(out.status.success(), "{}", text(&out));
    std::fs::remove_dir_all(dir.path().join("checkpoint")).unwrap();
    std::fs::remove_dir_all(dir.path().join("alerts")).unwrap();
    // `weir run pipeline.toml`: a bare file name, paths relative to the cwd.
    let out = Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(["run", "--quiet", "pipeline.toml"])
        .current_dir(dir.path())
        .env("WEIR_LOG", "warn")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    assert!(dir.path().join("checkpoint/commits/0").exists());
    assert!(dir.path().join("alerts").is_dir());
}
