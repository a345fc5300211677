//! The keyed-state part: the operator's RocksDB state as the epoch loop
//! uses it — an epoch's view of the last commit, the commit of an epoch's
//! changes (phase 7), the snapshots after it, and the undo of an epoch
//! that never committed at a start ([`super::recovery`]).

use crate::operator_state::epoch_state;
use anyhow::{Context, Result};
use weir_core::wal::OffsetEntry;
use weir_state::{Changes, EpochState, Opened, StateReader, StateStore, TimerSpace};

/// The operator's keyed state, committed with each epoch.
pub(crate) struct KeyedState {
    pipeline: String,
    store: StateStore,
    /// Whether opening the state rebuilt it from a snapshot (replay
    /// needed), until recovery has done so.
    opened: Opened,
    /// The operator's state namespace.
    namespace: String,
    /// Whether the run said that its timers cannot fire (no event time).
    warned_timers: bool,
}

impl KeyedState {
    /// `store`, opened as `opened` says, under the operator's `namespace`.
    pub fn new(pipeline: &str, store: StateStore, opened: Opened, namespace: String) -> Self {
        KeyedState {
            pipeline: pipeline.to_string(),
            store,
            opened,
            namespace,
            warned_timers: false,
        }
    }

    /// The committed state, for reads that see no epoch's changes.
    pub fn reader(&self) -> StateReader {
        self.store.reader()
    }

    /// The operator's state namespace.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// Epoch `entry`'s view of the committed state.
    pub fn view(&self, entry: &OffsetEntry) -> Result<EpochState> {
        epoch_state(self.store.reader(), &self.namespace, entry)
    }

    /// The earliest timer the committed state holds.
    pub fn earliest_timer(&self) -> Result<Option<i64>> {
        TimerSpace::of(&self.namespace).earliest(&self.store.reader())
    }

    /// The last epoch the store committed.
    pub fn committed_epoch(&self) -> Option<u64> {
        self.store.epoch()
    }

    /// Phase 7: the epoch's changes, durable.
    pub fn commit(&mut self, epoch: u64, changes: &Changes) -> Result<()> {
        self.store.commit(epoch, changes).with_context(|| {
            format!(
                "pipeline `{}` epoch {epoch}: committing state",
                self.pipeline
            )
        })
    }

    /// Whether a snapshot is taken after committing `epoch`.
    pub fn snapshot_due(&self, epoch: u64) -> bool {
        self.store.snapshot_due(epoch)
    }

    /// After `commits/<epoch>`: the snapshot, if one is due.
    pub fn after_commit(&mut self, epoch: u64) -> Result<()> {
        self.store.after_commit(epoch)
    }

    /// The first epoch a rebuild from the oldest kept snapshot replays:
    /// compaction keeps the log entries from there.
    pub fn rebuild_replays_from(&self) -> Result<u64> {
        self.store.rebuild_replays_from()
    }

    /// Keys and bytes, for the progress record.
    pub fn size(&self) -> (u64, u64) {
        self.store.size()
    }

    /// At a start: undoes the changes of an epoch after `last_committed`;
    /// returns the first epoch the operator must run again when the store
    /// was rebuilt from a snapshot (`None` if it was not).
    pub fn recover(&mut self, last_committed: Option<u64>) -> Result<Option<u64>> {
        self.store.roll_back_uncommitted(last_committed)?;
        match (self.opened, last_committed) {
            (Opened::Restored { .. }, Some(_)) => Ok(Some(self.store.replay_from()?)),
            _ => Ok(None),
        }
    }

    /// The store is at the last commit: nothing more to replay.
    pub fn recovered(&mut self) {
        self.opened = Opened::Working;
    }

    /// Says so, once per run, when the operator sets event-time timers in
    /// a pipeline without `[event_time]`: no watermark would ever fire them,
    /// so its windows would never close and its state would only grow,
    /// silently. (An error, not a failed epoch: a pipeline that ran so
    /// before must not stop at its next start.)
    pub fn warn_if_timers_cannot_fire(&mut self, epoch: u64, changes: &Changes, event_time: bool) {
        if event_time || self.warned_timers || !TimerSpace::of(&self.namespace).set_in(changes) {
            return;
        }
        self.warned_timers = true;
        tracing::error!(
            pipeline = %self.pipeline,
            epoch,
            "the operator sets event-time timers, but the pipeline has no `[event_time]`: \
             without a watermark no timer ever fires (its windows never close and its state \
             grows). Add `[event_time]` with the event-time column (docs/pipelines.md, \"Event time\"), \
             or run a version that sets no timers"
        );
    }
}
