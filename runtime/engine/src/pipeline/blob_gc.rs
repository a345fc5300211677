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
//! removes, so the cost is one read of the entries per compaction,
//! whatever the size of `blobs/`.

use super::Pipeline;
use anyhow::{Context, Result};
use std::collections::BTreeSet;
use weir_core::Digest;

impl Pipeline {
    /// The lookup versions that only the entries before `keep_from` name
    /// (and no table holds as its current version): what compacting those
    /// entries away frees. One pass over the entries, before compaction.
    pub(super) fn lookup_versions_freed_by(&self, keep_from: u64) -> Result<BTreeSet<Digest>> {
        let mut named_before = BTreeSet::new();
        let mut used: BTreeSet<Digest> = self.input.table_versions().into_values().collect();
        let offsets = &self.log.checkpoint().offsets;
        for epoch in offsets.epochs()? {
            let Some(entry) = offsets.get(epoch)? else {
                continue;
            };
            if epoch < keep_from {
                named_before.extend(entry.lookups.values().copied());
            } else {
                used.extend(entry.lookups.values().copied());
                used.insert(entry.operator.digest);
                used.insert(entry.operator.config_digest);
                used.extend(entry.operator.artifacts);
            }
        }
        Ok(named_before.difference(&used).copied().collect())
    }

    /// Deletes the lookup versions `freed` (locally and in the object
    /// store), once the entries that named them are gone.
    pub(super) fn remove_lookup_versions(&self, freed: BTreeSet<Digest>) -> Result<()> {
        let blobs = self.log.checkpoint().blobs();
        for digest in &freed {
            blobs
                .remove(digest)
                .with_context(|| format!("removing the unused lookup version {digest}"))?;
        }
        if !freed.is_empty() {
            tracing::debug!(pipeline = %self.name, removed = freed.len(), "unused lookup versions removed");
        }
        Ok(())
    }
}
