//! The S3 source: objects under a prefix of a real
//! S3-compatible server (s3s-fs) as input, planned once each by key, size
//! and ETag, read back exactly or refused.

use crate::common::s3::{S3Server, BUCKET};
use crate::common::{
    guest, pipeline_toml, run_epochs, sorted_rows, write_input, DEMO_RULES_INLINE,
};
use std::path::Path;

const PER_FILE: u64 = 1_500;
const SEED: u64 = 19;

/// The rules pipeline (stateless, so its alerts do not depend on the order
/// objects are read in) over `dir/input` or, with `s3`, over
/// `s3://BUCKET/day=1`, one object per epoch.
fn pipeline(dir: &Path, s3: Option<&S3Server>) -> String {
    let toml = pipeline_toml(dir, &guest("fraud_rules"), DEMO_RULES_INLINE, "", "");
    let Some(s3) = s3 else { return toml };
    toml.replace(
        &format!("kind = \"files\"\npath = \"{}/input\"", dir.display()),
        &format!(
            "kind = \"s3\"\nurl = \"s3://{BUCKET}/day=1\"\n\
             endpoint = \"http://127.0.0.1:{}\"\nallow_http = true",
            s3.port
        ),
    )
}

/// Payments file `n` of the input, as JSON lines.
fn payments(n: u64) -> Vec<u8> {
    weir_connectors::generator::payments::json_lines(SEED, n * PER_FILE, PER_FILE)
}

/// The keys each epoch of the checkpoint planned, in epoch order.
fn planned_keys(checkpoint: &Path) -> Vec<Vec<String>> {
    let mut epochs = Vec::new();
    for n in 0.. {
        let Ok(text) = std::fs::read_to_string(checkpoint.join(format!("offsets/{n}"))) else {
            break;
        };
        let entry: serde_json::Value = serde_json::from_str(&text).unwrap();
        let objects = entry["source"]["objects"].as_array().unwrap().clone();
        for o in &objects {
            assert!(o["size"].as_u64().unwrap() > 0, "{o}");
            assert!(o["e_tag"].as_str().is_some_and(|t| !t.is_empty()), "{o}");
        }
        epochs.push(
            objects
                .iter()
                .map(|o| o["key"].as_str().unwrap().to_string())
                .collect(),
        );
    }
    epochs
}

/// The payments as a Parquet file, through Weir's own Parquet encoder.
fn as_parquet(lines: &[u8]) -> Vec<u8> {
    let schema = weir_core::schema::arrow_schema(&weir_connectors::generator::payments::columns());
    let decoder =
        weir_core::json::JsonDecoder::new(schema, 1_000, weir_core::json::MalformedPolicy::Fail);
    let batches = decoder.decode_lines(lines, "payments").unwrap().batches;
    weir_connectors::parquet::sink::encode(&batches)
        .unwrap()
        .unwrap()
}

/// New objects are picked up by the next run, including one that arrived
/// late at an earlier key; markers and hidden objects are not input; JSON
/// lines and Parquet mix. The alerts are those of the same payments read
/// from a directory.
#[test]
#[ignore = "needs s3s-fs"]
fn the_s3_source_picks_up_new_objects_and_late_ones_at_earlier_keys() {
    let s3 = S3Server::start();
    let files = tempfile::tempdir().unwrap();
    write_input(files.path(), SEED, 4, PER_FILE);
    run_epochs(files.path(), &pipeline(files.path(), None)).unwrap();
    let expected = sorted_rows(files.path());
    assert!(expected.len() > 20, "the rules alert: {}", expected.len());

    let lake = tempfile::tempdir().unwrap();
    let toml = pipeline(lake.path(), Some(&s3));
    s3.put("day=1/payments-0001.jsonl", &payments(1));
    s3.put("day=1/payments-0003.jsonl", &payments(3));
    s3.put("day=1/_SUCCESS", b"not a payment");
    s3.put("day=1/.payments-0004.jsonl.tmp", b"{\"half a\":");
    s3.put("day=2/payments-0009.jsonl", b"another day");
    let first = run_epochs(lake.path(), &toml).unwrap();
    assert_eq!(first.len(), 2, "one epoch per object");

    // Arrives late, at an earlier key than those already read.
    s3.put("day=1/payments-0000.jsonl", &payments(0));
    s3.put("day=1/payments-0002.parquet", &as_parquet(&payments(2)));
    let second = run_epochs(lake.path(), &toml).unwrap();
    assert_eq!(second.len(), 2);
    for e in first.iter().chain(&second) {
        let backlog = e.backlog.expect("the source reports its backlog");
        assert_eq!(backlog.changed_files, Some(0), "nothing was overwritten");
    }
    assert!(
        run_epochs(lake.path(), &toml).unwrap().is_empty(),
        "nothing new"
    );

    let checkpoint = lake.path().join("checkpoint");
    assert_eq!(
        planned_keys(&checkpoint),
        [
            ["payments-0001.jsonl"],
            ["payments-0003.jsonl"],
            ["payments-0000.jsonl"],
            ["payments-0002.parquet"],
        ]
    );
    assert_eq!(
        sorted_rows(lake.path()),
        expected,
        "the alerts of the same payments"
    );
}

/// An object overwritten between an epoch's plan and its replay is refused
/// by name; with the planned bytes put back, the replay goes through.
#[test]
#[ignore = "needs s3s-fs"]
fn an_object_changed_before_its_epoch_is_replayed_is_refused_by_name() {
    let s3 = S3Server::start();
    let lake = tempfile::tempdir().unwrap();
    let toml = pipeline(lake.path(), Some(&s3));
    s3.put("day=1/payments-0000.jsonl", &payments(0));
    s3.put("day=1/payments-0001.jsonl", &payments(1));
    assert_eq!(run_epochs(lake.path(), &toml).unwrap().len(), 2);
    let out = sorted_rows(lake.path());

    // As a crash before epoch 1's commit leaves it: planned, to be replayed.
    let checkpoint = lake.path().join("checkpoint");
    std::fs::remove_file(checkpoint.join("commits/1")).unwrap();
    // The same lines in another order: the same size, another ETag.
    let original = payments(1);
    let mut reordered: Vec<&[u8]> = original
        .split_inclusive(|&b| b == b'\n')
        .collect::<Vec<_>>();
    reordered.reverse();
    s3.put("day=1/payments-0001.jsonl", &reordered.concat());
    let err = format!("{:#}", run_epochs(lake.path(), &toml).unwrap_err());
    assert!(
        err.contains(&format!(
            "input s3://{BUCKET}/day=1/payments-0001.jsonl was overwritten after it was planned"
        )),
        "{err}"
    );
    assert!(!checkpoint.join("commits/1").exists(), "nothing committed");

    s3.put("day=1/payments-0001.jsonl", &payments(1));
    let replayed = run_epochs(lake.path(), &toml).unwrap();
    assert_eq!(replayed.len(), 1, "epoch 1 again, nothing more");
    assert!(checkpoint.join("commits/1").exists());
    assert_eq!(sorted_rows(lake.path()), out, "the same alerts, once");
}
