//! The `weir` command: `run`, `demo`, `deploy` and friends, `operator new`
//! and `operator test`, `feed`, `checkpoint`, plus the bundled guest
//! operators `weir demo` runs. Everything that must be correct lives in the
//! crates below it (engine, connectors, host, state, core); this crate only
//! parses arguments, prints, and wires them together.

pub mod cli;
mod commands;
pub mod demo;
pub mod devtools;
pub mod explain;
pub mod feed;
mod security;
pub mod watch;

/// The bundled `fraud-rules` operator, built from `operators/fraud-rules`.
pub const FRAUD_RULES_WASM: &[u8] =
    include_bytes!(concat!(env!("WEIR_GUEST_DIR"), "/fraud_rules.wasm"));

/// The bundled `fraud-velocity` operator (fraud-rules plus a per-card
/// velocity rule over keyed state), built from `operators/fraud-velocity`.
pub const FRAUD_VELOCITY_WASM: &[u8] =
    include_bytes!(concat!(env!("WEIR_GUEST_DIR"), "/fraud_velocity.wasm"));

/// The bundled `fraud-windows` operator (the same job with Spark's
/// final-count event-time windows, on timers), built from
/// `operators/fraud-windows`.
pub const FRAUD_WINDOWS_WASM: &[u8] =
    include_bytes!(concat!(env!("WEIR_GUEST_DIR"), "/fraud_windows.wasm"));

/// The bundled `fraud-model` operator (a fraud model evaluated by tract
/// inside the sandbox), built from `operators/fraud-model`.
pub const FRAUD_MODEL_WASM: &[u8] =
    include_bytes!(concat!(env!("WEIR_GUEST_DIR"), "/fraud_model.wasm"));

/// The model `fraud-model` runs in the demo: gradient-boosted trees trained
/// by `tools/model/train.py`, in ONNX.
pub const FRAUD_MODEL_ONNX: &[u8] =
    include_bytes!("../../../operators/fraud-model/model/model.onnx");

/// Directory holding the bundled guest components (for tests and benches).
pub const GUEST_DIR: &str = env!("WEIR_GUEST_DIR");
