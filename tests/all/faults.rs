//! An epoch is retried only from a state it can be retried from: an I/O
//! error at every boundary of an epoch's phases (before and after
//! `offsets/N`, the sink, the state commit, `commits/N`, the snapshot and
//! the compaction), in micro-batch and real-time mode, leaves output equal
//! to an uninterrupted run's, and no committed epoch's output is written
//! again. The operator counts payments per card in state and alerts on the
//! second one, so an epoch re-run over state that already holds its own
//! writes emits other rows than the first run did.

use crate::common::{
    guest, run_epochs, sink_files, sorted_rows, wait_for, write_input, Background,
};
use std::path::Path;
use std::time::SystemTime;
use weir_core::faults::{self, FaultPoint};

const FILES: u64 = 12;
const PER_FILE: u64 = 500;

/// `fraud-velocity` alerting on a card's second payment within 60 s.
const STRICT_VELOCITY: &str = r#"{ alert_threshold = 0.7, rules = [
  { rule = "amount_above", threshold = 2500.0, weight = 0.5 } ],
  velocity = { window_ms = 60000, max_payments = 1, weight = 0.7 } }"#;

/// A files → `fraud-velocity` → files pipeline in `dir`, one input file
/// per epoch (micro-batch), a snapshot every 2 epochs and a compaction
/// every 3.
fn pipeline(dir: &Path, trigger: &str) -> String {
    format!(
        r#"name = "test"
checkpoint = "{dir}/checkpoint"
[trigger]
{trigger}
[source]
kind = "files"
path = "{dir}/input"
max_files_per_trigger = 1
{schema}
[operator]
path = "{op}"
config = {STRICT_VELOCITY}
[sink]
kind = "files"
path = "{dir}/out"
[state]
snapshot_every = 2
[wal]
compact_every = 3
retain = 1000
"#,
        dir = dir.display(),
        op = guest("fraud_velocity").display(),
        schema = weir_connectors::generator::payments::SCHEMA_TOML,
    )
}

/// The epoch each boundary fails at, and how often in a row.
fn arm_every_boundary(checkpoint: &Path) {
    for (i, point) in FaultPoint::ALL.into_iter().enumerate() {
        let epoch = i as u64 + 1;
        let times = if point == FaultPoint::StateCommitted {
            2
        } else {
            1
        };
        faults::arm(checkpoint, point, Some(epoch), times);
    }
}

fn modified(path: &Path) -> SystemTime {
    std::fs::metadata(path).unwrap().modified().unwrap()
}

/// No output file was written after its epoch's `commits/N`.
fn no_committed_output_rewritten(dir: &Path) {
    let commits = dir.join("checkpoint/commits");
    let mut checked = 0;
    for (name, _) in sink_files(&dir.join("out")) {
        let epoch: u64 = name["epoch-".len().."epoch-".len() + 10].parse().unwrap();
        let commit = commits.join(epoch.to_string());
        let out = modified(&dir.join("out").join(&name));
        assert!(
            out <= modified(&commit),
            "{name} was written after commits/{epoch}"
        );
        checked += 1;
    }
    assert!(checked > 0, "no output to check");
}

/// Runs the pipeline with `trigger` in the background with a fault at
/// every boundary until every input row is committed; returns its output.
fn run_with_faults(trigger: &str) -> (tempfile::TempDir, Vec<String>) {
    let dir = tempfile::tempdir().unwrap();
    write_input(dir.path(), 7, FILES, PER_FILE);
    let checkpoint = dir.path().join("checkpoint");
    arm_every_boundary(&checkpoint);
    let run = Background::start(dir.path(), pipeline(dir.path(), trigger));
    wait_for("every fault to be hit and every row committed", || {
        assert!(run.is_running(), "the pipeline stopped");
        faults::pending(&checkpoint) == 0
            && crate::common::committed_rows(&checkpoint) == FILES * PER_FILE
    });
    run.stop().expect("the pipeline ends cleanly");
    faults::disarm(&checkpoint);
    no_committed_output_rewritten(dir.path());
    let rows = sorted_rows(dir.path());
    (dir, rows)
}

fn uninterrupted() -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    write_input(dir.path(), 7, FILES, PER_FILE);
    let epochs = run_epochs(
        dir.path(),
        &pipeline(dir.path(), "mode = \"available-now\""),
    )
    .unwrap();
    assert_eq!(epochs.len() as u64, FILES);
    let rows = sorted_rows(dir.path());
    assert!(rows.len() > 100, "{} alerts", rows.len());
    rows
}

#[test]
fn a_fault_at_every_boundary_of_a_micro_batch_epoch_changes_no_output() {
    let expected = uninterrupted();
    let (dir, rows) = run_with_faults("mode = \"processing-time\"\ninterval = \"10ms\"");
    assert_eq!(rows, expected);
    // Epoch for epoch, byte for byte: the epochs split as they did.
    let clean = tempfile::tempdir().unwrap();
    write_input(clean.path(), 7, FILES, PER_FILE);
    run_epochs(
        clean.path(),
        &pipeline(clean.path(), "mode = \"available-now\""),
    )
    .unwrap();
    assert_eq!(
        sink_files(&dir.path().join("out")),
        sink_files(&clean.path().join("out"))
    );
}

#[test]
fn a_fault_at_every_boundary_of_a_real_time_epoch_changes_no_output() {
    let expected = uninterrupted();
    let (_dir, rows) = run_with_faults("mode = \"real-time\"\ncheckpoint_interval = \"5ms\"");
    assert_eq!(rows, expected);
}

/// The instance an attacker found: a snapshot that cannot be written
/// (here: its directory made immutable, a real EPERM even for root) after
/// the state commit. The pipeline stays on that epoch without writing its
/// output again, and goes on once the cause is gone.
#[test]
fn a_snapshot_that_cannot_be_written_holds_the_pipeline_without_rewriting_output() {
    let expected = uninterrupted();
    let dir = tempfile::tempdir().unwrap();
    write_input(dir.path(), 7, FILES, PER_FILE);
    let snapshots = dir.path().join("checkpoint/state/snapshots");
    std::fs::create_dir_all(&snapshots).unwrap();
    let chattr = |flag: &str| {
        std::process::Command::new("chattr")
            .arg(flag)
            .arg(&snapshots)
            .status()
            .is_ok_and(|s| s.success())
    };
    assert!(
        chattr("+i"),
        "chattr +i failed: this test needs an ext4-like filesystem and root"
    );
    let toml = pipeline(
        dir.path(),
        "mode = \"processing-time\"\ninterval = \"10ms\"",
    );
    let run = Background::start(dir.path(), toml);
    let commits = dir.path().join("checkpoint/commits");
    // The first snapshot is due after epoch 1.
    wait_for("epoch 1 to commit", || commits.join("1").exists());
    std::thread::sleep(std::time::Duration::from_millis(2_500));
    let held = sink_files(&dir.path().join("out"));
    assert!(run.is_running(), "the pipeline keeps retrying");
    assert!(
        !commits.join("2").exists(),
        "no later epoch runs while epoch 1's snapshot cannot be taken"
    );
    assert!(chattr("-i"));
    wait_for("every row committed", || {
        crate::common::committed_rows(&dir.path().join("checkpoint")) == FILES * PER_FILE
    });
    run.stop().unwrap();
    let after = sink_files(&dir.path().join("out"));
    for (name, bytes) in &held {
        let now = after.iter().find(|(n, _)| n == name).map(|(_, b)| b);
        assert_eq!(
            now,
            Some(bytes),
            "{name} changed while the epoch was retried"
        );
    }
    assert_eq!(sorted_rows(dir.path()), expected);
    no_committed_output_rewritten(dir.path());
}

/// Flips one byte in every 4 KiB of the first half of each SST file of
/// `dir` (data blocks; the index and footer at the end stay readable, so
/// the store opens and the corruption shows on reads).
fn corrupt_data_blocks(dir: &Path) -> usize {
    let mut corrupted = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "sst") {
            continue;
        }
        let mut bytes = std::fs::read(&path).unwrap();
        for at in (100..bytes.len() / 2).step_by(4096) {
            bytes[at] ^= 0x5a;
        }
        // The same inode: snapshots hard-link it, as RocksDB's do.
        std::fs::write(&path, &bytes).unwrap();
        corrupted += 1;
    }
    corrupted
}

/// Corrupt state is a storage fault: the epoch fails naming the
/// corruption (no record is set aside, nothing is blamed on the
/// operator), `weir checkpoint repair` finds it in the working copy and
/// in the snapshots that share the file, and the next run rebuilds the
/// state from the log and gives the output of a run that never failed.
#[test]
fn corrupt_state_is_a_storage_fault_and_repair_rebuilds_it() {
    let expected = uninterrupted();
    let dir = tempfile::tempdir().unwrap();
    write_input(dir.path(), 7, FILES / 2, PER_FILE);
    let toml = pipeline(dir.path(), "mode = \"available-now\"")
        .replace("compact_every = 3", "compact_every = 0");
    run_epochs(dir.path(), &toml).unwrap();
    let state = dir.path().join("checkpoint/state");
    assert!(corrupt_data_blocks(&state.join("working")) > 0, "no SST");
    write_input(dir.path(), 7, FILES, PER_FILE);

    let err = format!("{:#}", run_epochs(dir.path(), &toml).unwrap_err());
    assert!(err.contains("storage fault"), "{err}");
    assert!(err.contains("Corruption"), "{err}");
    assert!(err.contains("weir checkpoint repair"), "{err}");
    let letters = dir.path().join("checkpoint/dead-letter");
    assert!(!letters.exists(), "records were blamed for the corruption");

    let repair = std::process::Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(["checkpoint", "repair"])
        .arg(dir.path().join("checkpoint"))
        .output()
        .unwrap();
    let text = crate::common::output_text(&repair);
    assert!(repair.status.success(), "{text}");
    assert!(
        text.contains("CORRUPT") && text.contains("working"),
        "{text}"
    );
    run_epochs(dir.path(), &toml).unwrap();
    assert_eq!(sorted_rows(dir.path()), expected);
    assert!(!letters.exists());
}
