//! Parquet: a directory the sink writes one Parquet file per epoch to
//! (per task, per real-time part), for analysts' and training jobs'
//! readers (Spark, DuckDB, pandas, arrow).

pub mod sink;

pub use sink::{epoch_files, ParquetSinkConfig, PARQUET};
