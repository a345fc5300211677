//! The Delta sink: each epoch's rows as one Parquet data file and one
//! commit that adds it with a `txn` action (application id = the query id,
//! version = the epoch) — the protocol of Spark's Delta sink. Before
//! committing, the sink reads the log up to its newest version; an epoch
//! whose `txn` version the table already holds for this application (a
//! replay after a crash between the commit and `commits/N`) is skipped.
//! Two writers racing for the same version (parallel tasks, a zombie
//! worker) are ordered by the store's create-if-absent: the loser reads
//! the winner's commit, checks its own `txn` again and tries the next
//! version.

use super::log::{self, CommitInfo, TableState};
use super::schema;
use super::store::TableStore;
use anyhow::{bail, Result};
use arrow_array::RecordBatch;
use std::collections::BTreeMap;
use std::time::Duration;
use weir_core::sink::Sink;
use weir_core::source::row_count;

/// How many versions a commit tries before giving up on a table other
/// writers keep committing to.
const COMMIT_ATTEMPTS: u32 = 64;

/// A Delta table written one commit per epoch.
pub struct DeltaSink {
    store: TableStore,
    url: String,
    query_id: String,
    /// This writer's `txn` application id: the query id, with the sink's
    /// name and `-task-<T>` where needed (each task of each sink commits its
    /// share; [`weir_connectors::connector::SinkContext::writer_id`]).
    app_id: String,
    state: TableState,
    /// Real-time parts of open epochs, committed together at the epoch's
    /// end (a commit per part would flood the log).
    parts: BTreeMap<(u64, u32), Vec<RecordBatch>>,
}

impl DeltaSink {
    /// A writer of the table in `store` for query `query_id`, committing as
    /// application `app_id`. Reads the table's log; a table it could
    /// corrupt is refused here.
    pub fn open(store: TableStore, query_id: &str, app_id: &str) -> Result<Self> {
        let url = store.url();
        let state = TableState::load(&store)?;
        state.check_writable(&url)?;
        Ok(DeltaSink {
            store,
            url,
            query_id: query_id.to_string(),
            app_id: app_id.to_string(),
            state,
            parts: BTreeMap::new(),
        })
    }

    /// Whether the table already holds `epoch` of this writer.
    fn has_epoch(&self, epoch: u64) -> bool {
        self.state
            .txns
            .get(&self.app_id)
            .is_some_and(|&v| v >= epoch)
    }

    /// Appends `batches` as `epoch`, unless the table has it already.
    fn commit_epoch(&mut self, epoch: u64, batches: &[RecordBatch]) -> Result<()> {
        self.state.catch_up(&self.store)?;
        if self.has_epoch(epoch) {
            tracing::info!(table = %self.url, epoch, "epoch already in the Delta table; skipped");
            return Ok(());
        }
        let Some(first) = batches.iter().find(|b| b.num_rows() > 0) else {
            return Ok(());
        };
        let ours = schema::from_arrow(&first.schema())?;
        if let Some(table) = &self.state.schema {
            schema::check(table, &ours, &self.url)?;
        }
        let batches = batches
            .iter()
            .map(schema::for_delta)
            .collect::<Result<Vec<_>>>()?;
        let Some(bytes) = crate::parquet::sink::encode(&batches)? else {
            return Ok(());
        };
        // Named by epoch and writer: a replay before the commit rewrites
        // the same file with the same bytes.
        let path = format!("part-{epoch:010}-{}.snappy.parquet", self.app_id);
        self.store.put(&path, &bytes)?;
        for attempt in 0..COMMIT_ATTEMPTS {
            let now_ms = now_ms();
            let create = match self.state.version {
                None => log::create_actions(&ours, now_ms)?,
                Some(_) => Vec::new(),
            };
            let info = CommitInfo {
                query_id: &self.query_id,
                epoch,
                now_ms,
            };
            let commit = log::append_commit(
                &info,
                &self.app_id,
                &path,
                bytes.len() as u64,
                row_count(&batches),
                create,
            );
            let version = self.state.version.map_or(0, |v| v + 1);
            if self.store.create(&log::commit_key(version), &commit)? {
                self.state.apply_commit(version, &commit)?;
                tracing::debug!(table = %self.url, epoch, version, "epoch committed to Delta");
                return Ok(());
            }
            // Another writer took the version: read it and look again.
            self.state.catch_up(&self.store)?;
            self.state.check_writable(&self.url)?;
            if self.has_epoch(epoch) {
                return Ok(());
            }
            if let Some(table) = &self.state.schema {
                schema::check(table, &ours, &self.url)?;
            }
            std::thread::sleep(Duration::from_millis(5 * u64::from(attempt.min(20) + 1)));
        }
        bail!(
            "could not commit epoch {epoch} to the Delta table {}: {COMMIT_ATTEMPTS} versions in \
             a row were taken by other writers",
            self.url
        )
    }
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

impl Sink for DeltaSink {
    fn write_epoch(&mut self, epoch: u64, batches: &[RecordBatch]) -> Result<()> {
        self.commit_epoch(epoch, batches)
    }

    /// Holds the part until the epoch ends: its rows reach the table with
    /// the epoch's commit, a checkpoint interval later.
    fn write_part(&mut self, epoch: u64, part: u32, batches: &[RecordBatch]) -> Result<()> {
        self.parts.insert((epoch, part), batches.to_vec());
        Ok(())
    }

    fn end_epoch(&mut self, epoch: u64) -> Result<()> {
        let later = self.parts.split_off(&(epoch + 1, 0));
        let batches: Vec<RecordBatch> = std::mem::replace(&mut self.parts, later)
            .into_iter()
            .filter(|((e, _), _)| *e == epoch)
            .flat_map(|(_, b)| b)
            .collect();
        self.commit_epoch(epoch, &batches)
    }
}
