//! Avro on Kafka in a schema registry's wire format (`0x00`, the schema
//! id, the body), against the test broker and the registry the tests run
//! (`weir_test_support::registry`: no Confluent-compatible registry server
//! installs from the registries this machine reaches), with values written
//! by fastavro. The writer schema evolves mid-topic — a field added, one
//! removed, an `int` promoted — and every record lands in the declared
//! columns; a record naming an unknown id, one cut short and one that is
//! not framed go to the dead-letter output with their offset and reason;
//! and after the registry is stopped, a replay decodes byte for byte the
//! same from the schemas the checkpoint recorded.

use crate::common::guest;
use std::path::Path;
use weir_test_support::avro::framed;
use weir_test_support::broker::Broker;
use weir_test_support::registry::TestRegistry;

const DECLARED: &str = r#"schema = [
  { name = "txn_id", type = "utf8" },
  { name = "amount", type = "decimal(18,2)" },
  { name = "ts", type = "timestamp(ms, UTC)" },
  { name = "score", type = "int64", nullable = true },
  { name = "channel", type = "utf8", nullable = true },
]"#;

/// The first writer schema: a score as an `int`, no channel.
const V1: &str = r#"{"type":"record","name":"Payment","namespace":"bank","fields":[
  {"name":"txn_id","type":"string"},
  {"name":"amount","type":{"type":"bytes","logicalType":"decimal","precision":18,"scale":2}},
  {"name":"ts","type":{"type":"long","logicalType":"timestamp-millis"}},
  {"name":"score","type":"int"}]}"#;

/// The second: the score removed, a channel added with a default.
const V2: &str = r#"{"type":"record","name":"Payment","namespace":"bank","fields":[
  {"name":"txn_id","type":"string"},
  {"name":"amount","type":{"type":"bytes","logicalType":"decimal","precision":18,"scale":2}},
  {"name":"ts","type":{"type":"long","logicalType":"timestamp-millis"}},
  {"name":"channel","type":"string","default":"web"}]}"#;

fn pipeline(dir: &Path, broker: &Broker, registry: &str) -> String {
    format!(
        r#"name = "kafka-avro"
checkpoint = "{dir}/checkpoint"
[trigger]
mode = "available-now"
[source]
kind = "kafka"
bootstrap_servers = "{bootstrap}"
topics = ["payments"]
timeout = "3s"
value_format = "avro"
on_malformed = "dead-letter"
schema_registry = {{ url = "{registry}", username = "weir", password = {{ env = "WEIR_TEST_REGISTRY_PASSWORD" }} }}
{DECLARED}
[operator]
path = "{op}"
[sink]
kind = "files"
path = "{dir}/out"
"#,
        dir = dir.display(),
        bootstrap = broker.bootstrap(),
        op = guest("passthrough").display(),
    )
}

/// Runs the pipeline to its end; the files sink's bytes.
fn run(dir: &Path, toml: &str) -> Vec<u8> {
    let host = weir_host::WasmHost::new(None).unwrap();
    crate::types::run_to_end(dir, toml, &host)
}

#[test]
#[ignore = "needs tansu"]
fn evolving_avro_on_kafka_lands_in_the_declared_columns_and_replays_without_the_registry() {
    std::env::set_var("WEIR_TEST_REGISTRY_PASSWORD", "s3cret");
    let broker = Broker::start();
    broker.create_topic("payments", 1);
    let mut registry = TestRegistry::start(Some(("weir", "s3cret")));
    registry.register("payments-value", 1, V1);
    registry.register("payments-value", 2, V2);

    let mut values = framed(
        V1,
        1,
        &[
            r#"{"txn_id":"a1","amount":19.99,"ts":1796635800250,"score":7}"#,
            r#"{"txn_id":"a2","amount":-0.05,"ts":0,"score":-1}"#,
        ],
    );
    values.extend(framed(
        V2,
        2,
        &[r#"{"txn_id":"b1","amount":100.00,"ts":-1,"channel":"app"}"#],
    ));
    let unknown = framed(
        V1,
        99,
        &[r#"{"txn_id":"x1","amount":1.00,"ts":5,"score":1}"#],
    );
    let mut cut = framed(
        V2,
        2,
        &[r#"{"txn_id":"x2","amount":2.00,"ts":6,"channel":"web"}"#],
    );
    let short = cut[0].len() - 3;
    cut[0].truncate(short);
    values.push(unknown[0].clone());
    values.push(cut[0].clone());
    values.push(br#"{"txn_id":"x3"}"#.to_vec());
    values.extend(framed(
        V1,
        1,
        &[r#"{"txn_id":"a3","amount":0.10,"ts":1000,"score":3}"#],
    ));
    let mut trailing = framed(
        V2,
        2,
        &[r#"{"txn_id":"x4","amount":3.00,"ts":7,"channel":"web"}"#],
    );
    trailing[0].extend_from_slice(&[0, 0, 0, 0, 2]);
    values.push(trailing[0].clone());
    values.extend(framed(
        V2,
        2,
        &[r#"{"txn_id":"b2","amount":4.00,"ts":8,"channel":"pos"}"#],
    ));
    // Written by hand: an amount of 20 digits under a decimal(18,2) writer
    // schema (Avro itself does not check a decimal's bytes against it).
    let mut overlong = vec![0, 0, 0, 0, 1, 0x04, b'x', b'5', 0x12];
    overlong.extend_from_slice(&[0x00, 0x8A, 0xC7, 0x23, 0x04, 0x89, 0xE8, 0x00, 0x00]);
    overlong.extend_from_slice(&[0x12, 0x0A]);
    values.push(overlong);
    broker.produce("payments", &values, |_| 0);

    let dir = tempfile::tempdir().unwrap();
    let toml = pipeline(dir.path(), &broker, registry.url());
    let first = run(dir.path(), &toml);
    let mut rows: Vec<&str> = std::str::from_utf8(&first).unwrap().lines().collect();
    rows.sort();
    let rows: Vec<String> = rows
        .iter()
        .map(|r| {
            let mut v: serde_json::Value = serde_json::from_str(r).unwrap();
            let o = v.as_object_mut().unwrap();
            o.retain(|k, _| !k.starts_with("kafka_") || k == "kafka_offset");
            v.to_string()
        })
        .collect();
    assert_eq!(
        rows,
        [
            r#"{"amount":"19.99","kafka_offset":0,"score":7,"ts":"2026-12-07T09:30:00.250Z","txn_id":"a1"}"#,
            r#"{"amount":"-0.05","kafka_offset":1,"score":-1,"ts":"1970-01-01T00:00:00Z","txn_id":"a2"}"#,
            r#"{"amount":"0.10","kafka_offset":6,"score":3,"ts":"1970-01-01T00:00:01Z","txn_id":"a3"}"#,
            r#"{"amount":"100.00","channel":"app","kafka_offset":2,"ts":"1969-12-31T23:59:59.999Z","txn_id":"b1"}"#,
            r#"{"amount":"4.00","channel":"pos","kafka_offset":8,"ts":"1970-01-01T00:00:00.008Z","txn_id":"b2"}"#,
        ]
    );
    let letters = std::fs::read_to_string(
        dir.path()
            .join("checkpoint/dead-letter/epoch-0000000000.jsonl"),
    )
    .unwrap();
    let letters: Vec<serde_json::Value> = letters
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let reasons: Vec<(String, String)> = letters
        .iter()
        .map(|l| {
            (
                l["origin"].as_str().unwrap().to_string(),
                l["reason"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(reasons.len(), 5, "{reasons:?}");
    assert!(
        reasons[0].0.ends_with("payments-0@3")
            && reasons[0]
                .1
                .contains("schema id 99 is not in the schema registry"),
        "{reasons:?}"
    );
    assert!(
        reasons[1].0.ends_with("payments-0@4") && reasons[1].1.contains("cut short"),
        "{reasons:?}"
    );
    assert!(
        reasons[2].0.ends_with("payments-0@5")
            && reasons[2]
                .1
                .contains("not in the schema registry's wire format"),
        "{reasons:?}"
    );
    assert!(
        reasons[3].0.ends_with("payments-0@7")
            && reasons[3].1.contains("5 bytes after its Avro record"),
        "a record with bytes after it is set aside, and the next one of its schema is read: \
         {reasons:?}"
    );

    assert!(
        reasons[4].0.ends_with("payments-0@9")
            && reasons[4]
                .1
                .contains("100000000000000000.00 has more digits than decimal(18,2)"),
        "{reasons:?}"
    );

    // The registry goes away; the epoch is replayed (its commit lost) and
    // decodes from the schemas the checkpoint recorded.
    registry.stop();
    let asked = registry.requests();
    std::fs::remove_file(dir.path().join("checkpoint/commits/0")).unwrap();
    for file in weir_connectors::files::FileSink::epoch_files(&dir.path().join("out"), 0).unwrap() {
        std::fs::remove_file(file).unwrap();
    }
    assert_eq!(
        run(dir.path(), &toml),
        first,
        "the replay wrote the same bytes"
    );
    assert_eq!(registry.requests(), asked);
}

/// The registry client alone: a wrong password is the registry's refusal
/// (an error, never a record's fault); what it served is recorded and
/// read back without it; a recorded schema that was tampered with is
/// refused.
#[test]
fn the_registry_client_records_what_it_was_told_and_checks_it() {
    use weir_connectors::avro::registry::{Lookup, Registry, RegistryConfig};
    use weir_core::secret::SecretSource;
    let mut server = TestRegistry::start(Some(("weir", "right")));
    server.register("payments-value", 7, V1);
    let dir = tempfile::tempdir().unwrap();
    let url = server.url().to_string();
    let config = |var: &str| RegistryConfig {
        url: url.clone(),
        username: Some("weir".into()),
        password: Some(SecretSource::Env(var.into())),
        ca_file: None,
    };
    std::env::set_var("WEIR_TEST_REGISTRY_WRONG", "wrong");
    std::env::set_var("WEIR_TEST_REGISTRY_RIGHT", "right");
    let mut wrong = Registry::new(&config("WEIR_TEST_REGISTRY_WRONG"), dir.path()).unwrap();
    let err = format!("{:#}", wrong.schema(7).unwrap_err());
    assert!(err.contains("401"), "{err}");

    let mut right = Registry::new(&config("WEIR_TEST_REGISTRY_RIGHT"), dir.path()).unwrap();
    assert!(matches!(right.schema(7).unwrap(), Lookup::Found(s) if &*s == V1));
    assert!(
        matches!(right.schema(8).unwrap(), Lookup::Unknown(why) if why.contains("schema id 8"))
    );
    let err = format!(
        "{:#}",
        Registry::new(
            &RegistryConfig {
                url: format!("{url}/wrong/path"),
                ..config("WEIR_TEST_REGISTRY_RIGHT")
            },
            tempfile::tempdir().unwrap().path(),
        )
        .unwrap()
        .schema(7)
        .unwrap_err()
    );
    assert!(
        err.contains("base URL"),
        "a 404 that is not the registry's: {err}"
    );
    server.stop();
    let mut later = Registry::new(&config("WEIR_TEST_REGISTRY_RIGHT"), dir.path()).unwrap();
    assert!(matches!(later.schema(7).unwrap(), Lookup::Found(s) if &*s == V1));
    assert!(matches!(later.schema(8).unwrap(), Lookup::Unknown(_)));
    assert!(
        later.schema(9).is_err(),
        "an id never seen needs the registry"
    );

    let recorded: Vec<_> = std::fs::read_dir(dir.path().join("schemas"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "avsc"))
        .collect();
    std::fs::write(&recorded[0], V2).unwrap();
    let mut tampered = Registry::new(&config("WEIR_TEST_REGISTRY_RIGHT"), dir.path()).unwrap();
    let err = format!("{:#}", tampered.schema(7).unwrap_err());
    assert!(err.contains("does not match its digest"), "{err}");
    let err = format!(
        "{:#}",
        RegistryConfig {
            url: "registry:8081".into(),
            ..config("X")
        }
        .validate()
        .unwrap_err()
    );
    assert!(err.contains("http:// or https://"), "{err}");
}
