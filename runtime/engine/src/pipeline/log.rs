//! The log part: the checkpoint's offset, commit and part logs as the epoch
//! loop writes them, the dead-letter output, and the planning cursor —
//! what planning one epoch leaves for planning the next (the digest and
//! watermark it recorded, a range planned but not yet in any `offsets/N`,
//! a deferral still to write). The offset and commit logs are written
//! through here, so the order the epoch protocol rests on
//! ([`super::epoch`]) is kept by the callers of a handful of methods, and
//! the cursor changes only when an entry is written or read back. (A
//! real-time epoch's part log is written part by part by the real-time
//! loop; compaction is the pipeline's, as it needs the state and source.)

use crate::config::WalConfig;
use anyhow::{Context, Result};
use std::path::PathBuf;
use weir_core::checkpoint::Checkpoint;
use weir_core::clock::now_ms;
use weir_core::faults::{self, FaultPoint};
use weir_core::fsutil;
use weir_core::source::DeadLetter;
use weir_core::wal::{CommitEntry, OffsetEntry, ENTRY_FORMAT};
use weir_core::Digest;

/// The checkpoint's logs and the planning cursor of one pipeline.
pub(crate) struct EpochLog {
    pipeline: String,
    checkpoint: Checkpoint,
    wal: WalConfig,
    dead_letter_dir: PathBuf,
    cursor: Cursor,
}

/// What the newest planned epoch leaves for planning the next one.
#[derive(Default)]
struct Cursor {
    /// Component digest of the newest planned epoch: a different active
    /// digest at planning time means the next epoch is the first of a new
    /// version and runs its `migrate` hook.
    last_digest: Option<Digest>,
    /// Watermark of the newest planned epoch: a higher one for the next
    /// epoch may fire timers even without new data.
    last_watermark: Option<i64>,
    /// A range the source planned that no `offsets/N` holds yet: a
    /// real-time part the operator failed on live ([`weir_core::parts`]),
    /// or a range whose `offsets/N` write failed. It runs next, as a
    /// micro-batch epoch of its own.
    carried: Option<serde_json::Value>,
    /// A real-time part the operator failed on live whose deferral could
    /// not be written (epoch, part): the retry writes it before replaying,
    /// instead of running the part again as an ordinary one.
    defer_pending: Option<(u64, u32)>,
}

impl EpochLog {
    /// The logs of `checkpoint`, compacted as `wal` says, with dead
    /// letters written to `dead_letter_dir`.
    pub fn new(
        pipeline: &str,
        checkpoint: Checkpoint,
        wal: WalConfig,
        dead_letter_dir: PathBuf,
    ) -> Self {
        EpochLog {
            pipeline: pipeline.to_string(),
            checkpoint,
            wal,
            dead_letter_dir,
            cursor: Cursor::default(),
        }
    }

    /// The checkpoint the logs are in.
    pub fn checkpoint(&self) -> &Checkpoint {
        &self.checkpoint
    }

    /// `offsets/<epoch>`, which must exist.
    pub fn entry(&self, epoch: u64) -> Result<OffsetEntry> {
        self.checkpoint
            .offsets
            .get(epoch)?
            .with_context(|| format!("offsets/{epoch} disappeared"))
    }

    /// An injected fault at `point` of `epoch`, if a test armed one
    /// ([`weir_core::faults`]).
    pub fn fault(&self, point: FaultPoint, epoch: u64) -> Result<()> {
        faults::hit(self.checkpoint.root(), point, epoch)
            .with_context(|| format!("pipeline `{}` epoch {epoch}", self.pipeline))
    }

    /// The digest the next epoch's state was last written by, if it is
    /// not `active`: the next epoch runs `active`'s `migrate` hook.
    pub fn migrate_from(&self, active: Digest) -> Option<Digest> {
        self.cursor.last_digest.filter(|d| *d != active)
    }

    /// The newest planned epoch's watermark.
    pub fn last_watermark(&self) -> Option<i64> {
        self.cursor.last_watermark
    }

    /// Makes `entry` durable as `offsets/N`. A micro-batch range whose
    /// write failed is carried: the source counts it as planned, so the
    /// next attempt takes it up again.
    pub fn write_offsets(
        &mut self,
        entry: OffsetEntry,
        carry_on_failure: bool,
    ) -> Result<OffsetEntry> {
        let epoch = entry.epoch;
        let written = self
            .fault(FaultPoint::Offsets, epoch)
            .and_then(|()| self.checkpoint.offsets.write(epoch, &entry))
            .with_context(|| format!("writing offsets/{epoch}"));
        if let Err(e) = written {
            if carry_on_failure {
                self.cursor.carried = Some(entry.source);
            }
            return Err(e);
        }
        self.note_planned(&entry);
        Ok(entry)
    }

    /// Rewrites `offsets/N` of an epoch nothing of which was delivered
    /// (re-planned with another version, or with rows isolated).
    pub fn amend(&mut self, entry: &OffsetEntry, what: &str) -> Result<()> {
        self.checkpoint
            .offsets
            .amend(entry.epoch, entry)
            .with_context(|| format!("{what} in offsets/{}", entry.epoch))?;
        self.note_planned(entry);
        Ok(())
    }

    /// Moves the cursor to `entry`, the newest planned epoch (as written,
    /// or as read back at a start or after a failed write that landed).
    pub fn note_planned(&mut self, entry: &OffsetEntry) {
        self.cursor.last_digest = Some(entry.operator.digest);
        self.cursor.last_watermark = entry.watermark_ms;
    }

    /// Keeps `range`, planned by the source but in no `offsets/N`, for the
    /// next epoch.
    pub fn carry(&mut self, range: serde_json::Value) {
        self.cursor.carried = Some(range);
    }

    /// The carried range, if any, to plan as the next epoch.
    pub fn take_carried(&mut self) -> Option<serde_json::Value> {
        self.cursor.carried.take()
    }

    /// After an epoch failed: forgets the carried range if `entry`, its
    /// `offsets/N` as read back, holds it (a write that reported an error
    /// landed after all; the epoch re-runs it).
    pub fn forget_carried_if_planned(&mut self, entry: &OffsetEntry) {
        let planned = self
            .cursor
            .carried
            .as_ref()
            .is_some_and(|range| !entry.real_time && &entry.source == range);
        if planned {
            self.cursor.carried = None;
        }
    }

    /// Remembers that part `part` of `epoch` must be deferred though
    /// writing so failed.
    pub fn defer_later(&mut self, epoch: u64, part: u32) {
        self.cursor.defer_pending = Some((epoch, part));
    }

    /// Writes the deferral of the part the operator failed on live in
    /// `epoch`, if writing it failed then: replayed as an ordinary part,
    /// it would fail again on every retry.
    pub fn write_pending_defer(&mut self, epoch: u64) -> Result<()> {
        let Some((pending, part)) = self.cursor.defer_pending else {
            return Ok(());
        };
        if pending == epoch {
            self.checkpoint.parts.defer_last(epoch, part)?;
        }
        self.cursor.defer_pending = None;
        Ok(())
    }

    /// Phase 8: `commits/<epoch>`, the epoch's end.
    pub fn write_commit(
        &self,
        epoch: u64,
        rows_in: u64,
        rows_out: u64,
        max_event_time_ms: Option<i64>,
    ) -> Result<()> {
        let commit = CommitEntry {
            format: ENTRY_FORMAT,
            epoch,
            committed_at_ms: now_ms(),
            rows_in,
            rows_out,
            max_event_time_ms,
        };
        self.checkpoint
            .commits
            .write(epoch, &commit)
            .or_else(|e| {
                // A replay may find its commit written by the run that crashed
                // right after committing: same epoch, other timestamp.
                match self.checkpoint.commits.get(epoch)? {
                    Some(c) if c.rows_in == rows_in && c.rows_out == rows_out => Ok(()),
                    _ => Err(e),
                }
            })
            .with_context(|| format!("writing commits/{epoch}"))
    }

    /// The epoch's dead letters, one JSON line each, in a file of its own.
    pub fn write_dead_letters(&self, epoch: u64, letters: &[DeadLetter]) -> Result<()> {
        if letters.is_empty() {
            return Ok(());
        }
        fsutil::create_dir_durable(&self.dead_letter_dir)?;
        let mut bytes = Vec::new();
        for letter in letters {
            serde_json::to_writer(&mut bytes, letter)?;
            bytes.push(b'\n');
        }
        let path = self
            .dead_letter_dir
            .join(format!("epoch-{epoch:010}.jsonl"));
        tracing::warn!(
            pipeline = %self.pipeline,
            epoch,
            count = letters.len(),
            path = %path.display(),
            "records set aside to the dead-letter output (malformed, or the operator failed on them)"
        );
        // The default place is inside the checkpoint: kept in the object
        // store with it, where the checkpoint is in one.
        let mirror = self
            .checkpoint
            .mirror()
            .filter(|_| path.starts_with(self.checkpoint.root()));
        weir_core::mirror::write_through(mirror.map(|m| m.as_ref()), &path, &bytes)
    }

    /// Whether the logs are compacted after committing `epoch`: every
    /// `wal.compact_every` epochs.
    pub fn compaction_due(&self, epoch: u64) -> bool {
        let every = self.wal.compact_every;
        every != 0 && (epoch + 1).is_multiple_of(every)
    }

    /// The first epoch a compaction at `epoch` keeps: the newest
    /// `wal.retain`, and every one a state rebuild may replay (from
    /// `rebuild_from`).
    pub fn keep_from(&self, epoch: u64, rebuild_from: u64) -> u64 {
        (epoch + 1)
            .saturating_sub(self.wal.retain)
            .min(rebuild_from)
    }
}
