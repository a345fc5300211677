//! Host side of `weir:operator/lookup`: a column of keys in, the asked-for
//! columns of the matching rows out, from the table versions the epoch
//! reads ([`crate::EpochEnv::lookups`]). A guest's mistakes (an unknown
//! table or column, keys of the wrong type or malformed) come back as an
//! error value naming them, not a trap.

use super::bindings::weir::operator::lookup::Host;
use super::bindings::weir::operator::types::{Column, Field};
use super::bindings::WitValues;
use super::columns::{column_to_wit, wit_type};
use super::store::HostState;
use anyhow::{anyhow, Result};
use arrow_array::ArrayRef;
use weir_core::lookup::LookupTable;

impl HostState {
    fn table(&self, name: &str) -> Option<&LookupTable> {
        self.env.lookups.get(name).map(|t| t.as_ref())
    }
}

/// A guest's column of keys as an Arrow array.
fn keys_array(keys: Column) -> Result<ArrayRef> {
    let rows = match &keys.values {
        WitValues::Int64(v) => v.len(),
        WitValues::Utf8(u) => u.offsets.len().saturating_sub(1),
        _ => return Err(anyhow!("keys are utf8 or int64 values")),
    };
    let output = super::bindings::WitOutput {
        num_rows: u32::try_from(rows)?,
        columns: vec![super::bindings::weir::operator::types::OutputColumn {
            name: "key".into(),
            column: keys,
        }],
    };
    let batch = super::columns::output_to_batch(output)?;
    Ok(batch.column(0).clone())
}

impl Host for HostState {
    fn get(
        &mut self,
        table: String,
        keys: Column,
        columns: Vec<String>,
    ) -> Result<Vec<Column>, String> {
        let Some(t) = self.table(&table) else {
            return Err(format!("the pipeline has no lookup table `{table}`"));
        };
        let keys = keys_array(keys).map_err(|e| format!("lookup `{table}`: {e:#}"))?;
        let found = t
            .get(keys.as_ref(), &columns)
            .map_err(|e| format!("{e:#}"))?;
        found
            .iter()
            .map(|c| column_to_wit(c.as_ref()).map_err(|e| format!("lookup `{table}`: {e:#}")))
            .collect()
    }

    fn schema(&mut self, table: String) -> Option<Vec<Field>> {
        let t = self.table(&table)?;
        Some(
            t.schema()
                .fields()
                .iter()
                .filter_map(|f| {
                    Some(Field {
                        name: f.name().clone(),
                        data_type: wit_type(f.data_type())?,
                        nullable: f.is_nullable(),
                    })
                })
                .collect(),
        )
    }

    fn version(&mut self, table: String) -> Option<String> {
        self.table(&table).map(|t| t.digest().to_string())
    }
}
