//! Files: a directory of JSON-lines files read as a replayable source, and a
//! directory the sink writes one file per epoch to.

pub mod sink;
pub mod source;

pub use sink::FileSink;
pub use source::FileSource;
