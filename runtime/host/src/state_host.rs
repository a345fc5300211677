//! The `weir:operator/state` and `event-time` imports: an operator's keyed
//! state, read and written through the embedder's [`KeyedState`] (Weir's
//! engine hands in the epoch's overlay over RocksDB), and the epoch's
//! watermark. Everything a guest passes is checked: malformed
//! byte strings or more pending state than the instance's memory cap trap
//! the guest, which fails the epoch and leaves the host as it was.

use super::bindings::weir::operator::{event_time, state, timers};
use super::error::{HostFault, KeyNotOwned};
use super::store::HostState;
use state::ByteStrings;
use std::any::Any;
use wasmtime::{bail, format_err, Result};

/// The keyed state one operator instance reads and writes during one
/// epoch. The host does not own storage: the embedder decides where state
/// lives and when changes become durable (Weir's engine: an in-memory
/// overlay over RocksDB, committed with the epoch), and scopes keys to the
/// operator's namespace. Writes must stay invisible outside this value until
/// the embedder commits them, so a failed epoch leaves no trace.
pub trait KeyedState: Send {
    /// The value under `key`, if any (expired values are absent).
    fn get(&mut self, key: &[u8]) -> anyhow::Result<Option<Vec<u8>>>;
    /// The values under `keys`, in order.
    fn get_many(&mut self, keys: &[&[u8]]) -> anyhow::Result<Vec<Option<Vec<u8>>>>;
    /// Sets `key`, expiring `ttl_ms` after the epoch's time if given.
    fn put(&mut self, key: &[u8], value: &[u8], ttl_ms: Option<u64>) -> anyhow::Result<()>;
    /// Removes `key`.
    fn delete(&mut self, key: &[u8]) -> anyhow::Result<()>;
    /// Live keys in `[start, end)` (`end = None`: to the last key) with
    /// their values, in key order, at most `limit`.
    fn scan(
        &mut self,
        start: &[u8],
        end: Option<&[u8]>,
        limit: usize,
    ) -> anyhow::Result<Vec<(Vec<u8>, Vec<u8>)>>;
    /// Appends `value` to the list under `key` (lists are apart from keys).
    fn append(&mut self, key: &[u8], value: &[u8]) -> anyhow::Result<()>;
    /// The list under `key`, in append order.
    fn list(&mut self, key: &[u8]) -> anyhow::Result<Vec<Vec<u8>>>;
    /// Removes the list under `key`.
    fn clear(&mut self, key: &[u8]) -> anyhow::Result<()>;
    /// Sets a timer for `key` at event time `at_ms`.
    fn set_timer(&mut self, key: &[u8], at_ms: i64) -> anyhow::Result<()>;
    /// Removes `key`'s timer at `at_ms`.
    fn delete_timer(&mut self, key: &[u8], at_ms: i64) -> anyhow::Result<()>;
    /// The times of `key`'s timers, ascending.
    fn timers(&mut self, key: &[u8]) -> anyhow::Result<Vec<i64>>;
    /// Removes and returns the earliest timers at or before `watermark`,
    /// at most `limit`, in time order: the host hands them to `on-timers`.
    fn take_due_timers(
        &mut self,
        watermark: i64,
        limit: usize,
    ) -> anyhow::Result<Vec<(Vec<u8>, i64)>>;
    /// The earliest timer's time, if any timer is set.
    fn next_timer(&mut self) -> anyhow::Result<Option<i64>>;
    /// Bytes of uncommitted changes, charged against the operator's memory
    /// limit so that state cannot be used to escape it.
    fn pending_bytes(&self) -> usize;
    /// The concrete value back, for the embedder to commit after the run.
    fn into_any(self: Box<Self>) -> Box<dyn Any>;
    /// The concrete value, between calls: a real-time epoch's instance
    /// lives across many batches, and the embedder's own per-batch work
    /// (deduplication) writes to the same epoch's state.
    fn as_any_mut(&mut self) -> &mut dyn Any;
}

impl HostState {
    fn epoch_state(&mut self) -> Result<&mut dyn KeyedState> {
        match self.env.state.as_deref_mut() {
            Some(s) => Ok(s),
            None => bail!("keyed state is available only while an epoch runs"),
        }
    }

    fn check_budget(&mut self) -> Result<()> {
        let (budget, pending) = (
            self.state_budget,
            self.env.state.as_ref().map_or(0, |s| s.pending_bytes()),
        );
        if pending > budget {
            bail!(
                "the epoch's state changes hold {pending} bytes, more than the operator's \
                 memory limit of {budget} bytes"
            );
        }
        Ok(())
    }
}

/// Splits Arrow-binary-layout byte strings, refusing bad offsets.
fn split(strings: &ByteStrings) -> Result<Vec<&[u8]>> {
    let offs = &strings.offsets;
    if offs.first().is_some_and(|&o| o != 0) {
        bail!("byte-strings offsets must start at 0");
    }
    offs.windows(2)
        .map(|w| {
            let (a, b) = (w[0] as usize, w[1] as usize);
            strings.data.get(a..b).ok_or_else(|| {
                format_err!("byte-strings offsets {a}..{b} out of order or past the data")
            })
        })
        .collect()
}

/// Keys and values of a `*-many` call, pair by pair: the two columns must
/// be as long as each other.
fn split_pairs<'a>(
    call: &str,
    keys: &'a ByteStrings,
    values: &'a ByteStrings,
) -> Result<Vec<(&'a [u8], &'a [u8])>> {
    let (keys, values) = (split(keys)?, split(values)?);
    if keys.len() != values.len() {
        bail!("{call} got {} keys but {} values", keys.len(), values.len());
    }
    Ok(keys.into_iter().zip(values).collect())
}

/// An embedder's state error as the guest's trap, typed: a refused key
/// for [`crate::OperatorFailure::KeyNotOwned`], anything else (an I/O
/// error, corruption) for [`crate::OperatorFailure::Host`].
fn host_error(e: anyhow::Error) -> wasmtime::Error {
    match e.downcast_ref::<KeyNotOwned>() {
        Some(refused) => wasmtime::Error::new(refused.clone()),
        None => wasmtime::Error::new(HostFault(format!("state store: {e:#}"))),
    }
}

impl state::Host for HostState {
    fn get(&mut self, key: Vec<u8>) -> Result<Option<Vec<u8>>> {
        let s = self.epoch_state()?;
        s.get(&key).map_err(host_error)
    }

    fn put(&mut self, key: Vec<u8>, value: Vec<u8>, ttl_ms: Option<u64>) -> Result<()> {
        let s = self.epoch_state()?;
        s.put(&key, &value, ttl_ms).map_err(host_error)?;
        self.check_budget()
    }

    fn delete(&mut self, key: Vec<u8>) -> Result<()> {
        let s = self.epoch_state()?;
        s.delete(&key).map_err(host_error)?;
        self.check_budget()
    }

    fn get_many(&mut self, keys: ByteStrings) -> Result<(ByteStrings, Vec<u8>)> {
        let keys = split(&keys)?;
        let s = self.epoch_state()?;
        let found = s.get_many(&keys).map_err(host_error)?;
        let mut offsets = Vec::with_capacity(found.len() + 1);
        let mut data = Vec::new();
        let mut present = vec![0u8; found.len().div_ceil(8)];
        offsets.push(0u32);
        for (i, value) in found.iter().enumerate() {
            if let Some(v) = value {
                present[i / 8] |= 1 << (i % 8);
                data.extend_from_slice(v);
            }
            let end = u32::try_from(data.len())
                .map_err(|_| format_err!("get-many result is larger than 4 GiB"))?;
            offsets.push(end);
        }
        Ok((ByteStrings { offsets, data }, present))
    }

    fn put_many(
        &mut self,
        keys: ByteStrings,
        values: ByteStrings,
        ttl_ms: Option<u64>,
    ) -> Result<()> {
        let pairs = split_pairs("put-many", &keys, &values)?;
        let s = self.epoch_state()?;
        for (k, v) in pairs {
            s.put(k, v, ttl_ms).map_err(host_error)?;
        }
        self.check_budget()
    }

    fn delete_many(&mut self, keys: ByteStrings) -> Result<()> {
        let keys = split(&keys)?;
        let s = self.epoch_state()?;
        for k in keys {
            s.delete(k).map_err(host_error)?;
        }
        self.check_budget()
    }

    fn scan(
        &mut self,
        start: Vec<u8>,
        end: Option<Vec<u8>>,
        limit: u32,
    ) -> Result<(ByteStrings, ByteStrings)> {
        HostState::scan(self, start, end, limit)
    }

    fn append(&mut self, key: Vec<u8>, value: Vec<u8>) -> Result<()> {
        self.epoch_state()?
            .append(&key, &value)
            .map_err(host_error)?;
        self.check_budget()
    }

    fn append_many(&mut self, keys: ByteStrings, values: ByteStrings) -> Result<()> {
        HostState::append_many(self, keys, values)
    }

    fn read_list(&mut self, key: Vec<u8>) -> Result<ByteStrings> {
        let items = self.epoch_state()?.list(&key).map_err(host_error)?;
        pack(items.iter().map(Vec::as_slice))
    }

    fn clear_list(&mut self, key: Vec<u8>) -> Result<()> {
        self.epoch_state()?.clear(&key).map_err(host_error)?;
        self.check_budget()
    }

    fn key_group(&mut self, routing_key: Vec<u8>) -> u16 {
        weir_core::key_group::key_group(&routing_key)
    }
}

/// Packs byte strings into Arrow binary layout for the guest.
fn pack<'a>(items: impl IntoIterator<Item = &'a [u8]>) -> Result<ByteStrings> {
    let mut offsets = vec![0u32];
    let mut data = Vec::new();
    for item in items {
        data.extend_from_slice(item);
        offsets.push(
            u32::try_from(data.len())
                .map_err(|_| format_err!("a state result is larger than 4 GiB"))?,
        );
    }
    Ok(ByteStrings { offsets, data })
}

impl HostState {
    fn scan(
        &mut self,
        start: Vec<u8>,
        end: Option<Vec<u8>>,
        limit: u32,
    ) -> Result<(ByteStrings, ByteStrings)> {
        let s = self.epoch_state()?;
        let found = s
            .scan(&start, end.as_deref(), limit as usize)
            .map_err(host_error)?;
        let keys = pack(found.iter().map(|(k, _)| k.as_slice()))?;
        let values = pack(found.iter().map(|(_, v)| v.as_slice()))?;
        Ok((keys, values))
    }

    fn append_many(&mut self, keys: ByteStrings, values: ByteStrings) -> Result<()> {
        let pairs = split_pairs("append-many", &keys, &values)?;
        let s = self.epoch_state()?;
        for (k, v) in pairs {
            s.append(k, v).map_err(host_error)?;
        }
        self.check_budget()
    }
}

impl timers::Host for HostState {
    fn set(&mut self, key: Vec<u8>, at_ms: i64) -> Result<()> {
        self.epoch_state()?
            .set_timer(&key, at_ms)
            .map_err(host_error)?;
        self.check_budget()
    }

    fn delete(&mut self, key: Vec<u8>, at_ms: i64) -> Result<()> {
        self.epoch_state()?
            .delete_timer(&key, at_ms)
            .map_err(host_error)?;
        self.check_budget()
    }

    fn pending(&mut self, key: Vec<u8>) -> Result<Vec<i64>> {
        self.epoch_state()?.timers(&key).map_err(host_error)
    }
}

impl event_time::Host for HostState {
    fn watermark(&mut self) -> Option<i64> {
        self.env.watermark
    }

    fn previous_watermark(&mut self) -> Option<i64> {
        self.env.previous_watermark
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_strings_are_split_and_bad_offsets_refused() {
        let ok = ByteStrings {
            offsets: vec![0, 2, 2, 5],
            data: b"abcde".to_vec(),
        };
        assert_eq!(split(&ok).unwrap(), [&b"ab"[..], b"", b"cde"]);
        let empty = ByteStrings {
            offsets: vec![],
            data: vec![],
        };
        assert!(split(&empty).unwrap().is_empty());
        for offsets in [vec![1, 2], vec![0, 3, 2], vec![0, 9]] {
            let bad = ByteStrings {
                offsets,
                data: b"abcde".to_vec(),
            };
            assert!(split(&bad).is_err());
        }
    }
}
