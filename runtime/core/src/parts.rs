//! `offsets/<N>.parts`: the mini-batches ("parts") of a real-time epoch, one
//! JSON line each, in order.
//!
//! In real-time mode an epoch's range is not known when it starts: records
//! are handed to the operator as they arrive and each part's output goes to
//! the sink at once. What makes that exactly-once is this log: part `i`'s
//! range is durable here before any of its output reaches the sink, so a
//! replay after a crash re-runs exactly the parts whose output may have
//! been delivered, with the same boundaries (the operator then emits the
//! same rows, and the sink's per-part write is idempotent). A line torn by
//! a crash never had output delivered and is ignored.
//!
//! A part the operator failed on live (none of its output delivered) is
//! **deferred**: a last line `{"deferred": i}` ends the epoch before part
//! `i`, whose range then runs as the next epoch, a micro-batch one, under
//! the failure rules of micro-batch mode (re-plan, auto-rollback, isolate
//! the records). [`PartLog::read`] gives the parts before it,
//! [`PartLog::deferred`] the deferred part.

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::mirror::Mirror;

/// One part: its number in the epoch (0, 1, 2…) and its source range, in
/// the source's own format (as `offsets/N` records a micro-batch range).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartEntry {
    pub part: u32,
    pub range: serde_json::Value,
}

/// The part logs of a checkpoint's epochs, beside their `offsets/N`.
#[derive(Clone)]
pub struct PartLog {
    dir: PathBuf,
    /// The shared checkpoint, which gets each log as it is synced.
    mirror: Option<Arc<Mirror>>,
}

impl PartLog {
    /// The part logs in `dir` (the checkpoint's `offsets/`).
    pub fn new(dir: PathBuf) -> Self {
        PartLog { dir, mirror: None }
    }

    /// Uploads each log to `mirror` (the shared checkpoint) whenever it is
    /// synced, before the parts it holds are delivered.
    pub fn mirrored(mut self, mirror: Option<Arc<Mirror>>) -> Self {
        self.mirror = mirror;
        self
    }

    fn path(&self, epoch: u64) -> PathBuf {
        self.dir.join(format!("{epoch}.parts"))
    }

    /// Starts epoch `epoch`'s log. A new epoch has none yet: finding one
    /// means the caller mistook a replay for a new epoch.
    pub fn create(&self, epoch: u64) -> Result<PartWriter> {
        let path = self.path(epoch);
        let file = OpenOptions::new()
            .append(true)
            .create_new(true)
            .open(&path)
            .with_context(|| format!("creating {}", path.display()))?;
        // The new name must survive a crash before any line in it counts.
        crate::fsutil::sync_dir(&self.dir)
            .with_context(|| format!("syncing {}", self.dir.display()))?;
        Ok(PartWriter {
            file,
            path,
            unsynced: false,
            mirror: self.mirror.clone(),
        })
    }

    /// Ends `epoch`'s log before `part`, its last part, when the first
    /// attempt to ([`PartWriter::defer`]) failed: a torn line that attempt
    /// left is cut off first. Durable on return.
    pub fn defer_last(&self, epoch: u64, part: u32) -> Result<()> {
        let path = self.path(epoch);
        let bytes = std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
        let complete = bytes
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |end| end + 1);
        let file = OpenOptions::new()
            .append(true)
            .open(&path)
            .with_context(|| format!("opening {}", path.display()))?;
        let mut writer = PartWriter {
            file,
            path,
            unsynced: true,
            mirror: self.mirror.clone(),
        };
        // The first attempt wrote the whole line and failed to sync it (or
        // to upload the log): making it durable is all that is left.
        let written =
            decode(&bytes[..complete]).is_ok_and(|d| d.deferred.is_some_and(|p| p.part == part));
        if written {
            return writer.sync();
        }
        writer
            .file
            .set_len(complete as u64)
            .with_context(|| format!("cutting a torn line off {}", writer.path.display()))?;
        writer.defer(part)
    }

    /// The parts of `epoch` in order, up to a deferred one (none if it has
    /// no log).
    pub fn read(&self, epoch: u64) -> Result<Vec<PartEntry>> {
        Ok(self.read_log(epoch)?.parts)
    }

    /// The part of `epoch` the operator failed on live, which runs as the
    /// next epoch instead, if any.
    pub fn deferred(&self, epoch: u64) -> Result<Option<PartEntry>> {
        Ok(self.read_log(epoch)?.deferred)
    }

    /// `epoch`'s parts and its deferred part, from one read of its log (for
    /// callers that need both).
    pub fn read_log(&self, epoch: u64) -> Result<Decoded> {
        let path = self.path(epoch);
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Decoded::default()),
            Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
        };
        decode(&bytes).with_context(|| format!("in {} (corrupt checkpoint?)", path.display()))
    }

    /// Deletes the logs of epochs before `epoch` (compacted away).
    pub fn remove_before(&self, epoch: u64) -> Result<()> {
        let entries = match std::fs::read_dir(&self.dir) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            other => other.with_context(|| format!("listing {}", self.dir.display()))?,
        };
        for entry in entries {
            let entry = entry?;
            let name = entry.file_name();
            let old = name
                .to_str()
                .and_then(|n| n.strip_suffix(".parts"))
                .and_then(|n| n.parse::<u64>().ok())
                .is_some_and(|n| n < epoch);
            if old {
                if let Some(mirror) = &self.mirror {
                    mirror.delete(&entry.path())?;
                }
                std::fs::remove_file(entry.path())
                    .with_context(|| format!("removing {}", entry.path().display()))?;
            }
        }
        Ok(())
    }
}

/// Appends an epoch's parts. [`PartWriter::append`] only writes; the line
/// counts once [`PartWriter::sync`] returned, which the caller does before
/// the part's output goes to the sink (reading and running the operator in
/// between hide the disk's latency).
pub struct PartWriter {
    file: File,
    path: PathBuf,
    unsynced: bool,
    mirror: Option<Arc<Mirror>>,
}

impl PartWriter {
    /// Writes part `entry` as one line.
    pub fn append(&mut self, entry: &PartEntry) -> Result<()> {
        let mut line = serde_json::to_vec(entry)?;
        line.push(b'\n');
        self.file
            .write_all(&line)
            .with_context(|| format!("appending to {}", self.path.display()))?;
        self.unsynced = true;
        Ok(())
    }

    /// Ends the epoch before part `part`, the last one appended, which the
    /// operator failed on before any of its output was delivered; durable
    /// on return.
    pub fn defer(&mut self, part: u32) -> Result<()> {
        let mut line = serde_json::to_vec(&Line::Deferred { deferred: part })?;
        line.push(b'\n');
        self.file
            .write_all(&line)
            .with_context(|| format!("appending to {}", self.path.display()))?;
        self.unsynced = true;
        self.sync()
    }

    /// Makes every line appended so far durable (one `fdatasync` for all).
    pub fn sync(&mut self) -> Result<()> {
        if self.unsynced {
            self.file
                .sync_data()
                .with_context(|| format!("syncing {}", self.path.display()))?;
            if let Some(mirror) = &self.mirror {
                mirror.put_file(&self.path)?;
            }
            self.unsynced = false;
        }
        Ok(())
    }

    /// The log's path, for messages.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// A line of a part log.
#[derive(Serialize, Deserialize)]
#[serde(untagged)]
enum Line {
    Part(PartEntry),
    Deferred { deferred: u32 },
}

/// A part log, read: the epoch's parts and the one deferred after them.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Decoded {
    pub parts: Vec<PartEntry>,
    pub deferred: Option<PartEntry>,
}

/// The entries of a part log's bytes: complete lines only (a torn last line
/// was never synced, so none of its output was delivered), numbered 0, 1,
/// 2…, and the deferred part if a `deferred` line ends the log.
pub fn decode(bytes: &[u8]) -> Result<Decoded> {
    let complete = match bytes.iter().rposition(|&b| b == b'\n') {
        Some(end) => &bytes[..=end],
        None => &[][..],
    };
    let mut out = Decoded::default();
    for (i, line) in complete.split(|&b| b == b'\n').enumerate() {
        if line.is_empty() {
            continue;
        }
        if out.deferred.is_some() {
            bail!("line {} follows the line that ended the epoch", i + 1);
        }
        let line: Line = serde_json::from_slice(line)
            .with_context(|| format!("line {} is not a part entry", i + 1))?;
        match line {
            Line::Part(entry) if entry.part as usize == out.parts.len() => out.parts.push(entry),
            Line::Part(entry) => bail!(
                "line {} holds part {}, expected part {}",
                i + 1,
                entry.part,
                out.parts.len()
            ),
            Line::Deferred { deferred } => match out.parts.pop() {
                Some(last) if last.part == deferred => out.deferred = Some(last),
                _ => bail!(
                    "line {} defers part {deferred}, which is not the last part logged",
                    i + 1
                ),
            },
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn part(n: u32) -> PartEntry {
        PartEntry {
            part: n,
            range: json!({"start": n * 10, "end": n * 10 + 10}),
        }
    }

    #[test]
    fn parts_round_trip_and_a_torn_line_is_ignored() {
        let dir = tempfile::tempdir().unwrap();
        let log = PartLog::new(dir.path().to_path_buf());
        assert!(log.read(3).unwrap().is_empty());
        let mut w = log.create(3).unwrap();
        w.append(&part(0)).unwrap();
        w.append(&part(1)).unwrap();
        w.sync().unwrap();
        assert_eq!(log.read(3).unwrap(), vec![part(0), part(1)]);
        assert!(log.create(3).is_err(), "an epoch's log is created once");
        // A crash in the middle of a line: the part never counted.
        OpenOptions::new()
            .append(true)
            .open(dir.path().join("3.parts"))
            .unwrap()
            .write_all(br#"{"part":2,"ran"#)
            .unwrap();
        assert_eq!(log.read(3).unwrap().len(), 2);
        log.remove_before(4).unwrap();
        assert!(log.read(3).unwrap().is_empty());
    }

    #[test]
    fn out_of_order_or_garbled_lines_are_refused() {
        let skip = format!("{}\n", serde_json::to_string(&part(1)).unwrap());
        assert!(decode(skip.as_bytes()).is_err());
        assert!(decode(b"not json\n").is_err());
        assert!(decode(b"{\"deferred\":0}\n").is_err(), "nothing to defer");
    }

    #[test]
    fn a_deferred_part_ends_the_epoch_before_it() {
        let dir = tempfile::tempdir().unwrap();
        let log = PartLog::new(dir.path().to_path_buf());
        let mut w = log.create(5).unwrap();
        for n in 0..3 {
            w.append(&part(n)).unwrap();
        }
        w.defer(2).unwrap();
        assert_eq!(log.read(5).unwrap(), vec![part(0), part(1)]);
        assert_eq!(log.deferred(5).unwrap(), Some(part(2)));
        assert_eq!(log.deferred(6).unwrap(), None);
        w.append(&part(3)).unwrap();
        w.sync().unwrap();
        assert!(log.read(5).is_err(), "nothing may follow the end");
    }

    #[test]
    fn a_defer_that_failed_once_is_written_after_a_torn_line() {
        let dir = tempfile::tempdir().unwrap();
        let log = PartLog::new(dir.path().to_path_buf());
        let mut w = log.create(3).unwrap();
        w.append(&part(0)).unwrap();
        w.append(&part(1)).unwrap();
        w.sync().unwrap();
        drop(w);
        // The first attempt's line, torn by the failure.
        OpenOptions::new()
            .append(true)
            .open(dir.path().join("3.parts"))
            .unwrap()
            .write_all(br#"{"deferr"#)
            .unwrap();
        log.defer_last(3, 1).unwrap();
        let decoded = log.read_log(3).unwrap();
        assert_eq!(decoded.parts, vec![part(0)]);
        assert_eq!(decoded.deferred, Some(part(1)));
        // A second attempt after one that wrote the line but failed to
        // sync it writes no second line.
        log.defer_last(3, 1).unwrap();
        assert_eq!(log.read_log(3).unwrap(), decoded);
    }
}
