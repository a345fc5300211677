//! A directory of JSON-lines files, and of Parquet files (names ending in
//! `.parquet`, see [`super::parquet_input`]). Each epoch takes the next files in
//! arrival order (modification time, then name), at most
//! `max_files_per_trigger` of them, and records name, size and a digest of
//! those bytes in the offset WAL; a replay reads the same files up to the
//! same sizes and refuses one whose bytes changed. Files whose name
//! starts with `.` or `_` are ignored, so writers can create a file under a
//! hidden name and rename it into place when it is complete.

use super::records::{self, is_whole_file};
use super::split::{self, Piece};
use anyhow::{bail, Context, Result};
use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, HashSet};
use std::io::{Read, Seek, SeekFrom};
use std::path::PathBuf;
use std::time::{Duration, SystemTime};
use weir_core::json::MalformedPolicy;
use weir_core::json::{Decoded, JsonDecoder};
use weir_core::source::{Backlog, BacklogUnit, EpochInput, PlanLimit, RowOrigin, Source};

/// One file of a planned range.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlannedFile {
    /// File name inside the source directory.
    pub name: String,
    /// Bytes of the file that belong to the epoch.
    pub size: u64,
    /// xxh3-128 of those bytes, hex, taken when the epoch was planned: a
    /// replay refuses a file whose planned bytes changed since (a rewrite
    /// of the same size included). Absent in entries of older checkpoints.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
}

/// The WAL form of a file source's range.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileRange {
    pub files: Vec<PlannedFile>,
}

/// The file source.
pub struct FileSource {
    dir: PathBuf,
    decoder: JsonDecoder,
    max_files: usize,
    /// Every planned file and the size it was planned with.
    seen: HashMap<String, u64>,
    /// Planned files found changed since (warned about once each).
    changed: HashSet<String>,
    /// How long a file must be unchanged before it is planned.
    settle: Duration,
    /// What the last `plan` found waiting.
    backlog: Option<Backlog>,
    /// Threads an epoch's files are decoded on: one per core.
    threads: usize,
    /// The files this process hashed when it planned them, with what
    /// identified them then ([`FileStamp`]): reading them while the stamp
    /// holds needs no second hash.
    hashed: HashMap<String, FileStamp>,
}

/// What changes when a file is rewritten or replaced: its inode, size and
/// modification time.
#[derive(Debug, Clone, PartialEq, Eq)]
struct FileStamp {
    inode: u64,
    size: u64,
    modified: Option<SystemTime>,
}

impl FileStamp {
    fn of(meta: &std::fs::Metadata) -> Self {
        use std::os::unix::fs::MetadataExt;
        FileStamp {
            inode: meta.ino(),
            size: meta.len(),
            modified: meta.modified().ok(),
        }
    }
}

impl FileSource {
    /// A source over `dir`, parsing lines into `schema`.
    pub fn new(
        dir: PathBuf,
        schema: SchemaRef,
        max_files: usize,
        batch_rows: usize,
        policy: MalformedPolicy,
    ) -> Result<Self> {
        Self::with_settle(dir, schema, max_files, batch_rows, policy, Duration::ZERO)
    }

    /// Like [`FileSource::new`], planning only files unchanged for `settle`
    /// (for writers that append in place instead of renaming).
    pub fn with_settle(
        dir: PathBuf,
        schema: SchemaRef,
        max_files: usize,
        batch_rows: usize,
        policy: MalformedPolicy,
        settle: Duration,
    ) -> Result<Self> {
        if !dir.is_dir() {
            bail!(
                "source directory {} does not exist or is not a directory",
                dir.display()
            );
        }
        Ok(FileSource {
            dir,
            decoder: JsonDecoder::new(schema, batch_rows, policy),
            max_files,
            seen: HashMap::new(),
            changed: HashSet::new(),
            settle,
            backlog: None,
            threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
            hashed: HashMap::new(),
        })
    }
}

impl FileSource {
    /// Warns (once per file) that a planned file changed afterwards: its
    /// new bytes are never read, since an epoch's range is fixed.
    fn note_if_changed(&mut self, name: &str, planned: u64, now: u64) {
        if now == planned || self.changed.contains(name) {
            return;
        }
        self.changed.insert(name.to_string());
        let what = if now > planned {
            format!("grew from {planned} to {now} bytes after it was planned; the added bytes are ignored")
        } else {
            format!("shrank from {planned} to {now} bytes after it was planned (re-created?); its new content is ignored")
        };
        tracing::warn!(
            file = %self.dir.join(name).display(),
            "input file {what}. Write each file under a hidden name (`.name` or `_name`) and \
             rename it into place when complete, set `source.settle` for writers that append \
             in place, or give new data a new file name."
        );
    }

    /// Whether `meta`'s file has been unchanged for `settle`.
    fn settled(&self, meta: &std::fs::Metadata) -> bool {
        self.settle.is_zero()
            || meta
                .modified()
                .ok()
                .and_then(|m| SystemTime::now().duration_since(m).ok())
                .is_some_and(|age| age >= self.settle)
    }

    /// xxh3-128 of the first `size` bytes of the file `name`, hex.
    fn digest_of(&self, name: &str, size: u64) -> Result<String> {
        let planned = PlannedFile {
            name: name.to_string(),
            size,
            digest: None,
        };
        let mut reader = self.open_planned(&planned, 0, size)?;
        let mut hasher = xxhash_rust::xxh3::Xxh3::new();
        let mut buf = vec![0u8; 256 * 1024];
        loop {
            let n = reader.read(&mut buf)?;
            if n == 0 {
                break;
            }
            hasher.update(&buf[..n]);
        }
        Ok(format!("{:032x}", hasher.digest128()))
    }

    /// The file's stamp now, if it can be read.
    fn stamp(&self, name: &str) -> Option<FileStamp> {
        std::fs::metadata(self.dir.join(name))
            .ok()
            .map(|m| FileStamp::of(&m))
    }

    /// Refuses a planned file whose planned bytes are no longer those its
    /// epoch was planned with: a replay must read what the epoch read. A
    /// file this process hashed when it planned it, and whose inode, size
    /// and modification time are still those of then, is not hashed again.
    fn check_identity(&mut self, file: &PlannedFile) -> Result<()> {
        let Some(planned) = &file.digest else {
            return Ok(());
        };
        if let Some(then) = self.hashed.remove(&file.name) {
            if self.stamp(&file.name).as_ref() == Some(&then) {
                return Ok(());
            }
        }
        let now = self.digest_of(&file.name, file.size)?;
        if &now != planned {
            bail!(
                "input file {} changed after its epoch was planned: its first {} bytes hash to \
                 {now}, not {planned} as planned. A replay must read the bytes the epoch read; \
                 put the original file back (new data belongs in a new file)",
                self.dir.join(&file.name).display(),
                file.size
            );
        }
        Ok(())
    }

    /// A reader of bytes `start..end` of `file` (planned with `file.size`
    /// bytes).
    fn open_planned(&self, file: &PlannedFile, start: u64, end: u64) -> Result<PlannedReader> {
        let path = self.dir.join(&file.name);
        let origin = path.display().to_string();
        let mut f = std::fs::File::open(&path)
            .with_context(|| format!("opening planned input {origin}"))?;
        if start > 0 {
            f.seek(SeekFrom::Start(start))
                .with_context(|| format!("reading {origin}"))?;
        }
        Ok(PlannedReader {
            reader: f.take(end - start),
            end,
            planned: file.size,
            origin,
        })
    }

    /// The planned bytes of `file` at once, and its path as an origin.
    fn read_planned(&self, file: &PlannedFile) -> Result<(Vec<u8>, String)> {
        let mut reader = self.open_planned(file, 0, file.size)?;
        let mut data = Vec::with_capacity(file.size as usize);
        reader.read_to_end(&mut data)?;
        Ok((data, reader.origin))
    }

    /// The rows of one piece of a planned file, decoded as it is read;
    /// `None` if some line in it is malformed.
    fn decode_piece(&self, file: &PlannedFile, piece: &Piece) -> Result<Option<Vec<RecordBatch>>> {
        if is_whole_file(&file.name) {
            // An unreadable file is a dead letter: `None` has the file read
            // whole again, dead letters and all.
            let decoded = self.decode_whole(file)?;
            return Ok(decoded.dead_letters.is_empty().then_some(decoded.batches));
        }
        let mut reader = self.open_planned(file, piece.start, piece.end)?;
        self.decoder
            .decode_lines_fast(&mut reader, piece.end - piece.start)
    }

    /// The rows of a planned file read whole, in the source's schema.
    fn decode_whole(&self, file: &PlannedFile) -> Result<Decoded> {
        let (data, origin) = self.read_planned(file)?;
        records::decode_whole(&self.decoder, &file.name, data.into(), &origin)
    }

    /// Decodes the planned files on every core (see [`split`]): one record
    /// per non-blank line, however the neighbouring lines look. A file with
    /// a malformed line is read again whole, to find and name its lines.
    fn decode_files(&self, files: &[PlannedFile]) -> Result<Vec<Decoded>> {
        let mut pieces = Vec::new();
        for (i, file) in files.iter().enumerate() {
            if is_whole_file(&file.name) {
                // Read whole: its footer says where its rows are.
                pieces.push(Piece {
                    file: i,
                    start: 0,
                    end: file.size,
                });
                continue;
            }
            let path = self.dir.join(&file.name);
            pieces.extend(
                split::pieces_of(&path, i, file.size)
                    .with_context(|| format!("reading {}", path.display()))?,
            );
        }
        let mut decoded = split::decode_pieces(&pieces, self.threads, |p| {
            self.decode_piece(&files[p.file], p)
        })
        .into_iter()
        .zip(&pieces)
        .peekable();
        let mut out = Vec::with_capacity(files.len());
        for (i, file) in files.iter().enumerate() {
            let mut parts = Some(Vec::new());
            while let Some((part, _)) = decoded.next_if(|(_, p)| p.file == i) {
                match (part?, parts.as_mut()) {
                    (Some(batches), Some(all)) => all.push(batches),
                    _ => parts = None,
                }
            }
            out.push(match parts {
                Some(parts) => Decoded {
                    batches: split::rebatch(&self.decoder, parts)?,
                    ..Decoded::default()
                },
                None => self.decode_whole(file)?,
            });
        }
        Ok(out)
    }
}

/// Reads the planned bytes of a file; an end before them is an error (the
/// file shrank since it was planned, so the epoch could not be replayed
/// exactly). Its errors name the file.
struct PlannedReader {
    reader: std::io::Take<std::fs::File>,
    /// Where in the file the reader stops.
    end: u64,
    /// The file's planned size.
    planned: u64,
    origin: String,
}

impl Read for PlannedReader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self
            .reader
            .read(buf)
            .map_err(|e| std::io::Error::new(e.kind(), format!("reading {}: {e}", self.origin)))?;
        if n == 0 && !buf.is_empty() && self.reader.limit() > 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                format!(
                    "input {} shrank to {} bytes after {} bytes were planned; \
                     the epoch cannot be replayed exactly",
                    self.origin,
                    self.end - self.reader.limit(),
                    self.planned
                ),
            ));
        }
        Ok(n)
    }
}

fn arrival_key(meta: &std::fs::Metadata) -> SystemTime {
    meta.modified().unwrap_or(SystemTime::UNIX_EPOCH)
}

impl Source for FileSource {
    type Range = FileRange;

    fn schema(&self) -> SchemaRef {
        self.decoder.schema().clone()
    }

    fn identity(&self) -> String {
        format!("files:{}", self.dir.display())
    }

    fn restore(&mut self, range: &FileRange) -> Result<()> {
        for f in &range.files {
            self.seen.insert(f.name.clone(), f.size);
        }
        Ok(())
    }

    fn planned_so_far(&self) -> Result<FileRange> {
        let mut files: Vec<PlannedFile> = self
            .seen
            .iter()
            .map(|(name, &size)| PlannedFile {
                name: name.clone(),
                size,
                digest: None,
            })
            .collect();
        files.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(FileRange { files })
    }

    fn plan(&mut self, limit: PlanLimit) -> Result<Option<FileRange>> {
        let mut fresh = Vec::new();
        let mut unsettled = 0u64;
        for entry in std::fs::read_dir(&self.dir)
            .with_context(|| format!("listing source directory {}", self.dir.display()))?
        {
            let entry = entry?;
            let Ok(name) = entry.file_name().into_string() else {
                tracing::warn!(path = %entry.path().display(), "skipping file with a non-UTF-8 name");
                continue;
            };
            if name.starts_with('.') || name.starts_with('_') {
                continue;
            }
            let meta = entry.metadata()?;
            if !meta.is_file() {
                continue;
            }
            if let Some(&planned) = self.seen.get(&name) {
                self.note_if_changed(&name, planned, meta.len());
                continue;
            }
            if !self.settled(&meta) {
                unsettled += 1;
                continue;
            }
            fresh.push((arrival_key(&meta), name, meta.len()));
        }
        let waiting: u64 = fresh.iter().map(|f| f.2).sum();
        let mut backlog = Backlog {
            unit: BacklogUnit::Bytes,
            planned: 0,
            pending: waiting,
            pending_files: Some(fresh.len() as u64 + unsettled),
            changed_files: Some(self.changed.len() as u64),
        };
        if fresh.is_empty() {
            self.backlog = Some(backlog);
            return Ok(None);
        }
        fresh.sort();
        if limit.per_trigger() {
            fresh.truncate(self.max_files);
        }
        backlog.planned = fresh.iter().map(|f| f.2).sum();
        backlog.pending -= backlog.planned;
        backlog.pending_files = backlog.pending_files.map(|n| n - fresh.len() as u64);
        self.backlog = Some(backlog);
        let files = fresh
            .into_iter()
            .map(|(_, name, size)| {
                let before = self.stamp(&name);
                let digest = self.digest_of(&name, size)?;
                // Unchanged while it was hashed: the stamp stands for it.
                if let Some(stamp) = before.filter(|b| self.stamp(&name).as_ref() == Some(b)) {
                    self.hashed.insert(name.clone(), stamp);
                }
                Ok(PlannedFile {
                    name,
                    size,
                    digest: Some(digest),
                })
            })
            .collect::<Result<Vec<_>>>()?;
        for f in &files {
            self.seen.insert(f.name.clone(), f.size);
        }
        Ok(Some(FileRange { files }))
    }

    fn backlog(&self) -> Option<Backlog> {
        self.backlog
    }

    fn read(&mut self, range: &FileRange) -> Result<EpochInput> {
        for file in &range.files {
            self.check_identity(file)?;
        }
        let mut out = EpochInput::default();
        for part in self.decode_files(&range.files)? {
            out.batches.extend(part.batches);
            out.dead_letters.extend(part.dead_letters);
        }
        Ok(out)
    }

    fn locate(&mut self, range: &FileRange, row: u64) -> Result<Option<RowOrigin>> {
        let files = range.files.iter().map(|f| {
            let (data, origin) = self.read_planned(f)?;
            Ok((f.name.clone(), data.into(), origin))
        });
        records::locate_across(&self.decoder, row, files)
    }

    fn describe(&self, range: &FileRange) -> String {
        let bytes: u64 = range.files.iter().map(|f| f.size).sum();
        match range.files.as_slice() {
            [one] => format!("1 file ({}, {bytes} B)", one.name),
            many => format!("{} files ({bytes} B)", many.len()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_schema::{DataType, Field, Schema};
    use std::path::Path;
    use std::sync::Arc;

    /// A source over a new directory holding `a.jsonl` with two rows.
    fn two_rows_in_a_file() -> (tempfile::TempDir, PathBuf, FileSource) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.jsonl");
        std::fs::write(&path, "{\"n\":1}\n{\"n\":2}\n").unwrap();
        let schema = Arc::new(Schema::new(vec![Field::new("n", DataType::Int64, false)]));
        let source = FileSource::new(
            dir.path().to_path_buf(),
            schema,
            10,
            100,
            MalformedPolicy::Fail,
        )
        .unwrap();
        (dir, path, source)
    }

    #[test]
    fn a_file_that_shrank_after_planning_is_an_error_naming_it() {
        let (_dir, path, mut source) = two_rows_in_a_file();
        let range = source.plan(PlanLimit::Unbounded).unwrap().unwrap();
        let input = source.read(&range).unwrap();
        assert_eq!(input.batches.iter().map(|b| b.num_rows()).sum::<usize>(), 2);
        std::fs::write(&path, "{\"n\":1}\n").unwrap();
        let err = format!("{:#}", source.read(&range).unwrap_err());
        assert!(
            err.contains("a.jsonl shrank to 8 bytes after 16 bytes"),
            "{err}"
        );
    }

    #[test]
    fn a_replay_of_a_file_rewritten_with_the_same_size_is_refused_by_name() {
        let (_dir, path, mut source) = two_rows_in_a_file();
        let range = source.plan(PlanLimit::Unbounded).unwrap().unwrap();
        assert!(range.files[0].digest.is_some(), "{range:?}");
        source.read(&range).expect("the planned bytes");
        // Appended to: the planned bytes are still there.
        std::fs::write(&path, "{\"n\":1}\n{\"n\":2}\n{\"n\":3}\n").unwrap();
        let input = source.read(&range).expect("the planned prefix");
        assert_eq!(input.batches.iter().map(|b| b.num_rows()).sum::<usize>(), 2);
        // Rewritten with other bytes of the same size.
        std::fs::write(&path, "{\"n\":7}\n{\"n\":8}\n").unwrap();
        let err = format!("{:#}", source.read(&range).unwrap_err());
        assert!(
            err.contains("a.jsonl changed after its epoch was planned"),
            "{err}"
        );
    }

    #[test]
    fn a_file_rewritten_between_its_plan_and_its_read_is_refused() {
        let (_dir, path, mut source) = two_rows_in_a_file();
        let range = source.plan(PlanLimit::Unbounded).unwrap().unwrap();
        // Its stamp (inode, size, modification time) stood for its hash;
        // the rewrite changes the stamp, so the read hashes it again.
        std::thread::sleep(Duration::from_millis(10));
        std::fs::write(&path, "{\"n\":7}\n{\"n\":8}\n").unwrap();
        let err = format!("{:#}", source.read(&range).unwrap_err());
        assert!(err.contains("changed after its epoch was planned"), "{err}");
    }

    fn big_file(dir: &Path, bad_line: Option<usize>) -> (PathBuf, String) {
        let mut text = String::new();
        for i in 0..600_000 {
            if Some(i + 1) == bad_line {
                text.push_str("{\"n\":\"not a number\",\"s\":\"x\"}\n");
            } else {
                text.push_str(&format!("{{\"n\":{i},\"s\":\"{i:0>12}\"}}\n"));
            }
        }
        let path = dir.join("big.jsonl");
        std::fs::write(&path, &text).unwrap();
        (path, text)
    }

    fn source_of(dir: &Path, policy: MalformedPolicy) -> (FileSource, JsonDecoder) {
        let schema = Arc::new(Schema::new(vec![
            Field::new("n", DataType::Int64, false),
            Field::new("s", DataType::Utf8, false),
        ]));
        let source = FileSource::new(dir.to_path_buf(), schema.clone(), 10, 1000, policy).unwrap();
        (source, JsonDecoder::new(schema, 1000, policy))
    }

    #[test]
    fn a_large_file_decoded_in_pieces_gives_the_batches_of_one_decode() {
        let dir = tempfile::tempdir().unwrap();
        let (path, text) = big_file(dir.path(), None);
        assert!(split::pieces_of(&path, 0, text.len() as u64).unwrap().len() >= 2);
        let (mut source, decoder) = source_of(dir.path(), MalformedPolicy::Fail);
        let range = source.plan(PlanLimit::Unbounded).unwrap().unwrap();
        let input = source.read(&range).unwrap();
        let whole = decoder.decode_lines(text.as_bytes(), "whole").unwrap();
        assert_eq!(input.batches.len(), 600);
        assert!(
            input.batches == whole.batches,
            "the same batches, row for row"
        );
    }

    #[test]
    fn a_malformed_line_in_a_later_piece_is_named_by_its_line() {
        let dir = tempfile::tempdir().unwrap();
        let (path, _) = big_file(dir.path(), Some(500_001));
        let (mut source, _) = source_of(dir.path(), MalformedPolicy::DeadLetter);
        let range = source.plan(PlanLimit::Unbounded).unwrap().unwrap();
        let input = source.read(&range).unwrap();
        let rows: usize = input.batches.iter().map(|b| b.num_rows()).sum();
        assert_eq!(rows, 599_999);
        assert_eq!(input.dead_letters.len(), 1);
        assert_eq!(input.dead_letters[0].line, Some(500_001));
        assert_eq!(input.dead_letters[0].origin, path.display().to_string());
    }
}
