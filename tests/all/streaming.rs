//! The processing-time trigger: files are picked up as they appear (hidden
//! names are ignored until renamed into place), and a stop request ends the
//! run after the current epoch.

use crate::common::{guest, open_pipeline, pipeline_toml, sink_files, wait_for, DEMO_RULES_INLINE};
use std::sync::atomic::AtomicBool;
use std::time::Duration;
use weir_host::WasmHost;

#[test]
fn new_files_are_picked_up_while_running() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("input");
    std::fs::create_dir(&input).unwrap();
    let toml = pipeline_toml(dir.path(), &guest("fraud_rules"), DEMO_RULES_INLINE, "", "").replace(
        "mode = \"available-now\"",
        "mode = \"processing-time\"\ninterval = \"50ms\"",
    );
    let runner = crate::common::Background::start(dir.path(), toml);
    let out = dir.path().join("out");
    let commits = dir.path().join("checkpoint/commits");
    let committed = || std::fs::read_dir(&commits).map(|d| d.count()).unwrap_or(0);

    std::fs::write(
        input.join("a.jsonl"),
        weir_connectors::generator::payments::json_lines(9, 0, 2_000),
    )
    .unwrap();
    wait_for("the first file", || committed() == 1);

    // A file being written under a hidden name is not read until renamed.
    let hidden = input.join(".b.jsonl");
    std::fs::write(
        &hidden,
        weir_connectors::generator::payments::json_lines(9, 2_000, 2_000),
    )
    .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(committed(), 1, "hidden file was picked up");
    std::fs::rename(&hidden, input.join("b.jsonl")).unwrap();
    wait_for("the renamed file", || committed() == 2);

    let summary = runner.stop().unwrap();
    assert_eq!(summary.epochs, 2);
    assert_eq!(summary.rows_in, 4_000);
    let first_tasks = sink_files(&out)
        .into_iter()
        .filter(|(name, _)| !name.contains("-task-"))
        .count();
    assert_eq!(first_tasks, 2, "one epoch per file");
}

#[test]
fn once_trigger_takes_everything_in_one_epoch_and_stops() {
    let dir = tempfile::tempdir().unwrap();
    crate::common::write_input(dir.path(), 5, 3, 1_000);
    let toml = pipeline_toml(dir.path(), &guest("fraud_rules"), DEMO_RULES_INLINE, "", "")
        .replace("mode = \"available-now\"", "mode = \"once\"");
    let host = WasmHost::new(None).unwrap();
    let mut p = open_pipeline(dir.path(), &toml, &host).unwrap();
    let mut ranges = Vec::new();
    let summary = p
        .run(&host, &AtomicBool::new(false), &mut |e| {
            ranges.push(e.range.clone())
        })
        .unwrap();
    assert_eq!(
        summary.epochs, 1,
        "max_files_per_trigger = 1 is ignored by `once`"
    );
    assert_eq!(summary.rows_in, 3_000);
    assert!(ranges[0].starts_with("3 files"), "{ranges:?}");
}
