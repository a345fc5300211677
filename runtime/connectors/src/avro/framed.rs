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

/// `batch` without the rows whose decimal — a column's, or one inside a
/// struct or a list — has more digits than its type's precision (Avro
/// does not check a decimal's bytes against the schema's precision), and
/// those rows' records (`records[row]`) with the reason.
pub(super) fn without_overlong_decimals(
    batch: RecordBatch,
    records: &[usize],
) -> Result<(RecordBatch, Vec<(usize, String)>)> {
    let schema = batch.schema();
    let decimals: Vec<_> = schema
        .fields()
        .iter()
        .zip(batch.columns())
        .filter(|(field, _)| holds_decimal(field.data_type()))
        .collect();
    if decimals.is_empty() {
        return Ok((batch, Vec::new()));
    }
    let mut reasons: Vec<Option<String>> = vec![None; batch.num_rows()];
    for (field, column) in decimals {
        overlong_rows(column.as_ref(), field.name(), &mut reasons);
    }
    let refused: Vec<(usize, String)> = reasons
        .iter()
        .enumerate()
        .filter_map(|(row, why)| {
            let why = why.clone()?;
            Some((records.get(row).copied().unwrap_or(usize::MAX), why))
        })
        .collect();
    if refused.is_empty() {
        return Ok((batch, refused));
    }
    let mask = arrow_array::BooleanArray::from_iter(reasons.iter().map(|r| Some(r.is_none())));
    Ok((
        arrow_select::filter::filter_record_batch(&batch, &mask)?,
        refused,
    ))
}

/// Whether values of type `t` hold a decimal (themselves, or inside a
/// struct or a list): only those are checked.
fn holds_decimal(t: &arrow_schema::DataType) -> bool {
    use arrow_schema::DataType;
    match t {
        DataType::Decimal128(..) => true,
        DataType::Struct(fields) => fields.iter().any(|f| holds_decimal(f.data_type())),
        DataType::List(item) => holds_decimal(item.data_type()),
        _ => false,
    }
}

/// Marks in `reasons` (one per value of `array`, `None` so far) each value
/// holding a decimal with more digits than its precision; `path` names
/// the value's place (`lines[].price`).
fn overlong_rows(array: &dyn arrow_array::Array, path: &str, reasons: &mut [Option<String>]) {
    use arrow_array::cast::AsArray;
    use arrow_array::types::{Decimal128Type, DecimalType};
    use arrow_array::Array as _;
    use arrow_schema::DataType;
    match array.data_type() {
        &DataType::Decimal128(precision, scale) => {
            for (row, value) in array.as_primitive::<Decimal128Type>().iter().enumerate() {
                let Some(v) = value else { continue };
                if reasons[row].is_none()
                    && Decimal128Type::validate_decimal_precision(v, precision, scale).is_err()
                {
                    reasons[row] = Some(format!(
                        "column `{path}`: {} has more digits than decimal({precision},{scale}) holds",
                        Decimal128Type::format_decimal(v, precision, scale)
                    ));
                }
            }
        }
        DataType::Struct(fields) => {
            let s = array.as_struct();
            let children = fields.iter().zip(s.columns());
            for (field, child) in children.filter(|(f, _)| holds_decimal(f.data_type())) {
                let mut inner = vec![None; child.len()];
                overlong_rows(
                    child.as_ref(),
                    &format!("{path}.{}", field.name()),
                    &mut inner,
                );
                for (row, why) in inner.into_iter().enumerate() {
                    if why.is_some() && s.is_valid(row) && reasons[row].is_none() {
                        reasons[row] = why;
                    }
                }
            }
        }
        DataType::List(_) => {
            let list = array.as_list::<i32>();
            let items = list.values();
            let mut inner = vec![None; items.len()];
            overlong_rows(items.as_ref(), &format!("{path}[]"), &mut inner);
            for (row, range) in list.offsets().windows(2).enumerate() {
                if list.is_null(row) || reasons[row].is_some() {
                    continue;
                }
                let (from, to) = (range[0] as usize, range[1] as usize);
                reasons[row] = inner[from..to].iter().find_map(Clone::clone);
            }
        }
        _ => {}
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::{Array, ArrayRef, Decimal128Array, ListArray, StringArray, StructArray};
    use arrow_buffer::OffsetBuffer;
    use arrow_schema::{DataType, Field, Fields, Schema};
    use std::sync::Arc;

    /// Rows of `id` and `lines: list<struct{price: decimal(4,2)}>` whose
    /// prices are `prices` (unscaled), each row taking `per_row` of them.
    fn batch(prices: Vec<i128>, per_row: &[i32]) -> RecordBatch {
        let price = Arc::new(Field::new("price", DataType::Decimal128(4, 2), false));
        let prices: ArrayRef = Arc::new(
            Decimal128Array::from(prices)
                .with_precision_and_scale(4, 2)
                .unwrap(),
        );
        let item = StructArray::new(Fields::from(vec![price.clone()]), vec![prices], None);
        let item_field = Arc::new(Field::new("item", item.data_type().clone(), false));
        let lines = ListArray::new(
            item_field.clone(),
            OffsetBuffer::from_lengths(per_row.iter().map(|&n| n as usize)),
            Arc::new(item),
            None,
        );
        let ids: Vec<String> = (0..per_row.len()).map(|i| format!("r{i}")).collect();
        RecordBatch::try_new(
            Arc::new(Schema::new(vec![
                Field::new("id", DataType::Utf8, false),
                Field::new("lines", DataType::List(item_field), false),
            ])),
            vec![Arc::new(StringArray::from(ids)), Arc::new(lines)],
        )
        .unwrap()
    }

    #[test]
    fn an_overlong_decimal_inside_a_list_of_structs_sets_its_row_aside() {
        // 99.99 fits decimal(4,2); 123.45 does not.
        let (kept, refused) =
            without_overlong_decimals(batch(vec![9999, 1, 12345, 5], &[2, 1, 1]), &[10, 11, 12])
                .unwrap();
        assert_eq!(kept.num_rows(), 2);
        assert_eq!(
            refused,
            [(
                11,
                "column `lines[].price`: 123.45 has more digits than decimal(4,2) holds".into()
            )]
        );
    }
}
