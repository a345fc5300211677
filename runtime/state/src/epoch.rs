//! What one epoch sees and changes: reads go through the epoch's own
//! changes to the committed store; writes stay in memory until the engine
//! commits the epoch, so nothing an epoch does is visible to anyone until
//! `commits/N` is about to be written, and a failed epoch leaves no trace.
//!
//! Keys are namespaced (`d`, namespace length, namespace, key), so the
//! operator's keys and the host's (dedup) never meet, and a new version of
//! an operator finds its predecessor's state. A value carries an optional
//! expiry in epoch time (the trigger time recorded in `offsets/N`, so a
//! replay expires exactly what the first run expired).

use super::store::{StateReader, DATA};
use anyhow::{bail, Result};
use std::collections::{BTreeMap, HashMap};

/// Most bytes of committed values an epoch remembers from its reads, so
/// that the commit's undo record needs no second read of them.
const PRE_IMAGE_BYTES: usize = 64 << 20;

/// An epoch's writes (`None` = delete), plus the committed values it read
/// of keys before writing them, for [`super::StateStore::commit`].
#[derive(Debug, Default)]
pub struct Changes {
    pub(crate) writes: BTreeMap<Vec<u8>, Option<Vec<u8>>>,
    pub(crate) before: HashMap<Vec<u8>, Option<Vec<u8>>>,
    /// Keys deleted without a pre-image ([`EpochState::forget`]): the
    /// commit takes them off the key count.
    pub(crate) forgotten: u64,
}

impl Changes {
    /// Writes without known pre-images (the commit reads them).
    pub fn writes(writes: impl IntoIterator<Item = (Vec<u8>, Option<Vec<u8>>)>) -> Self {
        Changes {
            writes: writes.into_iter().collect(),
            before: HashMap::new(),
            forgotten: 0,
        }
    }
}

impl Changes {
    /// Adds `other`'s changes to these: the tasks of a parallel epoch
    /// change disjoint keys (their own key groups), and their changes are
    /// committed as one. Where both hold a pre-image of a key, the first
    /// is kept: it was read from the committed store too.
    pub fn merge(&mut self, other: Changes) {
        self.writes.extend(other.writes);
        for (k, v) in other.before {
            self.before.entry(k).or_insert(v);
        }
        self.forgotten += other.forgotten;
    }
}

/// The state one epoch reads and writes.
pub struct EpochState {
    pub(crate) store: StateReader,
    /// The epoch's number: list elements appended in it are numbered under it.
    pub(crate) epoch: u64,
    /// List elements appended so far in this epoch ([`crate::lists`]).
    pub(crate) appended: u32,
    /// Epoch time in Unix ms: the clock TTLs are measured against.
    pub(crate) now_ms: i64,
    pub(crate) changes: BTreeMap<Vec<u8>, Option<Vec<u8>>>,
    /// Bytes of keys and values in `changes`.
    bytes: usize,
    /// Committed values read from the store, by full key (capped).
    before: HashMap<Vec<u8>, Option<Vec<u8>>>,
    before_bytes: usize,
    /// Stored keys [`Self::forget`] deletes, for the key count.
    pub(crate) forgotten: u64,
}

/// A namespace's key prefix.
pub fn namespace_prefix(namespace: &str) -> Vec<u8> {
    let mut k = Vec::with_capacity(3 + namespace.len());
    k.push(DATA);
    k.extend_from_slice(&(namespace.len() as u16).to_be_bytes());
    k.extend_from_slice(namespace.as_bytes());
    k
}

pub(crate) fn full_key(prefix: &[u8], key: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(prefix.len() + key.len());
    k.extend_from_slice(prefix);
    k.extend_from_slice(key);
    k
}

/// Stored value: a flag byte (0: no expiry, 1: expiry follows), the expiry
/// as big-endian Unix ms, then the value.
fn encode(value: &[u8], expires_ms: Option<i64>) -> Vec<u8> {
    let mut v = Vec::with_capacity(value.len() + 9);
    match expires_ms {
        None => v.push(0),
        Some(t) => {
            v.push(1);
            v.extend_from_slice(&t.to_be_bytes());
        }
    }
    v.extend_from_slice(value);
    v
}

/// The value if it has not expired at `now_ms`.
pub(crate) fn decode(stored: &[u8], now_ms: i64) -> Result<Option<&[u8]>> {
    match stored.split_first() {
        Some((0, value)) => Ok(Some(value)),
        Some((1, rest)) if rest.len() >= 8 => {
            let (t, value) = rest.split_at(8);
            let expires = i64::from_be_bytes(t.try_into().unwrap_or([0; 8]));
            Ok((now_ms < expires).then_some(value))
        }
        _ => bail!("a stored state value is corrupt"),
    }
}

impl EpochState {
    /// An empty overlay over `store` for epoch `epoch` at epoch time
    /// `now_ms`.
    pub fn new(store: StateReader, epoch: u64, now_ms: i64) -> Self {
        EpochState {
            store,
            epoch,
            appended: 0,
            now_ms,
            changes: BTreeMap::new(),
            bytes: 0,
            before: HashMap::new(),
            before_bytes: 0,
            forgotten: 0,
        }
    }

    /// A fresh overlay over the same committed store, for the same epoch
    /// and epoch time: one per task of a parallel epoch. Its changes are
    /// its own, to be merged with [`Changes::merge`].
    pub fn sibling(&self) -> Self {
        EpochState::new(self.store.clone(), self.epoch, self.now_ms)
    }

    /// Epoch time in Unix ms.
    pub fn now_ms(&self) -> i64 {
        self.now_ms
    }

    /// Reads `key` of the namespace with `prefix`.
    pub fn get(&mut self, prefix: &[u8], key: &[u8]) -> Result<Option<Vec<u8>>> {
        let full = full_key(prefix, key);
        let stored = match self.changes.get(&full) {
            Some(change) => change.clone(),
            None => {
                let stored = self.store.get(&full)?;
                self.remember(full, &stored);
                stored
            }
        };
        Ok(match stored {
            None => None,
            Some(s) => decode(&s, self.now_ms)?.map(<[u8]>::to_vec),
        })
    }

    /// Reads many keys: the epoch's own changes first, the rest from the
    /// store in one batched lookup.
    pub fn get_many(&mut self, prefix: &[u8], keys: &[&[u8]]) -> Result<Vec<Option<Vec<u8>>>> {
        let fulls: Vec<Vec<u8>> = keys.iter().map(|k| full_key(prefix, k)).collect();
        let mut out: Vec<Option<Option<Vec<u8>>>> =
            fulls.iter().map(|f| self.changes.get(f).cloned()).collect();
        let missing: Vec<usize> = (0..fulls.len()).filter(|&i| out[i].is_none()).collect();
        if !missing.is_empty() {
            let lookups: Vec<&[u8]> = missing.iter().map(|&i| fulls[i].as_slice()).collect();
            let found = self.store.get_many(&lookups)?;
            for (&i, stored) in missing.iter().zip(found) {
                self.remember(fulls[i].clone(), &stored);
                out[i] = Some(stored);
            }
        }
        out.into_iter()
            .map(|stored| match stored.flatten() {
                None => Ok(None),
                Some(s) => Ok(decode(&s, self.now_ms)?.map(<[u8]>::to_vec)),
            })
            .collect()
    }

    /// Sets `key`; with `ttl_ms` it reads as absent from epoch time
    /// `now + ttl` on.
    pub fn put(&mut self, prefix: &[u8], key: &[u8], value: &[u8], ttl_ms: Option<u64>) {
        let expires = ttl_ms.map(|t| self.now_ms.saturating_add(t.min(i64::MAX as u64) as i64));
        self.change(full_key(prefix, key), Some(encode(value, expires)));
    }

    /// Removes `key`.
    pub fn delete(&mut self, prefix: &[u8], key: &[u8]) {
        self.change(full_key(prefix, key), None);
    }

    /// Deletes a stored key (full key) whose old value a rollback need not
    /// restore, because what it was is hidden by other state the rollback
    /// restores (a list's clear mark): no pre-image is read or kept for the
    /// undo record. The caller adds the keys to [`Self::forgotten`].
    pub(crate) fn forget(&mut self, full: Vec<u8>) {
        self.before.insert(full.clone(), None);
        self.change(full, None);
    }

    /// How many live keys of the namespace with `prefix` lie in
    /// `[start, end)` (committed ones and this epoch's), without reading a
    /// value into memory.
    pub(crate) fn count_keys(&self, prefix: &[u8], start: &[u8], end: &[u8]) -> Result<usize> {
        let (lo, hi) = (full_key(prefix, start), full_key(prefix, end));
        let mut n = 0;
        self.store.range(&lo, Some(&hi), |k, _| {
            n += usize::from(!self.changes.contains_key(k));
            Ok(true)
        })?;
        n += self
            .changes
            .range(lo..hi)
            .filter(|(_, v)| v.is_some())
            .count();
        Ok(n)
    }

    /// Keeps a committed value read from the store, while under the cap.
    fn remember(&mut self, full: Vec<u8>, stored: &Option<Vec<u8>>) {
        let size = full.len() + stored.as_ref().map_or(0, Vec::len);
        if self.before_bytes + size <= PRE_IMAGE_BYTES && !self.before.contains_key(&full) {
            self.before_bytes += size;
            self.before.insert(full, stored.clone());
        }
    }

    fn change(&mut self, key: Vec<u8>, value: Option<Vec<u8>>) {
        let size = |k: &[u8], v: &Option<Vec<u8>>| k.len() + v.as_ref().map_or(0, Vec::len);
        self.bytes += size(&key, &value);
        let key_len = key.len();
        if let Some(old) = self.changes.insert(key, value) {
            self.bytes -= key_len + old.as_ref().map_or(0, Vec::len);
        }
    }

    /// Bytes of keys and values this epoch holds in memory until commit.
    pub fn pending_bytes(&self) -> usize {
        self.bytes
    }

    /// Keys of the namespace with `prefix` whose key starts with `from` and
    /// sorts below `until` (committed state plus this epoch's changes), for
    /// sweeps over a time-ordered index.
    pub fn keys_between(&self, prefix: &[u8], from: &[u8], until: &[u8]) -> Result<Vec<Vec<u8>>> {
        let start = full_key(prefix, from);
        let end = full_key(prefix, until);
        let mut keys = Vec::new();
        self.store.scan_prefix(&start, |k, _| {
            if k >= end.as_slice() {
                return false;
            }
            keys.push(k.to_vec());
            true
        })?;
        for (k, v) in self.changes.range(start.clone()..end) {
            match v {
                Some(_) => keys.push(k.clone()),
                None => keys.retain(|x| x != k),
            }
        }
        keys.sort();
        keys.dedup();
        Ok(keys
            .into_iter()
            .map(|k| k[prefix.len()..].to_vec())
            .collect())
    }

    /// Number of keys this epoch changed.
    pub fn changed(&self) -> usize {
        self.changes.len()
    }

    /// The epoch's changes, for [`super::StateStore::commit`].
    pub fn into_changes(self) -> Changes {
        let mut before = self.before;
        before.retain(|k, _| self.changes.contains_key(k));
        Changes {
            writes: self.changes,
            before,
            forgotten: self.forgotten,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::store::{SnapshotPolicy, StateStore};
    use super::*;

    #[test]
    fn reads_see_own_writes_then_the_store_and_ttl_uses_epoch_time() {
        let dir = tempfile::tempdir().unwrap();
        let (mut store, _) = StateStore::open(dir.path(), SnapshotPolicy::default(), None).unwrap();
        let ns = namespace_prefix("op");
        let other = namespace_prefix("weir.dedup");
        let mut e0 = EpochState::new(store.reader(), 0, 1_000);
        e0.put(&ns, b"a", b"1", None);
        e0.put(&ns, b"short", b"x", Some(500));
        assert_eq!(e0.get(&ns, b"a").unwrap().as_deref(), Some(&b"1"[..]));
        assert_eq!(e0.get(&other, b"a").unwrap(), None, "namespaces are apart");
        let changes = e0.into_changes();
        store.commit(0, &changes).unwrap();

        let mut e1 = EpochState::new(store.reader(), 0, 1_499);
        assert_eq!(e1.get(&ns, b"short").unwrap().as_deref(), Some(&b"x"[..]));
        e1.delete(&ns, b"a");
        e1.put(&ns, b"b", b"2", None);
        let got = e1.get_many(&ns, &[b"a", b"b", b"short", b"none"]).unwrap();
        assert_eq!(got, [None, Some(b"2".to_vec()), Some(b"x".to_vec()), None]);
        let before = e1.pending_bytes();
        e1.put(&ns, b"b", b"22", None);
        assert_eq!(e1.pending_bytes(), before + 1, "a rewrite counts once");
        let mut e2 = EpochState::new(store.reader(), 0, 1_500);
        assert_eq!(e2.get(&ns, b"short").unwrap(), None, "expired at now + ttl");
    }

    #[test]
    fn values_read_before_writing_become_the_undo_record() {
        let dir = tempfile::tempdir().unwrap();
        let (mut store, _) = StateStore::open(dir.path(), SnapshotPolicy::default(), None).unwrap();
        let ns = namespace_prefix("op");
        let mut e0 = EpochState::new(store.reader(), 0, 0);
        e0.put(&ns, b"a", b"old", None);
        store.commit(0, &e0.into_changes()).unwrap();

        let mut e1 = EpochState::new(store.reader(), 0, 0);
        assert_eq!(e1.get_many(&ns, &[b"a", b"b"]).unwrap().len(), 2);
        e1.put(&ns, b"a", b"new", None);
        e1.put(&ns, b"b", b"born", None);
        let changes = e1.into_changes();
        assert_eq!(
            changes.before.len(),
            2,
            "both pre-images came from the reads"
        );
        store.commit(1, &changes).unwrap();
        store.roll_back_uncommitted(Some(0)).unwrap();
        let mut e = EpochState::new(store.reader(), 0, 0);
        assert_eq!(e.get(&ns, b"a").unwrap().as_deref(), Some(&b"old"[..]));
        assert_eq!(e.get(&ns, b"b").unwrap(), None);
    }

    #[test]
    fn key_ranges_merge_committed_and_pending_keys() {
        let dir = tempfile::tempdir().unwrap();
        let (mut store, _) = StateStore::open(dir.path(), SnapshotPolicy::default(), None).unwrap();
        let ns = namespace_prefix("idx");
        let mut e0 = EpochState::new(store.reader(), 0, 0);
        for k in ["t1", "t3", "t5", "u1"] {
            e0.put(&ns, k.as_bytes(), b"", None);
        }
        store.commit(0, &e0.into_changes()).unwrap();
        let mut e1 = EpochState::new(store.reader(), 0, 0);
        e1.put(&ns, b"t2", b"", None);
        e1.delete(&ns, b"t3");
        let keys = e1.keys_between(&ns, b"t", b"t5").unwrap();
        assert_eq!(keys, [b"t1".to_vec(), b"t2".to_vec()]);
    }
}
