//! JSON-lines files, one per epoch (`epoch-<N>.jsonl`), each written
//! atomically. A replayed epoch rewrites its own file with identical content,
//! so output is never duplicated; epochs without output write no file. In
//! real-time mode, one file per part (`epoch-<N>-part-<I>.jsonl`), the same
//! way. With parallel tasks, task `T > 0` writes its share of an epoch to
//! `epoch-<N>-task-<T>.jsonl` (task 0 keeps `epoch-<N>.jsonl`; a real-time
//! part's share: `epoch-<N>-part-<I>-task-<T>.jsonl`); a replay
//! divides the epoch among the same tasks (`offsets/N` records them), so
//! each file is rewritten with its own rows.

use anyhow::Result;
use arrow_array::RecordBatch;
use std::path::{Path, PathBuf};
use weir_core::fsutil;
use weir_core::sink::{to_json_lines, Sink};

/// The file sink.
pub struct FileSink {
    dir: PathBuf,
    task: u16,
}

impl FileSink {
    /// The writer of task `task` into `dir` (created if missing).
    pub fn new(dir: PathBuf, task: u16) -> Result<Self> {
        fsutil::create_dir_durable(&dir)?;
        if task == 0 {
            // Task 0 opens first and alone; the others' writers must not
            // take a temp file task 0 is writing.
            fsutil::remove_stale_temps(&dir)?;
        }
        Ok(FileSink { dir, task })
    }

    /// The file that holds `epoch`'s output (of its first task).
    pub fn epoch_file(dir: &Path, epoch: u64) -> PathBuf {
        Self::task_file(dir, epoch, 0)
    }

    /// The file that holds task `task`'s share of `epoch`'s output.
    pub fn task_file(dir: &Path, epoch: u64, task: u16) -> PathBuf {
        match task {
            0 => dir.join(format!("epoch-{epoch:010}.jsonl")),
            t => dir.join(format!("epoch-{epoch:010}-task-{t:03}.jsonl")),
        }
    }

    /// The files that hold `epoch`'s output, task by task (none if it
    /// wrote no rows).
    pub fn epoch_files(dir: &Path, epoch: u64) -> Result<Vec<PathBuf>> {
        let first = Self::epoch_file(dir, epoch);
        let tasks = format!("epoch-{epoch:010}-task-");
        let mut files = Vec::new();
        for entry in std::fs::read_dir(dir)? {
            let path = entry?.path();
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if path == first || (name.starts_with(&tasks) && name.ends_with(".jsonl")) {
                files.push(path);
            }
        }
        files.sort();
        Ok(files)
    }

    /// The file that holds task `task`'s share of part `part` of
    /// real-time epoch `epoch`.
    pub fn part_file(dir: &Path, epoch: u64, part: u32, task: u16) -> PathBuf {
        match task {
            0 => dir.join(format!("epoch-{epoch:010}-part-{part:06}.jsonl")),
            t => dir.join(format!(
                "epoch-{epoch:010}-part-{part:06}-task-{t:03}.jsonl"
            )),
        }
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
        Self::write_file(&Self::task_file(&self.dir, epoch, self.task), batches)
    }

    fn write_part(&mut self, epoch: u64, part: u32, batches: &[RecordBatch]) -> Result<()> {
        Self::write_file(&Self::part_file(&self.dir, epoch, part, self.task), batches)
    }

    fn supports_parts(&self) -> bool {
        true
    }
}
