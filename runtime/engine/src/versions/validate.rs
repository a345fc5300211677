//! Checks a candidate version before it may run: the bytes compile as a
//! component, it implements the `weir:operator` world with no imports
//! beyond the pipeline's grants, `init` accepts the config, and — when the
//! upload brings them — the golden input produces exactly the golden output.
//! All of this runs beside the pipeline, never on its epoch loop.

use crate::operator_state::state_env;
use crate::versions::runner::{EpochAt, Runner};
use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;
use serde_json::{Map, Value};
use weir_core::json::JsonDecoder;
use weir_host::{EpochEnv, Grants, LoadedOperator, OperatorFailure, WasmHost};
use weir_state::{EpochState, StateReader};

/// What a candidate is checked against: the pipeline's sandbox and input.
pub struct Checks {
    /// Runs candidates as the pipeline's epochs run them (name, limits).
    pub runner: Runner,
    pub host: WasmHost,
    pub grants: Grants,
    /// The operator's state namespace; `init` and the golden run read it
    /// (as of the last committed epoch) and their writes are dropped.
    pub namespace: String,
    pub state: StateReader,
    /// Schema the golden input is decoded with: the source's.
    pub input_schema: SchemaRef,
    pub batch_rows: usize,
    /// The reference tables a candidate's golden run reads: the newest
    /// versions when the pipeline opened.
    pub lookups: std::sync::Arc<weir_core::lookup::EpochTables>,
}

/// What a version's instances get besides their code: the JSON config
/// passed to `init` and the artifacts (a model) they may read there.
#[derive(Debug, Clone, Default)]
pub struct Setup {
    pub config_json: String,
    pub artifacts: std::sync::Arc<weir_core::artifacts::Artifacts>,
}

impl Setup {
    /// `config_json` and no artifacts.
    pub fn config(config_json: impl Into<String>) -> Self {
        Setup {
            config_json: config_json.into(),
            artifacts: Default::default(),
        }
    }
}

/// Golden files: input rows (JSON lines in the source schema) and the
/// output rows the version must emit for them, in order.
pub struct Golden {
    pub input: Vec<u8>,
    pub expected: Vec<u8>,
}

/// Row counts of a passed golden run.
pub struct GoldenPassed {
    pub rows_in: u64,
    pub rows_out: u64,
}

impl Checks {
    fn env(&self, setup: &Setup) -> EpochEnv {
        EpochEnv {
            lookups: self.lookups.clone(),
            artifacts: setup.artifacts.clone(),
            ..state_env(EpochState::new(self.state.clone(), 0, 0), &self.namespace)
        }
    }

    /// Runs `operator`'s `init` with `setup` against the committed state
    /// (what it writes is dropped): the one `init` check, for the pipeline
    /// file's operator at start and for every version uploaded or loaded
    /// again.
    pub fn init(&self, operator: &LoadedOperator, setup: &Setup) -> Result<(), OperatorFailure> {
        self.runner
            .init(operator, &setup.config_json, self.env(setup))
    }

    /// Refuses an operator built for the four basic column types when the
    /// input has a column of another type (it could not read it).
    pub fn check_input_types(&self, operator: &LoadedOperator) -> Result<(), String> {
        if operator.reads_every_type() {
            return Ok(());
        }
        let basic = |t: &arrow_schema::DataType| {
            use arrow_schema::DataType::*;
            matches!(t, Int64 | Float64 | Boolean | Utf8)
        };
        match self
            .input_schema
            .fields()
            .iter()
            .find(|f| !basic(f.data_type()))
        {
            None => Ok(()),
            Some(f) => Err(format!(
                "operator {} reads only int64, float64, boolean and utf8 columns (it was built \
                 with an SDK from before decimals, timestamps, dates, binary, lists and structs), \
                 but the input's column `{}` is {}: rebuild it with the current SDK",
                operator.digest(),
                f.name(),
                weir_core::schema::type_name(f.data_type())
            )),
        }
    }

    /// Compiles and links `wasm` and runs its `init` with `setup`. The
    /// error is the reason, ready for the person who uploaded it.
    pub fn component(&self, wasm: &[u8], setup: &Setup) -> Result<LoadedOperator, String> {
        let config_json = &setup.config_json;
        if serde_json::from_str::<Value>(config_json).is_err() {
            return Err(format!(
                "the operator config is not valid JSON: {config_json:.200}"
            ));
        }
        check_header(wasm)?;
        let loaded = self
            .host
            .load_in_background(wasm, self.grants)
            .map_err(|e| format!("the upload is not a usable operator component: {e:#}"))?;
        self.check_input_types(&loaded)?;
        match self.init(&loaded, setup) {
            Ok(()) => Ok(loaded),
            Err(OperatorFailure::InvalidConfig(m)) => {
                Err(format!("`init` rejected the config: {m}"))
            }
            Err(e) => Err(format!("`init` failed: {e}")),
        }
    }

    /// Runs `golden.input` through the version, as one epoch, and compares
    /// the output with `golden.expected` row by row.
    pub fn golden(
        &self,
        operator: &LoadedOperator,
        setup: &Setup,
        golden: &Golden,
    ) -> Result<GoldenPassed, String> {
        let expected = parse_rows(&golden.expected)
            .map_err(|e| format!("the golden output is not JSON lines: {e}"))?;
        let sampled = self.sample(
            operator,
            setup,
            &golden.input,
            "golden input",
            weir_core::outputs::DEFAULT,
        )?;
        compare(&expected, &sampled.rows)?;
        Ok(GoldenPassed {
            rows_in: sampled.rows_in,
            rows_out: sampled.rows.len() as u64,
        })
    }

    /// Runs JSON-lines `input` (in the source schema) through the version
    /// as one epoch; the rows of operator output `output`.
    pub fn sample(
        &self,
        operator: &LoadedOperator,
        setup: &Setup,
        input: &[u8],
        what: &str,
        output: &str,
    ) -> Result<Sampled, String> {
        let decoder = JsonDecoder::new(
            self.input_schema.clone(),
            self.batch_rows,
            crate::config::MalformedPolicy::Fail,
        );
        let decoded = decoder
            .decode_lines(input, what)
            .map_err(|e| format!("the {what} does not fit the source schema: {e:#}"))?;
        let ran = self
            .run(operator, setup, &decoded.batches)
            .map_err(|e| format!("on the {what}, the operator {e}"))?;
        let output = weir_core::outputs::rows_of(&ran, output)
            .map_err(|e| format!("reading the output: {e:#}"))?;
        let rows = super::shadow::rows_as_json(&output)
            .map_err(|e| format!("reading the output: {e:#}"))?;
        let columns = output.first().map_or_else(Vec::new, |b| {
            b.schema()
                .fields()
                .iter()
                .map(|f| f.name().clone())
                .collect()
        });
        Ok(Sampled {
            rows_in: decoded.batches.iter().map(|b| b.num_rows() as u64).sum(),
            columns,
            rows,
        })
    }

    fn run(
        &self,
        operator: &LoadedOperator,
        setup: &Setup,
        batches: &[RecordBatch],
    ) -> Result<Vec<RecordBatch>, String> {
        self.runner
            .run(
                operator,
                &setup.config_json,
                EpochAt::OUTSIDE,
                batches,
                self.env(setup),
            )
            .map(|ran| ran.batches)
            .map_err(|e| e.to_string())
    }
}

/// What a sample run produced.
#[derive(Debug, Clone)]
pub struct Sampled {
    /// Input rows.
    pub rows_in: u64,
    /// The output's columns in the operator's order (a JSON object's keys
    /// are sorted; printing follows this instead).
    pub columns: Vec<String>,
    /// Output rows.
    pub rows: Vec<Map<String, Value>>,
}

/// Names the commonest wrong uploads before the compiler does: not Wasm at
/// all, or a core module where a component is needed.
fn check_header(wasm: &[u8]) -> Result<(), String> {
    const MAGIC: &[u8] = b"\0asm";
    if wasm.len() < 8 || &wasm[..4] != MAGIC {
        let start: String = wasm.iter().take(8).map(|b| format!("{b:02x}")).collect();
        return Err(format!(
            "the upload is not WebAssembly ({} bytes, starting {start}); upload the .wasm \
             component the build produced",
            wasm.len()
        ));
    }
    // Bytes 4..8: version and layer; a core module is 01 00 00 00.
    if wasm[4..8] == [1, 0, 0, 0] {
        return Err(
            "the upload is a core WebAssembly module, not a component: build for \
                    `wasm32-wasip2` (or wrap it with `wasm-tools component new`)"
                .into(),
        );
    }
    Ok(())
}

/// Rows of a JSON-lines text.
pub fn parse_rows(text: &[u8]) -> Result<Vec<Map<String, Value>>, String> {
    let mut rows = Vec::new();
    for (i, line) in text.split(|&b| b == b'\n').enumerate() {
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let row = serde_json::from_slice::<Map<String, Value>>(line)
            .map_err(|e| format!("line {}: {e}", i + 1))?;
        rows.push(row);
    }
    Ok(rows)
}

/// Checks `actual` against `expected` row by row; the error names the
/// first difference.
pub fn compare(
    expected: &[Map<String, Value>],
    actual: &[Map<String, Value>],
) -> Result<(), String> {
    let row_text = |r: &Map<String, Value>| Value::Object(r.clone()).to_string();
    for (i, (e, a)) in expected.iter().zip(actual).enumerate() {
        let differs = e
            .keys()
            .chain(a.keys())
            .any(|k| !super::shadow::same_value(e.get(k), a.get(k)));
        if differs {
            return Err(format!(
                "golden output differs at row {}: expected {}, got {}",
                i + 1,
                row_text(e),
                row_text(a)
            ));
        }
    }
    if expected.len() != actual.len() {
        let (more, which) = if actual.len() > expected.len() {
            (&actual[expected.len()], "an extra row")
        } else {
            (&expected[actual.len()], "a missing row")
        };
        return Err(format!(
            "golden output has {} rows, the version emitted {}; first is {which}: {}",
            expected.len(),
            actual.len(),
            row_text(more)
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn golden_comparison_names_the_first_difference() {
        let e = parse_rows(b"{\"id\":\"a\",\"score\":1.0}\n{\"id\":\"b\",\"score\":2}\n").unwrap();
        let same =
            parse_rows(b"{\"score\":1.0,\"id\":\"a\"}\n\n{\"id\":\"b\",\"score\":2.0}").unwrap();
        assert!(compare(&e, &same).is_ok());
        let changed =
            parse_rows(b"{\"id\":\"a\",\"score\":1.0}\n{\"id\":\"b\",\"score\":3}").unwrap();
        let err = compare(&e, &changed).unwrap_err();
        assert!(
            err.contains("row 2") && err.contains("\"score\":3"),
            "{err}"
        );
        let short = parse_rows(b"{\"id\":\"a\",\"score\":1.0}").unwrap();
        let err = compare(&e, &short).unwrap_err();
        assert!(
            err.contains("a missing row") && err.contains("\"b\""),
            "{err}"
        );
        assert!(parse_rows(b"{oops").unwrap_err().contains("line 1"));
    }
}
