//! `cargo bench -p weir-runtime --bench kafka`: Kafka → fraud-rules (Wasm) →
//! file sink against a real tansu broker on 127.0.0.1 (started and stopped
//! here). Prints records/s end to end next to a plain consumer reading the
//! same records in the same run, and the produce→sink latency p50/p99 of
//! alerts at a steady produce rate with a 100 ms trigger.

use weir_test_support::broker;

use rdkafka::consumer::{BaseConsumer, Consumer};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use weir_cli::feed::{feed, FeedOptions};
use weir_engine::config::PipelineConfig;
use weir_engine::OpenOptions;
use weir_host::WasmHost;

const THROUGHPUT_RECORDS: u64 = 200_000;
const RATE: u64 = 2_000;
const LATENCY_SECS: u64 = 15;

fn toml(dir: &std::path::Path, bootstrap: &str, topic: &str, trigger: &str) -> String {
    let demo = weir_cli::demo::pipeline_toml(1, weir_cli::demo::DemoOperator::Rules);
    let ops = &demo[demo.find("[operator]").unwrap()..demo.find("[sink]").unwrap()];
    format!(
        r#"name = "kafka-bench"
checkpoint = "{dir}/checkpoint"
[trigger]
{trigger}
[source]
kind = "kafka"
bootstrap_servers = "{bootstrap}"
topics = ["{topic}"]
max_offsets_per_trigger = 50000
{schema}
{ops}
[sink]
kind = "files"
path = "{dir}/alerts"
"#,
        dir = dir.display(),
        schema = weir_connectors::generator::payments::SCHEMA_TOML,
        ops = ops.replace(
            "fraud_rules.wasm",
            &format!("{}/fraud_rules.wasm", weir_cli::GUEST_DIR)
        ),
    )
}

fn plain_consume(bootstrap: &str, topic: &str, expected: u64) -> Duration {
    let c: BaseConsumer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "bench-plain")
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest")
        .create()
        .unwrap();
    c.subscribe(&[topic]).unwrap();
    let started = Instant::now();
    let mut n = 0;
    while n < expected {
        if let Some(Ok(_)) = c.poll(Duration::from_millis(100)) {
            n += 1;
        }
        assert!(
            started.elapsed() < Duration::from_secs(300),
            "plain consumer stalled at {n}"
        );
    }
    started.elapsed()
}

fn open(cfg: &PipelineConfig, host: &WasmHost) -> weir_engine::pipeline::Pipeline {
    let opts = OpenOptions {
        ephemeral_checkpoint_ok: true,
        ..Default::default()
    };
    weir_engine::open(cfg, host, opts).unwrap()
}

fn percentile(sorted: &[i64], p: f64) -> i64 {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn main() {
    let broker = broker::Broker::start();
    let host = WasmHost::new(None).unwrap();

    // Throughput.
    broker.create_topic("bench", 3);
    let opts = FeedOptions {
        bootstrap_servers: broker.bootstrap(),
        topic: "bench".into(),
        payments: THROUGHPUT_RECORDS,
        rate: None,
        seed: 7,
        start: 0,
    };
    feed(&opts).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cfg = PipelineConfig::parse(
        &toml(
            dir.path(),
            &broker.bootstrap(),
            "bench",
            "mode = \"available-now\"",
        ),
        dir.path(),
    )
    .unwrap();
    let mut p = open(&cfg, &host);
    let summary = p.run(&host, &AtomicBool::new(false), &mut |_| {}).unwrap();
    assert_eq!(summary.rows_in, THROUGHPUT_RECORDS);
    let plain = plain_consume(&broker.bootstrap(), "bench", THROUGHPUT_RECORDS);

    // Latency at a steady rate.
    broker.create_topic("lat", 3);
    let dir = tempfile::tempdir().unwrap();
    let cfg = PipelineConfig::parse(
        &toml(
            dir.path(),
            &broker.bootstrap(),
            "lat",
            "mode = \"processing-time\"\ninterval = \"100ms\"",
        ),
        dir.path(),
    )
    .unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let runner = {
        let (stop, cfg) = (stop.clone(), cfg.clone());
        std::thread::spawn(move || {
            let host = WasmHost::new(None).unwrap();
            let mut p = open(&cfg, &host);
            p.run(&host, &stop, &mut |_| {}).unwrap()
        })
    };
    let total = RATE * LATENCY_SECS;
    feed(&FeedOptions {
        topic: "lat".into(),
        payments: total,
        rate: Some(RATE),
        ..opts
    })
    .unwrap();
    let commits = dir.path().join("checkpoint/commits");
    let committed_rows = || {
        weir_core::checkpoint::Checkpoint::inspect(&dir.path().join("checkpoint"))
            .and_then(|c| c.committed_rows())
            .unwrap_or(0)
    };
    let waited = Instant::now();
    while committed_rows() < total {
        assert!(
            waited.elapsed() < Duration::from_secs(120),
            "pipeline fell behind"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    stop.store(true, Ordering::Relaxed);
    let lat_summary = runner.join().unwrap();
    let mut latencies = Vec::new();
    for epoch in 0..lat_summary.epochs {
        let commit: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(commits.join(epoch.to_string())).unwrap(),
        )
        .unwrap();
        let at = commit["committed_at_ms"].as_i64().unwrap();
        let file = dir.path().join(format!("alerts/epoch-{epoch:010}.jsonl"));
        for line in std::fs::read_to_string(file).unwrap_or_default().lines() {
            let alert: serde_json::Value = serde_json::from_str(line).unwrap();
            latencies.push(at - alert["ts"].as_i64().unwrap());
        }
    }
    latencies.sort_unstable();

    let rate = |n: u64, d: Duration| n as f64 / d.as_secs_f64();
    println!("\nweir Kafka benchmark (tansu 0.6 on 127.0.0.1, SQLite storage)\n");
    println!("| {:<52} | {:>14} |", "measure", "value");
    println!("|{}|{}|", "-".repeat(54), "-".repeat(16));
    println!(
        "| {:<52} | {:>10.0} r/s |",
        "Kafka -> fraud-rules (Wasm) -> file sink, end to end",
        rate(summary.rows_in, summary.elapsed)
    );
    println!(
        "| {:<52} | {:>10.0} r/s |",
        "plain rdkafka consumer, same records (baseline)",
        rate(THROUGHPUT_RECORDS, plain)
    );
    println!(
        "| {:<52} | {:>13.2}x |",
        "pipeline time / plain consume time",
        summary.elapsed.as_secs_f64() / plain.as_secs_f64()
    );
    println!(
        "| {:<52} | {:>11} ms |",
        format!(
            "produce->sink latency p50 ({} alerts, {RATE}/s, 100ms trigger)",
            latencies.len()
        ),
        percentile(&latencies, 0.5)
    );
    println!(
        "| {:<52} | {:>11} ms |",
        "produce->sink latency p99",
        percentile(&latencies, 0.99)
    );
}
