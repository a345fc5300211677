//! Append-only lists: each element is a key of its own, so appending costs
//! the element (no read, no rewrite of the list) and a window that buffers
//! its rows costs O(rows). An element's key is the list key, then the
//! epoch and the element's number within the epoch: appends are ordered,
//! and a replayed epoch writes exactly the same keys.

use super::epoch::{namespace_prefix, EpochState};
use super::scan::prefix_end;
use anyhow::Result;

/// Where one operator namespace's lists live.
#[derive(Debug, Clone)]
pub struct ListSpace {
    prefix: Vec<u8>,
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
    pub fn list(&self, space: &ListSpace, key: &[u8]) -> Result<Vec<Vec<u8>>> {
        let start = list_prefix(key);
        let end = prefix_end(&start);
        Ok(self
            .scan(&space.prefix, &start, end.as_deref(), usize::MAX)?
            .into_iter()
            .map(|(_, v)| v)
            .collect())
    }

    /// Removes the list under `key`; returns how many elements it had.
    pub fn clear(&mut self, space: &ListSpace, key: &[u8]) -> Result<usize> {
        let start = list_prefix(key);
        let end = prefix_end(&start);
        let elements = self.scan(&space.prefix, &start, end.as_deref(), usize::MAX)?;
        for (k, _) in &elements {
            self.delete(&space.prefix, k);
        }
        Ok(elements.len())
    }
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
        store.commit(0, e0.into_changes()).unwrap();
        let mut e1 = EpochState::new(store.reader(), 1, 0);
        e1.append(&space, b"a", b"3");
        assert_eq!(e1.list(&space, b"a").unwrap(), [b"1", b"2", b"3"]);
        assert_eq!(e1.list(&space, b"ab").unwrap(), [b"other list"]);
        assert_eq!(e1.clear(&space, b"a").unwrap(), 3);
        assert!(e1.list(&space, b"a").unwrap().is_empty());
        store.commit(1, e1.into_changes()).unwrap();
        let e2 = EpochState::new(store.reader(), 2, 0);
        assert!(e2.list(&space, b"a").unwrap().is_empty());
        assert_eq!(e2.list(&space, b"ab").unwrap().len(), 1);
    }
}
