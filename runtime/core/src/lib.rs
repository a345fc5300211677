//! The vocabulary every other Weir crate shares, and the parts of the
//! host that must be correct for exactly-once to hold.
//!
//! - [`wal`]: the offset log (`offsets/N`, durable before epoch N reads)
//!   and the commit log (`commits/N`, written after the sink has epoch N),
//!   after Spark Structured Streaming's `MicroBatchExecution`.
//! - [`parts`]: the part log of a real-time epoch (`offsets/N.parts`).
//! - [`checkpoint`]: the directory both logs live in, its metadata and the
//!   integrity checks a start runs before trusting it; [`mirror`]: its copy
//!   on shared storage (an object store), of which the directory is a cache.
//! - [`source`] and [`sink`]: the traits a connector implements; the engine,
//!   not the connector, owns progress.
//! - [`json`]: the JSON-lines decoder sources share (exact numbers, one
//!   record per line, malformed lines set aside with file and line).
//! - [`progress`]: the record of what one epoch did; [`latency`]: its
//!   event→emit latency histogram.
//! - [`digest`]: the one way a component, config or blob is named;
//!   [`secret`]: passwords named by where they are read from, printed as `***`.
//! - [`fsutil`] (durable writes), [`clock`] (the one wall clock),
//!   [`backoff`] (pacing waits for services that are down).
//!
//! This crate knows nothing of Wasm, RocksDB, Kafka or PostgreSQL, so it
//! builds in seconds and can be fuzzed on its own.

pub mod artifacts;
pub mod backoff;
pub mod checkpoint;
pub mod clock;
pub mod column_tree;
pub mod digest;
pub mod duration;
pub mod faults;
pub mod fsutil;
pub mod json;
pub mod key_group;
pub mod latency;
pub mod lookup;
pub mod memory;
pub mod mirror;
pub mod outputs;
pub mod parts;
pub mod progress;
pub mod schema;
pub mod secret;
pub mod sink;
pub mod source;
pub mod wal;

pub use digest::Digest;
