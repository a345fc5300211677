//! Real misbehaving guest components against the real wasmtime host: each is
//! stopped, reported with pipeline, epoch, digest and cause, and the same
//! host then runs the next pipeline normally.

use crate::common::{guest, pipeline_toml, sink_files, write_input};
use std::sync::atomic::AtomicBool;
use std::sync::mpsc;
use std::time::Duration;
use weir_engine::pipeline::EpochFailed;
use weir_host::{OperatorFailure, WasmHost};

/// Runs a sandbox-tests pipeline in `mode` on `host`; returns the run's error.
fn run_mode(host: &WasmHost, mode: &str, extra_operator: &str) -> anyhow::Result<()> {
    let dir = tempfile::tempdir().unwrap();
    write_input(dir.path(), 7, 2, 500);
    let toml = pipeline_toml(
        dir.path(),
        &guest("sandbox_tests"),
        &format!(r#"{{ mode = "{mode}" }}"#),
        "",
        &format!("on_error = \"fail\"\n{extra_operator}"),
    );
    let mut p = crate::common::open_pipeline(dir.path(), &toml, host)?;
    p.run(host, &AtomicBool::new(false), &mut |_| {})?;
    let out = sink_files(&dir.path().join("out"));
    assert_eq!(out.len(), 2, "echo writes one file per epoch");
    Ok(())
}

fn failure_of(err: anyhow::Error) -> (String, EpochFailed) {
    let text = format!("{err:#}");
    match err.downcast::<EpochFailed>() {
        Ok(f) => (text, f),
        Err(other) => panic!("expected an epoch failure, got: {other:#}"),
    }
}

/// Runs `f` on another thread and fails the test if it does not return:
/// a guest that is not stopped would otherwise hang the suite forever.
fn within<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(Duration::from_secs(120))
        .unwrap_or_else(|_| panic!("{what} was not stopped"))
}

#[test]
fn misbehaving_guests_fail_their_epoch_and_the_host_stays_healthy() {
    within("the misbehaving guests", || {
        let host = WasmHost::new(None).unwrap();

        let (text, f) = failure_of(run_mode(&host, "loop", r#"deadline = "300ms""#).unwrap_err());
        assert!(
            matches!(f.cause, OperatorFailure::Deadline(d) if d == Duration::from_millis(300)),
            "{text}"
        );
        assert_eq!((f.pipeline.as_str(), f.epoch), ("test", 0));
        assert!(f.digest.to_string().starts_with("sha256:"), "{text}");
        assert!(
            text.contains("pipeline `test` epoch 0: operator sha256:"),
            "{text}"
        );
        assert!(text.contains("deadline"), "{text}");
        run_mode(&host, "echo", "").expect("host healthy after a runaway loop");

        let (text, f) = failure_of(run_mode(&host, "bomb", r#"memory = "64MiB""#).unwrap_err());
        match f.cause {
            OperatorFailure::MemoryLimit { requested, limit } => {
                assert_eq!(limit, 64 << 20);
                assert!(requested > limit, "{text}");
            }
            other => panic!("expected a memory-limit failure, got {other}"),
        }
        run_mode(&host, "echo", "").expect("host healthy after a memory bomb");

        let (text, f) = failure_of(run_mode(&host, "trap", "").unwrap_err());
        assert!(matches!(f.cause, OperatorFailure::Trap { .. }), "{text}");
        assert!(text.contains("unreachable"), "{text}");
        run_mode(&host, "echo", "").expect("host healthy after a trap");

        let (text, f) = failure_of(run_mode(&host, "panic", "").unwrap_err());
        assert!(matches!(f.cause, OperatorFailure::Trap { .. }), "{text}");
        assert!(
            text.contains("sandbox-tests was told to panic"),
            "guest stderr is reported: {text}"
        );

        let (text, f) = failure_of(run_mode(&host, "fail", "").unwrap_err());
        assert!(matches!(f.cause, OperatorFailure::Failed(_)), "{text}");

        let (text, f) = failure_of(run_mode(&host, "bad-output", "").unwrap_err());
        assert!(
            matches!(f.cause, OperatorFailure::InvalidOutput(_)),
            "{text}"
        );
        assert!(text.contains("output column `b`"), "{text}");

        // A gather of one row millions of times is refused before the
        // host allocates it; so are rows that cost a bit each.
        let (text, f) =
            failure_of(run_mode(&host, "gather-bomb", r#"memory = "64MiB""#).unwrap_err());
        assert!(matches!(f.cause, OperatorFailure::Trap { .. }), "{text}");
        assert!(
            text.contains("asked for 4000000 rows of column") && text.contains("memory limit"),
            "{text}"
        );
        let (text, f) =
            failure_of(run_mode(&host, "free-rows", r#"memory = "64MiB""#).unwrap_err());
        assert!(
            matches!(f.cause, OperatorFailure::InvalidOutput(_)),
            "{text}"
        );
        assert!(
            text.contains("more than the operator's memory limit"),
            "{text}"
        );

        run_mode(&host, "echo", "").expect("host healthy at the end");
    });
}

#[test]
fn a_failed_epoch_is_not_committed() {
    let host = WasmHost::new(None).unwrap();
    let dir = tempfile::tempdir().unwrap();
    write_input(dir.path(), 7, 1, 100);
    let toml = pipeline_toml(
        dir.path(),
        &guest("sandbox_tests"),
        r#"{ mode = "fail" }"#,
        "",
        "",
    );
    let mut p = crate::common::open_pipeline(dir.path(), &toml, &host).unwrap();
    assert!(p.run(&host, &AtomicBool::new(false), &mut |_| {}).is_err());
    let ck = dir.path().join("checkpoint");
    assert!(ck.join("offsets/0").exists());
    assert!(!ck.join("commits/0").exists());
}

#[test]
fn importing_the_filesystem_is_refused_at_load() {
    let host = WasmHost::new(None).unwrap();
    let wasm = std::fs::read(guest("sandbox_escape")).unwrap();
    let err = host
        .load(&wasm, Default::default())
        .err()
        .expect("must be refused");
    let text = format!("{err:#}");
    assert!(text.contains("wasi:filesystem/preopens"), "{text}");
    assert!(text.contains("does not grant"), "{text}");

    // Granting clocks does not open the filesystem.
    let grants = weir_host::Grants {
        clocks: true,
        ..weir_host::Grants::default()
    };
    let text = format!("{:#}", host.load(&wasm, grants).err().unwrap());
    assert!(
        text.contains("wasi:filesystem") && !text.contains("wall-clock"),
        "{text}"
    );
}

#[test]
fn inert_wasi_links_the_filesystem_with_nothing_in_it() {
    let host = WasmHost::new(None).unwrap();
    let wasm = std::fs::read(guest("sandbox_escape")).unwrap();
    let grants = weir_host::Grants {
        inert_wasi: true,
        ..weir_host::Grants::default()
    };
    let operator = host.load(&wasm, grants).expect("loads with inert WASI");
    let call = weir_host::EpochCall {
        pipeline: "inert",
        epoch: 0,
        epoch_time_ms: 0,
        limits: weir_host::Limits::default(),
        config: "{}",
        migrate_from: None,
    };
    let batch = arrow_array::RecordBatch::try_from_iter([(
        "txn_id",
        std::sync::Arc::new(arrow_array::StringArray::from(vec!["t-1"])) as arrow_array::ArrayRef,
    )])
    .unwrap();
    // Listing `/` finds no preopened directory: the operator's own error.
    let err = operator
        .run(&call, &[batch], weir_host::EpochEnv::default())
        .err()
        .expect("there is no filesystem to read");
    assert!(
        matches!(err, OperatorFailure::Failed(_)),
        "an error value, not a trap: {err}"
    );
}

#[test]
fn a_module_that_is_not_a_component_is_refused() {
    let host = WasmHost::new(None).unwrap();
    // A core module (magic + version 1), not a component.
    let err = host
        .load(b"\0asm\x01\0\0\0", Default::default())
        .err()
        .unwrap();
    assert!(
        format!("{err:#}").contains("compiling the operator"),
        "{err:#}"
    );
}

#[test]
fn bad_operator_config_is_refused_before_any_epoch() {
    let host = WasmHost::new(None).unwrap();
    let dir = tempfile::tempdir().unwrap();
    write_input(dir.path(), 7, 1, 10);
    let toml = pipeline_toml(
        dir.path(),
        &guest("fraud_rules"),
        r#"{ alert_threshold = 0.5, rules = [ { rule = "amount_abov", weight = 1.0 } ] }"#,
        "",
        "",
    );
    let err = crate::common::open_pipeline(dir.path(), &toml, &host)
        .err()
        .unwrap();
    let text = format!("{err:#}");
    assert!(text.contains("rejected its configuration"), "{text}");
    assert!(text.contains("amount_abov"), "{text}");
    assert!(!dir.path().join("checkpoint/offsets/0").exists());
}

#[test]
fn compiled_components_are_cached_and_reused() {
    let cache = tempfile::tempdir().unwrap();
    let wasm = std::fs::read(guest("fraud_rules")).unwrap();
    let host = WasmHost::new(Some(cache.path().to_path_buf())).unwrap();
    let first = host.load(&wasm, Default::default()).unwrap();
    let artifacts = components_in(cache.path());
    assert_eq!(artifacts.len(), 1, "one artifact cached: {artifacts:?}");
    let second = WasmHost::new(Some(cache.path().to_path_buf()))
        .unwrap()
        .load(&wasm, Default::default())
        .unwrap();
    assert_eq!(first.digest(), second.digest());
    drop((first, second, host));
    // A corrupt artifact is ignored and rewritten, never fatal.
    std::fs::write(&artifacts[0], b"garbage").unwrap();
    WasmHost::new(Some(cache.path().to_path_buf()))
        .unwrap()
        .load(&wasm, Default::default())
        .unwrap();
    assert_ne!(std::fs::read(&artifacts[0]).unwrap(), b"garbage");
}

#[test]
fn a_new_component_compiles_only_the_functions_not_compiled_before() {
    let rules = std::fs::read(guest("fraud_rules")).unwrap();
    let velocity = std::fs::read(guest("fraud_velocity")).unwrap();
    // On one compiler thread (as uploads compile), so that a function that
    // occurs twice in one component is found the second time, every time.
    let counts = |root: &std::path::Path, wasm: &[u8]| {
        let host = WasmHost::new(Some(root.to_path_buf())).unwrap();
        host.load_in_background(wasm, Default::default()).unwrap();
        host.function_cache_hits_and_misses().unwrap()
    };
    let alone = tempfile::tempdir().unwrap();
    let velocity_alone = counts(alone.path(), &velocity);

    // fraud-velocity after fraud-rules: the SDK's and the standard
    // library's functions they share are compiled once.
    let shared = tempfile::tempdir().unwrap();
    counts(shared.path(), &rules);
    let (hits, misses) = counts(shared.path(), &velocity);
    assert_eq!(hits + misses, velocity_alone.0 + velocity_alone.1);
    assert!(
        hits > velocity_alone.0,
        "nothing reused: {hits} found, {misses} compiled; alone {velocity_alone:?}"
    );

    // A damaged entry is a miss: compiled again, never loaded.
    for entry in walk(&shared.path().join("functions")) {
        let mut bytes = std::fs::read(&entry).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 0xff;
        std::fs::write(&entry, bytes).unwrap();
    }
    for artifact in components_in(shared.path()) {
        std::fs::remove_file(artifact).unwrap();
    }
    assert_eq!(counts(shared.path(), &velocity), velocity_alone);

    // Code from the cache runs as code just compiled: fraud-rules, its
    // functions shared with fraud-velocity from the entries just rewritten
    // (the rest damaged, so compiled), emits the alerts it emits uncached.
    let cached = WasmHost::new(Some(shared.path().to_path_buf())).unwrap();
    let uncached = WasmHost::new(None).unwrap();
    assert_eq!(rules_output(&cached), rules_output(&uncached));
    let (hits, misses) = cached.function_cache_hits_and_misses().unwrap();
    assert!(hits > 0 && misses > 0, "{hits} reused, {misses} compiled");
}

/// What `fraud-rules` writes over 2,000 generated payments on `host`.
fn rules_output(host: &WasmHost) -> Vec<(String, Vec<u8>)> {
    let dir = tempfile::tempdir().unwrap();
    write_input(dir.path(), 3, 2, 1_000);
    let toml = pipeline_toml(
        dir.path(),
        &guest("fraud_rules"),
        crate::common::DEMO_RULES_INLINE,
        "",
        "",
    );
    let mut p = crate::common::open_pipeline(dir.path(), &toml, host).unwrap();
    let summary = p.run(host, &AtomicBool::new(false), &mut |_| {}).unwrap();
    assert_eq!(summary.rows_in, 2_000);
    let out = sink_files(&dir.path().join("out"));
    assert!(!out.is_empty(), "no alerts to compare");
    out
}

/// The compiled components (`.cwasm`) under a cache root.
fn components_in(root: &std::path::Path) -> Vec<std::path::PathBuf> {
    walk(root)
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "cwasm"))
        .collect()
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        if e.path().is_dir() {
            out.extend(walk(&e.path()));
        } else {
            out.push(e.path());
        }
    }
    out
}

/// The `txn_id` of generated payment `row` (0-based) of input file 0.
fn txn_id_at(dir: &std::path::Path, row: usize) -> String {
    let text = std::fs::read_to_string(dir.join("input/payments-0000.jsonl")).unwrap();
    let line = text.lines().nth(row).unwrap();
    let v: serde_json::Value = serde_json::from_str(line).unwrap();
    v["txn_id"].as_str().unwrap().to_string()
}

/// The `txn_id`s the echo operator wrote, in order.
fn echoed(dir: &std::path::Path) -> Vec<String> {
    sink_files(&dir.join("out"))
        .iter()
        .flat_map(|(_, bytes)| {
            String::from_utf8_lossy(bytes)
                .lines()
                .map(|l| {
                    let v: serde_json::Value = serde_json::from_str(l).unwrap();
                    v["txn_id"].as_str().unwrap().to_string()
                })
                .collect::<Vec<_>>()
        })
        .collect()
}

/// A 10,000-row epoch whose row 4,321 makes the echo operator loop (300 ms
/// deadline) under the default `on_error = "dead-letter"`.
fn poisoned_pipeline(dir: &std::path::Path) -> (std::path::PathBuf, String) {
    write_input(dir, 11, 1, 10_000);
    let poison = txn_id_at(dir, 4_321);
    let toml = pipeline_toml(
        dir,
        &guest("sandbox_tests"),
        &format!(r#"{{ mode = "echo", poison = "{poison}", poison_by = "loop" }}"#),
        "",
        "deadline = \"300ms\"",
    );
    let path = dir.join("pipeline.toml");
    std::fs::write(&path, toml).unwrap();
    (path, poison)
}

#[test]
fn a_poison_record_is_isolated_and_the_rest_of_its_epoch_is_processed() {
    let cache = tempfile::tempdir().unwrap();
    let clean = tempfile::tempdir().unwrap();
    let (pipeline, poison) = poisoned_pipeline(clean.path());
    let status = crate::common::weir_run_quiet(&pipeline, cache.path())
        .status()
        .unwrap();
    assert!(status.success(), "weir run stopped on a poison record");

    // The other 9,999 rows produced their output, in order.
    let all: Vec<String> = (0..10_000).map(|r| txn_id_at(clean.path(), r)).collect();
    let want: Vec<String> = all.iter().filter(|t| **t != poison).cloned().collect();
    assert_eq!(echoed(clean.path()), want);

    // The record is in the dead-letter output with its position and cause.
    let ck = clean.path().join("checkpoint");
    let letters = std::fs::read_to_string(ck.join("dead-letter/epoch-0000000000.jsonl")).unwrap();
    let letters: Vec<serde_json::Value> = letters
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(letters.len(), 1, "{letters:?}");
    let letter = &letters[0];
    let input_file = clean.path().join("input/payments-0000.jsonl");
    assert_eq!(letter["origin"], input_file.display().to_string().as_str());
    assert_eq!(letter["line"], 4_322);
    assert_eq!(letter["row"], 4_321);
    let wasm = std::fs::read(guest("sandbox_tests")).unwrap();
    assert_eq!(
        letter["operator"],
        weir_core::Digest::of(&wasm).to_string().as_str()
    );
    let reason = letter["reason"].as_str().unwrap();
    assert!(reason.contains("deadline"), "{reason}");
    let raw: serde_json::Value = serde_json::from_str(letter["raw"].as_str().unwrap()).unwrap();
    assert_eq!(raw["txn_id"], poison.as_str());

    // offsets/0 records the isolated row, so a replay skips exactly it.
    let entry: serde_json::Value =
        serde_json::from_slice(&std::fs::read(ck.join("offsets/0")).unwrap()).unwrap();
    assert_eq!(entry["isolated"][0]["row"], 4_321, "{entry}");

    // SIGKILL while the epoch is being searched or run, then restart: the
    // same record is isolated and the output is the same.
    let crashy = tempfile::tempdir().unwrap();
    let (pipeline, _) = poisoned_pipeline(crashy.path());
    let ck = crashy.path().join("checkpoint");
    for delay_ms in [200, 1_500] {
        let mut child = crate::common::weir_run_quiet(&pipeline, cache.path())
            .spawn()
            .unwrap();
        crate::common::wait_for("offsets/0", || ck.join("offsets/0").exists());
        std::thread::sleep(Duration::from_millis(delay_ms));
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(
            !ck.join("commits/0").exists(),
            "the kill came after the epoch committed; the test needs it mid-epoch"
        );
    }
    let status = crate::common::weir_run_quiet(&pipeline, cache.path())
        .status()
        .unwrap();
    assert!(status.success());
    assert_eq!(
        sink_files(&crashy.path().join("out")),
        sink_files(&clean.path().join("out"))
    );
    let letters_of = |dir: &std::path::Path| {
        let text =
            std::fs::read_to_string(dir.join("checkpoint/dead-letter/epoch-0000000000.jsonl"))
                .unwrap();
        // The origin names each run's own input directory.
        text.replace(&dir.display().to_string(), "DIR")
    };
    assert_eq!(letters_of(crashy.path()), letters_of(clean.path()));
}

#[test]
fn a_failure_that_needs_more_than_max_isolated_records_fails_the_epoch() {
    let host = WasmHost::new(None).unwrap();
    let dir = tempfile::tempdir().unwrap();
    write_input(dir.path(), 7, 1, 100);
    let toml = pipeline_toml(
        dir.path(),
        &guest("sandbox_tests"),
        r#"{ mode = "fail" }"#,
        "",
        "max_isolated = 3",
    );
    let mut p = crate::common::open_pipeline(dir.path(), &toml, &host).unwrap();
    let err = p
        .run(&host, &AtomicBool::new(false), &mut |_| {})
        .unwrap_err();
    let text = format!("{err:#}");
    let cause = text.find("sandbox-tests was told to fail");
    let note = text.find("operator.max_isolated` = 3");
    assert!(cause.is_some() && note.is_some(), "{text}");
    assert!(cause < note, "the real cause comes first: {text}");
    assert!(!dir.path().join("checkpoint/commits/0").exists());
}
