//! An operator's output as a hostile guest could return it: whatever the
//! lengths, offsets, bitmaps and bytes, validation either refuses it or
//! yields a batch that is valid Arrow with the declared rows.
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use weir_guest_output::{to_batch, Column, NamedColumn, Output, Values};

#[derive(Debug, Arbitrary)]
enum FuzzValues {
    Int64(Vec<i64>),
    Float64(Vec<f64>),
    Boolean(Vec<u8>),
    Utf8(Vec<i32>, Vec<u8>),
}

#[derive(Debug, Arbitrary)]
struct FuzzColumn {
    name: String,
    values: FuzzValues,
    validity: Option<Vec<u8>>,
}

#[derive(Debug, Arbitrary)]
struct FuzzOutput {
    num_rows: u16,
    columns: Vec<FuzzColumn>,
}

fuzz_target!(|out: FuzzOutput| {
    let output = Output {
        num_rows: u32::from(out.num_rows),
        columns: out
            .columns
            .into_iter()
            .map(|c| NamedColumn {
                name: c.name,
                column: Column {
                    values: match c.values {
                        FuzzValues::Int64(v) => Values::Int64(v),
                        FuzzValues::Float64(v) => Values::Float64(v),
                        FuzzValues::Boolean(v) => Values::Boolean(v),
                        FuzzValues::Utf8(offsets, data) => Values::Utf8 { offsets, data },
                    },
                    validity: c.validity,
                },
            })
            .collect(),
    };
    let rows = output.num_rows as usize;
    if let Ok(batch) = to_batch(output) {
        assert_eq!(batch.num_rows(), rows);
        for column in batch.columns() {
            column
                .to_data()
                .validate_full()
                .expect("an accepted column is valid Arrow");
        }
    }
});
