//! A deliberately misbehaving operator for the sandbox tests. Its config
//! picks the behaviour: `{"mode": "echo" | "count" | "touch" | "watermark" | "loop" | "bomb" | "trap" | "panic" | "fail" | "bad-output" | "state-bomb"}`.
//! Every mode except `echo` and `count` should fail its epoch and leave the
//! host healthy. `count` exercises keyed state: each row comes out with the
//! number of rows its card has had so far, across epochs. `watermark` echoes
//! each row's `txn_id` with the epoch's watermark. `touch` reads and
//! rewrites the state of every `card_id` with one batched call each and
//! outputs nothing (the state benchmark).

use weir_sdk::{Batch, EpochContext, Error, Int64Builder, Operator, Output, Utf8Builder};

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Echo,
    Count,
    Touch,
    Watermark,
    StateBomb,
    Loop,
    Bomb,
    Trap,
    Panic,
    Fail,
    BadOutput,
}

/// The operator; behaviour chosen at `init`.
pub struct SandboxTest {
    mode: Mode,
}

fn parse_mode(config: &str) -> Result<Mode, Error> {
    let mode = config
        .split('"')
        .skip_while(|s| *s != "mode")
        .nth(2)
        .ok_or_else(|| Error::config("expected {\"mode\": \"...\"}"))?;
    Ok(match mode {
        "echo" => Mode::Echo,
        "count" => Mode::Count,
        "touch" => Mode::Touch,
        "watermark" => Mode::Watermark,
        "state-bomb" => Mode::StateBomb,
        "loop" => Mode::Loop,
        "bomb" => Mode::Bomb,
        "trap" => Mode::Trap,
        "panic" => Mode::Panic,
        "fail" => Mode::Fail,
        "bad-output" => Mode::BadOutput,
        other => return Err(Error::config(format!("unknown mode `{other}`"))),
    })
}

impl Operator for SandboxTest {
    fn init(config: &str) -> Result<Self, Error> {
        Ok(SandboxTest {
            mode: parse_mode(config)?,
        })
    }

    fn process(&mut self, _ctx: &EpochContext, batch: &Batch) -> Result<Output, Error> {
        match self.mode {
            Mode::Echo => {
                let ids = batch.utf8("txn_id")?;
                let mut out = Utf8Builder::new();
                for row in 0..batch.num_rows() {
                    out.push_option(ids.get(row));
                }
                Output::new().with("txn_id", out).build()
            }
            Mode::Count => count_per_card(batch),
            Mode::Touch => {
                let cards = batch.utf8("card_id")?;
                let keys: Vec<&str> = (0..batch.num_rows()).filter_map(|r| cards.get(r)).collect();
                let found = weir_sdk::state::get_many(&keys);
                let updates: Vec<(&str, [u8; 8])> = keys
                    .iter()
                    .enumerate()
                    .map(|(i, k)| {
                        let n = found
                            .get(i)
                            .and_then(|v| v.try_into().ok())
                            .map_or(0, u64::from_le_bytes);
                        (*k, (n + 1).to_le_bytes())
                    })
                    .collect();
                weir_sdk::state::put_many(&updates, None);
                Output::empty()
            }
            Mode::Watermark => {
                let ids = batch.utf8("txn_id")?;
                let watermark = weir_sdk::state::watermark();
                let (mut out, mut marks) = (Utf8Builder::new(), Int64Builder::new());
                for row in 0..batch.num_rows() {
                    out.push_option(ids.get(row));
                    marks.push_option(watermark);
                }
                Output::new()
                    .with("txn_id", out)
                    .with("watermark", marks)
                    .build()
            }
            Mode::StateBomb => {
                // Keeps writing state until the host refuses.
                let value = vec![7u8; 1 << 20];
                for i in 0u64.. {
                    weir_sdk::state::put(&i.to_le_bytes(), &value);
                }
                Output::empty()
            }
            Mode::Loop => {
                let mut x: u64 = batch.num_rows() as u64;
                loop {
                    x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
                }
            }
            Mode::Bomb => {
                let mut hoard: Vec<Vec<u8>> = Vec::new();
                loop {
                    hoard.push(vec![1u8; 16 << 20]);
                    std::hint::black_box(&hoard);
                }
            }
            Mode::Trap => {
                #[cfg(target_arch = "wasm32")]
                core::arch::wasm32::unreachable();
                #[cfg(not(target_arch = "wasm32"))]
                std::process::abort();
            }
            Mode::Panic => panic!("sandbox-tests was told to panic"),
            Mode::Fail => Err(Error::failed("sandbox-tests was told to fail")),
            Mode::BadOutput => {
                // Two columns of different lengths, bypassing the builder check.
                let mut a = Int64Builder::new();
                a.push(1);
                Ok(Output::new().with("a", a).with("b", Int64Builder::new()))
            }
        }
    }
}

weir_sdk::export_operator!(SandboxTest);

/// Each row with its card's running count, kept in state as a little-endian
/// u64 per card; one batched read and one batched write per batch.
fn count_per_card(batch: &Batch) -> Result<Output, Error> {
    let ids = batch.utf8("txn_id")?;
    let cards = batch.utf8("card_id")?;
    let rows = batch.num_rows();
    let mut distinct: Vec<&str> = (0..rows).filter_map(|r| cards.get(r)).collect();
    distinct.sort_unstable();
    distinct.dedup();
    let stored = weir_sdk::state::get_many(&distinct);
    let mut counts: Vec<u64> = (0..distinct.len())
        .map(|i| {
            stored
                .get(i)
                .and_then(|v| v.try_into().ok())
                .map_or(0, u64::from_le_bytes)
        })
        .collect();
    let (mut out_ids, mut out_cards, mut seen) =
        (Utf8Builder::new(), Utf8Builder::new(), Int64Builder::new());
    for r in 0..rows {
        let Some(card) = cards.get(r) else { continue };
        let Ok(i) = distinct.binary_search(&card) else {
            continue;
        };
        counts[i] += 1;
        out_ids.push_option(ids.get(r));
        out_cards.push(card);
        seen.push(counts[i] as i64);
    }
    let updates: Vec<(&str, [u8; 8])> = distinct
        .iter()
        .zip(&counts)
        .map(|(c, n)| (*c, n.to_le_bytes()))
        .collect();
    weir_sdk::state::put_many(&updates, None);
    Output::new()
        .with("txn_id", out_ids)
        .with("card_id", out_cards)
        .with("seen", seen)
        .build()
}
