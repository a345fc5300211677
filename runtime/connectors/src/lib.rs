//! Weir's connectors: one folder per technology, each owning its
//! configuration, its checks and how it is opened.
//!
//! - [`files`]: a directory of JSON-lines or Parquet files as a source; a directory of
//!   per-epoch files as a sink.
//! - [`kafka`]: a topic as a source (offset ranges planned by the engine,
//!   not a consumer group) and as a sink (transactional per epoch).
//! - [`postgres`]: a table as a sink, written in one transaction with the
//!   epoch's progress row.
//! - [`parquet`]: a directory of per-epoch Parquet files as a sink.
//! - [`delta`]: a Delta Lake table as a sink, one commit per epoch with a
//!   `txn` action for exactly-once.
//! - [`console`]: standard output, for demos and debugging.
//! - [`generator`]: demo payments at a steady rate, no service needed.
//! - [`s3`]: S3-compatible object stores: objects under a prefix as a
//!   source (JSON lines or Parquet), and checkpoints.
//!
//! Sources implement [`weir_core::source::Source`] and sinks
//! [`weir_core::sink::Sink`]; each connector's config type implements
//! [`connector::SourceConnector`] or [`connector::SinkConnector`] and is
//! listed once in [`registry`]. The engine owns progress and exactly-once.
//! `docs/connectors.md` walks through adding one.

pub mod avro;
pub mod connector;
pub mod console;
pub mod delta;
pub mod files;
pub mod generator;
pub mod kafka;
pub mod lookup;
pub mod parquet;
pub mod postgres;
pub mod protobuf;
pub mod registry;
pub mod s3;
