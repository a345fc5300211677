//! Kafka: a topic as a source, read in offset ranges the engine plans and
//! records in `offsets/N`, and as a transactional sink; and partition
//! ownership for the workers of a cluster ([`group`]).

pub mod client;
pub mod config;
mod fetch;
pub mod group;
pub mod marks;
mod past_end;
pub mod plan;
mod replay;
pub mod security;
pub mod sink;
pub mod source;
mod tail;

pub use config::{KafkaSinkConfig, KafkaSourceConfig};
pub use sink::*;
pub use source::*;
