//! Avro records in a schema registry's wire format (a Kafka value: `0x00`,
//! the writer schema's id as 4 big-endian bytes, then the Avro body),
//! decoded in order into the declared columns: one arrow-avro decoder per
//! writer schema, each resolving its writer into the declared reader
//! schema. A record that is not framed, names an id the registry does not
//! have, was written with a schema that does not resolve, or whose body
//! does not decode is set aside with the reason; the rest go on.

use super::registry::{Lookup, Registry};
use anyhow::Result;
use arrow_array::RecordBatch;
use arrow_avro::reader::{Decoder, DecoderMode, ReaderBuilder};
use arrow_avro::schema::{AvroSchema, Fingerprint, FingerprintAlgorithm, SchemaStore};
use arrow_schema::SchemaRef;
use std::collections::HashMap;

/// Decodes framed Avro values into the declared columns.
pub struct FramedDecoder {
    schema: SchemaRef,
    registry: Registry,
    batch_rows: usize,
    /// Per writer schema id: its decoder, or why its records are refused.
    decoders: HashMap<u32, Result<Decoder, String>>,
}

/// What [`FramedDecoder::decode`] made of a run of values.
#[derive(Debug, Default)]
pub struct FramedRows {
    /// The good records' rows, in order, in the declared columns.
    pub batches: Vec<RecordBatch>,
    /// The set-aside records: their index among the values, and why.
    pub rejected: Vec<(usize, String)>,
}

/// The run of records being decoded by one writer schema's decoder:
/// which it is and the records in it not yet flushed, so that a record
/// that fails half-way can be taken out by decoding the others again.
struct Run {
    id: u32,
    records: Vec<usize>,
}

impl FramedDecoder {
    /// A decoder into `schema` (the declared value columns), asking
    /// `registry` for writer schemas.
    pub fn new(schema: SchemaRef, registry: Registry, batch_rows: usize) -> Self {
        FramedDecoder {
            schema,
            registry,
            batch_rows: batch_rows.max(1),
            decoders: HashMap::new(),
        }
    }

    /// Decodes `values` in order. An error is the registry's or the
    /// disk's, never a record's (those are in `rejected`); after one, no
    /// decoder keeps rows of the failed call, so the epoch's retry starts
    /// clean.
    pub fn decode(&mut self, values: &[Option<&[u8]>]) -> Result<FramedRows> {
        let decoded = self.decode_in_order(values);
        if decoded.is_err() {
            self.decoders.clear();
        }
        decoded
    }

    fn decode_in_order(&mut self, values: &[Option<&[u8]>]) -> Result<FramedRows> {
        let mut out = FramedRows::default();
        let mut run: Option<Run> = None;
        for (i, value) in values.iter().enumerate() {
            let id = match frame_id(*value) {
                Ok(id) => id,
                Err(why) => {
                    out.rejected.push((i, why));
                    continue;
                }
            };
            if let Err(why) = self.prepare(id)? {
                out.rejected.push((i, why));
                continue;
            }
            if run.as_ref().is_some_and(|r| r.id != id) {
                self.flush(run.take(), &mut out)?;
            }
            let current = run.get_or_insert(Run {
                id,
                records: Vec::new(),
            });
            let bytes = value.unwrap_or_default();
            match self.decode_one(id, bytes) {
                Ok(()) => {
                    current.records.push(i);
                    if self.decoder(id).is_some_and(|d| d.batch_is_full()) {
                        self.flush(run.take(), &mut out)?;
                    }
                }
                Err(why) => {
                    out.rejected.push((i, why));
                    self.redo(current, values)?;
                }
            }
        }
        self.flush(run, &mut out)?;
        out.rejected.sort_by_key(|(i, _)| *i);
        Ok(out)
    }

    fn decoder(&mut self, id: u32) -> Option<&mut Decoder> {
        self.decoders.get_mut(&id).and_then(|d| d.as_mut().ok())
    }

    /// Makes the decoder of writer schema `id`; `Err(why)` (inside `Ok`)
    /// when its records are to be refused.
    fn prepare(&mut self, id: u32) -> Result<Result<(), String>> {
        if !self.decoders.contains_key(&id) {
            let decoder = match self.registry.schema(id)? {
                Lookup::Unknown(why) => Err(why),
                Lookup::Found(text) => self.build(id, &text),
            };
            self.decoders.insert(id, decoder);
        }
        Ok(match &self.decoders[&id] {
            Ok(_) => Ok(()),
            Err(why) => Err(why.clone()),
        })
    }

    fn build(&self, id: u32, writer: &str) -> Result<Decoder, String> {
        let reader = super::reader_schema(&self.schema, writer).map_err(|e| {
            format!("writer schema id {id} does not fit the declared columns: {e:#}")
        })?;
        let mut store = SchemaStore::new_with_type(FingerprintAlgorithm::Id);
        store
            .set(Fingerprint::Id(id), AvroSchema::new(writer.to_string()))
            .map_err(|e| format!("writer schema id {id} is not an Avro schema: {e}"))?;
        ReaderBuilder::new()
            .with_batch_size(self.batch_rows)
            .with_reader_schema(reader)
            .with_writer_schema_store(store)
            .with_active_fingerprint(Fingerprint::Id(id))
            // Unframed: the prefix is checked here, and each body must be
            // exactly one record (a framed decoder would take trailing
            // bytes for the next record's prefix and carry them on).
            .with_decoder_mode(DecoderMode::UnframedDatum)
            .build_decoder()
            .map_err(|e| {
                format!("writer schema id {id} does not resolve into the declared columns: {e}")
            })
    }

    /// Decodes one framed value's body: exactly one whole record, or the
    /// reason (the decoder may then hold part of it: see [`Self::redo`]).
    fn decode_one(&mut self, id: u32, bytes: &[u8]) -> Result<(), String> {
        let body = bytes.get(FRAME..).unwrap_or_default();
        let decoder = self
            .decoder(id)
            .ok_or_else(|| format!("no decoder for schema id {id}"))?;
        let before = decoder.capacity();
        match decoder.decode(body) {
            Ok(n) if n == body.len() && before - decoder.capacity() == 1 => Ok(()),
            Ok(n) if n < body.len() => Err(format!(
                "the value has {} bytes after its Avro record of schema id {id}",
                body.len() - n
            )),
            Ok(_) => Err(format!(
                "the value is not one Avro record of schema id {id}"
            )),
            Err(e) => Err(format!(
                "the Avro body does not decode with schema id {id} (cut short, or not of \
                 that schema): {e}"
            )),
        }
    }

    /// After a record failed half-way: a fresh decoder for the run's
    /// writer schema, and the run's good records decoded into it again.
    fn redo(&mut self, run: &Run, values: &[Option<&[u8]>]) -> Result<()> {
        let writer = match self.registry.schema(run.id)? {
            Lookup::Found(text) => text,
            Lookup::Unknown(why) => anyhow::bail!("schema id {} vanished: {why}", run.id),
        };
        let fresh = self.build(run.id, &writer).map_err(anyhow::Error::msg)?;
        self.decoders.insert(run.id, Ok(fresh));
        for &i in &run.records {
            self.decode_one(run.id, values[i].unwrap_or_default())
                .map_err(|why| anyhow::anyhow!("record {i} decoded once, not twice: {why}"))?;
        }
        Ok(())
    }

    fn flush(&mut self, run: Option<Run>, out: &mut FramedRows) -> Result<()> {
        let Some(run) = run else {
            return Ok(());
        };
        let schema = self.schema.clone();
        if let Some(decoder) = self.decoder(run.id) {
            if let Some(batch) = decoder.flush()? {
                let batch = crate::files::conform::conform(
                    &batch,
                    &schema,
                    &format!("schema id {}", run.id),
                )?;
                let (batch, refused) = without_overlong_decimals(batch, &run.records)?;
                out.rejected.extend(refused);
                if batch.num_rows() > 0 {
                    out.batches.push(batch);
                }
            }
        }
        Ok(())
    }
}

/// `batch` without the rows whose decimal has more digits than its
/// column's precision (Avro does not check a decimal's bytes against
/// the schema's precision), and those rows' records (`records[row]`)
/// with the reason.
pub(super) fn without_overlong_decimals(
    batch: RecordBatch,
    records: &[usize],
) -> Result<(RecordBatch, Vec<(usize, String)>)> {
    use arrow_array::types::{Decimal128Type, DecimalType};
    let mut keep = vec![true; batch.num_rows()];
    let mut refused = Vec::new();
    for (field, column) in batch.schema().fields().iter().zip(batch.columns()) {
        let &arrow_schema::DataType::Decimal128(precision, scale) = field.data_type() else {
            continue;
        };
        let Some(values) = column
            .as_any()
            .downcast_ref::<arrow_array::Decimal128Array>()
        else {
            continue;
        };
        for (row, value) in values.iter().enumerate() {
            let Some(v) = value else { continue };
            if keep[row] && Decimal128Type::validate_decimal_precision(v, precision, scale).is_err()
            {
                keep[row] = false;
                refused.push((
                    records.get(row).copied().unwrap_or(usize::MAX),
                    format!(
                        "column `{}`: {} has more digits than decimal({precision},{scale}) holds",
                        field.name(),
                        Decimal128Type::format_decimal(v, precision, scale)
                    ),
                ));
            }
        }
    }
    if refused.is_empty() {
        return Ok((batch, refused));
    }
    let mask = arrow_array::BooleanArray::from(keep);
    Ok((
        arrow_select::filter::filter_record_batch(&batch, &mask)?,
        refused,
    ))
}

/// The frame before an Avro body: a 0 byte and a 4-byte schema id.
const FRAME: usize = 5;

/// The schema id of a framed value, or why it is not framed.
fn frame_id(value: Option<&[u8]>) -> Result<u32, String> {
    let Some(value) = value else {
        return Err("the record has no value (a tombstone), so no Avro record".into());
    };
    match value {
        [0, a, b, c, d, ..] => Ok(u32::from_be_bytes([*a, *b, *c, *d])),
        _ => Err(format!(
            "the value is not in the schema registry's wire format (a 0 byte, then a 4-byte \
             schema id); it starts {}",
            hex::encode(&value[..value.len().min(8)])
        )),
    }
}
