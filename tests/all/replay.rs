//! Replay determinism: a planned-but-uncommitted epoch re-runs with the
//! offsets, operator digest and operator config recorded in `offsets/N`, even
//! when the pipeline file now names another operator or config.

use crate::common::{guest, pipeline_toml, sink_files, write_input, DEMO_RULES_INLINE};
use std::path::Path;
use std::sync::atomic::AtomicBool;
use weir_engine::pipeline::RunSummary;
use weir_host::WasmHost;

fn run(
    dir: &Path,
    operator: &Path,
    config: &str,
) -> (RunSummary, Vec<weir_core::progress::EpochProgress>) {
    let host = WasmHost::new(None).unwrap();
    let toml = pipeline_toml(dir, operator, config, "", "");
    let mut p = crate::common::open_pipeline(dir, &toml, &host).unwrap();
    let mut epochs = Vec::new();
    let summary = p
        .run(&host, &AtomicBool::new(false), &mut |e| {
            epochs.push(e.clone())
        })
        .unwrap();
    (summary, epochs)
}

#[test]
fn uncommitted_epoch_replays_with_the_recorded_operator_and_config() {
    let dir = tempfile::tempdir().unwrap();
    write_input(dir.path(), 3, 2, 3_000);
    let (first, _) = run(dir.path(), &guest("fraud_rules"), DEMO_RULES_INLINE);
    assert_eq!(first.epochs, 2);
    let before = sink_files(&dir.path().join("out"));
    let offsets1 = std::fs::read(dir.path().join("checkpoint/offsets/1")).unwrap();

    // Simulate a crash after the sink wrote epoch 1 but before its commit,
    // and change the pipeline: another operator entirely.
    std::fs::remove_file(dir.path().join("checkpoint/commits/1")).unwrap();
    for file in weir_connectors::files::FileSink::epoch_files(&dir.path().join("out"), 1).unwrap() {
        std::fs::remove_file(file).unwrap();
    }
    let more = weir_connectors::generator::payments::json_lines(3, 6_000, 3_000);
    std::fs::write(dir.path().join("input/payments-0002.jsonl"), more).unwrap();
    let (second, epochs) = run(dir.path(), &guest("sandbox_tests"), r#"{ mode = "echo" }"#);

    assert_eq!(second.epochs, 2, "the replay plus one new epoch");
    assert_eq!((epochs[0].epoch, epochs[0].replay), (1, true));
    assert_eq!((epochs[1].epoch, epochs[1].replay), (2, false));
    assert_ne!(epochs[0].operator_digest, epochs[1].operator_digest);
    assert_eq!(
        std::fs::read(dir.path().join("checkpoint/offsets/1")).unwrap(),
        offsets1
    );

    let after = sink_files(&dir.path().join("out"));
    assert_eq!(
        after[..before.len()],
        before[..],
        "epoch 0 untouched, epoch 1 identical to its first run"
    );
    // Epoch 2 ran the echo operator: one output row per input row.
    let echoed: usize = after[before.len()..]
        .iter()
        .map(|(_, b)| String::from_utf8(b.clone()).unwrap().lines().count())
        .sum();
    assert_eq!(echoed, 3_000);
}

#[test]
fn a_committed_pipeline_restarts_without_rerunning_anything() {
    let dir = tempfile::tempdir().unwrap();
    write_input(dir.path(), 3, 2, 500);
    run(dir.path(), &guest("fraud_rules"), DEMO_RULES_INLINE);
    let (again, _) = run(dir.path(), &guest("fraud_rules"), DEMO_RULES_INLINE);
    assert_eq!(again.epochs, 0);
}
