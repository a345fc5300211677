//! Sinks: where an epoch's output goes. The engine writes `commits/<N>` only
//! after `write_epoch` returned, so a sink must make a repeated write of the
//! same epoch harmless (replace, or skip if already there): that is what
//! turns replay into exactly-once output.

use anyhow::Result;
use arrow_array::RecordBatch;

/// Serialises batches as JSON lines (one object per row, nulls omitted).
pub fn to_json_lines(batches: &[RecordBatch]) -> Result<Vec<u8>> {
    let mut writer = arrow_json::LineDelimitedWriter::new(Vec::new());
    for batch in batches {
        writer.write(batch)?;
    }
    writer.finish()?;
    Ok(writer.into_inner())
}

/// A destination for operator output.
/// (Its identity in the checkpoint metadata comes from the config,
/// `SinkConfig::identity`, since the checkpoint is opened first.)
pub trait Sink: Send {
    /// Writes all output rows of `epoch`. Must be idempotent per epoch.
    fn write_epoch(&mut self, epoch: u64, batches: &[RecordBatch]) -> Result<()>;

    /// Real-time mode: writes the output of part `part` of `epoch` at once,
    /// while the epoch runs on ([`crate::parts`]). Must be idempotent per
    /// `(epoch, part)`: a replay writes an epoch's logged parts again, with
    /// the same rows. Only called when [`Sink::supports_parts`] says so.
    fn write_part(&mut self, epoch: u64, part: u32, batches: &[RecordBatch]) -> Result<()> {
        let _ = (epoch, part, batches);
        anyhow::bail!("this sink cannot write real-time parts")
    }

    /// Whether [`Sink::write_part`] works: a real-time pipeline with a sink
    /// that cannot is refused when it opens.
    fn supports_parts(&self) -> bool {
        false
    }

    /// Real-time mode: every part of `epoch` was written; called before its
    /// state commits (a sink that holds an epoch in one transaction commits
    /// it here).
    fn end_epoch(&mut self, epoch: u64) -> Result<()> {
        let _ = epoch;
        Ok(())
    }
}
