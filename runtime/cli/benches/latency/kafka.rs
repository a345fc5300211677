//! The Kafka part of the latency bench: a real tansu broker (in-memory
//! storage: its SQLite storage tops out at a few thousand records/s) and a real
//! PostgreSQL server on 127.0.0.1 (started and stopped here). At each rate
//! a producer in this process sends payments for `secs` seconds, noting
//! each one's send time; a watcher notes when each output row becomes
//! visible — delivered to a consumer of the output topic, or committed to
//! the table (a trigger's `pg_notify`, which PostgreSQL delivers at
//! commit). Latency = visible − sent, per output row, with this process's
//! monotonic clock on both ends.
//!
//! Three systems read the same kind of topic in turn, in the same run:
//! **floor** — a plain rdkafka consume-and-forward loop (fetch settings as
//! Weir's live reader; forwards the payments above 2,500 made abroad; a
//! flush or one INSERT per poll); **micro-batch** — Weir with a 100 ms
//! trigger; **real-time** — Weir in real-time mode. Weir runs
//! `fraud-velocity` (a per-card count in keyed state, updated for every
//! payment) with weights that alert on exactly the floor's payments, so
//! both emit the same rows whatever the rate (the generator's 5,000 cards
//! would trip the velocity rule on most payments at 50,000/s).
//!
//! The first [`WARM_UP_SECS`] of each run are not measured (connections,
//! metadata, the first compilation).

use weir_test_support::{broker, pg};

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::producer::{
    BaseProducer, BaseRecord, DefaultProducerContext, Producer, ThreadedProducer,
};
use rdkafka::{ClientConfig, Offset, TopicPartitionList};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use weir_core::latency::Histogram;
use weir_engine::config::PipelineConfig;
use weir_engine::OpenOptions;
use weir_host::WasmHost;

/// Where output goes.
#[derive(Clone, Copy, PartialEq)]
enum Out {
    Kafka,
    Postgres,
}

/// What reads the input.
#[derive(Clone, Copy, PartialEq)]
enum System {
    Floor,
    MicroBatch,
    RealTime,
}

impl System {
    fn name(self) -> &'static str {
        match self {
            System::Floor => "floor (plain rdkafka)",
            System::MicroBatch => "Weir micro-batch 100 ms",
            System::RealTime => "Weir real-time",
        }
    }
}

/// Where one run reads and writes: its broker, topics and table.
#[derive(Clone)]
struct Route {
    bootstrap: String,
    input: String,
    out: Out,
    /// The output topic (Kafka output).
    output: String,
    /// The PostgreSQL server and the alerts table (PostgreSQL output).
    url: String,
    table: String,
}

/// One measured run.
struct Measured {
    /// Payments the system read, of `sent`.
    read: u64,
    sent: u64,
    /// Output rows measured (sent after the warm-up).
    rows_out: u64,
    latency: Histogram,
    /// Weir's own event→emit histogram (progress records), for comparison.
    own: Option<Histogram>,
    kept_up: bool,
}

/// Send times, by payment number, in µs since `clock`.
struct Sent {
    clock: Instant,
    at: Vec<AtomicU64>,
    /// Payments before this one were sent during the warm-up.
    measured_from: usize,
}

impl Sent {
    /// How long ago payment `txn_id` was sent, if it counts.
    fn latency_of(&self, txn_id: &str) -> Option<u64> {
        let i: usize = txn_id.rsplit('-').next()?.parse().ok()?;
        if i < self.measured_from {
            return None;
        }
        let sent = self.at.get(i)?.load(Ordering::Relaxed);
        let now = self.clock.elapsed().as_micros() as u64;
        (sent > 0).then(|| now.saturating_sub(sent))
    }
}

const SEED: u64 = 7;

/// Seconds of each run before latencies count.
const WARM_UP_SECS: u64 = 2;

/// `fraud-velocity`'s config: alerts (score ≥ 0.7) exactly on payments
/// above 2,500 made abroad; the velocity count runs but cannot alert alone.
const OPERATOR_CONFIG: &str = r#"{ alert_threshold = 0.7, rules = [
  { rule = "amount_above", threshold = 2500.0, weight = 0.5 },
  { rule = "country_mismatch", weight = 0.4 } ],
  velocity = { window_ms = 60000, max_payments = 5, weight = 0.1 } }"#;

/// Runs the Kafka table: every rate, both outputs, the three systems.
pub fn run(host: &WasmHost, secs: u64, rates: &[u64]) {
    let pg = pg::PgServer::start();
    println!(
        "\nproduce→visible latency, Kafka (tansu) → fraud-velocity → Kafka / PostgreSQL \
         ({secs} s per row)\n"
    );
    println!(
        "| output | rate/s | system | payments read | alerts measured | p50 ms | p99 ms | p99.9 ms | max ms | Weir's own p99 ms |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    let mut added = Vec::new();
    let mut id = 0;
    for out in [Out::Kafka, Out::Postgres] {
        for &rate in rates {
            let mut floor = None;
            for system in [System::Floor, System::MicroBatch, System::RealTime] {
                id += 1;
                let m = measure(host, &pg, id, out, system, rate, secs);
                print_row(out, rate, system, &m);
                match system {
                    System::Floor => floor = Some(m.latency),
                    System::RealTime => {
                        if let Some(f) = &floor {
                            added.push((out, rate, f.clone(), m.latency));
                        }
                    }
                    System::MicroBatch => {}
                }
            }
        }
    }
    println!("\nWeir-added latency = real-time − floor, per percentile\n");
    println!("| output | rate/s | p50 ms | p99 ms | p99.9 ms |");
    println!("|---|---|---|---|---|");
    for (out, rate, floor, weir) in added {
        let d = |q| {
            let (w, f) = (weir.quantile_us(q) as f64, floor.quantile_us(q) as f64);
            format!("{:.1}", (w - f) / 1e3)
        };
        println!(
            "| {} | {rate} | {} | {} | {} |",
            out_name(out),
            d(0.5),
            d(0.99),
            d(0.999)
        );
    }
}

fn out_name(out: Out) -> &'static str {
    match out {
        Out::Kafka => "Kafka",
        Out::Postgres => "PostgreSQL",
    }
}

fn print_row(out: Out, rate: u64, system: System, m: &Measured) {
    let ms = |us: u64| format!("{:.1}", us as f64 / 1e3);
    let h = &m.latency;
    println!(
        "| {} | {rate} | {}{} | {}/{} | {} | {} | {} | {} | {} | {} |",
        out_name(out),
        system.name(),
        if m.kept_up { "" } else { " (fell behind)" },
        m.read,
        m.sent,
        m.rows_out,
        ms(h.quantile_us(0.5)),
        ms(h.quantile_us(0.99)),
        ms(h.quantile_us(0.999)),
        ms(h.quantile_us(1.0)),
        m.own
            .as_ref()
            .map_or("-".into(), |o| ms(o.quantile_us(0.99))),
    );
}

fn measure(
    host: &WasmHost,
    pg: &pg::PgServer,
    id: u32,
    out: Out,
    system: System,
    rate: u64,
    secs: u64,
) -> Measured {
    // A fresh broker each run: tansu's in-memory storage slows down as it
    // fills (fetch latency doubled over one bench run with one broker).
    let broker = broker::Broker::start_in_memory();
    let route = Route {
        bootstrap: broker.bootstrap(),
        input: format!("in{id}"),
        out,
        output: format!("out{id}"),
        url: pg.url("postgres"),
        table: format!("alerts{id}"),
    };
    broker.create_topic(&route.input, 3);
    broker.create_topic(&route.output, 1);
    if out == Out::Postgres {
        pg.execute(&notifying_table(&route.table));
    }
    let total = rate * (secs + WARM_UP_SECS);
    let sent = Arc::new(Sent {
        clock: Instant::now(),
        at: (0..total).map(|_| AtomicU64::new(0)).collect(),
        measured_from: (rate * WARM_UP_SECS) as usize,
    });
    let stop = Arc::new(AtomicBool::new(false));
    let watcher = {
        let (sent, stop, r) = (sent.clone(), stop.clone(), route.clone());
        std::thread::spawn(move || match out {
            Out::Kafka => watch_topic(&r.bootstrap, &r.output, &sent, &stop),
            Out::Postgres => watch_table(&r.url, &r.table, &sent, &stop),
        })
    };
    let dir = tempfile::tempdir().unwrap();
    let done = Arc::new(AtomicU64::new(0));
    let own = Arc::new(Mutex::new(Histogram::default()));
    let reader = {
        let (stop, done, own, r) = (stop.clone(), done.clone(), own.clone(), route.clone());
        let toml = weir_toml(dir.path(), &route, system);
        let (host, base) = (host.clone(), dir.path().to_path_buf());
        std::thread::spawn(move || match system {
            System::Floor => floor(&r, &stop, &done),
            _ => weir(&host, base, &toml, &stop, &done, &own),
        })
    };
    produce(&route.bootstrap, &route.input, rate, total, &sent);
    // Until every payment is in, or none came in for 3 s: tansu's
    // in-memory storage reports a high watermark a few records short of
    // the log's end until more records arrive, so micro-batch epochs
    // (planned from watermarks) may never see the very last records.
    let (mut seen, mut since) = (0, Instant::now());
    while done.load(Ordering::Relaxed) < total && since.elapsed() < Duration::from_secs(3) {
        std::thread::sleep(Duration::from_millis(20));
        let now = done.load(Ordering::Relaxed);
        if now != seen {
            (seen, since) = (now, Instant::now());
        }
    }
    let read = done.load(Ordering::Relaxed);
    let kept_up = read as f64 >= total as f64 * 0.999;
    std::thread::sleep(Duration::from_millis(500)); // the last rows reach the watcher
    stop.store(true, Ordering::Relaxed);
    reader.join().unwrap();
    let (rows_out, latency) = watcher.join().unwrap();
    let own = (system != System::Floor).then(|| own.lock().unwrap().clone());
    drop(dir);
    Measured {
        read,
        sent: total,
        rows_out,
        latency,
        own,
        kept_up,
    }
}

/// The alerts table, with a trigger that notifies `<table>` with each
/// row's `txn_id` (delivered when the inserting transaction commits).
fn notifying_table(table: &str) -> String {
    format!(
        "CREATE TABLE {table} (txn_id text, card_id text, amount double precision, \
         score double precision, reasons text, ts bigint, window_count bigint);
         CREATE FUNCTION notify_{table}() RETURNS trigger AS $$
           BEGIN PERFORM pg_notify('{table}', NEW.txn_id); RETURN NEW; END $$ LANGUAGE plpgsql;
         CREATE TRIGGER notify AFTER INSERT ON {table}
           FOR EACH ROW EXECUTE FUNCTION notify_{table}();"
    )
}

/// Sends `total` payments at `rate` per second, keyed by card, each one's
/// send time noted just before it is handed to the client.
fn produce(bootstrap: &str, topic: &str, rate: u64, total: u64, sent: &Sent) {
    let producer: ThreadedProducer<DefaultProducerContext> = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("acks", "all")
        .set("enable.idempotence", "true")
        // tansu answers one request at a time: with no linger, a request
        // per record queues up behind it (p99 of seconds at 5,000/s).
        .set("linger.ms", "5")
        .create()
        .unwrap();
    let started = Instant::now();
    let mut n = 0;
    while n < total {
        let due = ((started.elapsed().as_secs_f64() * rate as f64) as u64).min(total);
        if n >= due {
            std::thread::sleep(Duration::from_micros(200));
            continue;
        }
        for i in n..due {
            let (mut p, _) = weir_connectors::generator::payments::payment(SEED, i);
            p.ts = weir_core::clock::now_ms();
            let value = serde_json::to_vec(&p).unwrap();
            sent.at[i as usize].store(sent.clock.elapsed().as_micros() as u64, Ordering::Relaxed);
            let record = BaseRecord::to(topic)
                .key(p.card_id.as_str())
                .payload(value.as_slice());
            weir_connectors::kafka::send_blocking(&producer, record).unwrap();
        }
        n = due;
    }
    producer.flush(Duration::from_secs(30)).unwrap();
}

/// A consumer of every partition of `topic` from its start, with the
/// latency settings of Weir's live reader.
fn consumer_of(bootstrap: &str, topic: &str) -> BaseConsumer {
    let c: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "latency-bench")
        .set("enable.auto.commit", "false")
        .set("fetch.wait.max.ms", "1")
        .set("fetch.queue.backoff.ms", "10")
        .create()
        .unwrap();
    let md = c
        .fetch_metadata(Some(topic), Duration::from_secs(10))
        .unwrap();
    let mut tpl = TopicPartitionList::new();
    for p in md.topics()[0].partitions() {
        tpl.add_partition_offset(topic, p.id(), Offset::Beginning)
            .unwrap();
    }
    c.assign(&tpl).unwrap();
    c
}

/// Output rows as a consumer of `topic` gets them: (rows, latency).
fn watch_topic(bootstrap: &str, topic: &str, sent: &Sent, stop: &AtomicBool) -> (u64, Histogram) {
    let c = consumer_of(bootstrap, topic);
    let mut h = Histogram::default();
    while !stop.load(Ordering::Relaxed) {
        let Some(Ok(m)) = c.poll(Duration::from_millis(10)) else {
            continue;
        };
        let Some(Ok(row)) = m.payload().map(serde_json::from_slice::<serde_json::Value>) else {
            continue;
        };
        if let Some(us) = row["txn_id"].as_str().and_then(|t| sent.latency_of(t)) {
            h.record(us);
        }
    }
    (h.count(), h)
}

/// Output rows as they commit to `table` (its trigger's notifications).
fn watch_table(url: &str, table: &str, sent: &Sent, stop: &AtomicBool) -> (u64, Histogram) {
    let mut client = postgres::Client::connect(url, postgres::NoTls).unwrap();
    client.batch_execute(&format!("LISTEN {table}")).unwrap();
    let mut h = Histogram::default();
    while !stop.load(Ordering::Relaxed) {
        let mut notes = client.notifications();
        let mut it = notes.timeout_iter(Duration::from_millis(50));
        while let Ok(Some(n)) = postgres::fallible_iterator::FallibleIterator::next(&mut it) {
            if let Some(us) = sent.latency_of(n.payload()) {
                h.record(us);
            }
        }
    }
    (h.count(), h)
}

/// The floor: consume, keep the payments above 2,500, forward them (one
/// flush or one INSERT per poll), until `stop`.
fn floor(r: &Route, stop: &AtomicBool, done: &AtomicU64) {
    let c = consumer_of(&r.bootstrap, &r.input);
    // A `BaseProducer`, whose delivery reports are polled here until none
    // is outstanding: rdkafka's `flush` polls until its 100 ms slice ends.
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", &r.bootstrap)
        .set("acks", "all")
        .set("enable.idempotence", "true")
        .set("linger.ms", "0")
        .create()
        .unwrap();
    let mut pg = (r.out == Out::Postgres)
        .then(|| postgres::Client::connect(&r.url, postgres::NoTls).unwrap());
    while !stop.load(Ordering::Relaxed) {
        let mut kept: Vec<serde_json::Value> = Vec::new();
        let mut n = 0;
        let mut wait = Duration::from_millis(1);
        while let Some(Ok(m)) = c.poll(wait) {
            wait = Duration::ZERO;
            n += 1;
            let row: serde_json::Value = serde_json::from_slice(m.payload().unwrap()).unwrap();
            let abroad = row["country"] != row["card_country"];
            if abroad && row["amount"].as_f64().unwrap_or(0.0) > 2_500.0 {
                kept.push(row);
            }
            if n >= 10_000 {
                break;
            }
        }
        if !kept.is_empty() {
            match &mut pg {
                Some(client) => insert(client, &r.table, &kept),
                None => {
                    for row in &kept {
                        let value = row.to_string();
                        let mut record =
                            BaseRecord::<str, [u8]>::to(&r.output).payload(value.as_bytes());
                        while let Err((_, r)) = producer.send(record) {
                            producer.poll(Duration::from_millis(1)); // queue full
                            record = r;
                        }
                    }
                    while producer.in_flight_count() > 0 {
                        producer.poll(Duration::ZERO);
                        std::thread::sleep(Duration::from_micros(100));
                    }
                }
            }
        }
        done.fetch_add(n, Ordering::Relaxed);
    }
}

fn insert(client: &mut postgres::Client, table: &str, rows: &[serde_json::Value]) {
    let mut sql = format!("INSERT INTO {table} (txn_id, card_id, amount, ts) VALUES ");
    for (i, row) in rows.iter().enumerate() {
        if i > 0 {
            sql.push(',');
        }
        sql.push_str(&format!(
            "('{}','{}',{},{})",
            row["txn_id"].as_str().unwrap_or(""),
            row["card_id"].as_str().unwrap_or(""),
            row["amount"].as_f64().unwrap_or(0.0),
            row["ts"].as_i64().unwrap_or(0)
        ));
    }
    client.batch_execute(&sql).unwrap();
}

/// The Weir pipeline of `system` over `input`.
fn weir_toml(dir: &std::path::Path, r: &Route, system: System) -> String {
    let Route {
        bootstrap,
        input,
        output,
        url,
        table,
        ..
    } = r;
    let trigger = match system {
        System::RealTime => "mode = \"real-time\"\ncheckpoint_interval = \"1s\"",
        _ => "mode = \"processing-time\"\ninterval = \"100ms\"",
    };
    let sink = match r.out {
        Out::Kafka => {
            format!("kind = \"kafka\"\nbootstrap_servers = \"{bootstrap}\"\ntopic = \"{output}\"")
        }
        Out::Postgres => format!("kind = \"postgres\"\nurl = \"{url}\"\ntable = \"{table}\""),
    };
    format!(
        r#"name = "kafka-latency"
checkpoint = "{dir}/checkpoint"
[trigger]
{trigger}
[source]
kind = "kafka"
bootstrap_servers = "{bootstrap}"
topics = ["{input}"]
{schema}
[event_time]
column = "ts"
allowed_lateness = "10s"
[operator]
path = "{guests}/fraud_velocity.wasm"
config = {OPERATOR_CONFIG}
[sink]
{sink}
"#,
        dir = dir.display(),
        schema = weir_connectors::generator::payments::SCHEMA_TOML,
        guests = weir_cli::GUEST_DIR,
    )
}

/// Runs Weir until `stop`, counting rows in and merging its own histograms.
fn weir(
    host: &WasmHost,
    dir: std::path::PathBuf,
    toml: &str,
    stop: &AtomicBool,
    done: &AtomicU64,
    own: &Mutex<Histogram>,
) {
    let cfg = PipelineConfig::parse(toml, &dir).unwrap();
    let opts = OpenOptions {
        ephemeral_checkpoint_ok: true,
        ..Default::default()
    };
    let mut p = weir_engine::open(&cfg, host, opts).unwrap();
    let debug = std::env::var_os("WEIR_LATENCY_DEBUG").is_some();
    p.run(host, stop, &mut |e| {
        if debug {
            let ph = &e.phases;
            eprintln!(
                "epoch {} rows {} parts {} total {:?} plan {:?} read {:?} op {:?} sink {:?} commit {:?} p99 {:?}",
                e.epoch, e.rows_in, e.range, e.total, ph.plan, ph.read, ph.operator, ph.sink, ph.commit,
                e.latency.as_ref().map(|l| l.p99_ms)
            );
        }
        done.fetch_add(e.rows_in, Ordering::Relaxed);
        if let Some(h) = &e.latency_histogram {
            own.lock().unwrap().merge(h);
        }
    })
    .unwrap();
}
