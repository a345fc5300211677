//! A cluster's workers as `weir status` and the dashboard show them: the
//! record each worker publishes of itself ([`crate::cluster::roster`]
//! writes and reads them) and the view of the whole group one worker
//! answers with. Plain data, so the control plane can carry it in its
//! status without depending on the cluster.

use serde::{Deserialize, Serialize};

/// One worker, as it describes itself.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WorkerRecord {
    pub worker: String,
    /// Its admin API, if it serves one.
    pub admin_url: Option<String>,
    pub pid: u32,
    pub started_ms: i64,
    /// When it last renewed this record, Unix ms.
    pub updated_ms: i64,
    pub partitions: Vec<PartitionRecord>,
}

/// One partition a worker runs (or ran until the group moved it).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PartitionRecord {
    pub partition: i32,
    /// `running`, `stopped`, or `conflict: …` / `failed: …` with why.
    pub state: String,
    pub last_epoch: Option<PartitionEpoch>,
}

/// The newest epoch a worker committed for a partition.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PartitionEpoch {
    pub epoch: u64,
    /// The registry version it ran with.
    pub version: Option<u32>,
    pub rows_in: u64,
    pub rows_out: u64,
    pub finished_ms: i64,
}

/// A worker as `weir status` shows it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WorkerStatus {
    #[serde(flatten)]
    pub record: WorkerRecord,
    /// Its record was renewed within the session timeout.
    pub live: bool,
}

/// The cluster as the worker asked sees it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ClusterStatus {
    pub group: String,
    /// The worker that answered.
    pub answered_by: String,
    /// When it last read the records, Unix ms.
    pub read_ms: i64,
    /// Every worker with a record, by name.
    pub workers: Vec<WorkerStatus>,
}
