//! Batch parity: the fraud team's check before they switch from
//! their batch job. The same operator over the same day of payments gives
//! the same alerts read two ways: as a stream from Kafka in real-time mode
//! while the payments are produced, and as a batch over the day's objects
//! in an S3-compatible store with the `available-now` trigger.

use crate::common::broker::Broker;
use crate::common::s3::{S3Server, BUCKET};
use crate::common::{canonical_rows, guest, run_epochs, VELOCITY_CONFIG};
use std::path::Path;
use weir_connectors::generator::payments::{json_lines, payment, SCHEMA_TOML};

const SEED: u64 = 31;
const HOURS: u64 = 8;
const PER_HOUR: u64 = 1_000;

/// The velocity pipeline (each card's payments to one task) over `source`.
fn pipeline(dir: &Path, trigger: &str, source: &str) -> String {
    format!(
        r#"name = "parity"
checkpoint = "{dir}/checkpoint"
key = "card_id"
batch_rows = 500
[trigger]
{trigger}
[source]
{source}
{SCHEMA_TOML}
[operator]
path = "{op}"
config = {VELOCITY_CONFIG}
[sink]
kind = "files"
path = "{dir}/out"
"#,
        dir = dir.display(),
        op = guest("fraud_velocity").display(),
    )
}

#[test]
#[ignore = "needs tansu and s3s-fs"]
fn a_day_of_objects_read_as_a_batch_gives_the_alerts_of_the_streaming_run() {
    // Streaming: the payments produced hour by hour while a real-time
    // pipeline reads them (a card's payments in one partition, in order).
    let broker = Broker::start();
    broker.create_topic("payments", 3);
    let live = tempfile::tempdir().unwrap();
    let kafka = format!(
        "kind = \"kafka\"\nbootstrap_servers = \"{}\"\ntopics = [\"payments\"]\ntimeout = \"1s\"",
        broker.bootstrap()
    );
    let trigger = "mode = \"real-time\"\ncheckpoint_interval = \"200ms\"";
    let runner =
        crate::common::Background::start(live.path(), pipeline(live.path(), trigger, &kafka));
    for hour in 0..HOURS {
        let rows: Vec<_> = (hour * PER_HOUR..(hour + 1) * PER_HOUR)
            .map(|i| payment(SEED, i).0)
            .collect();
        let values: Vec<Vec<u8>> = rows
            .iter()
            .map(|p| serde_json::to_vec(p).unwrap())
            .collect();
        broker.produce("payments", &values, |i| {
            (rows[i].card_id.bytes().map(u32::from).sum::<u32>() % 3) as i32
        });
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let ck = live.path().join("checkpoint");
    crate::common::wait_for("the day's payments", || {
        crate::common::committed_rows(&ck) >= HOURS * PER_HOUR
    });
    let summary = runner.stop().unwrap();
    assert_eq!(summary.rows_in, HOURS * PER_HOUR);

    // Batch: the same payments as the day's objects, one per hour.
    let s3 = S3Server::start();
    for hour in 0..HOURS {
        let key = format!("payments/day=2026-12-01/hour={hour:02}/part-0.jsonl");
        s3.put(&key, &json_lines(SEED, hour * PER_HOUR, PER_HOUR));
    }
    let batch = tempfile::tempdir().unwrap();
    let objects = format!(
        "kind = \"s3\"\nurl = \"s3://{BUCKET}/payments/day=2026-12-01\"\n\
         endpoint = \"http://127.0.0.1:{}\"\nallow_http = true\nmax_files_per_trigger = 2",
        s3.port
    );
    let epochs = run_epochs(
        batch.path(),
        &pipeline(batch.path(), "mode = \"available-now\"", &objects),
    )
    .unwrap();
    assert_eq!(epochs.len() as u64, HOURS / 2, "two hours per epoch");

    let streamed = canonical_rows(&live.path().join("out"));
    assert!(streamed.len() > 20, "{} alerts", streamed.len());
    assert!(
        streamed.iter().any(|a| a.contains("velocity")),
        "the velocity rule, which spans epochs, fired"
    );
    assert_eq!(
        canonical_rows(&batch.path().join("out")),
        streamed,
        "the batch over the day's objects agrees with the stream"
    );
}
