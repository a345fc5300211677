//! The offset and commit write-ahead logs, after Spark's MicroBatchExecution:
//! `offsets/<N>` is written, durably, before epoch N reads a single row, and
//! `commits/<N>` only after every sink holds epoch N's output. An epoch with
//! an offsets entry but no commit entry is re-run on restart with exactly the
//! recorded ranges and operator version.

use crate::fsutil;
use anyhow::{bail, Context, Result};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::marker::PhantomData;
use std::path::{Path, PathBuf};

/// Version of the entry format, checked on read.
pub const ENTRY_FORMAT: u32 = 1;

/// The operator version and configuration an epoch runs with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OperatorRef {
    /// `sha256:<hex>` of the component; the bytes are kept in `blobs/`.
    pub digest: String,
    /// `sha256:<hex>` of the JSON config text passed to `init`; kept in `blobs/`.
    pub config_digest: String,
}

/// `offsets/<N>`: everything needed to run epoch N again, identically.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OffsetEntry {
    pub format: u32,
    pub epoch: u64,
    /// The epoch's timestamp (Unix ms): the only clock an operator sees.
    pub epoch_time_ms: i64,
    /// The source's range for this epoch, in the source's own format.
    pub source: serde_json::Value,
    pub operator: OperatorRef,
    /// Hash of the pipeline config when the epoch was planned.
    pub config_hash: String,
    /// The watermark the epoch runs with (Unix ms), with `[event_time]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub watermark_ms: Option<i64>,
    /// Set on the first epoch after the operator's component changed: the
    /// digest of the one before, passed to the new version's `migrate` hook
    /// (again on replay, so the epoch's state changes are the same).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub migrate_from: Option<String>,
    /// Rows (0-based, in the order the source reads the range) the
    /// operator failed on and that went to the dead-letter output instead;
    /// a replay leaves out exactly these. Set by amending the entry before
    /// any of the epoch's output was written.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub isolated: Vec<IsolatedRow>,
}

/// A row of an epoch's input that the operator failed on: left out of the
/// epoch and written to the dead-letter output (see [`crate::isolate`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IsolatedRow {
    /// 0-based, in the order the source reads the epoch's range.
    pub row: u64,
    /// How the operator failed on this row alone.
    pub error: String,
}

/// `commits/<N>`: epoch N's output is in the sink.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommitEntry {
    pub format: u32,
    pub epoch: u64,
    pub committed_at_ms: i64,
    pub rows_in: u64,
    pub rows_out: u64,
    /// Largest event time of this and all earlier epochs (Unix ms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_event_time_ms: Option<i64>,
}

/// A directory of numbered JSON entries, one file per epoch, each written
/// atomically. Entries are never rewritten with different content.
pub struct Log<T> {
    dir: PathBuf,
    _entries: PhantomData<T>,
}

impl<T: Serialize + DeserializeOwned + PartialEq> Log<T> {
    /// Opens (creating if needed) the log in `dir`.
    pub fn open(dir: PathBuf) -> Result<Self> {
        fsutil::create_dir_durable(&dir)?;
        fsutil::remove_stale_temps(&dir)?;
        Ok(Log {
            dir,
            _entries: PhantomData,
        })
    }

    /// Opens the log in `dir` for reading only: creates nothing and leaves
    /// temp files alone, since a running pipeline may be writing one.
    pub fn open_read_only(dir: PathBuf) -> Self {
        Log {
            dir,
            _entries: PhantomData,
        }
    }

    fn path(&self, epoch: u64) -> PathBuf {
        self.dir.join(epoch.to_string())
    }

    /// Durably records the entry for `epoch`. Writing the same entry again is
    /// a no-op; a different one is refused, because replay must not change
    /// what an epoch was planned to be.
    pub fn write(&self, epoch: u64, entry: &T) -> Result<()> {
        if let Some(existing) = self.get(epoch)? {
            if &existing == entry {
                return Ok(());
            }
            bail!(
                "{} already holds a different entry for epoch {epoch}",
                self.dir.display()
            );
        }
        let mut bytes = serde_json::to_vec_pretty(entry)?;
        bytes.push(b'\n');
        fsutil::write_atomic(&self.path(epoch), &bytes)
    }

    /// Replaces the entry of an epoch that has not delivered anything yet
    /// (the operator failed before its sink phase): the epoch is re-planned
    /// with another operator version or without the records it failed on.
    /// The caller guarantees that no output of `epoch` was written; the
    /// write is as atomic and durable as [`Log::write`].
    pub fn amend(&self, epoch: u64, entry: &T) -> Result<()> {
        let mut bytes = serde_json::to_vec_pretty(entry)?;
        bytes.push(b'\n');
        fsutil::write_atomic(&self.path(epoch), &bytes)
    }

    /// The entry for `epoch`, if written.
    pub fn get(&self, epoch: u64) -> Result<Option<T>> {
        read_entry(&self.path(epoch))
    }

    /// All epochs present, ascending. Temp files and foreign names are ignored.
    pub fn epochs(&self) -> Result<Vec<u64>> {
        let mut epochs = Vec::new();
        let entries = match std::fs::read_dir(&self.dir) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(epochs),
            other => other.with_context(|| format!("listing {}", self.dir.display()))?,
        };
        for entry in entries {
            let name = entry?.file_name();
            if let Some(n) = name.to_str().and_then(|s| s.parse::<u64>().ok()) {
                epochs.push(n);
            }
        }
        epochs.sort_unstable();
        Ok(epochs)
    }

    /// The newest epoch and its entry.
    pub fn latest(&self) -> Result<Option<(u64, T)>> {
        let Some(&epoch) = self.epochs()?.last() else {
            return Ok(None);
        };
        let entry = self
            .get(epoch)?
            .with_context(|| format!("entry {epoch} vanished from {}", self.dir.display()))?;
        Ok(Some((epoch, entry)))
    }
}

fn read_entry<T: DeserializeOwned>(path: &Path) -> Result<Option<T>> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    };
    let value: serde_json::Value = serde_json::from_slice(&bytes)
        .with_context(|| format!("{} is not valid JSON (corrupt checkpoint?)", path.display()))?;
    let format = value.get("format").and_then(|f| f.as_u64()).unwrap_or(0);
    if format != u64::from(ENTRY_FORMAT) {
        bail!(
            "{} has entry format {format}; this weir reads format {ENTRY_FORMAT}",
            path.display()
        );
    }
    serde_json::from_value(value)
        .map(Some)
        .with_context(|| format!("{} does not hold a valid entry", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn commit(epoch: u64, rows: u64) -> CommitEntry {
        CommitEntry {
            max_event_time_ms: None,
            format: ENTRY_FORMAT,
            epoch,
            committed_at_ms: 0,
            rows_in: rows,
            rows_out: 0,
        }
    }

    #[test]
    fn write_read_latest_and_refuse_rewrite() {
        let dir = tempfile::tempdir().unwrap();
        let log = Log::<CommitEntry>::open(dir.path().join("commits")).unwrap();
        assert!(log.latest().unwrap().is_none());
        log.write(0, &commit(0, 5)).unwrap();
        log.write(2, &commit(2, 7)).unwrap();
        log.write(2, &commit(2, 7)).unwrap();
        assert!(log.write(2, &commit(2, 8)).is_err());
        assert_eq!(log.epochs().unwrap(), vec![0, 2]);
        assert_eq!(log.latest().unwrap().unwrap().1, commit(2, 7));
        std::fs::write(dir.path().join("commits/.2.tmp-1"), b"junk").unwrap();
        assert_eq!(log.epochs().unwrap(), vec![0, 2]);
    }

    #[test]
    fn corrupt_entry_is_an_error_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let log = Log::<CommitEntry>::open(dir.path().join("commits")).unwrap();
        std::fs::write(dir.path().join("commits/3"), b"{not json").unwrap();
        let err = format!("{:#}", log.get(3).unwrap_err());
        assert!(err.contains("commits/3"), "{err}");
    }
}
