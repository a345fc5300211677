//! The checkpoint directory: `metadata`, `offsets/`, `commits/`, `state/`
//! and `blobs/` (content-addressed operator components and configs, so that
//! a replay can always load the exact version an epoch was planned with).

use crate::mirror::{write_through, Created, Mirror};
use crate::parts::PartLog;
use crate::wal::{CommitEntry, Compacted, Log, OffsetEntry, ENTRY_FORMAT};
use crate::{fsutil, Digest};
use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Version of the checkpoint layout.
pub const FORMAT_VERSION: u32 = 1;

/// `metadata`: identifies the query a checkpoint belongs to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Metadata {
    pub format_version: u32,
    /// Random id given when the checkpoint is created.
    pub query_id: String,
    /// Creation time, Unix ms.
    pub created_ms: i64,
    /// Pipeline name.
    pub pipeline: String,
    /// Identity of the source (kind and location); must not change.
    pub source: String,
    /// Identity of the sink (kind and location); must not change.
    pub sink: String,
    /// The source's columns. May only gain nullable columns: replays read
    /// old epochs with the current schema. `None` in checkpoints made
    /// before it was recorded (filled in on their next start).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<Vec<SchemaColumn>>,
}

/// One column of [`Metadata::schema`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SchemaColumn {
    pub name: String,
    /// The Arrow type, as Arrow prints it (`Int64`, `Utf8`, ...).
    #[serde(rename = "type")]
    pub data_type: String,
    pub nullable: bool,
}

impl SchemaColumn {
    /// The columns of an Arrow schema.
    pub fn of(schema: &arrow_schema::Schema) -> Vec<SchemaColumn> {
        schema
            .fields()
            .iter()
            .map(|f| SchemaColumn {
                name: f.name().clone(),
                data_type: f.data_type().to_string(),
                nullable: f.is_nullable(),
            })
            .collect()
    }
}

/// Why `new` cannot read what a checkpoint made with `old` planned, if it
/// cannot: a column removed or retyped, or a new one not nullable.
fn schema_change_refused(old: &[SchemaColumn], new: &[SchemaColumn]) -> Option<String> {
    for o in old {
        match new.iter().find(|n| n.name == o.name) {
            None => return Some(format!("column `{}` was removed", o.name)),
            Some(n) if n.data_type != o.data_type => {
                return Some(format!(
                    "column `{}` changed type from {} to {}",
                    o.name, o.data_type, n.data_type
                ))
            }
            Some(_) => {}
        }
    }
    new.iter()
        .find(|n| !n.nullable && !old.iter().any(|o| o.name == n.name))
        .map(|n| format!("new column `{}` is not nullable", n.name))
}

/// An open checkpoint directory.
pub struct Checkpoint {
    root: PathBuf,
    pub metadata: Metadata,
    pub offsets: Log<OffsetEntry>,
    pub commits: Log<CommitEntry>,
    /// The part logs of real-time epochs, beside their `offsets/N`.
    pub parts: PartLog,
    /// The shared copy this directory caches, if the checkpoint is in an
    /// object store ([`crate::mirror`]).
    mirror: Option<Arc<Mirror>>,
    /// The one-writer lock, held while the checkpoint is open for writing
    /// (`None` for [`Checkpoint::inspect`]).
    _writer: Option<WriterLock>,
}

/// `LOCK` in a checkpoint's root, locked (`flock`) by the one process
/// that writes the checkpoint, for as long as it has it open. Taken before
/// anything in the checkpoint is touched, so a second `weir run` on the
/// same checkpoint changes nothing (not even a temp file the first one is
/// writing); it holds the owner's pid and start time for the refusal.
/// Maintenance commands (`weir checkpoint repair`) take it too.
#[derive(Debug)]
pub struct WriterLock(#[allow(dead_code)] std::fs::File);

impl WriterLock {
    const FILE: &'static str = "LOCK";

    /// Takes the lock of the checkpoint at `root`, or says which process
    /// holds it.
    pub fn take(root: &Path) -> Result<WriterLock> {
        use std::io::Write;
        let path = root.join(Self::FILE);
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .with_context(|| format!("opening {}", path.display()))?;
        match file.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                let owner = std::fs::read_to_string(&path).unwrap_or_default();
                let owner = match owner.trim() {
                    "" => "another process".to_string(),
                    o => o.to_string(),
                };
                bail!(
                    "checkpoint {} is in use: {owner} holds {}. One process writes a \
                     checkpoint at a time; stop that one first, or give this pipeline its own \
                     `checkpoint`",
                    root.display(),
                    path.display()
                );
            }
            Err(std::fs::TryLockError::Error(e)) => {
                return Err(e).with_context(|| format!("locking {}", path.display()))
            }
        }
        let owner = format!(
            "weir process {} (started {})\n",
            std::process::id(),
            humantime::format_rfc3339_seconds(std::time::SystemTime::now())
        );
        file.set_len(0)
            .and_then(|()| file.write_all(owner.as_bytes()))
            .with_context(|| format!("writing {}", path.display()))?;
        Ok(WriterLock(file))
    }
}

/// Whether `path` is on a filesystem that does not survive a reboot.
pub(crate) fn ephemeral_reason(path: &Path) -> Option<String> {
    let abs = path.canonicalize().ok()?;
    if abs.starts_with("/tmp") || abs.starts_with("/dev/shm") {
        return Some(format!("{} is under a temporary directory", abs.display()));
    }
    let mounts = std::fs::read_to_string("/proc/mounts").ok()?;
    let mut best: Option<(usize, String)> = None;
    for line in mounts.lines() {
        let mut parts = line.split_whitespace();
        let (_dev, mnt, fstype) = (parts.next()?, parts.next()?, parts.next()?);
        if abs.starts_with(mnt) && best.as_ref().is_none_or(|(len, _)| mnt.len() > *len) {
            best = Some((mnt.len(), fstype.to_string()));
        }
    }
    match best {
        Some((_, fs)) if fs == "tmpfs" || fs == "ramfs" => {
            Some(format!("{} is on {fs}", abs.display()))
        }
        _ => None,
    }
}

impl Checkpoint {
    /// Opens `root`, creating it for a new query or checking that an
    /// existing one belongs to this pipeline (same name, source and sink).
    pub fn open(root: &Path, expected: Metadata, quiet_if_ephemeral: bool) -> Result<Self> {
        Self::open_mirrored(root, expected, quiet_if_ephemeral, None)
    }

    /// [`Checkpoint::open`] for a checkpoint kept in an object store, with
    /// `root` as its local cache: pulls what the cache lacks first, and
    /// from then on writes every entry there before the local file. Two
    /// workers creating the checkpoint at once agree on one metadata (and
    /// query id): the one created first.
    pub fn open_mirrored(
        root: &Path,
        expected: Metadata,
        quiet_if_ephemeral: bool,
        mirror: Option<Arc<Mirror>>,
    ) -> Result<Self> {
        fsutil::create_dir_durable(root)?;
        let writer = WriterLock::take(root)?;
        if let Some(mirror) = &mirror {
            let pulled = mirror
                .pull()
                .with_context(|| format!("pulling the checkpoint from {}", mirror.url()))?;
            tracing::info!(
                checkpoint = %mirror.url(),
                cache = %root.display(),
                downloaded = pulled.downloaded,
                stale_removed = pulled.removed,
                snapshot = ?pulled.snapshot,
                "checkpoint pulled from the object store"
            );
            claim_metadata(mirror, &root.join("metadata"), &expected)?;
        } else if let Some(reason) = ephemeral_reason(root) {
            if !quiet_if_ephemeral {
                tracing::warn!(
                    "CHECKPOINT IS NOT DURABLE: {reason}; a reboot loses it and exactly-once \
                     recovery with it. Put `checkpoint` on persistent storage."
                );
            }
        }
        let meta_path = root.join("metadata");
        let metadata = match std::fs::read(&meta_path) {
            Ok(bytes) => {
                let found: Metadata = serde_json::from_slice(&bytes)
                    .with_context(|| format!("{} is not valid metadata", meta_path.display()))?;
                if found.format_version != FORMAT_VERSION {
                    bail!(
                        "checkpoint {} has format version {}; this weir uses {FORMAT_VERSION}",
                        root.display(),
                        found.format_version
                    );
                }
                let mut found = found;
                let mut upgraded = upgrade_legacy_paths(&mut found, &expected);
                match (&found.schema, &expected.schema) {
                    (Some(old), Some(new)) if old != new => {
                        if let Some(why) = schema_change_refused(old, new) {
                            bail!(
                                "checkpoint {} was made for another source schema: {why}. \
                                 Replays read earlier epochs with the current schema, so a \
                                 checkpoint may only gain nullable columns. Use a new \
                                 checkpoint directory for the new schema.",
                                root.display()
                            );
                        }
                        tracing::info!(
                            "checkpoint {}: the source schema gained nullable columns",
                            root.display()
                        );
                        found.schema = expected.schema.clone();
                        upgraded = true;
                    }
                    (None, Some(_)) => {
                        found.schema = expected.schema.clone();
                        upgraded = true;
                    }
                    _ => {}
                }
                if upgraded {
                    let mut bytes = serde_json::to_vec_pretty(&found)?;
                    bytes.push(b'\n');
                    write_through(mirror.as_deref(), &meta_path, &bytes)?;
                }
                for (what, have, want) in [
                    ("pipeline", &found.pipeline, &expected.pipeline),
                    ("source", &found.source, &expected.source),
                    ("sink", &found.sink, &expected.sink),
                ] {
                    if have != want {
                        bail!(
                            "checkpoint {} belongs to a different query: its {what} is `{have}` \
                             but this pipeline's is `{want}`. Use a new checkpoint directory \
                             for a different pipeline (query id {}).",
                            root.display(),
                            found.query_id
                        );
                    }
                }
                found
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                refuse_logs_without_metadata(root)?;
                let mut bytes = serde_json::to_vec_pretty(&expected)?;
                bytes.push(b'\n');
                fsutil::write_atomic(&meta_path, &bytes)?;
                expected
            }
            Err(e) => return Err(e).with_context(|| format!("reading {}", meta_path.display())),
        };
        fsutil::create_dir_durable(&root.join("state"))?;
        fsutil::create_dir_durable(&root.join("blobs"))?;
        let checkpoint = Checkpoint {
            offsets: Log::open(root.join("offsets"))?.mirrored(mirror.clone()),
            commits: Log::open(root.join("commits"))?.mirrored(mirror.clone()),
            parts: PartLog::new(root.join("offsets")).mirrored(mirror.clone()),
            root: root.to_path_buf(),
            metadata,
            mirror,
            _writer: Some(writer),
        };
        checkpoint.check_logs()?;
        Ok(checkpoint)
    }

    /// Refuses a damaged offset or commit log: every epoch from 0 to the
    /// newest planned one has `offsets/N`, every epoch up to the newest
    /// committed one has `commits/N`, and only the newest planned epoch may
    /// lack its commit. A gap means weir cannot tell what an epoch read or
    /// whether its output was delivered: going on could lose or duplicate
    /// output, so the start fails with what is wrong and what to do.
    pub fn check_logs(&self) -> Result<()> {
        let offsets = self.offsets.epochs()?;
        let commits = self.commits.epochs()?;
        let folded = self.offsets.compacted()?.map(|c| c.epoch);
        let damaged = |what: String| {
            anyhow::anyhow!(
                "checkpoint {} is damaged: {what}. Weir cannot tell what that epoch read or \
                 whether its output was delivered, so it does not go on (that could lose or \
                 duplicate output). Restore the checkpoint directory from a backup, or start \
                 over with a new, empty checkpoint directory (output already in the sink is \
                 then not deduplicated against the new run).",
                self.root.display()
            )
        };
        if let Some(gap) = first_gap(&offsets, folded) {
            return Err(damaged(format!(
                "offsets/{gap} is missing but epochs up to {} were planned",
                offsets.last().copied().unwrap_or(gap)
            )));
        }
        if let Some(gap) = first_gap(&commits, folded) {
            return Err(damaged(format!(
                "commits/{gap} is missing but epochs up to {} were committed",
                commits.last().copied().unwrap_or(gap)
            )));
        }
        let planned = offsets.last().copied().or(folded);
        let committed = commits.last().copied().or(folded);
        match (planned, committed) {
            (None, Some(c)) => Err(damaged(format!(
                "commits/{c} exists but no epoch was planned (offsets/ is empty)"
            ))),
            (Some(o), Some(c)) if c > o => Err(damaged(format!(
                "commits/{c} exists but offsets/{c} does not (the newest planned epoch is {o})"
            ))),
            (Some(o), c) if o > c.map_or(0, |c| c + 1) => Err(damaged(format!(
                "epochs up to {o} were planned but {}; only the newest epoch may be \
                 uncommitted (commits/{} is missing)",
                c.map_or("none committed".to_string(), |c| format!(
                    "only up to {c} committed"
                )),
                c.map_or(0, |c| c + 1)
            ))),
            _ => Ok(()),
        }
    }

    /// Folds epochs up to `epoch` (just committed) into `offsets/<epoch>.compact`
    /// with `source`, the source's [`crate::source::Source::planned_so_far`],
    /// and deletes offset and commit entries before `keep_from`. A crash in
    /// between leaves both the fold and the entries, which a start reads
    /// consistently (entries up to the fold are not restored again).
    pub fn compact(&self, epoch: u64, source: serde_json::Value, keep_from: u64) -> Result<()> {
        let previous = self.offsets.compacted()?;
        let (mut rows_in, mut rows_out) = previous
            .as_ref()
            .map_or((0, 0), |c| (c.rows_in, c.rows_out));
        let after = previous.as_ref().map_or(0, |c| c.epoch + 1);
        for e in after..=epoch {
            let c = self
                .commits
                .get(e)?
                .with_context(|| format!("compacting: commits/{e} is missing"))?;
            rows_in += c.rows_in;
            rows_out += c.rows_out;
        }
        self.offsets.write_compacted(&Compacted {
            format: ENTRY_FORMAT,
            epoch,
            source,
            rows_in,
            rows_out,
        })?;
        let keep_from = keep_from.min(epoch + 1);
        // Commits first: a crash then leaves offsets without commits only
        // for epochs already folded in.
        self.commits.remove_before(keep_from)?;
        self.offsets.remove_before(keep_from)?;
        self.parts.remove_before(keep_from)?;
        Ok(())
    }

    /// The newest fold of the offset log, if it was compacted.
    pub fn compacted(&self) -> Result<Option<Compacted>> {
        self.offsets.compacted()
    }

    /// Opens an existing checkpoint for reading, without checks and without
    /// touching it, so it is safe while a pipeline runs on it (for `weir
    /// checkpoint show`).
    pub fn inspect(root: &Path) -> Result<Self> {
        let meta_path = root.join("metadata");
        let bytes = std::fs::read(&meta_path).with_context(|| {
            format!("{} is not a checkpoint (no metadata file)", root.display())
        })?;
        let metadata = serde_json::from_slice(&bytes)
            .with_context(|| format!("{} is not valid metadata", meta_path.display()))?;
        Ok(Checkpoint {
            offsets: Log::open_read_only(root.join("offsets")),
            commits: Log::open_read_only(root.join("commits")),
            parts: PartLog::new(root.join("offsets")),
            root: root.to_path_buf(),
            metadata,
            mirror: None,
            _writer: None,
        })
    }

    /// Input rows of all committed epochs: how far a pipeline has got.
    pub fn committed_rows(&self) -> Result<u64> {
        let folded = self.offsets.compacted()?;
        let mut rows = folded.as_ref().map_or(0, |c| c.rows_in);
        for epoch in self.commits.epochs()? {
            if folded.as_ref().is_some_and(|c| epoch <= c.epoch) {
                continue;
            }
            rows += self.commits.get(epoch)?.map_or(0, |c| c.rows_in);
        }
        Ok(rows)
    }

    /// The checkpoint directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Stores `bytes` under their digest and returns it.
    pub fn put_blob(&self, bytes: &[u8]) -> Result<Digest> {
        self.blobs().put(bytes)
    }

    /// Reads a blob back, verifying its digest.
    pub fn get_blob(&self, digest: &Digest) -> Result<Vec<u8>> {
        self.blobs().get(digest)
    }

    /// The blob store, for code that outlives a borrow of the checkpoint
    /// (the admin API stores uploads in it).
    pub fn blobs(&self) -> Blobs {
        Blobs {
            dir: self.root.join("blobs"),
            mirror: self.mirror.clone(),
        }
    }

    /// The shared copy this directory caches, if the checkpoint is kept in
    /// an object store: what else belongs in it (the operator registry,
    /// state snapshots) is written there too.
    pub fn mirror(&self) -> Option<&Arc<Mirror>> {
        self.mirror.as_ref()
    }
}

/// The first missing number of `epochs` (ascending), which must run
/// without a hole from 0 or, when the log was compacted up to `folded`,
/// from at most `folded + 1`.
fn first_gap(epochs: &[u64], folded: Option<u64>) -> Option<u64> {
    let start = match (epochs.first(), folded) {
        (None, _) => return None,
        (Some(&first), Some(f)) if first <= f + 1 => first,
        (Some(_), Some(f)) => return Some(f + 1),
        (Some(_), None) => 0,
    };
    (start..)
        .zip(epochs)
        .find(|(want, &have)| *want != have)
        .map(|(want, _)| want)
}

/// A checkpoint whose `metadata` is gone but whose logs are not is damaged:
/// making new metadata would silently give it a new query id.
fn refuse_logs_without_metadata(root: &Path) -> Result<()> {
    for log in ["offsets", "commits"] {
        let dir = root.join(log);
        let has_entries = std::fs::read_dir(&dir).is_ok_and(|mut entries| {
            entries.any(|e| {
                e.ok()
                    .and_then(|e| e.file_name().to_str()?.parse::<u64>().ok())
                    .is_some()
            })
        });
        if has_entries {
            bail!(
                "checkpoint {} is damaged: {} is missing but {} holds epochs. Restore the \
                 metadata file from a backup (it names the query id the sinks know), or start \
                 over with a new, empty checkpoint directory.",
                root.display(),
                root.join("metadata").display(),
                dir.display()
            );
        }
    }
    Ok(())
}

/// Makes sure the local `metadata` is the shared checkpoint's: creates it
/// there from `expected` if it has none (conditionally: of two workers
/// starting a new checkpoint at once, the first one's wins), else keeps
/// the one [`Mirror::pull`] brought.
fn claim_metadata(mirror: &Mirror, meta_path: &Path, expected: &Metadata) -> Result<()> {
    if meta_path.exists() {
        return Ok(());
    }
    let mut bytes = serde_json::to_vec_pretty(expected)?;
    bytes.push(b'\n');
    if let Created::Exists(theirs) = mirror.create(meta_path, &bytes)? {
        bytes = theirs;
    }
    fsutil::write_atomic(meta_path, &bytes)
}

/// Checkpoints made before paths were canonical recorded a `files:` path
/// as the pipeline file spelled it (`files:./input`). When the canonical
/// path of this run ends with that relative path, it is the same place:
/// the metadata is upgraded rather than the checkpoint refused. Returns
/// whether anything changed.
fn upgrade_legacy_paths(found: &mut Metadata, expected: &Metadata) -> bool {
    let mut changed = false;
    for (have, want) in [
        (&mut found.source, &expected.source),
        (&mut found.sink, &expected.sink),
    ] {
        let (Some(old), Some(new)) = (have.strip_prefix("files:"), want.strip_prefix("files:"))
        else {
            continue;
        };
        let old = fsutil::normalize(Path::new(old));
        if old.is_relative() && !old.as_os_str().is_empty() && Path::new(new).ends_with(&old) {
            *have = want.clone();
            changed = true;
        }
    }
    changed
}

/// `checkpoint/blobs/`: byte strings stored under their sha256, written
/// once and verified on every read.
#[derive(Clone)]
pub struct Blobs {
    dir: PathBuf,
    mirror: Option<Arc<Mirror>>,
}

impl Blobs {
    /// The blob store in `dir`, kept in `mirror` too if there is one: a
    /// cluster's shared blobs live beside its partitions' checkpoints.
    pub fn new(dir: PathBuf, mirror: Option<Arc<Mirror>>) -> Self {
        Blobs { dir, mirror }
    }

    /// Stores `bytes` under their digest and returns it (in the shared
    /// checkpoint first, if there is one).
    pub fn put(&self, bytes: &[u8]) -> Result<Digest> {
        let digest = Digest::of(bytes);
        let path = self.dir.join(digest.hex());
        if !path.exists() {
            if let Some(mirror) = &self.mirror {
                mirror.create(&path, bytes)?;
            }
            fsutil::write_atomic(&path, bytes)?;
        }
        Ok(digest)
    }

    /// Reads a blob back, verifying its digest.
    /// A blob the local cache lacks is fetched from the shared checkpoint
    /// (another worker stored it) and kept.
    pub fn get(&self, digest: &Digest) -> Result<Vec<u8>> {
        let path = self.dir.join(digest.hex());
        let bytes = match std::fs::read(&path) {
            Ok(bytes) => bytes,
            // Verified by `fetch` before it is kept.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return self.fetch(&path, digest)?.with_context(|| {
                    format!("checkpoint is missing blob {digest} ({})", path.display())
                });
            }
            Err(e) => return Err(e).with_context(|| format!("reading blob {}", path.display())),
        };
        let actual = Digest::of(&bytes);
        if actual != *digest {
            bail!(
                "blob {} is corrupt: its content hashes to {actual}",
                path.display()
            );
        }
        Ok(bytes)
    }

    /// Removes the blob `digest` (from the shared checkpoint first, if
    /// there is one); a blob already gone is fine. Only for blobs nothing
    /// refers to any more: see the engine's lookup-table collection.
    pub fn remove(&self, digest: &Digest) -> Result<()> {
        let path = self.dir.join(digest.hex());
        if let Some(mirror) = &self.mirror {
            mirror.delete(&path)?;
        }
        match std::fs::remove_file(&path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(e).with_context(|| format!("removing blob {}", path.display())),
        }
    }

    /// The blob `digest` at `path` from the shared checkpoint, verified,
    /// then kept locally.
    fn fetch(&self, path: &Path, digest: &Digest) -> Result<Option<Vec<u8>>> {
        let Some(mirror) = &self.mirror else {
            return Ok(None);
        };
        let Some(bytes) = mirror.get(path)? else {
            return Ok(None);
        };
        let actual = Digest::of(&bytes);
        if actual != *digest {
            bail!(
                "{}/{} is damaged: its content hashes to {actual}",
                mirror.url(),
                mirror.key(path)?
            );
        }
        fsutil::create_dir_durable(&self.dir)?;
        fsutil::write_atomic(path, &bytes)?;
        Ok(Some(bytes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(pipeline: &str) -> Metadata {
        Metadata {
            format_version: FORMAT_VERSION,
            query_id: "q".into(),
            created_ms: 0,
            pipeline: pipeline.into(),
            source: "files:/in".into(),
            sink: "files:/out".into(),
            schema: None,
        }
    }

    #[test]
    fn tmp_is_reported_as_ephemeral() {
        let dir = tempfile::tempdir_in("/tmp").unwrap();
        assert!(ephemeral_reason(dir.path()).is_some());
    }

    #[test]
    fn checkpoint_of_another_pipeline_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        Checkpoint::open(dir.path(), meta("fraud"), true).unwrap();
        let again = Checkpoint::open(dir.path(), meta("fraud"), true).unwrap();
        assert_eq!(again.metadata.query_id, "q");
        drop(again);
        let err = Checkpoint::open(dir.path(), meta("other"), true)
            .err()
            .unwrap();
        let text = format!("{err:#}");
        assert!(text.contains("belongs to a different query"), "{text}");
        assert!(
            text.contains("`fraud`") && text.contains("`other`"),
            "{text}"
        );
    }

    #[test]
    fn a_second_writer_is_refused_before_it_touches_anything() {
        let dir = tempfile::tempdir().unwrap();
        let first = Checkpoint::open(dir.path(), meta("fraud"), true).unwrap();
        // The first writer in the middle of writing offsets/3.
        let temp = dir.path().join("offsets").join(".3.tmp-1");
        std::fs::write(&temp, b"half").unwrap();
        let err = format!(
            "{:#}",
            Checkpoint::open(dir.path(), meta("fraud"), true)
                .err()
                .unwrap()
        );
        assert!(err.contains("is in use"), "{err}");
        assert!(
            err.contains(&format!("weir process {}", std::process::id())),
            "{err}"
        );
        assert!(
            temp.exists(),
            "the refused writer removed the first one's temp file"
        );
        drop(first);
        Checkpoint::open(dir.path(), meta("fraud"), true).expect("free once the first closes");
    }

    #[test]
    fn inspecting_a_running_checkpoint_touches_nothing() {
        let dir = tempfile::tempdir().unwrap();
        Checkpoint::open(dir.path(), meta("fraud"), true).unwrap();
        // A pipeline in the middle of writing offsets/3.
        let temp = dir.path().join("offsets").join(".3.tmp-1");
        std::fs::write(&temp, b"half").unwrap();
        let ck = Checkpoint::inspect(dir.path()).unwrap();
        assert_eq!(ck.committed_rows().unwrap(), 0);
        assert!(temp.exists(), "inspect removed a temp file a writer needs");
    }

    fn damaged(dir: &Path) -> String {
        format!(
            "{:#}",
            Checkpoint::open(dir, meta("fraud"), true).err().unwrap()
        )
    }

    fn entries(dir: &Path, log: &str, epochs: std::ops::Range<u64>) {
        for e in epochs {
            std::fs::write(dir.join(log).join(e.to_string()), b"{}").unwrap();
        }
    }

    #[test]
    fn damaged_logs_are_refused_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        Checkpoint::open(dir.path(), meta("fraud"), true).unwrap();
        entries(dir.path(), "offsets", 0..10);
        entries(dir.path(), "commits", 0..10);
        Checkpoint::open(dir.path(), meta("fraud"), true).unwrap();

        std::fs::remove_file(dir.path().join("offsets/4")).unwrap();
        let text = damaged(dir.path());
        assert!(text.contains("offsets/4 is missing"), "{text}");
        assert!(text.contains("Restore the checkpoint"), "{text}");
        entries(dir.path(), "offsets", 4..5);

        std::fs::remove_file(dir.path().join("offsets/9")).unwrap();
        let text = damaged(dir.path());
        assert!(
            text.contains("commits/9 exists but offsets/9 does not"),
            "{text}"
        );
        entries(dir.path(), "offsets", 9..10);

        std::fs::remove_file(dir.path().join("commits/4")).unwrap();
        let text = damaged(dir.path());
        assert!(text.contains("commits/4 is missing"), "{text}");
        entries(dir.path(), "commits", 4..5);

        // Only the newest epoch may be planned but uncommitted.
        entries(dir.path(), "offsets", 10..11);
        Checkpoint::open(dir.path(), meta("fraud"), true).unwrap();
        entries(dir.path(), "offsets", 11..12);
        let text = damaged(dir.path());
        assert!(text.contains("commits/10 is missing"), "{text}");
        std::fs::remove_file(dir.path().join("offsets/11")).unwrap();

        std::fs::remove_file(dir.path().join("metadata")).unwrap();
        let text = damaged(dir.path());
        assert!(text.contains("metadata is missing"), "{text}");
    }

    #[test]
    fn compacted_logs_are_checked_from_their_fold() {
        let dir = tempfile::tempdir().unwrap();
        let ck = Checkpoint::open(dir.path(), meta("fraud"), true).unwrap();
        for e in 0..10 {
            let c = CommitEntry {
                format: ENTRY_FORMAT,
                epoch: e,
                committed_at_ms: 0,
                rows_in: 10,
                rows_out: 1,
                max_event_time_ms: None,
            };
            ck.commits.write(e, &c).unwrap();
        }
        entries(dir.path(), "offsets", 0..11);
        ck.compact(7, serde_json::json!({"files": []}), 6).unwrap();
        drop(ck);
        let ck = Checkpoint::open(dir.path(), meta("fraud"), true).unwrap();
        assert_eq!(ck.offsets.epochs().unwrap(), vec![6, 7, 8, 9, 10]);
        assert_eq!(ck.commits.epochs().unwrap(), vec![6, 7, 8, 9]);
        assert_eq!(ck.committed_rows().unwrap(), 100);
        let folded = ck.compacted().unwrap().unwrap();
        assert_eq!((folded.epoch, folded.rows_in, folded.rows_out), (7, 80, 8));
        // Entries may start anywhere up to the fold's next epoch, no later.
        std::fs::remove_file(dir.path().join("commits/6")).unwrap();
        std::fs::remove_file(dir.path().join("commits/7")).unwrap();
        std::fs::remove_file(dir.path().join("offsets/6")).unwrap();
        drop(ck);
        Checkpoint::open(dir.path(), meta("fraud"), true).unwrap();
        std::fs::remove_file(dir.path().join("offsets/7")).unwrap();
        std::fs::remove_file(dir.path().join("offsets/8")).unwrap();
        let text = damaged(dir.path());
        assert!(text.contains("offsets/8 is missing"), "{text}");
    }

    #[test]
    fn legacy_relative_paths_are_upgraded_not_refused() {
        let dir = tempfile::tempdir().unwrap();
        let old = Metadata {
            source: "files:./input".into(),
            sink: "files:out".into(),
            ..meta("fraud")
        };
        Checkpoint::open(dir.path(), old, true).unwrap();
        let new = Metadata {
            source: "files:/srv/demo/input".into(),
            sink: "files:/srv/demo/out".into(),
            ..meta("fraud")
        };
        let ck = Checkpoint::open(dir.path(), new.clone(), true).unwrap();
        assert_eq!(ck.metadata.source, new.source);
        let other = Metadata {
            source: "files:/srv/demo/elsewhere".into(),
            ..new
        };
        assert!(Checkpoint::open(dir.path(), other, true).is_err());
    }

    #[test]
    fn a_source_schema_may_only_gain_nullable_columns() {
        let col = |name: &str, t: &str, nullable: bool| SchemaColumn {
            name: name.into(),
            data_type: t.into(),
            nullable,
        };
        let with = |cols: Vec<SchemaColumn>| Metadata {
            schema: Some(cols),
            ..meta("fraud")
        };
        let dir = tempfile::tempdir().unwrap();
        Checkpoint::open(dir.path(), with(vec![col("a", "Int64", true)]), true).unwrap();
        let grown = with(vec![col("a", "Int64", true), col("b", "Utf8", true)]);
        Checkpoint::open(dir.path(), grown.clone(), true).unwrap();
        for (cols, want) in [
            (vec![col("b", "Utf8", true)], "column `a` was removed"),
            (
                vec![col("a", "Utf8", true), col("b", "Utf8", true)],
                "column `a` changed type from Int64 to Utf8",
            ),
            (
                vec![
                    col("a", "Int64", true),
                    col("b", "Utf8", true),
                    col("c", "Int64", false),
                ],
                "new column `c` is not nullable",
            ),
        ] {
            let text = format!(
                "{:#}",
                Checkpoint::open(dir.path(), with(cols), true)
                    .err()
                    .unwrap()
            );
            assert!(text.contains(want), "{text}");
        }
        let ck = Checkpoint::open(dir.path(), grown, true).unwrap();
        assert_eq!(ck.metadata.schema.unwrap().len(), 2);
    }

    #[test]
    fn blobs_round_trip_and_detect_corruption() {
        let dir = tempfile::tempdir().unwrap();
        let ck = Checkpoint::open(dir.path(), meta("fraud"), true).unwrap();
        let digest = ck.put_blob(b"component bytes").unwrap();
        assert_eq!(ck.get_blob(&digest).unwrap(), b"component bytes");
        std::fs::write(dir.path().join("blobs").join(digest.hex()), b"tampered").unwrap();
        assert!(format!("{:#}", ck.get_blob(&digest).unwrap_err()).contains("corrupt"));
    }
}
