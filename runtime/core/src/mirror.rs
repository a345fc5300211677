//! A checkpoint kept on shared storage (an S3-compatible object store), so
//! that any machine can take a pipeline over from it: "treat the checkpoint
//! like a database". The local checkpoint directory becomes a cache of it.
//!
//! The object store is the authority; every write reaches it **before** the
//! local copy, at the same protocol points as the local write:
//!
//! - `offsets/N` and `commits/N` are *created* there (a conditional write,
//!   S3's `If-None-Match: *`): if another worker wrote a different entry for
//!   the epoch first, this one is refused. That is the fence a zombie worker
//!   runs into: it cannot plan or commit an epoch the new owner already has.
//! - `metadata`, blobs, the operator registry and real-time part logs are
//!   put as they are written locally.
//! - State: each snapshot (`state/snapshots/N`, taken after `commits/N`) is
//!   uploaded file by file with a `_complete` marker last; a start on an
//!   empty disk restores the newest complete one and replays the committed
//!   epochs after it, as it does after losing its local working copy.
//!
//! [`Mirror::pull`] brings the local cache up to the object store at start.
//! This crate defines only the [`Remote`] trait; the object-store client
//! that implements it lives with the connectors.

use crate::fsutil;
use anyhow::{bail, Context, Result};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

/// What a conditional create found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Created {
    /// The object did not exist and now holds the bytes given.
    Created,
    /// The object existed already; its bytes, which were not replaced.
    Exists(Vec<u8>),
}

/// One object under the checkpoint's prefix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteObject {
    /// Its key relative to the checkpoint's prefix, `/`-separated.
    pub key: String,
    pub size: u64,
}

/// An object's version as the store names it (S3's ETag): what a
/// conditional replace ([`Remote::replace`]) compares.
pub type Tag = String;

/// A key-value store of byte strings with conditional create and replace:
/// what a checkpoint needs of shared storage. Keys are relative to the
/// checkpoint's own prefix and `/`-separated. Calls block.
pub trait Remote: Send + Sync {
    /// Where it is, for messages (`s3://bucket/prefix`).
    fn url(&self) -> String;
    /// The object's bytes, or `None` if there is none.
    fn get(&self, key: &str) -> Result<Option<Vec<u8>>>;
    /// Writes (or replaces) the object, durably.
    fn put(&self, key: &str, bytes: &[u8]) -> Result<()>;
    /// Writes the object only if it does not exist yet.
    fn create(&self, key: &str, bytes: &[u8]) -> Result<Created>;
    /// The object's bytes and version tag, or `None` if there is none.
    fn get_tagged(&self, key: &str) -> Result<Option<(Vec<u8>, Tag)>>;
    /// Replaces the object only if it is still at version `tag` (with
    /// `None`: only if it does not exist): optimistic concurrency for a
    /// document several workers change, like the operator registry.
    /// Returns the new tag, or `None` if another writer got there first.
    fn replace(&self, key: &str, bytes: &[u8], tag: Option<&str>) -> Result<Option<Tag>>;
    /// Every object whose key starts with `prefix`.
    fn list(&self, prefix: &str) -> Result<Vec<RemoteObject>>;
    /// Removes the object; a missing one is no error.
    fn delete(&self, key: &str) -> Result<()>;
}

/// Writes `bytes` to `path` atomically and durably, and to the shared
/// checkpoint first if there is one: the object store stays the authority
/// whatever a crash between the two writes leaves.
pub fn write_through(mirror: Option<&Mirror>, path: &Path, bytes: &[u8]) -> Result<()> {
    if let Some(mirror) = mirror {
        mirror.put(path, bytes)?;
    }
    fsutil::write_atomic(path, bytes)
}

/// The files of a snapshot that mark it as wholly uploaded (written last).
const COMPLETE: &str = "_complete";

/// Directories whose numbered entries the object store decides: an entry
/// only the local cache holds is stale (another worker's timeline) and is
/// removed by [`Mirror::pull`].
const LOGS: [&str; 2] = ["offsets", "commits"];

/// A local checkpoint directory and its copy in a [`Remote`].
pub struct Mirror {
    remote: Arc<dyn Remote>,
    root: PathBuf,
    /// Checks a state snapshot pulled into a directory before it is used.
    snapshot_check: Option<SnapshotCheck>,
}

/// Checks a pulled state snapshot's files (the state store's checksums):
/// `Ok(Some(reason))` if they are damaged, an error if they could not be
/// checked. Given by the layer that knows the store's format.
pub type SnapshotCheck = Arc<dyn Fn(&Path) -> Result<Option<String>> + Send + Sync>;

/// What [`Mirror::pull`] did, for the start's log line.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Pulled {
    /// Files downloaded into the local cache.
    pub downloaded: usize,
    /// Stale log entries removed from the local cache.
    pub removed: usize,
    /// The state snapshot restored from the object store, if one was.
    pub snapshot: Option<u64>,
}

impl Mirror {
    /// Mirrors the local checkpoint directory `root` to `remote`.
    pub fn new(remote: Arc<dyn Remote>, root: &Path) -> Arc<Self> {
        Self::checking_snapshots(remote, root, None)
    }

    /// [`Mirror::new`], with each state snapshot a pull restores checked
    /// by `check` first: a damaged one is passed over for the one before.
    pub fn checking_snapshots(
        remote: Arc<dyn Remote>,
        root: &Path,
        check: Option<SnapshotCheck>,
    ) -> Arc<Self> {
        Arc::new(Mirror {
            remote,
            root: fsutil::normalize(root),
            snapshot_check: check,
        })
    }

    /// Where the checkpoint is kept, for messages.
    pub fn url(&self) -> String {
        self.remote.url()
    }

    /// The object key of a local path under the checkpoint directory.
    pub fn key(&self, local: &Path) -> Result<String> {
        let local = fsutil::normalize(local);
        let rel = local.strip_prefix(&self.root).with_context(|| {
            format!(
                "{} is not inside the checkpoint {}",
                local.display(),
                self.root.display()
            )
        })?;
        let mut parts = Vec::new();
        for c in rel.components() {
            match c {
                Component::Normal(p) => parts.push(
                    p.to_str()
                        .with_context(|| format!("{} is not UTF-8", local.display()))?,
                ),
                _ => bail!("{} is not a plain path", local.display()),
            }
        }
        if parts.is_empty() {
            bail!("the checkpoint directory itself has no object key");
        }
        Ok(parts.join("/"))
    }

    fn local(&self, key: &str) -> PathBuf {
        key.split('/')
            .fold(self.root.clone(), |p, part| p.join(part))
    }

    /// Creates the object for `local` unless it exists (see [`Created`]).
    pub fn create(&self, local: &Path, bytes: &[u8]) -> Result<Created> {
        let key = self.key(local)?;
        self.remote
            .create(&key, bytes)
            .with_context(|| format!("creating {key} in {}", self.url()))
    }

    /// The object for `local`, if there is one.
    pub fn get(&self, local: &Path) -> Result<Option<Vec<u8>>> {
        let key = self.key(local)?;
        self.remote
            .get(&key)
            .with_context(|| format!("reading {key} from {}", self.url()))
    }

    /// The object for `local` with its version tag, if there is one.
    pub fn get_tagged(&self, local: &Path) -> Result<Option<(Vec<u8>, Tag)>> {
        let key = self.key(local)?;
        self.remote
            .get_tagged(&key)
            .with_context(|| format!("reading {key} from {}", self.url()))
    }

    /// Replaces the object for `local` if it is still at `tag` (see
    /// [`Remote::replace`]).
    pub fn replace(&self, local: &Path, bytes: &[u8], tag: Option<&str>) -> Result<Option<Tag>> {
        let key = self.key(local)?;
        self.remote
            .replace(&key, bytes, tag)
            .with_context(|| format!("replacing {key} in {}", self.url()))
    }

    /// The remote store itself, for documents kept beside the checkpoint
    /// (the workers' records).
    pub fn remote(&self) -> &Arc<dyn Remote> {
        &self.remote
    }

    /// Writes the object for `local`.
    pub fn put(&self, local: &Path, bytes: &[u8]) -> Result<()> {
        let key = self.key(local)?;
        self.remote
            .put(&key, bytes)
            .with_context(|| format!("writing {key} to {}", self.url()))
    }

    /// Uploads the local file as it is now.
    pub fn put_file(&self, local: &Path) -> Result<()> {
        let bytes = std::fs::read(local).with_context(|| format!("reading {}", local.display()))?;
        self.put(local, &bytes)
    }

    /// Removes the object for `local`.
    pub fn delete(&self, local: &Path) -> Result<()> {
        let key = self.key(local)?;
        self.remote
            .delete(&key)
            .with_context(|| format!("deleting {key} from {}", self.url()))
    }

    /// Brings the local cache up to the object store: downloads every log
    /// entry, blob and registry it lacks or holds differently, removes log
    /// entries the object store does not have (a timeline another worker
    /// replaced), and restores the newest complete state snapshot if the
    /// cache lacks it. Refuses a local checkpoint that the object store does
    /// not know: that would be two checkpoints under one name.
    pub fn pull(&self) -> Result<Pulled> {
        let objects = self.remote.list("")?;
        let local_meta = self.root.join("metadata");
        if objects.iter().all(|o| o.key != "metadata") {
            if local_meta.exists() {
                bail!(
                    "{} holds a checkpoint but {} is empty: this cache was not made from it. \
                     Remove the cache directory to start from the object store, or copy the \
                     checkpoint there first (e.g. `aws s3 sync {} {}`).",
                    self.root.display(),
                    self.url(),
                    self.root.display(),
                    self.url()
                );
            }
            return Ok(Pulled::default());
        }
        self.forget_another_query()?;
        let mut pulled = Pulled::default();
        let mut snapshots: BTreeMap<u64, Vec<&RemoteObject>> = BTreeMap::new();
        let mut log_keys = BTreeSet::new();
        for object in &objects {
            if let Some(rest) = object.key.strip_prefix("state/snapshots/") {
                if let Some((n, _file)) = rest.split_once('/') {
                    if let Ok(n) = n.parse::<u64>() {
                        snapshots.entry(n).or_default().push(object);
                    }
                }
                continue;
            }
            if LOGS
                .iter()
                .any(|d| object.key.starts_with(&format!("{d}/")))
            {
                log_keys.insert(object.key.clone());
            }
            if self.download_if_changed(object)? {
                pulled.downloaded += 1;
            }
        }
        pulled.removed = self.remove_stale_entries(&log_keys)?;
        pulled.snapshot = self.pull_snapshot(&snapshots)?;
        Ok(pulled)
    }

    /// Empties the cache if it holds another query's checkpoint (the
    /// object store's was made anew): its logs and state would otherwise
    /// be taken for this one's.
    fn forget_another_query(&self) -> Result<()> {
        let query_of = |bytes: &[u8]| {
            serde_json::from_slice::<serde_json::Value>(bytes)
                .ok()
                .and_then(|m| m.get("query_id").cloned())
        };
        let Ok(local) = std::fs::read(self.root.join("metadata")) else {
            return Ok(());
        };
        let Some(remote) = self.remote.get("metadata")? else {
            return Ok(());
        };
        if let Some(damage) = damage("metadata", &remote) {
            bail!(
                "{}/metadata is damaged ({damage}); the cache's copy {} is kept: put it back \
                 in the object store",
                self.url(),
                self.root.join("metadata").display()
            );
        }
        if query_of(&local) == query_of(&remote) {
            return Ok(());
        }
        tracing::warn!(
            cache = %self.root.display(),
            "the cache holds another query's checkpoint; emptying it"
        );
        for entry in std::fs::read_dir(&self.root)? {
            let path = entry?.path();
            // The writer lock this process holds (`checkpoint::WriterLock`).
            if path.file_name().is_some_and(|n| n == "LOCK") {
                continue;
            }
            if path.is_dir() {
                std::fs::remove_dir_all(&path)
            } else {
                std::fs::remove_file(&path)
            }
            .with_context(|| format!("emptying the cache: {}", path.display()))?;
        }
        Ok(())
    }

    /// Downloads `object` unless the local file has the same bytes.
    fn download_if_changed(&self, object: &RemoteObject) -> Result<bool> {
        let path = self.local(&object.key);
        if let Ok(meta) = std::fs::metadata(&path) {
            // Blobs are content-addressed: the name says what they hold.
            if meta.len() == object.size && object.key.starts_with("blobs/") {
                return Ok(false);
            }
        }
        let Some(bytes) = self.remote.get(&object.key)? else {
            return Ok(false); // deleted since the listing (compaction)
        };
        let have = std::fs::read(&path).ok();
        if have.as_ref().is_some_and(|have| *have == bytes) {
            return Ok(false);
        }
        if let Some(wrong) = damage(&object.key, &bytes) {
            let blob = object.key.starts_with("blobs/");
            let intact = have.filter(|have| damage(&object.key, have).is_none());
            let object = format!("{}/{}", self.url(), object.key);
            match intact {
                // A blob is checked again when it is read, and may never be.
                None if blob => {
                    tracing::warn!("{object} is damaged ({wrong}); not downloaded");
                    return Ok(false);
                }
                Some(_) => {
                    tracing::warn!(
                        "{object} is damaged ({wrong}); keeping the cache's intact copy {}. \
                         Put that copy back in the object store.",
                        path.display()
                    );
                    return Ok(false);
                }
                None => bail!(
                    "{object} is damaged ({wrong}) and the cache has no intact copy; restore \
                     the object from a backup or another worker's cache"
                ),
            }
        }
        if let Some(parent) = path.parent() {
            fsutil::create_dir_durable(parent)?;
        }
        fsutil::write_atomic(&path, &bytes)?;
        Ok(true)
    }

    /// Removes numbered log entries (and compacted folds) the object store
    /// does not hold.
    fn remove_stale_entries(&self, remote: &BTreeSet<String>) -> Result<usize> {
        let mut removed = 0;
        for dir in LOGS {
            let entries = match std::fs::read_dir(self.root.join(dir)) {
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                other => other.with_context(|| format!("listing the cache's {dir}/"))?,
            };
            let before = removed;
            for entry in entries {
                let name = entry?.file_name();
                let Some(name) = name.to_str() else { continue };
                let numbered = name
                    .split('.')
                    .next()
                    .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
                if numbered && !remote.contains(&format!("{dir}/{name}")) {
                    std::fs::remove_file(self.root.join(dir).join(name))?;
                    removed += 1;
                }
            }
            if removed > before {
                fsutil::sync_dir(&self.root.join(dir))?;
            }
        }
        Ok(removed)
    }

    /// Restores the newest snapshot that was wholly uploaded and passes
    /// the snapshot check, unless the cache has it already; a damaged one
    /// is reported by its object names and passed over for the one before.
    fn pull_snapshot(&self, snapshots: &BTreeMap<u64, Vec<&RemoteObject>>) -> Result<Option<u64>> {
        let complete = snapshots.iter().rev().filter(|(_, files)| {
            files
                .iter()
                .any(|f| f.key.rsplit('/').next() == Some(COMPLETE))
        });
        let mut damaged = Vec::new();
        for (&epoch, files) in complete {
            let target = self.root.join("state/snapshots").join(epoch.to_string());
            if target.exists() {
                return Ok(None);
            }
            let (temp, missing) = self.download_snapshot(epoch, files)?;
            let damage = match (&self.snapshot_check, missing) {
                (_, Some(missing)) => Ok(Some(missing)),
                (Some(check), None) => check(&temp),
                (None, None) => Ok(None),
            };
            match damage {
                Ok(None) => {
                    std::fs::rename(&temp, &target).with_context(|| {
                        format!("moving the snapshot into {}", target.display())
                    })?;
                    fsutil::sync_dir(target.parent().unwrap_or(&self.root))?;
                    return Ok(Some(epoch));
                }
                Ok(Some(reason)) => {
                    let _ = std::fs::remove_dir_all(&temp);
                    let objects = format!("{}/state/snapshots/{epoch}", self.url());
                    let reason = reason.replace(&temp.display().to_string(), &objects);
                    tracing::warn!(
                        "state snapshot {epoch} in the object store is damaged, trying the one \
                         before: {reason}"
                    );
                    damaged.push(epoch);
                }
                Err(e) => {
                    let _ = std::fs::remove_dir_all(&temp);
                    return Err(e).with_context(|| format!("checking state snapshot {epoch}"));
                }
            }
        }
        if !damaged.is_empty() {
            bail!(
                "every complete state snapshot in {} is damaged (epochs {damaged:?}): the state \
                 cannot be restored from it. Restore a snapshot from a backup or a worker's \
                 cache (`state/snapshots/N/`), or, if the offset log still reaches back to the \
                 state's origin, delete the damaged snapshots to rebuild the state from it",
                self.url()
            );
        }
        Ok(None)
    }

    /// Downloads snapshot `epoch`'s files into a temp directory beside the
    /// cache's snapshots; returns it, and which file was missing if one
    /// listed was gone from the object store.
    fn download_snapshot(
        &self,
        epoch: u64,
        files: &[&RemoteObject],
    ) -> Result<(PathBuf, Option<String>)> {
        let dir = self.root.join("state").join("snapshots");
        fsutil::create_dir_durable(&dir)?;
        let temp = dir.join(format!(".{epoch}.pull-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&temp);
        std::fs::create_dir_all(&temp)?;
        for file in files {
            let Some(name) = file.key.rsplit('/').next() else {
                continue;
            };
            if name == COMPLETE {
                continue;
            }
            let Some(bytes) = self.remote.get(&file.key)? else {
                return Ok((
                    temp,
                    Some(format!("{}/{} is missing", self.url(), file.key)),
                ));
            };
            std::fs::write(temp.join(name), bytes)
                .with_context(|| format!("writing {}", temp.join(name).display()))?;
        }
        Ok((temp, None))
    }

    /// Uploads the snapshot directory `dir` (`state/snapshots/N`), file by
    /// file, then its `_complete` marker; removes snapshots in the object
    /// store that are no longer in the local `state/snapshots/`.
    pub fn push_snapshot(&self, dir: &Path) -> Result<()> {
        let prefix = self.key(dir)?;
        let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
            .with_context(|| format!("listing {}", dir.display()))?
            .map(|e| e.map(|e| e.path()))
            .collect::<std::io::Result<_>>()?;
        files.sort();
        for file in &files {
            self.put_file(file)?;
        }
        self.remote
            .put(&format!("{prefix}/{COMPLETE}"), b"")
            .with_context(|| format!("marking {prefix} complete in {}", self.url()))?;
        self.prune_snapshots(dir.parent().unwrap_or(dir))
    }

    /// Deletes the object store's snapshots that the local `snapshots`
    /// directory no longer keeps (the retention policy removed them): the
    /// marker first, so a half-deleted snapshot is never chosen.
    fn prune_snapshots(&self, snapshots: &Path) -> Result<()> {
        let prefix = self.key(snapshots)?;
        let mut by_epoch: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for object in self.remote.list(&format!("{prefix}/"))? {
            let rest = &object.key[prefix.len() + 1..];
            if let Some((n, _)) = rest.split_once('/') {
                by_epoch.entry(n.to_string()).or_default().push(object.key);
            }
        }
        for (n, mut keys) in by_epoch {
            if snapshots.join(&n).exists() {
                continue;
            }
            keys.sort_by_key(|k| !k.ends_with(COMPLETE));
            for key in keys {
                self.remote.delete(&key)?;
            }
        }
        Ok(())
    }
}

/// What is wrong with the bytes of checkpoint object `key`, for the kinds
/// whose form is known here: a blob must hash to its name, a log entry and
/// the metadata must be JSON.
fn damage(key: &str, bytes: &[u8]) -> Option<String> {
    if let Some(name) = key.strip_prefix("blobs/") {
        let actual = crate::Digest::of(bytes);
        return (actual.hex() != name).then(|| format!("its content hashes to {actual}"));
    }
    let json = key == "metadata" || LOGS.iter().any(|d| key.starts_with(&format!("{d}/")));
    match serde_json::from_slice::<serde_json::Value>(bytes) {
        Err(e) if json => Some(format!("not valid JSON: {e}")),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Nowhere;
    impl Remote for Nowhere {
        fn url(&self) -> String {
            "s3://b/p".into()
        }
        fn get(&self, _: &str) -> Result<Option<Vec<u8>>> {
            bail!("unused")
        }
        fn put(&self, _: &str, _: &[u8]) -> Result<()> {
            bail!("unused")
        }
        fn create(&self, _: &str, _: &[u8]) -> Result<Created> {
            bail!("unused")
        }
        fn get_tagged(&self, _: &str) -> Result<Option<(Vec<u8>, Tag)>> {
            bail!("unused")
        }
        fn replace(&self, _: &str, _: &[u8], _: Option<&str>) -> Result<Option<Tag>> {
            bail!("unused")
        }
        fn list(&self, _: &str) -> Result<Vec<RemoteObject>> {
            bail!("unused")
        }
        fn delete(&self, _: &str) -> Result<()> {
            bail!("unused")
        }
    }

    #[test]
    fn keys_are_slash_separated_paths_under_the_root() {
        let m = Mirror::new(Arc::new(Nowhere), Path::new("/var/cache/ckpt"));
        let key = |p: &str| m.key(Path::new(p)).map_err(|e| e.to_string());
        assert_eq!(key("/var/cache/ckpt/offsets/12"), Ok("offsets/12".into()));
        assert_eq!(
            key("/var/cache/ckpt/./state/snapshots/9/CURRENT"),
            Ok("state/snapshots/9/CURRENT".into())
        );
        assert!(key("/var/cache/other/offsets/1").is_err());
        assert!(key("/var/cache/ckpt").is_err());
        assert_eq!(
            m.local("state/origin"),
            PathBuf::from("/var/cache/ckpt/state/origin")
        );
    }
}
