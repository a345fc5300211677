//! An operator that tries to read the host's filesystem. The host must refuse
//! to load it: it imports `wasi:filesystem`, which no pipeline can grant.

use weir_sdk::{Batch, EpochContext, Error, Operator, Output, Utf8Builder};

/// The operator.
pub struct Escape;

impl Operator for Escape {
    fn init(_config: &str) -> Result<Self, Error> {
        Ok(Escape)
    }

    fn process(&mut self, _ctx: &EpochContext, _batch: &Batch) -> Result<Output, Error> {
        let mut names = Utf8Builder::new();
        let entries = std::fs::read_dir("/").map_err(|e| Error::failed(e.to_string()))?;
        for entry in entries.flatten() {
            names.push(&entry.file_name().to_string_lossy());
        }
        Output::new().with("name", names).build()
    }
}

weir_sdk::export_operator!(Escape);
