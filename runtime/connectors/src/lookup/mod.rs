//! Reading a reference table (`[[lookup]]`) from a file — CSV with a header
//! row, JSON lines, or Parquet, chosen by the extension (`.csv`, `.jsonl` /
//! `.json`, `.parquet`) — or from a PostgreSQL query ([`postgres`]), into
//! the declared columns. A row that does not fit
//! is an error naming the file and the row; the engine decides what an
//! error means (a failed start, or a refresh that keeps the old version).

pub mod postgres;

use crate::files::parquet_input;
use anyhow::{bail, Context, Result};
use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;
use std::path::Path;
use weir_core::json::{JsonDecoder, MalformedPolicy};

/// Rows per batch while reading; the table is one batch in the end.
const BATCH_ROWS: usize = 65_536;

/// The file's formats, by extension.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TableFormat {
    Csv,
    JsonLines,
    Parquet,
}

impl TableFormat {
    /// The format of `path`, or an error listing the known extensions.
    pub fn of(path: &Path) -> Result<Self> {
        match path.extension().and_then(|e| e.to_str()) {
            Some("csv") => Ok(TableFormat::Csv),
            Some("jsonl" | "json" | "ndjson") => Ok(TableFormat::JsonLines),
            Some("parquet") => Ok(TableFormat::Parquet),
            _ => bail!(
                "{}: a lookup file is .csv (with a header row), .jsonl or .parquet",
                path.display()
            ),
        }
    }
}

/// The rows of table file `path` (its bytes `data`) in `schema`, as one
/// batch.
pub fn read_table(path: &Path, data: Vec<u8>, schema: &SchemaRef) -> Result<RecordBatch> {
    let origin = path.display().to_string();
    let batches = match TableFormat::of(path)? {
        TableFormat::JsonLines => {
            JsonDecoder::new(schema.clone(), BATCH_ROWS, MalformedPolicy::Fail)
                .decode_lines(&data, &origin)?
                .batches
        }
        TableFormat::Parquet => parquet_input::decode(data.into(), schema, BATCH_ROWS, &origin)?,
        TableFormat::Csv => read_csv(&data, schema, &origin)?,
    };
    Ok(arrow_select::concat::concat_batches(schema, &batches)?)
}

/// CSV with a header row whose names are the declared columns (in any
/// order; columns not declared are ignored).
fn read_csv(data: &[u8], schema: &SchemaRef, origin: &str) -> Result<Vec<RecordBatch>> {
    let header_end = memchr::memchr(b'\n', data).unwrap_or(data.len());
    let header = std::str::from_utf8(&data[..header_end])
        .with_context(|| format!("{origin}: the header row is not UTF-8"))?;
    let names: Vec<&str> = header
        .trim_end_matches('\r')
        .split(',')
        .map(str::trim)
        .collect();
    let mut fields = Vec::with_capacity(names.len());
    for name in &names {
        let field = match schema.field_with_name(name) {
            Ok(f) => f.clone(),
            // Read undeclared columns as text; they are dropped below.
            Err(_) => arrow_schema::Field::new(*name, arrow_schema::DataType::Utf8, true),
        };
        fields.push(field);
    }
    for f in schema.fields() {
        if !names.contains(&f.name().as_str()) && !f.is_nullable() {
            bail!("{origin}: the header has no column `{}`", f.name());
        }
    }
    let file_schema = std::sync::Arc::new(arrow_schema::Schema::new(fields));
    let reader = arrow_csv::ReaderBuilder::new(file_schema)
        .with_header(true)
        .with_batch_size(BATCH_ROWS)
        .build(data)
        .with_context(|| format!("reading {origin}"))?;
    let mut out = Vec::new();
    for batch in reader {
        let batch = batch.with_context(|| format!("reading {origin}"))?;
        let columns = schema
            .fields()
            .iter()
            .map(|f| match batch.column_by_name(f.name()) {
                Some(c) => c.clone(),
                None => arrow_array::new_null_array(f.data_type(), batch.num_rows()),
            })
            .collect();
        out.push(
            RecordBatch::try_new(schema.clone(), columns)
                .with_context(|| format!("{origin}: the rows do not fit the declared columns"))?,
        );
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_schema::{DataType, Field, Schema};
    use std::sync::Arc;

    fn schema() -> SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new("card_id", DataType::Utf8, false),
            Field::new("limit", DataType::Int64, true),
        ]))
    }

    #[test]
    fn csv_json_lines_and_parquet_give_the_same_rows() {
        let csv = b"limit,card_id,note\n500,c-1,x\n,c-2,y\n".to_vec();
        let from_csv = read_table(Path::new("cards.csv"), csv, &schema()).unwrap();
        let json = b"{\"card_id\":\"c-1\",\"limit\":500}\n{\"card_id\":\"c-2\"}\n".to_vec();
        let from_json = read_table(Path::new("cards.jsonl"), json, &schema()).unwrap();
        assert_eq!(from_csv, from_json);
        let parquet = crate::parquet::sink::encode(std::slice::from_ref(&from_json))
            .unwrap()
            .unwrap();
        let from_parquet = read_table(Path::new("cards.parquet"), parquet, &schema()).unwrap();
        assert_eq!(from_parquet, from_json);
    }

    #[test]
    fn a_bad_row_or_file_is_named() {
        let err = format!(
            "{:#}",
            read_table(
                Path::new("cards.csv"),
                b"card_id,limit\nc-1,lots\n".to_vec(),
                &schema()
            )
            .unwrap_err()
        );
        assert!(err.contains("cards.csv"), "{err}");
        let err = format!(
            "{:#}",
            read_table(
                Path::new("cards.jsonl"),
                b"{\"card_id\":1}\n".to_vec(),
                &schema()
            )
            .unwrap_err()
        );
        assert!(
            err.contains("cards.jsonl") && err.contains("line 1"),
            "{err}"
        );
        assert!(read_table(Path::new("cards.xlsx"), Vec::new(), &schema()).is_err());
    }
}
