//! Protobuf on Kafka, read with a descriptor set, against the test broker,
//! with the `.proto` compiled and the values encoded by Google's protobuf
//! (protoc and its Python runtime): a nested message lands in a struct
//! column, a `repeated` field in a list, a `google.protobuf.Timestamp` in a
//! timestamp and a `string` amount in a decimal, exactly; a value written
//! with a newer `.proto` (a field added) still reads; a value that is not a
//! message of the type and one whose amount does not fit its column go to
//! the dead-letter output with their offset and reason.

use crate::common::guest;
use std::path::Path;
use weir_test_support::broker::Broker;
use weir_test_support::protobuf::{descriptor_set, encode};

const PROTO: &str = r#"syntax = "proto3";
package fraud;
import "google/protobuf/timestamp.proto";
import "google/protobuf/wrappers.proto";
message Device { string id = 1; string ip = 2; bytes fingerprint = 3; }
enum Channel { CHANNEL_UNSPECIFIED = 0; WEB = 1; POS = 2; }
message Payment {
  string txn_id = 1;
  string amount = 2;
  google.protobuf.Timestamp ts = 3;
  Device device = 4;
  repeated string tags = 5;
  Channel channel = 6;
  int64 count = 7;
  optional double score = 8;
  google.protobuf.StringValue note = 9;
}
"#;

const DECLARED: &str = r#"schema = [
  { name = "txn_id", type = "utf8" },
  { name = "amount", type = "decimal(18,2)" },
  { name = "ts", type = "timestamp(ms, UTC)" },
  { name = "device", type = "struct", nullable = true, fields = [
      { name = "id", type = "utf8" },
      { name = "ip", type = "utf8" },
      { name = "fingerprint", type = "binary" } ] },
  { name = "tags", type = "list<utf8>" },
  { name = "channel", type = "utf8" },
  { name = "count", type = "int64" },
  { name = "score", type = "float64", nullable = true },
  { name = "note", type = "utf8", nullable = true },
]"#;

fn pipeline(dir: &Path, broker: &Broker, desc: &Path) -> String {
    format!(
        r#"name = "kafka-protobuf"
checkpoint = "{dir}/checkpoint"
[trigger]
mode = "available-now"
[source]
kind = "kafka"
bootstrap_servers = "{bootstrap}"
topics = ["payments"]
timeout = "3s"
value_format = "protobuf"
protobuf = {{ descriptor_set = "{desc}", message = "fraud.Payment" }}
on_malformed = "dead-letter"
{DECLARED}
[operator]
path = "{op}"
[sink]
kind = "files"
path = "{dir}/out"
"#,
        dir = dir.display(),
        bootstrap = broker.bootstrap(),
        desc = desc.display(),
        op = guest("passthrough").display(),
    )
}

#[test]
fn protobuf_settings_are_checked_before_any_broker_is_asked() {
    let dir = tempfile::tempdir().unwrap();
    let host = weir_host::WasmHost::new(None).unwrap();
    // No broker listens on port 1: every error below comes before one is asked.
    let toml = |source: &str| {
        format!(
            r#"name = "p"
checkpoint = "checkpoint"
[source]
kind = "kafka"
bootstrap_servers = "127.0.0.1:1"
topics = ["payments"]
timeout = "1s"
{source}
{DECLARED}
[operator]
path = "{op}"
[sink]
kind = "files"
path = "out"
"#,
            op = guest("passthrough").display(),
        )
    };
    let err = |source: &str| {
        format!(
            "{:#}",
            crate::common::open_pipeline(dir.path(), &toml(source), &host)
                .err()
                .unwrap()
        )
    };
    let e = err(r#"value_format = "protobuf""#);
    assert!(e.contains("give `protobuf = { descriptor_set"), "{e}");
    let e = err(r#"protobuf = { descriptor_set = "p.desc", message = "fraud.Payment" }"#);
    assert!(
        e.contains("`source.protobuf` is for `value_format = \"protobuf\"`"),
        "{e}"
    );
    let e = err(r#"value_format = "protobuf"
protobuf = { descriptor_set = "p.desc", message = "fraud.Payment" }
schema_registry = { url = "http://127.0.0.1:1" }"#);
    assert!(
        e.contains("`source.schema_registry` is for `value_format = \"avro\"`"),
        "{e}"
    );
    let e = err(r#"value_format = "protobuf"
protobuf = { descriptor_set = "missing.desc", message = "fraud.Payment" }"#);
    assert!(
        e.contains("`source.protobuf`") && e.contains("missing.desc"),
        "{e}"
    );
    std::fs::write(dir.path().join("bad.desc"), "not a descriptor set").unwrap();
    let e = err(r#"value_format = "protobuf"
protobuf = { descriptor_set = "bad.desc", message = "fraud.Payment" }"#);
    assert!(
        e.contains("bad.desc is not a protobuf descriptor set"),
        "{e}"
    );
}

#[test]
#[ignore = "needs tansu"]
fn protobuf_on_kafka_lands_nested_in_the_declared_columns() {
    let dir = tempfile::tempdir().unwrap();
    let (desc, newer) = (dir.path().join("payments.desc"), dir.path().join("v2.desc"));
    descriptor_set(PROTO, &desc);
    let v2 = PROTO.replace(
        "  google.protobuf.StringValue note = 9;\n",
        "  google.protobuf.StringValue note = 9;\n  string merchant = 10;\n",
    );
    descriptor_set(&v2, &newer);
    let mut values = encode(
        &desc,
        "fraud.Payment",
        &[
            r#"{"txn_id":"p1","amount":"19.99","ts":"2026-12-07T09:30:00.250Z","device":{"id":"d1","ip":"10.0.0.1","fingerprint":"AP8Q"},"tags":["card-present","3ds"],"channel":"POS","count":"9007199254740993","score":0.5,"note":"first"}"#,
            r#"{"txn_id":"p2","amount":"0.10","ts":"1970-01-01T00:00:00Z"}"#,
            r#"{"txn_id":"x1","amount":"0.001","ts":"1970-01-01T00:00:01Z"}"#,
        ],
    );
    values.push(b"\x0a\x05ab".to_vec());
    values.extend(encode(
        &newer,
        "fraud.Payment",
        &[r#"{"txn_id":"p3","amount":"-7","ts":"2026-01-01T00:00:00.001Z","merchant":"m-1","channel":"WEB"}"#],
    ));
    let broker = Broker::start();
    broker.create_topic("payments", 1);
    broker.produce("payments", &values, |_| 0);

    let host = weir_host::WasmHost::new(None).unwrap();
    let out = crate::types::run_to_end(dir.path(), &pipeline(dir.path(), &broker, &desc), &host);
    let mut rows: Vec<String> = std::str::from_utf8(&out)
        .unwrap()
        .lines()
        .map(|r| {
            let mut v: serde_json::Value = serde_json::from_str(r).unwrap();
            let o = v.as_object_mut().unwrap();
            o.retain(|k, _| !k.starts_with("kafka_") || k == "kafka_offset");
            v.to_string()
        })
        .collect();
    rows.sort();
    assert_eq!(
        rows,
        [
            r#"{"amount":"-7.00","channel":"WEB","count":0,"kafka_offset":4,"tags":[],"ts":"2026-01-01T00:00:00.001Z","txn_id":"p3"}"#,
            r#"{"amount":"0.10","channel":"CHANNEL_UNSPECIFIED","count":0,"kafka_offset":1,"tags":[],"ts":"1970-01-01T00:00:00Z","txn_id":"p2"}"#,
            r#"{"amount":"19.99","channel":"POS","count":9007199254740993,"device":{"fingerprint":"00ff10","id":"d1","ip":"10.0.0.1"},"kafka_offset":0,"note":"first","score":0.5,"tags":["card-present","3ds"],"ts":"2026-12-07T09:30:00.250Z","txn_id":"p1"}"#,
        ]
    );
    let letters = std::fs::read_to_string(
        dir.path()
            .join("checkpoint/dead-letter/epoch-0000000000.jsonl"),
    )
    .unwrap();
    let mut letters: Vec<(String, String)> = letters
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            (
                v["origin"].as_str().unwrap().to_string(),
                v["reason"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    letters.sort();
    assert_eq!(letters.len(), 2, "{letters:?}");
    assert!(
        letters[0].0.ends_with("payments-0@2")
            && letters[0].1.contains("amount")
            && letters[0].1.contains("0.001"),
        "{letters:?}"
    );
    assert!(
        letters[1].0.ends_with("payments-0@3")
            && letters[1].1.contains("not a protobuf `fraud.Payment`"),
        "{letters:?}"
    );
}
