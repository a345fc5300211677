//! Where a failed epoch is retried from: **only from a state it can be
//! retried from**. A continuous pipeline retries a failed epoch with
//! backoff ([`super::Pipeline::run`]); what the retry does depends on the
//! last phase that became durable, never on where the error came from:
//!
//! | the failure came | durable | the retry |
//! |---|---|---|
//! | before `offsets/N` (phase 1–2) | nothing of N | plans N again; a range the source already planned is taken up as it was |
//! | after `offsets/N`, before the sink has all of N (3–6) | `offsets/N` | re-runs N from `offsets/N`: the state is the last commit's, so the sink gets the same rows again |
//! | after the sink has N, before the state commit (7) | `offsets/N`, sink | commits the state changes the run made (the operator does not run again) |
//! | after the state commit, before `commits/N` (8) | + state | writes `commits/N` |
//! | after `commits/N` (9: the source's mirror, snapshot, compaction) | + `commits/N` | finishes phase 9 |
//!
//! So the sink of an epoch is never written again once its state is
//! committed: a re-run over state that holds the epoch's own writes would
//! emit other rows. A fault that persists keeps the loop on the same step,
//! logged with the phase and the cause at every attempt; the admin API
//! stays up, nothing later runs, and the step goes through once the cause
//! is gone. A restart in any of these states is a crash recovery
//! ([`super::recovery`]): the state store undoes an uncommitted epoch and
//! the epoch runs again from `offsets/N`, which gives the same rows.
//!
//! `tests/all/faults.rs` injects an I/O error at every boundary
//! ([`weir_core::faults`]) in both modes and checks the output against an
//! uninterrupted run.

use super::epoch::Done;
use super::Pipeline;
use anyhow::{Context, Result};
use std::time::Instant;
use weir_core::faults::FaultPoint;
use weir_core::progress::{EpochProgress, ShadowReport};
use weir_core::wal::OffsetEntry;
use weir_state::Changes;

/// An epoch whose output the sink has in full: what its remaining phases
/// (7–9) need, as a value that a retry takes up where the failure left it.
pub(super) struct Closing {
    pub entry: OffsetEntry,
    pub done: Done,
    pub migrated: bool,
    pub shadow: Option<ShadowReport>,
    pub max_event_time_ms: Option<i64>,
    /// What the source is told once `commits/N` is durable: the epoch's
    /// range, or a real-time epoch's parts.
    pub ranges: Vec<serde_json::Value>,
    pub reached: Reached,
}

/// The last phase of a [`Closing`] epoch that is durable.
pub(super) enum Reached {
    /// The sink has the epoch; the state changes are still to commit.
    SinkWritten(Changes),
    /// The state has the epoch; `commits/N` is still to be written.
    StateCommitted,
    /// `commits/N` is durable; phase 9 remains.
    Committed,
}

/// A [`Closing`] epoch that failed on the way, and why.
pub(super) struct Unfinished {
    pub closing: Box<Closing>,
    pub cause: anyhow::Error,
}

/// What the run loop does next after an epoch failed.
pub(super) enum Resume {
    /// `offsets/N` is durable and nothing is committed: run N again.
    Rerun(u64),
    /// The sink has N: carry on from the phase reached.
    Finish(Box<Closing>),
    /// Nothing of N is durable: plan it again.
    Plan,
}

impl Pipeline {
    /// Phases 7–9 of an epoch the sink has, from the phase it reached:
    /// the state commit, `commits/N`, then the source's mirror, snapshot
    /// and compaction. Returns its progress record.
    pub(super) fn close(&mut self, mut closing: Closing) -> Result<EpochProgress, Unfinished> {
        let started = Instant::now();
        let closed = self.close_phases(&mut closing);
        closing.done.phases.commit += started.elapsed();
        if let Err(cause) = closed {
            return Err(Unfinished {
                closing: Box::new(closing),
                cause,
            });
        }
        let Closing {
            entry,
            done,
            migrated,
            shadow,
            ..
        } = closing;
        if let Some(report) = &shadow {
            self.versions.shadow_done(report.clone());
        }
        Ok(self.report(done, &entry, migrated, shadow))
    }

    fn close_phases(&mut self, c: &mut Closing) -> Result<()> {
        let epoch = c.entry.epoch;
        // A commit that reached the store though it reported an error.
        if self.state.committed_epoch() == Some(epoch) {
            if let Reached::SinkWritten(_) = c.reached {
                c.reached = Reached::StateCommitted;
            }
        }
        if let Reached::SinkWritten(changes) = &c.reached {
            self.log.fault(FaultPoint::SinkWritten, epoch)?;
            self.state.commit(epoch, changes)?;
            c.reached = Reached::StateCommitted;
        }
        if let Reached::StateCommitted = c.reached {
            self.log.fault(FaultPoint::StateCommitted, epoch)?;
            self.log
                .write_commit(epoch, c.done.rows_in, c.done.rows_out, c.max_event_time_ms)?;
            c.reached = Reached::Committed;
        }
        self.log.fault(FaultPoint::CommitsWritten, epoch)?;
        for range in &c.ranges {
            self.source
                .committed(range)
                .context("telling the source the epoch committed")?;
        }
        self.after_commit(epoch, c.max_event_time_ms)
    }

    /// Where the loop goes on after epoch `epoch` failed before its sink
    /// had all of it: re-run it if `offsets/N` is durable (a write that
    /// failed may have landed), plan it again otherwise.
    pub(super) fn resume_before_sink(&mut self, epoch: u64) -> Result<Resume> {
        let Some(entry) = self.log.checkpoint().offsets.get(epoch)? else {
            return Ok(Resume::Plan);
        };
        // `offsets/N` holds the range a failed write may have left carried.
        self.log.forget_carried_if_planned(&entry);
        // What the entry's write set when it succeeded (a write that
        // reported an error may have landed), as a restart reads it.
        self.log.note_planned(&entry);
        Ok(Resume::Rerun(epoch))
    }
}
