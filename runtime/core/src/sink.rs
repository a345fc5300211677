//! Sinks: where an epoch's output goes. The engine writes `commits/<N>` only
//! after `write_epoch` returned, so a sink must make a repeated write of the
//! same epoch harmless (replace, or skip if already there): that is what
//! turns replay into exactly-once output.

use anyhow::Result;
use arrow_array::RecordBatch;

/// Serialises batches as JSON lines (one object per row, nulls omitted).
/// Decimals are written as strings of their exact digits (`"123.45"`): a
/// JSON number is read as a float by most consumers, which money must not
/// be; Weir's JSON sources read such strings back exactly.
pub fn to_json_lines(batches: &[RecordBatch]) -> Result<Vec<u8>> {
    let mut writer = arrow_json::WriterBuilder::new()
        .with_encoder_factory(std::sync::Arc::new(DecimalsAsText))
        .build::<_, arrow_json::writer::LineDelimited>(Vec::new());
    for batch in batches {
        writer.write(batch)?;
    }
    writer.finish()?;
    Ok(writer.into_inner())
}

/// Each value of `array` (a list or struct column, say) as JSON text, in
/// the form [`to_json_lines`] writes it (decimals as exact strings); null
/// where the value is null.
pub fn json_texts(array: &arrow_array::ArrayRef) -> Result<arrow_array::StringArray> {
    let field = arrow_schema::Field::new("v", array.data_type().clone(), true);
    let batch = RecordBatch::try_new(
        std::sync::Arc::new(arrow_schema::Schema::new(vec![field])),
        vec![array.clone()],
    )?;
    let lines = to_json_lines(&[batch])?;
    let text = std::str::from_utf8(&lines)?;
    text.lines()
        .map(|line| match line {
            "{}" => Ok(None),
            _ => line
                .strip_prefix("{\"v\":")
                .and_then(|l| l.strip_suffix('}'))
                .map(Some)
                .ok_or_else(|| anyhow::anyhow!("unexpected JSON line from the writer: {line}")),
        })
        .collect()
}

/// Encodes decimal values as JSON strings of their exact digits.
#[derive(Debug)]
struct DecimalsAsText;

impl arrow_json::EncoderFactory for DecimalsAsText {
    fn make_default_encoder<'a>(
        &self,
        _field: &'a arrow_schema::FieldRef,
        array: &'a dyn arrow_array::Array,
        _options: &'a arrow_json::EncoderOptions,
    ) -> std::result::Result<
        Option<arrow_json::writer::NullableEncoder<'a>>,
        arrow_schema::ArrowError,
    > {
        let Some(decimals) = array
            .as_any()
            .downcast_ref::<arrow_array::Decimal128Array>()
        else {
            return Ok(None);
        };
        Ok(Some(arrow_json::writer::NullableEncoder::new(
            Box::new(DecimalText(decimals)),
            arrow_array::Array::nulls(decimals).cloned(),
        )))
    }
}

struct DecimalText<'a>(&'a arrow_array::Decimal128Array);

impl arrow_json::Encoder for DecimalText<'_> {
    fn encode(&mut self, idx: usize, out: &mut Vec<u8>) {
        out.push(b'"');
        out.extend_from_slice(self.0.value_as_string(idx).as_bytes());
        out.push(b'"');
    }
}

#[cfg(test)]
mod json_tests {
    use super::*;
    use arrow_array::{Array, Decimal128Array};
    use std::sync::Arc;

    #[test]
    fn nested_values_become_json_texts_with_exact_decimals() {
        use arrow_array::builder::{Decimal128Builder, ListBuilder};
        let mut lines = ListBuilder::new(
            Decimal128Builder::new().with_data_type(arrow_schema::DataType::Decimal128(18, 2)),
        );
        lines.append_value([Some(10), Some(-250)]);
        lines.append_null();
        lines.append_value::<[Option<i128>; 0], _>([]);
        let array: arrow_array::ArrayRef = Arc::new(lines.finish());
        let texts = json_texts(&array).unwrap();
        assert_eq!(texts.value(0), r#"["0.10","-2.50"]"#);
        assert!(texts.is_null(1));
        assert_eq!(texts.value(2), "[]");
    }

    #[test]
    fn decimals_are_written_as_their_exact_digits_in_strings() {
        let amounts = Decimal128Array::from(vec![
            Some(12345),
            None,
            Some(-1),
            Some(i128::from(i64::MAX)),
        ])
        .with_precision_and_scale(38, 2)
        .unwrap();
        let schema = arrow_schema::Schema::new(vec![arrow_schema::Field::new(
            "amount",
            amounts.data_type().clone(),
            true,
        )]);
        let batch = RecordBatch::try_new(Arc::new(schema), vec![Arc::new(amounts)]).unwrap();
        let text = String::from_utf8(to_json_lines(&[batch]).unwrap()).unwrap();
        assert_eq!(
            text,
            "{\"amount\":\"123.45\"}\n{}\n{\"amount\":\"-0.01\"}\n{\"amount\":\"92233720368547758.07\"}\n"
        );
    }
}

/// A destination for operator output.
/// (Its identity in the checkpoint metadata comes from the config,
/// `SinkConfig::identity`, since the checkpoint is opened first.)
pub trait Sink: Send {
    /// Writes all output rows of `epoch`. Must be idempotent per epoch.
    fn write_epoch(&mut self, epoch: u64, batches: &[RecordBatch]) -> Result<()>;

    /// Real-time mode: writes the output of part `part` of `epoch` at once,
    /// while the epoch runs on ([`crate::parts`]). Must be idempotent per
    /// `(epoch, part)`: a replay writes an epoch's logged parts again, with
    /// the same rows. Every sink writes parts, so every sink works in both
    /// modes.
    fn write_part(&mut self, epoch: u64, part: u32, batches: &[RecordBatch]) -> Result<()>;

    /// Real-time mode: every part of `epoch` was written; called before its
    /// state commits (a sink that holds an epoch in one transaction commits
    /// it here).
    fn end_epoch(&mut self, epoch: u64) -> Result<()> {
        let _ = epoch;
        Ok(())
    }

    /// Takes ownership of this sink's output for the query: from now on a
    /// writer that took it earlier (a worker that lost the partition, or a
    /// zombie that woke up) has its writes refused with [`Fenced`]. A
    /// worker calls it when it is assigned a partition, before its first
    /// epoch. Sinks without a way to refuse stale writers keep the default,
    /// which does nothing; their repeated writes are still harmless.
    fn fence(&mut self) -> Result<()> {
        Ok(())
    }
}

/// A write refused because another writer took the sink's output over
/// ([`Sink::fence`]): this one must stop touching it, not retry.
#[derive(Debug, thiserror::Error)]
#[error(
    "fenced: {what} now belongs to owner generation {current}, this writer holds {held}; \
     another worker took the partition over"
)]
pub struct Fenced {
    /// What was refused (`table public.alerts`).
    pub what: String,
    /// The generation this writer took.
    pub held: i64,
    /// The newest generation.
    pub current: i64,
}

impl Fenced {
    /// Whether `e` (anywhere in its chain) says the writer was fenced.
    pub fn is_in(e: &anyhow::Error) -> bool {
        e.chain().any(|c| c.is::<Fenced>())
    }
}
