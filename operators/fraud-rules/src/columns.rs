//! The columns the rules read, fetched from the SDK batch once per batch.
//! Shared with `fraud-velocity` (included by path, like `rules.rs`).

use crate::rules::Payments;
use weir_sdk::{Batch, Error, Float64Column, Utf8Column};

/// The rule inputs of one batch.
pub struct Columns {
    pub amount: Float64Column,
    pub currency: Utf8Column,
    pub country: Utf8Column,
    pub card_country: Utf8Column,
    pub merchant_id: Utf8Column,
}

impl Columns {
    /// Fetches the five columns the rules need.
    pub fn read(batch: &Batch) -> Result<Self, Error> {
        Ok(Columns {
            amount: batch.f64("amount")?,
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
    fn amount(&self, row: usize) -> Option<f64> {
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
