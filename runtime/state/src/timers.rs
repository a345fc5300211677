//! Event-time timers, kept in the state store like any other state, so
//! they are committed with the epoch that set them, undone with one that
//! failed, snapshotted, and fired identically on replay.
//!
//! Each timer is two keys: one ordered by time (`at ++ key`), so the
//! timers a watermark passes are one range scan from the start, and one
//! ordered by key (`len ++ key ++ at`), so a key's timers are a prefix scan.
//! Times are stored sign-flipped big-endian so byte order is numeric order.

use super::epoch::{namespace_prefix, Changes, EpochState};
use super::scan::prefix_end;
use super::store::StateReader;
use anyhow::{bail, Result};

/// Where one operator namespace's timers live.
#[derive(Debug, Clone)]
pub struct TimerSpace {
    by_time: Vec<u8>,
    by_key: Vec<u8>,
}

/// A timer that fired: its key and the event time it was set for.
pub type Fired = (Vec<u8>, i64);

fn sortable(at: i64) -> [u8; 8] {
    ((at as u64) ^ (1 << 63)).to_be_bytes()
}

fn unsortable(bytes: &[u8]) -> Result<i64> {
    let Ok(b) = <[u8; 8]>::try_from(bytes) else {
        bail!("a stored timer is corrupt");
    };
    Ok((u64::from_be_bytes(b) ^ (1 << 63)) as i64)
}

fn key_prefix(key: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(4 + key.len() + 8);
    k.extend_from_slice(&(key.len() as u32).to_be_bytes());
    k.extend_from_slice(key);
    k
}

fn time_entry(key: &[u8], at: i64) -> Vec<u8> {
    let mut k = sortable(at).to_vec();
    k.extend_from_slice(key);
    k
}

/// The timer's key in a by-time entry (`at ++ key`).
fn timer_key(entry: &[u8]) -> &[u8] {
    entry.get(8..).unwrap_or_default()
}

fn key_entry(key: &[u8], at: i64) -> Vec<u8> {
    let mut k = key_prefix(key);
    k.extend_from_slice(&sortable(at));
    k
}

impl TimerSpace {
    /// The timers of the operator state namespace `namespace` (apart from
    /// its keys: `weir.` names are the host's own).
    pub fn of(namespace: &str) -> Self {
        TimerSpace {
            by_time: namespace_prefix(&format!("weir.timers.{namespace}")),
            by_key: namespace_prefix(&format!("weir.timer-keys.{namespace}")),
        }
    }

    /// Whether `changes` set a timer in this space: an epoch's operator
    /// asked for a timer.
    pub fn set_in(&self, changes: &Changes) -> bool {
        changes
            .writes
            .range(self.by_time.clone()..)
            .take_while(|(k, _)| k.starts_with(&self.by_time))
            .any(|(_, v)| v.is_some())
    }

    /// The earliest committed timer's time, for deciding between epochs
    /// whether a watermark would fire anything.
    pub fn earliest(&self, reader: &StateReader) -> Result<Option<i64>> {
        match reader.first_key(&self.by_time)? {
            Some(k) => {
                let rest = &k[self.by_time.len()..];
                Ok(Some(unsortable(rest.get(..8).unwrap_or(rest))?))
            }
            None => Ok(None),
        }
    }
}

impl EpochState {
    /// Sets a timer for `key` at event time `at` (setting it twice is one
    /// timer).
    pub fn set_timer(&mut self, space: &TimerSpace, key: &[u8], at: i64) {
        self.put(&space.by_time, &time_entry(key, at), b"", None);
        self.put(&space.by_key, &key_entry(key, at), b"", None);
    }

    /// Removes `key`'s timer at `at`, if set.
    pub fn delete_timer(&mut self, space: &TimerSpace, key: &[u8], at: i64) {
        self.delete(&space.by_time, &time_entry(key, at));
        self.delete(&space.by_key, &key_entry(key, at));
    }

    /// The times of `key`'s timers, ascending.
    pub fn timers_of(&self, space: &TimerSpace, key: &[u8]) -> Result<Vec<i64>> {
        let start = key_prefix(key);
        let end = prefix_end(&start);
        self.scan(&space.by_key, &start, end.as_deref(), usize::MAX)?
            .iter()
            .map(|(k, _)| unsortable(&k[start.len()..]))
            .collect()
    }

    /// The earliest timer's time (the epoch's changes included).
    pub fn next_timer(&self, space: &TimerSpace) -> Result<Option<i64>> {
        self.next_timer_where(space, |_| true)
    }

    /// The earliest time of a timer whose key `keep` accepts.
    pub fn next_timer_where(
        &self,
        space: &TimerSpace,
        keep: impl Fn(&[u8]) -> bool,
    ) -> Result<Option<i64>> {
        let first = self.scan_where(&space.by_time, b"", None, 1, |e| keep(timer_key(e)))?;
        match first.first() {
            Some((entry, _)) => Ok(Some(unsortable(entry.get(..8).unwrap_or(entry))?)),
            None => Ok(None),
        }
    }

    /// Removes and returns the earliest timers at or before `watermark`, at
    /// most `limit`, in time order (then key order).
    pub fn take_due_timers(
        &mut self,
        space: &TimerSpace,
        watermark: i64,
        limit: usize,
    ) -> Result<Vec<Fired>> {
        self.take_due_timers_where(space, watermark, limit, |_| true)
    }

    /// [`Self::take_due_timers`] of the keys `keep` accepts: a task of a
    /// parallel pipeline fires the timers of its own key groups.
    pub fn take_due_timers_where(
        &mut self,
        space: &TimerSpace,
        watermark: i64,
        limit: usize,
        keep: impl Fn(&[u8]) -> bool,
    ) -> Result<Vec<Fired>> {
        let end = watermark.checked_add(1).map(sortable);
        let end = end.as_ref().map(|e| &e[..]);
        let due = self.scan_where(&space.by_time, b"", end, limit, |e| keep(timer_key(e)))?;
        let mut fired = Vec::with_capacity(due.len());
        for (entry, _) in due {
            if entry.len() < 8 {
                bail!("a stored timer is corrupt");
            }
            let (at, key) = entry.split_at(8);
            let at = unsortable(at)?;
            self.delete_timer(space, key, at);
            fired.push((key.to_vec(), at));
        }
        Ok(fired)
    }
}

#[cfg(test)]
mod tests {
    use super::super::store::{SnapshotPolicy, StateStore};
    use super::*;

    #[test]
    fn timers_fire_in_time_order_once_and_only_when_due() {
        let dir = tempfile::tempdir().unwrap();
        let (mut store, _) = StateStore::open(dir.path(), SnapshotPolicy::default(), None).unwrap();
        let space = TimerSpace::of("op");
        let mut e0 = EpochState::new(store.reader(), 0, 0);
        e0.set_timer(&space, b"card-b", 2_000);
        e0.set_timer(&space, b"card-a", 2_000);
        e0.set_timer(&space, b"card-a", -5);
        e0.set_timer(&space, b"card-a", 9_000);
        e0.set_timer(&space, b"card-c", 1_000);
        e0.delete_timer(&space, b"card-c", 1_000);
        assert_eq!(e0.timers_of(&space, b"card-a").unwrap(), [-5, 2_000, 9_000]);
        store.commit(0, &e0.into_changes()).unwrap();
        assert_eq!(space.earliest(&store.reader()).unwrap(), Some(-5));

        let mut e1 = EpochState::new(store.reader(), 1, 0);
        let fired = e1.take_due_timers(&space, 2_000, 100).unwrap();
        assert_eq!(
            fired,
            [
                (b"card-a".to_vec(), -5),
                (b"card-a".to_vec(), 2_000),
                (b"card-b".to_vec(), 2_000)
            ]
        );
        assert!(e1.take_due_timers(&space, 2_000, 100).unwrap().is_empty());
        assert_eq!(e1.timers_of(&space, b"card-a").unwrap(), [9_000]);
        store.commit(1, &e1.into_changes()).unwrap();
        assert_eq!(space.earliest(&store.reader()).unwrap(), Some(9_000));
        let e = EpochState::new(store.reader(), 2, 0);
        assert_eq!(e.next_timer(&space).unwrap(), Some(9_000));
        let mut e2 = EpochState::new(store.reader(), 2, 0);
        assert_eq!(e2.take_due_timers(&space, i64::MAX, 1).unwrap().len(), 1);
    }

    #[test]
    fn a_task_fires_only_the_timers_its_filter_accepts() {
        let dir = tempfile::tempdir().unwrap();
        let (mut store, _) = StateStore::open(dir.path(), SnapshotPolicy::default(), None).unwrap();
        let space = TimerSpace::of("op");
        let mut e0 = EpochState::new(store.reader(), 0, 0);
        for (key, at) in [("a1", 5), ("b1", 1), ("a2", 3), ("b2", 2)] {
            e0.set_timer(&space, key.as_bytes(), at);
        }
        store.commit(0, &e0.into_changes()).unwrap();
        let mut e1 = EpochState::new(store.reader(), 1, 0);
        let ours = |k: &[u8]| k.starts_with(b"a");
        assert_eq!(e1.next_timer_where(&space, ours).unwrap(), Some(3));
        let fired = e1.take_due_timers_where(&space, 10, 1, ours).unwrap();
        assert_eq!(
            fired,
            [(b"a2".to_vec(), 3)],
            "the limit counts accepted timers"
        );
        let fired = e1.take_due_timers_where(&space, 10, 9, ours).unwrap();
        assert_eq!(fired, [(b"a1".to_vec(), 5)]);
        assert_eq!(
            e1.next_timer(&space).unwrap(),
            Some(1),
            "other keys' timers stay"
        );
    }
}
