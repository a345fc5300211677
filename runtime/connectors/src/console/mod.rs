//! Prints output rows to stdout as JSON lines, each prefixed with its epoch.
//! For looking at a pipeline, not for keeping its output: a replayed epoch
//! prints again (at-least-once).

use anyhow::Result;
use arrow_array::RecordBatch;
use std::io::Write;
use weir_core::sink::{to_json_lines, Sink};

/// The console sink.
#[derive(Debug, Default)]
pub struct ConsoleSink;

impl Sink for ConsoleSink {
    fn write_epoch(&mut self, epoch: u64, batches: &[RecordBatch]) -> Result<()> {
        let bytes = to_json_lines(batches)?;
        let mut out = std::io::stdout().lock();
        for line in bytes.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
            write!(out, "[epoch {epoch}] ")?;
            out.write_all(line)?;
            writeln!(out)?;
        }
        out.flush()?;
        Ok(())
    }
}
