//! `cargo bench -p weir-cli --bench types`: what exact money costs, and
//! what reading Avro costs next to JSON lines.
//!
//! One rule, `amount > 2500.00` emitting the matching rows (the
//! `amount-rule` guest), over the demo's payments in 10k-row batches, with
//! the amount as `float64` (the baseline) and as `decimal(18,2)` — the same
//! values — read as `Decimal` values and as unscaled integers. Printed:
//! `process()` per batch (median of alternating runs), ns per row and the
//! ratio to the float64 rule in the same run.
//!
//! Then 100k of the demo's payments decoded into the declared columns from
//! JSON lines, from an Avro object container file (the same records,
//! written with arrow-avro's writer) and from Protobuf values as a Kafka
//! source reads them (one message each, encoded with prost-reflect, read
//! through the JSON mapping): rows a second and the ratio.

use arrow_array::{Array, ArrayRef, Decimal128Array, Float64Array, RecordBatch};
use arrow_schema::{DataType, Field, Schema};
use std::sync::Arc;
use std::time::{Duration, Instant};
use weir_connectors::generator::payments as generator;
use weir_core::json::{JsonDecoder, MalformedPolicy};
use weir_host::{Limits, OperatorInstance, WasmHost};
use weir_test_support::guests;

const ROWS: u64 = 10_000;
const THRESHOLD: &str = "2500.00";

/// The demo's payments: `txn_id` and `amount` (float64), 10k rows.
fn payments() -> RecordBatch {
    let schema = Arc::new(Schema::new(vec![
        Field::new("txn_id", DataType::Utf8, false),
        Field::new("amount", DataType::Float64, false),
    ]));
    let mut decoder = arrow_json::ReaderBuilder::new(schema)
        .with_batch_size(ROWS as usize)
        .build_decoder()
        .unwrap();
    decoder.decode(&generator::json_lines(1, 0, ROWS)).unwrap();
    decoder.flush().unwrap().unwrap()
}

/// The same batch with the amount as decimal(18,2): each float rounded to
/// cents (the generator writes two decimals).
fn as_decimal(batch: &RecordBatch) -> RecordBatch {
    let floats = batch
        .column(1)
        .as_any()
        .downcast_ref::<Float64Array>()
        .unwrap();
    let cents: Decimal128Array = floats
        .iter()
        .map(|v| v.map(|a| (a * 100.0).round() as i128))
        .collect::<Decimal128Array>()
        .with_precision_and_scale(18, 2)
        .unwrap();
    let schema = Arc::new(Schema::new(vec![
        Field::new("txn_id", DataType::Utf8, false),
        Field::new("amount", DataType::Decimal128(18, 2), false),
    ]));
    RecordBatch::try_new(
        schema,
        vec![batch.column(0).clone(), Arc::new(cents) as ArrayRef],
    )
    .unwrap()
}

fn instance(host: &WasmHost, wasm: &[u8], mode: &str) -> OperatorInstance {
    let loaded = host.load(wasm, Default::default()).unwrap();
    loaded
        .instantiate(
            "bench",
            0,
            Limits::default(),
            &format!("\"{mode} {THRESHOLD}\""),
            Default::default(),
        )
        .unwrap()
}

fn run(instance: &mut OperatorInstance, batch: &RecordBatch) -> usize {
    instance
        .process("bench", 0, 0, batch.clone())
        .unwrap()
        .iter()
        .map(RecordBatch::num_rows)
        .sum()
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn main() {
    rule_table();
    decode_table();
}

fn rule_table() {
    let floats = payments();
    let decimals = as_decimal(&floats);
    let wasm = std::fs::read(guests::guest("amount_rule")).unwrap();
    let host = WasmHost::new(None).unwrap();
    let mut cases = [
        (
            "float64, f64 compare",
            instance(&host, &wasm, "float"),
            &floats,
        ),
        (
            "decimal(18,2), Decimal compare",
            instance(&host, &wasm, "decimal"),
            &decimals,
        ),
        (
            "decimal(18,2), unscaled i128 compare",
            instance(&host, &wasm, "unscaled"),
            &decimals,
        ),
    ];
    let matches: Vec<usize> = cases.iter_mut().map(|(_, i, b)| run(i, b)).collect();
    assert!(
        matches.windows(2).all(|w| w[0] == w[1]),
        "every way finds the same rows: {matches:?}"
    );
    let iters = std::env::var("BENCH_ITERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300);
    let mut samples = vec![Vec::with_capacity(iters); cases.len()];
    for round in 0..iters + iters / 10 {
        for (k, (_, instance, batch)) in cases.iter_mut().enumerate() {
            let t = Instant::now();
            std::hint::black_box(run(instance, batch));
            if round >= iters / 10 {
                samples[k].push(t.elapsed());
            }
        }
    }
    let medians: Vec<Duration> = samples.into_iter().map(median).collect();
    println!(
        "\n`amount > {THRESHOLD}` over {ROWS} payments ({} match), process() per batch, median of {iters}\n",
        matches[0]
    );
    println!("| amount column, rule | per batch | per row | vs float64 |");
    println!("|---|---|---|---|");
    for ((name, _, _), d) in cases.iter().zip(&medians) {
        println!(
            "| {name} | {:.0} µs | {:.1} ns | {:.2}× |",
            d.as_secs_f64() * 1e6,
            d.as_secs_f64() * 1e9 / ROWS as f64,
            d.as_secs_f64() / medians[0].as_secs_f64()
        );
    }
}

/// The demo's payments (`rows` of them) as JSON lines, as an Avro object
/// container file, and as registry-framed Avro values: the same records.
struct Encoded {
    schema: arrow_schema::SchemaRef,
    json: Vec<u8>,
    ocf: bytes::Bytes,
    /// Each payment as one Protobuf `bench.Payment`.
    protobuf: Vec<Vec<u8>>,
    messages: weir_connectors::protobuf::ProtobufDecoder,
}

/// `bench.Payment`: the demo's columns as Protobuf fields (a payment
/// without a device has `device_id` empty).
fn payment_descriptor_set() -> Vec<u8> {
    use prost::Message as _;
    use prost_types::field_descriptor_proto::{Label, Type};
    let columns = generator::columns();
    let field = |(i, c): (usize, &weir_core::schema::ColumnConfig)| {
        let t = match c.data_type {
            weir_core::schema::ColumnType::Float64 => Type::Double,
            weir_core::schema::ColumnType::Int64 => Type::Int64,
            _ => Type::String,
        };
        prost_types::FieldDescriptorProto {
            name: Some(c.name.clone()),
            number: Some(i as i32 + 1),
            label: Some(Label::Optional as i32),
            r#type: Some(t as i32),
            ..Default::default()
        }
    };
    let file = prost_types::FileDescriptorProto {
        name: Some("bench.proto".into()),
        package: Some("bench".into()),
        syntax: Some("proto3".into()),
        message_type: vec![prost_types::DescriptorProto {
            name: Some("Payment".into()),
            field: columns.iter().enumerate().map(field).collect(),
            ..Default::default()
        }],
        ..Default::default()
    };
    prost_types::FileDescriptorSet { file: vec![file] }.encode_to_vec()
}

/// Payments `0..rows` as `bench.Payment` values.
fn protobuf_values(rows: u64) -> (weir_connectors::protobuf::ProtobufDecoder, Vec<Vec<u8>>) {
    use prost::Message as _;
    use prost_reflect::{DescriptorPool, DynamicMessage, Value};
    let set = payment_descriptor_set();
    let pool = DescriptorPool::decode(set.as_slice()).unwrap();
    let message = pool.get_message_by_name("bench.Payment").unwrap();
    let values = (0..rows)
        .map(|i| {
            let p = generator::payment(1, i).0;
            let mut m = DynamicMessage::new(message.clone());
            let text = [
                ("txn_id", p.txn_id),
                ("card_id", p.card_id),
                ("merchant_id", p.merchant_id),
                ("currency", p.currency),
                ("country", p.country),
                ("card_country", p.card_country),
                ("device_id", p.device_id.unwrap_or_default()),
            ];
            for (name, v) in text {
                m.set_field_by_name(name, Value::String(v));
            }
            m.set_field_by_name("amount", Value::F64(p.amount));
            m.set_field_by_name("ts", Value::I64(p.ts));
            m.encode_to_vec()
        })
        .collect();
    let decoder = weir_connectors::protobuf::ProtobufDecoder::from_bytes(
        &set,
        "bench.Payment",
        std::path::Path::new("bench.desc"),
    )
    .unwrap();
    (decoder, values)
}

fn encoded(rows: u64) -> Encoded {
    let schema = weir_core::schema::arrow_schema(&generator::columns());
    let json = generator::json_lines(1, 0, rows);
    let decoder = JsonDecoder::new(schema.clone(), rows as usize, MalformedPolicy::Fail);
    let batches = decoder.decode_lines(&json, "bench").unwrap().batches;
    let mut writer =
        arrow_avro::writer::AvroWriter::new(Vec::new(), schema.as_ref().clone()).unwrap();
    for b in &batches {
        writer.write(b).unwrap();
    }
    writer.finish().unwrap();
    let (messages, protobuf) = protobuf_values(rows);
    Encoded {
        schema,
        json,
        ocf: writer.into_inner().into(),
        protobuf,
        messages,
    }
}

/// Rows a second decoding `decode` over `rows` rows, median of `iters`.
fn rate(rows: u64, iters: usize, mut decode: impl FnMut() -> usize) -> f64 {
    assert_eq!(decode(), rows as usize, "every row decoded");
    let mut samples: Vec<Duration> = (0..iters)
        .map(|_| {
            let t = Instant::now();
            std::hint::black_box(decode());
            t.elapsed()
        })
        .collect();
    rows as f64 / median(std::mem::take(&mut samples)).as_secs_f64()
}

fn decode_table() {
    const ROWS: u64 = 100_000;
    let e = encoded(ROWS);
    let json = JsonDecoder::new(e.schema.clone(), 8192, MalformedPolicy::Fail);
    let json_rate = rate(ROWS, 15, || {
        json.decode_lines(&e.json, "bench")
            .unwrap()
            .batches
            .iter()
            .map(RecordBatch::num_rows)
            .sum()
    });
    let avro_rate = rate(ROWS, 15, || {
        weir_connectors::avro::decode_file(e.ocf.clone(), &e.schema, 8192, "bench")
            .unwrap()
            .iter()
            .map(RecordBatch::num_rows)
            .sum()
    });
    let protobuf_rate = rate(ROWS, 15, || {
        let mut joined = Vec::with_capacity(e.json.len());
        for value in &e.protobuf {
            joined.extend_from_slice(&e.messages.to_json(value).unwrap());
            joined.push(b'\n');
        }
        json.decode_lines(&joined, "bench")
            .unwrap()
            .batches
            .iter()
            .map(RecordBatch::num_rows)
            .sum()
    });
    println!("\nDecoding {ROWS} of the demo's payments into the declared columns, median of 15\n");
    println!("| format | bytes | rows/s | vs JSON lines |");
    println!("|---|---|---|---|");
    println!(
        "| JSON lines | {} | {:.0} | 1.00× |",
        e.json.len(),
        json_rate
    );
    println!(
        "| Avro object container file | {} | {:.0} | {:.2}× |",
        e.ocf.len(),
        avro_rate,
        avro_rate / json_rate
    );
    println!(
        "| Protobuf, one message per value | {} | {:.0} | {:.2}× |",
        e.protobuf.iter().map(Vec::len).sum::<usize>(),
        protobuf_rate,
        protobuf_rate / json_rate
    );
}
