//! librdkafka client settings, built in one place for the source's
//! consumer, the sink's producer and the sink's tail reader, so that a
//! pipeline's `options` (TLS, SASL, …) reach every client Weir opens.
//! The pipeline's typed security ([`super::security`]) comes first, the
//! user's `options` last (they win; the keys security sets are refused
//! there). [`Reporting`] keeps the last error librdkafka reports for a
//! client, which its calls' own errors do not carry.

use super::security::ClientSecurity;
use rdkafka::config::RDKafkaLogLevel;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};
use rdkafka::error::KafkaError;
use rdkafka::{ClientConfig, ClientContext};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Where and how to reach the brokers.
#[derive(Debug, Clone, Copy)]
pub struct Brokers<'a> {
    /// `host:port[,host:port…]`.
    pub servers: &'a str,
    /// Extra librdkafka settings from the pipeline file.
    pub options: &'a BTreeMap<String, String>,
    /// How long requests may take.
    pub timeout: Duration,
    /// TLS and SASL, secrets read.
    pub security: &'a ClientSecurity,
}

impl Brokers<'_> {
    /// A consumer that reads exact offset ranges and never commits or moves
    /// on its own: the runtime owns the offsets.
    pub fn consumer(&self, group: &str) -> ClientConfig {
        self.with_options(self.consumer_settings(group))
    }

    /// Real-time mode's live reader: assigned once, it keeps fetching, and
    /// a fetch the broker holds open for lack of data returns within a
    /// millisecond, so a record that arrives meanwhile waits no longer (a
    /// broker that holds every fetch for its full wait, as tansu does,
    /// adds this wait to every record's latency).
    pub fn live_consumer(&self, group: &str) -> ClientConfig {
        let mut c = self.consumer_settings(group);
        c.set("fetch.wait.max.ms", "1")
            // Fetch again at once after an error or a full queue: the part
            // waiting for it is what the latency is made of.
            .set("fetch.error.backoff.ms", "50")
            .set("fetch.queue.backoff.ms", "10");
        self.with_options(c)
    }

    /// A consumer of committed records only (the sink's view of what an
    /// earlier run of the query made durable).
    pub fn committed_reader(&self, group: &str) -> ClientConfig {
        let mut c = self.consumer_settings(group);
        c.set("isolation.level", "read_committed");
        self.with_options(c)
    }

    /// The consumer settings, before the pipeline's `options`.
    fn consumer_settings(&self, group: &str) -> ClientConfig {
        let mut c = self.base();
        c.set("group.id", group)
            .set("enable.auto.commit", "false")
            .set("enable.auto.offset.store", "false")
            // An offset outside the log must surface as an error, never as a
            // silent jump to the start or the end.
            .set("auto.offset.reset", "error")
            .set("enable.partition.eof", "false")
            // The range's end is known, so there is no point in letting the
            // broker hold a fetch open waiting for more data than exists.
            .set("fetch.wait.max.ms", "10")
            .set("socket.timeout.ms", self.millis());
        c
    }

    /// An idempotent producer that waits for every replica. It sends at
    /// once (`linger.ms = 0`): the sink queues a whole part or epoch and
    /// then waits for it, so lingering would only add to every write.
    pub fn producer(&self) -> ClientConfig {
        let mut c = self.base();
        c.set("acks", "all")
            .set("enable.idempotence", "true")
            .set("linger.ms", "0")
            .set("message.timeout.ms", self.millis());
        self.with_options(c)
    }

    fn base(&self) -> ClientConfig {
        let mut c = ClientConfig::new();
        // Warnings too: a failed TLS handshake or SASL login is logged as
        // one (facility FAIL), and [`Reporting`] keeps it.
        c.set("bootstrap.servers", self.servers)
            .set_log_level(RDKafkaLogLevel::Warning);
        self.security.apply(&mut c);
        c
    }

    fn millis(&self) -> String {
        self.timeout.as_millis().max(1000).to_string()
    }

    fn with_options(&self, mut c: ClientConfig) -> ClientConfig {
        for (k, v) in self.options {
            c.set(k, v);
        }
        c
    }
}

/// A consumer that reports its errors through [`Reporting`].
pub type Reader = BaseConsumer<Reporting>;

/// `message`, with the last error `consumer` reported as its cause.
/// rdkafka delivers librdkafka's log lines through the client's queue, so
/// the ones waiting there are served first; only when nothing is assigned
/// to the consumer, so that no record of a read in progress is taken.
/// Never for a consumer that subscribes to a group: its poll could take
/// partitions in a rebalance.
pub fn explain(consumer: &Reader, message: String) -> anyhow::Error {
    let idle = consumer
        .assignment()
        .map(|a| a.count() == 0)
        .unwrap_or(false);
    if idle {
        // Each poll serves one waiting event (the newest failure is last);
        // a failed connection leaves a few log lines per retry.
        for _ in 0..10_000 {
            let _ = consumer.poll(Duration::ZERO);
        }
    }
    consumer.context().explain(message)
}

/// A client context that logs what librdkafka reports (a refused TLS
/// handshake, a failed SASL login, a broker gone) through `tracing` and
/// keeps the last of it: a metadata request only says it timed out, while
/// the cause was reported to the context.
#[derive(Clone, Default)]
pub struct Reporting {
    /// The last connection failure (`FAIL` log lines: the cause).
    failure: Arc<Mutex<Option<String>>>,
    /// The last error event (often a summary: "1/1 brokers are down").
    error: Arc<Mutex<Option<String>>>,
}

impl Reporting {
    /// The last connection failure reported, else the last error event.
    pub fn last_error(&self) -> Option<String> {
        let read = |slot: &Mutex<Option<String>>| slot.lock().ok().and_then(|s| s.clone());
        read(&self.failure).or_else(|| read(&self.error))
    }

    /// `message`, with the last reported error as its cause.
    pub fn explain(&self, message: String) -> anyhow::Error {
        match self.last_error() {
            Some(cause) => anyhow::anyhow!("{message}; the client's last error: {cause}"),
            None => anyhow::anyhow!(message),
        }
    }

    /// An error event (delivered when the client is polled).
    pub fn record(&self, error: &KafkaError, reason: &str) {
        tracing::warn!(target: "weir::kafka", "{reason} ({error})");
        keep(&self.error, reason);
    }

    /// A log line (delivered when the client is polled): a connection's
    /// failure (`FAIL`: refused, TLS handshake, SASL login) is kept.
    pub fn log(&self, level: RDKafkaLogLevel, facility: &str, message: &str) {
        if facility == "FAIL" {
            tracing::warn!(target: "weir::kafka", "{message}");
            keep(&self.failure, message);
        } else if matches!(
            level,
            RDKafkaLogLevel::Emerg
                | RDKafkaLogLevel::Alert
                | RDKafkaLogLevel::Critical
                | RDKafkaLogLevel::Error
                | RDKafkaLogLevel::Warning
        ) {
            tracing::warn!(target: "weir::kafka", "{facility}: {message}");
        } else {
            tracing::debug!(target: "weir::kafka", "{facility}: {message}");
        }
    }
}

/// Puts `reason` in `slot`, without librdkafka's thread prefix
/// (`[thrd:ssl://host:port/0]: `; the message names the broker again).
fn keep(slot: &Mutex<Option<String>>, reason: &str) {
    let reason = match reason
        .strip_prefix("[thrd:")
        .and_then(|r| r.split_once("]: "))
    {
        Some((_, rest)) => rest,
        None => reason,
    };
    if let Ok(mut last) = slot.lock() {
        *last = Some(reason.to_string());
    }
}

impl ClientContext for Reporting {
    fn log(&self, level: RDKafkaLogLevel, facility: &str, message: &str) {
        Reporting::log(self, level, facility, message);
    }

    fn error(&self, error: KafkaError, reason: &str) {
        self.record(&error, reason);
    }
}

impl ConsumerContext for Reporting {}
