//! What each operator instance's `Store` holds: its WASI context (with no
//! ambient authority), the resource table, the memory limiter, the epoch's
//! state and the tags that name it in logs and errors.

use super::bindings::InputBatch;
use wasmtime::component::{Resource, ResourceTable};
use wasmtime::{ResourceLimiter, StoreLimits};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

/// Names an instance in logs: which pipeline, epoch and operator version.
#[derive(Debug, Clone)]
pub struct Tags {
    pub pipeline: String,
    pub epoch: u64,
    pub digest: weir_core::Digest,
}

/// Per-instance host state.
pub struct HostState {
    pub(crate) table: ResourceTable,
    pub(crate) wasi: WasiCtx,
    pub(crate) limiter: Limiter,
    pub(crate) tags: Tags,
    /// The epoch's keyed state and watermark (see `state_host.rs`).
    pub(crate) env: super::EpochEnv,
    /// Most bytes of state changes one epoch may hold in host memory.
    pub(crate) state_budget: usize,
    /// Rows the current call emitted to named outputs, marked with the
    /// output (`weir_core::outputs`), taken when the call returns.
    pub(crate) emitted: Vec<arrow_array::RecordBatch>,
    /// Their size in memory, held against the memory limit.
    pub(crate) emitted_bytes: usize,
    /// Why an `emit` trapped the guest, to report it as invalid output.
    pub(crate) emit_error: Option<String>,
}

impl HostState {
    pub(crate) fn batch(&self, handle: &Resource<InputBatch>) -> Option<&InputBatch> {
        self.table.get(handle).ok()
    }
}

impl WasiView for HostState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

/// Caps linear memory (and tables) like `StoreLimits`, and remembers that it
/// refused, so a resulting trap can be reported as "memory limit exceeded"
/// instead of an opaque `unreachable`.
pub struct Limiter {
    inner: StoreLimits,
    pub(crate) memory_limit: usize,
    pub(crate) denied: Option<usize>,
}

impl Limiter {
    pub fn new(memory_limit: usize) -> Self {
        Limiter {
            inner: wasmtime::StoreLimitsBuilder::new()
                .memory_size(memory_limit)
                .table_elements(1 << 20)
                .instances(64)
                .tables(64)
                .memories(8)
                .trap_on_grow_failure(true)
                .build(),
            memory_limit,
            denied: None,
        }
    }

    /// The size a guest asked for when it was refused, if it was.
    pub fn denied_request(&self) -> Option<usize> {
        self.denied
    }
}

impl ResourceLimiter for Limiter {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.memory_limit {
            self.denied = Some(desired);
        }
        self.inner.memory_growing(current, desired, maximum)
    }

    fn table_growing(
        &mut self,
        current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        self.inner.table_growing(current, desired, maximum)
    }

    fn instances(&self) -> usize {
        self.inner.instances()
    }

    fn tables(&self) -> usize {
        self.inner.tables()
    }

    fn memories(&self) -> usize {
        self.inner.memories()
    }
}
