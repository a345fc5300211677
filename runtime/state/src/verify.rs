//! Checking a state store for corruption, and taking a corrupt one out of
//! use so that the next start rebuilds it from a good snapshot and the
//! offset log ([`crate::StateStore::open`]).
//!
//! RocksDB checks a block's checksum when it reads the block, so a flipped
//! byte in an SST shows only when a key in that block is read. A snapshot
//! is a RocksDB checkpoint whose SSTs are hard links to the working copy's,
//! so it shares a corrupt file unnoticed. Hence every snapshot is verified
//! (every block read) before it is restored, and `weir checkpoint repair`
//! verifies the working copy and every snapshot.

use anyhow::{Context, Result};
use std::path::{Path, PathBuf};

/// Reads every key and value of the RocksDB directory `dir`, checksums
/// verified; returns the number of entries, or the corruption RocksDB
/// reports (it names the file).
pub fn verify(dir: &Path) -> Result<u64> {
    let options = rocksdb::Options::default();
    let db = rocksdb::DB::open_for_read_only(&options, dir, false)
        .with_context(|| format!("opening {} to verify it", dir.display()))?;
    let mut read = rocksdb::ReadOptions::default();
    read.set_verify_checksums(true);
    read.fill_cache(false);
    let mut entries = 0u64;
    for item in db.iterator_opt(rocksdb::IteratorMode::Start, read) {
        item.with_context(|| format!("verifying {}", dir.display()))?;
        entries += 1;
    }
    Ok(entries)
}

/// Whether `e` (from [`verify`]) says the data is corrupt, as RocksDB
/// words it, rather than that it could not be read at all.
pub fn is_corruption(e: &anyhow::Error) -> bool {
    e.chain().any(|c| c.to_string().contains("Corruption"))
}

/// Moves the corrupt store `dir` aside (to `.corrupt-<name>-<pid>` beside
/// it, which no listing of snapshots or working copies matches) for
/// inspection; returns where it went.
pub(crate) fn set_aside(dir: &Path) -> Result<PathBuf> {
    let name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let aside = dir.with_file_name(format!(".corrupt-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&aside);
    std::fs::rename(dir, &aside)
        .with_context(|| format!("moving {} aside to {}", dir.display(), aside.display()))?;
    Ok(aside)
}

/// What `weir checkpoint repair` found and did, store by store.
#[derive(Debug, Default)]
pub struct Repair {
    /// Stores that verified: their path and entry count.
    pub sound: Vec<(PathBuf, u64)>,
    /// Corrupt stores: where each was, where it was moved, and why.
    pub set_aside: Vec<(PathBuf, PathBuf, String)>,
}

impl Repair {
    /// Whether anything was corrupt.
    pub fn repaired(&self) -> bool {
        !self.set_aside.is_empty()
    }
}

/// Verifies the working copy and every snapshot under `root`
/// (`checkpoint/state`) and moves each corrupt one aside. A start then
/// rebuilds the working copy from the newest good snapshot and re-runs
/// the operator over the epochs since (their output is not written again).
pub fn repair(root: &Path) -> Result<Repair> {
    let mut report = Repair::default();
    let mut stores = vec![root.join("working")];
    for n in crate::StateStore::snapshot_epochs(root)? {
        stores.push(root.join("snapshots").join(n.to_string()));
    }
    for dir in stores.into_iter().filter(|d| d.exists()) {
        match verify(&dir) {
            Ok(entries) => report.sound.push((dir, entries)),
            Err(e) if !is_corruption(&e) => {
                return Err(e).context("the store could not be read to verify it");
            }
            Err(e) => {
                let aside = set_aside(&dir)?;
                report.set_aside.push((dir, aside, format!("{e:#}")));
            }
        }
    }
    Ok(report)
}
