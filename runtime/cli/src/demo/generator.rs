//! The demo's payments: the same stream the `generator` source produces
//! (see [`weir_connectors::generator::payments`]), re-exported where the
//! demo, `weir feed`, the tests and the benchmarks have always found it.

pub use weir_connectors::generator::payments::*;
