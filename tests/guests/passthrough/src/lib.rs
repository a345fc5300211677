//! Every input column, of any type, to the output unchanged: what a
//! source decoded, as the sinks receive it (the Avro and Protobuf tests
//! read their input back through it).

use weir_sdk::{Batch, EpochContext, Error, Operator, Output};

struct Passthrough;

impl Operator for Passthrough {
    fn init(_config: &str) -> Result<Self, Error> {
        Ok(Passthrough)
    }

    fn process(&mut self, _ctx: &EpochContext, batch: &Batch) -> Result<Output, Error> {
        let mut out = Output::new();
        for field in batch.schema() {
            out = out.with(&field.name, batch.column(&field.name)?);
        }
        out.build()
    }
}

weir_sdk::export_operator!(Passthrough);
