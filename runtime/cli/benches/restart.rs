//! `cargo bench -p weir-runtime --bench restart`: how long a start takes
//! after a long run, with and without the compacted offset log.
//!
//! A real pipeline (files source, `fraud-rules`, files sink) runs one
//! epoch; its checkpoint is then extended to N committed epochs by writing
//! entries shaped exactly like the real one (one new input file each), as
//! a pipeline that ran N epochs without compaction would have left it. The
//! start — open the checkpoint, restore the source's progress from the
//! log, recover, find no new data — is timed on that checkpoint, then
//! again after folding the log into `offsets/<N-1>.compact` and keeping the
//! newest 100 entries (what `[wal]` does by default).

use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};
use weir_core::wal::{CommitEntry, OffsetEntry};

fn pipeline_file(dir: &Path) -> std::path::PathBuf {
    std::fs::write(dir.join("fraud_rules.wasm"), weir_cli::FRAUD_RULES_WASM).unwrap();
    // Compaction off: this bench builds the long log itself.
    let toml = weir_cli::demo::pipeline_toml(1, weir_cli::demo::DemoOperator::Rules)
        + "\n[wal]\ncompact_every = 0\n";
    let path = dir.join("pipeline.toml");
    std::fs::write(&path, toml).unwrap();
    path
}

/// Opens the pipeline and runs it to "no new data": a start.
fn start(path: &Path, host: &weir_host::WasmHost) -> Duration {
    let cfg = weir_engine::config::PipelineConfig::load(path).unwrap();
    let t = Instant::now();
    let opts = weir_engine::OpenOptions {
        ephemeral_checkpoint_ok: true,
        ..Default::default()
    };
    let mut p = weir_engine::open(&cfg, host, opts).unwrap();
    let summary = p.run(host, &AtomicBool::new(false), &mut |_| {}).unwrap();
    assert_eq!(summary.epochs, 0, "nothing new to run");
    t.elapsed()
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// Extends the one-epoch checkpoint in `ck` to `epochs` committed epochs.
/// The state store starts over at the next epoch (`state/origin`), as for a
/// checkpoint that had no state before: the synthetic epochs read no input.
fn extend(ck: &Path, epochs: u64) {
    std::fs::remove_dir_all(ck.join("state")).unwrap();
    std::fs::create_dir_all(ck.join("state")).unwrap();
    std::fs::write(ck.join("state/origin"), format!("{epochs}\n")).unwrap();
    let first: OffsetEntry =
        serde_json::from_slice(&std::fs::read(ck.join("offsets/0")).unwrap()).unwrap();
    let commit: CommitEntry =
        serde_json::from_slice(&std::fs::read(ck.join("commits/0")).unwrap()).unwrap();
    for e in 1..epochs {
        let mut entry = first.clone();
        entry.epoch = e;
        entry.source = serde_json::json!({
            "files": [ { "name": format!("payments-{e:08}.jsonl"), "size": 2_000 } ]
        });
        let mut c = commit.clone();
        c.epoch = e;
        std::fs::write(
            ck.join("offsets").join(e.to_string()),
            serde_json::to_vec_pretty(&entry).unwrap(),
        )
        .unwrap();
        std::fs::write(
            ck.join("commits").join(e.to_string()),
            serde_json::to_vec_pretty(&c).unwrap(),
        )
        .unwrap();
    }
}

/// Folds the log as `[wal]` would at the newest epoch.
fn compact(ck: &Path, epochs: u64) {
    let mut files: Vec<serde_json::Value> = (1..epochs)
        .map(|e| serde_json::json!({ "name": format!("payments-{e:08}.jsonl"), "size": 2_000 }))
        .collect();
    let first: OffsetEntry =
        serde_json::from_slice(&std::fs::read(ck.join("offsets/0")).unwrap()).unwrap();
    files.extend(first.source["files"].as_array().unwrap().iter().cloned());
    let checkpoint = weir_core::checkpoint::Checkpoint::inspect(ck).unwrap();
    checkpoint
        .compact(
            epochs - 1,
            serde_json::json!({ "files": files }),
            epochs.saturating_sub(100),
        )
        .unwrap();
}

fn main() {
    let host = weir_host::WasmHost::new(None).unwrap();
    println!("| committed epochs | start, full log | files read | start, compacted | files read | full / compacted |");
    println!("|---|---|---|---|---|---|");
    for epochs in [1_000u64, 10_000, 100_000] {
        let dir = tempfile::tempdir().unwrap();
        let input = dir.path().join("input");
        std::fs::create_dir_all(&input).unwrap();
        std::fs::write(
            input.join("payments-0000.jsonl"),
            weir_connectors::generator::payments::json_lines(1, 0, 20),
        )
        .unwrap();
        let path = pipeline_file(dir.path());
        start_first(&path, &host);
        let ck = dir.path().join("checkpoint");
        extend(&ck, epochs);
        let count = |ck: &Path| {
            std::fs::read_dir(ck.join("offsets")).unwrap().count()
                + std::fs::read_dir(ck.join("commits")).unwrap().count()
        };
        let full_files = count(&ck);
        let full = median((0..3).map(|_| start(&path, &host)).collect());
        compact(&ck, epochs);
        let compact_files = count(&ck);
        let compacted = median((0..3).map(|_| start(&path, &host)).collect());
        println!(
            "| {epochs} | {:.1} ms | {full_files} | {:.1} ms | {compact_files} | {:.1}x |",
            full.as_secs_f64() * 1e3,
            compacted.as_secs_f64() * 1e3,
            full.as_secs_f64() / compacted.as_secs_f64()
        );
    }
}

/// The one real epoch the checkpoint starts from.
fn start_first(path: &Path, host: &weir_host::WasmHost) {
    let cfg = weir_engine::config::PipelineConfig::load(path).unwrap();
    let opts = weir_engine::OpenOptions {
        ephemeral_checkpoint_ok: true,
        ..Default::default()
    };
    let mut p = weir_engine::open(&cfg, host, opts).unwrap();
    let summary = p.run(host, &AtomicBool::new(false), &mut |_| {}).unwrap();
    assert_eq!(summary.epochs, 1);
}
