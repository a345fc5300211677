//! JSON-lines files, one per epoch (`epoch-<N>.jsonl`), each written
//! atomically. A replayed epoch rewrites its own file with identical content,
//! so output is never duplicated; epochs without output write no file. In
//! real-time mode, one file per part (`epoch-<N>-part-<I>.jsonl`), the same
//! way. With parallel tasks, task `T > 0` writes its share of an epoch to
//! `epoch-<N>-task-<T>.jsonl` (task 0 keeps `epoch-<N>.jsonl`; a real-time
//! part's share: `epoch-<N>-part-<I>-task-<T>.jsonl`); a replay
//! divides the epoch among the same tasks (`offsets/N` records them), so
//! each file is rewritten with its own rows. The same writer serves any
//! file format ([`FileFormat`]): the Parquet sink is this sink with
//! Parquet bytes.

use anyhow::{Context, Result};
use arrow_array::RecordBatch;
use std::path::{Path, PathBuf};
use weir_core::fsutil;
use weir_core::sink::{to_json_lines, Sink};

/// How a sink that writes a file per epoch encodes an epoch's rows: the
/// files' extension, and one file's bytes (`None` when there are no rows,
/// so that such an epoch writes no file). The files sink writes
/// [`JSON_LINES`]; the Parquet sink is this sink with its own format.
#[derive(Clone, Copy)]
pub struct FileFormat {
    pub extension: &'static str,
    pub encode: fn(&[RecordBatch]) -> Result<Option<Vec<u8>>>,
}

/// One JSON object per line, the files sink's format.
pub const JSON_LINES: FileFormat = FileFormat {
    extension: "jsonl",
    encode: json_lines,
};

fn json_lines(batches: &[RecordBatch]) -> Result<Option<Vec<u8>>> {
    if batches.iter().all(|b| b.num_rows() == 0) {
        return Ok(None);
    }
    to_json_lines(batches).map(Some)
}

/// The name of the file that holds task `task`'s share of `epoch` (or of
/// its real-time part `part`) in a sink that writes a file per epoch:
/// `epoch-<N>[-part-<I>][-task-<T>].<ext>`, task 0 without a task suffix.
/// Zero-padded, so the names sort in epoch order.
pub fn output_file(dir: &Path, epoch: u64, part: Option<u32>, task: u16, ext: &str) -> PathBuf {
    let mut name = format!("epoch-{epoch:010}");
    if let Some(part) = part {
        name += &format!("-part-{part:06}");
    }
    if task > 0 {
        name += &format!("-task-{task:03}");
    }
    dir.join(format!("{name}.{ext}"))
}

/// The files holding `epoch`'s whole-epoch output with extension `ext`,
/// task by task (none if it wrote no rows; real-time parts not included).
pub fn output_files(dir: &Path, epoch: u64, ext: &str) -> Result<Vec<PathBuf>> {
    let first = output_file(dir, epoch, None, 0, ext);
    let tasks = format!("epoch-{epoch:010}-task-");
    let suffix = format!(".{ext}");
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if path == first || (name.starts_with(&tasks) && name.ends_with(&suffix)) {
            files.push(path);
        }
    }
    files.sort();
    Ok(files)
}

/// The file sink.
pub struct FileSink {
    dir: PathBuf,
    task: u16,
    format: FileFormat,
}

impl FileSink {
    /// The JSON-lines writer of task `task` into `dir` (created if missing).
    pub fn new(dir: PathBuf, task: u16) -> Result<Self> {
        Self::with_format(dir, task, JSON_LINES)
    }

    /// The writer of task `task` into `dir` (created if missing), writing
    /// files in `format`.
    pub fn with_format(dir: PathBuf, task: u16, format: FileFormat) -> Result<Self> {
        fsutil::create_dir_durable(&dir)?;
        if task == 0 {
            // Task 0 opens first and alone; the others' writers must not
            // take a temp file task 0 is writing.
            fsutil::remove_stale_temps(&dir)?;
        }
        Ok(FileSink { dir, task, format })
    }

    /// The file that holds `epoch`'s output (of its first task).
    pub fn epoch_file(dir: &Path, epoch: u64) -> PathBuf {
        Self::task_file(dir, epoch, 0)
    }

    /// The file that holds task `task`'s share of `epoch`'s output.
    pub fn task_file(dir: &Path, epoch: u64, task: u16) -> PathBuf {
        output_file(dir, epoch, None, task, JSON_LINES.extension)
    }

    /// The files that hold `epoch`'s output, task by task (none if it
    /// wrote no rows).
    pub fn epoch_files(dir: &Path, epoch: u64) -> Result<Vec<PathBuf>> {
        output_files(dir, epoch, JSON_LINES.extension)
    }

    /// The file that holds task `task`'s share of part `part` of
    /// real-time epoch `epoch`.
    pub fn part_file(dir: &Path, epoch: u64, part: u32, task: u16) -> PathBuf {
        output_file(dir, epoch, Some(part), task, JSON_LINES.extension)
    }

    /// Writes `batches` to `path` in the sink's format, atomically; no
    /// rows, no file.
    fn write_file(&self, path: &Path, batches: &[RecordBatch]) -> Result<()> {
        let Some(bytes) = (self.format.encode)(batches)? else {
            return Ok(());
        };
        fsutil::write_atomic(path, &bytes).with_context(|| format!("writing {}", path.display()))
    }
}

impl Sink for FileSink {
    fn write_epoch(&mut self, epoch: u64, batches: &[RecordBatch]) -> Result<()> {
        let path = output_file(&self.dir, epoch, None, self.task, self.format.extension);
        self.write_file(&path, batches)
    }

    fn write_part(&mut self, epoch: u64, part: u32, batches: &[RecordBatch]) -> Result<()> {
        let path = output_file(
            &self.dir,
            epoch,
            Some(part),
            self.task,
            self.format.extension,
        );
        self.write_file(&path, batches)
    }
}
