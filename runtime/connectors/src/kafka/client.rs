//! librdkafka client settings, built in one place for the source's
//! consumer, the sink's producer and the sink's tail reader, so that a
//! pipeline's `options` (TLS, SASL, …) reach every client Weir opens.
//! The user's `options` are applied last and win.

use rdkafka::ClientConfig;
use std::collections::BTreeMap;
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
        c.set("bootstrap.servers", self.servers)
            .set("log_level", "3");
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
