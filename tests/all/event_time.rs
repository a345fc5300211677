//! Event time, the watermark and the host's dedup through real pipelines:
//! the watermark recorded in `offsets/N` and seen by the operator, late rows
//! counted, and duplicated txn_ids inside the watermark reaching the sink
//! once — across epochs and across a restart.

use crate::common::{guest, open_pipeline, pipeline_toml, sink_files};
use std::path::Path;
use weir_connectors::generator::payments::{payment, START_MS};
use weir_host::WasmHost;

fn write_file(dir: &Path, n: u64, range: std::ops::Range<u64>) {
    crate::common::write_payments(dir, 5, n, range);
}

fn toml(dir: &Path, mode: &str, tables: &str) -> String {
    let base = pipeline_toml(
        dir,
        &guest("sandbox_tests"),
        &format!("{{ mode = \"{mode}\" }}"),
        "",
        "",
    );
    format!("{base}\n{tables}\n")
}

fn run(dir: &Path, toml: &str) -> Vec<weir_core::progress::EpochProgress> {
    crate::common::run_epochs(dir, toml).unwrap()
}

fn rows(dir: &Path) -> Vec<serde_json::Value> {
    sink_files(&dir.join("out"))
        .iter()
        .flat_map(|(_, b)| {
            String::from_utf8(b.clone())
                .unwrap()
                .lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect::<Vec<_>>()
        })
        .collect()
}

fn ts(i: u64) -> i64 {
    START_MS + i as i64 * 37
}

#[test]
fn the_watermark_is_recorded_per_epoch_and_seen_by_the_operator() {
    let dir = tempfile::tempdir().unwrap();
    write_file(dir.path(), 0, 0..100);
    write_file(dir.path(), 1, 100..200);
    write_file(dir.path(), 2, 20..30); // late by then
    let t = toml(
        dir.path(),
        "watermark",
        "[event_time]\ncolumn = \"ts\"\nallowed_lateness = \"1s\"",
    );
    let epochs = run(dir.path(), &t);
    let marks: Vec<Option<i64>> = epochs.iter().map(|e| e.watermark_ms).collect();
    let expected = [None, Some(ts(99) - 1_000), Some(ts(199) - 1_000)];
    assert_eq!(marks, expected);
    let entry: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("checkpoint/offsets/1")).unwrap(),
    )
    .unwrap();
    assert_eq!(entry["watermark_ms"], ts(99) - 1_000);
    // Epoch 2 is entirely older than the watermark: counted late, passed on.
    assert_eq!(epochs[2].late_rows, 10);
    assert_eq!(epochs[1].late_rows, 0);
    let out = rows(dir.path());
    assert_eq!(out.len(), 210);
    let seen_in_epoch_1 = out
        .iter()
        .find(|r| r["txn_id"] == payment(5, 150).0.txn_id)
        .unwrap();
    assert_eq!(seen_in_epoch_1["watermark"], ts(99) - 1_000);

    // A restart continues from the maximum recorded in commits/2.
    write_file(dir.path(), 3, 200..210);
    let epochs = run(dir.path(), &t);
    assert_eq!(epochs[0].watermark_ms, Some(ts(199) - 1_000));
}

#[test]
fn duplicated_txn_ids_inside_the_watermark_reach_the_sink_once() {
    let dir = tempfile::tempdir().unwrap();
    // Overlapping deliveries in separate epochs: 100..300 twice, 250..300 a
    // third time after a restart (repeats inside one batch: unit tests).
    write_file(dir.path(), 0, 0..300);
    write_file(dir.path(), 1, 100..400);
    let t = toml(
        dir.path(),
        "echo",
        "[event_time]\ncolumn = \"ts\"\nallowed_lateness = \"1h\"\n[dedup]\ncolumn = \"txn_id\"",
    );
    let epochs = run(dir.path(), &t);
    assert_eq!(epochs[1].duplicates, 200);
    // After a restart the remembered keys still count.
    write_file(dir.path(), 2, 250..450);
    let epochs = run(dir.path(), &t);
    assert_eq!(epochs[0].duplicates, 150);

    let ids: Vec<String> = rows(dir.path())
        .iter()
        .map(|r| r["txn_id"].as_str().unwrap().to_string())
        .collect();
    let expected: Vec<String> = (0..450).map(|i| payment(5, i).0.txn_id).collect();
    let mut sorted = ids.clone();
    sorted.sort();
    let mut want = expected.clone();
    want.sort();
    assert_eq!(sorted, want, "every txn_id exactly once");
}

#[test]
fn dedup_forgets_keys_the_watermark_passed_and_drops_late_rows() {
    let dir = tempfile::tempdir().unwrap();
    write_file(dir.path(), 0, 0..100);
    write_file(dir.path(), 1, 200..300);
    // 50..60 again: older than the watermark (ts(99) - 0 after epoch 0, then
    // ts(299)), so late and dropped rather than checked.
    write_file(dir.path(), 2, 50..60);
    let t = toml(
        dir.path(),
        "echo",
        "[event_time]\ncolumn = \"ts\"\n[dedup]\ncolumn = \"txn_id\"",
    );
    let epochs = run(dir.path(), &t);
    assert_eq!(epochs[2].late_rows, 10);
    assert_eq!(epochs[2].duplicates, 0);
    assert_eq!(epochs[2].rows_out, 0);
    assert_eq!(rows(dir.path()).len(), 200);
}

#[test]
fn dedup_without_event_time_or_on_a_missing_column_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    write_file(dir.path(), 0, 0..10);
    let host = WasmHost::new(None).unwrap();
    let err = |tables: &str| {
        let t = toml(dir.path(), "echo", tables);
        format!("{:#}", open_pipeline(dir.path(), &t, &host).err().unwrap())
    };
    let e = err("[dedup]\ncolumn = \"txn_id\"");
    assert!(e.contains("`dedup` needs `[event_time]`"), "{e}");
    let e = err("[event_time]\ncolumn = \"when\"");
    assert!(e.contains("no column `when`"), "{e}");
    let e = err("[event_time]\ncolumn = \"amount\"");
    assert!(e.contains("must be a timestamp or int64"), "{e}");
    let e = err("[event_time]\ncolumn = \"ts\"\n[dedup]\ncolumn = \"amount\"");
    assert!(e.contains("utf8 or int64"), "{e}");
}
