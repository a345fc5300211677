//! The exactly-once test: `weir run` as a child process, killed with SIGKILL
//! at random moments (at least 20 times, some of them between `offsets/N`
//! and `commits/N`) and restarted each time. The sink's final output must be
//! byte-for-byte the output of an uninterrupted run.

use crate::common::{guest, pipeline_toml, sink_files, write_input, DEMO_RULES_INLINE};
use std::collections::HashSet;
use std::path::Path;

const PER_FILE: u64 = 2_000;

/// Compacted often, so kills also land around compactions.
const WAL: &str = "[wal]\ncompact_every = 7\nretain = 3\n";

fn setup(dir: &Path, _run: &str) -> std::path::PathBuf {
    write_input(dir, 42, crate::common::crash_epochs(60), PER_FILE);
    let toml = pipeline_toml(dir, &guest("fraud_rules"), DEMO_RULES_INLINE, "", "") + WAL;
    let file = dir.join("pipeline.toml");
    std::fs::write(&file, toml).unwrap();
    file
}

#[test]
fn sigkill_at_random_moments_loses_and_duplicates_nothing() {
    let files = crate::common::crash_epochs(60);
    let (clean, crashy) =
        crate::common::uninterrupted_and_killed(setup, crate::common::crash_kills());
    let expected = sink_files(&clean.path().join("out"));
    assert!(
        expected.len() > files as usize / 2,
        "most epochs raise alerts"
    );
    let ck = crashy.path().join("checkpoint");
    let actual = sink_files(&crashy.path().join("out"));
    let names = |v: &[(String, Vec<u8>)]| v.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>();
    assert_eq!(names(&actual), names(&expected), "same epoch files");
    for ((name, a), (_, e)) in actual.iter().zip(&expected) {
        assert!(a == e, "{name} differs from the uninterrupted run");
    }
    let mut seen = HashSet::new();
    for (_, bytes) in &actual {
        for line in String::from_utf8_lossy(bytes).lines() {
            let v: serde_json::Value = serde_json::from_str(line).unwrap();
            assert!(
                seen.insert(v["txn_id"].as_str().unwrap().to_string()),
                "duplicate {line}"
            );
        }
    }
    let commits = crate::common::latest_entry(&ck.join("commits")).unwrap();
    assert_eq!(commits, files - 1, "every epoch committed exactly once");
    // The logs were compacted: a start reads a bounded number of entries,
    // those back to the oldest of the 3 state snapshots (10 epochs apart,
    // the defaults) and up to a compaction interval more.
    let entries = std::fs::read_dir(ck.join("offsets")).unwrap().count();
    assert!(entries <= 3 * 10 + 7 + 1, "{entries} files in offsets/");
    let folded = weir_core::checkpoint::Checkpoint::inspect(&ck)
        .unwrap()
        .compacted()
        .unwrap()
        .expect("compacted");
    assert_eq!(folded.epoch % 7, 6);
    assert_eq!(
        weir_core::checkpoint::Checkpoint::inspect(&ck)
            .unwrap()
            .committed_rows()
            .unwrap(),
        files * PER_FILE
    );
    crate::common::assert_no_temp_files(&crashy.path().join("out"));
}
