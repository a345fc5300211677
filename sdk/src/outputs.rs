//! Named outputs: rows for an output other than the one `process` returns
//! (the `default` output). A fraud operator returns its alerts and emits
//! every payment's score to `scores`; the pipeline routes each output to
//! its own sinks (`[[sink]] output = "scores"`). Emitted rows go with the
//! epoch like returned ones: none if the epoch fails, the same on replay.
//!
//! ```ignore
//! let scores = Output::new().with("txn_id", ids).with("score", values).build()?;
//! weir_sdk::outputs::emit("scores", scores);
//! ```

use crate::output::Wire;
use crate::Output;

/// The output the rows `process` returns go to.
pub const DEFAULT: &str = "default";

/// Sends `rows` to output `name` (1 to 64 lowercase letters, digits, `_`
/// or `-`, starting with a letter; `"default"` is the returned rows'
/// output). The host checks the rows like returned ones; a bad name or bad
/// rows fail the epoch. Rows of an output no sink takes are dropped by the
/// host, which says so in its log.
pub fn emit(name: &str, rows: Output) {
    if rows.num_rows() == 0 {
        return;
    }
    match rows.into_wire() {
        Wire::Basic(rows) => crate::bindings::weir::operator::outputs::emit(name, &rows),
        Wire::Typed(rows) => crate::bindings::weir::operator::outputs::emit_typed(name, &rows),
    }
}
