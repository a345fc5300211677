//! Where a Delta table lives: a local directory or an S3 prefix. The log
//! protocol needs four things of it — read, write, list, and a create that
//! fails if the object exists (two writers must never both commit version
//! N) — and both places give them: a hard link that refuses an existing
//! name locally, `If-None-Match: *` on S3 ([`S3Remote`] checks the store
//! honours it before anything relies on it).

use crate::s3::{ObjectStoreSettings, S3Remote};
use anyhow::{Context, Result};
use std::io::Write;
use std::path::{Path, PathBuf};
use weir_core::mirror::{Created, Remote};

/// A Delta table's root.
pub enum TableStore {
    /// A directory on this machine (or a mounted file system).
    Local(PathBuf),
    /// An `s3://bucket/prefix`.
    S3(Box<S3Remote>),
}

impl TableStore {
    /// The store at `location`: an `s3://` URL, else a directory (created
    /// if missing).
    pub fn open(location: &Path, settings: &ObjectStoreSettings) -> Result<Self> {
        match location.to_str().filter(|l| l.starts_with("s3://")) {
            Some(url) => Ok(TableStore::S3(Box::new(S3Remote::open(url, settings)?))),
            None => {
                std::fs::create_dir_all(location.join(super::log::LOG_DIR)).with_context(|| {
                    format!("creating the Delta table directory {}", location.display())
                })?;
                Ok(TableStore::Local(location.to_path_buf()))
            }
        }
    }

    /// Where the table is, for messages.
    pub fn url(&self) -> String {
        match self {
            TableStore::Local(dir) => dir.display().to_string(),
            TableStore::S3(remote) => remote.url(),
        }
    }

    /// The bytes of `key` (relative to the table root), if it exists.
    pub fn get(&self, key: &str) -> Result<Option<Vec<u8>>> {
        match self {
            TableStore::Local(dir) => match std::fs::read(dir.join(key)) {
                Ok(bytes) => Ok(Some(bytes)),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
                Err(e) => Err(e).with_context(|| format!("reading {}", dir.join(key).display())),
            },
            TableStore::S3(remote) => remote.get(key),
        }
    }

    /// Writes `key` whole, replacing it: readers see the old bytes or the
    /// new, never a part.
    pub fn put(&self, key: &str, bytes: &[u8]) -> Result<()> {
        match self {
            TableStore::Local(dir) => weir_core::fsutil::write_atomic(&dir.join(key), bytes),
            TableStore::S3(remote) => remote.put(key, bytes),
        }
    }

    /// Writes `key` only if nothing is there yet; `false` if something is.
    pub fn create(&self, key: &str, bytes: &[u8]) -> Result<bool> {
        match self {
            TableStore::Local(dir) => create_local(&dir.join(key), bytes),
            TableStore::S3(remote) => Ok(matches!(remote.create(key, bytes)?, Created::Created)),
        }
    }

    /// The keys directly under `dir` (relative to the table root), e.g.
    /// the log's entries.
    pub fn list(&self, dir: &str) -> Result<Vec<String>> {
        match self {
            TableStore::Local(root) => {
                let mut keys = Vec::new();
                for entry in std::fs::read_dir(root.join(dir))
                    .with_context(|| format!("listing {}", root.join(dir).display()))?
                {
                    if let Ok(name) = entry?.file_name().into_string() {
                        keys.push(format!("{dir}/{name}"));
                    }
                }
                keys.sort();
                Ok(keys)
            }
            TableStore::S3(remote) => Ok(remote
                .list(&format!("{dir}/"))?
                .into_iter()
                .map(|o| o.key)
                .collect()),
        }
    }
}

/// Creates `path` with `bytes` whole and durably unless it exists: the
/// bytes go to a temp file first, which is then hard-linked to the name
/// (a link refuses an existing name, atomically).
fn create_local(path: &Path, bytes: &[u8]) -> Result<bool> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let tmp = dir.join(format!(".weir-{}.tmp", uuid::Uuid::new_v4()));
    let written = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::hard_link(&tmp, path)
    })();
    let _ = std::fs::remove_file(&tmp);
    match written {
        Ok(()) => {
            weir_core::fsutil::sync_dir(dir)
                .with_context(|| format!("creating {}", path.display()))?;
            Ok(true)
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
        Err(e) => Err(e).with_context(|| format!("creating {}", path.display())),
    }
}
