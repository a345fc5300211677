//! A deliberately misbehaving operator for the sandbox tests. Its config
//! picks the behaviour: `{"mode": "echo" | "loop" | "bomb" | "trap" | "panic" | "fail" | "bad-output"}`.
//! Every mode except `echo` should fail its epoch and leave the host healthy.

use weir_sdk::{Batch, EpochContext, Error, Int64Builder, Operator, Output, Utf8Builder};

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Echo,
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
