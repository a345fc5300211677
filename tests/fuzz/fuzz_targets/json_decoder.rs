//! The JSON-lines decoder (files, golden input), on arbitrary bytes: it
//! must never panic, and under the dead-letter policy every non-blank line
//! is either one row or one dead letter (nothing lost, nothing invented).
#![no_main]

use arrow_schema::{DataType, Field, Schema};
use libfuzzer_sys::fuzz_target;
use std::sync::Arc;
use weir_core::json::{non_blank_lines, JsonDecoder, MalformedPolicy};

fuzz_target!(|data: &[u8]| {
    let schema = Arc::new(Schema::new(vec![
        Field::new("txn_id", DataType::Utf8, false),
        Field::new("amount", DataType::Float64, false),
        Field::new("ts", DataType::Int64, true),
        Field::new("card_present", DataType::Boolean, true),
    ]));
    let decoder = JsonDecoder::new(schema, 7, MalformedPolicy::DeadLetter);
    let decoded = decoder
        .decode_lines(data, "fuzz")
        .expect("the dead-letter policy never fails a decode");
    let rows: usize = decoded.batches.iter().map(|b| b.num_rows()).sum();
    assert!(decoded.batches.iter().all(|b| b.num_rows() <= 7));
    assert_eq!(
        rows + decoded.dead_letters.len(),
        non_blank_lines(data),
        "every line is a row or a dead letter"
    );
});
