//! Session windows: a key's rows less than the gap apart, in one window
//! `[first, last + gap)`. Sessions are not aligned, so each is kept under
//! its own key (key, start) with its own timer at its end; a row that
//! bridges sessions merges them (their rows move to the merged one).

use super::codec::{decode_session, encode_session};
use super::{Added, Aggregate, Emit, Row, Window, Windows};
use crate::{state, timers, Error, Timer};
use std::collections::BTreeMap;

/// A session being merged: its extent and aggregate, the stored sessions
/// it absorbed (`(start, end)`) and the payloads of its new rows.
struct Session<'a> {
    start: i64,
    end: i64,
    agg: Aggregate,
    stored: Vec<(i64, i64)>,
    /// New rows in it.
    added: usize,
    payloads: Vec<&'a [u8]>,
}

impl<'a> Session<'a> {
    fn absorb(&mut self, other: Session<'a>) {
        self.added += other.added;
        self.end = self.end.max(other.end);
        self.agg.merge(&other.agg);
        self.stored.extend(other.stored);
        self.payloads.extend(other.payloads);
    }
}

impl Windows {
    /// Session windows: each key's rows merged with its open sessions.
    pub(super) fn add_sessions(
        &self,
        rows: &[Row<'_>],
        gap: i64,
        closed_through: Option<i64>,
    ) -> Result<Added, Error> {
        let mut late = Vec::new();
        let mut by_key: BTreeMap<&[u8], Vec<usize>> = BTreeMap::new();
        for (i, row) in rows.iter().enumerate() {
            if closed_through.is_some_and(|w| row.ts_ms.saturating_add(gap) <= w) {
                late.push(i);
            } else {
                by_key.entry(row.key).or_default().push(i);
            }
        }
        let mut updated = Vec::new();
        for (key, indices) in by_key {
            updated.extend(self.merge_sessions(key, rows, &indices, gap)?);
        }
        Ok(Added { late, updated })
    }

    /// One key's sessions after adding `indices` of `rows`: the open
    /// sessions and the rows' `[ts, ts + gap)` merged where they overlap.
    fn merge_sessions(
        &self,
        key: &[u8],
        rows: &[Row<'_>],
        indices: &[usize],
        gap: i64,
    ) -> Result<Vec<Window>, Error> {
        let mut pieces: Vec<Session<'_>> = Vec::new();
        for (wkey, value) in state::scan_prefix(&self.key_prefix(key), 1024) {
            let Some((_, start)) = self.parse(&wkey) else {
                return Err(Error::failed("window state key is corrupt"));
            };
            let (agg, end) = decode_session(&value)?;
            pieces.push(Session {
                start,
                end,
                agg,
                stored: vec![(start, end)],
                added: 0,
                payloads: Vec::new(),
            });
        }
        for &i in indices {
            let row = &rows[i];
            let mut agg = Aggregate::default();
            agg.add(row.value);
            pieces.push(Session {
                start: row.ts_ms,
                end: row.ts_ms.saturating_add(gap),
                agg,
                stored: Vec::new(),
                added: 1,
                payloads: if self.collect {
                    vec![row.payload]
                } else {
                    Vec::new()
                },
            });
        }
        // Stable: stored sessions first at equal starts, rows in input order.
        pieces.sort_by_key(|p| p.start);
        let mut merged: Vec<Session<'_>> = Vec::new();
        for piece in pieces {
            match merged.last_mut() {
                Some(cur) if piece.start < cur.end => cur.absorb(piece),
                _ => merged.push(piece),
            }
        }
        let mut updated = Vec::new();
        for session in merged {
            if session.added == 0 {
                continue;
            }
            self.write_session(key, &session);
            if self.emit == Emit::OnUpdate {
                updated.push(Window {
                    key: key.to_vec(),
                    start_ms: session.start,
                    end_ms: session.end,
                    agg: session.agg,
                    rows: Vec::new(),
                });
            }
        }
        Ok(updated)
    }

    /// Writes a changed session: the sessions it absorbed are removed
    /// (their rows moved to it), its timer moved to its end.
    fn write_session(&self, key: &[u8], session: &Session<'_>) {
        let wkey = self.window_key(key, session.start);
        for &(old_start, old_end) in &session.stored {
            let old_key = self.window_key(key, old_start);
            timers::delete(&old_key, old_end);
            if old_start != session.start {
                state::delete(&old_key);
                if self.collect {
                    let moved = state::read_list(&old_key);
                    let entries: Vec<(&[u8], &[u8])> = moved
                        .iter()
                        .map(|v| (wkey.as_slice(), v.as_slice()))
                        .collect();
                    state::append_many(&entries);
                    state::clear_list(&old_key);
                }
            }
        }
        state::put(&wkey, &encode_session(&session.agg, session.end));
        timers::set(&wkey, session.end);
        if !session.payloads.is_empty() {
            let entries: Vec<(&[u8], &[u8])> = session
                .payloads
                .iter()
                .map(|p| (wkey.as_slice(), *p))
                .collect();
            state::append_many(&entries);
        }
    }

    /// The session `timer` closes, if it is one of this aggregation's and
    /// still at that end (a merge moves a session's timer); its state is
    /// removed.
    pub(super) fn close_session(&self, timer: &Timer) -> Result<Option<Window>, Error> {
        let (Some(value), Some((key, start))) = (state::get(&timer.key), self.parse(&timer.key))
        else {
            return Ok(None);
        };
        let (agg, end) = decode_session(&value)?;
        if end != timer.at_ms {
            return Ok(None);
        }
        let rows = if self.collect {
            let rows = state::read_list(&timer.key);
            state::clear_list(&timer.key);
            rows
        } else {
            Vec::new()
        };
        state::delete(&timer.key);
        Ok(Some(Window {
            key,
            start_ms: start,
            end_ms: end,
            agg,
            rows,
        }))
    }
}
