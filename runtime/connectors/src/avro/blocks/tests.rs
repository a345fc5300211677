//! Object container files written byte by byte, so that each block can be
//! made wrong in exactly one way.

use super::*;
use arrow_schema::{DataType, Field, Schema};
use std::io::Write as _;
use std::sync::Arc;

const SYNC: [u8; 16] = *b"0123456789abcdef";

const SCHEMA: &str = r#"{"type":"record","name":"Row","fields":[
  {"name":"n","type":"long"},{"name":"s","type":"string"}]}"#;

fn long(mut out: Vec<u8>, v: i64) -> Vec<u8> {
    let mut z = ((v << 1) ^ (v >> 63)) as u64;
    loop {
        let byte = (z & 0x7f) as u8;
        z >>= 7;
        if z == 0 {
            out.push(byte);
            return out;
        }
        out.push(byte | 0x80);
    }
}

fn string(out: Vec<u8>, s: &[u8]) -> Vec<u8> {
    let mut out = long(out, s.len() as i64);
    out.extend_from_slice(s);
    out
}

/// The file's header: magic, schema and codec, sync marker.
fn header(schema: &str, codec: &str) -> Vec<u8> {
    let mut out = b"Obj\x01".to_vec();
    out = long(out, 2);
    out = string(out, b"avro.schema");
    out = string(out, schema.as_bytes());
    out = string(out, b"avro.codec");
    out = string(out, codec.as_bytes());
    out = long(out, 0);
    out.extend_from_slice(&SYNC);
    out
}

/// A block claiming `count` records, holding `data` as stored.
fn block(out: Vec<u8>, count: i64, data: &[u8]) -> Vec<u8> {
    let out = long(out, count);
    let mut out = string(out, data);
    out.extend_from_slice(&SYNC);
    out
}

/// The records (1, "a") and (2, "bc").
fn two_records() -> Vec<u8> {
    let out = long(Vec::new(), 1);
    let out = string(out, b"a");
    let out = long(out, 2);
    string(out, b"bc")
}

fn checked(file: &[u8], schema: &str, codec: Option<CompressionCodec>) -> Result<()> {
    let header_len = header(schema, codec.map_or("null", name)).len();
    check(
        file,
        header_len,
        SYNC,
        codec,
        &serde_json::from_str(schema).unwrap(),
    )
}

fn name(codec: CompressionCodec) -> &'static str {
    match codec {
        CompressionCodec::Deflate => "deflate",
        CompressionCodec::Snappy => "snappy",
        _ => unreachable!(),
    }
}

fn err(file: &[u8], schema: &str, codec: Option<CompressionCodec>) -> String {
    format!("{:#}", checked(file, schema, codec).unwrap_err())
}

#[test]
fn a_well_formed_file_passes_and_decodes() {
    let file = block(header(SCHEMA, "null"), 2, &two_records());
    checked(&file, SCHEMA, None).unwrap();
    let schema = Arc::new(Schema::new(vec![
        Field::new("n", DataType::Int64, false),
        Field::new("s", DataType::Utf8, false),
    ]));
    let batches = crate::avro::decode_file(file.into(), &schema, 10, "f.avro").unwrap();
    assert_eq!(batches.iter().map(|b| b.num_rows()).sum::<usize>(), 2);
}

#[test]
fn a_count_that_does_not_match_the_bytes_is_refused_not_looped_on() {
    // Counts smaller than the records held made arrow-avro's reader spin.
    for count in [0, 1] {
        let file = block(header(SCHEMA, "null"), count, &two_records());
        let e = err(&file, SCHEMA, None);
        assert!(e.contains("block 1") && e.contains("after its"), "{e}");
    }
    let file = block(header(SCHEMA, "null"), 3, &two_records());
    assert!(err(&file, SCHEMA, None).contains("record 3 of its 3"));
    let file = block(header(SCHEMA, "null"), 1 << 40, &two_records());
    assert!(err(&file, SCHEMA, None).contains("claims"));
    let schema = Arc::new(Schema::new(vec![Field::new("n", DataType::Int64, false)]));
    let file = block(header(SCHEMA, "null"), 1, &two_records());
    let e = format!(
        "{:#}",
        crate::avro::decode_file(file.into(), &schema, 10, "f.avro").unwrap_err()
    );
    assert!(
        e.contains("f.avro") && e.contains("record count is wrong"),
        "{e}"
    );
}

#[test]
fn framing_faults_name_what_is_wrong() {
    let mut file = block(header(SCHEMA, "null"), 2, &two_records());
    let last = file.len() - 1;
    file[last] ^= 1;
    assert!(err(&file, SCHEMA, None).contains("sync marker"));
    let file = block(header(SCHEMA, "null"), 2, &two_records());
    assert!(err(&file[..file.len() - 20], SCHEMA, None).contains("bytes are called for"));
    let file = long(header(SCHEMA, "null"), -1);
    assert!(err(&file, SCHEMA, None).contains("negative"));
}

#[test]
fn compressed_blocks_are_checked_and_bounded() {
    let mut deflated = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::fast());
    deflated.write_all(&two_records()).unwrap();
    let file = block(header(SCHEMA, "deflate"), 2, &deflated.finish().unwrap());
    checked(&file, SCHEMA, Some(CompressionCodec::Deflate)).unwrap();

    // 65 MiB of zeros deflate to ~65 KiB: refused past MAX_BLOCK.
    let mut bomb = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::fast());
    bomb.write_all(&vec![0; MAX_BLOCK + (1 << 20)]).unwrap();
    let file = block(header(SCHEMA, "deflate"), 1, &bomb.finish().unwrap());
    assert!(err(&file, SCHEMA, Some(CompressionCodec::Deflate)).contains("more than 64 MiB"));

    // Under 4 bytes made arrow-avro's snappy slice its CRC out of range.
    let file = block(header(SCHEMA, "snappy"), 1, &[1, 2]);
    assert!(err(&file, SCHEMA, Some(CompressionCodec::Snappy)).contains("checksum"));
    let mut snappy = snap::raw::Encoder::new()
        .compress_vec(&two_records())
        .unwrap();
    snappy.extend_from_slice(&[0; 4]);
    let file = block(header(SCHEMA, "snappy"), 2, &snappy);
    checked(&file, SCHEMA, Some(CompressionCodec::Snappy)).unwrap();
}

#[test]
fn schemas_with_every_kind_of_type_are_walked() {
    // A linked list (a record naming itself), an enum, a fixed, a map and
    // an array of unions.
    let schema = r#"{"type":"record","name":"Node","namespace":"t","fields":[
      {"name":"kind","type":{"type":"enum","name":"Kind","symbols":["A","B"]}},
      {"name":"id","type":{"type":"fixed","name":"Id","size":2}},
      {"name":"tags","type":{"type":"map","values":"double"}},
      {"name":"xs","type":{"type":"array","items":["null","float","boolean"]}},
      {"name":"next","type":["null","Node"]}]}"#;
    let node = |out: Vec<u8>, last: bool| {
        let mut out = long(out, 1); // kind B
        out.extend_from_slice(b"id");
        let out = long(out, 1); // one map entry
        let mut out = string(out, b"k");
        out.extend_from_slice(&1.5f64.to_le_bytes());
        let out = long(out, 0);
        let out = long(out, -2); // two items, with a byte size
        let out = long(out, 6);
        let out = long(out, 0); // null
        let mut out = long(out, 1); // float
        out.extend_from_slice(&2.5f32.to_le_bytes());
        let out = long(out, 0);
        long(out, if last { 0 } else { 1 })
    };
    let record = node(node(Vec::new(), false), true);
    let file = block(header(schema, "null"), 1, &record);
    checked(&file, schema, None).unwrap();

    let mut bad_enum = record.clone();
    bad_enum[0] = 4; // symbol 2 of 2
    let file = block(header(schema, "null"), 1, &bad_enum);
    assert!(err(&file, schema, None).contains("enum symbol 2"));
    let many = long(long(Vec::new(), 0), i64::MAX);
    let array = r#"{"type":"record","name":"R","fields":[{"name":"a","type":"int"},
      {"name":"xs","type":{"type":"array","items":"null"}}]}"#;
    let file = block(header(array, "null"), 1, &many);
    assert!(err(&file, array, None).contains("items in"));
}
