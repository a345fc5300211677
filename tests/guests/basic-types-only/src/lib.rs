//! An operator built against `weir:operator@0.1.0` as it was before the
//! contract carried decimals, timestamps, dates, bytes, lists and structs
//! (`wit/operator.wit` here is that contract, frozen). The host must run it
//! unchanged over basic columns, and refuse it, by name, an input with
//! columns it could not read. It echoes `txn_id` with the count of columns
//! it sees.

wit_bindgen::generate!({ path: "wit", world: "operator" });

use weir::operator::types::{Column, OutputColumn, Values};

struct Echo;

impl Guest for Echo {
    fn init(_config: String) -> Result<(), OperatorError> {
        Ok(())
    }

    fn process(_ctx: EpochContext, input: &Batch) -> Result<Output, OperatorError> {
        let schema = input.schema();
        let index = schema
            .iter()
            .position(|f| f.name == "txn_id")
            .ok_or_else(|| OperatorError::Failed("no txn_id".into()))?;
        let rows = input.num_rows();
        let columns = vec![
            OutputColumn {
                name: "txn_id".into(),
                column: input.column(index as u32),
            },
            OutputColumn {
                name: "columns_seen".into(),
                column: Column {
                    values: Values::Int64(vec![schema.len() as i64; rows as usize]),
                    validity: None,
                },
            },
        ];
        Ok(Output {
            num_rows: rows,
            columns,
        })
    }
}

export!(Echo);
