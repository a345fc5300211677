//! Reads exactly the offset ranges an epoch planned: the Kafka source reads
//! its epoch's input this way (again, identically, on replay), and the Kafka
//! sink reads back the tail of its topic to find the last epoch it wrote.
//!
//! A range is done when its last offset arrived, or when the consumer's
//! position passed its end without it (transaction markers and compaction
//! leave gaps). Broker outages are waited out, never skipped; offsets that
//! aged out of retention fail the epoch unless the caller allows data loss.

use super::client::Reader;
use super::plan::{PartitionRange, Tp};
use super::source::Fetched;
use anyhow::{bail, Context, Result};
use rdkafka::consumer::Consumer;
use rdkafka::error::KafkaError;
use rdkafka::message::{BorrowedMessage, Message};
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::{Offset, TopicPartitionList};
use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

/// What a fetch of some ranges got.
pub(crate) struct Fetch {
    /// The ranges' records, grouped by range in the order asked for.
    pub records: Vec<Fetched>,
    /// Per partition, one past the highest offset the broker served with
    /// them, past the range's end included (see [`super::past_end`]).
    pub served_end: BTreeMap<Tp, i64>,
}

/// Most records already received past the ranges' ends that a fetch looks
/// at before it lets them go.
const DRAIN_MAX: usize = 100_000;

/// Fetches exactly `ranges` (empty ones are skipped). `timeout` is how long
/// to wait without a record before warning that the broker is slow (it
/// keeps waiting).
pub(crate) fn fetch_ranges(
    consumer: &Reader,
    ranges: &[PartitionRange],
    brokers: &str,
    timeout: Duration,
    fail_on_data_loss: bool,
) -> Result<Fetch> {
    let wanted: Vec<&PartitionRange> = ranges.iter().filter(|r| r.end > r.start).collect();
    if wanted.is_empty() {
        return Ok(Fetch {
            records: Vec::new(),
            served_end: BTreeMap::new(),
        });
    }
    let mut tpl = TopicPartitionList::new();
    for r in &wanted {
        tpl.add_partition_offset(&r.topic, r.partition, Offset::Offset(r.start))?;
    }
    consumer.assign(&tpl).context("assigning partitions")?;
    let mut fetch = RangeFetch::new(&wanted);
    let mut stall = StallWatch::new(brokers, timeout);
    while !fetch.open.is_empty() {
        match consumer.poll(Duration::from_millis(100)) {
            Some(Ok(message)) => fetch.take(&message),
            Some(Err(KafkaError::MessageConsumption(RDKafkaErrorCode::OffsetOutOfRange))) => {
                fetch.skip_aged_out(consumer, timeout, fail_on_data_loss)?
            }
            Some(Err(e)) => fetch.retry_after(&e),
            None => fetch.close_passed(consumer),
        }
        stall.check(fetch.last_progress, &fetch.open);
    }
    fetch.drain_received(consumer);
    let _ = consumer.unassign();
    let served_end = std::mem::take(&mut fetch.served_end);
    Ok(Fetch {
        records: fetch.into_records(&wanted),
        served_end,
    })
}

/// What a fetch has read so far, per partition.
struct RangeFetch {
    /// Records read, per partition, in offset order.
    records: HashMap<Tp, Vec<Fetched>>,
    /// Partitions still being read, with their range's end (exclusive).
    open: HashMap<Tp, i64>,
    /// The next offset wanted, per partition.
    next: HashMap<Tp, i64>,
    last_progress: Instant,
    errors: u64,
    /// Per partition, one past the highest offset received.
    served_end: BTreeMap<Tp, i64>,
}

impl RangeFetch {
    fn new(wanted: &[&PartitionRange]) -> Self {
        let by_tp = |value: fn(&PartitionRange) -> i64| {
            wanted
                .iter()
                .map(|r| ((r.topic.clone(), r.partition), value(r)))
                .collect()
        };
        RangeFetch {
            records: HashMap::new(),
            open: by_tp(|r| r.end),
            next: by_tp(|r| r.start),
            last_progress: Instant::now(),
            errors: 0,
            served_end: BTreeMap::new(),
        }
    }

    /// Keeps a record inside its partition's range; closes the partition
    /// at the range's last offset.
    fn take(&mut self, m: &BorrowedMessage<'_>) {
        let tp = (m.topic().to_string(), m.partition());
        let offset = m.offset();
        self.served(&tp, offset);
        let Some(&end) = self.open.get(&tp) else {
            return;
        };
        if offset < end {
            self.records
                .entry(tp.clone())
                .or_default()
                .push(Fetched::from(m));
            self.next.insert(tp.clone(), offset + 1);
            self.last_progress = Instant::now();
        }
        if offset >= end - 1 {
            self.open.remove(&tp);
        }
    }

    fn served(&mut self, tp: &Tp, offset: i64) {
        let end = self.served_end.entry(tp.clone()).or_insert(offset + 1);
        *end = (*end).max(offset + 1);
    }

    /// Notes the records the client already received past the ranges'
    /// ends (the broker sends whole batches), without waiting for more.
    fn drain_received(&mut self, consumer: &Reader) {
        for _ in 0..DRAIN_MAX {
            match consumer.poll(Duration::ZERO) {
                Some(Ok(m)) => self.served(&(m.topic().to_string(), m.partition()), m.offset()),
                Some(Err(_)) => {}
                None => return,
            }
        }
    }

    /// The planned range aged out of retention before it was read: fails,
    /// or (when data loss is allowed) closes just the partitions whose next
    /// offset is gone.
    fn skip_aged_out(
        &mut self,
        consumer: &Reader,
        timeout: Duration,
        fail_on_data_loss: bool,
    ) -> Result<()> {
        if fail_on_data_loss {
            bail!(
                "data loss: offsets planned for this epoch ({}) are no longer on the broker \
                 (retention); set `source.fail_on_data_loss = false` to skip them",
                self.open
                    .keys()
                    .map(|(t, p)| format!("{t}-{p}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        let gone: Vec<Tp> = self
            .open
            .keys()
            .filter(|tp| {
                let want = self.next.get(*tp).copied().unwrap_or(0);
                consumer
                    .fetch_watermarks(&tp.0, tp.1, timeout)
                    .is_ok_and(|(low, _)| low > want)
            })
            .cloned()
            .collect();
        for tp in gone {
            let end = self.open.remove(&tp).unwrap_or(0);
            tracing::warn!(
                topic = %tp.0,
                partition = tp.1,
                "planned offsets from {} to {end} aged out of retention before they were \
                 read; skipping them",
                self.next.get(&tp).copied().unwrap_or(0)
            );
        }
        Ok(())
    }

    /// A transient fetch error: logged now and then, and retried.
    fn retry_after(&mut self, e: &KafkaError) {
        self.errors += 1;
        if self.errors == 1 || self.errors.is_multiple_of(100) {
            tracing::warn!("Kafka fetch error ({} so far, retrying): {e}", self.errors);
        }
    }

    /// Closes the partitions whose position passed their range's end
    /// without its last offset arriving (transaction markers, compaction).
    fn close_passed(&mut self, consumer: &Reader) {
        let Ok(positions) = consumer.position() else {
            return;
        };
        for el in positions.elements() {
            let tp = (el.topic().to_string(), el.partition());
            if let (Some(&end), Offset::Offset(p)) = (self.open.get(&tp), el.offset()) {
                if p >= end {
                    self.open.remove(&tp);
                }
            }
        }
    }

    /// The records, range by range in the order asked for.
    fn into_records(mut self, wanted: &[&PartitionRange]) -> Vec<Fetched> {
        let mut out = Vec::new();
        for r in wanted {
            let tp = (r.topic.clone(), r.partition);
            out.extend(self.records.remove(&tp).unwrap_or_default());
        }
        out
    }
}

/// Warns once per stall when no record arrived for `timeout`.
struct StallWatch<'a> {
    brokers: &'a str,
    timeout: Duration,
    warned: bool,
}

impl<'a> StallWatch<'a> {
    fn new(brokers: &'a str, timeout: Duration) -> Self {
        StallWatch {
            brokers,
            timeout,
            warned: false,
        }
    }

    fn check(&mut self, last_progress: Instant, open: &HashMap<Tp, i64>) {
        let stalled = last_progress.elapsed();
        if stalled <= self.timeout {
            self.warned = false;
        } else if !self.warned {
            tracing::warn!(
                brokers = %self.brokers,
                waiting_for = ?open.keys().collect::<Vec<_>>(),
                "no records from Kafka for {stalled:?}; waiting for the broker (nothing is skipped)"
            );
            self.warned = true;
        }
    }
}
