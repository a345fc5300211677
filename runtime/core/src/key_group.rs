//! The key group of a routing key: the one hash that decides which task
//! a row goes to and where its state belongs. It lives here, at the bottom
//! of the crates, because the state store (ownership), the engine (the
//! exchange) and the Wasm host (the `key-group` import, for guests that do
//! not hash themselves) must all agree on it.
//!
//! It is part of the checkpoint format: `xxh3_64` of the key's bytes,
//! modulo [`KEY_GROUPS`], never to change for a checkpoint once written.
//! The Rust SDK computes the same in the guest, pinned by tests on both
//! sides.

use xxhash_rust::xxh3::xxh3_64;

/// How many key groups the state is divided into: the most tasks a
/// pipeline can have (Flink's default max parallelism is 128 too).
pub const KEY_GROUPS: u16 = 128;

/// The key group of a routing key's bytes (text as UTF-8, int64 as 8
/// big-endian bytes), and of a state key that does not name its group.
pub fn key_group(key: &[u8]) -> u16 {
    (xxh3_64(key) % u64::from(KEY_GROUPS)) as u16
}
