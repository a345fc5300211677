//! The Kafka source's live reader, for real-time mode: one consumer,
//! assigned once to every partition at the positions the runtime planned
//! up to, that keeps fetching while the pipeline runs. Each real-time plan
//! takes what it buffered since the previous one (no broker round trip:
//! the records are already here) and the `read` of that part gets the very
//! same records, so a record is handed to the operator as soon as the
//! consumer has it.
//!
//! The ranges it proposes are ordinary `{topic, partition, start, end}`
//! ranges, planned by [`plan::plan`] over what is buffered, so a replay
//! reads them back from the broker with [`super::fetch`] exactly as a
//! micro-batch epoch's. Memory is bounded: the buffer holds at most one
//! part's worth of records, and librdkafka's own queue stops fetching when
//! full, so a slow operator or sink slows the fetching, never drops.

use super::client::Reader;
use super::plan::{self, KafkaRange, PartitionRange, Tp};
use super::source::Fetched;
use anyhow::{bail, Context, Result};
use rdkafka::consumer::Consumer;
use rdkafka::error::KafkaError;
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::{Offset, TopicPartitionList};
use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

/// Why the live reader stopped: the broker no longer holds the offsets it
/// was reading (retention), so its positions must be planned again.
#[derive(Debug, thiserror::Error)]
#[error("offsets the live Kafka reader wanted are no longer on the broker (retention)")]
pub(crate) struct AgedOut;

/// The live reader: a consumer and the records it fetched but no part
/// took yet.
pub(crate) struct Tail {
    consumer: Reader,
    /// Fetched, not yet planned: per partition, in offset order.
    buffered: BTreeMap<Tp, VecDeque<Fetched>>,
    /// The range the last plan proposed, with its records, for its `read`.
    taken: Option<(KafkaRange, Vec<Fetched>)>,
    errors: u64,
}

impl Tail {
    /// Assigns `consumer` to every partition in `positions`, each at its
    /// position (the next offset to plan).
    pub fn open(consumer: Reader, positions: &BTreeMap<Tp, i64>) -> Result<Self> {
        let mut tpl = TopicPartitionList::new();
        for ((topic, partition), &at) in positions {
            tpl.add_partition_offset(topic, *partition, Offset::Offset(at))?;
        }
        consumer
            .assign(&tpl)
            .context("assigning the live Kafka reader its partitions")?;
        Ok(Tail {
            consumer,
            buffered: BTreeMap::new(),
            taken: None,
            errors: 0,
        })
    }

    /// Adds partitions that appeared since the reader was opened.
    pub fn add(&mut self, tp: &Tp, at: i64) -> Result<()> {
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset(&tp.0, tp.1, Offset::Offset(at))?;
        self.consumer
            .incremental_assign(&tpl)
            .with_context(|| format!("assigning new partition {}-{}", tp.0, tp.1))
    }

    /// Moves what the consumer has fetched into the buffer, without
    /// waiting longer than `wait` for the first record, until `room`
    /// records are buffered. Transient errors are logged and left to the
    /// client's own retries; offsets gone from the broker are [`AgedOut`].
    pub fn poll(&mut self, room: usize, wait: Duration) -> Result<()> {
        let mut timeout = wait;
        let mut buffered = self.len();
        while buffered < room {
            match self.consumer.poll(timeout) {
                None => return Ok(()),
                Some(Ok(m)) => {
                    let f = Fetched::from(&m);
                    self.buffered
                        .entry((f.topic.clone(), f.partition))
                        .or_default()
                        .push_back(f);
                    buffered += 1;
                }
                Some(Err(KafkaError::MessageConsumption(RDKafkaErrorCode::OffsetOutOfRange))) => {
                    return Err(AgedOut.into())
                }
                Some(Err(e)) => {
                    self.errors += 1;
                    if self.errors == 1 || self.errors.is_multiple_of(1000) {
                        tracing::warn!(
                            "live Kafka reader: {e} ({} errors so far; the client retries, \
                             nothing is skipped)",
                            self.errors
                        );
                    }
                    return Ok(());
                }
            }
            timeout = Duration::ZERO;
        }
        Ok(())
    }

    /// Records buffered, not yet planned.
    pub fn len(&self) -> usize {
        self.buffered.values().map(VecDeque::len).sum()
    }

    /// Plans the next part over what is buffered: from each partition's
    /// position up to its last buffered record, at most `max` offsets in
    /// all (spread as [`plan::plan`] spreads a micro-batch epoch's).
    pub fn take(
        &mut self,
        positions: &BTreeMap<Tp, i64>,
        max: Option<u64>,
    ) -> Result<Option<KafkaRange>> {
        let mut marks = BTreeMap::new();
        for (tp, records) in &self.buffered {
            let (Some(at), Some(last)) = (positions.get(tp), records.back()) else {
                continue;
            };
            marks.insert(tp.clone(), (*at, last.offset + 1));
        }
        let (ranges, losses) = plan::plan(positions, &marks, max, false)
            .context("planning over the live reader's records")?;
        if let Some(l) = losses.first() {
            bail!(
                "the live Kafka reader has offset {} of {}-{} but the next one planned is {}",
                l.available,
                l.tp.0,
                l.tp.1,
                l.wanted
            );
        }
        if ranges.is_empty() {
            return Ok(None);
        }
        let mut records = Vec::new();
        for r in &ranges {
            records.extend(self.drain(r));
        }
        let range = KafkaRange { partitions: ranges };
        self.taken = Some((range.clone(), records));
        Ok(Some(range))
    }

    /// The buffered records of `r`, in offset order.
    fn drain(&mut self, r: &PartitionRange) -> Vec<Fetched> {
        let tp = (r.topic.clone(), r.partition);
        let Some(queue) = self.buffered.get_mut(&tp) else {
            return Vec::new();
        };
        let n = queue.iter().take_while(|f| f.offset < r.end).count();
        let out: Vec<Fetched> = queue.drain(..n).filter(|f| f.offset >= r.start).collect();
        if queue.is_empty() {
            self.buffered.remove(&tp);
        }
        out
    }

    /// The records of `range` if it is the one the last plan proposed
    /// (handed over once), `None` otherwise (a replay reads the broker).
    pub fn records_for(&mut self, range: &KafkaRange) -> Option<Vec<Fetched>> {
        match self.taken.take() {
            Some((taken, records)) if taken == *range => Some(records),
            other => {
                self.taken = other;
                None
            }
        }
    }
}
