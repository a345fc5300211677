//! Keyed state kept by the host, committed with each epoch: what an epoch
//! writes its own later reads see at once, later epochs see once it is
//! committed, and nobody sees if it fails. A replay reads exactly what the
//! first run read. Keys and values are bytes; encode them as you like.
//!
//! Prefer the batched calls when you have a column of keys: [`get_many`]
//! looks up a whole batch's keys in one host call. [`scan`] walks keys in
//! order (find open windows without an index key), and [`append`] adds to
//! a per-key list without rewriting it (buffer a window's rows).
//!
//! ```ignore
//! let cards = batch.utf8("card_id")?;
//! let keys: Vec<&[u8]> = (0..batch.num_rows()).map(|r| cards.value(r).as_bytes()).collect();
//! let counts = weir_sdk::state::get_many(&keys);
//! for (row, key) in keys.iter().enumerate() {
//!     let seen = counts.get(row).map_or(0, |v| u64::from_le_bytes(v.try_into().unwrap()));
//!     // ...
//! }
//! ```

use crate::bindings::weir::operator::{event_time, state as wit};

/// How many key groups the host divides state into (the most tasks a
/// pipeline can have). Part of the contract: the host computes the same.
pub const KEY_GROUPS: u16 = 128;

/// The first bytes of a key that names its key group ([`grouped_key`]).
const GROUPED_KEY: &[u8; 3] = b"\xffkg";

/// The key group of a routing key's bytes (the value of the pipeline's
/// `key` column: text as UTF-8, int64 as 8 big-endian bytes), as the host
/// routes rows: `xxh3_64(bytes) mod` [`KEY_GROUPS`].
pub fn key_group(routing_key: &[u8]) -> u16 {
    (xxhash_rust::xxh3::xxh3_64(routing_key) % u64::from(KEY_GROUPS)) as u16
}

/// A state, list or timer key in the key group of `routing_key`: `rest`
/// behind a header naming the group. With parallel tasks, a task may only
/// touch keys of its own groups; state keyed by the routing key itself
/// needs nothing, but a key that gathers many routing keys (every card's
/// window ending at one time) must be kept per group, each task writing
/// the one of its rows' group.
pub fn grouped_key(routing_key: &[u8], rest: &[u8]) -> Vec<u8> {
    in_group(key_group(routing_key), rest)
}

/// `rest` in key group `group` (see [`grouped_key`]).
pub fn in_group(group: u16, rest: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(GROUPED_KEY.len() + 2 + rest.len());
    k.extend_from_slice(GROUPED_KEY);
    k.extend_from_slice(&group.to_be_bytes());
    k.extend_from_slice(rest);
    k
}

/// `key` without a [`grouped_key`] header, if it has one.
pub fn ungrouped(key: &[u8]) -> &[u8] {
    match key.strip_prefix(GROUPED_KEY.as_slice()) {
        Some(rest) if rest.len() >= 2 => &rest[2..],
        _ => key,
    }
}

/// The value of `key`, if set and not expired.
pub fn get(key: &[u8]) -> Option<Vec<u8>> {
    wit::get(key)
}

/// Sets `key` to `value`.
pub fn put(key: &[u8], value: &[u8]) {
    wit::put(key, value, None)
}

/// Sets `key` to `value` until epoch time + `ttl_ms` (epoch time, not a
/// clock, so replays expire the same keys).
pub fn put_with_ttl(key: &[u8], value: &[u8], ttl_ms: u64) {
    wit::put(key, value, Some(ttl_ms))
}

/// Removes `key`.
pub fn delete(key: &[u8]) {
    wit::delete(key)
}

/// Packs byte strings into the columnar layout the host takes.
fn pack<K: AsRef<[u8]>>(items: impl IntoIterator<Item = K>) -> wit::ByteStrings {
    let mut offsets = vec![0u32];
    let mut data = Vec::new();
    for item in items {
        data.extend_from_slice(item.as_ref());
        offsets.push(data.len() as u32);
    }
    wit::ByteStrings { offsets, data }
}

/// Values found by [`get_many`], by the position of their key.
#[derive(Debug, Clone)]
pub struct Values {
    strings: wit::ByteStrings,
    present: Vec<u8>,
}

impl Values {
    /// Number of keys looked up.
    pub fn len(&self) -> usize {
        self.strings.offsets.len().saturating_sub(1)
    }

    /// Whether no keys were looked up.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The value of key `i`, if it was found.
    pub fn get(&self, i: usize) -> Option<&[u8]> {
        let found = self
            .present
            .get(i / 8)
            .is_some_and(|b| b & (1 << (i % 8)) != 0);
        if !found {
            return None;
        }
        let (a, b) = (
            *self.strings.offsets.get(i)? as usize,
            *self.strings.offsets.get(i + 1)? as usize,
        );
        self.strings.data.get(a..b)
    }
}

/// Looks up every key in one host call.
pub fn get_many<K: AsRef<[u8]>>(keys: &[K]) -> Values {
    let (strings, present) = wit::get_many(&pack(keys));
    Values { strings, present }
}

/// Sets every key to its value in one host call; with `ttl_ms`, all of
/// them expire at epoch time + `ttl_ms`.
pub fn put_many<K: AsRef<[u8]>, V: AsRef<[u8]>>(entries: &[(K, V)], ttl_ms: Option<u64>) {
    let keys = pack(entries.iter().map(|(k, _)| k));
    let values = pack(entries.iter().map(|(_, v)| v));
    wit::put_many(&keys, &values, ttl_ms)
}

/// Removes every key in one host call.
pub fn delete_many<K: AsRef<[u8]>>(keys: &[K]) {
    wit::delete_many(&pack(keys))
}

/// Key–value pairs found by [`scan`], in key order.
#[derive(Debug, Clone)]
pub struct Entries {
    keys: wit::ByteStrings,
    values: wit::ByteStrings,
}

fn nth(strings: &wit::ByteStrings, i: usize) -> &[u8] {
    let (a, b) = (
        strings.offsets.get(i).copied().unwrap_or(0) as usize,
        strings.offsets.get(i + 1).copied().unwrap_or(0) as usize,
    );
    strings.data.get(a..b).unwrap_or_default()
}

impl Entries {
    /// Number of entries.
    pub fn len(&self) -> usize {
        self.keys.offsets.len().saturating_sub(1)
    }

    /// Whether nothing was found.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Key of entry `i`.
    pub fn key(&self, i: usize) -> &[u8] {
        nth(&self.keys, i)
    }

    /// Value of entry `i`.
    pub fn value(&self, i: usize) -> &[u8] {
        nth(&self.values, i)
    }

    /// The entries as `(key, value)` pairs.
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        (0..self.len()).map(|i| (self.key(i), self.value(i)))
    }
}

/// The live keys from `start` (inclusive) to `end` (exclusive; `None`: to
/// the last key), in byte order, at most `limit` of them, with their
/// values: this epoch's writes included, its deletes and expired keys not.
/// One host call; see [`scan_prefix`] for every key under a prefix.
pub fn scan(start: &[u8], end: Option<&[u8]>, limit: u32) -> Entries {
    let (keys, values) = wit::scan(start, end, limit);
    Entries { keys, values }
}

/// The smallest key above every key starting with `prefix` (`None` if
/// there is none): the `end` of a prefix [`scan`].
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

/// Every live key starting with `prefix`, with its value, in key order,
/// fetched `page` entries per host call.
pub fn scan_prefix(prefix: &[u8], page: u32) -> Vec<(Vec<u8>, Vec<u8>)> {
    let end = prefix_end(prefix);
    let mut start = prefix.to_vec();
    let mut out = Vec::new();
    loop {
        let found = scan(&start, end.as_deref(), page.max(1));
        out.extend(found.iter().map(|(k, v)| (k.to_vec(), v.to_vec())));
        if found.len() < page.max(1) as usize {
            return out;
        }
        start = found.key(found.len() - 1).to_vec();
        start.push(0);
    }
}

/// Appends `value` to the list under `key`: the list is neither read nor
/// rewritten, so buffering rows costs O(rows). Lists are apart from the
/// plain keys ([`get`] does not see them).
pub fn append(key: &[u8], value: &[u8]) {
    wit::append(key, value)
}

/// Appends each value to the list under its key, in one host call.
pub fn append_many<K: AsRef<[u8]>, V: AsRef<[u8]>>(entries: &[(K, V)]) {
    let keys = pack(entries.iter().map(|(k, _)| k));
    let values = pack(entries.iter().map(|(_, v)| v));
    wit::append_many(&keys, &values)
}

/// The elements of the list under `key`, in the order appended.
pub fn read_list(key: &[u8]) -> Vec<Vec<u8>> {
    let strings = wit::read_list(key);
    (0..strings.offsets.len().saturating_sub(1))
        .map(|i| nth(&strings, i).to_vec())
        .collect()
}

/// Removes the list under `key`.
pub fn clear_list(key: &[u8]) {
    wit::clear_list(key)
}

/// The epoch's watermark in Unix ms (largest event time of earlier epochs
/// minus the allowed lateness), or `None` without an event-time column.
pub fn watermark() -> Option<i64> {
    event_time::watermark()
}

/// The watermark of the epoch before this one: windows whose end it
/// reached were closed by earlier epochs, so rows for them are late
/// (Spark ≥ 3.4's rule; [`watermark`] is what closes windows now).
pub fn previous_watermark() -> Option<i64> {
    event_time::previous_watermark()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_match_the_hosts() {
        // The host's `weir_state::key_groups` pins the same values.
        let groups: Vec<u16> = ["", "card-1", "card-2", "4111-1111"]
            .iter()
            .map(|k| key_group(k.as_bytes()))
            .collect();
        assert_eq!(groups, [66, 113, 14, 8]);
        let k = grouped_key(b"card-1", b"w:9");
        assert_eq!(k, b"\xffkg\x00\x71w:9");
        assert_eq!(ungrouped(&k), b"w:9");
        assert_eq!(ungrouped(b"plain"), b"plain");
    }
}
