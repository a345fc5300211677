//! Files: a directory of JSON-lines (and Parquet and Avro) files read as a replayable
//! source, and a directory the sink writes one file per epoch to.

pub mod config;
pub mod conform;
pub mod parquet_input;
pub mod records;
pub mod sink;
pub mod source;
pub mod split;

pub use config::{FilesSinkConfig, FilesSourceConfig};
pub use sink::FileSink;
pub use source::FileSource;
