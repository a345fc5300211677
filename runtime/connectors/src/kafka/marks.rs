//! What the broker holds: the partitions of the source's topics and their
//! `(low, high)` offsets. The micro-batch planner asks for them at every
//! plan; real-time mode asks from a thread of its own ([`MarksWatch`]), so
//! a slow broker answer never holds up a part.

use super::client::Reader;
use super::plan::Tp;
use anyhow::{bail, Context, Result};
use rdkafka::consumer::Consumer;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// `(low, high)` offsets per partition, as the broker reports them.
pub type Watermarks = BTreeMap<Tp, (i64, i64)>;

/// Where to ask, and how long an answer may take.
#[derive(Debug, Clone)]
pub struct Topics {
    pub topics: Vec<String>,
    pub servers: String,
    pub timeout: Duration,
    /// Only this partition of each topic, if set.
    pub partition: Option<i32>,
}

impl Topics {
    /// Every partition of every topic, from fresh metadata.
    pub fn partitions(&self, consumer: &Reader) -> Result<Vec<Tp>> {
        let mut out = Vec::new();
        for topic in &self.topics {
            let md = consumer
                .fetch_metadata(Some(topic), self.timeout)
                .map_err(|e| {
                    super::client::explain(consumer, format!(
                        "could not get metadata for topic `{topic}` from Kafka at {} within {:?}: {e}",
                        self.servers, self.timeout
                    ))
                })?;
            let t = md
                .topics()
                .iter()
                .find(|t| t.name() == topic)
                .with_context(|| format!("the broker returned no metadata for topic `{topic}`"))?;
            if let Some(err) = t.error() {
                bail!(
                    "topic `{topic}` is not available on {}: {err:?}",
                    self.servers
                );
            }
            if t.partitions().is_empty() {
                bail!("topic `{topic}` does not exist on {}", self.servers);
            }
            let ids: Vec<i32> = t
                .partitions()
                .iter()
                .map(|p| p.id())
                .filter(|&id| self.partition.is_none_or(|p| p == id))
                .collect();
            if ids.is_empty() {
                bail!(
                    "topic `{topic}` on {} has no partition {:?}",
                    self.servers,
                    self.partition
                );
            }
            out.extend(ids.into_iter().map(|id| (topic.clone(), id)));
        }
        Ok(out)
    }

    /// The offsets of `tps`.
    pub fn watermarks(&self, consumer: &Reader, tps: &[Tp]) -> Result<Watermarks> {
        let mut out = BTreeMap::new();
        for tp in tps {
            let w = consumer
                .fetch_watermarks(&tp.0, tp.1, self.timeout)
                .map_err(|e| {
                    super::client::explain(
                        consumer,
                        format!("fetching offsets of {}-{}: {e}", tp.0, tp.1),
                    )
                })?;
            out.insert(tp.clone(), w);
        }
        Ok(out)
    }

    /// Partitions and their offsets.
    pub fn marks(&self, consumer: &Reader) -> Result<Watermarks> {
        self.watermarks(consumer, &self.partitions(consumer)?)
    }
}

/// Asks the broker for [`Watermarks`] every `every` on a thread of its own;
/// the newest answer is taken with [`MarksWatch::take`]. Stops when
/// dropped.
pub struct MarksWatch {
    latest: Arc<Mutex<Option<Watermarks>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl MarksWatch {
    /// Starts asking with `consumer` (a client of its own).
    pub fn start(consumer: Reader, topics: Topics, every: Duration) -> Result<Self> {
        let latest = Arc::new(Mutex::new(None));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (latest, stop) = (latest.clone(), stop.clone());
            std::thread::Builder::new()
                .name("weir-kafka-marks".into())
                .spawn(move || watch(&consumer, &topics, every, &latest, &stop))
                .context("starting the Kafka offsets watcher")?
        };
        Ok(MarksWatch {
            latest,
            stop,
            thread: Some(thread),
        })
    }

    /// The newest answer, if one came since the last call.
    pub fn take(&self) -> Option<Watermarks> {
        self.latest.lock().ok()?.take()
    }
}

impl Drop for MarksWatch {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn watch(
    consumer: &Reader,
    topics: &Topics,
    every: Duration,
    latest: &Mutex<Option<Watermarks>>,
    stop: &AtomicBool,
) {
    let mut due = Instant::now() + every;
    while !stop.load(Ordering::Relaxed) {
        if Instant::now() < due {
            std::thread::sleep(Duration::from_millis(20));
            continue;
        }
        due = Instant::now() + every;
        match topics.marks(consumer) {
            Ok(marks) => {
                if let Ok(mut l) = latest.lock() {
                    *l = Some(marks);
                }
            }
            Err(e) => tracing::warn!(
                brokers = %topics.servers,
                "refreshing Kafka partitions and offsets (the live reader goes on): {e:#}"
            ),
        }
    }
}
