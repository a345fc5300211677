//! Workers: how long a dead worker's partitions take to resume
//! elsewhere, and what 1, 2 and 3 workers get through. Real services on
//! 127.0.0.1: tansu (SQLite storage), s3s-fs and PostgreSQL; `weir run
//! --worker` processes of a `[cluster]` velocity pipeline over a
//! 6-partition topic.
//!
//! - **Throughput**: a backlog of payments, then N workers started at
//!   once; rows per second until every partition has committed all of it
//!   (group join and takeover included), and the ratio to one worker.
//! - **Latency**: N workers under a steady feed of payments stamped with
//!   their production time (`weir feed`), each new query starting at the
//!   topic's end; the event → sink latency of the alerts (each epoch's
//!   p99, `[event_time]`), median and max over the epochs of a 20 s
//!   window.
//! - **Takeover**: three workers under a steady feed; a worker that runs
//!   partitions is killed with SIGKILL, and for each of its partitions the
//!   time until a survivor commits an epoch of it is measured; the worker
//!   is then started again and the group settles. Median and max over the
//!   kills. Two cores bound the throughput here; the takeover time is
//!   mostly the session timeout (6 s) and a rebalance.
//!
//! `cargo bench -p weir-cli --bench takeover` (`WEIR_BENCH_KILLS`, default 5).

use weir_test_support::{broker, pg, s3, worker};

use broker::Broker;
use pg::PgServer;
use s3::{S3Server, BUCKET};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use weir_cli::feed::{feed, FeedOptions};
use worker::Worker;

const TOPIC: &str = "payments";
const PARTITIONS: u32 = 6;
const SESSION: &str = "6s";

fn main() {
    let (broker, s3, pg) = (Broker::start(), S3Server::start(), PgServer::start());
    broker.create_topic(TOPIC, PARTITIONS);
    let dir = tempfile::tempdir().unwrap();
    let backlog = 30_000;
    produce(&broker, backlog, None, 0);
    println!("workers  rows/s   vs 1 worker   (backlog of {backlog} payments, join included)");
    let mut base = None;
    for n in 1..=3 {
        let file = pipeline(dir.path(), &broker, &s3, &pg, &format!("run{n}"), "");
        let started = Instant::now();
        let mut workers: Vec<Worker> = (0..n)
            .map(|i| Worker::start(dir.path(), &file, &format!("run{n}-w{i}"), &s3))
            .collect();
        wait(Duration::from_secs(600), || {
            workers.iter().map(Worker::rows_in).sum::<u64>() >= backlog
        });
        let rate = backlog as f64 / started.elapsed().as_secs_f64();
        let base = *base.get_or_insert(rate);
        println!("{n:>7}  {rate:>7.0}   {:>5.2}x", rate / base);
        workers.iter_mut().for_each(Worker::kill);
    }
    latency(&broker, &s3, &pg, dir.path());
    takeover(&broker, &s3, &pg, dir.path());
}

/// Payments per second of the latency and takeover phases' feeds.
const RATE: u64 = 400;

/// How long the latency of a worker count is watched for.
const WATCH: Duration = Duration::from_secs(20);

/// N = 1, 2, 3 workers under a steady feed: the alerts' event → sink p99.
fn latency(broker: &Broker, s3: &S3Server, pg: &PgServer, dir: &Path) {
    println!(
        "
workers  epochs  alerts  event->sink p99 per epoch: median  max   (steady {RATE} payments/s, {WATCH:?})"
    );
    let extra =
        "starting_offsets = \"latest\"\n[event_time]\ncolumn = \"ts\"\nallowed_lateness = \"1h\"";
    for n in 1..=3u64 {
        let file = pipeline(dir, broker, s3, pg, &format!("lat{n}"), extra);
        let mut workers: Vec<Worker> = (0..n)
            .map(|i| Worker::start(dir, &file, &format!("lat{n}-w{i}"), s3))
            .collect();
        let stop = Arc::new(AtomicBool::new(false));
        let feeder = steady_feed(broker, 2_000_000 * n, stop.clone());
        let marks = settle(&workers);
        std::thread::sleep(WATCH);
        let mut p99s: Vec<f64> = Vec::new();
        let mut epochs = 0;
        let mut alerts = 0;
        for (w, &mark) in workers.iter().zip(&marks) {
            for line in w.progress_since(mark).lines() {
                epochs += 1;
                alerts += line
                    .split(" out ")
                    .nth(1)
                    .and_then(|r| r.split_whitespace().next()?.parse::<u64>().ok())
                    .unwrap_or(0);
                if let Some(ms) = line
                    .split("latency p99 ")
                    .nth(1)
                    .and_then(|r| r.split_whitespace().next()?.parse::<f64>().ok())
                {
                    p99s.push(ms);
                }
            }
        }
        p99s.sort_by(f64::total_cmp);
        let (median, max) = match p99s.last() {
            Some(max) => (p99s[p99s.len() / 2], *max),
            None => (f64::NAN, f64::NAN),
        };
        println!("{n:>7}  {epochs:>6}  {alerts:>6}  {median:>7.1} ms  {max:>7.1} ms");
        stop.store(true, Ordering::Relaxed);
        feeder.join().unwrap();
        workers.iter_mut().for_each(Worker::kill);
    }
}

/// Feeds [`RATE`] payments a second from payment `start` on, a second's
/// worth at a time, until `stop`.
fn steady_feed(broker: &Broker, start: u64, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<()> {
    let bootstrap = broker.bootstrap();
    std::thread::spawn(move || {
        let mut next = start;
        while !stop.load(Ordering::Relaxed) {
            feed(&FeedOptions {
                bootstrap_servers: bootstrap.clone(),
                topic: TOPIC.into(),
                payments: RATE,
                rate: Some(RATE),
                seed: 11,
                start: next,
            })
            .unwrap();
            next += RATE;
        }
    })
}

/// Three workers under a steady feed, killed one at a time.
fn takeover(broker: &Broker, s3: &S3Server, pg: &PgServer, dir: &Path) {
    let kills: usize = std::env::var("WEIR_BENCH_KILLS")
        .ok()
        .and_then(|k| k.parse().ok())
        .unwrap_or(5);
    let file = pipeline(dir, broker, s3, pg, "takeover", "");
    let stop = Arc::new(AtomicBool::new(false));
    let feeder = steady_feed(broker, 1_000_000, stop.clone());
    let mut workers: Vec<Worker> = (0..3)
        .map(|i| Worker::start(dir, &file, &format!("t{i}"), s3))
        .collect();
    let all: BTreeSet<i32> = (0..PARTITIONS as i32).collect();
    wait(Duration::from_secs(120), || {
        workers.iter().all(|w| !w.committed().is_empty())
            && workers
                .iter()
                .flat_map(Worker::committed)
                .collect::<BTreeSet<_>>()
                == all
    });
    // Progress marks from which each worker's commits show what it runs now.
    let mut settled = settle(&workers);
    let mut times = Vec::new();
    println!(
        "\nkill  worker  partitions  takeover (kill -9 -> first committed epoch on a survivor)"
    );
    for k in 0..kills {
        let victim = k % workers.len();
        let owned = workers[victim].committed_since(settled[victim]);
        let marks: Vec<usize> = workers.iter().map(Worker::mark).collect();
        workers[victim].kill();
        let killed = Instant::now();
        let mut took = Vec::new();
        for &p in &owned {
            wait(Duration::from_secs(120), || {
                workers
                    .iter()
                    .zip(&marks)
                    .any(|(w, &mark)| w.is_running() && w.committed_since(mark).contains(&p))
            });
            took.push(killed.elapsed());
        }
        let max = took.iter().max().copied().unwrap_or_default();
        println!(
            "{k:>4}  {:>6}  {owned:?}  {:.2?}",
            workers[victim].name, max
        );
        times.extend(took);
        let name = workers[victim].name.clone();
        workers[victim] = Worker::start(dir, &file, &name, s3);
        settled = settle(&workers);
    }
    times.sort();
    if let (Some(max), false) = (times.last(), times.is_empty()) {
        println!(
            "takeover over {} moved partitions: median {:.2?}, max {:.2?} (session timeout {SESSION})",
            times.len(),
            times[times.len() / 2],
            max
        );
    }
    stop.store(true, Ordering::Relaxed);
    feeder.join().unwrap();
    workers.iter_mut().for_each(Worker::kill);
}

/// `n` payments keyed by card (librdkafka's partitioner spreads the cards).
fn produce(broker: &Broker, n: u64, rate: Option<u64>, start: u64) {
    feed(&FeedOptions {
        bootstrap_servers: broker.bootstrap(),
        topic: TOPIC.into(),
        payments: n,
        rate,
        seed: 7,
        start,
    })
    .unwrap();
}

/// The velocity pipeline over the topic as a cluster (its own group and
/// checkpoint prefix per `name`), alerts into PostgreSQL; `extra` is TOML
/// for the end of `[source]` (more source keys, then more tables).
fn pipeline(
    dir: &Path,
    broker: &Broker,
    s3: &S3Server,
    pg: &PgServer,
    name: &str,
    extra: &str,
) -> PathBuf {
    let toml = format!(
        r#"name = "{name}"
checkpoint = "s3://{BUCKET}/{name}"
checkpoint_cache = "{dir}/cache-{name}"
[trigger]
mode = "processing-time"
interval = "200ms"
[source]
kind = "kafka"
bootstrap_servers = "{bootstrap}"
topics = ["{TOPIC}"]
max_offsets_per_trigger = 5000
{schema}
{extra}
[operator]
path = "{op}"
config = {{ alert_threshold = 0.7, rules = [ {{ rule = "amount_above", threshold = 2500.0, weight = 0.5 }} ], velocity = {{ window_ms = 60000, max_payments = 5, weight = 0.7 }} }}
[sink]
kind = "postgres"
url = "{url}"
table = "alerts_{name}"
[state]
snapshot_every = 5
[cluster]
group = "{name}"
session_timeout = "{SESSION}"
{store}"#,
        dir = dir.display(),
        bootstrap = broker.bootstrap(),
        schema = weir_connectors::generator::payments::SCHEMA_TOML,
        op = Path::new(weir_cli::GUEST_DIR)
            .join("fraud_velocity.wasm")
            .display(),
        url = pg.url("postgres"),
        store = s3.settings_toml(),
    );
    let file = dir.join(format!("{name}.toml"));
    std::fs::write(&file, toml).unwrap();
    file
}

/// Waits until every worker commits an epoch after this moment (past any
/// rebalance in flight); returns the progress marks of this moment.
fn settle(workers: &[Worker]) -> Vec<usize> {
    let marks: Vec<usize> = workers.iter().map(Worker::mark).collect();
    wait(Duration::from_secs(120), || {
        workers
            .iter()
            .zip(&marks)
            .all(|(w, &mark)| !w.committed_since(mark).is_empty())
    });
    marks
}

fn wait(limit: Duration, done: impl Fn() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < limit, "not done after {limit:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}
