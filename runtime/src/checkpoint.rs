//! The checkpoint directory: `metadata`, `offsets/`, `commits/`, `state/`
//! and `blobs/` (content-addressed operator components and configs, so that
//! a replay can always load the exact version an epoch was planned with).

use crate::fsutil;
use crate::wal::{CommitEntry, Log, OffsetEntry};
use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

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
}

/// An open checkpoint directory.
pub struct Checkpoint {
    root: PathBuf,
    pub metadata: Metadata,
    pub offsets: Log<OffsetEntry>,
    pub commits: Log<CommitEntry>,
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
        fsutil::create_dir_durable(root)?;
        if let Some(reason) = ephemeral_reason(root) {
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
                let mut bytes = serde_json::to_vec_pretty(&expected)?;
                bytes.push(b'\n');
                fsutil::write_atomic(&meta_path, &bytes)?;
                expected
            }
            Err(e) => return Err(e).with_context(|| format!("reading {}", meta_path.display())),
        };
        fsutil::create_dir_durable(&root.join("state"))?;
        fsutil::create_dir_durable(&root.join("blobs"))?;
        Ok(Checkpoint {
            offsets: Log::open(root.join("offsets"))?,
            commits: Log::open(root.join("commits"))?,
            root: root.to_path_buf(),
            metadata,
        })
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
            root: root.to_path_buf(),
            metadata,
        })
    }

    /// Input rows of all committed epochs: how far a pipeline has got.
    pub fn committed_rows(&self) -> Result<u64> {
        let mut rows = 0;
        for epoch in self.commits.epochs()? {
            rows += self.commits.get(epoch)?.map_or(0, |c| c.rows_in);
        }
        Ok(rows)
    }

    /// The checkpoint directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Stores `bytes` under their digest and returns `sha256:<hex>`.
    pub fn put_blob(&self, bytes: &[u8]) -> Result<String> {
        self.blobs().put(bytes)
    }

    /// Reads a blob back, verifying its digest.
    pub fn get_blob(&self, digest: &str) -> Result<Vec<u8>> {
        self.blobs().get(digest)
    }

    /// The blob store, for code that outlives a borrow of the checkpoint
    /// (the admin API stores uploads in it).
    pub fn blobs(&self) -> Blobs {
        Blobs {
            dir: self.root.join("blobs"),
        }
    }
}

/// `checkpoint/blobs/`: byte strings stored under their sha256, written
/// once and verified on every read.
#[derive(Debug, Clone)]
pub struct Blobs {
    dir: PathBuf,
}

impl Blobs {
    /// Stores `bytes` under their digest and returns `sha256:<hex>`.
    pub fn put(&self, bytes: &[u8]) -> Result<String> {
        let hex = hex::encode(Sha256::digest(bytes));
        let path = self.dir.join(&hex);
        if !path.exists() {
            fsutil::write_atomic(&path, bytes)?;
        }
        Ok(format!("sha256:{hex}"))
    }

    /// Reads a blob back, verifying its digest.
    pub fn get(&self, digest: &str) -> Result<Vec<u8>> {
        let hex = digest
            .strip_prefix("sha256:")
            .filter(|h| h.len() == 64 && h.bytes().all(|b| b.is_ascii_hexdigit()))
            .with_context(|| format!("`{digest}` is not a sha256 digest"))?;
        let path = self.dir.join(hex);
        let bytes = std::fs::read(&path)
            .with_context(|| format!("checkpoint is missing blob {digest} ({})", path.display()))?;
        let actual = hex::encode(Sha256::digest(&bytes));
        if actual != hex {
            bail!(
                "blob {} is corrupt: its content hashes to sha256:{actual}",
                path.display()
            );
        }
        Ok(bytes)
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

    #[test]
    fn blobs_round_trip_and_detect_corruption() {
        let dir = tempfile::tempdir().unwrap();
        let ck = Checkpoint::open(dir.path(), meta("fraud"), true).unwrap();
        let digest = ck.put_blob(b"component bytes").unwrap();
        assert_eq!(ck.get_blob(&digest).unwrap(), b"component bytes");
        let hex = digest.trim_start_matches("sha256:");
        std::fs::write(dir.path().join("blobs").join(hex), b"tampered").unwrap();
        assert!(format!("{:#}", ck.get_blob(&digest).unwrap_err()).contains("corrupt"));
    }
}
