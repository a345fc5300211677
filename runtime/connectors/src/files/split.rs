//! Decoding an epoch's files on every core. Each planned file is cut at line
//! boundaries into pieces of at least [`PIECE_BYTES`] (Hadoop's
//! `TextInputFormat` rule: a piece owns the lines that start in it), the
//! pieces are decoded on up to one thread per core, and each file's rows are
//! cut back into batches of `batch_rows` — the batches a decode on one
//! thread gives. Where the cuts fall depends only on the file's planned
//! size and bytes, never on the number of cores, so a replay on another
//! machine hands the operator the same batches.
//!
//! Only the fast path runs in pieces: a file with a malformed line is
//! decoded again, whole, on the path that names its lines.

use anyhow::Result;
use arrow_array::RecordBatch;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;
use weir_core::json::JsonDecoder;

/// Smallest piece a file is cut into: large enough that a thread's start
/// and the batch re-cutting cost nothing next to decoding it.
pub const PIECE_BYTES: u64 = 8 << 20;

/// Bytes read at a time while looking for a line's end.
const PROBE: usize = 64 << 10;

/// A byte range of one file that starts and ends at a line boundary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Piece {
    /// The file's index in the epoch's plan.
    pub file: usize,
    pub start: u64,
    pub end: u64,
}

/// Cuts the first `size` bytes of `path` into pieces of at least
/// [`PIECE_BYTES`] that start where a line starts.
pub fn pieces_of(path: &Path, file: usize, size: u64) -> std::io::Result<Vec<Piece>> {
    let count = (size / PIECE_BYTES).max(1);
    let mut bounds = vec![0];
    if count > 1 {
        let mut f = std::fs::File::open(path)?;
        for i in 1..count {
            let at = line_start(&mut f, size * i / count, size)?;
            if at > *bounds.last().unwrap_or(&0) && at < size {
                bounds.push(at);
            }
        }
    }
    bounds.push(size);
    Ok(bounds
        .windows(2)
        .map(|w| Piece {
            file,
            start: w[0],
            end: w[1],
        })
        .collect())
}

/// The first position at or after `at` where a line starts (just after a
/// newline), or `size` if no line starts before it.
fn line_start(f: &mut std::fs::File, at: u64, size: u64) -> std::io::Result<u64> {
    if at == 0 {
        return Ok(0);
    }
    // A line starts at `at` if the byte before it is a newline.
    let mut pos = at - 1;
    f.seek(SeekFrom::Start(pos))?;
    let mut buf = vec![0u8; PROBE];
    while pos < size {
        let want = PROBE.min((size - pos) as usize);
        let n = f.read(&mut buf[..want])?;
        if n == 0 {
            break;
        }
        if let Some(i) = memchr::memchr(b'\n', &buf[..n]) {
            return Ok(pos + i as u64 + 1);
        }
        pos += n as u64;
    }
    Ok(size)
}

/// Decodes `pieces` on up to `threads` threads with `decode` (one call per
/// piece); the results come back in the pieces' order.
pub fn decode_pieces<T: Send>(
    pieces: &[Piece],
    threads: usize,
    decode: impl Fn(&Piece) -> T + Sync,
) -> Vec<T> {
    let threads = threads.clamp(1, pieces.len().max(1));
    if threads == 1 {
        return pieces.iter().map(&decode).collect();
    }
    let decode = &decode;
    let mut done: Vec<(usize, T)> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|w| {
                s.spawn(move || {
                    (w..pieces.len())
                        .step_by(threads)
                        .map(|i| (i, decode(&pieces[i])))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| match w.join() {
                Ok(done) => done,
                Err(panic) => std::panic::resume_unwind(panic),
            })
            .collect()
    });
    done.sort_by_key(|(i, _)| *i);
    done.into_iter().map(|(_, t)| t).collect()
}

/// A file's rows, decoded in pieces, cut into batches of `decoder`'s
/// `batch_rows` as one decode of the whole file cuts them (all full but
/// the last). Full batches pass through (a zero-copy slice; a file of one
/// piece is all such); a batch that spans two pieces is copied together.
pub fn rebatch(decoder: &JsonDecoder, parts: Vec<Vec<RecordBatch>>) -> Result<Vec<RecordBatch>> {
    let rows = decoder.batch_rows().max(1);
    let mut out = Vec::new();
    let mut pending: Vec<RecordBatch> = Vec::new();
    let mut pending_rows = 0;
    for mut batch in parts.into_iter().flatten() {
        while batch.num_rows() > 0 {
            let take = (rows - pending_rows).min(batch.num_rows());
            pending.push(batch.slice(0, take));
            pending_rows += take;
            batch = batch.slice(take, batch.num_rows() - take);
            if pending_rows == rows {
                out.push(join(decoder, std::mem::take(&mut pending))?);
                pending_rows = 0;
            }
        }
    }
    if pending_rows > 0 {
        out.push(join(decoder, pending)?);
    }
    Ok(out)
}

fn join(decoder: &JsonDecoder, mut slices: Vec<RecordBatch>) -> Result<RecordBatch> {
    if slices.len() == 1 {
        if let Some(one) = slices.pop() {
            return Ok(one);
        }
    }
    Ok(arrow_select::concat::concat_batches(
        decoder.schema(),
        &slices,
    )?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_start_where_lines_start_and_cover_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let line = format!("{}\n", "x".repeat(999_999));
        let text = line.repeat(20) + "tail-without-newline";
        std::fs::write(&path, &text).unwrap();
        let size = text.len() as u64;
        let pieces = pieces_of(&path, 3, size).unwrap();
        assert_eq!(pieces.len(), 2, "{pieces:?}");
        assert_eq!(pieces[0].start, 0);
        assert_eq!(pieces.last().unwrap().end, size);
        for w in pieces.windows(2) {
            assert_eq!(w[0].end, w[1].start);
            assert_eq!(text.as_bytes()[w[1].start as usize - 1], b'\n');
        }
        assert!(pieces.iter().all(|p| p.file == 3));
        // Small files are one piece.
        assert_eq!(pieces_of(&path, 0, 1000).unwrap().len(), 1);
    }

    #[test]
    fn a_file_of_one_long_line_is_one_piece() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let text = "y".repeat(20 << 20);
        std::fs::write(&path, &text).unwrap();
        let pieces = pieces_of(&path, 0, text.len() as u64).unwrap();
        assert_eq!(
            pieces,
            vec![Piece {
                file: 0,
                start: 0,
                end: text.len() as u64
            }]
        );
    }

    #[test]
    fn pieces_come_back_in_order_from_any_number_of_threads() {
        let pieces: Vec<Piece> = (0..7)
            .map(|i| Piece {
                file: i,
                start: 0,
                end: 1,
            })
            .collect();
        for threads in [1, 2, 3, 16] {
            let got = decode_pieces(&pieces, threads, |p| p.file * 10);
            assert_eq!(got, vec![0, 10, 20, 30, 40, 50, 60]);
        }
    }
}
