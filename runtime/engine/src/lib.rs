//! Weir's engine: turns a pipeline file into a running pipeline and runs it
//! epoch by epoch, exactly once.
//!
//! Modules, each depending only on the ones listed before it (a test,
//! `module_graph`, fails on a cycle):
//!
//! - [`config`]: the pipeline file, parsed and checked in one place.
//! - [`observe`]: progress history, metrics, the backlog verdict and the
//!   cluster's status as reported; nothing in it feeds back into epochs.
//! - [`event_time`], [`dedup`], [`lookups`], [`exchange`], [`isolate`],
//!   [`operator_state`]: what the host does around the operator — the
//!   watermark, deduplication, reference tables, routing rows to tasks,
//!   bisecting for the rows an operator fails on, the operator's view of
//!   the state.
//! - [`versions`]: a version's life — upload, validation, registry,
//!   shadow, activation, probation and rollback, the compile cache and
//!   the one runner — behind [`versions::Versions`], the seam the epoch
//!   loop uses.
//! - [`pipeline`]: the epoch loop (Spark's MicroBatchExecution), over
//!   parts that each own one concern, asked and told through their
//!   methods; between phases an epoch is a value (`Planned` → `ReadEpoch`
//!   → `RanEpoch` → `Closing` → the progress record):
//!   - the **log** (`EpochLog`): `offsets/N`, `commits/N`, the part logs,
//!     dead letters, compaction, and the planning cursor (the last
//!     planned digest and watermark, a range carried to the next epoch);
//!   - the **versions** ([`versions::Versions`]): what runs (taken up
//!     between epochs: `follow_control`, `active`, `shadow`), how a
//!     recorded version runs (`load`, `runner`), what became of an epoch
//!     (`epoch_done`, `shadow_done`), a failing version's fallback
//!     (`planned_active`, `previous_version`, `auto_roll_back`), and the
//!     audit trail (`record`); `control` is handed to the admin API only;
//!   - the **input preparation** (`InputPrep`): event time, dedup and the
//!     reference tables an epoch recorded;
//!   - the **state** (`KeyedState`): an epoch's view, the commit, the
//!     snapshots and the undo of an uncommitted epoch;
//!   - the **sinks** (`PipelineSinks`): one writer per sink and task;
//!   - the **reporter** (`Reporter`): where progress records and metrics
//!     go, and the epochs' pace for the input rate.
//! - [`open()`]: builds a [`Pipeline`] from its config — checkpoint,
//!   source, sinks, state, versions — and checks at start that the
//!   operator loads.
//! - [`explain`]: one committed epoch replayed from a copy of the
//!   checkpoint (`weir explain`).
//! - [`cluster`]: one pipeline per Kafka partition on each of many
//!   workers, following a shared control plane.

pub mod config;
pub mod observe;

pub mod dedup;
pub mod event_time;
pub mod exchange;
pub mod isolate;
pub mod lookups;
pub mod operator_state;

pub mod versions;

pub mod pipeline;

pub mod open;

pub mod explain;

pub mod cluster;

#[cfg(test)]
mod module_graph;

pub use open::{open, OpenOptions};
pub use pipeline::Pipeline;
