//! Write Weir stream operators in Rust.
//!
//! An operator is a type implementing [`Operator`]; [`export_operator!`] turns it
//! into the exports of the `weir:operator` world. The host hands each epoch's
//! micro-batch over as Arrow-layout columns: [`Batch`] fetches only the columns
//! you ask for (one copy each), and the typed readers ([`Int64Column`],
//! [`Float64Column`], [`Utf8Column`], [`BoolColumn`]) index them without
//! per-row conversions. To emit a few matching rows, fetch just those rows of
//! the remaining columns with [`Batch::utf8_rows`] and friends. Results go back
//! through column builders collected in an [`Output`]; rows for other named
//! outputs (`scores` beside `alerts`) go through [`outputs::emit`]. History
//! that must outlive an epoch goes into the host's keyed [`state`];
//! reference tables the pipeline declares are read through [`lookup`].
//!
//! ```ignore
//! use weir_sdk::{Batch, EpochContext, Error, Float64Builder, Operator, Output, Utf8Builder};
//!
//! struct Big { limit: f64 }
//!
//! impl Operator for Big {
//!     fn init(config: &str) -> Result<Self, Error> {
//!         let limit = config.trim().parse().map_err(|e| Error::config(format!("limit: {e}")))?;
//!         Ok(Big { limit })
//!     }
//!     fn process(&mut self, _ctx: &EpochContext, batch: &Batch) -> Result<Output, Error> {
//!         let ids = batch.utf8("txn_id")?;
//!         let amounts = batch.f64("amount")?;
//!         let (mut out_ids, mut out_amounts) = (Utf8Builder::new(), Float64Builder::new());
//!         for row in 0..batch.num_rows() {
//!             if amounts.get(row).is_some_and(|a| a > self.limit) {
//!                 out_ids.push(ids.value(row));
//!                 out_amounts.push(amounts.value(row));
//!             }
//!         }
//!         Output::new().with("txn_id", out_ids).with("amount", out_amounts).build()
//!     }
//! }
//! weir_sdk::export_operator!(Big);
//! ```

mod batch;
mod byte_set;
mod bytes;
mod columns;
mod decimal;
mod error;
mod output;
mod time;
mod typed;
mod typed_output;

pub mod artifacts;
pub mod log;
pub mod lookup;
pub mod outputs;
pub mod state;
pub mod timers;
pub mod window;

/// Raw bindings generated from `wit/operator.wit`. Operators normally use the
/// typed wrappers of this crate instead; the bindings stay public so that the
/// export macro can reach them from the operator's crate.
#[doc(hidden)]
pub mod bindings {
    wit_bindgen::generate!({
        path: "../wit",
        world: "timer-operator",
        pub_export_macro: true,
        export_macro_name: "export_guest",
        default_bindings_module: "weir_sdk::bindings",
    });
}

pub use batch::{Batch, DataType, Field};
pub use byte_set::ByteSet;
pub use bytes::same_bytes;
pub use columns::{BoolColumn, Float64Column, Int64Column, Utf8Column};
pub use decimal::{Decimal, ParseDecimalError};
pub use error::Error;
pub use output::{BoolBuilder, ColumnBuilder, Float64Builder, Int64Builder, Output, Utf8Builder};
pub use time::{Date, TimeUnit, Timestamp};
pub use timers::Timer;
pub use typed::{AnyColumn, BinaryColumn, DateColumn, DecimalColumn, TimestampColumn, Value};
pub use typed_output::{BinaryBuilder, DateBuilder, DecimalBuilder, TimestampBuilder};

/// What the host tells an operator about the epoch being processed. The time
/// comes from the offset WAL, never from a clock, so a replay sees the same value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EpochContext {
    /// Name of the pipeline running this operator.
    pub pipeline: String,
    /// Epoch number, starting at 0.
    pub epoch: u64,
    /// Trigger time of the epoch in Unix milliseconds, as recorded in `offsets/<epoch>`.
    pub epoch_time_ms: i64,
}

/// A stream operator: configured once per instance, then fed micro-batches.
///
/// The host creates a fresh instance for every epoch, so an operator must not
/// rely on memory kept between `process` calls: replaying an epoch after a
/// crash has to give the same output as the first run.
pub trait Operator: Sized + 'static {
    /// Builds the operator from its JSON configuration (the pipeline's
    /// `[operator.config]` table). Return [`Error::config`] for bad settings.
    fn init(config: &str) -> Result<Self, Error>;

    /// Turns one batch into output rows. An error fails the epoch, which is
    /// then not committed.
    fn process(&mut self, ctx: &EpochContext, batch: &Batch) -> Result<Output, Error>;

    /// Runs once when this version takes over from another one (a hot
    /// swap), after `init` and before its first batch; `from_version` is the
    /// previous version's component digest. Convert state written in an
    /// older format here: the changes are committed with the epoch, exactly
    /// once. The default does nothing.
    fn migrate(&mut self, from_version: &str) -> Result<(), Error> {
        let _ = from_version;
        Ok(())
    }

    /// Called in the epoch whose watermark reached these timers (set with
    /// [`timers::set`]), after every batch of the epoch, with the same
    /// state; `fired` is in time order, then key order. The rows returned
    /// go to the sink with the epoch. The default emits nothing.
    fn on_timers(&mut self, ctx: &EpochContext, fired: &[Timer]) -> Result<Output, Error> {
        let _ = (ctx, fired);
        Output::empty()
    }
}

/// Exports an [`Operator`] implementation as the component's `init` and
/// `process` functions. Use it once per crate, at the top level.
#[macro_export]
macro_rules! export_operator {
    ($operator:ty) => {
        #[doc(hidden)]
        pub struct __WeirExportedOperator;

        impl $crate::bindings::Guest for __WeirExportedOperator {
            fn init(
                config: ::std::string::String,
            ) -> ::std::result::Result<(), $crate::bindings::weir::operator::types::OperatorError> {
                $crate::__private::init::<$operator>(&config)
            }

            fn migrate(
                from_version: ::std::string::String,
            ) -> ::std::result::Result<(), $crate::bindings::weir::operator::types::OperatorError> {
                $crate::__private::migrate::<$operator>(&from_version)
            }

            fn process(
                ctx: $crate::bindings::weir::operator::types::EpochContext,
                input: &$crate::bindings::weir::operator::types::Batch,
            ) -> ::std::result::Result<
                $crate::bindings::weir::operator::types::Output,
                $crate::bindings::weir::operator::types::OperatorError,
            > {
                $crate::__private::process::<$operator>(ctx, input)
            }

            fn on_timers(
                ctx: $crate::bindings::weir::operator::types::EpochContext,
                fired: ::std::vec::Vec<$crate::bindings::weir::operator::timers::Timer>,
            ) -> ::std::result::Result<
                $crate::bindings::weir::operator::types::Output,
                $crate::bindings::weir::operator::types::OperatorError,
            > {
                $crate::__private::on_timers::<$operator>(ctx, fired)
            }
        }

        $crate::bindings::export_guest!(__WeirExportedOperator with_types_in $crate::bindings);
    };
}

/// Glue used by [`export_operator!`]; not part of the public API.
#[doc(hidden)]
pub mod __private {
    use super::*;
    use crate::bindings::weir::operator::types as wit;
    use std::any::Any;
    use std::cell::RefCell;

    thread_local! {
        // Wasm components are single-threaded; the instance lives here between
        // `init` and `process`.
        static INSTANCE: RefCell<Option<Box<dyn Any>>> = const { RefCell::new(None) };
    }

    pub fn init<O: Operator>(config: &str) -> Result<(), wit::OperatorError> {
        let operator = O::init(config).map_err(Error::into_wit)?;
        INSTANCE.with(|slot| *slot.borrow_mut() = Some(Box::new(operator)));
        Ok(())
    }

    pub fn migrate<O: Operator>(from_version: &str) -> Result<(), wit::OperatorError> {
        with_operator::<O, _>("migrate", |operator| operator.migrate(from_version))
    }

    fn context(ctx: wit::EpochContext) -> EpochContext {
        EpochContext {
            pipeline: ctx.pipeline,
            epoch: ctx.epoch,
            epoch_time_ms: ctx.epoch_time_ms,
        }
    }

    /// Runs `f` on the instance `init` made.
    fn with_operator<O: Operator, T>(
        call: &str,
        f: impl FnOnce(&mut O) -> Result<T, Error>,
    ) -> Result<T, wit::OperatorError> {
        INSTANCE.with(|slot| {
            let mut slot = slot.borrow_mut();
            let operator = slot
                .as_mut()
                .and_then(|any| any.downcast_mut::<O>())
                .ok_or_else(|| Error::failed(format!("{call} called before init")).into_wit())?;
            f(operator).map_err(Error::into_wit)
        })
    }

    pub fn process<O: Operator>(
        ctx: wit::EpochContext,
        input: &wit::Batch,
    ) -> Result<wit::Output, wit::OperatorError> {
        let ctx = context(ctx);
        with_operator::<O, _>("process", |operator| {
            operator
                .process(&ctx, &Batch::new(input)?)
                .map(Output::into_returned)
        })
    }

    pub fn on_timers<O: Operator>(
        ctx: wit::EpochContext,
        fired: Vec<crate::bindings::weir::operator::timers::Timer>,
    ) -> Result<wit::Output, wit::OperatorError> {
        let ctx = context(ctx);
        let fired = crate::timers::from_wit(fired);
        with_operator::<O, _>("on-timers", |operator| {
            operator.on_timers(&ctx, &fired).map(Output::into_returned)
        })
    }
}
