//! JSON-lines files, one per epoch (`epoch-<N>.jsonl`), each written
//! atomically. A replayed epoch rewrites its own file with identical content,
//! so output is never duplicated; epochs without output write no file. In
//! real-time mode, one file per part (`epoch-<N>-part-<I>.jsonl`), the same
//! way.

use anyhow::Result;
use arrow_array::RecordBatch;
use std::path::{Path, PathBuf};
use weir_core::fsutil;
use weir_core::sink::{to_json_lines, Sink};

/// The file sink.
pub struct FileSink {
    dir: PathBuf,
}

impl FileSink {
    /// A sink writing into `dir` (created if missing).
    pub fn new(dir: PathBuf) -> Result<Self> {
        fsutil::create_dir_durable(&dir)?;
        fsutil::remove_stale_temps(&dir)?;
        Ok(FileSink { dir })
    }

    /// The file that holds `epoch`'s output.
    pub fn epoch_file(dir: &Path, epoch: u64) -> PathBuf {
        dir.join(format!("epoch-{epoch:010}.jsonl"))
    }

    /// The file that holds part `part` of real-time epoch `epoch`.
    pub fn part_file(dir: &Path, epoch: u64, part: u32) -> PathBuf {
        dir.join(format!("epoch-{epoch:010}-part-{part:06}.jsonl"))
    }

    fn write_file(path: &Path, batches: &[RecordBatch]) -> Result<()> {
        if batches.iter().all(|b| b.num_rows() == 0) {
            return Ok(());
        }
        fsutil::write_atomic(path, &to_json_lines(batches)?)
    }
}

impl Sink for FileSink {
    fn write_epoch(&mut self, epoch: u64, batches: &[RecordBatch]) -> Result<()> {
        Self::write_file(&Self::epoch_file(&self.dir, epoch), batches)
    }

    fn write_part(&mut self, epoch: u64, part: u32, batches: &[RecordBatch]) -> Result<()> {
        Self::write_file(&Self::part_file(&self.dir, epoch, part), batches)
    }

    fn supports_parts(&self) -> bool {
        true
    }
}
