//! The offset and commit write-ahead logs, after Spark's MicroBatchExecution:
//! `offsets/<N>` is written, durably, before epoch N reads a single row, and
//! `commits/<N>` only after every sink holds epoch N's output. An epoch with
//! an offsets entry but no commit entry is re-run on restart with exactly the
//! recorded ranges and operator version.

use crate::mirror::{write_through, Created, Mirror};
use crate::{fsutil, Digest};
use anyhow::{bail, Context, Result};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::marker::PhantomData;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Version of the entry format, checked on read.
pub const ENTRY_FORMAT: u32 = 1;

/// The operator version and configuration an epoch runs with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct OperatorRef {
    /// The component's digest; its bytes are kept in `blobs/`.
    pub digest: Digest,
    /// The digest of the JSON config text passed to `init`; kept in `blobs/`.
    pub config_digest: Digest,
    /// The digest of the version's artifact manifest (name → digest, see
    /// [`crate::artifacts`]); `None` when it has no artifacts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifacts: Option<Digest>,
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
    /// The watermark the epoch runs with (Unix ms), with `[event_time]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub watermark_ms: Option<i64>,
    /// The watermark of the epoch before (Unix ms): windows it reached were
    /// closed by then, so rows for them are late (Spark ≥ 3.4 filters late
    /// rows with the previous batch's watermark and closes windows with
    /// the current one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_watermark_ms: Option<i64>,
    /// Set on the first epoch after the operator's component changed: the
    /// digest of the one before, passed to the new version's `migrate` hook
    /// (again on replay, so the epoch's state changes are the same).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub migrate_from: Option<Digest>,
    /// Rows (0-based, in the order the source reads the range) the
    /// operator failed on and that went to the dead-letter output instead;
    /// a replay leaves out exactly these. Set by amending the entry before
    /// any of the epoch's output was written.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub isolated: Vec<IsolatedRow>,
    /// A real-time epoch: its range is not `source` (null) but the parts in
    /// `offsets/N.parts`, logged as they run ([`crate::parts`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub real_time: bool,
    /// An epoch without input (`source` is null), run because its
    /// watermark reaches timers no epoch with data would fire yet: the
    /// source had nothing new, or ended (Spark's no-data micro-batch).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub no_data: bool,
    /// How the epoch's rows were divided among parallel tasks; `None`: one
    /// task. Recorded so that a replay divides them the same way whatever
    /// `parallelism` the restart has: each task's sink write (a file, a
    /// claim, a transaction) then holds the same rows as before the crash.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tasks: Option<TaskSplit>,
    /// The version (content digest) of each reference table the epoch
    /// reads (`[[lookup]]`): a replay reads these, whatever the newest are.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub lookups: std::collections::BTreeMap<String, Digest>,
}

/// How an epoch's rows are dealt to its tasks ([`OffsetEntry::tasks`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskSplit {
    /// How many tasks ran the epoch (at least 2).
    pub count: u16,
    /// The input column rows were routed by; `None`: by source partition
    /// where the source has them, else in even shares.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
}

/// A row of an epoch's input that the operator failed on: left out of the
/// epoch and written to the dead-letter output (the engine isolates them by bisection).
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

/// `offsets/<N>.compact`: epochs `0..=N` folded into one entry, so that a
/// start reads it and the few newest entries rather than every entry since
/// epoch 0 (Spark compacts its logs every so many batches the same way).
/// Entries up to `N` may then be deleted, except those a state rebuild may
/// still replay.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Compacted {
    pub format: u32,
    /// The newest epoch folded in; it was committed.
    pub epoch: u64,
    /// Everything the source planned in epochs `0..=epoch`, as one range
    /// its `restore` accepts ([`crate::source::Source::planned_so_far`]).
    pub source: serde_json::Value,
    /// Input and output rows of epochs `0..=epoch`.
    pub rows_in: u64,
    pub rows_out: u64,
}

/// Suffix of compacted entries in the offsets directory.
const COMPACT_SUFFIX: &str = ".compact";

/// A directory of numbered JSON entries, one file per epoch, each written
/// atomically. Entries are never rewritten with different content.
pub struct Log<T> {
    dir: PathBuf,
    /// The checkpoint's copy on shared storage, written before the local
    /// file ([`crate::mirror`]).
    mirror: Option<Arc<Mirror>>,
    _entries: PhantomData<T>,
}

/// Another writer (a worker that took the pipeline's partitions over, or
/// one that lost them) holds a different entry for the epoch in the shared
/// checkpoint: this writer must not go on with the epoch.
#[derive(Debug, thiserror::Error)]
#[error(
    "{url} already holds a different {dir}/{epoch}: another worker planned or committed this \
     epoch; this worker no longer owns it and writes nothing more for it"
)]
pub struct EntryTaken {
    pub url: String,
    pub dir: String,
    pub epoch: u64,
}

impl<T: Serialize + DeserializeOwned + PartialEq> Log<T> {
    /// Opens (creating if needed) the log in `dir`.
    pub fn open(dir: PathBuf) -> Result<Self> {
        fsutil::create_dir_durable(&dir)?;
        fsutil::remove_stale_temps(&dir)?;
        Ok(Log {
            dir,
            mirror: None,
            _entries: PhantomData,
        })
    }

    /// Writes every entry to `mirror` (the shared checkpoint) before the
    /// local file.
    pub fn mirrored(mut self, mirror: Option<Arc<Mirror>>) -> Self {
        self.mirror = mirror;
        self
    }

    /// Opens the log in `dir` for reading only: creates nothing and leaves
    /// temp files alone, since a running pipeline may be writing one.
    pub fn open_read_only(dir: PathBuf) -> Self {
        Log {
            dir,
            mirror: None,
            _entries: PhantomData,
        }
    }

    fn path(&self, epoch: u64) -> PathBuf {
        self.dir.join(epoch.to_string())
    }

    /// Durably records the entry for `epoch`. Writing the same entry again is
    /// a no-op; a different one is refused, because replay must not change
    /// what an epoch was planned to be. With a shared checkpoint the entry
    /// is created there first, and refused with [`EntryTaken`] if another
    /// worker wrote a different one.
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
        let bytes = encode(entry)?;
        let path = self.path(epoch);
        if let Some(mirror) = &self.mirror {
            if let Created::Exists(theirs) = mirror.create(&path, &bytes)? {
                let same = decode_entry::<T>(&theirs).is_ok_and(|theirs| &theirs == entry);
                if !same {
                    return Err(EntryTaken {
                        url: mirror.url(),
                        dir: self.dir_name(),
                        epoch,
                    }
                    .into());
                }
            }
        }
        fsutil::write_atomic(&path, &bytes)
    }

    fn dir_name(&self) -> String {
        self.dir
            .file_name()
            .map_or_else(String::new, |n| n.to_string_lossy().into_owned())
    }

    /// Replaces the entry of an epoch that has not delivered anything yet
    /// (the operator failed before its sink phase): the epoch is re-planned
    /// with another operator version or without the records it failed on.
    /// The caller guarantees that no output of `epoch` was written; the
    /// write is as atomic and durable as [`Log::write`].
    pub fn amend(&self, epoch: u64, entry: &T) -> Result<()> {
        write_through(self.mirror.as_deref(), &self.path(epoch), &encode(entry)?)
    }

    /// The entry for `epoch`, if written.
    pub fn get(&self, epoch: u64) -> Result<Option<T>> {
        read_entry(&self.path(epoch))
    }

    /// All epochs present, ascending. Temp files and foreign names are ignored.
    pub fn epochs(&self) -> Result<Vec<u64>> {
        self.numbered("")
    }

    /// The numbers `n` of the files named `<n><suffix>`, ascending.
    fn numbered(&self, suffix: &str) -> Result<Vec<u64>> {
        let mut found = Vec::new();
        let entries = match std::fs::read_dir(&self.dir) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(found),
            other => other.with_context(|| format!("listing {}", self.dir.display()))?,
        };
        for entry in entries {
            let name = entry?.file_name();
            if let Some(n) = name
                .to_str()
                .and_then(|s| s.strip_suffix(suffix))
                .and_then(|s| s.parse::<u64>().ok())
            {
                found.push(n);
            }
        }
        found.sort_unstable();
        Ok(found)
    }

    /// Deletes the entries of epochs before `epoch` (they were compacted),
    /// oldest first, so a crash leaves a contiguous tail.
    pub fn remove_before(&self, epoch: u64) -> Result<usize> {
        let mut removed = 0;
        for e in self.epochs()?.into_iter().take_while(|&e| e < epoch) {
            if let Some(mirror) = &self.mirror {
                mirror.delete(&self.path(e))?;
            }
            match std::fs::remove_file(self.path(e)) {
                Ok(()) => removed += 1,
                Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
                Err(err) => {
                    return Err(err).with_context(|| format!("removing {}", self.path(e).display()))
                }
            }
        }
        if removed > 0 {
            fsutil::sync_dir(&self.dir)
                .with_context(|| format!("syncing {}", self.dir.display()))?;
        }
        Ok(removed)
    }

    /// The newest compacted entry in this directory, if any.
    pub fn compacted(&self) -> Result<Option<Compacted>> {
        let Some(epoch) = self.compacted_epochs()?.last().copied() else {
            return Ok(None);
        };
        read_entry(&self.compact_path(epoch))
    }

    /// Durably writes `entry` as `<epoch>.compact` and removes older ones.
    pub fn write_compacted(&self, entry: &Compacted) -> Result<()> {
        let mut bytes = serde_json::to_vec(entry)?;
        bytes.push(b'\n');
        write_through(
            self.mirror.as_deref(),
            &self.compact_path(entry.epoch),
            &bytes,
        )?;
        for old in self.compacted_epochs()? {
            if old < entry.epoch {
                if let Some(mirror) = &self.mirror {
                    mirror.delete(&self.compact_path(old))?;
                }
                let _ = std::fs::remove_file(self.compact_path(old));
            }
        }
        Ok(())
    }

    fn compact_path(&self, epoch: u64) -> PathBuf {
        self.dir.join(format!("{epoch}{COMPACT_SUFFIX}"))
    }

    fn compacted_epochs(&self) -> Result<Vec<u64>> {
        self.numbered(COMPACT_SUFFIX)
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

/// An entry as its file holds it: pretty JSON and a newline.
fn encode<T: Serialize>(entry: &T) -> Result<Vec<u8>> {
    let mut bytes = serde_json::to_vec_pretty(entry)?;
    bytes.push(b'\n');
    Ok(bytes)
}

fn read_entry<T: DeserializeOwned>(path: &Path) -> Result<Option<T>> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    };
    decode_entry(&bytes)
        .map(Some)
        .with_context(|| format!("in {} (corrupt checkpoint?)", path.display()))
}

/// One log entry from its file's bytes: JSON of the entry format this
/// build writes ([`ENTRY_FORMAT`]), or an error saying what is wrong.
pub fn decode_entry<T: DeserializeOwned>(bytes: &[u8]) -> Result<T> {
    let value: serde_json::Value =
        serde_json::from_slice(bytes).context("the entry is not valid JSON")?;
    let format = value.get("format").and_then(|f| f.as_u64()).unwrap_or(0);
    if format != u64::from(ENTRY_FORMAT) {
        bail!("the entry has format {format}; this weir reads format {ENTRY_FORMAT}");
    }
    serde_json::from_value(value).context("the JSON does not hold a valid entry")
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
    fn a_number_read_from_an_entry_is_written_back_as_the_same_number() {
        // Too large for u64, so read as the nearest f64; written back in its
        // shortest form, it must read as that f64 again, or a replay could
        // plan from another source position than the run it replays.
        let text = br#"{"format":1,"epoch":7,"epoch_time_ms":0,
            "source":{"size":186666666666666396666666666666666666666666666666666666666666666666666666666666666666666666666666666666666666666666620},
            "operator":{"digest":"sha256:6985ba1f4daa5a584a28eae043a239cb96689af1337ea13afb63e00c2bf512fa",
                        "config_digest":"sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"}}"#;
        let entry = decode_entry::<OffsetEntry>(text).unwrap();
        let again = serde_json::to_vec(&entry).unwrap();
        assert_eq!(decode_entry::<OffsetEntry>(&again).unwrap(), entry);
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
    fn compaction_keeps_the_newest_fold_and_prunes_old_entries() {
        let dir = tempfile::tempdir().unwrap();
        let log = Log::<CommitEntry>::open(dir.path().join("offsets")).unwrap();
        for e in 0..10 {
            log.write(e, &commit(e, 1)).unwrap();
        }
        let fold = |epoch| Compacted {
            format: ENTRY_FORMAT,
            epoch,
            source: serde_json::json!({ "upto": epoch }),
            rows_in: epoch + 1,
            rows_out: 0,
        };
        log.write_compacted(&fold(4)).unwrap();
        log.write_compacted(&fold(8)).unwrap();
        assert_eq!(log.compacted().unwrap(), Some(fold(8)));
        assert_eq!(
            log.compacted_epochs().unwrap(),
            vec![8],
            "older folds removed"
        );
        assert_eq!(log.remove_before(6).unwrap(), 6);
        assert_eq!(
            log.epochs().unwrap(),
            vec![6, 7, 8, 9],
            "compact files are no epochs"
        );
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
