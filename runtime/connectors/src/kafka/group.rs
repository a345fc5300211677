//! Partition ownership from Kafka's consumer-group protocol: the workers of
//! a cluster join one group, subscribed to the source topic, and the
//! group's coordinator deals its partitions out among them, moving a
//! worker's share to the others when it leaves or stops heartbeating.
//!
//! The member only *owns*; it never reads records. Every partition it is
//! assigned is paused at once, so its polls serve rebalances and nothing
//! else, and the engine reads the partitions it owns with exact offset
//! ranges, as a single process does. Ownership changes reach an
//! [`Ownership`] from inside [`Membership::poll`]: a revoked partition is
//! stopped before the poll returns, and so before the group hands it on.

use super::client::Brokers;
use anyhow::{Context, Result};
use rdkafka::config::RDKafkaLogLevel;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext, Rebalance};
use rdkafka::{ClientContext, TopicPartitionList};
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

/// What a member does when the group changes its partitions.
pub trait Ownership: Send + Sync + 'static {
    /// These partitions are now this member's: start running them.
    fn assigned(&self, partitions: &BTreeSet<i32>);
    /// These partitions are no longer this member's (another member may be
    /// given them as soon as this returns): stop touching them first.
    fn revoked(&self, partitions: &BTreeSet<i32>);
}

/// How to join the group.
#[derive(Debug, Clone)]
pub struct GroupSettings<'a> {
    pub brokers: Brokers<'a>,
    /// The consumer group.
    pub group: &'a str,
    /// The topic whose partitions are dealt out.
    pub topic: &'a str,
    /// This member's name in the group's logs (`client.id`).
    pub member: &'a str,
    pub session_timeout: Duration,
    pub heartbeat_interval: Duration,
    /// librdkafka's `partition.assignment.strategy`.
    pub assignment: &'a str,
}

/// A member of the group (leaves it when dropped).
pub struct Membership {
    consumer: BaseConsumer<GroupContext>,
    topic: String,
}

impl Membership {
    /// Joins the group; partitions arrive in later [`Membership::poll`]s.
    pub fn join(s: &GroupSettings<'_>, owner: Arc<dyn Ownership>) -> Result<Self> {
        let mut config = s.brokers.consumer(s.group);
        config
            .set("client.id", s.member)
            .set("session.timeout.ms", millis(s.session_timeout))
            .set("heartbeat.interval.ms", millis(s.heartbeat_interval))
            .set("partition.assignment.strategy", s.assignment)
            // It never fetches (its partitions are paused), so it has no
            // use for a starting offset; `error` would only log one.
            .set("auto.offset.reset", "latest")
            .set_log_level(RDKafkaLogLevel::Warning);
        let consumer: BaseConsumer<GroupContext> = config
            .create_with_context(GroupContext {
                owner,
                reporting: Default::default(),
            })
            .context("creating the group member")?;
        consumer
            .subscribe(&[s.topic])
            .with_context(|| format!("joining group `{}` on topic `{}`", s.group, s.topic))?;
        Ok(Membership {
            consumer,
            topic: s.topic.to_string(),
        })
    }

    /// Serves the group for up to `timeout`: heartbeats go on in the
    /// background, but rebalances (and so [`Ownership`] calls) happen here.
    /// Call it often: a member that stops polling for longer than the
    /// rebalance timeout is put out of the group.
    pub fn poll(&self, timeout: Duration) {
        if let Some(Err(e)) = self.consumer.poll(timeout) {
            tracing::warn!(topic = %self.topic, "consumer group: {e}");
        }
    }

    /// The partitions the group gave this member, as librdkafka knows it.
    pub fn owned(&self) -> BTreeSet<i32> {
        self.consumer
            .assignment()
            .map(|tpl| partitions(&tpl))
            .unwrap_or_default()
    }
}

fn millis(d: Duration) -> String {
    d.as_millis().to_string()
}

fn partitions(tpl: &TopicPartitionList) -> BTreeSet<i32> {
    tpl.elements().iter().map(|e| e.partition()).collect()
}

/// Turns librdkafka's rebalance callbacks into [`Ownership`] calls.
struct GroupContext {
    owner: Arc<dyn Ownership>,
    reporting: super::client::Reporting,
}

impl ClientContext for GroupContext {
    fn log(&self, level: RDKafkaLogLevel, facility: &str, message: &str) {
        self.reporting.log(level, facility, message);
    }

    fn error(&self, error: rdkafka::error::KafkaError, reason: &str) {
        self.reporting.record(&error, reason);
    }
}

impl ConsumerContext for GroupContext {
    fn pre_rebalance(&self, _: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        if let Rebalance::Revoke(tpl) = rebalance {
            let gone = partitions(tpl);
            tracing::info!(partitions = ?gone, "consumer group: partitions revoked");
            self.owner.revoked(&gone);
        }
    }

    fn post_rebalance(&self, consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        match rebalance {
            Rebalance::Assign(tpl) => {
                // Owned, never fetched: the engine reads exact ranges itself.
                if let Err(e) = consumer.pause(tpl) {
                    tracing::warn!("consumer group: pausing the assigned partitions: {e}");
                }
                let got = partitions(tpl);
                tracing::info!(partitions = ?got, "consumer group: partitions assigned");
                self.owner.assigned(&got);
            }
            Rebalance::Revoke(_) => {}
            Rebalance::Error(e) => tracing::warn!("consumer group: rebalance failed: {e}"),
        }
    }
}
