//! Avro object container files in a files source, read with arrow-avro
//! (written by fastavro, an implementation of its own): files written with
//! three versions of a payment's writer schema — the
//! first with an `int` score (promoted to the declared `long`), the second
//! without the score and the device's IP but with a `channel` the pipeline
//! does not declare — resolve into the declared columns by Avro's rules,
//! nothing lost; a third whose amount is a `string` cannot be resolved and
//! is a dead letter naming the field, while the others go on.

use crate::common::guest;
use std::path::Path;

const DECLARED: &str = r#"schema = [
  { name = "txn_id", type = "utf8" },
  { name = "amount", type = "decimal(18,2)" },
  { name = "ts", type = "timestamp(ms, UTC)" },
  { name = "score", type = "int64", nullable = true },
  { name = "device", type = "struct", fields = [
      { name = "id", type = "utf8" },
      { name = "ip", type = "utf8", nullable = true } ] },
]"#;

/// Writer schema 1: the score as an `int`, the device with its IP.
const V1: &str = r#"{"type":"record","name":"Payment","namespace":"bank","fields":[
  {"name":"txn_id","type":"string"},
  {"name":"amount","type":{"type":"bytes","logicalType":"decimal","precision":18,"scale":2}},
  {"name":"ts","type":{"type":"long","logicalType":"timestamp-millis"}},
  {"name":"score","type":"int"},
  {"name":"device","type":{"type":"record","name":"Device","fields":[
    {"name":"id","type":"string"},{"name":"ip","type":["null","string"],"default":null}]}}]}"#;

/// Writer schema 2: no score, no IP, a `channel` the pipeline ignores.
const V2: &str = r#"{"type":"record","name":"Payment","namespace":"bank","fields":[
  {"name":"txn_id","type":"string"},
  {"name":"amount","type":{"type":"bytes","logicalType":"decimal","precision":18,"scale":2}},
  {"name":"ts","type":{"type":"long","logicalType":"timestamp-millis"}},
  {"name":"channel","type":"string","default":"web"},
  {"name":"device","type":{"type":"record","name":"Device","fields":[
    {"name":"id","type":"string"}]}}]}"#;

/// Writer schema 3: the amount as text, which no rule resolves into a
/// decimal.
const V3: &str = r#"{"type":"record","name":"Payment","namespace":"bank","fields":[
  {"name":"txn_id","type":"string"},
  {"name":"amount","type":"string"},
  {"name":"ts","type":{"type":"long","logicalType":"timestamp-millis"}},
  {"name":"device","type":{"type":"record","name":"Device","fields":[
    {"name":"id","type":"string"}]}}]}"#;

fn write_inputs(input: &Path) {
    use weir_test_support::avro::ocf;
    std::fs::create_dir_all(input).unwrap();
    let v1 = ocf(
        V1,
        &[
            r#"{"txn_id":"a1","amount":19.99,"ts":1796635800250,"score":7,"device":{"id":"d1","ip":"10.0.0.1"}}"#,
            r#"{"txn_id":"a2","amount":-0.05,"ts":0,"score":-1,"device":{"id":"d2","ip":null}}"#,
        ],
    );
    let v2 = ocf(
        V2,
        &[
            r#"{"txn_id":"b1","amount":9999999999999999.99,"ts":-1,"channel":"app","device":{"id":"d3"}}"#,
        ],
    );
    let v3 = ocf(
        V3,
        &[r#"{"txn_id":"c1","amount":"12.50","ts":5,"device":{"id":"d4"}}"#],
    );
    std::fs::write(input.join("1-v1.avro"), v1).unwrap();
    std::fs::write(input.join("2-v2.avro"), v2).unwrap();
    std::fs::write(input.join("3-v3.avro"), v3).unwrap();
}

#[test]
#[ignore = "needs fastavro"]
fn avro_files_of_evolving_writer_schemas_resolve_into_the_declared_columns() {
    let dir = tempfile::tempdir().unwrap();
    write_inputs(&dir.path().join("input"));
    let toml = format!(
        r#"name = "avro"
checkpoint = "{dir}/checkpoint"
[trigger]
mode = "available-now"
[source]
kind = "files"
path = "{dir}/input"
max_files_per_trigger = 1
on_malformed = "dead-letter"
{DECLARED}
[operator]
path = "{op}"
[sink]
kind = "files"
path = "{dir}/out"
"#,
        dir = dir.path().display(),
        op = guest("passthrough").display(),
    );
    let host = weir_host::WasmHost::new(None).unwrap();
    let rows = crate::types::sorted_lines(&crate::types::run_to_end(dir.path(), &toml, &host));
    assert_eq!(
        rows,
        [
            r#"{"txn_id":"a1","amount":"19.99","ts":"2026-12-07T09:30:00.250Z","score":7,"device":{"id":"d1","ip":"10.0.0.1"}}"#,
            r#"{"txn_id":"a2","amount":"-0.05","ts":"1970-01-01T00:00:00Z","score":-1,"device":{"id":"d2"}}"#,
            r#"{"txn_id":"b1","amount":"9999999999999999.99","ts":"1969-12-31T23:59:59.999Z","device":{"id":"d3"}}"#,
        ]
    );
    let letters = std::fs::read_to_string(
        dir.path()
            .join("checkpoint/dead-letter/epoch-0000000002.jsonl"),
    )
    .unwrap();
    let letter: serde_json::Value = serde_json::from_str(letters.trim()).unwrap();
    assert!(letter["origin"].as_str().unwrap().ends_with("3-v3.avro"));
    let reason = letter["reason"].as_str().unwrap();
    assert!(reason.contains("the whole file is unreadable"), "{reason}");
    assert!(reason.contains("column `amount`"), "{reason}");
    assert!(
        reason.contains("read only from an Avro decimal"),
        "{reason}"
    );
    assert!(letter["raw"].as_str().unwrap().contains("bytes of Avro"));
}

/// Avro's resolution ignores logical types; the reader schema Weir builds
/// refuses what would be read wrong: another timestamp unit, an instant
/// for a wall-clock column (or the other way round), another logical type
/// for a date, and a decimal of another scale.
#[test]
fn logical_types_that_resolution_would_misread_are_refused() {
    use arrow_schema::{DataType, Field, Schema, TimeUnit};
    let declared = |t: DataType| Schema::new(vec![Field::new("v", t, false)]);
    let writer =
        |t: &str| format!(r#"{{"type":"record","name":"R","fields":[{{"name":"v","type":{t}}}]}}"#);
    let err = |declared: DataType, t: &str| {
        format!(
            "{:#}",
            weir_connectors::avro::reader_schema(&declared_schema(declared.clone()), &writer(t))
                .map(|_| ())
                .unwrap_err()
        )
    };
    fn declared_schema(t: DataType) -> Schema {
        Schema::new(vec![Field::new("v", t, false)])
    }
    let ms_utc = DataType::Timestamp(TimeUnit::Millisecond, Some("+00:00".into()));
    let ok = |d: DataType, t: &str| {
        weir_connectors::avro::reader_schema(&declared(d), &writer(t)).unwrap();
    };
    ok(ms_utc.clone(), r#""long""#);
    ok(
        ms_utc.clone(),
        r#"{"type":"long","logicalType":"timestamp-millis"}"#,
    );
    ok(DataType::Date32, r#""int""#);
    assert!(err(
        ms_utc.clone(),
        r#"{"type":"long","logicalType":"timestamp-micros"}"#
    )
    .contains("another unit"));
    assert!(err(
        ms_utc,
        r#"{"type":"long","logicalType":"local-timestamp-millis"}"#
    )
    .contains("an instant and a wall-clock time"));
    assert!(err(
        DataType::Timestamp(TimeUnit::Millisecond, None),
        r#"{"type":"long","logicalType":"timestamp-millis"}"#
    )
    .contains("an instant and a wall-clock time"));
    assert!(err(
        DataType::Date32,
        r#"{"type":"int","logicalType":"time-millis"}"#
    )
    .contains("not a date"));
    assert!(err(
        DataType::Decimal128(18, 2),
        r#"{"type":"bytes","logicalType":"decimal","precision":18,"scale":3}"#
    )
    .contains("of scale 2"));
}
