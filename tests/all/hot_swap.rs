//! Hot swap: operator versions deployed to a running pipeline through the
//! admin API (`weir deploy`), taking effect at an epoch boundary with the
//! digest in `offsets/N`; replay after a crash uses the recorded version;
//! refused uploads leave the active version running; shadow runs report
//! exactly the rows a candidate changes.

use crate::common::Running;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use weir_engine::versions::registry::Origin;
use weir_engine::versions::{Then, Upload};

pub(crate) const TOKEN: &str = "test-token-0123456789";

pub(crate) fn digest(bytes: &[u8]) -> String {
    weir_core::Digest::of(bytes).to_string()
}

pub(crate) fn sandbox_wasm() -> Vec<u8> {
    std::fs::read(crate::common::guest("sandbox_tests")).unwrap()
}

/// A pipeline over `dir/input` (one `txn_id` column) → `dir/out`, running
/// every 50 ms, with the admin API on a free port.
pub(crate) fn swap_pipeline(dir: &Path, operator: &Path, config: &str, extra: &str) -> PathBuf {
    let toml = format!(
        r#"name = "swap"
checkpoint = "{dir}/checkpoint"
[trigger]
mode = "processing-time"
interval = "50ms"
[source]
kind = "files"
path = "{dir}/input"
max_files_per_trigger = 2
schema = [ {{ name = "txn_id", type = "utf8" }} ]
[operator]
path = "{op}"
config = {config}
deadline = "60s"
[sink]
kind = "files"
path = "{dir}/out"
[admin]
listen = "127.0.0.1:0"
{extra}
"#,
        dir = dir.display(),
        op = operator.display(),
    );
    std::fs::create_dir_all(dir.join("input")).unwrap();
    let path = dir.join("pipeline.toml");
    std::fs::write(&path, toml).unwrap();
    path
}

/// Writes input file `n` with `rows` rows atomically (staged, then renamed).
pub(crate) fn write_file(dir: &Path, n: u64, rows: u64) {
    let staging = dir.join("staging");
    std::fs::create_dir_all(&staging).unwrap();
    std::fs::create_dir_all(dir.join("input")).unwrap();
    let text: String = (0..rows)
        .map(|i| format!("{{\"txn_id\":\"t-{n:04}-{i:03}\"}}\n"))
        .collect();
    let tmp = staging.join(format!("f-{n:04}.jsonl"));
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, dir.join("input").join(format!("f-{n:04}.jsonl"))).unwrap();
}

/// `weir` admin commands against a [`Running`] pipeline.
trait AdminCli {
    /// A `weir` admin command against this pipeline; `token` overrides the test token.
    fn weir(&self, args: &[&str], token: Option<&str>) -> Output;
}

impl AdminCli for Running {
    fn weir(&self, args: &[&str], token: Option<&str>) -> Output {
        Command::new(env!("CARGO_BIN_EXE_weir"))
            .args(args)
            .args(["--pipeline", "swap", "--admin", &self.url])
            .env("WEIR_ADMIN_TOKEN", token.unwrap_or(TOKEN))
            .env("WEIR_LOG", "warn")
            .output()
            .unwrap()
    }
}

pub(crate) fn entry(checkpoint: &Path, log: &str, epoch: u64) -> Option<Value> {
    let bytes = std::fs::read(checkpoint.join(log).join(epoch.to_string())).ok()?;
    serde_json::from_slice(&bytes).ok()
}

pub(crate) fn epochs(checkpoint: &Path) -> Vec<u64> {
    let mut e: Vec<u64> = std::fs::read_dir(checkpoint.join("offsets"))
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    e.sort_unstable();
    e
}

/// Output rows of `epoch` (the file sink writes a file per epoch and task).
pub(crate) fn output_rows(dir: &Path, epoch: u64) -> Vec<Value> {
    let out = dir.join("out");
    let files = weir_connectors::files::FileSink::epoch_files(&out, epoch).unwrap_or_default();
    files
        .iter()
        .flat_map(|f| {
            std::fs::read_to_string(f)
                .unwrap()
                .lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect::<Vec<Value>>()
        })
        .collect()
}

pub(crate) fn wait_committed(checkpoint: &Path, rows: u64) {
    crate::common::wait_for(&format!("{rows} committed rows"), || {
        crate::common::committed_rows(checkpoint) >= rows
    });
}

pub(crate) fn ok(out: &Output) -> String {
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "command failed: {text}");
    text
}

/// A running `weir run` of `sandbox-tests` in echo mode tagged `v1`, and
/// a `v2` component (new digest) with `v2_config` ready to deploy.
struct SwapSetup {
    dir: tempfile::TempDir,
    cache: tempfile::TempDir,
    ckpt: PathBuf,
    pipeline: PathBuf,
    v2: PathBuf,
    run: Running,
}

impl SwapSetup {
    fn start(v2_config: &str) -> SwapSetup {
        let dir = tempfile::tempdir().unwrap();
        let cache = tempfile::tempdir().unwrap();
        let ckpt = dir.path().join("checkpoint");
        let v2 = dir.path().join("v2.wasm");
        std::fs::write(&v2, crate::common::variant(&sandbox_wasm(), "v2")).unwrap();
        std::fs::write(dir.path().join("v2.json"), v2_config).unwrap();
        let v1 = crate::common::guest("sandbox_tests");
        let pipeline = swap_pipeline(dir.path(), &v1, r#"{ mode = "echo", tag = "v1" }"#, "");
        let run = Running::start(&pipeline, &ckpt, cache.path(), TOKEN, &[]);
        SwapSetup {
            dir,
            cache,
            ckpt,
            pipeline,
            v2,
            run,
        }
    }

    /// `weir deploy v2.wasm --config v2.json`; returns its output.
    fn deploy_v2(&self) -> String {
        ok(&self.run.weir(
            &[
                "deploy",
                self.v2.to_str().unwrap(),
                "--config",
                self.dir.path().join("v2.json").to_str().unwrap(),
            ],
            None,
        ))
    }

    fn digests(&self) -> (String, String) {
        (
            digest(&sandbox_wasm()),
            digest(&std::fs::read(&self.v2).unwrap()),
        )
    }
}

#[test]
fn swap_under_a_continuous_stream_runs_every_record_once_and_switches_at_one_boundary() {
    let setup = SwapSetup::start(r#"{"mode":"echo","tag":"v2"}"#);
    let (dir, ckpt, run) = (&setup.dir, &setup.ckpt, &setup.run);

    // A writer adds a file every 30 ms until told to stop, so input keeps
    // arriving before, during and after the swap.
    const ROWS: u64 = 50;
    let written = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (dir, written, stop) = (dir.path().to_path_buf(), written.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut n = 0;
            while !stop.load(Ordering::Relaxed) {
                write_file(&dir, n, ROWS);
                n += 1;
                written.store(n, Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(30));
            }
            n
        })
    };
    let files_written = || written.load(Ordering::Relaxed);
    wait_committed(ckpt, 15 * ROWS);
    let text = setup.deploy_v2();
    assert!(text.contains("version 2"), "{text}");
    let after_deploy = files_written();
    crate::common::wait_for("more input after the swap", || {
        files_written() >= after_deploy + 15
    });
    stop.store(true, Ordering::Relaxed);
    let files = writer.join().unwrap();
    wait_committed(ckpt, files * ROWS);
    let status = ok(&run.weir(&["status"], None));
    assert!(status.contains("active   version 2"), "{status}");
    let (d1, d2) = setup.digests();
    setup.run.interrupt();

    let mut seen = BTreeMap::new();
    let mut boundary = None;
    for epoch in epochs(ckpt) {
        let offsets = entry(ckpt, "offsets", epoch).unwrap();
        let digest = offsets["operator"]["digest"].as_str().unwrap().to_string();
        let tag = if digest == d1 {
            assert!(boundary.is_none(), "epoch {epoch} ran v1 after the swap");
            "v1"
        } else {
            assert_eq!(digest, d2, "epoch {epoch}");
            boundary.get_or_insert(epoch);
            "v2"
        };
        for row in output_rows(dir.path(), epoch) {
            assert_eq!(row["tag"], tag, "epoch {epoch} row {row}");
            *seen
                .entry(row["txn_id"].as_str().unwrap().to_string())
                .or_insert(0) += 1;
        }
    }
    let boundary = boundary.expect("no epoch ran v2");
    assert!(boundary > 0, "the swap came before any v1 epoch");
    assert_eq!(seen.len() as u64, files * ROWS, "records lost");
    assert!(seen.values().all(|&n| n == 1), "a record was emitted twice");
    eprintln!("swapped at epoch {boundary} of {}", epochs(ckpt).len());
}

#[test]
fn crash_right_after_a_swap_was_planned_replays_with_the_recorded_version() {
    // v2 counts its migrations in state and is slow (busy work per batch),
    // so the kill lands while its first epoch runs.
    let setup = SwapSetup::start(r#"{"mode":"migrations","spin":1500000000}"#);
    let (dir, ckpt) = (&setup.dir, &setup.ckpt);
    for n in 0..4 {
        write_file(dir.path(), n, 20);
    }
    wait_committed(ckpt, 80);
    setup.deploy_v2();
    let (d1, d2) = setup.digests();
    write_file(dir.path(), 4, 20);
    let mut swap_epoch = 0;
    crate::common::wait_for("the first epoch planned with v2", || {
        let last = *epochs(ckpt).last().unwrap();
        let planned = entry(ckpt, "offsets", last).unwrap();
        swap_epoch = last;
        planned["operator"]["digest"] == d2.as_str()
    });
    setup.run.kill(); // mid-epoch, we hope; checked next
    assert!(
        entry(ckpt, "commits", swap_epoch).is_none(),
        "the kill came after commits/{swap_epoch}; the test needs it mid-epoch"
    );
    let planned = entry(ckpt, "offsets", swap_epoch).unwrap();
    assert_eq!(planned["migrate_from"], d1.as_str());

    // The pipeline file still names v1: the replay must not care.
    let run = Running::start(&setup.pipeline, ckpt, setup.cache.path(), TOKEN, &[]);
    write_file(dir.path(), 5, 20);
    wait_committed(ckpt, 120);
    run.interrupt();

    let mut seen = BTreeSet::new();
    for epoch in epochs(ckpt) {
        let offsets = entry(ckpt, "offsets", epoch).unwrap();
        if epoch == swap_epoch {
            assert_eq!(offsets, planned, "offsets/{epoch} changed on replay");
        }
        let on_v2 = epoch >= swap_epoch;
        let want = if on_v2 { &d2 } else { &d1 };
        assert_eq!(
            offsets["operator"]["digest"],
            want.as_str(),
            "epoch {epoch}"
        );
        assert_eq!(
            offsets.get("migrate_from").is_some(),
            epoch == swap_epoch,
            "epoch {epoch}: migrate runs on the first v2 epoch only"
        );
        for row in output_rows(dir.path(), epoch) {
            assert!(
                seen.insert(row["txn_id"].as_str().unwrap().to_string()),
                "{row} twice"
            );
            if on_v2 {
                // Migrated exactly once, though its first epoch ran twice.
                assert_eq!(row["migrations"], 1, "epoch {epoch}: {row}");
                assert_eq!(row["migrated_from"], d1.as_str());
            } else {
                assert_eq!(row["tag"], "v1");
            }
        }
    }
    assert_eq!(seen.len(), 120);
}

/// The epoch that holds `file`'s rows, with its operator digest.
fn epoch_of_file(dir: &Path, n: u64) -> (u64, String, Value) {
    let ckpt = dir.join("checkpoint");
    for epoch in epochs(&ckpt) {
        let rows = output_rows(dir, epoch);
        if let Some(row) = rows.iter().find(|r| {
            r["txn_id"]
                .as_str()
                .unwrap()
                .starts_with(&format!("t-{n:04}-"))
        }) {
            let offsets = entry(&ckpt, "offsets", epoch).unwrap();
            return (
                epoch,
                offsets["operator"]["digest"].as_str().unwrap().to_string(),
                row.clone(),
            );
        }
    }
    panic!("file {n} is in no epoch's output");
}

#[test]
fn refused_uploads_say_why_and_the_active_version_keeps_running() {
    let dir = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let ckpt = dir.path().join("checkpoint");
    let v1 = crate::common::guest("sandbox_tests");
    let d1 = digest(&sandbox_wasm());
    let pipeline = swap_pipeline(
        dir.path(),
        &v1,
        r#"{ mode = "echo", tag = "v1" }"#,
        r#"max_upload = "160KiB""#,
    );
    let run = Running::start(&pipeline, &ckpt, cache.path(), TOKEN, &[]);
    let path = |name: &str, bytes: &[u8]| {
        let p = dir.path().join(name);
        std::fs::write(&p, bytes).unwrap();
        p.to_string_lossy().into_owned()
    };
    let v2 = path("v2.wasm", &crate::common::variant(&sandbox_wasm(), "v2"));
    let garbage = path("garbage.wasm", b"this is not wasm at all");
    let core = path("core.wasm", b"\0asm\x01\0\0\0");
    let wrong_world = crate::common::guest("wrong_world")
        .to_string_lossy()
        .into_owned();
    let too_big = crate::common::guest("fraud_rules")
        .to_string_lossy()
        .into_owned();
    let bad_config = path("bad.json", br#"{"mode":"no-such-mode"}"#);
    let v2_config = path("v2.json", br#"{"mode":"echo","tag":"v2"}"#);
    let golden_in = path(
        "golden.jsonl",
        b"{\"txn_id\":\"g-1\"}\n{\"txn_id\":\"g-2\"}\n",
    );
    let golden_wrong = path(
        "wrong.jsonl",
        b"{\"txn_id\":\"g-1\",\"tag\":\"v2\"}\n{\"txn_id\":\"g-2\",\"tag\":\"v9\"}\n",
    );
    let golden_right = path(
        "right.jsonl",
        b"{\"txn_id\":\"g-1\",\"tag\":\"v2\"}\n{\"txn_id\":\"g-2\",\"tag\":\"v2\"}\n",
    );

    let cases: Vec<(&str, Vec<&str>, Option<&str>, &str)> = vec![
        (
            "not wasm",
            vec!["deploy", &garbage],
            None,
            "is not WebAssembly",
        ),
        (
            "core module",
            vec!["deploy", &core],
            None,
            "core WebAssembly module, not a component",
        ),
        (
            "wrong world",
            vec!["deploy", &wrong_world],
            None,
            "does not implement the `weir:operator/operator@0.1.0` world",
        ),
        (
            "init fails",
            vec!["deploy", &v2, "--config", &bad_config],
            None,
            "`init` rejected the config: unknown mode `no-such-mode`",
        ),
        (
            "oversize",
            vec!["deploy", &too_big],
            None,
            "larger than the limit of 163840 bytes",
        ),
        (
            "golden mismatch",
            vec![
                "deploy",
                &v2,
                "--config",
                &v2_config,
                "--golden-input",
                &golden_in,
                "--golden-output",
                &golden_wrong,
            ],
            None,
            "golden output differs at row 2",
        ),
        (
            "no token",
            vec!["deploy", &v2],
            Some(""),
            "missing bearer token",
        ),
        (
            "wrong token",
            vec!["deploy", &v2],
            Some("not-the-token-at-all"),
            "wrong bearer token",
        ),
        (
            "wrong token, read",
            vec!["versions"],
            Some("not-the-token-at-all"),
            "wrong bearer token",
        ),
    ];
    write_file(dir.path(), 0, 10);
    wait_committed(&ckpt, 10);
    for (i, (what, args, token, expected)) in cases.iter().enumerate() {
        let out = run.weir(args, *token);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{what}: accepted");
        assert!(stderr.contains(expected), "{what}: {stderr}");
        // The pipeline goes on with v1.
        let n = i as u64 + 1;
        write_file(dir.path(), n, 10);
        wait_committed(&ckpt, (n + 1) * 10);
        let (epoch, digest, row) = epoch_of_file(dir.path(), n);
        assert_eq!(digest, d1, "{what}: epoch {epoch} did not run v1");
        assert_eq!(row["tag"], "v1");
    }
    let versions = ok(&run.weir(&["versions", "--json"], None));
    let listed: Value = serde_json::from_str(&versions).unwrap();
    assert_eq!(
        listed.as_array().unwrap().len(),
        1,
        "a refused upload was registered"
    );

    // The right golden output passes; staged, so v1 still runs.
    let text = ok(&run.weir(
        &[
            "deploy",
            &v2,
            "--config",
            &v2_config,
            "--golden-input",
            &golden_in,
            "--golden-output",
            &golden_right,
            "--stage",
        ],
        None,
    ));
    assert!(
        text.contains("version 2") && text.contains("not active"),
        "{text}"
    );
    run.interrupt();
}

/// Runs the pipeline of `toml` in `dir` to the end of its input.
fn run_to_end(
    dir: &Path,
    toml: &str,
    before: impl FnOnce(&weir_engine::pipeline::Pipeline),
) -> Vec<weir_core::progress::EpochProgress> {
    let host = weir_host::WasmHost::new(None).unwrap();
    let mut p = crate::common::open_pipeline(dir, toml, &host).unwrap();
    before(&p);
    let mut epochs = Vec::new();
    p.run(&host, &AtomicBool::new(false), &mut |e| {
        epochs.push(e.clone())
    })
    .unwrap();
    epochs
}

/// Alerts of one epoch: txn_id → the whole row.
fn alerts(rows: Vec<Value>) -> BTreeMap<String, Value> {
    rows.into_iter()
        .map(|r| (r["txn_id"].as_str().unwrap().to_string(), r))
        .collect()
}

#[test]
fn shadow_reports_exactly_the_rows_a_changed_rule_changes() {
    let rules = crate::common::DEMO_RULES_INLINE;
    let lowered = rules.replace("threshold = 2500.0", "threshold = 1000.0");
    assert_ne!(rules, lowered);
    let fraud_rules = crate::common::guest("fraud_rules");
    let toml =
        |dir: &Path, config: &str| crate::common::pipeline_toml(dir, &fraud_rules, config, "", "");
    // What each rule set alone emits, per epoch: the expectation.
    let (a, b, s) = (
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
    );
    for d in [&a, &b, &s] {
        crate::common::write_input(d.path(), 7, 4, 2_000);
    }
    let epochs_a = run_to_end(a.path(), &toml(a.path(), rules), |_| {});
    run_to_end(b.path(), &toml(b.path(), &lowered), |_| {});
    // The candidate's config as `init` receives it (JSON).
    let candidate_cfg =
        weir_engine::config::PipelineConfig::parse(&toml(s.path(), &lowered), s.path())
            .unwrap()
            .operator
            .config_json;
    let shadowed = run_to_end(s.path(), &toml(s.path(), rules), |p| {
        p.control()
            .upload(
                Upload {
                    wasm: std::fs::read(&fraud_rules).unwrap(),
                    config_json: Some(candidate_cfg.clone()),
                    artifacts: Default::default(),
                    golden: None,
                    label: Some("amount threshold 1000".into()),
                    origin: Origin::Upload { file_name: None },
                },
                Then::Shadow {
                    key: Some("txn_id".into()),
                },
                &weir_engine::versions::registry::Actor::named("test"),
            )
            .unwrap();
    });
    assert_eq!(shadowed.len(), epochs_a.len());
    // Shadowing wrote nothing: the sink holds exactly the active rules' output.
    assert_eq!(
        crate::common::sink_files(&s.path().join("out")),
        crate::common::sink_files(&a.path().join("out"))
    );
    let (mut added, mut changed) = (0, 0);
    for p in &shadowed {
        let report = p.shadow.as_ref().expect("every epoch has a shadow report");
        assert!(report.error.is_none(), "{:?}", report.error);
        let before = alerts(output_rows(a.path(), p.epoch));
        let after = alerts(output_rows(b.path(), p.epoch));
        let want_added: BTreeSet<&String> =
            after.keys().filter(|k| !before.contains_key(*k)).collect();
        let want_removed: BTreeSet<&String> =
            before.keys().filter(|k| !after.contains_key(*k)).collect();
        let want_changed: BTreeSet<&String> = after
            .iter()
            .filter(|(k, row)| before.get(*k).is_some_and(|old| old != *row))
            .map(|(k, _)| k)
            .collect();
        fn got(keys: &[String]) -> BTreeSet<&String> {
            keys.iter().collect()
        }
        assert_eq!(
            got(&report.added_keys),
            want_added,
            "epoch {} added",
            p.epoch
        );
        assert_eq!(
            got(&report.removed_keys),
            want_removed,
            "epoch {} removed",
            p.epoch
        );
        assert_eq!(
            got(&report.changed_keys),
            want_changed,
            "epoch {} changed",
            p.epoch
        );
        assert_eq!(report.added as usize, want_added.len());
        assert_eq!(report.changed as usize, want_changed.len());
        assert_eq!(report.active_rows as usize, before.len());
        assert_eq!(report.candidate_rows as usize, after.len());
        added += want_added.len();
        changed += want_changed.len();
    }
    assert!(
        added > 0 && changed > 0,
        "the rule change made no difference ({added}, {changed})"
    );
    eprintln!(
        "shadow: {added} rows added, {changed} changed over {} epochs",
        shadowed.len()
    );
}

#[test]
fn a_restart_keeps_the_deployed_version_unless_the_pipeline_file_changed() {
    let dir = tempfile::tempdir().unwrap();
    let v1 = crate::common::guest("sandbox_tests");
    let v2 = crate::common::variant(&sandbox_wasm(), "v2");
    let toml = |tag: &str| {
        crate::common::pipeline_toml(
            dir.path(),
            &v1,
            &format!(r#"{{ mode = "echo", tag = "{tag}" }}"#),
            "",
            "",
        )
    };
    let last_digest = |epochs: &[weir_core::progress::EpochProgress]| {
        let e = epochs.last().unwrap();
        (e.operator_digest.to_string(), e.operator_version)
    };
    crate::common::write_input(dir.path(), 1, 1, 10);
    let first = run_to_end(dir.path(), &toml("v1"), |p| {
        p.control()
            .upload(
                Upload {
                    wasm: v2.clone(),
                    config_json: None,
                    artifacts: Default::default(),
                    golden: None,
                    label: None,
                    origin: Origin::Upload { file_name: None },
                },
                Then::Activate,
                &weir_engine::versions::registry::Actor::named("test"),
            )
            .unwrap();
    });
    assert_eq!(last_digest(&first), (digest(&v2), Some(2)));
    // Same pipeline file: the deployed v2 stays.
    crate::common::write_payments(dir.path(), 1, 1, 10..20);
    let second = run_to_end(dir.path(), &toml("v1"), |_| {});
    assert_eq!(last_digest(&second), (digest(&v2), Some(2)));
    // Edited pipeline file: its operator becomes version 3 and runs.
    crate::common::write_payments(dir.path(), 1, 2, 20..30);
    let third = run_to_end(dir.path(), &toml("v3"), |p| {
        assert_eq!(p.control().status().active.unwrap().number, 3);
    });
    assert_eq!(last_digest(&third), (digest(&sandbox_wasm()), Some(3)));
    let rows = output_rows(dir.path(), third.last().unwrap().epoch);
    assert!(rows.iter().all(|r| r["tag"] == "v3"), "{rows:?}");
}

#[test]
fn watch_redeploys_a_changed_operator_file_and_keeps_running_through_a_bad_one() {
    let dir = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let ckpt = dir.path().join("checkpoint");
    let op = dir.path().join("op.wasm");
    std::fs::write(&op, sandbox_wasm()).unwrap();
    let pipeline = swap_pipeline(dir.path(), &op, r#"{ mode = "echo", tag = "w" }"#, "");
    let run = Running::start(&pipeline, &ckpt, cache.path(), TOKEN, &["--watch"]);
    write_file(dir.path(), 0, 5);
    wait_committed(&ckpt, 5);
    let replace = |bytes: &[u8]| {
        let tmp = dir.path().join("op.wasm.tmp");
        std::fs::write(&tmp, bytes).unwrap();
        std::fs::rename(&tmp, &op).unwrap();
    };
    let v2 = crate::common::variant(&sandbox_wasm(), "v2");
    replace(&v2);
    crate::common::wait_for("the watcher to deploy v2", || {
        let s = run.weir(&["status", "--json"], None);
        serde_json::from_slice::<Value>(&s.stdout)
            .is_ok_and(|v| v["status"]["active"]["digest"] == digest(&v2).as_str())
    });
    write_file(dir.path(), 1, 5);
    wait_committed(&ckpt, 10);
    assert_eq!(epoch_of_file(dir.path(), 1).1, digest(&v2));
    // A broken build is refused; v2 keeps running.
    replace(b"half a build");
    std::thread::sleep(Duration::from_millis(1500));
    write_file(dir.path(), 2, 5);
    wait_committed(&ckpt, 15);
    assert_eq!(epoch_of_file(dir.path(), 2).1, digest(&v2));
    run.interrupt();
}

#[test]
fn an_activated_looping_version_is_rolled_back_automatically_and_epochs_go_on() {
    let dir = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let ckpt = dir.path().join("checkpoint");
    let v1 = crate::common::guest("sandbox_tests");
    let pipeline = swap_pipeline(dir.path(), &v1, r#"{ mode = "echo", tag = "v1" }"#, "");
    let text = std::fs::read_to_string(&pipeline)
        .unwrap()
        .replace(r#"deadline = "60s""#, r#"deadline = "500ms""#);
    std::fs::write(&pipeline, text).unwrap();
    let v2 = dir.path().join("v2.wasm");
    std::fs::write(&v2, crate::common::variant(&sandbox_wasm(), "v2")).unwrap();
    let v2_config = dir.path().join("v2.json");
    std::fs::write(&v2_config, r#"{"mode":"loop"}"#).unwrap();
    let run = Running::start(&pipeline, &ckpt, cache.path(), TOKEN, &[]);
    for n in 0..3 {
        write_file(dir.path(), n, 20);
    }
    wait_committed(&ckpt, 60);
    let text = ok(&run.weir(
        &[
            "deploy",
            v2.to_str().unwrap(),
            "--config",
            v2_config.to_str().unwrap(),
        ],
        None,
    ));
    assert!(text.contains("version 2"), "{text}");
    for n in 3..8 {
        write_file(dir.path(), n, 20);
    }
    // The pipeline keeps committing epochs: on version 1 again.
    wait_committed(&ckpt, 160);
    let status = ok(&run.weir(&["status"], None));
    assert!(status.contains("active   version 1"), "{status}");
    let registry: Value =
        serde_json::from_slice(&std::fs::read(ckpt.join("operators/registry.json")).unwrap())
            .unwrap();
    let events = registry["events"].as_array().unwrap();
    let auto = events
        .iter()
        .find(|e| e["action"] == "auto-rollback")
        .unwrap_or_else(|| panic!("no auto-rollback in {events:?}"));
    assert_eq!(auto["version"], 1, "{auto}");
    assert_eq!(auto["replaced"], 2, "{auto}");
    assert_eq!(auto["by"]["name"], "engine", "{auto}");
    let note = auto["note"].as_str().unwrap();
    assert!(note.contains("deadline"), "{note}");
    run.interrupt();

    // Every epoch ran (and records) version 1, every record exactly once.
    let d1 = digest(&sandbox_wasm());
    let mut seen = BTreeMap::new();
    for epoch in epochs(&ckpt) {
        let offsets = entry(&ckpt, "offsets", epoch).unwrap();
        assert_eq!(offsets["operator"]["digest"], d1.as_str(), "epoch {epoch}");
        assert!(entry(&ckpt, "commits", epoch).is_some(), "epoch {epoch}");
        for row in output_rows(dir.path(), epoch) {
            assert_eq!(row["tag"], "v1", "epoch {epoch}");
            *seen
                .entry(row["txn_id"].as_str().unwrap().to_string())
                .or_insert(0) += 1;
        }
    }
    assert_eq!(seen.len(), 160, "records lost");
    assert!(seen.values().all(|&n| n == 1), "a record was emitted twice");
}

/// Open file descriptors of process `pid`.
fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count())
}

/// Whether the server closed `stream` within `within` (a read sees EOF or
/// a reset).
fn closed_by_server(stream: &mut std::net::TcpStream, within: Duration) -> bool {
    use std::io::Read;
    stream.set_read_timeout(Some(within)).unwrap();
    let mut buf = [0u8; 256];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => continue, // an error answer before closing
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return false,
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => return false,
            Err(_) => return true,
        }
    }
}

/// `weir run` of the sandbox's `echo` pipeline (v1) with the `[admin]`
/// settings `admin`: its directory and compile cache (kept while it runs),
/// its checkpoint and the process.
fn echo_run(admin: &str) -> (tempfile::TempDir, tempfile::TempDir, PathBuf, Running) {
    let dir = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let ckpt = dir.path().join("checkpoint");
    let v1 = crate::common::guest("sandbox_tests");
    let pipeline = swap_pipeline(dir.path(), &v1, r#"{ mode = "echo", tag = "v1" }"#, admin);
    let run = Running::start(&pipeline, &ckpt, cache.path(), TOKEN, &[]);
    (dir, cache, ckpt, run)
}

#[test]
fn hostile_clients_cannot_stop_the_pipeline_or_its_admin_api() {
    let (dir, _cache, ckpt, run) = echo_run("max_connections = 16\nheader_timeout = \"1s\"");
    let addr = run.url.trim_start_matches("http://").to_string();
    write_file(dir.path(), 0, 10);
    wait_committed(&ckpt, 10);

    // 300 idle connections (bounded, 127.0.0.1 only): past the limit of 16
    // they are closed at once, so the process's descriptors stay bounded.
    let fds_before = open_fds(run.pid());
    let mut idle: Vec<std::net::TcpStream> = (0..300)
        .filter_map(|_| std::net::TcpStream::connect(&addr).ok())
        .collect();
    assert_eq!(idle.len(), 300);
    std::thread::sleep(Duration::from_millis(300));
    let fds_during = open_fds(run.pid());
    assert!(
        fds_during < fds_before + 40,
        "descriptors grew from {fds_before} to {fds_during}"
    );
    let closed_at_once = idle
        .iter_mut()
        .skip(100)
        .map(|s| closed_by_server(s, Duration::from_millis(200)))
        .filter(|&closed| closed)
        .count();
    assert!(closed_at_once >= 150, "{closed_at_once} of 200 closed");
    // The epoch loop goes on meanwhile.
    write_file(dir.path(), 1, 10);
    wait_committed(&ckpt, 20);

    // The held ones and a half-sent request are closed by the header timeout.
    let mut half = (0..100)
        .find_map(|_| {
            // Wait for a free slot (the idle ones time out after 1 s).
            let mut s = std::net::TcpStream::connect(&addr).unwrap();
            use std::io::Write;
            if s.write_all(b"GET /v1/health HTTP/1.1\r\nHost: x\r\n")
                .is_ok()
                && !closed_by_server(&mut s, Duration::from_millis(100))
            {
                return Some(s);
            }
            std::thread::sleep(Duration::from_millis(200));
            None
        })
        .expect("no connection slot came free: idle connections are never closed");
    let started = std::time::Instant::now();
    assert!(
        closed_by_server(&mut half, Duration::from_secs(20)),
        "a half-sent request kept its connection"
    );
    assert!(started.elapsed() < Duration::from_secs(15));
    drop(idle);

    // Bearer in any case works; a wrong token still does not.
    let client = reqwest::blocking::Client::new();
    let status_url = format!("{}/v1/pipelines/swap", run.url);
    for scheme in ["bearer", "BEARER", "Bearer"] {
        let r = client
            .get(&status_url)
            .header("Authorization", format!("{scheme} {TOKEN}"))
            .send()
            .unwrap();
        assert_eq!(r.status(), 200, "{scheme}");
    }
    let r = client
        .get(&status_url)
        .header("Authorization", "bearer not-the-token-at-all")
        .send()
        .unwrap();
    assert_eq!(r.status(), 401);

    // Ten parallel uploads of one component with different configs all
    // succeed (the blob store's temp files are per writer).
    let v2 = dir.path().join("v2.wasm");
    std::fs::write(&v2, crate::common::variant(&sandbox_wasm(), "v2")).unwrap();
    let children: Vec<_> = (0..10)
        .map(|i| {
            let config = dir.path().join(format!("c{i}.json"));
            std::fs::write(&config, format!(r#"{{"mode":"echo","tag":"c{i}"}}"#)).unwrap();
            Command::new(env!("CARGO_BIN_EXE_weir"))
                .args(["deploy", v2.to_str().unwrap(), "--stage", "--config"])
                .arg(&config)
                .args(["--pipeline", "swap", "--admin", &run.url])
                .env("WEIR_ADMIN_TOKEN", TOKEN)
                .env("WEIR_LOG", "warn")
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for child in children {
        ok(&child.wait_with_output().unwrap());
    }
    let versions = ok(&run.weir(&["versions"], None));
    for n in 2..=11 {
        assert!(versions.contains(&format!("{n}")), "{versions}");
    }
    write_file(dir.path(), 2, 10);
    wait_committed(&ckpt, 30);
    run.interrupt();
}

#[test]
fn a_stuck_epoch_keeps_the_admin_api_up_and_a_rollback_unsticks_it() {
    let dir = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let ckpt = dir.path().join("checkpoint");
    let v1 = crate::common::guest("sandbox_tests");
    let pipeline = swap_pipeline(dir.path(), &v1, r#"{ mode = "echo", tag = "v1" }"#, "");
    // No automatic rollback, and a failure on more than one record is the
    // version's: the epoch cannot proceed until someone acts.
    let text = std::fs::read_to_string(&pipeline).unwrap().replace(
        r#"deadline = "60s""#,
        "deadline = \"60s\"\nprobation_epochs = 0\nmax_isolated = 1",
    );
    std::fs::write(&pipeline, text).unwrap();
    let v2 = dir.path().join("v2.wasm");
    std::fs::write(&v2, crate::common::variant(&sandbox_wasm(), "v2")).unwrap();
    let v2_config = dir.path().join("v2.json");
    std::fs::write(&v2_config, r#"{"mode":"fail"}"#).unwrap();
    let run = Running::start(&pipeline, &ckpt, cache.path(), TOKEN, &[]);
    write_file(dir.path(), 0, 20);
    wait_committed(&ckpt, 20);
    ok(&run.weir(
        &[
            "deploy",
            v2.to_str().unwrap(),
            "--config",
            v2_config.to_str().unwrap(),
        ],
        None,
    ));
    write_file(dir.path(), 1, 20);
    let stuck = 1;
    crate::common::wait_for("the epoch on version 2 to be planned", || {
        entry(&ckpt, "offsets", stuck).is_some()
    });
    // Stuck for a few retries: the process and its API stay up.
    std::thread::sleep(Duration::from_secs(3));
    assert!(
        entry(&ckpt, "commits", stuck).is_none(),
        "v2 cannot commit it"
    );
    let status = ok(&run.weir(&["status"], None));
    assert!(status.contains("active   version 2"), "{status}");
    let metrics = reqwest::blocking::Client::new()
        .get(format!("{}/metrics", run.url))
        .bearer_auth(TOKEN)
        .send()
        .unwrap()
        .text()
        .unwrap();
    let failures: f64 = metrics
        .lines()
        .find(|l| l.starts_with("weir_epoch_failures_total"))
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
        .unwrap_or_else(|| panic!("{metrics}"));
    assert!(failures >= 2.0, "{failures} failed attempts");

    ok(&run.weir(&["rollback"], None));
    write_file(dir.path(), 2, 20);
    wait_committed(&ckpt, 60);
    run.interrupt();
    let d1 = digest(&sandbox_wasm());
    let replanned = entry(&ckpt, "offsets", stuck).unwrap();
    assert_eq!(replanned["operator"]["digest"], d1.as_str());
    let tags: BTreeSet<String> = (0..=2)
        .flat_map(|e| output_rows(dir.path(), e))
        .map(|r| r["tag"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(tags, BTreeSet::from(["v1".to_string()]));
}

/// Clients that open connections and never finish a request's headers
/// fill `max_connections`; a health check and a call with the token are
/// still answered: each new connection displaces the oldest one that is not
/// in a request.
#[test]
fn connections_that_never_send_a_request_cannot_lock_out_the_api() {
    use std::io::Write;
    let (_dir, _cache, _ckpt, run) = echo_run("max_connections = 16\nheader_timeout = \"60s\"");
    let addr = run.url.trim_start_matches("http://").to_string();
    let mut stuck = Vec::new();
    for _ in 0..100 {
        let mut s = std::net::TcpStream::connect(&addr).unwrap();
        s.write_all(b"GET /v1/health HTTP/1.1\r\nHo").unwrap();
        stuck.push(s);
    }
    for _ in 0..3 {
        health_and_status_answered(&run.url);
    }
    let closed = stuck
        .iter_mut()
        .map(|s| closed_by_server(s, Duration::from_millis(200)))
        .filter(|&closed| closed)
        .count();
    assert!(
        closed >= 100 - 16,
        "only {closed} of the stuck connections were closed"
    );
}

/// A request without the token is answered 401 from its headers and its
/// connection closed, its body never read: forty clients sending bodies
/// slowly hold no connection slot, and health checks and calls with the
/// token still get through.
#[test]
fn a_request_without_the_token_is_refused_at_its_headers() {
    use std::io::{Read, Write};
    // Forty refusals from one address would make it wait (the token
    // backoff, tested in admin_security): not what this test is about.
    let (_dir, _cache, _ckpt, run) = echo_run("max_connections = 16\nauth_free_failures = 1000");
    let addr = run.url.trim_start_matches("http://").to_string();
    let mut slow = Vec::new();
    for i in 0..40 {
        let mut s = std::net::TcpStream::connect(&addr).unwrap();
        s.write_all(
            b"POST /v1/pipelines/swap/versions HTTP/1.1\r\nHost: x\r\n\
              Content-Length: 1000000\r\n\r\nfirst bytes of a slow body",
        )
        .unwrap();
        // Far less than `admin.request_timeout` (300 s), which the body
        // of a refused request used to be read for.
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut head = [0u8; 12];
        s.read_exact(&mut head)
            .unwrap_or_else(|e| panic!("connection {i}: no answer from the headers: {e}"));
        assert_eq!(&head, b"HTTP/1.1 401", "connection {i}");
        assert!(
            closed_by_server(&mut s, Duration::from_secs(10)),
            "connection {i} was kept open for its body"
        );
        slow.push(s);
    }
    health_and_status_answered(&run.url);
}

/// A health check and a call with the token are answered.
fn health_and_status_answered(url: &str) {
    let client = reqwest::blocking::Client::new();
    let health = client.get(format!("{url}/v1/health")).send().unwrap();
    assert_eq!(health.status(), 200);
    let status = client
        .get(format!("{url}/v1/pipelines/swap"))
        .header("Authorization", format!("Bearer {TOKEN}"))
        .send()
        .unwrap();
    assert_eq!(status.status(), 200);
}
