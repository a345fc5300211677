//! Tumbling and sliding windows. Their ends are aligned (multiples of the
//! slide), so every key's window ending at one time closes at once: state
//! is kept **per end**, not per window. Each batch appends one chunk per
//! end it touched (each key's partial aggregate and, collecting, its
//! payloads) to that end's list and sets one timer at the end; closing an
//! end reads its few chunks and merges them per key. An end has one list
//! and timer per key group its keys fall in, so that each task of a
//! parallel pipeline writes and closes the windows of its own keys. A window costs no
//! state key of its own — the per-window reads, writes, timers and deletes
//! a key-per-window layout pays are what made hand-buffered windows slow.
//! Update mode also keeps each window's running aggregate under its own
//! key, since it reports it every epoch.

use super::codec::{decode_agg, encode_agg, push_part, read_parts};
use super::{Added, Aggregate, Emit, Row, Window, Windows};
use crate::{state, timers, Error, Timer};
use std::collections::BTreeMap;

/// One window's rows of this batch.
struct Part<'a> {
    agg: Aggregate,
    payloads: Vec<&'a [u8]>,
}

impl Windows {
    /// Adds a batch's rows to their tumbling or sliding windows.
    pub(super) fn add_aligned(
        &self,
        rows: &[Row<'_>],
        size: i64,
        slide: i64,
        closed_through: Option<i64>,
    ) -> Result<Added, Error> {
        let mut late = Vec::new();
        let mut by_end: BTreeMap<(i64, u16), BTreeMap<&[u8], Part<'_>>> = BTreeMap::new();
        for (i, row) in rows.iter().enumerate() {
            let mut kept = false;
            let group = state::key_group(row.key);
            for end in ends(row.ts_ms, size, slide) {
                if closed_through.is_some_and(|w| end <= w) {
                    continue;
                }
                kept = true;
                let part = by_end
                    .entry((end, group))
                    .or_default()
                    .entry(row.key)
                    .or_insert_with(|| Part {
                        agg: Aggregate::default(),
                        payloads: Vec::new(),
                    });
                part.agg.add(row.value);
                if self.collect {
                    part.payloads.push(row.payload);
                }
            }
            if !kept {
                late.push(i);
            }
        }
        let mut chunks = Vec::with_capacity(by_end.len());
        for (&(end, group), parts) in &by_end {
            let mut chunk = Vec::new();
            for (key, part) in parts {
                push_part(&mut chunk, key, &part.agg, &part.payloads);
            }
            let list = self.end_key(group, end);
            timers::set(&list, end);
            chunks.push((list, chunk));
        }
        state::append_many(&chunks);
        let updated = match self.emit {
            Emit::OnUpdate => self.update_aggregates(&by_end, size)?,
            Emit::OnClose => Vec::new(),
        };
        Ok(Added { late, updated })
    }

    /// Update mode: each touched window's aggregate so far, stored back.
    fn update_aggregates(
        &self,
        by_end: &BTreeMap<(i64, u16), BTreeMap<&[u8], Part<'_>>>,
        size: i64,
    ) -> Result<Vec<Window>, Error> {
        let touched: Vec<(i64, &[u8], &Part<'_>)> = by_end
            .iter()
            .flat_map(|(&(end, _), parts)| parts.iter().map(move |(k, p)| (end, *k, p)))
            .collect();
        let keys: Vec<Vec<u8>> = touched
            .iter()
            .map(|&(end, key, _)| self.window_key(key, end - size))
            .collect();
        let stored = state::get_many(&keys);
        let mut writes = Vec::with_capacity(keys.len());
        let mut updated = Vec::with_capacity(keys.len());
        for (i, &(end, key, part)) in touched.iter().enumerate() {
            let mut agg = part.agg;
            if let Some(v) = stored.get(i) {
                agg.merge(&decode_agg(v)?);
            }
            writes.push((keys[i].as_slice(), encode_agg(&agg)));
            updated.push(Window {
                key: key.to_vec(),
                start_ms: end - size,
                end_ms: end,
                agg,
                rows: Vec::new(),
            });
        }
        state::put_many(&writes, None);
        Ok(updated)
    }

    /// The windows ending at `timer`'s time, if it is one of this
    /// aggregation's end timers, in key order; their state is removed.
    pub(super) fn close_end(&self, timer: &Timer, size: i64) -> Result<Vec<Window>, Error> {
        let end = timer.at_ms;
        // The timer names the list: one group's (or, written before key
        // groups, every key's) windows ending at `end`.
        if state::ungrouped(&timer.key) != self.end_name(end) {
            return Ok(Vec::new());
        }
        let list = timer.key.clone();
        let mut merged: BTreeMap<Vec<u8>, (Aggregate, Vec<Vec<u8>>)> = BTreeMap::new();
        for chunk in state::read_list(&list) {
            read_parts(&chunk, |key, agg, rows| {
                let (total, kept) = merged.entry(key.to_vec()).or_default();
                total.merge(&agg);
                kept.extend(rows.into_iter().map(<[u8]>::to_vec));
            })?;
        }
        state::clear_list(&list);
        if self.emit == Emit::OnUpdate {
            let keys: Vec<Vec<u8>> = merged
                .keys()
                .map(|k| self.window_key(k, end - size))
                .collect();
            state::delete_many(&keys);
        }
        Ok(merged
            .into_iter()
            .map(|(key, (agg, rows))| Window {
                key,
                start_ms: end - size,
                end_ms: end,
                agg,
                rows,
            })
            .collect())
    }
}

/// The ends of the `[end - size, end)` windows a time falls in, latest
/// first: the multiples of `slide` in `(ts, ts + size]`.
fn ends(ts: i64, size: i64, slide: i64) -> impl Iterator<Item = i64> {
    let last = (ts.div_euclid(slide) + 1) * slide + size - slide;
    (0..)
        .map(move |i| last - i * slide)
        .take_while(move |&end| end > ts)
}

#[cfg(test)]
mod tests {
    use super::ends;

    #[test]
    fn a_time_falls_in_size_over_slide_windows() {
        assert_eq!(ends(0, 60, 60).collect::<Vec<_>>(), [60]);
        assert_eq!(ends(59, 60, 60).collect::<Vec<_>>(), [60]);
        assert_eq!(ends(60, 60, 60).collect::<Vec<_>>(), [120]);
        assert_eq!(ends(-1, 60, 60).collect::<Vec<_>>(), [0]);
        // 60 s windows every 20 s: [40, 100), [20, 80), [0, 60) hold 45.
        assert_eq!(ends(45, 60, 20).collect::<Vec<_>>(), [100, 80, 60]);
        assert_eq!(ends(40, 60, 20).collect::<Vec<_>>(), [100, 80, 60]);
        assert_eq!(ends(39, 60, 20).collect::<Vec<_>>(), [80, 60, 40]);
    }
}
