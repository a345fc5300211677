//! Compiled code, cached on disk: whole components, so that restarting a
//! pipeline (or replaying after a crash) does not pay Cranelift's compile
//! time again, and single functions, so that a new component made mostly of
//! functions compiled before (a new version of an operator; every Python
//! operator, which carries the same interpreter) compiles only the rest.

use anyhow::Result;
use std::borrow::Cow;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use wasmtime::component::Component;
use wasmtime::Engine;
use weir_core::Digest;

/// A directory of `Component::serialize` artifacts keyed by the component's
/// sha256 and by the engine's compatibility hash (wasmtime version and
/// settings), so an upgraded host never loads an artifact it did not make.
pub struct ComponentCache {
    dir: PathBuf,
}

impl ComponentCache {
    /// A cache under `root`, scoped to this engine's configuration.
    pub fn new(engine: &Engine, root: &Path) -> Self {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        engine.precompile_compatibility_hash().hash(&mut h);
        ComponentCache {
            dir: root.join(format!("wasmtime-{:016x}", h.finish())),
        }
    }

    fn path(&self, digest: &Digest) -> PathBuf {
        self.dir.join(format!("{}.cwasm", digest.hex()))
    }

    /// Loads the compiled component, compiling and storing it on a miss. A
    /// cache that cannot be read or written only costs time, never an error.
    #[allow(unsafe_code)] // loading a compiled artifact (see SAFETY below)
    pub fn load_or_compile(
        &self,
        engine: &Engine,
        digest: &Digest,
        compile: impl FnOnce() -> Result<Component>,
    ) -> Result<(Component, bool)> {
        let path = self.path(digest);
        // Read into memory rather than mmap the file: a file that is
        // truncated under a mapping would kill the process with SIGBUS.
        if let Ok(bytes) = std::fs::read(&path) {
            // SAFETY: the artifact was written by `Component::serialize` of an
            // engine with the same compatibility hash (the directory name),
            // into a cache directory owned by the Weir user; wasmtime also
            // checks the header and version. Deserializing is unsafe only for
            // artifacts from untrusted or foreign sources.
            match unsafe { Component::deserialize(engine, &bytes) } {
                Ok(c) => return Ok((c, true)),
                Err(e) => {
                    tracing::warn!(path = %path.display(), "ignoring unreadable compiled operator: {e:#}")
                }
            }
        }
        let component = compile()?;
        if let Err(e) = self.store(&component, &path) {
            tracing::warn!(path = %path.display(), "could not cache compiled operator: {e:#}");
        }
        Ok((component, false))
    }

    fn store(&self, component: &Component, path: &Path) -> Result<()> {
        let bytes = component.serialize().map_err(anyhow::Error::from)?;
        std::fs::create_dir_all(&self.dir)?;
        weir_core::fsutil::write_atomic(path, &bytes)
    }
}

/// The default cache root: `$WEIR_CACHE_DIR`, else `$XDG_CACHE_HOME/weir`,
/// else `~/.cache/weir`.
pub fn default_cache_root() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("WEIR_CACHE_DIR") {
        return Some(PathBuf::from(dir));
    }
    if let Some(dir) = std::env::var_os("XDG_CACHE_HOME") {
        return Some(PathBuf::from(dir).join("weir"));
    }
    std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache").join("weir"))
}

/// Cranelift's incremental compilation cache on disk: one file per compiled
/// function, named by the hash Cranelift computes of the function's code,
/// the target and the compiler's settings (its version is checked inside
/// the entry). A componentize-py operator is mostly the CPython interpreter,
/// the same in every Python operator, so after the first one only the
/// operator's own functions are compiled.
///
/// Each entry starts with the sha256 of the rest: a damaged file is a miss,
/// never code. Entries are written to a temporary file and renamed into
/// place, without an fsync: one lost in a crash is compiled again.
#[derive(Debug)]
pub struct FunctionCache {
    dir: PathBuf,
    hits: AtomicU64,
    misses: AtomicU64,
}

impl FunctionCache {
    /// A cache in `root/functions`, made here if missing (if it cannot be
    /// made, every function is compiled and a debug line says why).
    pub fn new(root: &Path) -> Self {
        let dir = root.join("functions");
        if let Err(e) = std::fs::create_dir_all(&dir) {
            tracing::debug!(dir = %dir.display(), "no cache of compiled functions: {e}");
        }
        FunctionCache {
            dir,
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        }
    }

    /// Functions found in the cache and functions compiled, since this
    /// cache was made: what a test or a log line can tell the saving by.
    pub fn hits_and_misses(&self) -> (u64, u64) {
        (
            self.hits.load(Ordering::Relaxed),
            self.misses.load(Ordering::Relaxed),
        )
    }

    fn path(&self, key: &[u8]) -> PathBuf {
        self.dir.join(Digest::of(key).hex())
    }

    fn read(&self, key: &[u8]) -> Option<Vec<u8>> {
        let mut bytes = std::fs::read(self.path(key)).ok()?;
        if bytes.len() < CHECKSUM_LEN {
            return None;
        }
        let value = bytes.split_off(CHECKSUM_LEN);
        (bytes == Digest::of(&value).hex().as_bytes()).then_some(value)
    }

    fn write(&self, key: &[u8], value: &[u8]) -> Result<()> {
        let mut entry = Vec::with_capacity(CHECKSUM_LEN + value.len());
        entry.extend_from_slice(Digest::of(value).hex().as_bytes());
        entry.extend_from_slice(value);
        weir_core::fsutil::write_atomic_unsynced(&self.path(key), &entry)
    }
}

/// An entry's checksum: the sha256 of its value, in hex.
const CHECKSUM_LEN: usize = 64;

impl wasmtime::CacheStore for FunctionCache {
    fn get(&self, key: &[u8]) -> Option<Cow<'_, [u8]>> {
        let value = self.read(key);
        let counter = if value.is_some() {
            &self.hits
        } else {
            &self.misses
        };
        counter.fetch_add(1, Ordering::Relaxed);
        value.map(Cow::Owned)
    }

    fn insert(&self, key: &[u8], value: Vec<u8>) -> bool {
        match self.write(key, &value) {
            Ok(()) => true,
            Err(e) => {
                tracing::debug!("could not cache a compiled function: {e:#}");
                false
            }
        }
    }
}
