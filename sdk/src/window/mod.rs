//! Event-time windows built on keyed state and timers: tumbling, sliding
//! (hop) and session windows per key, with count, sum, min and max of a
//! value and, if asked, the rows themselves (kept in append-only lists, so
//! buffering costs O(rows)). A window is emitted when the watermark closes
//! it (Spark's append mode) or on every update (update mode). Tumbling and
//! sliding windows are kept per window *end* (one list and one timer for
//! every key's window ending then: see `aligned.rs`), sessions per key.
//!
//! Semantics, as Spark's (≥ 3.4) with one window column:
//! - windows are `[start, end)` of event time; tumbling and sliding starts
//!   are multiples of the slide (Unix epoch aligned); a session is
//!   `[first, last + gap)` and merges with any session it overlaps;
//! - a window **closes** in the epoch whose watermark reaches its end
//!   (`end <= watermark`): its timer fires after the epoch's rows, so the
//!   epoch's own rows are in it;
//! - a row is **late** for a window that the epoch before had already
//!   closed (`end <= previous watermark`); it is left out of that window
//!   and reported in [`Added::late`] so the operator can count it, drop it
//!   (Spark) or handle it otherwise.
//!
//! ```ignore
//! let windows = Windows::tumbling(60_000)?.collect_rows(true);
//! // process: buffer every payment in its card's window
//! let added = windows.add(&rows)?;
//! // on_timers: every payment of each closed window, with the final count
//! for w in windows.close(fired)? { for row in &w.rows { /* score with w.agg.count */ } }
//! ```

mod aligned;
mod codec;
mod session;

use crate::{state, Error, Timer};
use codec::{sortable, unsortable};

/// How rows are grouped in event time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Fixed, non-overlapping windows of `size_ms`.
    Tumbling { size_ms: i64 },
    /// Windows of `size_ms` starting every `slide_ms` (a row is in
    /// `size_ms / slide_ms` of them).
    Sliding { size_ms: i64, slide_ms: i64 },
    /// A key's rows less than `gap_ms` apart, in one window.
    Session { gap_ms: i64 },
}

/// When a window's result is emitted (Spark's output modes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Emit {
    /// Once, when the watermark closes the window (append mode): final.
    OnClose,
    /// Every epoch that changes it, as [`Added::updated`] (update mode);
    /// closing then only frees the window's state.
    OnUpdate,
}

/// A window's aggregate of the values added to it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Aggregate {
    pub count: u64,
    pub sum: f64,
    pub min: f64,
    pub max: f64,
}

impl Default for Aggregate {
    fn default() -> Self {
        Aggregate {
            count: 0,
            sum: 0.0,
            min: f64::INFINITY,
            max: f64::NEG_INFINITY,
        }
    }
}

impl Aggregate {
    pub(crate) fn add(&mut self, value: f64) {
        self.count += 1;
        self.sum += value;
        self.min = self.min.min(value);
        self.max = self.max.max(value);
    }

    pub(crate) fn merge(&mut self, other: &Aggregate) {
        self.count += other.count;
        self.sum += other.sum;
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
    }

    /// The mean of the values (NaN for an empty window).
    pub fn mean(&self) -> f64 {
        self.sum / self.count as f64
    }
}

/// One input row for [`Windows::add`]: its key (e.g. the card), event
/// time, the value aggregated (e.g. the amount; any number if you only
/// count) and, with [`Windows::collect_rows`], the bytes kept for it.
#[derive(Debug, Clone, Copy)]
pub struct Row<'a> {
    pub key: &'a [u8],
    pub ts_ms: i64,
    pub value: f64,
    pub payload: &'a [u8],
}

/// A window of one key, as emitted.
#[derive(Debug, Clone, PartialEq)]
pub struct Window {
    pub key: Vec<u8>,
    pub start_ms: i64,
    pub end_ms: i64,
    pub agg: Aggregate,
    /// The payloads of its rows in the order added ([`Windows::collect_rows`]).
    pub rows: Vec<Vec<u8>>,
}

/// What [`Windows::add`] did with a batch.
#[derive(Debug, Clone, Default)]
pub struct Added {
    /// Rows (by index) left out of every window as late.
    pub late: Vec<usize>,
    /// With [`Emit::OnUpdate`]: each window the batch changed, with its
    /// aggregate so far (no rows), by window end, then key.
    pub updated: Vec<Window>,
}

/// A windowed aggregation over the operator's state.
#[derive(Debug, Clone)]
pub struct Windows {
    kind: Kind,
    emit: Emit,
    collect: bool,
    /// Prefix of this aggregation's state keys and timer keys.
    prefix: Vec<u8>,
}

impl Windows {
    fn new(kind: Kind) -> Result<Self, Error> {
        let ok = match kind {
            Kind::Tumbling { size_ms } => size_ms > 0,
            Kind::Sliding { size_ms, slide_ms } => slide_ms > 0 && size_ms >= slide_ms,
            Kind::Session { gap_ms } => gap_ms > 0,
        };
        if !ok {
            return Err(Error::config(format!(
                "window {kind:?}: sizes must be positive and a slide no longer than the size"
            )));
        }
        Ok(Windows {
            kind,
            emit: Emit::OnClose,
            collect: false,
            prefix: b"\xffwin\x00".to_vec(),
        })
    }

    /// Tumbling windows of `size_ms`.
    pub fn tumbling(size_ms: i64) -> Result<Self, Error> {
        Self::new(Kind::Tumbling { size_ms })
    }

    /// Sliding windows of `size_ms` every `slide_ms`.
    pub fn sliding(size_ms: i64, slide_ms: i64) -> Result<Self, Error> {
        Self::new(Kind::Sliding { size_ms, slide_ms })
    }

    /// Session windows closed by `gap_ms` without a row.
    pub fn session(gap_ms: i64) -> Result<Self, Error> {
        Self::new(Kind::Session { gap_ms })
    }

    /// When results are emitted (default [`Emit::OnClose`]).
    pub fn emit(mut self, emit: Emit) -> Self {
        self.emit = emit;
        self
    }

    /// Keep each row's payload, handed back in [`Window::rows`] when the
    /// window closes (default: aggregates only).
    pub fn collect_rows(mut self, collect: bool) -> Self {
        self.collect = collect;
        self
    }

    /// Names the aggregation, so one operator can keep several apart (the
    /// name is part of every state and timer key; at most 255 bytes).
    pub fn named(mut self, name: &str) -> Self {
        let name = &name.as_bytes()[..name.len().min(255)];
        self.prefix = b"\xffwin".to_vec();
        self.prefix.push(name.len() as u8);
        self.prefix.extend_from_slice(name);
        self
    }

    /// The kind of window.
    pub fn kind(&self) -> Kind {
        self.kind
    }

    /// Whether `timer` is one of this aggregation's (for operators that
    /// also set timers of their own).
    pub fn owns(&self, timer: &Timer) -> bool {
        state::ungrouped(&timer.key).starts_with(&self.prefix)
    }

    /// Where a key's own windows live: sessions, and update mode's running
    /// aggregates. In the key group of `key` (the routing key), so that
    /// the task that gets `key`'s rows owns them.
    fn key_prefix(&self, key: &[u8]) -> Vec<u8> {
        let mut k = Vec::with_capacity(self.prefix.len() + 5 + key.len() + 8);
        k.extend_from_slice(&self.prefix);
        k.push(b'k');
        k.extend_from_slice(&(key.len() as u32).to_be_bytes());
        k.extend_from_slice(key);
        state::grouped_key(key, &k)
    }

    /// The state key (and session timer key) of `key`'s window at `start`.
    fn window_key(&self, key: &[u8], start: i64) -> Vec<u8> {
        let mut k = self.key_prefix(key);
        k.extend_from_slice(&sortable(start));
        k
    }

    /// The key and start a [`Self::window_key`] names.
    fn parse(&self, window_key: &[u8]) -> Option<(Vec<u8>, i64)> {
        let rest = state::ungrouped(window_key).strip_prefix(self.prefix.as_slice())?;
        let rest = rest.strip_prefix(b"k")?;
        let len = u32::from_be_bytes(rest.get(..4)?.try_into().ok()?) as usize;
        let key = rest.get(4..4 + len)?.to_vec();
        let start = unsortable(rest.get(4 + len..4 + len + 8)?)?;
        Some((key, start))
    }

    /// The list (and timer key) of the windows ending at `end` whose keys
    /// are in key group `group` (tumbling and sliding): one per group, so
    /// that each task of a parallel pipeline keeps its own.
    fn end_key(&self, group: u16, end: i64) -> Vec<u8> {
        state::in_group(group, &self.end_name(end))
    }

    /// [`Self::end_key`] without its group.
    fn end_name(&self, end: i64) -> Vec<u8> {
        let mut k = Vec::with_capacity(self.prefix.len() + 9);
        k.extend_from_slice(&self.prefix);
        k.push(b'e');
        k.extend_from_slice(&sortable(end));
        k
    }

    /// Adds a batch's rows to their windows. Rows for a window the epoch
    /// before already closed are left out as late. Tumbling and sliding
    /// windows cost one `append-many` and a timer per distinct window end
    /// (plus, in update mode, one `get-many` and `put-many` of the touched
    /// windows); sessions read and write each key's open sessions.
    pub fn add(&self, rows: &[Row<'_>]) -> Result<Added, Error> {
        let closed_through = state::previous_watermark();
        match self.kind {
            Kind::Tumbling { size_ms } => self.add_aligned(rows, size_ms, size_ms, closed_through),
            Kind::Sliding { size_ms, slide_ms } => {
                self.add_aligned(rows, size_ms, slide_ms, closed_through)
            }
            Kind::Session { gap_ms } => self.add_sessions(rows, gap_ms, closed_through),
        }
    }

    /// The windows `fired` closes, with their final aggregates and (with
    /// [`Self::collect_rows`]) rows; timers of other owners are skipped.
    /// In the order fired — by end time — and by key within an end. Their
    /// state is removed.
    pub fn close(&self, fired: &[Timer]) -> Result<Vec<Window>, Error> {
        let mut closed = Vec::new();
        for timer in fired.iter().filter(|t| self.owns(t)) {
            match self.kind {
                Kind::Tumbling { size_ms } | Kind::Sliding { size_ms, .. } => {
                    closed.extend(self.close_end(timer, size_ms)?)
                }
                Kind::Session { .. } => closed.extend(self.close_session(timer)?),
            }
        }
        // Timers fire by time, then by key group: put each end's windows
        // in key order again.
        closed.sort_by(|a, b| (a.end_ms, &a.key).cmp(&(b.end_ms, &b.key)));
        Ok(closed)
    }
}
