//! Reference tables the pipeline declares (`[[lookup]] name = "cards"`):
//! a card's home country, a merchant's risk list. The host keeps them and
//! versions them with the epoch, so a replay reads what the first run read;
//! look a whole column of keys up per call.
//!
//! ```ignore
//! let cards = batch.utf8("card_id")?;
//! let home = weir_sdk::lookup::table("cards").utf8(&cards, "home_country")?;
//! for row in 0..batch.num_rows() {
//!     if home.get(row).is_some_and(|h| Some(h) != country.get(row)) { /* … */ }
//! }
//! ```

use crate::bindings::weir::operator::lookup as host;
use crate::bindings::weir::operator::types as wit;
use crate::{BoolColumn, Error, Float64Column, Int64Column, Utf8Column};

/// A column of keys to look up: text keys (a batch's `utf8` column, or
/// strings) or `int64` ones, of the type of the table's key column.
pub struct Keys(wit::Column);

impl From<&Utf8Column> for Keys {
    fn from(column: &Utf8Column) -> Self {
        Keys(column.to_wit())
    }
}

impl From<&[&str]> for Keys {
    fn from(keys: &[&str]) -> Self {
        let mut out = crate::Utf8Builder::new();
        keys.iter().for_each(|k| out.push(k));
        Keys(
            crate::ColumnBuilder::from(out)
                .into_basic()
                .unwrap_or(wit::Column {
                    values: wit::Values::Utf8(wit::Utf8Values {
                        offsets: vec![0],
                        data: Vec::new(),
                    }),
                    validity: None,
                }),
        )
    }
}

impl From<&[i64]> for Keys {
    fn from(keys: &[i64]) -> Self {
        Keys(wit::Column {
            values: wit::Values::Int64(keys.to_vec()),
            validity: None,
        })
    }
}

/// One of the pipeline's reference tables.
pub struct Table {
    name: String,
}

/// The table the pipeline declares as `name`.
pub fn table(name: &str) -> Table {
    Table {
        name: name.to_string(),
    }
}

impl Table {
    /// Columns `columns` of the rows for `keys`, in the keys' order, as the
    /// host sends them: null where a key is not in the table.
    pub fn get(&self, keys: impl Into<Keys>, columns: &[&str]) -> Result<Vec<wit::Column>, Error> {
        let names: Vec<String> = columns.iter().map(|c| c.to_string()).collect();
        host::get(&self.name, &keys.into().0, &names).map_err(Error::failed)
    }

    fn one(&self, keys: impl Into<Keys>, column: &str) -> Result<wit::Column, Error> {
        self.get(keys, &[column])?
            .pop()
            .ok_or_else(|| Error::failed(format!("lookup `{}` sent no column", self.name)))
    }

    /// A `utf8` column of the rows for `keys` (null where not found).
    pub fn utf8(&self, keys: impl Into<Keys>, column: &str) -> Result<Utf8Column, Error> {
        Utf8Column::from_wit(column, self.one(keys, column)?)
    }

    /// A `float64` column of the rows for `keys` (null where not found).
    pub fn f64(&self, keys: impl Into<Keys>, column: &str) -> Result<Float64Column, Error> {
        Float64Column::from_wit(column, self.one(keys, column)?)
    }

    /// An `int64` column of the rows for `keys` (null where not found).
    pub fn i64(&self, keys: impl Into<Keys>, column: &str) -> Result<Int64Column, Error> {
        Int64Column::from_wit(column, self.one(keys, column)?)
    }

    /// A `boolean` column of the rows for `keys` (null where not found).
    pub fn bool(&self, keys: impl Into<Keys>, column: &str) -> Result<BoolColumn, Error> {
        BoolColumn::from_wit(column, self.one(keys, column)?)
    }

    /// The version this epoch reads (`sha256:…` of the table's content);
    /// `None` if the pipeline declares no such table.
    pub fn version(&self) -> Option<String> {
        host::version(&self.name)
    }
}
