//! Kafka through rdkafka, the way Spark's Kafka source works: the runtime
//! owns the offsets. Partitions are assigned explicitly (no consumer-group
//! offset management), each epoch is planned as `{topic, partition, start,
//! end}` ranges written to `offsets/N`, and exactly that range is fetched,
//! on the first run and on any replay. Nothing is committed to Kafka unless
//! `commit_to_group` asks for it, and then only so lag tools can see progress.

use super::client::{Brokers, Reader, Reporting};
use super::fetch::fetch_ranges;
use super::marks::{MarksWatch, Topics, Watermarks};
use super::past_end::PastEnd;
use super::plan::{self, KafkaRange, PartitionRange, Tp};
use super::security::ClientSecurity;
use super::tail::{AgedOut, Tail};
use anyhow::{bail, Context, Result};
use arrow_array::builder::{Int64Builder, StringBuilder};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use rdkafka::consumer::Consumer;
use rdkafka::message::{Headers, Message};
use rdkafka::{Offset, TopicPartitionList};
use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use weir_core::backoff::Backoff;
use weir_core::json::MalformedPolicy;
use weir_core::json::{JsonDecoder, Record};
use weir_core::source::{Backlog, BacklogUnit, DeadLetter, EpochInput, PlanLimit, Source};

/// Where a query without a checkpoint starts reading.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum StartingOffsets {
    /// `"earliest"` (default) or `"latest"`.
    Named(String),
    /// Explicit offsets by topic, then partition (as a string key), e.g.
    /// `{ payments = { "0" = 42, "1" = 0 } }`; partitions not listed start
    /// at the earliest offset.
    Offsets(BTreeMap<String, BTreeMap<String, i64>>),
}

impl Default for StartingOffsets {
    fn default() -> Self {
        StartingOffsets::Named("earliest".into())
    }
}

/// How record values become columns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ValueFormat {
    /// JSON objects decoded into the declared schema; record metadata follows
    /// as `kafka_key`, `kafka_topic`, `kafka_partition`, `kafka_offset`,
    /// `kafka_timestamp`, `kafka_headers`.
    #[default]
    Json,
    /// Columns `key`, `value`, `topic`, `partition`, `offset`, `timestamp`,
    /// `headers`; key and value must be UTF-8.
    Raw,
    /// Avro in a schema registry's wire format, resolved into the declared
    /// schema (`schema_registry` names the registry); metadata as `json`.
    Avro,
    /// Protobuf messages of one type from a descriptor set (`protobuf`
    /// names both), read into the declared schema; metadata as `json`.
    Protobuf,
}

impl ValueFormat {
    /// Whether values are bytes rather than UTF-8 text.
    fn is_binary(self) -> bool {
        matches!(self, ValueFormat::Avro | ValueFormat::Protobuf)
    }
}

/// The Kafka source's settings (see `SourceConfig::Kafka`).
#[derive(Debug, Clone)]
pub struct KafkaSettings {
    pub bootstrap_servers: String,
    pub topics: Vec<String>,
    pub starting_offsets: StartingOffsets,
    pub max_offsets_per_trigger: Option<u64>,
    pub fail_on_data_loss: bool,
    pub value_format: ValueFormat,
    pub value_schema: SchemaRef,
    pub commit_to_group: Option<String>,
    pub options: BTreeMap<String, String>,
    /// TLS and SASL, secrets read.
    pub security: ClientSecurity,
    pub timeout: Duration,
    pub batch_rows: usize,
    pub policy: MalformedPolicy,
    /// Only this partition of each topic (a cluster worker's share).
    pub partition: Option<i32>,
    /// `value_format = "avro"`: where the writer schemas are, and the
    /// checkpoint directory that records those used.
    pub registry: Option<(crate::avro::registry::RegistryConfig, std::path::PathBuf)>,
    /// `value_format = "protobuf"`: the message type, read from its
    /// descriptor set.
    pub protobuf: Option<crate::protobuf::ProtobufDecoder>,
}

const META: [(&str, DataType, bool); 6] = [
    ("key", DataType::Utf8, true),
    ("topic", DataType::Utf8, false),
    ("partition", DataType::Int64, false),
    ("offset", DataType::Int64, false),
    ("timestamp", DataType::Int64, true),
    ("headers", DataType::Utf8, true),
];

/// The source schema for the given format.
pub fn schema_for(format: ValueFormat, value_schema: &Schema) -> Result<SchemaRef> {
    let mut fields: Vec<Field> = Vec::new();
    match format {
        ValueFormat::Raw => {
            fields.push(Field::new("key", DataType::Utf8, true));
            fields.push(Field::new("value", DataType::Utf8, true));
            for (name, t, nullable) in &META[1..] {
                fields.push(Field::new(*name, t.clone(), *nullable));
            }
        }
        ValueFormat::Json | ValueFormat::Avro | ValueFormat::Protobuf => {
            fields.extend(value_schema.fields().iter().map(|f| f.as_ref().clone()));
            for (name, t, nullable) in &META {
                let name = format!("kafka_{name}");
                if fields.iter().any(|f| f.name() == &name) {
                    bail!("`source.schema` declares `{name}`, which the Kafka source adds itself");
                }
                fields.push(Field::new(name, t.clone(), *nullable));
            }
        }
    }
    Ok(Arc::new(Schema::new(fields)))
}

/// The broker answered, and the topic is not there: waiting will not help.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct TopicMissing(String);

/// The Kafka source.
pub struct KafkaSource {
    s: KafkaSettings,
    schema: SchemaRef,
    decoder: JsonDecoder,
    /// `value_format = "avro"`: the values' decoder, with its registry
    /// client (a cache, so behind a lock: batches are made from `&self`).
    framed: Option<std::sync::Mutex<crate::avro::framed::FramedDecoder>>,
    consumer: Reader,
    /// Next offset to plan per partition.
    positions: BTreeMap<Tp, i64>,
    restored: bool,
    /// What the last `plan` found waiting.
    backlog: Option<Backlog>,
    /// Records the broker served past the ends it reports.
    past_end: PastEnd,
    /// The consumer group (only used with `commit_to_group`).
    group: String,
    /// Real-time mode's live reader, opened by the first live plan.
    tail: Option<Tail>,
    /// Real-time mode's view of the broker's offsets, asked off the parts'
    /// thread (for new partitions and the backlog).
    marks_watch: Option<MarksWatch>,
}

/// Most records one real-time part takes without `max_offsets_per_trigger`:
/// what the live reader buffers at most.
const LIVE_PART_MAX: u64 = 65_536;

/// How long a live plan waits for a first record before saying "nothing
/// new": short, the engine polls again at once.
const LIVE_WAIT: Duration = Duration::from_millis(1);

/// How often the live reader looks for new partitions and refreshes the
/// backlog from the broker's watermarks.
const LIVE_REFRESH: Duration = Duration::from_secs(2);

impl KafkaSource {
    /// Connects and checks that every topic exists; a bad address or a
    /// missing topic is an error within `timeout`, not a hang.
    pub fn new(s: KafkaSettings) -> Result<Self> {
        let schema = schema_for(s.value_format, &s.value_schema)?;
        let group = s
            .commit_to_group
            .clone()
            .unwrap_or_else(|| format!("weir-{}", uuid::Uuid::new_v4()));
        let brokers = Brokers {
            servers: &s.bootstrap_servers,
            options: &s.options,
            timeout: s.timeout,
            security: &s.security,
        };
        let consumer: Reader = brokers
            .consumer(&group)
            .create_with_context(Reporting::default())
            .context("creating the Kafka consumer")?;
        let decoder = JsonDecoder::new(s.value_schema.clone(), s.batch_rows, s.policy);
        let framed = match (&s.value_format, &s.registry) {
            (ValueFormat::Avro, Some((config, checkpoint))) => Some(std::sync::Mutex::new(
                crate::avro::framed::FramedDecoder::new(
                    s.value_schema.clone(),
                    crate::avro::registry::Registry::new(config, checkpoint)?,
                    s.batch_rows,
                ),
            )),
            (ValueFormat::Avro, None) => bail!("`value_format = \"avro\"` needs `schema_registry`"),
            _ => None,
        };
        let source = KafkaSource {
            s,
            schema,
            decoder,
            framed,
            consumer,
            positions: BTreeMap::new(),
            restored: false,
            backlog: None,
            past_end: PastEnd::default(),
            group,
            tail: None,
            marks_watch: None,
        };
        source.partitions()?;
        Ok(source)
    }

    /// Where the source's topics are, for [`Topics`]' questions.
    fn topics(&self) -> Topics {
        Topics {
            topics: self.s.topics.clone(),
            servers: self.s.bootstrap_servers.clone(),
            timeout: self.s.timeout,
            partition: self.s.partition,
        }
    }

    /// Every partition of every configured topic, from fresh metadata.
    fn partitions(&self) -> Result<Vec<Tp>> {
        self.topics().partitions(&self.consumer)
    }

    /// Partitions and watermarks, waiting (with backoff, and saying so in
    /// the log) while the broker is unreachable: an outage delays epochs,
    /// it never fails or skips them. A topic the broker reports as missing
    /// is an error.
    fn offsets_waiting_for_broker(&self) -> Result<Watermarks> {
        let mut outage: Option<Backoff> = None;
        loop {
            let attempt = self.topics().marks(&self.consumer);
            match attempt {
                Ok(found) => {
                    if let Some(b) = outage {
                        tracing::info!(
                            brokers = %self.s.bootstrap_servers,
                            "Kafka is reachable again after {:?}; resuming",
                            b.elapsed()
                        );
                    }
                    return Ok(found);
                }
                Err(e) if e.downcast_ref::<TopicMissing>().is_some() => return Err(e),
                Err(e) => {
                    let b = outage.get_or_insert_with(Backoff::for_outage);
                    if b.should_report(Duration::from_secs(10)) {
                        tracing::warn!(
                            brokers = %self.s.bootstrap_servers,
                            "waiting for Kafka (no epoch is planned meanwhile, nothing is skipped): {e:#}"
                        );
                    }
                    b.wait();
                }
            }
        }
    }

    /// Positions for a query with no checkpoint, from `starting_offsets`.
    fn initial_positions(&mut self, marks: &Watermarks) -> Result<()> {
        match &self.s.starting_offsets {
            StartingOffsets::Named(n) if n == "earliest" => {}
            StartingOffsets::Named(n) if n == "latest" => {
                for (tp, &(_, high)) in marks {
                    self.positions.insert(tp.clone(), high);
                }
            }
            StartingOffsets::Named(other) => bail!(
                "`source.starting_offsets` is `{other}`; use \"earliest\", \"latest\" or a table of offsets"
            ),
            StartingOffsets::Offsets(map) => {
                for (topic, parts) in map {
                    for (p, &offset) in parts {
                        let p: i32 = p.parse().with_context(|| {
                            format!("`source.starting_offsets.{topic}`: `{p}` is not a partition number")
                        })?;
                        self.positions.insert((topic.clone(), p), offset);
                    }
                }
            }
        }
        Ok(())
    }

    /// Fetches exactly `ranges`, grouped by partition in range order.
    /// Notes how far the broker served (see [`PastEnd`]).
    fn fetch(&mut self, ranges: &[PartitionRange]) -> Result<Vec<Fetched>> {
        let fetch = fetch_ranges(
            &self.consumer,
            ranges,
            &self.s.bootstrap_servers,
            self.s.timeout,
            self.s.fail_on_data_loss,
        )?;
        self.past_end.note(&fetch.served_end);
        Ok(fetch.records)
    }

    fn to_batches(&self, records: Vec<Fetched>) -> Result<EpochInput> {
        let mut out = EpochInput::default();
        // Key, value and headers must be text (an Avro value is bytes);
        // anything else is malformed.
        let binary_value = self.s.value_format.is_binary();
        let mut good: Vec<Fetched> = Vec::with_capacity(records.len());
        for r in records {
            match r.text_problem(binary_value) {
                None => good.push(r),
                Some(reason) => self.reject(&mut out, &r, reason)?,
            }
        }
        match self.s.value_format {
            ValueFormat::Raw => {
                for chunk in good.chunks(self.s.batch_rows.max(1)) {
                    let mut value = StringBuilder::new();
                    for r in chunk {
                        value.append_option(r.value.as_deref().map(utf8));
                    }
                    let chunk: Vec<&Fetched> = chunk.iter().collect();
                    let mut cols: Vec<ArrayRef> = vec![meta_key(&chunk), Arc::new(value.finish())];
                    cols.extend(meta_rest(&chunk));
                    out.batches
                        .push(RecordBatch::try_new(self.schema.clone(), cols)?);
                }
            }
            ValueFormat::Avro => self.avro_batches(&mut out, good)?,
            ValueFormat::Protobuf => self.protobuf_batches(&mut out, good)?,
            ValueFormat::Json => {
                let values = good
                    .iter()
                    .map(|r| (r, Cow::Borrowed(r.value.as_deref().unwrap_or(b""))))
                    .collect();
                self.json_batches(&mut out, values)?;
            }
        }
        Ok(out)
    }

    /// The JSON `values` of their records in the declared columns, with
    /// the records' metadata; the ones that do not decode are set aside.
    fn json_batches(&self, out: &mut EpochInput, values: Vec<(&Fetched, Cow<[u8]>)>) -> Result<()> {
        let mut joined = Vec::new();
        for (_, value) in &values {
            joined.extend_from_slice(value);
            joined.push(b'\n');
        }
        let decoded = self.decoder.decode_records(&joined, values.len(), || {
            values
                .iter()
                .map(|(r, value)| Record {
                    bytes: &value[..],
                    origin: r.origin(),
                    line: None,
                })
                .collect()
        })?;
        out.dead_letters.extend(decoded.dead_letters);
        let mut rejected = decoded.rejected.iter().peekable();
        let kept: Vec<&Fetched> = values
            .iter()
            .enumerate()
            .filter(|(i, _)| rejected.next_if(|&&r| r == *i).is_none())
            .map(|(_, (r, _))| *r)
            .collect();
        self.with_metadata(out, decoded.batches, &kept)
    }

    /// `good`'s Protobuf values in the declared columns, through their JSON
    /// mapping; a value that is not a message of the type is set aside.
    fn protobuf_batches(&self, out: &mut EpochInput, good: Vec<Fetched>) -> Result<()> {
        let decoder = self
            .s
            .protobuf
            .as_ref()
            .context("a Protobuf source without its message type")?;
        let mut values = Vec::with_capacity(good.len());
        for r in &good {
            match decoder.to_json(r.value.as_deref().unwrap_or(b"")) {
                Ok(json) => values.push((r, Cow::Owned(json))),
                Err(reason) => self.reject(out, r, reason)?,
            }
        }
        self.json_batches(out, values)
    }

    /// The decoded value columns of the `kept` records, in order, each
    /// batch given the records' metadata columns.
    fn with_metadata(
        &self,
        out: &mut EpochInput,
        values: Vec<RecordBatch>,
        kept: &[&Fetched],
    ) -> Result<()> {
        let mut at = 0;
        for batch in values {
            let n = batch.num_rows();
            let chunk = kept.get(at..at + n).with_context(|| {
                format!(
                    "the decoder gave more rows than the {} records it kept",
                    kept.len()
                )
            })?;
            at += n;
            let mut cols = batch.columns().to_vec();
            cols.push(meta_key(chunk));
            cols.extend(meta_rest(chunk));
            out.batches
                .push(RecordBatch::try_new(self.schema.clone(), cols)?);
        }
        if at != kept.len() {
            bail!(
                "the decoder gave {at} rows for the {} records it kept",
                kept.len()
            );
        }
        Ok(())
    }

    /// `good`'s Avro values in the declared columns, with the records'
    /// metadata; the ones that do not decode are set aside.
    fn avro_batches(&self, out: &mut EpochInput, good: Vec<Fetched>) -> Result<()> {
        let framed = self
            .framed
            .as_ref()
            .context("an Avro source without its decoder")?;
        let values: Vec<Option<&[u8]>> = good.iter().map(|r| r.value.as_deref()).collect();
        let decoded = framed
            .lock()
            .map_err(|_| anyhow::anyhow!("the Avro decoder was poisoned by a panic"))?
            .decode(&values)?;
        let mut rejected = decoded.rejected.into_iter().peekable();
        let mut kept: Vec<&Fetched> = Vec::with_capacity(good.len());
        for (i, r) in good.iter().enumerate() {
            match rejected.next_if(|(at, _)| *at == i) {
                Some((_, reason)) => self.reject(out, r, reason)?,
                None => kept.push(r),
            }
        }
        self.with_metadata(out, decoded.batches, &kept)
    }

    fn reject(&self, out: &mut EpochInput, r: &Fetched, reason: String) -> Result<()> {
        if self.s.policy == MalformedPolicy::Fail {
            bail!(
                "malformed record at {}: {reason} (set `source.on_malformed = \"dead-letter\"` to set such records aside)",
                r.origin()
            );
        }
        out.dead_letters.push(DeadLetter {
            origin: r.origin(),
            line: None,
            reason,
            raw: match self.s.value_format {
                // Binary: its bytes in hex, so the dead letter holds them.
                ValueFormat::Avro => hex::encode(r.value.as_deref().unwrap_or(b"")),
                _ => String::from_utf8_lossy(r.value.as_deref().unwrap_or(b"")).into_owned(),
            },
            operator: None,
            row: None,
        });
        Ok(())
    }
}

/// Real-time mode ([`PlanLimit::Live`]): parts planned over what the
/// live reader ([`super::tail`]) fetched, with no broker round trip.
impl KafkaSource {
    fn plan_live(&mut self) -> Result<Option<KafkaRange>> {
        if self.tail.is_none() {
            if let Some(anchor) = self.open_tail()? {
                return Ok(Some(anchor));
            }
        }
        self.refresh_live()?;
        let Some(tail) = self.tail.as_mut() else {
            return Ok(None);
        };
        let room = self.s.max_offsets_per_trigger.unwrap_or(LIVE_PART_MAX);
        match tail.poll(room as usize, LIVE_WAIT) {
            Ok(()) => {}
            Err(e) if e.downcast_ref::<AgedOut>().is_some() => {
                self.reopen_after_loss()?;
                return Ok(None);
            }
            Err(e) => return Err(e),
        }
        let range = tail.take(&self.positions, self.s.max_offsets_per_trigger)?;
        let buffered = tail.len() as u64;
        for r in range.iter().flat_map(|r| &r.partitions) {
            self.positions.insert((r.topic.clone(), r.partition), r.end);
        }
        if let Some(b) = &mut self.backlog {
            b.planned = range.as_ref().map_or(0, |r| {
                r.partitions.iter().map(|p| (p.end - p.start) as u64).sum()
            });
            b.pending = b.pending.saturating_sub(b.planned).max(buffered);
        }
        Ok(range)
    }

    /// Opens the live reader at the planned positions (new partitions at
    /// their first offset). A new query that starts anywhere but the
    /// earliest offsets gets an empty first part that pins its starting
    /// positions in the WAL, as its first micro-batch epoch would.
    fn open_tail(&mut self) -> Result<Option<KafkaRange>> {
        let marks = self.offsets_waiting_for_broker()?;
        let anchor = !self.restored && self.s.starting_offsets != StartingOffsets::default();
        if !self.restored {
            self.initial_positions(&marks)?;
            self.restored = true;
        }
        for (tp, &(low, _)) in &marks {
            self.positions.entry(tp.clone()).or_insert(low);
        }
        let consumer = self
            .brokers()
            .live_consumer(&self.group)
            .create_with_context(Reporting::default())
            .context("creating the live Kafka reader")?;
        self.tail = Some(Tail::open(consumer, &self.positions)?);
        let watcher = self
            .brokers()
            .consumer(&self.group)
            .create_with_context(Reporting::default())
            .context("creating the Kafka offsets watcher")?;
        self.marks_watch = Some(MarksWatch::start(watcher, self.topics(), LIVE_REFRESH)?);
        self.set_backlog(&marks, 0);
        if !anchor {
            return Ok(None);
        }
        // Empty ranges at every starting position.
        self.planned_so_far().map(Some)
    }

    /// Takes up the watcher's newest answer, if any: partitions added to
    /// the topics join the live reader, and the backlog is measured
    /// against the broker's offsets.
    fn refresh_live(&mut self) -> Result<()> {
        let Some(marks) = self.marks_watch.as_ref().and_then(MarksWatch::take) else {
            return Ok(());
        };
        for (tp, &(low, _)) in &marks {
            if !self.positions.contains_key(tp) {
                self.positions.insert(tp.clone(), low);
                if let Some(tail) = &mut self.tail {
                    tail.add(tp, low)?;
                }
            }
        }
        let buffered = self.tail.as_ref().map_or(0, |t| t.len() as u64);
        self.set_backlog(&marks, buffered);
        Ok(())
    }

    /// The live reader hit offsets that aged out of retention: fails with
    /// `fail_on_data_loss`, or plans on from the first offsets the broker
    /// still has, logging what was lost.
    fn reopen_after_loss(&mut self) -> Result<()> {
        let marks = self.offsets_waiting_for_broker()?;
        let (_, losses) = plan::plan(&self.positions, &marks, Some(0), self.s.fail_on_data_loss)?;
        warn_of(&losses);
        for l in &losses {
            self.positions.insert(l.tp.clone(), l.available);
        }
        self.tail = None;
        Ok(())
    }

    /// The backlog against the broker's `marks`, with `buffered` records
    /// fetched but not yet planned.
    fn set_backlog(&mut self, marks: &Watermarks, buffered: u64) {
        let behind: u64 = marks
            .iter()
            .map(|(tp, &(_, high))| {
                let at = self.positions.get(tp).copied().unwrap_or(high);
                (high - at).max(0) as u64
            })
            .sum();
        self.backlog = Some(Backlog {
            unit: BacklogUnit::Records,
            planned: 0,
            pending: behind.max(buffered),
            pending_files: None,
            changed_files: None,
        });
    }

    fn brokers(&self) -> Brokers<'_> {
        Brokers {
            servers: &self.s.bootstrap_servers,
            options: &self.s.options,
            timeout: self.s.timeout,
            security: &self.s.security,
        }
    }
}

/// Logs records that aged out of retention before they were read.
fn warn_of(losses: &[plan::Loss]) {
    for l in losses {
        tracing::warn!(
            topic = %l.tp.0,
            partition = l.tp.1,
            lost = (l.available - l.wanted).max(0),
            "records aged out of retention before they were read; skipping to offset {}",
            l.available
        );
    }
}

fn utf8(b: &[u8]) -> &str {
    // Only called after `text_problem` checked the bytes.
    std::str::from_utf8(b).unwrap_or_default()
}

fn meta_key(chunk: &[&Fetched]) -> ArrayRef {
    let mut key = StringBuilder::new();
    for r in chunk {
        key.append_option(r.key.as_deref().map(utf8));
    }
    Arc::new(key.finish())
}

fn meta_rest(chunk: &[&Fetched]) -> Vec<ArrayRef> {
    let (mut topic, mut headers) = (StringBuilder::new(), StringBuilder::new());
    let (mut partition, mut offset, mut ts) = (
        Int64Builder::new(),
        Int64Builder::new(),
        Int64Builder::new(),
    );
    for r in chunk {
        topic.append_value(&r.topic);
        partition.append_value(i64::from(r.partition));
        offset.append_value(r.offset);
        ts.append_option(r.timestamp);
        headers.append_option(r.headers.as_deref());
    }
    vec![
        Arc::new(topic.finish()),
        Arc::new(partition.finish()),
        Arc::new(offset.finish()),
        Arc::new(ts.finish()),
        Arc::new(headers.finish()),
    ]
}

/// A record copied out of the client's buffers.
#[derive(Debug, Clone)]
pub(crate) struct Fetched {
    pub(crate) topic: String,
    pub(crate) partition: i32,
    pub(crate) offset: i64,
    timestamp: Option<i64>,
    key: Option<Vec<u8>>,
    value: Option<Vec<u8>>,
    /// Headers as a JSON object of strings, if any.
    headers: Option<String>,
    headers_ok: bool,
}

impl Fetched {
    /// A record with no key, value or headers at `offset`, for tests.
    #[cfg(test)]
    pub(super) fn at(topic: &str, partition: i32, offset: i64) -> Self {
        Fetched {
            topic: topic.to_string(),
            partition,
            offset,
            timestamp: None,
            key: None,
            value: None,
            headers: None,
            headers_ok: true,
        }
    }

    pub(super) fn from<M: Message>(m: &M) -> Self {
        let mut headers_ok = true;
        let headers = m.headers().map(|h| {
            let mut map = serde_json::Map::new();
            for i in 0..h.count() {
                let header = h.get(i);
                let value = match header.value.map(std::str::from_utf8) {
                    None => serde_json::Value::Null,
                    Some(Ok(s)) => serde_json::Value::String(s.to_string()),
                    Some(Err(_)) => {
                        headers_ok = false;
                        serde_json::Value::Null
                    }
                };
                map.insert(header.key.to_string(), value);
            }
            serde_json::Value::Object(map).to_string()
        });
        Fetched {
            topic: m.topic().to_string(),
            partition: m.partition(),
            offset: m.offset(),
            timestamp: m.timestamp().to_millis(),
            key: m.key().map(<[u8]>::to_vec),
            value: m.payload().map(<[u8]>::to_vec),
            headers,
            headers_ok,
        }
    }

    fn origin(&self) -> String {
        format!("{}-{}@{}", self.topic, self.partition, self.offset)
    }

    /// The text value of header `key`, if present and UTF-8.
    pub(crate) fn header(&self, key: &str) -> Option<String> {
        let headers: serde_json::Value = serde_json::from_str(self.headers.as_deref()?).ok()?;
        headers.get(key)?.as_str().map(String::from)
    }

    fn text_problem(&self, binary_value: bool) -> Option<String> {
        if self
            .key
            .as_deref()
            .is_some_and(|k| std::str::from_utf8(k).is_err())
        {
            return Some("key is not UTF-8".into());
        }
        if !binary_value
            && self
                .value
                .as_deref()
                .is_some_and(|v| std::str::from_utf8(v).is_err())
        {
            return Some("value is not UTF-8".into());
        }
        if !self.headers_ok {
            return Some("a header value is not UTF-8".into());
        }
        None
    }
}

impl Source for KafkaSource {
    type Range = KafkaRange;

    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn partition_column(&self) -> Option<&str> {
        Some(match self.s.value_format {
            ValueFormat::Raw => "partition",
            ValueFormat::Json | ValueFormat::Avro | ValueFormat::Protobuf => "kafka_partition",
        })
    }

    fn identity(&self) -> String {
        let partition = self
            .s
            .partition
            .map(|p| format!("#{p}"))
            .unwrap_or_default();
        format!(
            "kafka:{}/{}{partition}",
            self.s.bootstrap_servers,
            self.s.topics.join(",")
        )
    }

    fn restore(&mut self, range: &KafkaRange) -> Result<()> {
        self.restored = true;
        for r in &range.partitions {
            self.positions.insert((r.topic.clone(), r.partition), r.end);
        }
        Ok(())
    }

    fn planned_so_far(&self) -> Result<KafkaRange> {
        let partitions = self
            .positions
            .iter()
            .map(|((topic, partition), &end)| PartitionRange {
                topic: topic.clone(),
                partition: *partition,
                start: end,
                end,
            })
            .collect();
        Ok(KafkaRange { partitions })
    }

    fn plan(&mut self, limit: PlanLimit) -> Result<Option<KafkaRange>> {
        if limit == PlanLimit::Live {
            return self.plan_live();
        }
        let marks = self.offsets_waiting_for_broker()?;
        // A new query that starts anywhere but the earliest offsets pins its
        // starting positions in the WAL with its first epoch, even an empty
        // one: a restart must resume there, not at a newer "latest".
        let anchor = !self.restored && self.s.starting_offsets != StartingOffsets::default();
        if !self.restored {
            self.initial_positions(&marks)?;
            self.restored = true;
        }
        let max = if limit.per_trigger() {
            self.s.max_offsets_per_trigger
        } else {
            None
        };
        let (ranges, losses) = plan::plan(&self.positions, &marks, max, self.s.fail_on_data_loss)?;
        warn_of(&losses);
        let mut ranges = ranges;
        if anchor {
            for tp in marks.keys() {
                if !ranges
                    .iter()
                    .any(|r| (&r.topic, r.partition) == (&tp.0, tp.1))
                {
                    let at = self.positions.get(tp).copied().unwrap_or(marks[tp].0);
                    ranges.push(PartitionRange {
                        topic: tp.0.clone(),
                        partition: tp.1,
                        start: at,
                        end: at,
                    });
                }
            }
            ranges.sort_by(|a, b| (&a.topic, a.partition).cmp(&(&b.topic, b.partition)));
        }
        for r in &ranges {
            self.positions.insert((r.topic.clone(), r.partition), r.end);
        }
        self.backlog = Some(Backlog {
            unit: BacklogUnit::Records,
            planned: ranges.iter().map(|r| (r.end - r.start).max(0) as u64).sum(),
            pending: marks
                .iter()
                .map(|(tp, &(_, high))| {
                    let at = self.positions.get(tp).copied().unwrap_or(high);
                    (high - at).max(0) as u64
                })
                .sum::<u64>()
                + self.past_end.check(&marks),
            pending_files: None,
            changed_files: None,
        });
        if ranges.is_empty() {
            return Ok(None);
        }
        Ok(Some(KafkaRange { partitions: ranges }))
    }

    fn backlog(&self) -> Option<Backlog> {
        self.backlog
    }

    fn read(&mut self, range: &KafkaRange) -> Result<EpochInput> {
        let live = self.tail.as_mut().and_then(|t| t.records_for(range));
        let records = match live {
            Some(records) => records,
            None => self.fetch(&range.partitions)?,
        };
        self.to_batches(records)
    }

    /// A replayed real-time epoch's parts, with one fetch
    /// (the `replay` module).
    fn read_each(&mut self, ranges: &[KafkaRange]) -> Result<Vec<EpochInput>> {
        let records = self.fetch(&super::replay::spans(ranges))?;
        super::replay::split(ranges, records)
            .into_iter()
            .map(|records| self.to_batches(records))
            .collect()
    }

    fn describe(&self, range: &KafkaRange) -> String {
        let n: i64 = range.partitions.iter().map(|p| p.end - p.start).sum();
        format!("{n} offsets over {} partitions", range.partitions.len())
    }

    fn committed(&mut self, range: &KafkaRange) -> Result<()> {
        if self.s.commit_to_group.is_none() {
            return Ok(());
        }
        let mut tpl = TopicPartitionList::new();
        for r in &range.partitions {
            tpl.add_partition_offset(&r.topic, r.partition, Offset::Offset(r.end))?;
        }
        // Only for lag tools; failure here never affects correctness.
        if let Err(e) = self
            .consumer
            .commit(&tpl, rdkafka::consumer::CommitMode::Sync)
        {
            tracing::warn!("committing offsets to the consumer group failed: {e}");
        }
        Ok(())
    }
}
