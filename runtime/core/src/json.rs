//! JSON records to Arrow, shared by every source that carries JSON (lines of
//! a file, values of Kafka records). The fast path decodes all records in one
//! arrow-json pass; only when that fails are records checked one by one, so
//! the malformed ones can be reported (policy `fail`) or set aside (policy
//! `dead-letter`) with their origin, while the good ones go on.

use crate::source::DeadLetter;
use anyhow::{bail, Context, Result};
use arrow_array::ArrayRef;
use arrow_array::RecordBatch;
use arrow_json::reader::{ArrayDecoder, DecoderContext, DecoderFactory, Tape, TapeElement};
use arrow_json::ReaderBuilder;
use arrow_schema::{ArrowError, DataType, FieldRef, SchemaRef};
use serde::{Deserialize, Serialize};
use std::io::Read;
use std::sync::Arc;

/// Bytes [`JsonDecoder::decode_lines_fast`] reads at a time: large enough
/// that reads are cheap, small next to an epoch's input, which is never
/// held whole on the fast path.
const READ_CHUNK: usize = 256 << 10;

/// What to do with a line that does not parse or does not fit the schema.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MalformedPolicy {
    /// Stop the epoch with an error naming file and line.
    #[default]
    Fail,
    /// Write the line, with file, line number and reason, to the dead-letter directory.
    DeadLetter,
}

/// Decodes JSON records into a fixed schema.
#[derive(Debug, Clone)]
pub struct JsonDecoder {
    schema: SchemaRef,
    batch_rows: usize,
    policy: MalformedPolicy,
    /// What the error of a malformed record under `fail` tells the user to
    /// do, in parentheses after the reason.
    fix: &'static str,
}

/// [`JsonDecoder`]'s advice for a malformed source record.
const SOURCE_FIX: &str = "set `source.on_malformed = \"dead-letter\"` to set such records aside";

/// A UTF-8 byte order mark, which some editors put at the start of a file:
/// not part of the first record.
const BOM: &[u8] = b"\xEF\xBB\xBF";

/// The result of decoding a run of records.
#[derive(Debug, Default)]
pub struct Decoded {
    /// Rows of the good records, in order, at most `batch_rows` per batch.
    pub batches: Vec<RecordBatch>,
    /// Indices (into `split`'s records) of the records set aside, ascending.
    pub rejected: Vec<usize>,
    /// Why, and where from, for each rejected record.
    pub dead_letters: Vec<DeadLetter>,
}

impl JsonDecoder {
    /// A decoder into `schema`.
    pub fn new(schema: SchemaRef, batch_rows: usize, policy: MalformedPolicy) -> Self {
        JsonDecoder {
            schema,
            batch_rows,
            policy,
            fix: SOURCE_FIX,
        }
    }

    /// The same decoder, advising `fix` when a record is malformed under
    /// `fail` (a reference table has no `on_malformed`).
    pub fn with_fix(mut self, fix: &'static str) -> Self {
        self.fix = fix;
        self
    }

    /// What happens to a record (or a whole file) that cannot be read.
    pub fn policy(&self) -> MalformedPolicy {
        self.policy
    }

    /// Most rows per decoded batch.
    pub fn batch_rows(&self) -> usize {
        self.batch_rows
    }

    /// The target schema.
    pub fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    /// Decodes JSON lines (a file's bytes, golden input): one record per
    /// non-blank line, however the neighbouring lines look; a line with two
    /// objects, or none, is one malformed record. `origin` names the input
    /// in dead letters and errors.
    pub fn decode_lines(&self, data: &[u8], origin: &str) -> Result<Decoded> {
        let data = without_bom(data);
        self.decode_records(data, non_blank_lines(data), || lines(data, origin))
    }

    /// The rows of the JSON lines `reader` yields (`len` bytes expected,
    /// for sizing), decoded as they are read, so an input file is never
    /// held whole: the memory is the decoded rows plus one chunk. `None`
    /// when the bytes do not decode or hold other than one row per line:
    /// then the caller takes the record-by-record path of
    /// [`JsonDecoder::decode_lines`], which finds and names the bad lines.
    /// Read errors are returned as they are (the reader names its input).
    pub fn decode_lines_fast(
        &self,
        reader: &mut dyn Read,
        len: u64,
    ) -> Result<Option<Vec<RecordBatch>>> {
        let Ok(mut rows) = BatchStream::new(&self.schema, self.batch_rows, len) else {
            return Ok(None);
        };
        let mut lines = LineCount::default();
        let mut chunk = vec![0u8; READ_CHUNK.min(len as usize + 1)];
        loop {
            let n = match reader.read(&mut chunk) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e.into()),
            };
            lines.feed(&chunk[..n]);
            if rows.feed(&chunk[..n]).is_err() {
                return Ok(None);
            }
        }
        Ok(rows.finish().ok().filter(|batches| {
            batches.iter().map(RecordBatch::num_rows).sum::<usize>() == lines.finish()
        }))
    }

    /// Decodes `records` records joined by newlines (message values, or the
    /// lines of [`JsonDecoder::decode_lines`]): every record must be exactly
    /// one JSON object, an empty one or one holding two is malformed, so
    /// rows stay aligned with their records. The fast path decodes all in
    /// one arrow-json pass; only when that fails or miscounts is `split`
    /// called, to list the records with their origin so the malformed ones
    /// can be found.
    pub fn decode_records<'a>(
        &self,
        joined: &'a [u8],
        records: usize,
        split: impl FnOnce() -> Vec<Record<'a>>,
    ) -> Result<Decoded> {
        self.decode_checked(joined, Some(records), split)
    }

    fn decode_checked<'a>(
        &self,
        joined: &'a [u8],
        records: Option<usize>,
        split: impl FnOnce() -> Vec<Record<'a>>,
    ) -> Result<Decoded> {
        if let Ok(batches) = decode_all(&self.schema, joined, self.batch_rows) {
            let rows: usize = batches.iter().map(RecordBatch::num_rows).sum();
            if records.is_none_or(|n| n == rows) {
                return Ok(Decoded {
                    batches,
                    ..Decoded::default()
                });
            }
        }
        let mut good = Vec::with_capacity(joined.len());
        let mut out = Decoded::default();
        for (i, record) in split().into_iter().enumerate() {
            let one = decode_all(&self.schema, record.bytes, 1).and_then(|b| {
                let rows: usize = b.iter().map(RecordBatch::num_rows).sum();
                if records.is_some() && rows != 1 {
                    bail!("a record must hold exactly one JSON object, this one holds {rows}");
                }
                Ok(b)
            });
            match one {
                Ok(_) => {
                    good.extend_from_slice(record.bytes);
                    good.push(b'\n');
                }
                Err(e) => {
                    let reason = format!("{e:#}");
                    let at = match record.line {
                        Some(l) => format!("{} line {l}", record.origin),
                        None => record.origin.clone(),
                    };
                    if self.policy == MalformedPolicy::Fail {
                        bail!("malformed record in {at}: {reason} ({})", self.fix);
                    }
                    out.rejected.push(i);
                    out.dead_letters.push(DeadLetter {
                        origin: record.origin,
                        line: record.line,
                        reason,
                        raw: String::from_utf8_lossy(record.bytes).into_owned(),
                        operator: None,
                        row: None,
                    });
                }
            }
        }
        out.batches = decode_all(&self.schema, &good, self.batch_rows)
            .context("decoding the records that passed validation")?;
        Ok(out)
    }
}

/// One record of a decode, for the slow path.
#[derive(Debug, Clone)]
pub struct Record<'a> {
    /// The record's JSON text.
    pub bytes: &'a [u8],
    /// Where it came from (file path, topic-partition@offset).
    pub origin: String,
    /// 1-based line, for line-oriented origins.
    pub line: Option<u64>,
}

/// `data` without the UTF-8 byte order mark some editors put at its start
/// (one, once: [`JsonDecoder::decode_lines`] reads a text this way).
pub fn without_bom(data: &[u8]) -> &[u8] {
    data.strip_prefix(BOM).unwrap_or(data)
}

/// The records of a JSON-lines text, numbered from 1; blank lines are
/// skipped but counted.
pub fn lines<'a>(data: &'a [u8], origin: &str) -> Vec<Record<'a>> {
    data.split(|&b| b == b'\n')
        .enumerate()
        .filter(|(_, l)| !l.iter().all(u8::is_ascii_whitespace))
        .map(|(i, bytes)| Record {
            bytes,
            origin: origin.to_string(),
            line: Some(i as u64 + 1),
        })
        .collect()
}

/// How many records [`lines`] finds in `data` (its non-blank lines).
pub fn non_blank_lines(data: &[u8]) -> usize {
    let mut count = LineCount::default();
    count.feed(data);
    count.finish()
}

/// Counts non-blank lines in text that arrives in pieces (a line may span
/// two of them).
#[derive(Debug, Default)]
struct LineCount {
    /// Complete non-blank lines so far.
    lines: usize,
    /// The line still open at the end of the last piece has a non-blank byte.
    open: bool,
}

impl LineCount {
    fn feed(&mut self, data: &[u8]) {
        let mut start = 0;
        for end in memchr::memchr_iter(b'\n', data) {
            if self.open || !blank(&data[start..end]) {
                self.lines += 1;
            }
            self.open = false;
            start = end + 1;
        }
        self.open |= !blank(&data[start..]);
    }

    fn finish(self) -> usize {
        self.lines + usize::from(self.open)
    }
}

fn blank(text: &[u8]) -> bool {
    // A record line starts with `{` almost always: one byte decides.
    text.iter().all(u8::is_ascii_whitespace)
}

/// Newline-separated JSON fed in pieces to arrow-json, cut into batches of
/// at most `batch_rows` rows; whitespace between records is ignored.
struct BatchStream {
    decoder: arrow_json::reader::Decoder,
    batches: Vec<RecordBatch>,
}

impl BatchStream {
    /// `len`: the bytes that will be fed, for sizing.
    fn new(schema: &SchemaRef, batch_rows: usize, len: u64) -> Result<Self> {
        // The decoder allocates for a whole batch up front: size it by the
        // records `len` bytes can hold (each at least `{}`), not by the
        // limit alone.
        let batch_rows = batch_rows.min((len / 2) as usize + 1);
        let decoder = ReaderBuilder::new(schema.clone())
            .with_decoder_factory(Arc::new(ExactNumbers))
            .with_batch_size(batch_rows)
            .build_decoder()?;
        Ok(BatchStream {
            decoder,
            batches: Vec::new(),
        })
    }

    /// Decodes `data`; a record cut at its end is completed by the next piece.
    fn feed(&mut self, mut data: &[u8]) -> Result<()> {
        while !data.is_empty() {
            let consumed = self.decoder.decode(data)?;
            data = &data[consumed..];
            if consumed == 0 {
                // A full batch is buffered: take it out to go on.
                self.flush()?;
            }
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        if let Some(batch) = self.decoder.flush()? {
            if batch.num_rows() > 0 {
                self.batches.push(batch);
            }
        }
        Ok(())
    }

    fn finish(mut self) -> Result<Vec<RecordBatch>> {
        self.flush()?;
        Ok(self.batches)
    }
}

/// Decodes newline-separated JSON held whole (see [`BatchStream`]).
fn decode_all(schema: &SchemaRef, data: &[u8], batch_rows: usize) -> Result<Vec<RecordBatch>> {
    let mut stream = BatchStream::new(schema, batch_rows, data.len() as u64)?;
    stream.feed(data)?;
    stream.finish()
}

/// Makes number columns exact: arrow-json alone truncates `1.9` into an
/// int64 column, turns `-1e400` into -inf, and rounds `1.005` into a
/// `decimal(18,2)` column. Such values are malformed records here, like any
/// other value that does not fit its column. (A decimal is parsed from the
/// number's text, never through a float.)
#[derive(Debug)]
struct ExactNumbers;

impl DecoderFactory for ExactNumbers {
    fn make_default_decoder(
        &self,
        ctx: &DecoderContext,
        field: &FieldRef,
        is_nullable: bool,
    ) -> Result<Option<Box<dyn ArrayDecoder>>, ArrowError> {
        let check: Check = match field.data_type() {
            DataType::Int64 => Box::new(|t| t.parse::<i64>().is_ok()),
            DataType::Float64 => Box::new(finite_f64),
            &DataType::Decimal128(_, scale) => {
                Box::new(move |t| fraction_digits(t) <= i64::from(scale))
            }
            _ => return Ok(None),
        };
        let inner = ctx.make_builtin_decoder(field, is_nullable)?;
        Ok(Some(Box::new(Checked {
            inner,
            check,
            column: field.name().clone(),
            data_type: field.data_type().clone(),
        })))
    }
}

/// Whether `text` is a finite float64. Plain decimal digits (no exponent,
/// no `inf` or `NaN`) shorter than 300 characters cannot overflow: nearly
/// every value is judged without being parsed twice.
fn finite_f64(text: &str) -> bool {
    let plain = text.len() < 300
        && text
            .bytes()
            .all(|b| b.is_ascii_digit() || b == b'-' || b == b'.');
    plain || text.parse::<f64>().is_ok_and(f64::is_finite)
}

/// Whether a value's text is exact in its column.
type Check = Box<dyn Fn(&str) -> bool + Send + Sync>;

/// The digits after the point `text` (a JSON number, or a decimal in a
/// string) needs: `1.50` needs 1, `1.5e-3` 4, `15e2` none (negative).
/// Text that is not a number gives 0 (the decimal parser refuses it).
fn fraction_digits(text: &str) -> i64 {
    let t = text.trim();
    let (mantissa, exponent) = match t.find(['e', 'E']) {
        Some(i) => (&t[..i], t[i + 1..].parse::<i64>().unwrap_or(0)),
        None => (t, 0),
    };
    let fraction = mantissa.split_once('.').map_or("", |(_, f)| f);
    let significant = fraction.trim_end_matches('0').len() as i64;
    significant.saturating_sub(exponent)
}

/// The built-in decoder of a number column, after checking each value.
struct Checked {
    inner: Box<dyn ArrayDecoder>,
    check: Check,
    column: String,
    data_type: DataType,
}

impl ArrayDecoder for Checked {
    fn decode(&mut self, tape: &Tape<'_>, pos: &[u32]) -> Result<ArrayRef, ArrowError> {
        for &p in pos {
            let text = match tape.get(p) {
                TapeElement::Number(i) | TapeElement::String(i) => tape.get_string(i),
                _ => continue, // null, or a type the built-in decoder refuses
            };
            if !(self.check)(text) {
                return Err(ArrowError::JsonError(format!(
                    "column `{}`: {text} is not exactly representable as {} (more digits \
                     than the type holds; it is never rounded)",
                    self.column,
                    crate::schema::type_name(&self.data_type)
                )));
            }
        }
        self.inner.decode(tape, pos)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_schema::{Field, Schema};

    fn decoder() -> JsonDecoder {
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Utf8, false),
            Field::new("n", DataType::Int64, true),
        ]));
        JsonDecoder::new(schema, 10, MalformedPolicy::DeadLetter)
    }

    #[test]
    fn decimals_are_read_exactly_and_a_value_finer_than_the_scale_is_malformed() {
        let schema = Arc::new(Schema::new(vec![Field::new(
            "amount",
            DataType::Decimal128(18, 2),
            false,
        )]));
        let d = JsonDecoder::new(schema, 10, MalformedPolicy::DeadLetter);
        let data = b"{\"amount\":0.1}\n{\"amount\":\"0.20\"}\n{\"amount\":1.005}\n\
                     {\"amount\":12.5e1}\n{\"amount\":1e-2}\n{\"amount\":1e-3}\n\
                     {\"amount\":12345678901234567.89}\n{\"amount\":9999999999999999.99}\n";
        let out = d.decode_lines(data, "in").unwrap();
        let values: Vec<i128> = out
            .batches
            .iter()
            .flat_map(|b| {
                b.column(0)
                    .as_any()
                    .downcast_ref::<arrow_array::Decimal128Array>()
                    .unwrap()
                    .values()
                    .to_vec()
            })
            .collect();
        assert_eq!(values, [10, 20, 12500, 1, 999999999999999999]);
        assert_eq!(
            out.rejected,
            [2, 5, 6],
            "1.005, 1e-3 and a value past 18 digits"
        );
        assert!(
            out.dead_letters[0]
                .reason
                .contains("column `amount`: 1.005"),
            "{}",
            out.dead_letters[0].reason
        );
        assert_eq!(fraction_digits("1.50"), 1);
        assert_eq!(fraction_digits("15E2"), -2);
    }

    #[test]
    fn timestamps_dates_structs_and_lists_are_read_from_their_json_forms() {
        use crate::schema::{arrow_schema, ColumnConfig};
        #[derive(serde::Deserialize)]
        struct Doc {
            schema: Vec<ColumnConfig>,
        }
        let doc: Doc = toml::from_str(
            r#"schema = [
              { name = "ts", type = "timestamp(ms, UTC)" },
              { name = "day", type = "date" },
              { name = "device", type = "struct", fields = [
                  { name = "id", type = "utf8" }, { name = "ip", type = "utf8", nullable = true } ] },
              { name = "tags", type = "list<utf8>", nullable = true },
            ]"#,
        )
        .unwrap();
        let d = JsonDecoder::new(arrow_schema(&doc.schema), 10, MalformedPolicy::DeadLetter);
        let data = br#"{"ts":"2026-12-07T10:00:00.123Z","day":"2026-12-07","device":{"id":"d1","ip":"10.0.0.1"},"tags":["a","b"]}
{"ts":1796637600123,"day":"2026-12-07","device":{"id":"d2"}}
{"ts":"yesterday","day":"2026-12-07","device":{"id":"d3"}}
"#;
        let out = d.decode_lines(data, "in").unwrap();
        assert_eq!(out.rejected, [2], "a timestamp that is not one");
        let batch = &out.batches[0];
        let ts = batch
            .column(0)
            .as_any()
            .downcast_ref::<arrow_array::TimestampMillisecondArray>()
            .unwrap();
        assert_eq!(
            ts.values().to_vec(),
            [1796637600123, 1796637600123],
            "RFC 3339 and epoch ms alike"
        );
        let day = batch
            .column(1)
            .as_any()
            .downcast_ref::<arrow_array::Date32Array>()
            .unwrap();
        assert_eq!(day.value(0), 20794);
        assert_eq!(
            batch
                .column(2)
                .data_type()
                .to_string()
                .matches("Utf8")
                .count(),
            2
        );
        assert!(batch.column(3).is_null(1) && !batch.column(3).is_null(0));
    }

    #[test]
    fn a_byte_order_mark_is_not_part_of_the_first_record() {
        let data = b"\xEF\xBB\xBF{\"id\":\"a\",\"n\":1}\n{\"id\":\"b\"}\n";
        let d = decoder().decode_lines(data, "in").unwrap();
        let rows: usize = d.batches.iter().map(RecordBatch::num_rows).sum();
        assert_eq!((rows, d.dead_letters.len()), (2, 0));
        assert_eq!(
            lines(without_bom(data), "in")[0].bytes,
            b"{\"id\":\"a\",\"n\":1}"
        );
        // Found by the `json_decoder` fuzz target: the mark is taken off
        // once, for the count as for the decode.
        for data in [
            &b"\xEF\xBB\xBF  \n{\"id\":"[..],
            b"\xEF\xBB\xBF\xEF\xBB\xBF",
        ] {
            let d = decoder().decode_lines(data, "in").unwrap();
            assert_eq!(d.dead_letters.len(), non_blank_lines(without_bom(data)));
        }
    }

    /// Found by the `json_decoder` fuzz target: arrow-json reads two
    /// objects on one line as two rows, so a line must be checked to be one
    /// record, or a line would count twice (and golden input differ from a
    /// file source).
    #[test]
    fn a_line_with_two_objects_is_one_malformed_record() {
        let data = b"{\"id\":\"a\",\"n\":1}{\"id\":\"b\",\"n\":2}\n{\"id\":\"c\"}\n\n";
        let d = decoder().decode_lines(data, "in").unwrap();
        let rows: usize = d.batches.iter().map(RecordBatch::num_rows).sum();
        assert_eq!(rows, 1);
        assert_eq!(d.dead_letters.len(), 1);
        assert_eq!(d.dead_letters[0].line, Some(1));
        assert!(d.dead_letters[0].reason.contains("exactly one JSON object"));
    }

    /// Hands out its bytes a few at a time, so records and lines are cut
    /// between reads.
    struct Trickle<'a>(&'a [u8], usize);

    impl Read for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            self.1 = self.1 % 7 + 1;
            let n = self.1.min(buf.len()).min(self.0.len());
            buf[..n].copy_from_slice(&self.0[..n]);
            self.0 = &self.0[n..];
            Ok(n)
        }
    }

    #[test]
    fn lines_read_in_pieces_decode_as_the_whole_text_does() {
        let mut text = String::new();
        for i in 0..45 {
            text.push_str(&format!("{{\"id\":\"r{i}\",\"n\":{i}}}\n"));
            if i % 9 == 0 {
                text.push_str("  \n\n");
            }
        }
        let data = text.as_bytes();
        let whole = decoder().decode_lines(data, "in").unwrap();
        let streamed = decoder()
            .decode_lines_fast(&mut Trickle(data, 0), data.len() as u64)
            .unwrap()
            .expect("the fast path decodes well-formed lines");
        assert_eq!(streamed, whole.batches);
        assert_eq!(streamed.len(), 5, "45 rows in batches of 10");
    }

    #[test]
    fn a_malformed_line_read_in_pieces_is_found_in_the_whole_text() {
        for data in [
            &b"{\"id\":\"a\",\"n\":1}\n{\"id\":\"b\",\"n\":\"x\"}\n{\"id\":\"c\"}"[..],
            &b"{\"id\":\"a\",\"n\":1}{\"id\":\"b\",\"n\":2}\n{\"id\":\"c\"}\n"[..],
            &b"{\"id\":\"a\",\"n\":1}\n{\"id\":\"b\",\"n\":"[..],
        ] {
            let fast = decoder()
                .decode_lines_fast(&mut Trickle(data, 0), data.len() as u64)
                .unwrap();
            assert!(fast.is_none(), "{}", String::from_utf8_lossy(data));
            let whole = decoder().decode_lines(data, "in").unwrap();
            assert_eq!(whole.dead_letters.len(), 1);
        }
    }

    #[test]
    fn non_blank_lines_counts_lines_cut_between_pieces() {
        let data = b" \n{\"a\":1}\n\n {}\n\t\n{}";
        for cut in 0..data.len() {
            let mut count = LineCount::default();
            count.feed(&data[..cut]);
            count.feed(&data[cut..]);
            assert_eq!(count.finish(), 3, "cut at {cut}");
        }
    }
}
