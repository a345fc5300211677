//! The admin API's upload form (`POST …/versions`, multipart/form-data):
//! which fields it has and what each must hold. The server reads the
//! multipart body field by field into [`FormParts`]; this crate has no
//! HTTP in it so that the parsing can be fuzzed together with the
//! multipart reader (`tests/fuzz/fuzz_targets/upload_form.rs`).

/// The form's fields, as the error for an unknown one lists them.
pub const FIELDS: &str = "component, config, label, golden_input, golden_output, artifact:NAME";

/// The fields read so far.
#[derive(Debug, Default)]
pub struct FormParts {
    component: Option<(Vec<u8>, Option<String>)>,
    config: Option<Vec<u8>>,
    label: Option<Vec<u8>>,
    golden_input: Option<Vec<u8>>,
    golden_output: Option<Vec<u8>>,
    artifacts: std::collections::BTreeMap<String, Vec<u8>>,
}

/// A complete upload form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UploadForm {
    /// The component's bytes.
    pub component: Vec<u8>,
    /// The component's file name, as the client sent it.
    pub file_name: Option<String>,
    /// The operator config (JSON text); `None` keeps the active version's.
    pub config_json: Option<String>,
    /// A label for `weir versions`.
    pub label: Option<String>,
    /// Golden input and expected output (JSON lines), both or neither.
    pub golden: Option<(Vec<u8>, Vec<u8>)>,
    /// Artifacts (`artifact:NAME` fields) by name.
    pub artifacts: std::collections::BTreeMap<String, Vec<u8>>,
}

impl FormParts {
    /// Takes field `name`; an unknown field is refused (the message says
    /// which ones exist). A repeated field replaces the earlier one.
    pub fn set(
        &mut self,
        name: &str,
        bytes: Vec<u8>,
        file_name: Option<String>,
    ) -> Result<(), String> {
        match name {
            "component" => self.component = Some((bytes, file_name)),
            "config" => self.config = Some(bytes),
            "label" => self.label = Some(bytes),
            "golden_input" => self.golden_input = Some(bytes),
            "golden_output" => self.golden_output = Some(bytes),
            other if other.starts_with("artifact:") => {
                let artifact = &other["artifact:".len()..];
                weir_core::artifacts::check_name(artifact).map_err(|e| format!("{e:#}"))?;
                self.artifacts.insert(artifact.to_string(), bytes);
            }
            other => return Err(format!("unknown form field `{other}`; expected {FIELDS}")),
        }
        Ok(())
    }

    /// The form, once every field was read: `component` is required, text
    /// fields must be UTF-8, golden files come in pairs.
    pub fn finish(self) -> Result<UploadForm, String> {
        let (component, file_name) = self
            .component
            .ok_or("the upload has no `component` field (the .wasm file)")?;
        let text = |b: Vec<u8>, what: &str| {
            String::from_utf8(b).map_err(|_| format!("`{what}` is not UTF-8"))
        };
        let golden = match (self.golden_input, self.golden_output) {
            (Some(input), Some(expected)) => Some((input, expected)),
            (None, None) => None,
            _ => return Err("golden_input and golden_output go together".into()),
        };
        Ok(UploadForm {
            component,
            file_name,
            config_json: self.config.map(|c| text(c, "config")).transpose()?,
            label: self.label.map(|l| text(l, "label")).transpose()?,
            golden,
            artifacts: self.artifacts,
        })
    }
}
