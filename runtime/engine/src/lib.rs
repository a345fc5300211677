//! Weir's engine: turns a pipeline file into a running pipeline and runs it
//! epoch by epoch, exactly once.
//!
//! - [`config`]: the pipeline file, parsed and checked in one place.
//! - [`open`]: builds a [`Pipeline`] from its config — checkpoint, source,
//!   sink, operator and state — and checks at start that the operator loads.
//! - [`pipeline`]: the epoch loop and recovery.
//! - [`dedup`] and [`event_time`]: the host's watermark and deduplication.
//! - [`isolate`]: bisection that finds the rows an operator fails on.
//! - [`registry`] and [`deploy`]: the operator versions a pipeline was
//!   given and how they are swapped between epochs.
//! - [`operator_cache`]: compiled operator versions, shared by the epoch
//!   loop and the deploy control plane.
//! - [`runner`]: the one way any of them runs an operator version.
//! - [`observe`]: progress history, metrics and the backlog verdict.

pub mod cluster;
pub mod config;
pub mod dedup;
pub mod deploy;
pub mod event_time;
pub mod exchange;
pub mod isolate;
pub mod lookups;
pub mod observe;
pub mod open;
pub mod operator_cache;
pub mod operator_state;
pub mod pipeline;
pub mod registry;
pub mod runner;

pub use open::{open, OpenOptions};
pub use pipeline::Pipeline;
