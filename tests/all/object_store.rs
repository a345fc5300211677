//! Checkpoints in an S3-compatible object store (issue 18): s3s-fs, a real
//! S3 server, on 127.0.0.1. The object store is the checkpoint; the local
//! directory only caches it, so a worker on an empty disk resumes from it.

use crate::common::s3::S3Server;
use crate::common::{
    guest, pipeline_toml, sink_files, weir_run_quiet, write_input, write_payments, VELOCITY_CONFIG,
};
use std::path::{Path, PathBuf};

const PER_FILE: u64 = 500;
const SEED: u64 = 18;

/// The velocity pipeline over `dir/input`, its checkpoint at `checkpoint`
/// (an `s3://` URL with `cache` as its local cache, or a local directory).
fn velocity_pipeline(dir: &Path, checkpoint: &str, cache: Option<&Path>, s3: &S3Server) -> PathBuf {
    let toml = pipeline_toml(dir, &guest("fraud_velocity"), VELOCITY_CONFIG, "", "");
    let local = format!("checkpoint = \"{}/checkpoint\"\n", dir.display());
    assert!(toml.contains(&local));
    let mut head = format!("checkpoint = \"{checkpoint}\"\n");
    if let Some(cache) = cache {
        head += &format!("checkpoint_cache = \"{}\"\n", cache.display());
    }
    let mut toml = toml.replace(&local, &head);
    toml += "[state]\nsnapshot_every = 2\n[wal]\ncompact_every = 3\nretain = 2\n";
    if cache.is_some() {
        toml += &s3.settings_toml();
    }
    let file = dir.join("pipeline.toml");
    std::fs::write(&file, toml).unwrap();
    file
}

fn run(pipeline: &Path, s3: &S3Server, compile_cache: &Path) {
    let mut cmd = weir_run_quiet(pipeline, compile_cache);
    cmd.stderr(std::process::Stdio::inherit());
    let status = s3.credentials(&mut cmd).status().unwrap();
    assert!(
        status.success(),
        "weir run failed; s3s-fs log:\n{}",
        s3.log()
    );
}

#[test]
fn a_worker_on_an_empty_disk_resumes_from_the_object_store() {
    let s3 = S3Server::start();
    let compile_cache = tempfile::tempdir().unwrap();
    let (shared, local) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let url = format!("s3://{}/fraud", crate::common::s3::BUCKET);
    let (cache_a, cache_b) = (shared.path().join("cache-a"), shared.path().join("cache-b"));
    let reference_checkpoint = local.path().join("checkpoint");
    let reference = velocity_pipeline(
        local.path(),
        &reference_checkpoint.display().to_string(),
        None,
        &s3,
    );

    // First machine: four epochs, the checkpoint in the object store.
    for dir in [shared.path(), local.path()] {
        write_input(dir, SEED, 4, PER_FILE);
    }
    run(
        &velocity_pipeline(shared.path(), &url, Some(&cache_a), &s3),
        &s3,
        compile_cache.path(),
    );
    run(&reference, &s3, compile_cache.path());
    let keys = s3.keys("fraud");
    for key in [
        "fraud/metadata",
        "fraud/commits/3",
        "fraud/offsets/3",
        "fraud/state/origin",
    ] {
        assert!(
            keys.iter().any(|k| k == key),
            "{key} not in the object store: {keys:?}"
        );
    }
    assert!(
        keys.iter()
            .any(|k| k == "fraud/state/snapshots/3/_complete"),
        "the state snapshot of epoch 3 was uploaded: {keys:?}"
    );
    assert!(
        keys.iter().any(|k| k.starts_with("fraud/blobs/")),
        "the operator's component is in the object store"
    );
    let query = std::fs::read(cache_a.join("metadata")).unwrap();

    // The machine is gone with its disk; another one takes over with an
    // empty cache, and four more files arrive.
    std::fs::remove_dir_all(&cache_a).unwrap();
    for dir in [shared.path(), local.path()] {
        for n in 4..8 {
            write_payments(dir, SEED, n, n * PER_FILE..(n + 1) * PER_FILE);
        }
    }
    run(
        &velocity_pipeline(shared.path(), &url, Some(&cache_b), &s3),
        &s3,
        compile_cache.path(),
    );
    run(&reference, &s3, compile_cache.path());

    assert_eq!(
        std::fs::read(cache_b.join("metadata")).unwrap(),
        query,
        "the same query, resumed"
    );
    assert!(
        cache_b.join("state/snapshots/3").is_dir(),
        "the state was restored from the snapshot in the object store"
    );
    assert_eq!(
        crate::common::latest_entry(&cache_b.join("commits")),
        Some(7)
    );
    let (got, want) = (
        sink_files(&shared.path().join("out")),
        sink_files(&local.path().join("out")),
    );
    assert_eq!(got.len(), want.len(), "the same epochs");
    for ((name, g), (_, w)) in got.iter().zip(&want) {
        assert!(
            g == w,
            "{name} differs from the run with a local checkpoint"
        );
    }
    assert!(
        want.iter()
            .any(|(_, bytes)| String::from_utf8_lossy(bytes).contains("velocity")),
        "velocity alerts, whose counts need the state, are among the output"
    );
    // Compaction removed old entries from the object store too.
    assert!(
        !s3.keys("fraud/offsets")
            .iter()
            .any(|k| k == "fraud/offsets/0"),
        "offsets/0 was compacted away in the object store"
    );
}
