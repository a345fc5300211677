//! Lookup-table versions leave the checkpoint's blobs with the log entries
//! that used them. Every refresh of a reference table that changed its
//! content stores a new version in `blobs/` and `offsets/N` records it, so
//! that a replay reads what the epoch read; once compaction has removed
//! every entry that names a version, and the table has moved on, nothing
//! can read that version again and it is deleted. Without this a 7.7 MB
//! table refreshed 40 times kept 293 MB in the checkpoint.
//!
//! Only lookup versions are collected: components, configs and artifacts
//! belong to the operator registry, which keeps every version it has had.
//! The candidates are the versions named by the entries a compaction
//! removes, so the cost is a read of the retained entries once per
//! compaction, whatever the size of `blobs/`.

use super::Pipeline;
use anyhow::{Context, Result};
use std::collections::BTreeSet;
use weir_core::Digest;

impl Pipeline {
    /// The lookup versions named by the entries before `keep_from`: what
    /// the compaction about to remove them may free.
    pub(super) fn lookup_versions_before(&self, keep_from: u64) -> Result<BTreeSet<Digest>> {
        let mut named = BTreeSet::new();
        for epoch in self.checkpoint.offsets.epochs()? {
            if epoch >= keep_from {
                break;
            }
            if let Some(entry) = self.checkpoint.offsets.get(epoch)? {
                named.extend(entry.lookups.values().copied());
            }
        }
        Ok(named)
    }

    /// Deletes those of `candidates` that no retained entry names and no
    /// table holds as its current version; returns how many.
    pub(super) fn remove_unused_lookup_versions(
        &self,
        candidates: BTreeSet<Digest>,
    ) -> Result<usize> {
        if candidates.is_empty() {
            return Ok(0);
        }
        let mut used: BTreeSet<Digest> = self.lookups.versions().into_values().collect();
        for epoch in self.checkpoint.offsets.epochs()? {
            if let Some(entry) = self.checkpoint.offsets.get(epoch)? {
                used.extend(entry.lookups.values().copied());
                used.insert(entry.operator.digest);
                used.insert(entry.operator.config_digest);
                used.extend(entry.operator.artifacts);
            }
        }
        let blobs = self.checkpoint.blobs();
        let mut removed = 0;
        for digest in candidates.difference(&used) {
            blobs
                .remove(digest)
                .with_context(|| format!("removing the unused lookup version {digest}"))?;
            removed += 1;
        }
        if removed > 0 {
            tracing::debug!(pipeline = %self.name, removed, "unused lookup versions removed");
        }
        Ok(removed)
    }
}
