//! Operator output to a Kafka topic: one message per row (JSON, or Avro
//! in a schema registry's wire format: `crate::avro::encode`), with
//! `acks=all` and idempotence, each carrying `weir-query` and `weir-epoch`
//! headers. By default the sink is at-least-once: a replayed epoch is sent
//! again, with the same headers, so consumers can drop it. With
//! `transactional = true` (brokers with KIP-98 transactions) each epoch is one
//! transaction, and before its first write after a start the sink reads the
//! topic's committed tail for this query's highest epoch and skips a replayed
//! epoch that is already there: exactly-once for `read_committed` consumers.
//!
//! With parallel tasks, each task's writer is a producer of its own: its
//! transactional id is `weir-<query>-task-<T>` (task 0 keeps
//! `weir-<query>`), its messages carry a `weir-task` header (tasks after
//! the first), and the committed tail it skips replays by is its own.
//!
//! In real-time mode each part is sent at once with a `weir-part` header too:
//! at-least-once, acknowledged before the part counts as written; with
//! `transactional = true` the parts of an epoch share its transaction,
//! committed when the epoch ends.

use super::client::{Brokers, Reader, Reporting};
use super::fetch::fetch_ranges;
use super::security::ClientSecurity;
use super::source::Fetched;
use crate::avro::encode::FramedEncoder;
use crate::avro::registry::{Registry, RegistryConfig};
use crate::kafka::plan::PartitionRange;
use anyhow::{bail, Context, Result};
use arrow_array::{Array, RecordBatch, StringArray};
use bytes::Bytes;
use rdkafka::client::ClientContext;
use rdkafka::consumer::Consumer;
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{BaseRecord, DeliveryResult, Producer, ProducerContext, ThreadedProducer};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use weir_core::sink::{to_json_lines, Sink};

/// Sends `record`, waiting while the producer's local queue is full (the
/// back-pressure a fast epoch meets), and failing on any other error.
pub fn send_blocking<C: ProducerContext<DeliveryOpaque = ()> + 'static>(
    producer: &ThreadedProducer<C>,
    mut record: BaseRecord<'_, str, [u8]>,
) -> rdkafka::error::KafkaResult<()> {
    loop {
        match producer.send(record) {
            Ok(()) => return Ok(()),
            Err((
                rdkafka::error::KafkaError::MessageProduction(
                    rdkafka::types::RDKafkaErrorCode::QueueFull,
                ),
                r,
            )) => {
                std::thread::sleep(Duration::from_millis(5));
                record = r;
            }
            Err((e, _)) => return Err(e),
        }
    }
}

/// Settings of the Kafka sink.
#[derive(Debug, Clone)]
pub struct KafkaSinkSettings {
    pub bootstrap_servers: String,
    pub topic: String,
    /// Output column whose value becomes the message key.
    pub key_column: Option<String>,
    /// One transaction per epoch (needs a broker with KIP-98 transactions).
    pub transactional: bool,
    pub options: BTreeMap<String, String>,
    /// TLS and SASL, secrets read.
    pub security: ClientSecurity,
    pub timeout: Duration,
    /// The checkpoint's query id: names the transactional producer and tags
    /// every message.
    pub query_id: String,
    /// Which parallel task's writer this is (0: the first, or the only).
    pub task: u16,
    /// This writer's own name ([`crate::connector::SinkContext::writer_id`]).
    pub writer_id: String,
    /// Avro values with a schema registry (`None`: JSON).
    pub avro: Option<AvroValues>,
}

/// What an Avro sink registers its schema in, under which subject and
/// record name, and the checkpoint the registration is recorded in.
#[derive(Debug, Clone)]
pub struct AvroValues {
    pub registry: RegistryConfig,
    pub checkpoint: PathBuf,
    pub subject: String,
    pub record: String,
}

impl KafkaSinkSettings {
    /// The transactional id of this task's producer.
    fn transactional_id(&self) -> String {
        format!("weir-{}", self.writer_id)
    }

    /// Whether a record of the topic was written by this query (any task).
    fn ours(&self, r: &Fetched) -> bool {
        r.header("weir-query").as_deref() == Some(self.query_id.as_str())
    }

    /// Whether a record of the topic was written by this query and task.
    fn wrote(&self, r: &Fetched) -> bool {
        let task = r.header("weir-task");
        self.ours(r)
            && match self.task {
                0 => task.is_none(),
                t => task.as_deref() == Some(t.to_string().as_str()),
            }
    }
}

/// The epoch a record of the topic was written in, from its header.
fn epoch_of(r: &Fetched) -> Option<u64> {
    r.header("weir-epoch")?.parse().ok()
}

/// Delivery reports, as the producer's thread receives them, and the
/// client's errors.
#[derive(Clone, Default)]
struct Deliveries {
    reporting: Reporting,
    failures: Arc<Mutex<Vec<String>>>,
    /// Messages acknowledged or failed so far (counted after a failure is
    /// recorded, so a flush that sees the count sees the failure).
    settled: Arc<AtomicU64>,
}

impl ClientContext for Deliveries {
    fn log(&self, level: rdkafka::config::RDKafkaLogLevel, facility: &str, message: &str) {
        self.reporting.log(level, facility, message);
    }

    fn error(&self, error: rdkafka::error::KafkaError, reason: &str) {
        self.reporting.record(&error, reason);
    }
}

impl ProducerContext for Deliveries {
    type DeliveryOpaque = ();
    fn delivery(&self, result: &DeliveryResult<'_>, _: ()) {
        if let Err((e, _)) = result {
            if let Ok(mut f) = self.failures.lock() {
                f.push(e.to_string());
            }
        }
        self.settled.fetch_add(1, Ordering::Release);
    }
}

/// The Kafka sink.
pub struct KafkaSink {
    s: KafkaSinkSettings,
    producer: ThreadedProducer<Deliveries>,
    deliveries: Deliveries,
    /// Messages handed to the producer so far.
    sent: AtomicU64,
    transactional: bool,
    /// Highest epoch already in the topic for this query (transactional only).
    committed_tail: Option<Option<u64>>,
    /// The real-time epoch whose transaction is open (transactional only).
    open_transaction: Option<u64>,
    /// Encodes rows as Avro values (`None`: JSON).
    avro: Option<FramedEncoder>,
}

fn brokers(s: &KafkaSinkSettings) -> Brokers<'_> {
    Brokers {
        servers: &s.bootstrap_servers,
        options: &s.options,
        timeout: s.timeout,
        security: &s.security,
    }
}

impl KafkaSink {
    /// Connects; with `transactional`, registers the transactional producer.
    pub fn new(s: KafkaSinkSettings) -> Result<Self> {
        let avro = s
            .avro
            .as_ref()
            .map(|a| {
                let registry = Registry::new(&a.registry, &a.checkpoint)?;
                FramedEncoder::new(registry, &a.subject, &a.record)
            })
            .transpose()
            .context("`sink.schema_registry`")?;
        let deliveries = Deliveries::default();
        let mut cfg = brokers(&s).producer();
        if s.transactional {
            cfg.set("transactional.id", s.transactional_id());
        }
        let producer: ThreadedProducer<Deliveries> = cfg
            .create_with_context(deliveries.clone())
            .context("creating the Kafka producer")?;
        if s.transactional {
            producer.init_transactions(s.timeout).map_err(|e| {
                deliveries.reporting.explain(format!(
                    "`sink.transactional = true`, but {} did not start a transaction: {e}",
                    s.bootstrap_servers
                ))
            })?;
        }
        Ok(KafkaSink {
            transactional: s.transactional,
            s,
            producer,
            deliveries,
            sent: AtomicU64::new(0),
            committed_tail: None,
            open_transaction: None,
            avro,
        })
    }

    /// Whether each epoch is written in one transaction.
    pub fn is_transactional(&self) -> bool {
        self.transactional
    }

    /// The highest epoch this query's task has committed to the topic, as
    /// far as it matters for replaying `epoch` (the first written after a
    /// start). Each partition is read backwards, in growing windows, until
    /// a record of this query older than `epoch` shows up: every record of
    /// `epoch` (of any task) was produced after every older one, since the
    /// epoch before committed first.
    fn read_committed_tail(&self, epoch: u64) -> Result<Option<u64>> {
        let consumer: Reader = brokers(&self.s)
            .committed_reader(&format!("weir-tail-{}", self.s.query_id))
            .create_with_context(Reporting::default())
            .context("creating the Kafka tail reader")?;
        let md = consumer
            .fetch_metadata(Some(&self.s.topic), self.s.timeout)
            .map_err(|e| {
                super::client::explain(
                    &consumer,
                    format!(
                        "metadata of sink topic `{}` from {}: {e}",
                        self.s.topic, self.s.bootstrap_servers
                    ),
                )
            })?;
        let parts: Vec<i32> = md
            .topics()
            .iter()
            .flat_map(|t| t.partitions().iter().map(|p| p.id()))
            .collect();
        let mut highest = None;
        for p in parts {
            highest = highest.max(self.partition_tail(&consumer, p, epoch)?);
        }
        Ok(highest)
    }

    /// The highest epoch of this query's task in partition `p`, read
    /// backwards in growing windows until a record of this query older
    /// than `epoch` (or one of the task's at `epoch` or later) settles it.
    fn partition_tail(&self, consumer: &Reader, p: i32, epoch: u64) -> Result<Option<u64>> {
        let (low, high) = consumer
            .fetch_watermarks(&self.s.topic, p, self.s.timeout)
            .map_err(|e| {
                super::client::explain(
                    consumer,
                    format!("offsets of sink topic `{}`-{p}: {e}", self.s.topic),
                )
            })?;
        let mut highest = None;
        let (mut end, mut window) = (high, 16);
        while end > low {
            let range = PartitionRange {
                topic: self.s.topic.clone(),
                partition: p,
                start: (end - window).max(low),
                end,
            };
            // Retention cannot take the newest records; skip rather than fail.
            let records = fetch_ranges(
                consumer,
                std::slice::from_ref(&range),
                &self.s.bootstrap_servers,
                self.s.timeout,
                false,
            )?
            .records;
            let task_high = records
                .iter()
                .filter(|r| self.s.wrote(r))
                .filter_map(epoch_of)
                .max();
            highest = highest.max(task_high);
            let older = records
                .iter()
                .filter(|r| self.s.ours(r))
                .filter_map(epoch_of)
                .any(|e| e < epoch);
            if older || task_high.is_some_and(|e| e >= epoch) {
                break;
            }
            end = range.start;
            window = window.saturating_mul(4);
        }
        Ok(highest)
    }

    fn take_failures(&self) -> Vec<String> {
        self.deliveries
            .failures
            .lock()
            .map(|mut f| std::mem::take(&mut *f))
            .unwrap_or_default()
    }
}

impl KafkaSink {
    /// Whether `epoch` is already in the topic (transactional sinks, after
    /// a restart): its replay is skipped.
    fn already_committed(&mut self, epoch: u64) -> Result<bool> {
        if self.committed_tail.is_none() {
            self.committed_tail = Some(self.read_committed_tail(epoch)?);
        }
        Ok(self.committed_tail.flatten().is_some_and(|t| t >= epoch))
    }

    /// The message keys of `batches`' rows, from `key_column`.
    fn keys(&self, batches: &[RecordBatch]) -> Result<Vec<Option<String>>> {
        let mut keys = Vec::new();
        let Some(col) = &self.s.key_column else {
            return Ok(keys);
        };
        for b in batches {
            let a = b
                .column_by_name(col)
                .with_context(|| format!("`sink.key_column`: the output has no column `{col}`"))?;
            let strings = arrow_cast::cast(a, &arrow_schema::DataType::Utf8)?;
            let strings = strings
                .as_any()
                .downcast_ref::<StringArray>()
                .context("key column as text")?;
            keys.extend(
                (0..strings.len())
                    .map(|i| strings.is_valid(i).then(|| strings.value(i).to_string())),
            );
        }
        Ok(keys)
    }

    /// Each row of `batches` as a message value, in order: Avro framed
    /// with the registered schema's id, or a JSON line.
    fn values(&mut self, batches: &[RecordBatch]) -> Result<Vec<Bytes>> {
        if let Some(encoder) = &mut self.avro {
            return encoder.encode(batches);
        }
        let lines = Bytes::from(to_json_lines(batches)?);
        let mut values = Vec::new();
        let mut start = 0;
        for end in memchr::memchr_iter(b'\n', &lines) {
            if end > start {
                values.push(lines.slice(start..end));
            }
            start = end + 1;
        }
        Ok(values)
    }

    /// Sends every row as a message tagged with the query, the epoch and
    /// (real-time) the part, so that a consumer can drop a replay's repeats.
    fn send_rows(&mut self, epoch: u64, part: Option<u32>, batches: &[RecordBatch]) -> Result<()> {
        let values = self.values(batches)?;
        let keys = self.keys(batches)?;
        let epoch_text = epoch.to_string();
        let part_text = part.map(|p| p.to_string());
        let task_text = (self.s.task > 0).then(|| self.s.task.to_string());
        for (i, value) in values.iter().enumerate() {
            let mut headers = OwnedHeaders::new()
                .insert(Header {
                    key: "weir-query",
                    value: Some(self.s.query_id.as_str()),
                })
                .insert(Header {
                    key: "weir-epoch",
                    value: Some(epoch_text.as_str()),
                });
            if let Some(p) = &part_text {
                headers = headers.insert(Header {
                    key: "weir-part",
                    value: Some(p.as_str()),
                });
            }
            if let Some(t) = &task_text {
                headers = headers.insert(Header {
                    key: "weir-task",
                    value: Some(t.as_str()),
                });
            }
            let mut record = BaseRecord::<str, [u8]>::to(&self.s.topic)
                .payload(value.as_ref())
                .headers(headers);
            if let Some(k) = keys.get(i).and_then(Option::as_deref) {
                record = record.key(k);
            }
            send_blocking(&self.producer, record)
                .with_context(|| format!("sending to `{}`", self.s.topic))?;
            self.sent.fetch_add(1, Ordering::Relaxed);
        }
        Ok(())
    }

    /// Waits until every message sent so far is acknowledged (`acks=all`),
    /// failing if any was not delivered. Not rdkafka's `flush`: it polls
    /// in 100 ms slices and rdkafka 0.39's `poll` runs until its slice
    /// ends, so every flush took at least 100 ms (a real-time part's
    /// write, measured: ~9 parts a second). Here librdkafka is
    /// told to send what it holds at once, and the wait ends as soon as
    /// every message sent has its delivery report.
    fn flush(&self, what: &str) -> Result<()> {
        let deadline = Instant::now() + self.s.timeout;
        // Returns at once ("timed out") while messages are in flight; it
        // makes librdkafka send them now rather than after `linger.ms`.
        let _ = self.producer.flush(Duration::ZERO);
        let sent = self.sent.load(Ordering::Relaxed);
        loop {
            let settled = self.deliveries.settled.load(Ordering::Acquire);
            if settled >= sent {
                break;
            }
            if Instant::now() >= deadline {
                bail!(
                    "{what}: {} messages to `{}` not acknowledged within {:?}",
                    sent - settled,
                    self.s.topic,
                    self.s.timeout
                );
            }
            std::thread::sleep(Duration::from_micros(100));
        }
        self.check_delivered(what)
    }

    /// Commits `epoch`'s transaction and checks every message of it was
    /// delivered.
    fn commit(&mut self, epoch: u64) -> Result<()> {
        self.producer
            .commit_transaction(self.s.timeout)
            .with_context(|| format!("committing epoch {epoch} to `{}`", self.s.topic))?;
        self.committed_tail = Some(Some(epoch));
        self.check_delivered(&format!("epoch {epoch}"))
    }

    fn check_delivered(&self, what: &str) -> Result<()> {
        let failures = self.take_failures();
        if let Some(first) = failures.first() {
            return Err(self.deliveries.reporting.explain(format!(
                "{} messages of {what} were not delivered to `{}`: {first}",
                failures.len(),
                self.s.topic
            )));
        }
        Ok(())
    }
}

impl Sink for KafkaSink {
    fn write_epoch(&mut self, epoch: u64, batches: &[RecordBatch]) -> Result<()> {
        if batches.iter().all(|b| b.num_rows() == 0) {
            return Ok(());
        }
        if !self.transactional {
            self.send_rows(epoch, None, batches)?;
            return self.flush(&format!("epoch {epoch}"));
        }
        if self.already_committed(epoch)? {
            tracing::info!(epoch, topic = %self.s.topic, "epoch already committed to the sink topic; skipping the replay");
            return Ok(());
        }
        self.producer
            .begin_transaction()
            .context("beginning the epoch's transaction")?;
        self.send_rows(epoch, None, batches)?;
        self.commit(epoch)
    }

    /// At-least-once: the part's rows are acknowledged before this returns
    /// (a replayed part is sent again, with the same headers). Transactional:
    /// the part joins its epoch's transaction, committed by `end_epoch`, so
    /// `read_committed` consumers see a real-time epoch at its end.
    fn write_part(&mut self, epoch: u64, part: u32, batches: &[RecordBatch]) -> Result<()> {
        if batches.iter().all(|b| b.num_rows() == 0) {
            return Ok(());
        }
        if !self.transactional {
            self.send_rows(epoch, Some(part), batches)?;
            return self.flush(&format!("epoch {epoch} part {part}"));
        }
        if self.already_committed(epoch)? {
            return Ok(());
        }
        if self.open_transaction != Some(epoch) {
            self.producer
                .begin_transaction()
                .context("beginning the epoch's transaction")?;
            self.open_transaction = Some(epoch);
        }
        self.send_rows(epoch, Some(part), batches)
    }

    fn end_epoch(&mut self, epoch: u64) -> Result<()> {
        if self.open_transaction == Some(epoch) {
            self.open_transaction = None;
            self.commit(epoch)?;
        }
        Ok(())
    }
}
