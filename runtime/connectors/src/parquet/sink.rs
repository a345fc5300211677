//! `kind = "parquet"` in `[sink]`: one Parquet file per epoch,
//! `epoch-<N>.parquet`, named and written as the files sink writes its
//! JSON lines (a task's share `epoch-<N>-task-<T>.parquet`, a real-time
//! part `epoch-<N>-part-<I>.parquet`). Each file is built in memory and
//! renamed into place, so a reader never sees half of one; a replayed
//! epoch rewrites its own file with the same rows, so nothing is written
//! twice. Epochs without output write no file.
//!
//! A file's schema is the operator's output schema; a version that emits
//! other columns writes files with its own. Snappy-compressed, as Spark
//! and Delta Lake write by default.

use crate::connector::{SinkConnector, SinkContext};
use crate::files::config::sink_dir;
use crate::files::sink::{output_files, FileFormat, FileSink};
use ::parquet::arrow::ArrowWriter;
use ::parquet::basic::Compression;
use ::parquet::file::properties::WriterProperties;
use anyhow::{bail, Context, Result};
use arrow_array::RecordBatch;
use serde::Deserialize;
use std::path::{Path, PathBuf};
use weir_core::sink::Sink;

/// A directory of Parquet files, one per epoch.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ParquetSinkConfig {
    /// The directory written.
    pub path: PathBuf,
}

impl SinkConnector for ParquetSinkConfig {
    const KIND: &'static str = "parquet";

    fn paths(&mut self) -> Vec<&mut PathBuf> {
        vec![&mut self.path]
    }

    fn output_dir(&self) -> Option<&Path> {
        Some(&self.path)
    }

    fn identity(&self) -> Result<String> {
        Ok(format!("parquet:{}", self.path.display()))
    }

    fn open(&self, ctx: &SinkContext<'_>) -> Result<Box<dyn Sink>> {
        let dir = sink_dir(&self.path, ctx);
        Ok(Box::new(FileSink::with_format(dir, ctx.task, PARQUET)?))
    }
}

/// The files sink's writer with this format: the same names, the same
/// atomic writes, Parquet bytes.
pub const PARQUET: FileFormat = FileFormat {
    extension: "parquet",
    encode,
};

/// The files that hold `epoch`'s output in `dir`, task by task.
pub fn epoch_files(dir: &Path, epoch: u64) -> Result<Vec<PathBuf>> {
    output_files(dir, epoch, PARQUET.extension)
}

/// `batches` as one Parquet file, or `None` if they hold no rows. Every
/// batch must have the first one's schema.
pub fn encode(batches: &[RecordBatch]) -> Result<Option<Vec<u8>>> {
    let mut rows = batches.iter().filter(|b| b.num_rows() > 0);
    let Some(first) = rows.next() else {
        return Ok(None);
    };
    let schema = first.schema();
    let properties = WriterProperties::builder()
        .set_compression(Compression::SNAPPY)
        .build();
    let mut bytes = Vec::new();
    let mut writer = ArrowWriter::try_new(&mut bytes, schema.clone(), Some(properties))
        .context("starting a Parquet file")?;
    for batch in std::iter::once(first).chain(rows) {
        if batch.schema() != schema {
            bail!(
                "the operator's output changed its columns within one epoch ({:?}, then {:?}); \
                 a Parquet file has one schema",
                field_names(&schema),
                field_names(&batch.schema())
            );
        }
        writer
            .write(batch)
            .context("writing rows to a Parquet file")?;
    }
    writer.close().context("finishing a Parquet file")?;
    Ok(Some(bytes))
}

fn field_names(schema: &arrow_schema::Schema) -> Vec<String> {
    schema
        .fields()
        .iter()
        .map(|f| format!("{}: {}", f.name(), f.data_type()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use ::parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    use arrow_array::{Float64Array, StringArray};
    use arrow_schema::{DataType, Field, Schema};
    use std::sync::Arc;

    fn batch(ids: &[&str], scores: &[f64]) -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![
            Field::new("txn_id", DataType::Utf8, false),
            Field::new("score", DataType::Float64, true),
        ]));
        RecordBatch::try_new(
            schema,
            vec![
                Arc::new(StringArray::from(ids.to_vec())),
                Arc::new(Float64Array::from(scores.to_vec())),
            ],
        )
        .unwrap()
    }

    #[test]
    fn an_epoch_is_one_file_arrow_reads_back_and_a_replay_rewrites_it_identically() {
        let dir = tempfile::tempdir().unwrap();
        let mut sink = FileSink::with_format(dir.path().to_path_buf(), 0, PARQUET).unwrap();
        let batches = [batch(&["a", "b"], &[0.5, 0.9]), batch(&["c"], &[1.0])];
        sink.write_epoch(7, &batches).unwrap();
        let path = dir.path().join("epoch-0000000007.parquet");
        let first = std::fs::read(&path).unwrap();
        sink.write_epoch(7, &batches).unwrap();
        assert_eq!(
            std::fs::read(&path).unwrap(),
            first,
            "a replay writes the same bytes"
        );
        let read: Vec<RecordBatch> =
            ParquetRecordBatchReaderBuilder::try_new(std::fs::File::open(&path).unwrap())
                .unwrap()
                .build()
                .unwrap()
                .collect::<Result<_, _>>()
                .unwrap();
        let all = arrow_select::concat::concat_batches(&batches[0].schema(), &read).unwrap();
        let expected =
            arrow_select::concat::concat_batches(&batches[0].schema(), &batches).unwrap();
        assert_eq!(all, expected);
        assert_eq!(epoch_files(dir.path(), 7).unwrap(), [path]);
    }

    #[test]
    fn no_rows_no_file_and_a_second_task_writes_its_own() {
        let dir = tempfile::tempdir().unwrap();
        let mut sink = FileSink::with_format(dir.path().to_path_buf(), 2, PARQUET).unwrap();
        sink.write_epoch(1, &[batch(&[], &[])]).unwrap();
        assert!(epoch_files(dir.path(), 1).unwrap().is_empty());
        sink.write_epoch(1, &[batch(&["x"], &[0.1])]).unwrap();
        sink.write_part(2, 3, &[batch(&["y"], &[0.2])]).unwrap();
        let mut names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(
            names,
            [
                "epoch-0000000001-task-002.parquet",
                "epoch-0000000002-part-000003-task-002.parquet"
            ]
        );
    }

    #[test]
    fn batches_of_two_schemas_in_one_epoch_are_refused_by_name() {
        let other = RecordBatch::try_new(
            Arc::new(Schema::new(vec![Field::new("n", DataType::Float64, false)])),
            vec![Arc::new(Float64Array::from(vec![1.0]))],
        )
        .unwrap();
        let err = encode(&[batch(&["a"], &[0.1]), other])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("changed its columns") && err.contains("n: Float64"),
            "{err}"
        );
    }
}
