//! Compiled operator versions, by component digest, for this process.
//! Compiling a component takes seconds, so each version is compiled once
//! and shared: the control plane ([`super::Control`]) puts the versions it validated
//! here, and the epoch loop finds them, or loads a version a replay needs
//! from the checkpoint's blobs and puts it here. Deciding *which* version
//! runs is the control plane's business ([`crate::versions::Control`]); this
//! only keeps the compiled code.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use weir_core::Digest;
use weir_host::LoadedOperator;

/// The compiled versions this process has.
#[derive(Default)]
pub struct OperatorCache {
    by_digest: Mutex<HashMap<Digest, Arc<LoadedOperator>>>,
}

impl OperatorCache {
    fn lock(&self) -> MutexGuard<'_, HashMap<Digest, Arc<LoadedOperator>>> {
        // A panic while holding this lock leaves the map consistent.
        self.by_digest.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The compiled version with component digest `digest`, if any.
    pub fn get(&self, digest: &Digest) -> Option<Arc<LoadedOperator>> {
        self.lock().get(digest).cloned()
    }

    /// Whether the version with `digest` is compiled.
    pub fn contains(&self, digest: &Digest) -> bool {
        self.lock().contains_key(digest)
    }

    /// Keeps `operator` under its digest.
    pub fn insert(&self, operator: Arc<LoadedOperator>) {
        self.lock().insert(operator.digest(), operator);
    }
}
