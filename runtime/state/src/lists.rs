//! Append-only lists: each element is a key of its own, so appending costs
//! the element (no read, no rewrite of the list) and a window that buffers
//! its rows costs O(rows). An element's key is the list key, then the
//! epoch and the element's number within the epoch: appends are ordered,
//! and a replayed epoch writes exactly the same keys.
//!
//! Clearing a list costs no copy of its elements either: it writes a
//! *clear mark* — the position (epoch, number) below which the list's
//! elements are gone, and how many there are — and reads start there. The
//! elements themselves are deleted by a later epoch
//! ([`EpochState::forget_cleared_lists`]), once the clearing epoch is
//! committed and can no longer be undone: those deletes need no undo
//! record (a rollback restores the mark, which hides them again), so a
//! closed window's rows are not copied into the undo record and the write
//! batch on their way out.

use super::epoch::{full_key, namespace_prefix, EpochState};
use super::scan::prefix_end;
use anyhow::{Context, Result};

/// Where one operator namespace's lists live.
#[derive(Debug, Clone)]
pub struct ListSpace {
    prefix: Vec<u8>,
    /// Where the lists' clear marks live (by list).
    cleared: Vec<u8>,
}

/// A clear mark: elements below `bound` (epoch and number, as in their
/// keys) are gone; `count` of them are still stored.
struct Mark {
    bound: [u8; 12],
    count: u64,
}

impl Mark {
    fn encode(&self) -> Vec<u8> {
        let mut v = self.bound.to_vec();
        v.extend_from_slice(&self.count.to_be_bytes());
        v
    }

    fn decode(v: &[u8]) -> Result<Self> {
        let corrupt = || anyhow::anyhow!("a list's clear mark is corrupt");
        let bound = v.get(..12).ok_or_else(corrupt)?.try_into()?;
        let count = u64::from_be_bytes(v.get(12..20).ok_or_else(corrupt)?.try_into()?);
        Ok(Mark { bound, count })
    }
}

fn list_prefix(key: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(4 + key.len() + 12);
    k.extend_from_slice(&(key.len() as u32).to_be_bytes());
    k.extend_from_slice(key);
    k
}

impl ListSpace {
    /// The lists of the operator state namespace `namespace` (apart from
    /// its keys).
    pub fn of(namespace: &str) -> Self {
        ListSpace {
            prefix: namespace_prefix(&format!("weir.lists.{namespace}")),
            cleared: namespace_prefix(&format!("weir.cleared.{namespace}")),
        }
    }
}

impl EpochState {
    /// Appends `value` to the list under `key`.
    pub fn append(&mut self, space: &ListSpace, key: &[u8], value: &[u8]) {
        let mut element = list_prefix(key);
        element.extend_from_slice(&self.epoch.to_be_bytes());
        element.extend_from_slice(&self.appended.to_be_bytes());
        self.appended += 1;
        self.put(&space.prefix, &element, value, None);
    }

    /// The elements of the list under `key`, in the order appended.
    pub fn list(&mut self, space: &ListSpace, key: &[u8]) -> Result<Vec<Vec<u8>>> {
        let head = list_prefix(key);
        let mark = self.mark(space, &head)?;
        let start = live_start(&head, mark.as_ref());
        let end = prefix_end(&head);
        Ok(self
            .scan(&space.prefix, &start, end.as_deref(), usize::MAX)?
            .into_iter()
            .map(|(_, v)| v)
            .collect())
    }

    /// Removes the list under `key`; returns how many elements it had.
    /// Writes a clear mark (see the module doc): no element is read.
    pub fn clear(&mut self, space: &ListSpace, key: &[u8]) -> Result<usize> {
        let head = list_prefix(key);
        let mark = self.mark(space, &head)?;
        let start = live_start(&head, mark.as_ref());
        let mut bound = [0u8; 12];
        bound[..8].copy_from_slice(&self.epoch.to_be_bytes());
        bound[8..].copy_from_slice(&self.appended.to_be_bytes());
        let mut end = head.clone();
        end.extend_from_slice(&bound);
        let removed = self.count_keys(&space.prefix, &start, &end)?;
        if removed == 0 {
            return Ok(0);
        }
        let count = mark.map_or(0, |m| m.count) + removed as u64;
        self.put(&space.cleared, &head, &Mark { bound, count }.encode(), None);
        Ok(removed)
    }

    /// Deletes the elements that committed clear marks hide, and the marks:
    /// called at the start of an epoch, before the operator runs, so every
    /// mark found is from a committed epoch. The deletes carry no undo (see
    /// the module doc); returns how many elements went.
    pub fn forget_cleared_lists(&mut self, space: &ListSpace) -> Result<u64> {
        let mut marks = Vec::new();
        let end = prefix_end(&space.cleared);
        self.store.range(&space.cleared, end.as_deref(), |k, v| {
            let value = super::epoch::decode(v, i64::MIN)?.context("a clear mark expired")?;
            marks.push((k[space.cleared.len()..].to_vec(), Mark::decode(value)?));
            Ok(true)
        })?;
        let mut forgotten = 0;
        for (head, mark) in marks {
            let lo = full_key(&space.prefix, &head);
            let mut hi = lo.clone();
            hi.extend_from_slice(&mark.bound);
            let mut elements = Vec::new();
            self.store.range(&lo, Some(&hi), |k, _| {
                elements.push(k.to_vec());
                Ok(true)
            })?;
            for element in elements {
                self.forget(element);
            }
            self.forgotten += mark.count;
            forgotten += mark.count;
            self.delete(&space.cleared, &head);
        }
        Ok(forgotten)
    }

    /// The list's clear mark, if it has one.
    fn mark(&mut self, space: &ListSpace, head: &[u8]) -> Result<Option<Mark>> {
        self.get(&space.cleared, head)?
            .map(|v| Mark::decode(&v))
            .transpose()
    }
}

/// Where the list with key prefix `head` has its live elements: at its
/// clear mark, if it has one.
fn live_start(head: &[u8], mark: Option<&Mark>) -> Vec<u8> {
    let mut start = head.to_vec();
    if let Some(mark) = mark {
        start.extend_from_slice(&mark.bound);
    }
    start
}

#[cfg(test)]
mod tests {
    use super::super::store::{SnapshotPolicy, StateStore};
    use super::*;

    #[test]
    fn lists_keep_append_order_across_epochs_and_clear_to_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let (mut store, _) = StateStore::open(dir.path(), SnapshotPolicy::default(), None).unwrap();
        let space = ListSpace::of("op");
        let mut e0 = EpochState::new(store.reader(), 0, 0);
        e0.append(&space, b"a", b"1");
        e0.append(&space, b"ab", b"other list");
        e0.append(&space, b"a", b"2");
        store.commit(0, &e0.into_changes()).unwrap();
        let mut e1 = EpochState::new(store.reader(), 1, 0);
        e1.append(&space, b"a", b"3");
        assert_eq!(e1.list(&space, b"a").unwrap(), [b"1", b"2", b"3"]);
        assert_eq!(e1.list(&space, b"ab").unwrap(), [b"other list"]);
        assert_eq!(e1.clear(&space, b"a").unwrap(), 3);
        assert!(e1.list(&space, b"a").unwrap().is_empty());
        store.commit(1, &e1.into_changes()).unwrap();
        let mut e2 = EpochState::new(store.reader(), 2, 0);
        assert!(e2.list(&space, b"a").unwrap().is_empty());
        assert_eq!(e2.list(&space, b"ab").unwrap().len(), 1);
    }

    /// Keys of the lists' namespace actually stored.
    fn stored_elements(store: &StateStore, space: &ListSpace) -> usize {
        let mut n = 0;
        let end = prefix_end(&space.prefix);
        store
            .reader()
            .range(&space.prefix, end.as_deref(), |_, _| {
                n += 1;
                Ok(true)
            })
            .unwrap();
        n
    }

    #[test]
    fn a_clear_marks_and_a_later_epoch_deletes_without_undo_even_across_a_rollback() {
        let dir = tempfile::tempdir().unwrap();
        let (mut store, _) = StateStore::open(dir.path(), SnapshotPolicy::default(), None).unwrap();
        let space = ListSpace::of("op");
        let mut e0 = EpochState::new(store.reader(), 0, 0);
        for v in [b"1", b"2", b"3"] {
            e0.append(&space, b"w", v);
        }
        e0.append(&space, b"x", b"kept");
        store.commit(0, &e0.into_changes()).unwrap();
        assert_eq!(store.size().0, 4);

        // Epoch 1: two more, a clear, one after it.
        let mut e1 = EpochState::new(store.reader(), 1, 0);
        assert_eq!(e1.forget_cleared_lists(&space).unwrap(), 0);
        e1.append(&space, b"w", b"4");
        assert_eq!(e1.clear(&space, b"w").unwrap(), 4);
        assert_eq!(e1.clear(&space, b"w").unwrap(), 0, "nothing left to clear");
        e1.append(&space, b"w", b"after");
        assert_eq!(e1.list(&space, b"w").unwrap(), [b"after"]);
        let changes = e1.into_changes();
        assert!(
            changes
                .before
                .values()
                .all(|v| v.as_ref().is_none_or(|v| v.len() < 32)),
            "no element copied for the undo record"
        );
        store.commit(1, &changes).unwrap();
        // Elements stay stored until a later epoch, hidden by the mark.
        assert_eq!(stored_elements(&store, &space), 6);
        assert_eq!(store.size().0, 7, "6 elements and the mark");

        // Epoch 2 forgets them; then dies before commits/2 and is replayed.
        for run in 0..2 {
            let mut e2 = EpochState::new(store.reader(), 2, 0);
            let forgot = e2.forget_cleared_lists(&space).unwrap();
            assert_eq!(forgot, 4, "run {run}");
            assert_eq!(e2.list(&space, b"w").unwrap(), [b"after"]);
            store.commit(2, &e2.into_changes()).unwrap();
            assert_eq!(stored_elements(&store, &space), 2, "run {run}");
            assert_eq!(store.size().0, 2, "run {run}: the key count");
            if run == 0 {
                store.roll_back_uncommitted(Some(1)).unwrap();
                // The mark is back; the elements stay deleted and hidden.
                let mut again = EpochState::new(store.reader(), 2, 0);
                assert_eq!(again.list(&space, b"w").unwrap(), [b"after"]);
                assert_eq!(store.size().0, 7);
            }
        }
        let mut e3 = EpochState::new(store.reader(), 3, 0);
        assert_eq!(e3.forget_cleared_lists(&space).unwrap(), 0);
        assert_eq!(e3.list(&space, b"w").unwrap(), [b"after"]);
        assert_eq!(e3.list(&space, b"x").unwrap(), [b"kept"]);
    }
}
