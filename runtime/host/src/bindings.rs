//! Host side of the `weir:operator` world: generated bindings plus the host
//! functions operators import (the batch resource, logging and named
//! outputs; state and event time are in `state_host.rs`).

use super::columns::column_to_wit;
use super::store::HostState;
use arrow_array::RecordBatch;
use wasmtime::component::Resource;

wasmtime::component::bindgen!({
    path: "../../wit",
    world: "operator",
    with: {
        "weir:operator/types.batch": InputBatch,
    },
    imports: {
        "weir:operator/types.[method]batch.column": trappable,
        "weir:operator/types.[method]batch.take": trappable,
        "weir:operator/types.[method]batch.schema": trappable,
        "weir:operator/types.[method]batch.typed-schema": trappable,
        "weir:operator/types.[method]batch.typed-column": trappable,
        "weir:operator/types.[method]batch.typed-take": trappable,
        "weir:operator/state.get": trappable,
        "weir:operator/state.put": trappable,
        "weir:operator/state.delete": trappable,
        "weir:operator/state.get-many": trappable,
        "weir:operator/state.put-many": trappable,
        "weir:operator/state.delete-many": trappable,
        "weir:operator/state.scan": trappable,
        "weir:operator/state.append": trappable,
        "weir:operator/state.append-many": trappable,
        "weir:operator/state.read-list": trappable,
        "weir:operator/state.clear-list": trappable,
        "weir:operator/timers.set": trappable,
        "weir:operator/timers.delete": trappable,
        "weir:operator/timers.pending": trappable,
        "weir:operator/outputs.emit": trappable,
        "weir:operator/outputs.emit-typed": trappable,
    },
});

pub use weir::operator::timers::Timer as WitTimer;
pub use weir::operator::types::{
    Column as WitColumn, DataType as WitDataType, Output as WitOutput, Values as WitValues,
};

/// The micro-batch behind a guest's `borrow<batch>` handle. Columns are
/// copied into the guest only when it asks for them.
pub struct InputBatch {
    pub(crate) batch: RecordBatch,
}

impl weir::operator::types::Host for HostState {}

/// What emitted rows count against the memory limit: their buffers, their
/// names, and at least 16 bytes a row per column — what the sinks spend
/// writing a row out, so that rows of nearly nothing (bits) cannot make
/// them write gigabytes.
fn emitted_cost(batch: &RecordBatch) -> usize {
    let names: usize = batch
        .schema()
        .flattened_fields()
        .iter()
        .map(|f| f.name().len())
        .sum();
    batch.get_array_memory_size() + names + batch.num_rows() * batch.num_columns() * 16
}

impl HostState {
    pub(crate) fn input_column(
        &self,
        handle: &Resource<InputBatch>,
        index: u32,
    ) -> wasmtime::Result<arrow_array::ArrayRef> {
        let b = self
            .batch(handle)
            .ok_or_else(|| wasmtime::format_err!("stale batch handle"))?;
        b.batch
            .columns()
            .get(index as usize)
            .cloned()
            .ok_or_else(|| {
                wasmtime::format_err!(
                    "operator asked for column {index} of a batch with {} columns",
                    b.batch.num_columns()
                )
            })
    }

    /// The listed rows of column `index`, in the listed order (`batch.take`).
    pub(crate) fn take_rows(
        &self,
        handle: &Resource<InputBatch>,
        index: u32,
        rows: Vec<u32>,
    ) -> wasmtime::Result<arrow_array::ArrayRef> {
        let array = self.input_column(handle, index)?;
        let len = array.len();
        if let Some(bad) = rows.iter().find(|&&r| r as usize >= len) {
            wasmtime::bail!("operator asked for row {bad} of a batch with {len} rows");
        }
        // Rows may repeat: a gather of one large row many times would
        // make the host allocate far more than the guest could hold.
        let mut cost = 0usize;
        for &r in &rows {
            cost = cost.saturating_add(weir_core::column_tree::row_bytes(
                array.as_ref(),
                r as usize,
            ));
            if cost > self.limiter.memory_limit {
                wasmtime::bail!(
                    "operator asked for {} rows of column {index}, more than {} bytes, its \
                     memory limit",
                    rows.len(),
                    self.limiter.memory_limit
                );
            }
        }
        let indices = arrow_array::UInt32Array::from(rows);
        arrow_select::take::take(array.as_ref(), &indices, None)
            .map_err(|e| wasmtime::format_err!("take: {e}"))
    }
}

impl weir::operator::types::HostBatch for HostState {
    fn num_rows(&mut self, handle: Resource<InputBatch>) -> u32 {
        self.batch(&handle).map_or(0, |b| b.batch.num_rows() as u32)
    }

    /// Traps rather than leave out a column it cannot describe: the
    /// guest addresses columns by their position in this list.
    fn schema(
        &mut self,
        handle: Resource<InputBatch>,
    ) -> wasmtime::Result<Vec<weir::operator::types::Field>> {
        let Some(b) = self.batch(&handle) else {
            return Ok(Vec::new());
        };
        b.batch
            .schema()
            .fields()
            .iter()
            .map(|f| {
                let data_type = super::columns::wit_type(f.data_type()).ok_or_else(|| {
                    wasmtime::format_err!(
                        "the operator read the schema with `batch.schema`, which cannot describe \
                         column `{}` ({}): it must read it with `batch.typed-schema`, as the \
                         current SDKs do",
                        f.name(),
                        weir_core::schema::type_name(f.data_type())
                    )
                })?;
                Ok(weir::operator::types::Field {
                    name: f.name().clone(),
                    data_type,
                    nullable: f.is_nullable(),
                })
            })
            .collect()
    }

    // `column` and `take` are shadowed in the linker by `lowering`'s, which
    // lower from the Arrow buffers without this host copy; the generated
    // trait still needs them.
    fn column(
        &mut self,
        handle: Resource<InputBatch>,
        index: u32,
    ) -> wasmtime::Result<weir::operator::types::Column> {
        let array = self.input_column(&handle, index)?;
        column_to_wit(array.as_ref()).map_err(|e| wasmtime::format_err!("{e:#}"))
    }

    fn take(
        &mut self,
        handle: Resource<InputBatch>,
        index: u32,
        rows: Vec<u32>,
    ) -> wasmtime::Result<weir::operator::types::Column> {
        let taken = self.take_rows(&handle, index, rows)?;
        column_to_wit(taken.as_ref()).map_err(|e| wasmtime::format_err!("{e:#}"))
    }

    fn typed_schema(
        &mut self,
        handle: Resource<InputBatch>,
    ) -> wasmtime::Result<Vec<weir::operator::types::ColumnType>> {
        let Some(b) = self.batch(&handle) else {
            return Ok(Vec::new());
        };
        b.batch
            .schema()
            .fields()
            .iter()
            .map(|f| super::typed::column_type(f).map_err(|e| wasmtime::format_err!("{e:#}")))
            .collect()
    }

    // Shadowed in the linker by `lowering`'s, like `column` and `take`.
    fn typed_column(
        &mut self,
        handle: Resource<InputBatch>,
        index: u32,
    ) -> wasmtime::Result<weir::operator::types::ArrayColumn> {
        let array = self.input_column(&handle, index)?;
        super::typed::array_column(array.as_ref()).map_err(|e| wasmtime::format_err!("{e:#}"))
    }

    fn typed_take(
        &mut self,
        handle: Resource<InputBatch>,
        index: u32,
        rows: Vec<u32>,
    ) -> wasmtime::Result<weir::operator::types::ArrayColumn> {
        let taken = self.take_rows(&handle, index, rows)?;
        super::typed::array_column(taken.as_ref()).map_err(|e| wasmtime::format_err!("{e:#}"))
    }

    fn drop(&mut self, handle: Resource<InputBatch>) -> wasmtime::Result<()> {
        // The host owns the batch: the guest's handle is a borrow that ends
        // with the call, so there is nothing to delete here.
        let _ = handle;
        Ok(())
    }
}

impl weir::operator::host::Host for HostState {
    fn log(&mut self, level: weir::operator::host::Level, message: String) {
        use weir::operator::host::Level;
        let message: &str = if message.len() > 4096 {
            // Guests must not flood the host's log; keep a readable prefix.
            message.get(..4096).unwrap_or("<log line cut>")
        } else {
            &message
        };
        let (pipeline, epoch, digest) = (&self.tags.pipeline, self.tags.epoch, &self.tags.digest);
        match level {
            Level::Trace => {
                tracing::trace!(target: "weir::guest", pipeline, epoch, operator = %digest, "{message}")
            }
            Level::Debug => {
                tracing::debug!(target: "weir::guest", pipeline, epoch, operator = %digest, "{message}")
            }
            Level::Info => {
                tracing::info!(target: "weir::guest", pipeline, epoch, operator = %digest, "{message}")
            }
            Level::Warn => {
                tracing::warn!(target: "weir::guest", pipeline, epoch, operator = %digest, "{message}")
            }
            Level::Error => {
                tracing::error!(target: "weir::guest", pipeline, epoch, operator = %digest, "{message}")
            }
        }
    }
}

impl weir::operator::outputs::Host for HostState {
    /// Keeps emitted rows for the call's caller; bad rows or a bad name
    /// trap the guest and are reported as invalid output.
    fn emit(&mut self, name: String, rows: WitOutput) -> wasmtime::Result<()> {
        let kept = self.keep_emitted(&name, rows);
        self.refuse_emit(&name, kept)
    }

    /// Like `emit`, for rows of any column types (`default` included).
    fn emit_typed(
        &mut self,
        name: String,
        rows: weir::operator::types::TypedOutput,
    ) -> wasmtime::Result<()> {
        let kept = self.keep_emitted_typed(&name, rows);
        self.refuse_emit(&name, kept)
    }
}

impl HostState {
    fn keep_emitted(&mut self, name: &str, rows: WitOutput) -> anyhow::Result<()> {
        weir_core::outputs::check_name(name)?;
        self.keep_batch(name, super::columns::output_to_batch(rows)?)
    }

    fn keep_emitted_typed(
        &mut self,
        name: &str,
        rows: weir::operator::types::TypedOutput,
    ) -> anyhow::Result<()> {
        weir_core::outputs::check_name(name)?;
        let batch = weir_core::column_tree::to_batch(super::typed::output(rows))?;
        self.keep_batch(name, batch)
    }

    /// An emit's failure as the trap it is, remembered for the report.
    fn refuse_emit(&mut self, name: &str, kept: anyhow::Result<()>) -> wasmtime::Result<()> {
        kept.map_err(|e| {
            let message = format!("emitted to output `{name}`: {e:#}");
            self.emit_error = Some(message.clone());
            wasmtime::format_err!(message)
        })
    }

    fn keep_batch(&mut self, name: &str, batch: RecordBatch) -> anyhow::Result<()> {
        if batch.num_rows() == 0 {
            return Ok(());
        }
        self.emitted_bytes += emitted_cost(&batch);
        if self.emitted_bytes > self.limiter.memory_limit {
            anyhow::bail!(
                "the rows emitted in one call hold more than the operator's memory limit of {} \
                 bytes",
                self.limiter.memory_limit
            );
        }
        self.emitted.push(weir_core::outputs::tag(batch, name)?);
        Ok(())
    }

    /// The rows emitted since the last call, in order.
    pub(crate) fn take_emitted(&mut self) -> Vec<RecordBatch> {
        self.emitted_bytes = 0;
        std::mem::take(&mut self.emitted)
    }
}
