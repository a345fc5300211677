//! Prints output rows to stdout as JSON lines, each prefixed with its epoch.
//! For looking at a pipeline, not for keeping its output: a replayed epoch
//! prints again (at-least-once).

use crate::connector::{SinkConnector, SinkContext};
use anyhow::Result;
use arrow_array::RecordBatch;
use serde::Deserialize;
use std::io::Write;
use weir_core::sink::{to_json_lines, Sink};

/// The console sink.
#[derive(Debug, Default)]
pub struct ConsoleSink;

impl ConsoleSink {
    fn print(tag: &str, batches: &[RecordBatch]) -> Result<()> {
        let bytes = to_json_lines(batches)?;
        let mut out = std::io::stdout().lock();
        for line in bytes.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
            write!(out, "[{tag}] ")?;
            out.write_all(line)?;
            writeln!(out)?;
        }
        out.flush()?;
        Ok(())
    }
}

impl Sink for ConsoleSink {
    fn write_epoch(&mut self, epoch: u64, batches: &[RecordBatch]) -> Result<()> {
        Self::print(&format!("epoch {epoch}"), batches)
    }

    fn write_part(&mut self, epoch: u64, part: u32, batches: &[RecordBatch]) -> Result<()> {
        Self::print(&format!("epoch {epoch} part {part}"), batches)
    }
}

/// Every output row printed on stdout as a JSON line, for trying a
/// pipeline out (at least once: a replayed epoch prints again).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConsoleSinkConfig {}

impl SinkConnector for ConsoleSinkConfig {
    const KIND: &'static str = "console";

    fn identity(&self) -> Result<String> {
        Ok("console".into())
    }

    fn open(&self, _: &SinkContext<'_>) -> Result<Box<dyn Sink>> {
        Ok(Box::new(ConsoleSink))
    }
}
