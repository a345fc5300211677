//! The JSON-lines decoder (files, golden input), on arbitrary bytes: it
//! must never panic, under the dead-letter policy every non-blank line is
//! either one row or one dead letter (nothing lost, nothing invented), and
//! reading the bytes in pieces (the files source) decodes exactly as the
//! whole text does.
#![no_main]

use arrow_schema::{DataType, Field, Schema};
use libfuzzer_sys::fuzz_target;
use std::io::Read;
use std::sync::Arc;

/// Hands out its bytes in pieces of 1 to 13 bytes, so records and lines
/// are cut between reads.
struct Pieces<'a>(&'a [u8], usize);

impl Read for Pieces<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.1 = self.1 % 13 + 1;
        let n = self.1.min(buf.len()).min(self.0.len());
        buf[..n].copy_from_slice(&self.0[..n]);
        self.0 = &self.0[n..];
        Ok(n)
    }
}
use weir_core::json::{non_blank_lines, without_bom, JsonDecoder, MalformedPolicy};

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
        non_blank_lines(without_bom(data)),
        "every line is a row or a dead letter (a leading byte order mark is none)"
    );
    // Read in pieces, the fast path gives the whole text's rows, or none
    // when the whole text needed the record-by-record path.
    let streamed = decoder
        .decode_lines_fast(&mut Pieces(data, 0), data.len() as u64)
        .expect("reading from memory does not fail");
    if let Some(batches) = streamed {
        assert_eq!(batches, decoded.batches, "read in pieces");
        assert!(decoded.dead_letters.is_empty(), "read in pieces");
    }
});
