//! `[cluster]`: several `weir run` processes of one pipeline file share its
//! work. Kafka's consumer-group protocol decides which worker owns which
//! partition; the checkpoint in the object store lets any worker take any
//! partition over ([`crate::cluster`]).

use anyhow::{bail, Result};
use serde::Deserialize;
use std::time::Duration;

/// `[cluster]`: the pipeline runs on several workers, each a `weir run`
/// of this same file, that share the Kafka source's partitions through a
/// consumer group and the checkpoint through the object store; a worker
/// that stops has its partitions taken over (docs/cluster.md).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterConfig {
    /// The consumer group the workers form; every worker of the pipeline
    /// names the same one, and no other consumer may use it.
    pub group: String,
    /// How long a worker may go silent (dead, paused, cut off) before its
    /// partitions move to the others (default 10s). Takeover takes about
    /// this long plus a rebalance; shorter means faster failover but a
    /// long pause of a healthy worker (a stalled disk) then counts as death.
    #[serde(default = "default_session_timeout", with = "weir_core::duration")]
    pub session_timeout: Duration,
    /// How partitions are spread over workers (librdkafka's
    /// `partition.assignment.strategy`, default `roundrobin`).
    #[serde(default)]
    pub assignment: Assignment,
}

/// The partition assignment strategies workers may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Assignment {
    /// Partitions dealt out one by one: an even spread.
    #[default]
    Roundrobin,
    /// Consecutive ranges of partitions per worker.
    Range,
    /// Incremental: a rebalance moves only the partitions that must move,
    /// and the others keep running through it (KIP-429). Needs a broker
    /// whose group coordinator supports it.
    CooperativeSticky,
}

impl Assignment {
    /// The librdkafka name.
    pub fn librdkafka(self) -> &'static str {
        match self {
            Assignment::Roundrobin => "roundrobin",
            Assignment::Range => "range",
            Assignment::CooperativeSticky => "cooperative-sticky",
        }
    }
}

fn default_session_timeout() -> Duration {
    Duration::from_secs(10)
}

/// Bounds librdkafka and Kafka brokers accept for a session timeout.
const SESSION_TIMEOUT: std::ops::RangeInclusive<Duration> =
    Duration::from_secs(1)..=Duration::from_secs(300);

impl ClusterConfig {
    /// Checks the settings alone.
    pub fn validate(&self) -> Result<()> {
        if self.group.trim().is_empty() {
            bail!("`cluster.group` must name the consumer group the workers form");
        }
        if !SESSION_TIMEOUT.contains(&self.session_timeout) {
            bail!(
                "`cluster.session_timeout` must be between {:?} and {:?}",
                SESSION_TIMEOUT.start(),
                SESSION_TIMEOUT.end()
            );
        }
        Ok(())
    }

    /// How often a worker tells the group it is alive: a sixth of the
    /// session timeout, so that a few lost heartbeats are not a death.
    pub fn heartbeat_interval(&self) -> Duration {
        self.session_timeout / 6
    }
}
