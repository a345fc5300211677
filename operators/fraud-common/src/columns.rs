//! The columns the rules read, fetched from the SDK batch once per batch.
//! Shared by the fraud operators.

use crate::rules::{Amount, Payments};
use weir_sdk::{Batch, DataType, DecimalColumn, Error, Float64Column, Utf8Column};

/// The `amount` column: exact decimals, or floats in schemas that predate
/// exact money.
pub enum Amounts {
    Exact(DecimalColumn),
    Float(Float64Column),
}

impl Amounts {
    /// Reads `amount`, a `decimal(P,S)` or `float64` column.
    pub fn read(batch: &Batch) -> Result<Self, Error> {
        match batch.data_type("amount")? {
            DataType::Decimal { .. } => Ok(Amounts::Exact(batch.decimal("amount")?)),
            _ => Ok(Amounts::Float(batch.f64("amount")?)),
        }
    }

    /// Rows in the column.
    pub fn len(&self) -> usize {
        match self {
            Amounts::Exact(c) => c.len(),
            Amounts::Float(c) => c.len(),
        }
    }

    /// Whether the column has no rows.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The amount of `row`, or `None` if null.
    #[inline]
    pub fn get(&self, row: usize) -> Option<Amount> {
        match self {
            Amounts::Exact(c) => c.get(row).map(Amount::Exact),
            Amounts::Float(c) => c.get(row).map(Amount::Float),
        }
    }
}

/// The rule inputs of one batch.
pub struct Columns {
    pub amount: Amounts,
    pub currency: Utf8Column,
    pub country: Utf8Column,
    pub card_country: Utf8Column,
    pub merchant_id: Utf8Column,
}

impl Columns {
    /// Fetches the five columns the rules need.
    pub fn read(batch: &Batch) -> Result<Self, Error> {
        Ok(Columns {
            amount: Amounts::read(batch)?,
            currency: batch.utf8("currency")?,
            country: batch.utf8("country")?,
            card_country: batch.utf8("card_country")?,
            merchant_id: batch.utf8("merchant_id")?,
        })
    }
}

impl Payments for Columns {
    fn len(&self) -> usize {
        self.amount.len()
    }
    fn amount(&self, row: usize) -> Option<Amount> {
        self.amount.get(row)
    }
    fn currency(&self, row: usize) -> Option<&[u8]> {
        self.currency.get_bytes(row)
    }
    fn country(&self, row: usize) -> Option<&[u8]> {
        self.country.get_bytes(row)
    }
    fn card_country(&self, row: usize) -> Option<&[u8]> {
        self.card_country.get_bytes(row)
    }
    fn merchant_id(&self, row: usize) -> Option<&[u8]> {
        self.merchant_id.get_bytes(row)
    }
}
