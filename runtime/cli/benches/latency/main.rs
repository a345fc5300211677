//! `cargo bench -p weir-cli --bench latency`: event→alert latency of the
//! generator → `fraud-velocity` → file sink pipeline, micro-batch (100 ms
//! trigger) against real-time mode (one task and two), at several steady
//! rates, in one run on this machine; then each mode's maximum throughput over a backlog. The
//! latencies are the product's own (progress records' histograms: the
//! payment's generation time to the sink's acknowledgement), merged over
//! the run. No services needed.
//!
//! Then the same rates through a real broker ([`kafka`]): Kafka →
//! `fraud-velocity` → Kafka and → PostgreSQL, against a plain rdkafka
//! consume-and-forward loop (the floor), with the latency Weir adds.
//!
//! `WEIR_LATENCY_SECS` (default 10) sets the seconds per rate of the
//! generator table, `WEIR_LATENCY_KAFKA_SECS` (default 30) those of the
//! Kafka table (`0` skips it); `WEIR_LATENCY_RATES` (default
//! `5000,20000,50000`) the rates.

mod kafka;

use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::time::Instant;
use weir_core::latency::Histogram;
use weir_engine::config::PipelineConfig;
use weir_engine::OpenOptions;
use weir_host::WasmHost;

/// One task (fraud-velocity keeps keyed state: one is its default
/// without a `key`).
const ONE_TASK: &str = "parallelism = 1\n";
/// Two tasks, payments routed by card.
const TWO_TASKS: &str = "parallelism = 2\nkey = \"card_id\"\n";

/// Rows of the backlog the throughput runs work through.
const BACKLOG_ROWS: u64 = 300_000;

fn toml(dir: &Path, trigger: &str, rate: u64, rows: u64, start_ms: Option<i64>) -> String {
    let demo = weir_cli::demo::real_time_toml(7, rate, 1, weir_cli::demo::DemoOperator::Velocity);
    // The operator's table, up to the sinks (`[[sink]]` tables: the
    // velocity demo routes its named output too).
    let sinks = demo
        .find("[[sink]]")
        .or_else(|| demo.find("[sink]"))
        .unwrap();
    let operator = &demo[demo.find("[operator]").unwrap()..sinks];
    let start = start_ms.map_or(String::new(), |ms| format!("start_ms = {ms}"));
    format!(
        r#"name = "latency-bench"
checkpoint = "{dir}/checkpoint"
[trigger]
{trigger}
[source]
kind = "generator"
rate = {rate}
seed = 7
rows = {rows}
{start}
[event_time]
column = "ts"
allowed_lateness = "10s"
{operator}
[sink]
kind = "files"
path = "{dir}/alerts"
"#,
        dir = dir.display(),
        operator = operator.replace(
            "fraud_velocity.wasm",
            &format!("{}/fraud_velocity.wasm", weir_cli::GUEST_DIR)
        ),
    )
}

/// What one run measured.
struct Run {
    rows: u64,
    secs: f64,
    latency: Histogram,
}

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn ms(us: u64) -> String {
    format!("{:.1}", us as f64 / 1e3)
}

fn main() {
    let secs: u64 = env_or("WEIR_LATENCY_SECS", 10);
    let rates: Vec<u64> = std::env::var("WEIR_LATENCY_RATES")
        .unwrap_or_else(|_| "5000,20000,50000".into())
        .split(',')
        .filter_map(|r| r.trim().parse().ok())
        .collect();
    let host = WasmHost::new(weir_host::default_cache_root()).unwrap();
    let real_time = "mode = \"real-time\"\ncheckpoint_interval = \"1s\"";
    let modes = [
        (
            "micro-batch 100 ms",
            "mode = \"processing-time\"\ninterval = \"100ms\"",
            ONE_TASK,
        ),
        ("real-time", real_time, ONE_TASK),
        ("real-time, 2 tasks", real_time, TWO_TASKS),
    ];

    println!("\nevent→alert latency, generator → fraud-velocity → files ({secs} s per rate)\n");
    println!("| rate/s | mode | rows/s | alerts | p50 ms | p99 ms | p99.9 ms | max ms |");
    println!("|---|---|---|---|---|---|---|---|");
    for &rate in &rates {
        for (name, trigger, tasks) in modes {
            let dir = tempfile::tempdir().unwrap();
            let rows = rate * secs;
            let r = run(
                &host,
                &format!("{tasks}{}", toml(dir.path(), trigger, rate, rows, None)),
                dir.path(),
                rows,
            );
            println!(
                "| {rate} | {name} | {:.0} | {} | {} | {} | {} | {} |",
                r.rows as f64 / r.secs,
                r.latency.count(),
                ms(r.latency.quantile_us(0.5)),
                ms(r.latency.quantile_us(0.99)),
                ms(r.latency.quantile_us(0.999)),
                ms(r.latency.quantile_us(1.0)),
            );
        }
    }

    println!("\nmaximum throughput over a backlog of {BACKLOG_ROWS} payments\n");
    println!("| mode | rows/s | vs micro-batch |");
    println!("|---|---|---|");
    let past = weir_connectors::generator::payments::START_MS;
    let mut base = None;
    for (name, trigger, tasks) in [
        (
            "micro-batch (available-now)",
            "mode = \"available-now\"",
            ONE_TASK,
        ),
        (
            "micro-batch (available-now), 2 tasks",
            "mode = \"available-now\"",
            TWO_TASKS,
        ),
        ("real-time", real_time, ONE_TASK),
        ("real-time, 2 tasks", real_time, TWO_TASKS),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let toml = format!(
            "{tasks}{}",
            toml(dir.path(), trigger, 1_000_000, BACKLOG_ROWS, Some(past))
                .replace("rows = ", "max_rows_per_trigger = 20000\nrows = ")
        );
        let r = run(&host, &toml, dir.path(), BACKLOG_ROWS);
        let rate = r.rows as f64 / r.secs;
        let b = *base.get_or_insert(rate);
        println!("| {name} | {rate:.0} | {:.2}x |", rate / b);
    }

    let kafka_secs: u64 = env_or("WEIR_LATENCY_KAFKA_SECS", 30);
    if kafka_secs > 0 {
        kafka::run(&host, kafka_secs, &rates);
    }
}

/// Runs a pipeline over a source that ends after `rows` (real-time and
/// available-now stop by themselves; a processing-time trigger is stopped
/// once every row is in).
fn run(host: &WasmHost, toml: &str, dir: &Path, rows: u64) -> Run {
    let cfg = PipelineConfig::parse(toml, dir).unwrap();
    let mut pipeline = weir_engine::open(
        &cfg,
        host,
        OpenOptions {
            ephemeral_checkpoint_ok: true,
            ..Default::default()
        },
    )
    .unwrap();
    let stop = AtomicBool::new(false);
    let mut latency = Histogram::default();
    let mut seen = 0;
    let started = Instant::now();
    let summary = pipeline
        .run(host, &stop, &mut |p| {
            if let Some(h) = &p.latency_histogram {
                latency.merge(h);
            }
            seen += p.rows_in;
            if seen >= rows {
                stop.store(true, std::sync::atomic::Ordering::Relaxed);
            }
        })
        .unwrap();
    Run {
        rows: summary.rows_in,
        secs: started.elapsed().as_secs_f64(),
        latency,
    }
}
