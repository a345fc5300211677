//! Who runs what: every worker writes a record of itself — its admin URL
//! and the partitions it runs with their newest epochs — to
//! `cluster/workers/<name>.json` in the shared checkpoint every
//! [`PUBLISH_EVERY`], and reads everyone else's. That is how `weir status`
//! and the dashboard, asked of any worker, show every worker and its
//! partitions, with no coordinator: the object store holds the records,
//! and a record older than the session timeout belongs to a worker the
//! group has given up on (shown as not live; forgotten after
//! [`FORGET_AFTER`]).

use anyhow::{Context, Result};
use std::sync::Arc;
use std::time::Duration;
use weir_core::clock::now_ms;
use weir_core::mirror::Remote;

use crate::observe::workers::{ClusterStatus, WorkerRecord, WorkerStatus};

/// How often a worker renews its record and reads the others'.
pub const PUBLISH_EVERY: Duration = Duration::from_secs(2);

/// A record not renewed for this long is removed by whoever reads it.
pub const FORGET_AFTER: Duration = Duration::from_secs(3600);

/// Where the records live, under the cluster's prefix.
const WORKERS: &str = "workers/";

/// A worker's access to the records.
pub struct Roster {
    remote: Arc<dyn Remote>,
    group: String,
    worker: String,
    /// A record older than this is not live.
    live_within: Duration,
}

impl Roster {
    /// The records under `remote` (the cluster's prefix) of the workers of
    /// `group`, as `worker` sees them.
    pub fn new(
        remote: Arc<dyn Remote>,
        group: &str,
        worker: &str,
        session_timeout: Duration,
    ) -> Self {
        Roster {
            remote,
            group: group.to_string(),
            worker: worker.to_string(),
            live_within: session_timeout.max(PUBLISH_EVERY * 3),
        }
    }

    fn key(worker: &str) -> String {
        format!("{WORKERS}{worker}.json")
    }

    /// Writes (renews) this worker's record.
    pub fn publish(&self, record: &WorkerRecord) -> Result<()> {
        let bytes = serde_json::to_vec_pretty(record)?;
        self.remote
            .put(&Self::key(&self.worker), &bytes)
            .context("writing this worker's record")
    }

    /// Removes this worker's record (it is stopping).
    pub fn withdraw(&self) -> Result<()> {
        self.remote.delete(&Self::key(&self.worker))
    }

    /// Every worker's record, by name; records not renewed for
    /// [`FORGET_AFTER`] are removed instead.
    pub fn read(&self) -> Result<ClusterStatus> {
        let now = now_ms();
        let mut workers = Vec::new();
        for object in self.remote.list(WORKERS)? {
            let Some(bytes) = self.remote.get(&object.key)? else {
                continue; // withdrawn since the listing
            };
            let record: WorkerRecord = match serde_json::from_slice(&bytes) {
                Ok(r) => r,
                Err(e) => {
                    tracing::warn!(key = %object.key, "ignoring a worker record that does not parse: {e}");
                    continue;
                }
            };
            let age = Duration::from_millis(now.saturating_sub(record.updated_ms).max(0) as u64);
            if age > FORGET_AFTER {
                tracing::info!(worker = %record.worker, "forgetting the record of a worker gone for {age:?}");
                let _ = self.remote.delete(&object.key);
                continue;
            }
            workers.push(WorkerStatus {
                live: age <= self.live_within,
                record,
            });
        }
        workers.sort_by(|a, b| a.record.worker.cmp(&b.record.worker));
        Ok(ClusterStatus {
            group: self.group.clone(),
            answered_by: self.worker.clone(),
            read_ms: now,
            workers,
        })
    }
}
