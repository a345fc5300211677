//! Files the admin API reads again when they change (the tokens file, the
//! certificate and key): a change is seen by comparing each file's
//! modification time, size and inode (a file replaced by a rename, the
//! way certificate tools write, gets a new inode).

use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::{Duration, SystemTime};

/// How often the files are looked at.
pub(crate) const RELOAD_EVERY: Duration = Duration::from_secs(1);

type Stamp = Option<(SystemTime, u64, u64)>;

/// A set of files and how they looked when last read.
struct Watched {
    paths: Vec<PathBuf>,
    /// `None` until first looked at.
    stamps: Option<Vec<Stamp>>,
}

impl Watched {
    fn new(paths: Vec<PathBuf>) -> Self {
        Watched {
            paths,
            stamps: None,
        }
    }

    /// Whether any file changed since the last call (true the first time).
    fn changed(&mut self) -> bool {
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

/// A value made from files, made again when they change: what requests
/// read ([`Reloaded::current`]) and what the reload task replaces.
pub(crate) struct Reloaded<T> {
    watched: Mutex<Watched>,
    current: RwLock<Arc<T>>,
}

impl<T> Reloaded<T> {
    /// The value `make` makes from `paths` now. The files are looked at
    /// first, so a change while it reads them is read again later.
    pub(crate) fn new<E>(
        paths: Vec<PathBuf>,
        make: impl FnOnce() -> Result<T, E>,
    ) -> Result<Self, E> {
        let mut watched = Watched::new(paths);
        watched.changed();
        Ok(Reloaded {
            watched: Mutex::new(watched),
            current: RwLock::new(Arc::new(make()?)),
        })
    }

    /// The value now.
    pub(crate) fn current(&self) -> Arc<T> {
        self.current
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// If a file changed, `make`s the value again and, if that worked,
    /// puts it in place; `None` if nothing changed. A value that cannot be
    /// made leaves the one before in place.
    pub(crate) fn reload<E>(
        &self,
        make: impl FnOnce() -> Result<T, E>,
    ) -> Option<Result<Arc<T>, E>> {
        if !self
            .watched
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .changed()
        {
            return None;
        }
        Some(make().map(|value| {
            let value = Arc::new(value);
            *self.current.write().unwrap_or_else(PoisonError::into_inner) = value.clone();
            value
        }))
    }
}
