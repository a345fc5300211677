//! The named files that come with this operator version — a model, a word
//! list — deployed beside the code (`weir deploy op.wasm --artifact
//! model=model.onnx`, or `[operator] artifacts = { model = "model.onnx" }`).
//! The host records their digests with every epoch, so a replay reads the
//! same bytes, and a new model alone is a new version, checked, shadowed and
//! rolled back like code. Read them in `init`: they never change for an
//! instance.
//!
//! ```ignore
//! fn init(config: &str) -> Result<Self, Error> {
//!     let bytes = weir_sdk::artifacts::require("model")?;
//!     let model = MyModel::parse(&bytes).map_err(Error::config)?;
//!     # todo!()
//! }
//! ```

use crate::bindings::weir::operator::artifacts as host;
use crate::Error;

/// The bytes of artifact `name`, if this version has it.
pub fn get(name: &str) -> Option<Vec<u8>> {
    host::get(name)
}

/// The bytes of artifact `name`, or a config error naming it (what `init`
/// returns when a version was deployed without its model).
pub fn require(name: &str) -> Result<Vec<u8>, Error> {
    get(name).ok_or_else(|| {
        Error::config(format!(
            "this version has no artifact `{name}` (deploy it with --artifact {name}=FILE, \
             or `[operator] artifacts = {{ {name} = \"FILE\" }}`)"
        ))
    })
}

/// The content digest (`sha256:…`) of artifact `name`: what `offsets/N`
/// records, for an operator that reports which model scored a row.
pub fn digest(name: &str) -> Option<String> {
    host::digest(name)
}

/// This version's artifact names, sorted.
pub fn names() -> Vec<String> {
    host::names()
}
