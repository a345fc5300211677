//! `cargo bench -p weir-runtime --bench state`: keyed state through the Wasm
//! interface. A guest (`sandbox-tests` in `touch` mode) reads and rewrites
//! one key per row with one `get-many` and one `put-many` per 10k-row batch,
//! over 1M distinct keys, in two epochs: the first finds no key, the second
//! finds every key committed by the first. The baseline, measured in the
//! same run on a second store, is the same work done natively on the host's
//! epoch overlay (no sandbox crossing). Commit = the epoch's RocksDB
//! WriteBatch with marker and undo record, synced. `BENCH_STATE_KEYS`
//! changes the 1M.

use weir_test_support::guests;

use arrow_array::{Array, ArrayRef, Int64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema};
use std::sync::Arc;
use std::time::{Duration, Instant};
use weir_engine::operator_state::{self, state_env};
use weir_host::{Limits, WasmHost};
use weir_state::{namespace_prefix, EpochState, SnapshotPolicy, StateStore};

const BATCH: usize = 10_000;

fn batches(keys: usize) -> Vec<RecordBatch> {
    let schema = Arc::new(Schema::new(vec![
        Field::new("card_id", DataType::Utf8, true),
        Field::new("ts", DataType::Int64, true),
    ]));
    (0..keys)
        .step_by(BATCH)
        .map(|start| {
            let rows = start..(start + BATCH).min(keys);
            let columns: Vec<ArrayRef> = vec![
                Arc::new(StringArray::from_iter_values(
                    rows.clone().map(|i| format!("card-{i:010}")),
                )),
                Arc::new(Int64Array::from_iter_values(rows.map(|i| i as i64))),
            ];
            RecordBatch::try_new(schema.clone(), columns).expect("batch")
        })
        .collect()
}

fn store(dir: &std::path::Path) -> StateStore {
    let policy = SnapshotPolicy {
        every: 0,
        retain: 1,
    };
    StateStore::open(dir, policy, None).expect("state store").0
}

/// The guest's work done on the overlay directly.
fn native(state: &mut EpochState, batches: &[RecordBatch]) {
    let prefix = namespace_prefix("bench");
    for b in batches {
        let cards = b
            .column(0)
            .as_any()
            .downcast_ref::<StringArray>()
            .expect("card_id");
        let keys: Vec<&[u8]> = (0..cards.len())
            .map(|i| cards.value(i).as_bytes())
            .collect();
        let found = state.get_many(&prefix, &keys).expect("get_many");
        for (k, v) in keys.iter().zip(found) {
            let n = v
                .and_then(|v| v.try_into().ok())
                .map_or(0, u64::from_le_bytes);
            state.put(&prefix, k, &(n + 1).to_le_bytes(), None);
        }
    }
}

fn main() {
    let keys: usize = std::env::var("BENCH_STATE_KEYS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    let input = batches(keys);
    let host = WasmHost::new(None).expect("host");
    let wasm = std::fs::read(guests::guest("sandbox_tests")).expect("guest");
    let op = host.load(&wasm, Default::default()).expect("load");
    let limits = Limits {
        memory_bytes: 1 << 30,
        ..Limits::default()
    };
    let scratch = tempfile::tempdir().expect("tempdir");
    let mut wasm_store = store(&scratch.path().join("wasm"));
    let mut native_store = store(&scratch.path().join("native"));

    println!("keyed state, {keys} distinct keys, {BATCH}-key get-many + put-many per batch\n");
    println!("| epoch | path | time | gets+puts/s | vs native | commit (WriteBatch, synced) |");
    println!("|---|---|---|---|---|---|");
    for epoch in 0..2u64 {
        let env = state_env(EpochState::new(wasm_store.reader(), 0, 0), "bench");
        let mut instance = op
            .instantiate("bench", epoch, limits, r#"{"mode": "touch"}"#, env)
            .expect("instantiate");
        let t = Instant::now();
        for b in &input {
            instance
                .process("bench", epoch, 0, b.clone())
                .expect("process");
        }
        let wasm_time = t.elapsed();
        let changes = operator_state::changes(instance.into_env());
        let t = Instant::now();
        wasm_store.commit(epoch, &changes).expect("commit");
        let wasm_commit = t.elapsed();

        let mut state = EpochState::new(native_store.reader(), 0, 0);
        let t = Instant::now();
        native(&mut state, &input);
        let native_time = t.elapsed();
        let t = Instant::now();
        native_store
            .commit(epoch, &state.into_changes())
            .expect("commit");
        let native_commit = t.elapsed();

        let rate = |d: Duration| (2 * keys) as f64 / d.as_secs_f64();
        let what = if epoch == 0 {
            "keys absent"
        } else {
            "keys committed"
        };
        println!(
            "| {epoch} ({what}) | Wasm, batched | {:.2} s | {:.0} | {:.2}x | {:.2} s |",
            wasm_time.as_secs_f64(),
            rate(wasm_time),
            wasm_time.as_secs_f64() / native_time.as_secs_f64(),
            wasm_commit.as_secs_f64()
        );
        println!(
            "| {epoch} ({what}) | native overlay | {:.2} s | {:.0} | 1.00x | {:.2} s |",
            native_time.as_secs_f64(),
            rate(native_time),
            native_commit.as_secs_f64()
        );
    }
    // Both stores hold the same counts.
    let probe = [b"card-0000000000".as_slice()];
    let prefix = namespace_prefix("bench");
    let a = EpochState::new(wasm_store.reader(), 0, 0)
        .get_many(&prefix, &probe)
        .unwrap();
    let b = EpochState::new(native_store.reader(), 0, 0)
        .get_many(&prefix, &probe)
        .unwrap();
    assert_eq!(a, b);
    assert_eq!(a[0].as_deref(), Some(&2u64.to_le_bytes()[..]));
}
