//! `weir feed`: produce the demo's synthetic payments (with planted fraud)
//! to a Kafka topic at a steady rate, to drive `examples/kafka-fraud` or a
//! benchmark. Each payment's `ts` is its production time, so alerts tell how
//! long a payment took from the producer to the sink.

use anyhow::{Context, Result};
use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer, ThreadedProducer};
use rdkafka::ClientConfig;
use std::time::{Duration, Instant};
use weir_connectors::generator::payments as generator;
use weir_connectors::kafka::send_blocking;
use weir_core::clock::now_ms;

/// What to produce.
#[derive(Debug, Clone)]
pub struct FeedOptions {
    pub bootstrap_servers: String,
    pub topic: String,
    /// Payments to produce.
    pub payments: u64,
    /// Payments per second; `None` as fast as possible.
    pub rate: Option<u64>,
    pub seed: u64,
    /// Index of the first payment (to continue an earlier feed).
    pub start: u64,
}

/// Produces the payments, keyed by card id; returns how many were sent.
pub fn feed(o: &FeedOptions) -> Result<u64> {
    let producer: ThreadedProducer<DefaultProducerContext> = ClientConfig::new()
        .set("bootstrap.servers", &o.bootstrap_servers)
        .set("acks", "all")
        .set("enable.idempotence", "true")
        .set("linger.ms", "5")
        .set("message.timeout.ms", "30000")
        .create()
        .context("creating the Kafka producer")?;
    let started = Instant::now();
    for n in 0..o.payments {
        if let Some(rate) = o.rate.filter(|r| *r > 0) {
            let due = started + Duration::from_secs_f64(n as f64 / rate as f64);
            if let Some(wait) = due.checked_duration_since(Instant::now()) {
                std::thread::sleep(wait);
            }
        }
        let (mut p, _) = generator::payment(o.seed, o.start + n);
        p.ts = now_ms();
        let value = serde_json::to_vec(&p)?;
        let record = BaseRecord::to(&o.topic)
            .key(p.card_id.as_str())
            .payload(value.as_slice());
        send_blocking(&producer, record).with_context(|| format!("producing to `{}`", o.topic))?;
    }
    producer
        .flush(Duration::from_secs(30))
        .with_context(|| format!("flushing to {}", o.bootstrap_servers))?;
    Ok(o.payments)
}
