//! Rows as Avro values in a schema registry's wire format, for the Kafka
//! sink: the output's columns become an Avro record schema (arrow-avro's
//! mapping: `decimal(p,s)` a `bytes` decimal, `timestamp(ms, UTC)` a
//! `timestamp-millis` long, `date32` a `date` int, structs records, lists
//! arrays, a nullable column a union with `null` first), registered under
//! the sink's subject; each row is then `0x00`, that id as 4 big-endian
//! bytes, and the Avro body, as Confluent's serializers write it.

use super::registry::Registry;
use anyhow::{bail, Context, Result};
use arrow_array::RecordBatch;
use arrow_avro::schema::{
    AvroSchema, FingerprintStrategy, AVRO_NAMESPACE_METADATA_KEY, AVRO_NAME_METADATA_KEY,
    SCHEMA_METADATA_KEY,
};
use arrow_avro::writer::format::AvroSoeFormat;
use arrow_avro::writer::{Encoder, WriterBuilder};
use arrow_schema::{Fields, Schema};
use bytes::Bytes;
use std::collections::HashMap;

/// Encodes output rows as framed Avro values.
pub struct FramedEncoder {
    registry: Registry,
    subject: String,
    /// The record's name and namespace.
    name: String,
    namespace: Option<String>,
    /// Per set of output columns: the encoder framing with the id their
    /// Avro schema was registered under. An output's columns change only
    /// with a new operator version, so this stays small, and the schema is
    /// made and registered once per set, not per batch.
    encoders: HashMap<Fields, Encoder>,
}

impl FramedEncoder {
    /// An encoder registering its schemas under `subject` in `registry`,
    /// the record named `record` (`namespace.Name` or `Name`).
    pub fn new(registry: Registry, subject: &str, record: &str) -> Result<Self> {
        check_record_name(record)?;
        let (namespace, name) = match record.rsplit_once('.') {
            Some((ns, name)) => (Some(ns.to_string()), name.to_string()),
            None => (None, record.to_string()),
        };
        Ok(FramedEncoder {
            registry,
            subject: subject.to_string(),
            name,
            namespace,
            encoders: HashMap::new(),
        })
    }

    /// Each row of `batches` as one framed value, in order. An error is
    /// the registry's (unreachable, or refusing the schema) or an output
    /// column Avro cannot hold; the epoch fails with it and nothing of it
    /// is sent.
    pub fn encode(&mut self, batches: &[RecordBatch]) -> Result<Vec<Bytes>> {
        let mut values = Vec::new();
        for batch in batches.iter().filter(|b| b.num_rows() > 0) {
            let fields = batch.schema_ref().fields();
            if !self.encoders.contains_key(fields) {
                let encoder = self.encoder(fields)?;
                self.encoders.insert(fields.clone(), encoder);
            }
            let encoder = self
                .encoders
                .get_mut(fields)
                .context("the encoder just made")?;
            encoder
                .encode(batch)
                .context("encoding the output's rows as Avro")?;
            values.extend(encoder.flush().iter());
        }
        Ok(values)
    }

    /// An encoder of rows of `fields`: their Avro schema (the record named
    /// as configured; no other metadata, which would pass into it),
    /// registered, its id framing every value.
    fn encoder(&mut self, fields: &Fields) -> Result<Encoder> {
        let mut metadata = HashMap::from([(AVRO_NAME_METADATA_KEY.to_string(), self.name.clone())]);
        if let Some(ns) = &self.namespace {
            metadata.insert(AVRO_NAMESPACE_METADATA_KEY.to_string(), ns.clone());
        }
        let json =
            AvroSchema::try_from(&Schema::new_with_metadata(fields.clone(), metadata.clone()))
                .context("the output's columns as an Avro schema")?
                .json_string;
        let id = self.registry.register(&self.subject, &json)?;
        metadata.insert(SCHEMA_METADATA_KEY.to_string(), json);
        WriterBuilder::new(Schema::new_with_metadata(fields.clone(), metadata))
            .with_fingerprint_strategy(FingerprintStrategy::Id(id))
            .build_encoder::<AvroSoeFormat>()
            .context("an Avro encoder of the output's columns")
    }
}

/// Refuses a record name Avro does not allow: dot-separated parts, each a
/// letter or `_` then letters, digits or `_`.
pub fn check_record_name(record: &str) -> Result<()> {
    if !record.split('.').all(super::is_avro_name) {
        bail!(
            "`{record}` is not an Avro record name: dot-separated parts, each a letter or `_` \
             followed by letters, digits or `_` (e.g. `bank.Alert`)"
        );
    }
    Ok(())
}

/// The record name a sink writing `topic` uses by default: `weir.` and
/// the topic, with every character Avro does not allow in a name as `_`.
pub fn default_record_name(topic: &str) -> String {
    let mut name: String = topic
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    if !name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') {
        name.insert(0, '_');
    }
    format!("weir.{name}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_names_are_checked_and_made_from_topics() {
        for ok in ["Alert", "bank.Alert", "_a.b_2.C"] {
            check_record_name(ok).unwrap();
        }
        for bad in ["", "bank.", "2fa", "bank.al-ert", "a..b"] {
            assert!(check_record_name(bad).is_err(), "{bad}");
        }
        assert_eq!(default_record_name("alerts"), "weir.alerts");
        assert_eq!(
            default_record_name("fraud.alerts-v2"),
            "weir.fraud_alerts_v2"
        );
        assert_eq!(default_record_name("2024"), "weir._2024");
        check_record_name(&default_record_name("fraud.alerts-v2")).unwrap();
    }
}
