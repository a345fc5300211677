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
}
