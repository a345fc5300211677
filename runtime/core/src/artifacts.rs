//! Named files that come with an operator version — a model, a word list —
//! kept apart from its code and config so that a new model is a new version
//! without a new build (`weir deploy --artifact model=model.onnx`).
//!
//! Each artifact is stored by content digest in the checkpoint's blobs. A
//! version names its artifacts in a [`Manifest`] (name → digest), itself a
//! blob; [`crate::wal::OperatorRef::artifacts`] records the manifest's
//! digest in `offsets/N`, so a replay reads exactly the bytes its first run
//! read, and an audit can name each one.

use crate::checkpoint::Blobs;
use crate::Digest;
use anyhow::{bail, Context, Result};
use std::collections::BTreeMap;
use std::sync::Arc;

/// Most artifacts one version may carry.
pub const MAX_ARTIFACTS: usize = 16;

/// A version's artifact names and the digests of their bytes; stored as
/// JSON (sorted by name, so the same artifacts give the same digest).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Manifest(pub BTreeMap<String, Digest>);

impl Manifest {
    /// The stored form, whose digest names the set.
    pub fn to_bytes(&self) -> Vec<u8> {
        // A map of strings to strings always serialises.
        serde_json::to_vec(&self.0).unwrap_or_default()
    }

    /// Reads a stored manifest.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self> {
        serde_json::from_slice(bytes)
            .map(Manifest)
            .context("an artifact manifest is not a JSON map of names to digests")
    }
}

/// Checks an artifact's name: 1 to 64 lowercase letters, digits, `_` or
/// `-`, starting with a letter (it is typed on command lines and in TOML).
pub fn check_name(name: &str) -> Result<()> {
    let ok = (1..=64).contains(&name.len())
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-');
    if !ok {
        bail!(
            "artifact name `{name}` must be 1 to 64 lowercase letters, digits, `_` or `-`, \
             starting with a letter"
        );
    }
    Ok(())
}

/// Stores `artifacts` (name → bytes) and their manifest in `blobs`; the
/// manifest's digest, or `None` for no artifacts (what a version without
/// them records).
pub fn store(blobs: &Blobs, artifacts: &BTreeMap<String, Vec<u8>>) -> Result<Option<Digest>> {
    if artifacts.is_empty() {
        return Ok(None);
    }
    if artifacts.len() > MAX_ARTIFACTS {
        bail!(
            "{} artifacts; a version may carry at most {MAX_ARTIFACTS}",
            artifacts.len()
        );
    }
    let mut manifest = Manifest::default();
    for (name, bytes) in artifacts {
        check_name(name)?;
        let digest = blobs
            .put(bytes)
            .with_context(|| format!("storing artifact `{name}`"))?;
        manifest.0.insert(name.clone(), digest);
    }
    Ok(Some(blobs.put(&manifest.to_bytes())?))
}

/// The artifacts one operator version reads, loaded.
#[derive(Debug, Clone, Default)]
pub struct Artifacts {
    /// The manifest's digest (`None`: the version has no artifacts).
    manifest: Option<Digest>,
    by_name: BTreeMap<String, (Digest, Arc<Vec<u8>>)>,
}

impl Artifacts {
    /// Loads the artifacts manifest `manifest` names from `blobs`.
    pub fn load(blobs: &Blobs, manifest: Option<&Digest>) -> Result<Self> {
        let Some(digest) = manifest else {
            return Ok(Artifacts::default());
        };
        let listed = Manifest::from_bytes(
            &blobs
                .get(digest)
                .with_context(|| format!("artifact manifest {digest}"))?,
        )?;
        let mut by_name = BTreeMap::new();
        for (name, d) in listed.0 {
            // `Blobs::get` checks the bytes against their digest.
            let bytes = blobs
                .get(&d)
                .with_context(|| format!("artifact `{name}` ({d})"))?;
            by_name.insert(name, (d, Arc::new(bytes)));
        }
        Ok(Artifacts {
            manifest: Some(*digest),
            by_name,
        })
    }

    /// Artifacts held in memory only (`weir operator test`): digests as
    /// [`store`] would record them.
    pub fn in_memory(artifacts: BTreeMap<String, Vec<u8>>) -> Self {
        if artifacts.is_empty() {
            return Artifacts::default();
        }
        let by_name: BTreeMap<String, (Digest, Arc<Vec<u8>>)> = artifacts
            .into_iter()
            .map(|(n, b)| (n, (Digest::of(&b), Arc::new(b))))
            .collect();
        let manifest = Manifest(by_name.iter().map(|(n, (d, _))| (n.clone(), *d)).collect());
        Artifacts {
            manifest: Some(Digest::of(&manifest.to_bytes())),
            by_name,
        }
    }

    /// The manifest's digest, as `offsets/N` records it.
    pub fn manifest(&self) -> Option<Digest> {
        self.manifest
    }

    /// The bytes of artifact `name`.
    pub fn get(&self, name: &str) -> Option<&Arc<Vec<u8>>> {
        self.by_name.get(name).map(|(_, b)| b)
    }

    /// The digest of artifact `name`.
    pub fn digest(&self, name: &str) -> Option<Digest> {
        self.by_name.get(name).map(|(d, _)| *d)
    }

    /// Names and digests, sorted by name.
    pub fn digests(&self) -> BTreeMap<String, Digest> {
        self.by_name
            .iter()
            .map(|(n, (d, _))| (n.clone(), *d))
            .collect()
    }

    /// Whether the version has none.
    pub fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_artifacts_load_back_and_name_their_manifest() {
        let dir = std::env::temp_dir().join(format!("weir-artifacts-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let blobs = Blobs::new(dir.clone(), None);
        let mut files = BTreeMap::new();
        files.insert("model".to_string(), b"onnx bytes".to_vec());
        files.insert("words".to_string(), b"a b c".to_vec());
        let manifest = store(&blobs, &files).unwrap().unwrap();
        let loaded = Artifacts::load(&blobs, Some(&manifest)).unwrap();
        assert_eq!(loaded.manifest(), Some(manifest));
        assert_eq!(loaded.get("model").unwrap().as_slice(), b"onnx bytes");
        assert_eq!(loaded.digest("words"), Some(Digest::of(b"a b c")));
        assert_eq!(
            store(&blobs, &files).unwrap(),
            Some(manifest),
            "same set, same digest"
        );
        assert_eq!(store(&blobs, &BTreeMap::new()).unwrap(), None);
        files.insert("Bad Name".into(), vec![]);
        assert!(store(&blobs, &files).is_err());
        std::fs::remove_dir_all(dir).ok();
    }
}
