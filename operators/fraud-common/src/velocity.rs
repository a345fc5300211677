//! The velocity count over the host's keyed state, batch by batch: each
//! card's recent payment times kept under the card's id ([`Window`]), read
//! and written with one batched state call each. Shared by `fraud-velocity`
//! and `fraud-model` (whose `payments_60s` feature it is).

use crate::window::Window;
use weir_sdk::{state, Int64Column, Utf8Column};

/// Each row's count of its card's payments in the `window_ms` before it,
/// this one included (`None` for a row without card or time); the cards'
/// windows are written back with `ttl_ms`.
pub fn counts(
    cards: &Utf8Column,
    times: &Int64Column,
    window_ms: i64,
    ttl_ms: u64,
) -> Vec<Option<usize>> {
    let rows = cards.len();
    let mut distinct: Vec<&str> = (0..rows).filter_map(|r| cards.get(r)).collect();
    distinct.sort_unstable();
    distinct.dedup();
    let stored = state::get_many(&distinct);
    let mut windows: Vec<Window> = (0..distinct.len())
        .map(|i| stored.get(i).map(Window::decode).unwrap_or_default())
        .collect();
    let mut counts = vec![None; rows];
    for (row, count) in counts.iter_mut().enumerate() {
        let (Some(card), Some(t)) = (cards.get(row), times.get(row)) else {
            continue;
        };
        if let Ok(i) = distinct.binary_search(&card) {
            *count = Some(windows[i].record(t, window_ms));
        }
    }
    let updates: Vec<(&str, Vec<u8>)> = distinct
        .iter()
        .zip(windows.iter_mut())
        .filter(|(_, w)| !w.is_empty())
        .map(|(c, w)| (*c, w.encode()))
        .collect();
    state::put_many(&updates, Some(ttl_ms));
    counts
}
