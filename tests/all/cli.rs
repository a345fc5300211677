//! The `weir` binary as a user runs it: demo, checkpoint show, operator check.

use crate::common::{guest, output_text as text};
use std::process::{Command, Output};

fn weir(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(args)
        .env("WEIR_LOG", "warn")
        .output()
        .unwrap()
}

#[test]
fn real_time_demo_scores_generated_payments_and_reports_latency() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let args = [
        "demo",
        "--mode",
        "real-time",
        "--rate",
        "1000",
        "--seconds",
        "2",
        "--dir",
        d,
    ];
    let out = weir(&args);
    let t = text(&out);
    assert!(out.status.success(), "{t}");
    assert!(t.contains("2000 payments in"), "{t}");
    assert!(t.contains("planted fraud caught"), "{t}");
    assert!(t.contains("event to alert latency: p50 "), "{t}");
    assert!(t.contains("parts (real-time)"), "{t}");
    // The checkpoint lists each epoch's parts.
    let ck = dir.path().join("checkpoint");
    let out = weir(&["checkpoint", "show", "--json", ck.to_str().unwrap()]);
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let parts: usize = doc["epochs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["source"]["parts"].as_array().map_or(0, Vec::len))
        .sum();
    assert!(parts > 2, "{doc}");
    // Bad input is named.
    let out = weir(&["demo", "--mode", "real-time", "--rate", "0", "--dir", d]);
    assert!(text(&out).contains("--rate must be"), "{}", text(&out));
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

    // `weir operator test` with the demo's pipeline file: its config is
    // used, and each row is printed with the operator's column order.
    let out = weir(&[
        "operator",
        "test",
        guest("fraud_velocity").to_str().unwrap(),
        "--input",
        dir.path()
            .join("input/payments-0000.jsonl")
            .to_str()
            .unwrap(),
        "--pipeline",
        dir.path().join("pipeline.toml").to_str().unwrap(),
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(out.status.success(), "{}", text(&out));
    let first = stdout.lines().next().expect("alerts in the first file");
    let keys: Vec<String> =
        serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(first)
            .unwrap()
            .keys()
            .cloned()
            .collect();
    assert!(keys.len() >= 7, "{first}");
    assert!(
        first.starts_with("{\"txn_id\":") && first.contains("\"window_count\":"),
        "columns in the operator's order (txn_id first), not sorted: {first}"
    );

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
    // The columns line up under the header.
    let header = t.lines().find(|l| l.contains("source range")).unwrap();
    let row = t.lines().find(|l| l.contains("payments-0000")).unwrap();
    assert_eq!(
        header.find("status"),
        row.find("committed"),
        "{header}\n{row}"
    );

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
    for cmd in [
        "run",
        "demo",
        "checkpoint",
        "operator",
        "explain",
        "generate",
    ] {
        assert!(t.contains(cmd), "{t}");
    }
    let t = text(&weir(&["explain", "--help"]));
    assert!(t.contains("bit for bit") && t.contains("--epoch"), "{t}");
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

    // `weir explain` on the rerun: a rules decision replays bit for bit;
    // bad requests say what is wrong.
    let explain = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_weir"))
            .args(["explain", "-p", "pipeline.toml"])
            .args(args)
            .current_dir(dir.path())
            .env("WEIR_LOG", "warn")
            .output()
            .unwrap()
    };
    let alerts = std::fs::read_to_string(dir.path().join("alerts/epoch-0000000000.jsonl")).unwrap();
    let first: serde_json::Value = serde_json::from_str(alerts.lines().next().unwrap()).unwrap();
    let txn = first["txn_id"].as_str().unwrap();
    let out = explain(&["--epoch", "0", "--txn", txn]);
    let t = text(&out);
    assert!(out.status.success(), "{t}");
    assert!(
        t.contains("identical, bit for bit") && t.contains(txn),
        "{t}"
    );
    let out = explain(&["--epoch", "99", "--txn", txn]);
    assert!(
        !out.status.success() && text(&out).contains("is not committed"),
        "{}",
        text(&out)
    );
    let out = explain(&["--epoch", "0", "--txn", "t-nope"]);
    assert!(
        !out.status.success() && text(&out).contains("no input or output row"),
        "{}",
        text(&out)
    );
}

/// Every file under `dir` with its bytes, for "nothing was touched" checks.
fn snapshot(dir: &std::path::Path) -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .map(|p| (p.display().to_string(), std::fs::read(&p).unwrap()))
        .collect();
    files.sort();
    files
}

/// `weir demo --dir D` with one input file per epoch.
fn demo_one_file_per_epoch(d: &str, payments: &str, files: &str) {
    let out = weir(&[
        "demo",
        "--dir",
        d,
        "--payments",
        payments,
        "--files",
        files,
        "--files-per-epoch",
        "1",
    ]);
    assert!(out.status.success(), "{}", text(&out));
}

#[test]
fn a_damaged_checkpoint_is_refused_before_anything_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    demo_one_file_per_epoch(d, "4000", "4");
    let ck = dir.path().join("checkpoint");
    let pipeline = dir.path().join("pipeline.toml");
    // More input, so a run that went on would write new alerts.
    let more = weir_connectors::generator::payments::json_lines(9, 4_000, 1_000);
    std::fs::write(dir.path().join("input/payments-0009.jsonl"), more).unwrap();
    let alerts = snapshot(&dir.path().join("alerts"));
    for (remove, want) in [
        (
            "offsets/1",
            "offsets/1 is missing but epochs up to 3 were planned",
        ),
        ("offsets/3", "commits/3 exists but offsets/3 does not"),
        (
            "commits/1",
            "commits/1 is missing but epochs up to 3 were committed",
        ),
        ("metadata", "metadata is missing but"),
    ] {
        let path = ck.join(remove);
        let saved = std::fs::read(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        let out = weir(&["run", "--quiet", pipeline.to_str().unwrap()]);
        let t = text(&out);
        assert!(!out.status.success(), "{remove} removed, yet: {t}");
        assert!(t.contains(want), "{remove}: {t}");
        assert!(t.contains("is damaged"), "{t}");
        assert_eq!(snapshot(&dir.path().join("alerts")), alerts, "{remove}");
        assert!(
            !ck.join("offsets/4").exists(),
            "{remove}: an epoch was planned"
        );
        std::fs::write(&path, saved).unwrap();
    }
    let out = weir(&["run", "--quiet", pipeline.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(ck.join("commits/4").exists());
}

#[test]
fn one_pipeline_spelled_from_two_directories_is_one_query() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    demo_one_file_per_epoch(d, "2000", "2");
    let more = weir_connectors::generator::payments::json_lines(9, 2_000, 500);
    std::fs::write(dir.path().join("input/payments-0009.jsonl"), more).unwrap();
    // `cd D && weir run pipeline.toml` after `weir demo --dir D`.
    let out = Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(["run", "--quiet", "pipeline.toml"])
        .current_dir(dir.path())
        .env("WEIR_LOG", "warn")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    assert!(dir.path().join("checkpoint/commits/2").exists());
    // And back through a path with `.` and `..` in it.
    let parent = dir.path().parent().unwrap();
    let name = dir.path().file_name().unwrap().to_str().unwrap();
    let spelled = format!("./{name}/../{name}/pipeline.toml");
    let out = Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(["run", "--quiet", &spelled])
        .current_dir(parent)
        .env("WEIR_LOG", "warn")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
}

/// Runs `weir args` with a 10 MiB tmpfs mounted at `disk`, in a user and
/// mount namespace of its own (`unshare`): no root needed where user
/// namespaces are allowed, and nothing stays mounted after it. Fails,
/// rather than skips, where the machine allows neither.
fn weir_on_small_disk(disk: &std::path::Path, args: &[&str]) -> Output {
    Command::new("unshare")
        .args(["--user", "--map-root-user", "--mount", "sh", "-c"])
        .arg(r#"mount -t tmpfs -o size=10m tmpfs "$0" && exec "$@""#)
        .arg(disk)
        .arg(env!("CARGO_BIN_EXE_weir"))
        .args(args)
        .env("WEIR_LOG", "warn")
        .output()
        .expect("running unshare (util-linux)")
}

#[test]
fn a_nearly_full_disk_at_start_is_a_clean_error_not_an_abort() {
    let disk = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let out = weir(&["demo", "--dir", d, "--payments", "1000", "--files", "1"]);
    assert!(out.status.success(), "{}", text(&out));
    let pipeline = dir.path().join("pipeline.toml");
    let ck = disk.path().join("checkpoint");
    let toml = std::fs::read_to_string(&pipeline).unwrap();
    let toml = toml
        .lines()
        .map(|l| {
            if l.starts_with("checkpoint") {
                format!("checkpoint = \"{}\"", ck.display())
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    std::fs::write(&pipeline, toml).unwrap();
    let out = weir_on_small_disk(disk.path(), &["run", "--quiet", pipeline.to_str().unwrap()]);
    let t = text(&out);
    assert_eq!(out.status.code(), Some(1), "{t}");
    assert!(t.contains("not enough free disk space"), "{t}");
    assert!(t.contains("No space left on device"), "{t}");
}

/// `weir operator test --state`: a card's history given up front counts
/// towards the velocity rule, in one epoch and across several; without it
/// the same payment raises nothing.
#[test]
fn operator_test_starts_from_the_given_state() {
    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| dir.path().join(name).to_str().unwrap().to_string();
    let t0 = 1_767_225_600_000i64;
    let row = |n: i64| {
        format!(
            "{{\"txn_id\":\"t-{n}\",\"card_id\":\"c-1\",\"merchant_id\":\"m-1\",\"amount\":10.0,\
             \"currency\":\"EUR\",\"country\":\"DE\",\"card_country\":\"DE\",\"ts\":{},\
             \"device_id\":null}}\n",
            t0 + n * 1_000
        )
    };
    std::fs::write(path("a.jsonl"), row(10)).unwrap();
    std::fs::write(path("b.jsonl"), row(11)).unwrap();
    std::fs::write(
        path("config.json"),
        r#"{"alert_threshold": 0.5,
            "rules": [{"rule": "amount_above", "threshold": 1e12, "weight": 0.1}],
            "velocity": {"window_ms": 60000, "max_payments": 5, "weight": 0.7}}"#,
    )
    .unwrap();
    // Five earlier payments of c-1, as the operator stores them: event
    // times as little-endian i64s.
    let history: String = (0..5i64)
        .flat_map(|n| (t0 + n * 1_000).to_le_bytes())
        .map(|b| format!("{b:02x}"))
        .collect();
    std::fs::write(
        path("state.jsonl"),
        format!("{{\"key\":\"c-1\",\"value_hex\":\"{history}\"}}\n"),
    )
    .unwrap();
    let component = guest("fraud_velocity");
    let test = |inputs: &[&str], state: bool| {
        let mut args = vec![
            "operator".to_string(),
            "test".into(),
            component.to_str().unwrap().into(),
            "--config".into(),
            path("config.json"),
        ];
        for input in inputs {
            args.extend(["--input".into(), path(input)]);
        }
        if state {
            args.extend(["--state".into(), path("state.jsonl")]);
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = weir(&args);
        assert!(out.status.success(), "{}", text(&out));
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    assert_eq!(
        test(&["a.jsonl"], false),
        "",
        "one payment alone is no burst"
    );
    let one = test(&["a.jsonl"], true);
    assert!(
        one.contains("\"txn_id\":\"t-10\"") && one.contains("\"window_count\":6"),
        "{one}"
    );
    let two = test(&["a.jsonl", "b.jsonl"], true);
    assert_eq!(two.lines().count(), 2, "{two}");
    assert!(
        two.contains("\"txn_id\":\"t-11\"") && two.contains("\"window_count\":7"),
        "{two}"
    );

    // The same payments' `scores` output: every payment, alerting or not.
    let scores = |inputs: &[&str]| {
        let mut args = vec!["operator", "test", component.to_str().unwrap()];
        let (config, paths) = (
            path("config.json"),
            inputs.iter().map(|i| path(i)).collect::<Vec<_>>(),
        );
        args.extend(["--config", &config, "--output", "scores"]);
        for p in &paths {
            args.extend(["--input", p.as_str()]);
        }
        let out = weir(&args);
        assert!(out.status.success(), "{}", text(&out));
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    let one = scores(&["a.jsonl"]);
    assert!(
        one.contains("\"txn_id\":\"t-10\"") && one.contains("\"alert\":false"),
        "{one}"
    );
    assert_eq!(scores(&["a.jsonl", "b.jsonl"]).lines().count(), 2);

    std::fs::write(path("bad.jsonl"), "{\"key\":\"c-1\"}\n").unwrap();
    let out = weir(&[
        "operator",
        "test",
        component.to_str().unwrap(),
        "--input",
        &path("a.jsonl"),
        "--state",
        &path("bad.jsonl"),
    ]);
    assert!(!out.status.success());
    assert!(text(&out).contains("bad.jsonl: line 1"), "{}", text(&out));
}

/// `weir operator test --artifact`: the component reads the file as the
/// version's artifact, digest and all; a bad name is refused up front.
#[test]
fn operator_test_hands_the_component_its_artifacts() {
    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| dir.path().join(name).to_str().unwrap().to_string();
    std::fs::write(
        path("in.jsonl"),
        weir_connectors::generator::payments::json_lines(1, 0, 3),
    )
    .unwrap();
    // card-home with its table in the config: no lookup needed here.
    std::fs::write(path("config.json"), r#"{"cards": {"c-00001": "US"}}"#).unwrap();
    std::fs::write(path("notes.txt"), b"v2 notes").unwrap();
    let component = guest("card_home");
    let run = |artifact: &str| {
        weir(&[
            "operator",
            "test",
            component.to_str().unwrap(),
            "--input",
            &path("in.jsonl"),
            "--config",
            &path("config.json"),
            "--artifact",
            artifact,
        ])
    };
    let out = run(&format!("notes={}", path("notes.txt")));
    let t = text(&out);
    assert!(out.status.success(), "{t}");
    let digest = weir_core::Digest::of(b"v2 notes").to_string();
    assert_eq!(t.matches(&digest).count(), 3, "{t}");
    assert!(t.contains("\"notes_bytes\":8"), "{t}");
    let out = run("Bad Name=x");
    assert!(
        !out.status.success() && text(&out).contains("artifact name"),
        "{}",
        text(&out)
    );
}

/// A second `weir run` on a checkpoint in use is refused before it touches
/// anything, naming the process that holds it; the first run goes on.
#[test]
fn a_second_run_on_a_checkpoint_in_use_is_refused_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    crate::common::write_input(dir.path(), 3, 2, 200);
    let toml = crate::common::pipeline_toml(
        dir.path(),
        &guest("fraud_rules"),
        crate::common::DEMO_RULES_INLINE,
        "",
        "",
    )
    .replace("available-now", "processing-time\"\ninterval = \"20ms");
    let first = crate::common::Background::start(dir.path(), toml.clone());
    let ckpt = dir.path().join("checkpoint");
    crate::common::wait_for("the first run to commit", || {
        crate::common::committed_rows(&ckpt) == 400
    });
    // A temp file the first run might be writing at this moment.
    let temp = ckpt.join("offsets").join(".2.tmp-1-0");
    std::fs::write(&temp, b"half").unwrap();
    let file = dir.path().join("pipeline.toml");
    std::fs::write(&file, &toml).unwrap();
    let second = weir(&["run", file.to_str().unwrap()]);
    let t = text(&second);
    assert!(!second.status.success(), "{t}");
    assert!(t.contains("is in use"), "{t}");
    assert!(
        t.contains(&format!("weir process {}", std::process::id())),
        "{t}"
    );
    assert!(
        temp.exists(),
        "the refused run removed the first one's temp file"
    );
    crate::common::write_input(dir.path(), 3, 3, 200);
    crate::common::wait_for("the first run to go on", || {
        crate::common::committed_rows(&ckpt) == 600
    });
    assert!(first.is_running());
    first.stop().unwrap();
}
