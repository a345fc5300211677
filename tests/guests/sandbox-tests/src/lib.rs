//! A deliberately misbehaving operator for the sandbox tests. Its config
//! picks the behaviour: `{"mode": "echo" | "count" | "touch" | "watermark" | "loop" | "bomb" | "trap" | "panic" | "fail" | "bad-output" | "state-bomb"}`.
//! Every mode except `echo`, `count`, `touch`, `watermark` and `migrations`
//! should fail its epoch and leave the host healthy. `echo` also takes
//! `"tag": "..."` (added to each row as column `tag`, so tests can tell
//! versions apart); every mode takes `"spin": N` (N iterations of busy work
//! per batch: a slow but deterministic operator). `migrations` counts in state how often
//! `migrate` ran and emits, per row, that count and the last `from-version`. `count` exercises keyed state: each row comes out with the
//! number of rows its card has had so far, across epochs. `watermark` echoes
//! each row's `txn_id` with the epoch's watermark. `touch` reads and
//! rewrites the state of every `card_id` with one batched call each and
//! outputs nothing (the state benchmark). `"poison": "<txn_id>"` (with
//! `"poison_by": "trap" | "loop" | "fail" | ...`, default `trap`) makes any
//! mode fail a batch holding that `txn_id`: a poison record.

use weir_sdk::{Batch, EpochContext, Error, Int64Builder, Operator, Output, Utf8Builder};

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Echo,
    Count,
    Touch,
    Watermark,
    Migrations,
    StateBomb,
    Loop,
    Bomb,
    Trap,
    Panic,
    Fail,
    BadOutput,
    GatherBomb,
    FreeRows,
}

/// The operator; behaviour chosen at `init`.
pub struct SandboxTest {
    mode: Mode,
    tag: Option<String>,
    spin: u64,
    /// A `txn_id` this guest fails on, the way `poison_by` names.
    poison: Option<(String, Mode)>,
}

/// The string value of `"key"` in a flat JSON object (this guest has no JSON parser).
fn string_field<'a>(config: &'a str, key: &str) -> Option<&'a str> {
    config.split('"').skip_while(|s| *s != key).nth(2)
}

/// The number value of `"key"` in a flat JSON object.
fn number_field(config: &str, key: &str) -> Option<u64> {
    let after = config.split(&format!("\"{key}\"")).nth(1)?;
    let digits: String = after
        .trim_start_matches([' ', ':'])
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

fn parse_mode(config: &str) -> Result<Mode, Error> {
    let mode = string_field(config, "mode")
        .ok_or_else(|| Error::config("expected {\"mode\": \"...\"}"))?;
    Ok(match mode {
        "echo" => Mode::Echo,
        "count" => Mode::Count,
        "touch" => Mode::Touch,
        "watermark" => Mode::Watermark,
        "migrations" => Mode::Migrations,
        "state-bomb" => Mode::StateBomb,
        "loop" => Mode::Loop,
        "bomb" => Mode::Bomb,
        "trap" => Mode::Trap,
        "panic" => Mode::Panic,
        "fail" => Mode::Fail,
        "bad-output" => Mode::BadOutput,
        "gather-bomb" => Mode::GatherBomb,
        "free-rows" => Mode::FreeRows,
        other => return Err(Error::config(format!("unknown mode `{other}`"))),
    })
}

impl Operator for SandboxTest {
    fn init(config: &str) -> Result<Self, Error> {
        Ok(SandboxTest {
            mode: parse_mode(config)?,
            tag: string_field(config, "tag").map(str::to_string),
            spin: number_field(config, "spin").unwrap_or(0),
            poison: match string_field(config, "poison") {
                Some(id) => {
                    let by = string_field(config, "poison_by").unwrap_or("trap");
                    Some((
                        id.to_string(),
                        parse_mode(&format!("{{\"mode\": \"{by}\"}}"))?,
                    ))
                }
                None => None,
            },
        })
    }

    fn migrate(&mut self, from_version: &str) -> Result<(), Error> {
        if self.mode == Mode::Migrations {
            let n = weir_sdk::state::get(b"migrations")
                .and_then(|v| v.try_into().ok())
                .map_or(0, u64::from_le_bytes);
            weir_sdk::state::put(b"migrations", &(n + 1).to_le_bytes());
            weir_sdk::state::put(b"migrated-from", from_version.as_bytes());
        }
        Ok(())
    }

    fn process(&mut self, _ctx: &EpochContext, batch: &Batch) -> Result<Output, Error> {
        let mut x = 0u64;
        for i in 0..self.spin {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(i));
        }
        if let Some((poison, by)) = &self.poison {
            let ids = batch.utf8("txn_id")?;
            if (0..batch.num_rows()).any(|r| ids.get(r) == Some(poison.as_str())) {
                return misbehave(*by, batch);
            }
        }
        match self.mode {
            Mode::Echo => {
                let ids = batch.utf8("txn_id")?;
                let mut out = Utf8Builder::new();
                let mut tags = Utf8Builder::new();
                for row in 0..batch.num_rows() {
                    out.push_option(ids.get(row));
                    tags.push_option(self.tag.as_deref());
                }
                let output = Output::new().with("txn_id", out);
                match self.tag {
                    Some(_) => output.with("tag", tags).build(),
                    None => output.build(),
                }
            }
            Mode::Migrations => {
                let n = weir_sdk::state::get(b"migrations")
                    .and_then(|v| v.try_into().ok())
                    .map_or(0, u64::from_le_bytes);
                let from = weir_sdk::state::get(b"migrated-from")
                    .map(|v| String::from_utf8_lossy(&v).into_owned());
                let ids = batch.utf8("txn_id")?;
                let (mut out, mut counts, mut froms) =
                    (Utf8Builder::new(), Int64Builder::new(), Utf8Builder::new());
                for row in 0..batch.num_rows() {
                    out.push_option(ids.get(row));
                    counts.push(n as i64);
                    froms.push_option(from.as_deref());
                }
                Output::new()
                    .with("txn_id", out)
                    .with("migrations", counts)
                    .with("migrated_from", froms)
                    .build()
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
            other => misbehave(other, batch),
        }
    }
}

/// The failing modes: each ends the call without a proper output.
fn misbehave(mode: Mode, batch: &Batch) -> Result<Output, Error> {
    match mode {
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
        Mode::BadOutput => {
            // Two columns of different lengths, bypassing the builder check.
            let mut a = Int64Builder::new();
            a.push(1);
            Ok(Output::new().with("a", a).with("b", Int64Builder::new()))
        }
        Mode::GatherBomb => {
            // Row 0 four million times: 16 MB of indices asking the host
            // for far more than the guest's memory limit.
            let rows = vec![0u32; 4_000_000];
            let ids = batch.column_rows("txn_id", &rows)?;
            Ok(Output::new().with("txn_id", ids))
        }
        Mode::FreeRows => {
            // 400 million booleans in 50 MB: rows that cost the guest a
            // bit each but the sinks far more to write.
            use weir_sdk::bindings::weir::operator::types as wit;
            let rows = 400_000_000u32;
            let column = wit::TypedOutputColumn {
                type_: wit::ColumnType {
                    nodes: vec![wit::TypeNode {
                        name: "flag".into(),
                        kind: wit::NodeKind::Boolean,
                        nullable: true,
                    }],
                },
                column: wit::ArrayColumn {
                    nodes: vec![wit::ArrayNode {
                        len: rows,
                        validity: None,
                        offsets: Vec::new(),
                        values: vec![0u8; rows as usize / 8],
                    }],
                },
            };
            weir_sdk::bindings::weir::operator::outputs::emit_typed(
                "default",
                &wit::TypedOutput {
                    num_rows: rows,
                    columns: vec![column],
                },
            );
            Output::empty()
        }
        _ => Err(Error::failed("sandbox-tests was told to fail")),
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
