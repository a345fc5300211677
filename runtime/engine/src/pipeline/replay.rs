//! Running recorded epochs again without their sinks: what `weir explain`
//! asks of a pipeline opened on a scratch copy of a checkpoint
//! ([`crate::explain`]) — one epoch run as `offsets/N` records it, an
//! epoch's recorded input, and a recorded version asked about one batch.

use super::resilience::without_isolated;
use super::Pipeline;
use anyhow::{bail, Result};
use arrow_array::RecordBatch;
use weir_core::wal::OffsetEntry;
use weir_host::WasmHost;
use weir_state::StateReader;

/// One epoch run again as recorded.
pub struct EpochReplay {
    pub entry: OffsetEntry,
    /// The epoch's input, after event-time accounting and dedup (what the
    /// operator saw).
    pub input: Vec<RecordBatch>,
    /// Everything the operator returned and emitted, each batch marked
    /// with its output (`weir_core::outputs`).
    pub outputs: Vec<RecordBatch>,
    /// The committed state as the epoch read it (the epoch before's).
    pub state: StateReader,
    /// The operator's state namespace.
    pub namespace: String,
}

impl Pipeline {
    /// Recovers (rebuilding the state up to `epoch - 1`) and runs `epoch`,
    /// which the scratch copy holds as planned but not committed.
    pub fn replay_planned(&mut self, host: &WasmHost, epoch: u64) -> Result<EpochReplay> {
        let (_, pending) = self.recover(host)?;
        if pending != Some(epoch) {
            bail!("the copy of the checkpoint does not end at epoch {epoch} ({pending:?})");
        }
        let entry = self.log.entry(epoch)?;
        let read = self.read_input(&entry)?;
        let prepared = self.prepare(&entry, without_isolated(&entry, read.batches)?)?;
        let input = prepared.batches.clone();
        let ran = self.run_operator(host, &entry, &prepared.batches, prepared.env)?;
        Ok(EpochReplay {
            entry,
            input,
            outputs: ran.batches,
            state: self.state.reader(),
            namespace: self.state.namespace().to_string(),
        })
    }

    /// The rows epoch `epoch` read, as `offsets/<epoch>` records them, or
    /// `None` once compaction removed that entry: where `weir explain`
    /// finds the input of a row an operator held in state (a window) and
    /// emitted in a later epoch.
    pub fn recorded_input(&mut self, epoch: u64) -> Result<Option<Vec<RecordBatch>>> {
        let Some(entry) = self.log.checkpoint().offsets.get(epoch)? else {
            return Ok(None);
        };
        let read = self.read_input(&entry)?;
        Ok(Some(without_isolated(&entry, read.batches)?))
    }

    /// Runs the version `entry` records over `batch` with no state: what
    /// an explanation asks the operator (e.g. a model scoring variations
    /// of one row's features).
    pub fn score_with(
        &mut self,
        host: &WasmHost,
        entry: &OffsetEntry,
        batch: RecordBatch,
    ) -> Result<Vec<RecordBatch>> {
        let env = weir_host::EpochEnv {
            lookups: self.input.tables_for(entry, self.log.checkpoint())?,
            ..Default::default()
        };
        let single = OffsetEntry {
            tasks: None,
            migrate_from: None,
            ..entry.clone()
        };
        Ok(self.run_operator(host, &single, &[batch], env)?.batches)
    }
}
