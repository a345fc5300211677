//! Weir: a streaming runtime that runs user-supplied operators as sandboxed
//! WebAssembly components over bounded, columnar micro-batches.
//!
//! The host owns everything that must be correct; operators only compute.
//! Modules follow the data: [`source`] → [`engine`] (planning into the
//! [`wal`]) → [`operator`] (the Wasm host) → [`sink`] → commit in the [`wal`].
//! [`state`] is the host-owned keyed state the operator reads and writes;
//! [`event_time`] the watermark and [`dedup`] the host's deduplication on it.
//! [`registry`] lists the operator versions a pipeline was given and
//! [`deploy`] swaps them between epochs (driven by [`admin`], the HTTP API).
//! [`observe`] keeps each epoch's [`progress`] record, the metrics and the
//! backlog verdict the API, dashboard and `weir status` show.
//! [`devtools`] is `weir operator test` and `weir operator new`, [`watch`]
//! is `weir run --watch`.
//! [`checkpoint`] is the directory both logs live in, [`clock`] the one
//! wall clock (Unix ms) records are stamped with, [`backoff`] paces
//! waits for services that are down, [`pipeline`] builds a
//! pipeline from its [`config`], [`demo`] is `weir demo`, [`cli`] the binary.

pub mod admin;
pub mod backoff;
pub mod checkpoint;
pub mod cli;
pub mod clock;
pub mod config;
pub mod dedup;
pub mod demo;
pub mod deploy;
pub mod devtools;
pub mod engine;
pub mod event_time;
pub mod feed;
pub mod fsutil;
pub mod isolate;
pub mod observe;
pub mod operator;
pub mod pipeline;
pub mod progress;
pub mod registry;
pub mod sink;
pub mod source;
pub mod state;
pub mod wal;
pub mod watch;

/// The bundled `fraud-rules` operator, built from `operators/fraud-rules`.
pub const FRAUD_RULES_WASM: &[u8] =
    include_bytes!(concat!(env!("WEIR_GUEST_DIR"), "/fraud_rules.wasm"));

/// The bundled `fraud-velocity` operator (fraud-rules plus a per-card
/// velocity rule over keyed state), built from `operators/fraud-velocity`.
pub const FRAUD_VELOCITY_WASM: &[u8] =
    include_bytes!(concat!(env!("WEIR_GUEST_DIR"), "/fraud_velocity.wasm"));

/// Directory holding the bundled guest components (for tests and benches).
pub const GUEST_DIR: &str = env!("WEIR_GUEST_DIR");
