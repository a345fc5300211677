//! Reading a reference table (`[[lookup]]`) from a file — CSV with a header
//! row, JSON lines, a JSON array, or Parquet, chosen by the extension
//! (`.csv`, `.jsonl` / `.ndjson`, `.json`, `.parquet`) — or from a
//! PostgreSQL query ([`postgres`]), into the declared columns. A row that does not fit
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
    /// `.json`: a JSON array — of objects (one a row), or of values for a
    /// table of one column (a list of merchants) — or else JSON lines.
    Json,
    Parquet,
}

impl TableFormat {
    /// The format of `path`, or an error listing the known extensions.
    pub fn of(path: &Path) -> Result<Self> {
        match path.extension().and_then(|e| e.to_str()) {
            Some("csv") => Ok(TableFormat::Csv),
            Some("jsonl" | "ndjson") => Ok(TableFormat::JsonLines),
            Some("json") => Ok(TableFormat::Json),
            Some("parquet") => Ok(TableFormat::Parquet),
            _ => bail!(
                "{}: a lookup file is .csv (with a header row), .jsonl (.ndjson), .json (an array, \
                 or JSON lines) or .parquet",
                path.display()
            ),
        }
    }
}

/// The rows of table file `path` (its bytes `data`) in `schema`, as one
/// batch.
pub fn read_table(path: &Path, data: Vec<u8>, schema: &SchemaRef) -> Result<RecordBatch> {
    let origin = path.display().to_string();
    let mut format = TableFormat::of(path)?;
    let mut data = data;
    if format == TableFormat::Json {
        match json_array_as_lines(&data, schema, &origin)? {
            Some(lines) => data = lines,
            None => format = TableFormat::JsonLines,
        }
    }
    if format != TableFormat::Parquet {
        check_complete(&data, &origin)?;
    }
    let batches = match format {
        TableFormat::JsonLines | TableFormat::Json => {
            JsonDecoder::new(schema.clone(), BATCH_ROWS, MalformedPolicy::Fail)
                .with_fix(TABLE_FIX)
                .decode_lines(&data, &origin)?
                .batches
        }
        TableFormat::Parquet => parquet_input::decode(data.into(), schema, BATCH_ROWS, &origin)?,
        TableFormat::Csv => read_csv(&data, schema, &origin)?,
    };
    let table = arrow_select::concat::concat_batches(schema, &batches)?;
    if table.num_rows() == 0 {
        bail!("{origin} has no rows; an empty reference table is refused (the version before stays in use)");
    }
    for (field, column) in schema.fields().iter().zip(table.columns()) {
        if column.null_count() == table.num_rows() {
            bail!(
                "{origin}: column `{}` is null in every row: is it missing from the file? \
                 Declare only the columns the table has",
                field.name()
            );
        }
    }
    Ok(table)
}

/// A `.json` table file that is one JSON array, as JSON lines: each
/// object a row, or each value the row of a one-column table. `None` if
/// the file is not an array (then it is read as JSON lines).
fn json_array_as_lines(data: &[u8], schema: &SchemaRef, origin: &str) -> Result<Option<Vec<u8>>> {
    let text = weir_core::json::without_bom(data);
    if text.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'[') {
        return Ok(None);
    }
    let rows: Vec<serde_json::Value> = serde_json::from_slice(text)
        .with_context(|| format!("{origin} is not a valid JSON array (half written?)"))?;
    if rows.is_empty() {
        bail!("{origin} has no rows; an empty reference table is refused (the version before stays in use)");
    }
    let mut lines = Vec::with_capacity(text.len() + rows.len());
    for (i, row) in rows.into_iter().enumerate() {
        let row = match row {
            object @ serde_json::Value::Object(_) => object,
            value => match schema.fields().as_ref() {
                [only] => serde_json::json!({ only.name(): value }),
                fields => bail!(
                    "{origin}: element {i} is {value}, not an object; an array of values is a \
                     table of one column, and this one declares {}",
                    fields.len()
                ),
            },
        };
        serde_json::to_writer(&mut lines, &row)?;
        lines.push(b'\n');
    }
    Ok(Some(lines))
}

/// What to do about a bad row of a reference table: the whole version is
/// refused (there is no `on_malformed` for tables).
const TABLE_FIX: &str = "a reference table is loaded whole or not at all: fix the row; until \
     then epochs keep reading the version before";

/// Refuses a line-format table file that is empty or does not end with a
/// line break: emptied, or caught while being written. Scoring on with no
/// reference data, or half of it, would be silently wrong.
fn check_complete(data: &[u8], origin: &str) -> Result<()> {
    if data.iter().all(u8::is_ascii_whitespace) {
        bail!(
            "{origin} is empty; an empty reference table is refused (the version before stays \
             in use)"
        );
    }
    if !data.ends_with(b"\n") {
        bail!(
            "{origin} does not end with a line break: is it still being written? Write a new \
             version under another name (`.name`) and rename it into place"
        );
    }
    Ok(())
}

/// CSV with a header row whose names are the declared columns (in any
/// order; columns not declared are ignored).
fn read_csv(data: &[u8], schema: &SchemaRef, origin: &str) -> Result<Vec<RecordBatch>> {
    let data = data.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(data);
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
    fn a_json_array_is_a_table_of_objects_or_of_one_column() {
        let objects = br#"[{"card_id":"c-1","limit":500}, {"card_id":"c-2"}]"#.to_vec();
        let from_array = read_table(Path::new("cards.json"), objects, &schema()).unwrap();
        let lines = b"{\"card_id\":\"c-1\",\"limit\":500}\n{\"card_id\":\"c-2\"}\n".to_vec();
        let from_lines = read_table(Path::new("cards.json"), lines, &schema()).unwrap();
        assert_eq!(from_array, from_lines);

        let merchants: SchemaRef = Arc::new(Schema::new(vec![Field::new(
            "merchant_id",
            DataType::Utf8,
            false,
        )]));
        let list = b"\xEF\xBB\xBF[\"m-0666\", \"m-0777\"]".to_vec();
        let table = read_table(Path::new("risky.json"), list, &merchants).unwrap();
        assert_eq!(table.num_rows(), 2);
        let ids = table
            .column(0)
            .as_any()
            .downcast_ref::<arrow_array::StringArray>();
        assert_eq!(ids.unwrap().value(1), "m-0777");

        let err = |name: &str, data: &[u8], schema: &SchemaRef| {
            format!(
                "{:#}",
                read_table(Path::new(name), data.to_vec(), schema).unwrap_err()
            )
        };
        let e = err("cards.json", br#"["c-1"]"#, &schema());
        assert!(
            e.contains("element 0 is \"c-1\"") && e.contains("declares 2"),
            "{e}"
        );
        let e = err("risky.json", br#"["m-0666", "m-07"#, &merchants);
        assert!(e.contains("risky.json is not a valid JSON array"), "{e}");
        let e = err("risky.json", b"[]", &merchants);
        assert!(e.contains("no rows"), "{e}");
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
        assert!(
            !err.contains("on_malformed"),
            "no source setting applies: {err}"
        );
        assert!(read_table(Path::new("cards.xlsx"), Vec::new(), &schema()).is_err());
    }

    #[test]
    fn an_empty_or_half_written_file_is_refused_and_a_bom_is_not_a_row() {
        let read = |name: &str, data: &[u8]| read_table(Path::new(name), data.to_vec(), &schema());
        let err = format!("{:#}", read("cards.jsonl", b"").unwrap_err());
        assert!(err.contains("cards.jsonl is empty"), "{err}");
        let err = format!("{:#}", read("cards.csv", b"card_id,limit\n\n").unwrap_err());
        assert!(err.contains("no rows"), "{err}");
        let half = b"{\"card_id\":\"c-1\",\"limit\":500}\n{\"card_id\":\"c-2\"";
        let err = format!("{:#}", read("cards.jsonl", half).unwrap_err());
        assert!(err.contains("still being written"), "{err}");
        let bom = b"\xEF\xBB\xBF{\"card_id\":\"c-1\",\"limit\":1}\n{\"card_id\":\"c-2\"}\n";
        assert_eq!(read("cards.jsonl", bom).unwrap().num_rows(), 2);
        let bom = b"\xEF\xBB\xBFcard_id,limit\nc-1,1\n";
        assert_eq!(read("cards.csv", bom).unwrap().num_rows(), 1);
        let err = format!("{:#}", read("cards.csv", b"card_id\nc-1\n").unwrap_err());
        assert!(err.contains("column `limit` is null in every row"), "{err}");
    }
}
