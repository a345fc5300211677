//! The host-owned keyed state (RocksDB under `checkpoint/state/`) through a
//! real guest: `sandbox-tests` in `count` mode emits every payment with the
//! running count of its card, kept in state. Checked against the same count
//! computed natively: across epochs and restarts, after an epoch whose
//! state was written but never committed, after SIGKILLs, and after the
//! working copy is deleted and rebuilt from a snapshot.

use crate::common::{guest, pipeline_toml, sink_files};
use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::atomic::AtomicBool;

const PER_FILE: u64 = 400;

/// Input files `first..first + count` of `PER_FILE` payments each.
pub(crate) fn write_files(dir: &Path, first: u64, count: u64) {
    for f in first..first + count {
        crate::common::write_payments(dir, 3, f, f * PER_FILE..(f + 1) * PER_FILE);
    }
}

/// The `count` pipeline; `tables` are appended (e.g. a `[state]` table).
pub(crate) fn count_toml(dir: &Path, tables: &str) -> String {
    let toml = pipeline_toml(
        dir,
        &guest("sandbox_tests"),
        r#"{ mode = "count" }"#,
        "",
        "",
    );
    format!("{toml}\n{tables}\n")
}

fn run(dir: &Path, toml: &str) -> anyhow::Result<Vec<weir_core::progress::EpochProgress>> {
    crate::common::run_epochs(dir, toml)
}

/// `txn_id -> seen` as the native reference computes it over files `0..files`.
pub(crate) fn expected_counts(files: u64) -> BTreeMap<String, i64> {
    let mut per_card: HashMap<String, i64> = HashMap::new();
    let mut out = BTreeMap::new();
    for i in 0..files * PER_FILE {
        let (p, _) = weir_connectors::generator::payments::payment(3, i);
        let n = per_card.entry(p.card_id.clone()).or_default();
        *n += 1;
        out.insert(p.txn_id, *n);
    }
    out
}

/// `txn_id -> seen` as the sink holds it; a txn_id twice is a failure.
pub(crate) fn output_counts(dir: &Path) -> BTreeMap<String, i64> {
    let mut out = BTreeMap::new();
    for (_, bytes) in sink_files(&dir.join("out")) {
        for line in String::from_utf8(bytes).unwrap().lines() {
            let v: serde_json::Value = serde_json::from_str(line).unwrap();
            let id = v["txn_id"].as_str().unwrap().to_string();
            let seen = v["seen"].as_i64().unwrap();
            assert!(out.insert(id.clone(), seen).is_none(), "{id} twice");
        }
    }
    out
}

/// Every key and value of the state (without the store's bookkeeping).
pub(crate) fn state_dump(dir: &Path) -> Vec<(Vec<u8>, Vec<u8>)> {
    let ck = dir.join("checkpoint");
    let last = weir_core::checkpoint::Checkpoint::inspect(&ck)
        .unwrap()
        .commits
        .latest()
        .unwrap()
        .map(|(e, _)| e);
    let (store, _) = weir_state::StateStore::open(
        &ck.join("state"),
        weir_state::SnapshotPolicy::default(),
        last,
    )
    .unwrap();
    let mut all = Vec::new();
    store
        .reader()
        .scan_prefix(b"d", |k, v| {
            all.push((k.to_vec(), v.to_vec()));
            true
        })
        .unwrap();
    all
}

#[test]
fn state_survives_a_hot_swap_to_a_new_version() {
    let dir = tempfile::tempdir().unwrap();
    write_files(dir.path(), 0, 3);
    let toml = count_toml(dir.path(), "");
    run(dir.path(), &toml).unwrap();
    // Version 2 (new code, same namespace) takes over at the next epoch.
    write_files(dir.path(), 3, 2);
    let v2 = crate::common::variant(&std::fs::read(guest("sandbox_tests")).unwrap(), "v2");
    let host = weir_host::WasmHost::new(None).unwrap();
    let mut p = crate::common::open_pipeline(dir.path(), &toml, &host).unwrap();
    p.control()
        .upload(
            weir_engine::versions::Upload {
                wasm: v2.clone(),
                config_json: None,
                artifacts: Default::default(),
                golden: None,
                label: None,
                origin: weir_engine::versions::registry::Origin::Upload { file_name: None },
            },
            weir_engine::versions::Then::Activate,
            &weir_engine::versions::registry::Actor::named("test"),
        )
        .unwrap();
    let mut digests = Vec::new();
    p.run(&host, &AtomicBool::new(false), &mut |e| {
        digests.push(e.operator_digest)
    })
    .unwrap();
    assert_eq!(digests, vec![weir_core::Digest::of(&v2); 2]);
    // Its counts go on from the old version's.
    assert_eq!(output_counts(dir.path()), expected_counts(5));
}

#[test]
fn counts_carry_across_epochs_and_restarts() {
    let dir = tempfile::tempdir().unwrap();
    write_files(dir.path(), 0, 3);
    let toml = count_toml(dir.path(), "");
    assert_eq!(run(dir.path(), &toml).unwrap().len(), 3);
    assert_eq!(output_counts(dir.path()), expected_counts(3));
    // New data after a restart continues from the committed state.
    write_files(dir.path(), 3, 2);
    assert_eq!(run(dir.path(), &toml).unwrap().len(), 2);
    let counts = output_counts(dir.path());
    assert_eq!(counts, expected_counts(5));
    assert!(counts.values().any(|&n| n > 1), "some card pays twice");
}

#[test]
fn state_written_by_an_epoch_that_never_committed_is_not_seen() {
    let dir = tempfile::tempdir().unwrap();
    write_files(dir.path(), 0, 4);
    let toml = count_toml(dir.path(), "");
    run(dir.path(), &toml).unwrap();
    let before = sink_files(&dir.path().join("out"));
    let state_before = state_dump(dir.path());
    // The run "died" after epoch 3's state was written, before commits/3:
    // its replay must read the state of epoch 2, not its own writes.
    std::fs::remove_file(dir.path().join("checkpoint/commits/3")).unwrap();
    let epochs = run(dir.path(), &toml).unwrap();
    assert_eq!(epochs.iter().filter(|e| e.replay).count(), 1);
    assert_eq!(sink_files(&dir.path().join("out")), before);
    assert_eq!(state_dump(dir.path()), state_before);
    assert_eq!(output_counts(dir.path()), expected_counts(4));
}

#[test]
fn a_deleted_working_copy_is_rebuilt_from_a_snapshot_and_replay() {
    let dir = tempfile::tempdir().unwrap();
    write_files(dir.path(), 0, 5);
    let toml = count_toml(dir.path(), "[state]\nsnapshot_every = 2");
    run(dir.path(), &toml).unwrap();
    let state_before = state_dump(dir.path());
    let snapshots = dir.path().join("checkpoint/state/snapshots");
    assert!(snapshots.join("1").is_dir() && snapshots.join("3").is_dir());
    std::fs::remove_dir_all(dir.path().join("checkpoint/state/working")).unwrap();
    // Snapshot 3 + a replay of epoch 4 (operator only) give the state back.
    let epochs = run(dir.path(), &toml).unwrap();
    assert!(epochs.is_empty(), "nothing new to process");
    assert_eq!(state_dump(dir.path()), state_before);
    // New input then counts on from the rebuilt state.
    std::fs::remove_dir_all(dir.path().join("checkpoint/state/working")).unwrap();
    write_files(dir.path(), 5, 2);
    run(dir.path(), &toml).unwrap();
    assert_eq!(output_counts(dir.path()), expected_counts(7));
}

#[test]
fn sigkill_at_random_moments_leaves_the_state_and_output_of_an_uninterrupted_run() {
    killed_runs_end_as_an_uninterrupted_one("");
}

/// The `count` pipeline (with `top` in front of it: e.g. `parallelism`),
/// SIGKILLed at random moments: its output, counts and state end as an
/// uninterrupted run's.
pub(crate) fn killed_runs_end_as_an_uninterrupted_one(top: &'static str) {
    let setup = |dir: &Path, _run: &str| {
        write_files(dir, 0, crate::common::crash_epochs(40));
        let file = dir.join("pipeline.toml");
        let extra = "[state]\nsnapshot_every = 3\n[wal]\ncompact_every = 5\nretain = 2";
        std::fs::write(&file, format!("{top}{}", count_toml(dir, extra))).unwrap();
        file
    };
    let (clean, crashy) =
        crate::common::uninterrupted_and_killed(setup, crate::common::crash_kills());
    assert_eq!(
        sink_files(&crashy.path().join("out")),
        sink_files(&clean.path().join("out"))
    );
    assert_eq!(
        output_counts(crashy.path()),
        expected_counts(crate::common::crash_epochs(40))
    );
    assert_eq!(state_dump(crashy.path()), state_dump(clean.path()));
}

#[test]
fn an_operator_hoarding_state_fails_its_epoch_and_commits_nothing() {
    let dir = tempfile::tempdir().unwrap();
    write_files(dir.path(), 0, 1);
    let toml = pipeline_toml(
        dir.path(),
        &guest("sandbox_tests"),
        r#"{ mode = "state-bomb" }"#,
        "",
        "memory = \"16MiB\"\non_error = \"fail\"",
    );
    let err = format!("{:#}", run(dir.path(), &toml).unwrap_err());
    assert!(
        err.contains("state changes hold") && err.contains("memory limit"),
        "{err}"
    );
    assert!(!dir.path().join("checkpoint/commits/0").exists());
    assert!(state_dump(dir.path()).is_empty());
}
