//! An input file's bytes as rows, whichever its format: JSON lines, or
//! Parquet for a name ending in `.parquet`. The files source and the S3
//! source both read their files through here, so the same bytes give the
//! same batches and the same dead letters from either.

use super::parquet_input::{self, is_parquet};
use anyhow::Result;
use bytes::Bytes;
use weir_core::json::{lines, without_bom, Decoded, JsonDecoder, MalformedPolicy};
use weir_core::source::{DeadLetter, RowOrigin};

/// The rows of the whole file `name` (its bytes `data`, shared, not
/// copied), named `origin` in errors and dead letters.
pub fn decode_whole(
    decoder: &JsonDecoder,
    name: &str,
    data: Bytes,
    origin: &str,
) -> Result<Decoded> {
    if is_parquet(name) {
        let size = data.len();
        return match parquet_input::decode(data, decoder.schema(), decoder.batch_rows(), origin) {
            Ok(batches) => Ok(Decoded {
                batches,
                ..Decoded::default()
            }),
            Err(e) if decoder.policy() == MalformedPolicy::DeadLetter => {
                Ok(unreadable_file(origin, size, &e))
            }
            Err(e) => Err(e),
        };
    }
    decoder.decode_lines(&data, origin)
}

/// A Parquet file that cannot be read (a corrupt footer, a column of the
/// wrong type), under `on_malformed = "dead-letter"`: the whole file is
/// one dead letter with its name and the reason, and the epoch goes on.
/// The same bytes give the same dead letter, so a replay repeats it.
fn unreadable_file(origin: &str, size: usize, e: &anyhow::Error) -> Decoded {
    tracing::warn!(file = origin, "input file set aside as unreadable: {e:#}");
    Decoded {
        dead_letters: vec![DeadLetter {
            origin: origin.to_string(),
            line: None,
            reason: format!("the whole file is unreadable: {e:#}"),
            raw: format!("<{size} bytes of Parquet, not read>"),
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
/// file `name` is: a line for JSON lines, a row number for Parquet.
pub fn locate_row(
    decoder: &JsonDecoder,
    name: &str,
    data: Bytes,
    origin: &str,
    row: u64,
) -> Result<Located> {
    if is_parquet(name) {
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
