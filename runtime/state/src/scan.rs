//! Range scans over one namespace: the committed store and the epoch's own
//! changes merged in key order, so an operator finds its open windows or
//! its due timers without keeping an index of its own.

use super::epoch::{decode, full_key, EpochState};
use super::store::StateReader;
use anyhow::{Context, Result};

/// The smallest byte string greater than every string starting with
/// `prefix` (`None`: there is none, `prefix` is all `0xff`).
pub fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < u8::MAX {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
}

impl StateReader {
    /// Committed entries with `lo <= key < hi` (`hi = None`: to the end), in
    /// key order, handed to `keep` until it returns `false`.
    pub(crate) fn range(
        &self,
        lo: &[u8],
        hi: Option<&[u8]>,
        mut keep: impl FnMut(&[u8], &[u8]) -> Result<bool>,
    ) -> Result<()> {
        let mut options = rocksdb::ReadOptions::default();
        if let Some(hi) = hi {
            options.set_iterate_upper_bound(hi.to_vec());
        }
        let mut iter = self.db().raw_iterator_opt(options);
        iter.seek(lo);
        while iter.valid() {
            let (Some(k), Some(v)) = (iter.key(), iter.value()) else {
                break;
            };
            if !keep(k, v)? {
                return Ok(());
            }
            iter.next();
        }
        iter.status().context("scanning state")
    }

    /// The first committed key starting with `prefix`, if any.
    pub fn first_key(&self, prefix: &[u8]) -> Result<Option<Vec<u8>>> {
        let mut first = None;
        let end = prefix_end(prefix);
        self.range(prefix, end.as_deref(), |k, _| {
            first = Some(k.to_vec());
            Ok(false)
        })?;
        Ok(first)
    }
}

impl EpochState {
    /// Live entries of the namespace with `prefix` whose key is at least
    /// `start` and below `end` (`None`: to the namespace's end), in key
    /// order, at most `limit` of them: the epoch's own changes over the
    /// committed store, expired values left out. Keys come back without
    /// the namespace prefix.
    pub fn scan(
        &self,
        prefix: &[u8],
        start: &[u8],
        end: Option<&[u8]>,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        self.scan_where(prefix, start, end, limit, |_| true)
    }

    /// [`Self::scan`] over the keys `keep` accepts (given without the
    /// namespace prefix); the others are skipped and do not count against
    /// `limit`. A task of a parallel pipeline scans its own key groups so.
    pub fn scan_where(
        &self,
        prefix: &[u8],
        start: &[u8],
        end: Option<&[u8]>,
        limit: usize,
        keep: impl Fn(&[u8]) -> bool,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let lo = full_key(prefix, start);
        let hi = match end {
            Some(e) => Some(full_key(prefix, e)),
            None => prefix_end(prefix),
        };
        let mut pending = match &hi {
            Some(hi) => self.changes.range(lo.clone()..hi.clone()),
            None => self.changes.range(lo.clone()..),
        }
        .peekable();
        let mut out = Vec::new();
        let emit = |out: &mut Vec<(Vec<u8>, Vec<u8>)>, key: &[u8], stored: &[u8]| {
            let key = &key[prefix.len()..];
            if !keep(key) {
                return anyhow::Ok(true);
            }
            if let Some(v) = decode(stored, self.now_ms)? {
                out.push((key.to_vec(), v.to_vec()));
            }
            anyhow::Ok(out.len() < limit)
        };
        if limit == 0 {
            return Ok(out);
        }
        let mut more = true;
        self.store.range(&lo, hi.as_deref(), |k, v| {
            // The epoch's changes below this committed key come first.
            while let Some((pk, pv)) = pending.next_if(|(pk, _)| pk.as_slice() <= k) {
                let shadows = pk.as_slice() == k;
                if let Some(pv) = pv {
                    more = emit(&mut out, pk, pv)?;
                }
                if !more {
                    return Ok(false);
                }
                if shadows {
                    return Ok(true);
                }
            }
            more = emit(&mut out, k, v)?;
            Ok(more)
        })?;
        if more {
            for (pk, pv) in pending {
                if let Some(pv) = pv {
                    if !emit(&mut out, pk, pv)? {
                        break;
                    }
                }
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::super::epoch::namespace_prefix;
    use super::super::store::{SnapshotPolicy, StateStore};
    use super::*;

    #[test]
    fn prefix_end_is_the_next_string_after_the_prefix() {
        assert_eq!(prefix_end(b"ab"), Some(b"ac".to_vec()));
        assert_eq!(prefix_end(b"a\xff"), Some(b"b".to_vec()));
        assert_eq!(prefix_end(b"\xff\xff"), None);
    }

    #[test]
    fn scans_merge_pending_changes_over_committed_keys_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let (mut store, _) = StateStore::open(dir.path(), SnapshotPolicy::default(), None).unwrap();
        let ns = namespace_prefix("op");
        let other = namespace_prefix("oq");
        let mut e0 = EpochState::new(store.reader(), 0, 1_000);
        for k in ["a", "c", "e", "g"] {
            e0.put(&ns, k.as_bytes(), k.as_bytes(), None);
        }
        e0.put(&ns, b"old", b"x", Some(10));
        e0.put(&other, b"b", b"not mine", None);
        store.commit(0, &e0.into_changes()).unwrap();

        let mut e1 = EpochState::new(store.reader(), 1, 2_000);
        e1.put(&ns, b"b", b"B", None);
        e1.put(&ns, b"c", b"C", None);
        e1.delete(&ns, b"e");
        e1.put(&ns, b"z", b"Z", None);
        let all = e1.scan(&ns, b"", None, usize::MAX).unwrap();
        let keys: Vec<(&[u8], &[u8])> = all
            .iter()
            .map(|(k, v)| (k.as_slice(), v.as_slice()))
            .collect();
        assert_eq!(
            keys,
            [
                (&b"a"[..], &b"a"[..]),
                (b"b", b"B"),
                (b"c", b"C"),
                (b"g", b"g"),
                (b"z", b"Z")
            ],
            "own writes win, deletes and expired keys are gone, other namespaces unseen"
        );
        let page = e1.scan(&ns, b"b", Some(b"g"), 10).unwrap();
        assert_eq!(page.len(), 2, "b and c: e is deleted, g is the end");
        let first_two = e1.scan(&ns, b"", None, 2).unwrap();
        assert_eq!(first_two.len(), 2);
        assert_eq!(first_two[1].0, b"b");
        assert!(e1.scan(&ns, b"", None, 0).unwrap().is_empty());
        assert_eq!(
            store.reader().first_key(&ns).unwrap(),
            Some(full_key(&ns, b"a"))
        );
    }
}
