//! Files the admin API reads again when they change (the tokens file, the
//! certificate and key): a change is seen by comparing each file's
//! modification time, size and inode (a file replaced by a rename, the
//! way certificate tools write, gets a new inode).

use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::time::{Duration, SystemTime};

/// How often the files are looked at.
pub(crate) const RELOAD_EVERY: Duration = Duration::from_secs(1);

type Stamp = Option<(SystemTime, u64, u64)>;

/// A set of files and how they looked when last read.
pub(crate) struct Watched {
    paths: Vec<PathBuf>,
    /// `None` until first looked at.
    stamps: Option<Vec<Stamp>>,
}

impl Watched {
    pub(crate) fn new(paths: Vec<PathBuf>) -> Self {
        Watched {
            paths,
            stamps: None,
        }
    }

    /// Whether any file changed since the last call (true the first time).
    pub(crate) fn changed(&mut self) -> bool {
        let now: Vec<Stamp> = self.paths.iter().map(stamp).collect();
        let changed = self.stamps.as_ref() != Some(&now);
        self.stamps = Some(now);
        changed
    }
}

fn stamp(path: &PathBuf) -> Stamp {
    let meta = std::fs::metadata(path).ok()?;
    Some((meta.modified().ok()?, meta.len(), meta.ino()))
}
