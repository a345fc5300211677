//! Reference tables (`[[lookup]]`): a card's home country, a merchant's
//! risk list. The host owns them — loaded, checked, versioned by content
//! digest and kept in the checkpoint's blobs — and operators read them by
//! key, a whole column of keys per call. An epoch reads the versions its
//! `offsets/N` records, so a replay reads what its first run read.

use crate::Digest;
use anyhow::{bail, Context, Result};
use arrow_array::{Array, ArrayRef, Int64Array, RecordBatch, StringArray, UInt32Array};
use arrow_schema::{DataType, SchemaRef};
use std::collections::HashMap;

/// The tables an epoch reads, by name: the versions its `offsets/N` records.
pub type EpochTables = std::collections::BTreeMap<String, std::sync::Arc<LookupTable>>;

/// One version of a reference table, indexed by its key column.
#[derive(Debug)]
pub struct LookupTable {
    name: String,
    key: String,
    rows: RecordBatch,
    index: HashMap<Vec<u8>, u32>,
    digest: Digest,
}

/// The bytes of a key value: UTF-8 text, or an int64's 8 big-endian bytes.
fn key_bytes(column: &dyn Array, row: usize) -> Option<Vec<u8>> {
    if column.is_null(row) {
        return None;
    }
    if let Some(text) = column.as_any().downcast_ref::<StringArray>() {
        return Some(text.value(row).as_bytes().to_vec());
    }
    column
        .as_any()
        .downcast_ref::<Int64Array>()
        .map(|ints| ints.value(row).to_be_bytes().to_vec())
}

impl LookupTable {
    /// Table `name` of `rows`, keyed by column `key` (utf8 or int64). Its
    /// version is the digest of `canonical`, the bytes the rows are kept
    /// as. A null or repeated key is an error naming its row (1-based).
    pub fn new(name: &str, key: &str, rows: RecordBatch, canonical: &[u8]) -> Result<Self> {
        let column = rows
            .column_by_name(key)
            .with_context(|| format!("lookup `{name}` has no key column `{key}`"))?
            .clone();
        if !matches!(column.data_type(), DataType::Utf8 | DataType::Int64) {
            bail!(
                "lookup `{name}`: key column `{key}` is {}; keys are utf8 or int64",
                column.data_type()
            );
        }
        let mut index = HashMap::with_capacity(rows.num_rows());
        for row in 0..rows.num_rows() {
            let Some(k) = key_bytes(column.as_ref(), row) else {
                bail!("lookup `{name}` row {}: the key `{key}` is null", row + 1);
            };
            if let Some(first) = index.insert(k, row as u32) {
                bail!(
                    "lookup `{name}` row {}: key `{key}` repeats row {}",
                    row + 1,
                    first + 1
                );
            }
        }
        Ok(LookupTable {
            name: name.to_string(),
            key: key.to_string(),
            rows,
            index,
            digest: Digest::of(canonical),
        })
    }

    /// The table's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The content digest: the version recorded in `offsets/N`.
    pub fn digest(&self) -> Digest {
        self.digest
    }

    /// The table's columns.
    pub fn schema(&self) -> SchemaRef {
        self.rows.schema()
    }

    /// Rows in the table.
    pub fn len(&self) -> usize {
        self.rows.num_rows()
    }

    /// Whether the table has no rows.
    pub fn is_empty(&self) -> bool {
        self.rows.num_rows() == 0
    }

    /// Columns `columns` of the row of each of `keys` (of the key column's
    /// type), in the keys' order: null where a key is null or not in the
    /// table.
    pub fn get(&self, keys: &dyn Array, columns: &[String]) -> Result<Vec<ArrayRef>> {
        let key_type = self
            .rows
            .schema_ref()
            .field_with_name(&self.key)?
            .data_type()
            .clone();
        if keys.data_type() != &key_type {
            bail!(
                "lookup `{}` is keyed by {} values (`{}`), not {}",
                self.name,
                key_type,
                self.key,
                keys.data_type()
            );
        }
        let rows: UInt32Array = (0..keys.len())
            .map(|i| key_bytes(keys, i).and_then(|k| self.index.get(&k).copied()))
            .collect();
        columns
            .iter()
            .map(|name| {
                let column = self
                    .rows
                    .column_by_name(name)
                    .with_context(|| format!("lookup `{}` has no column `{name}`", self.name))?;
                Ok(arrow_select::take::take(column.as_ref(), &rows, None)?)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_schema::{Field, Schema};
    use std::sync::Arc;

    fn cards(ids: &[&str], countries: &[Option<&str>]) -> Result<LookupTable> {
        let schema = Arc::new(Schema::new(vec![
            Field::new("card_id", DataType::Utf8, false),
            Field::new("home_country", DataType::Utf8, true),
        ]));
        let rows = RecordBatch::try_new(
            schema,
            vec![
                Arc::new(StringArray::from(ids.to_vec())),
                Arc::new(StringArray::from(countries.to_vec())),
            ],
        )?;
        LookupTable::new("cards", "card_id", rows, b"v1")
    }

    #[test]
    fn keys_find_their_rows_and_missing_ones_are_null() {
        let t = cards(&["c-1", "c-2"], &[Some("DE"), None]).unwrap();
        let keys = StringArray::from(vec![Some("c-2"), Some("c-9"), None, Some("c-1")]);
        let got = t.get(&keys, &["home_country".into()]).unwrap();
        let got = got[0].as_any().downcast_ref::<StringArray>().unwrap();
        assert_eq!(
            got.iter().collect::<Vec<_>>(),
            [None, None, None, Some("DE")]
        );
        let err = t.get(&keys, &["limit".into()]).unwrap_err().to_string();
        assert!(err.contains("no column `limit`"), "{err}");
        let ints = Int64Array::from(vec![1]);
        assert!(t.get(&ints, &["home_country".into()]).is_err());
    }

    #[test]
    fn a_repeated_key_names_both_rows() {
        let err = cards(&["c-1", "c-2", "c-1"], &[None, None, None])
            .unwrap_err()
            .to_string();
        assert!(err.contains("row 3: key `card_id` repeats row 1"), "{err}");
    }
}
