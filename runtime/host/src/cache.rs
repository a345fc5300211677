//! Compiled components, cached on disk so that restarting a pipeline (or
//! replaying after a crash) does not pay Cranelift's compile time again.

use anyhow::Result;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
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
