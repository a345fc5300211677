//! An input file's bytes as rows, whichever its format: JSON lines,
//! Parquet for a name ending in `.parquet`, an Avro object container file
//! for one ending in `.avro`. The files source and the S3 source both read
//! their files through here, so the same bytes give the same batches and
//! the same dead letters from either.

use super::parquet_input::{self, is_parquet};
use crate::avro;
use anyhow::Result;
use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;
use bytes::Bytes;
use weir_core::json::{lines, without_bom, Decoded, JsonDecoder, MalformedPolicy};
use weir_core::source::{DeadLetter, RowOrigin};

/// Reads a whole file of a format that carries its own types into the
/// declared schema: its bytes, the schema, rows per batch, its name.
type WholeFileReader = fn(Bytes, &SchemaRef, usize, &str) -> Result<Vec<RecordBatch>>;

/// The rows of the whole file `name` (its bytes `data`, shared, not
/// copied), named `origin` in errors and dead letters.
pub fn decode_whole(
    decoder: &JsonDecoder,
    name: &str,
    data: Bytes,
    origin: &str,
) -> Result<Decoded> {
    let (format, read): (&str, WholeFileReader) = if is_parquet(name) {
        ("Parquet", parquet_input::decode)
    } else if avro::is_avro(name) {
        ("Avro", avro::decode_file)
    } else {
        return decoder.decode_lines(&data, origin);
    };
    let size = data.len();
    match read(data, decoder.schema(), decoder.batch_rows(), origin) {
        Ok(batches) => Ok(Decoded {
            batches,
            ..Decoded::default()
        }),
        Err(e) if decoder.policy() == MalformedPolicy::DeadLetter => {
            Ok(unreadable_file(origin, format, size, &e))
        }
        Err(e) => Err(e),
    }
}

/// Whether the file `name` is read whole, in one piece (Parquet, Avro),
/// rather than line by line.
pub fn is_whole_file(name: &str) -> bool {
    is_parquet(name) || avro::is_avro(name)
}

/// A Parquet or Avro file that cannot be read (a corrupt footer or block,
/// a column of the wrong type, a writer schema that does not resolve into
/// the declared columns), under `on_malformed = "dead-letter"`: the whole
/// file is one dead letter with its name and the reason, and the epoch
/// goes on. The same bytes give the same dead letter, so a replay repeats
/// it.
fn unreadable_file(origin: &str, format: &str, size: usize, e: &anyhow::Error) -> Decoded {
    tracing::warn!(file = origin, "input file set aside as unreadable: {e:#}");
    Decoded {
        dead_letters: vec![DeadLetter {
            origin: origin.to_string(),
            line: None,
            reason: format!("the whole file is unreadable: {e:#}"),
            raw: format!("<{size} bytes of {format}, not read>"),
            operator: None,
            row: None,
        }],
        ..Decoded::default()
    }
}

/// Where a row of an epoch's input is, looked for one file at a time.
pub enum Located {
    /// The row is in this file, here.
    At(RowOrigin),
    /// The row is past this file, which holds this many rows.
    Past(u64),
}

/// Where row `row` (0-based among the rows decoded from this file) of the
/// file `name` is: a line for JSON lines, a row number for Parquet and
/// Avro.
pub fn locate_row(
    decoder: &JsonDecoder,
    name: &str,
    data: Bytes,
    origin: &str,
    row: u64,
) -> Result<Located> {
    if is_whole_file(name) {
        let rows =
            weir_core::source::row_count(&decode_whole(decoder, name, data, origin)?.batches);
        return Ok(if row < rows {
            Located::At(RowOrigin {
                origin: format!("{origin} (row {})", row + 1),
                line: None,
            })
        } else {
            Located::Past(rows)
        });
    }
    let records = lines(without_bom(&data), origin);
    let rejected = decoder.decode_lines(&data, origin)?.rejected;
    let good = (records.len() - rejected.len()) as u64;
    if row >= good {
        return Ok(Located::Past(good));
    }
    let record = records
        .into_iter()
        .enumerate()
        .filter(|(i, _)| rejected.binary_search(i).is_err())
        .nth(row as usize)
        .map(|(_, r)| r);
    Ok(match record {
        Some(r) => Located::At(RowOrigin {
            origin: r.origin,
            line: r.line,
        }),
        None => Located::Past(good),
    })
}

/// Where row `row` of an epoch's input is, its files given in read order as
/// `(name, bytes, origin)`, read one at a time until the row is found.
pub fn locate_across(
    decoder: &JsonDecoder,
    row: u64,
    files: impl IntoIterator<Item = Result<(String, Bytes, String)>>,
) -> Result<Option<RowOrigin>> {
    let mut first = 0u64;
    for file in files {
        let (name, data, origin) = file?;
        match locate_row(decoder, &name, data, &origin, row - first)? {
            Located::At(at) => return Ok(Some(at)),
            Located::Past(rows) => first += rows,
        }
    }
    Ok(None)
}
