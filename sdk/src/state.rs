//! Keyed state kept by the host, committed with each epoch: what an epoch
//! writes its own later reads see at once, later epochs see once it is
//! committed, and nobody sees if it fails. A replay reads exactly what the
//! first run read. Keys and values are bytes; encode them as you like.
//!
//! Prefer the batched calls when you have a column of keys: [`get_many`]
//! looks up a whole batch's keys in one host call.
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

/// The epoch's watermark in Unix ms (largest event time of earlier epochs
/// minus the allowed lateness), or `None` without an event-time column.
pub fn watermark() -> Option<i64> {
    event_time::watermark()
}
