//! Secrets in configuration: a password or key is named in the pipeline
//! file by where it lives (`{ env = "VAR" }` or `{ file = "/path" }`),
//! never written there in clear, and read only when a connection is made.
//! What is read is a [`Secret`], which prints as `***`, so that a log line,
//! an error or a `{:?}` cannot carry it.

use anyhow::{bail, Context, Result};
use serde::de::{self, MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize};
use std::fmt;
use std::path::PathBuf;

/// Where a secret is read from. Deserializes from `{ env = "VAR" }` or
/// `{ file = "/path" }`; a plain string is refused without repeating it,
/// since it would be the secret itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SecretSource {
    /// An environment variable of the `weir` process.
    Env(String),
    /// A file (a mounted Kubernetes or Docker secret); one trailing newline
    /// is not part of the secret.
    File(PathBuf),
}

impl SecretSource {
    /// Reads the secret now. The error names the variable or the file,
    /// never any part of the value.
    pub fn read(&self) -> Result<Secret> {
        let value = match self {
            SecretSource::Env(var) => match std::env::var(var) {
                Ok(v) => v,
                Err(std::env::VarError::NotPresent) => {
                    bail!("the environment variable {var} is not set")
                }
                Err(std::env::VarError::NotUnicode(_)) => {
                    bail!("the environment variable {var} is not UTF-8")
                }
            },
            SecretSource::File(path) => {
                let mut v = std::fs::read_to_string(path)
                    .with_context(|| format!("reading the secret file {}", path.display()))?;
                if v.ends_with('\n') {
                    v.pop();
                    if v.ends_with('\r') {
                        v.pop();
                    }
                }
                v
            }
        };
        if value.is_empty() {
            bail!("{self} is empty");
        }
        Ok(Secret(value))
    }

    /// The file, for a pipeline's relative paths to be resolved against
    /// the pipeline file's directory.
    pub fn path_mut(&mut self) -> Option<&mut PathBuf> {
        match self {
            SecretSource::Env(_) => None,
            SecretSource::File(path) => Some(path),
        }
    }
}

impl fmt::Display for SecretSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SecretSource::Env(var) => write!(f, "the environment variable {var}"),
            SecretSource::File(path) => write!(f, "the secret file {}", path.display()),
        }
    }
}

impl<'de> Deserialize<'de> for SecretSource {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(SecretSourceVisitor)
    }
}

/// The message for a secret written in clear, without the secret.
const IN_CLEAR: &str = "a secret is not written in the pipeline file: name where it is read \
                        from, `{ env = \"VARIABLE\" }` or `{ file = \"/path/to/file\" }`";

struct SecretSourceVisitor;

impl<'de> Visitor<'de> for SecretSourceVisitor {
    type Value = SecretSource;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("`{ env = \"VARIABLE\" }` or `{ file = \"/path/to/file\" }`")
    }

    fn visit_str<E: de::Error>(self, _: &str) -> Result<SecretSource, E> {
        Err(E::custom(IN_CLEAR))
    }

    // Any other plain value is refused the same way: serde's own message
    // would repeat it.
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<SecretSource, E> {
        Err(E::custom(IN_CLEAR))
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<SecretSource, E> {
        Err(E::custom(IN_CLEAR))
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<SecretSource, E> {
        Err(E::custom(IN_CLEAR))
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<SecretSource, E> {
        Err(E::custom(IN_CLEAR))
    }

    fn visit_bytes<E: de::Error>(self, _: &[u8]) -> Result<SecretSource, E> {
        Err(E::custom(IN_CLEAR))
    }

    fn visit_seq<A: de::SeqAccess<'de>>(self, _: A) -> Result<SecretSource, A::Error> {
        Err(de::Error::custom(IN_CLEAR))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<SecretSource, A::Error> {
        let mut found = None;
        while let Some(key) = map.next_key::<String>()? {
            let source = match key.as_str() {
                "env" => SecretSource::Env(map.next_value()?),
                "file" => SecretSource::File(map.next_value()?),
                other => {
                    return Err(de::Error::custom(format!(
                        "unknown key `{other}` in a secret; expected `env` or `file`"
                    )))
                }
            };
            if found.replace(source).is_some() {
                return Err(de::Error::custom(
                    "a secret names one place to read it from: `env` or `file`, not both",
                ));
            }
        }
        match found {
            Some(SecretSource::Env(var)) if var.trim().is_empty() => {
                Err(de::Error::custom("a secret's `env` must name a variable"))
            }
            Some(source) => Ok(source),
            None => Err(de::Error::custom(
                "a secret needs `env = \"VARIABLE\"` or `file = \"/path/to/file\"`",
            )),
        }
    }
}

/// A secret read from its [`SecretSource`]. Formats as `***`; the value is
/// reached only through [`Secret::expose`], where it is handed to a client
/// library.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// The value, for the one call that passes it to a client library.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Deserialize)]
    struct Holder {
        password: SecretSource,
    }

    fn parse(json: &str) -> std::result::Result<SecretSource, String> {
        serde_json::from_str::<Holder>(json)
            .map(|h| h.password)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn a_secret_in_clear_is_refused_without_being_repeated() {
        let err = parse(r#"{ "password": "hunter2-distinctive" }"#).unwrap_err();
        assert!(err.contains("not written in the pipeline file"), "{err}");
        assert!(!err.contains("hunter2"), "{err}");
        for other in [
            "918273645",
            "91827.3645",
            "true",
            r#"["hunter2-distinctive"]"#,
        ] {
            let err = parse(&format!(r#"{{ "password": {other} }}"#)).unwrap_err();
            assert!(err.contains("not written in the pipeline file"), "{err}");
            assert!(!err.contains("91827") && !err.contains("hunter2"), "{err}");
        }
    }

    #[test]
    fn a_secret_names_exactly_one_place() {
        assert_eq!(
            parse(r#"{ "password": { "env": "PW" } }"#).unwrap(),
            SecretSource::Env("PW".into())
        );
        assert_eq!(
            parse(r#"{ "password": { "file": "/run/pw" } }"#).unwrap(),
            SecretSource::File("/run/pw".into())
        );
        let both = parse(r#"{ "password": { "env": "PW", "file": "/run/pw" } }"#).unwrap_err();
        assert!(both.contains("not both"), "{both}");
        let neither = parse(r#"{ "password": {} }"#).unwrap_err();
        assert!(neither.contains("needs"), "{neither}");
        let other = parse(r#"{ "password": { "vault": "x" } }"#).unwrap_err();
        assert!(other.contains("unknown key `vault`"), "{other}");
    }

    #[test]
    fn a_file_secret_loses_one_trailing_newline_and_prints_as_stars() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pw");
        std::fs::write(&path, "s3cret-value\n").unwrap();
        let secret = SecretSource::File(path).read().unwrap();
        assert_eq!(secret.expose(), "s3cret-value");
        assert_eq!(format!("{secret:?} {secret}"), "*** ***");
    }

    #[test]
    fn a_missing_or_empty_secret_names_its_place() {
        let err = SecretSource::Env("WEIR_TEST_NO_SUCH_VARIABLE".into())
            .read()
            .unwrap_err();
        assert!(format!("{err:#}").contains("WEIR_TEST_NO_SUCH_VARIABLE is not set"));
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("empty");
        std::fs::write(&path, "\n").unwrap();
        let err = SecretSource::File(path).read().unwrap_err();
        assert!(format!("{err:#}").contains("is empty"), "{err:#}");
    }
}
