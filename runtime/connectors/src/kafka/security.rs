//! TLS and SASL to the brokers, as typed keys of `[source]` and `[sink]`
//! (`[source.tls]`, `[source.sasl]`) rather than raw librdkafka options, so
//! that a pipeline file states what it needs in words the docs explain, a
//! mistake is refused before a connection is tried, and a password is
//! named by where it is read from, never written in the file.

use anyhow::{bail, Context, Result};
use rdkafka::ClientConfig;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
use weir_core::secret::{Secret, SecretSource};

/// `[source.tls]` / `[sink.tls]`: TLS to every broker. An empty table
/// means TLS with the system's certificate authorities.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KafkaTls {
    /// PEM file of the authorities that sign the brokers' certificates;
    /// default: the system's (`/etc/ssl/certs`).
    #[serde(default)]
    pub ca_file: Option<PathBuf>,
    /// The client's certificate (PEM), for brokers that require mutual TLS.
    #[serde(default)]
    pub cert_file: Option<PathBuf>,
    /// The client certificate's private key (PEM).
    #[serde(default)]
    pub key_file: Option<PathBuf>,
    /// The private key's password, if it is encrypted.
    #[serde(default)]
    pub key_password: Option<SecretSource>,
    /// Check that the broker's certificate names the host connected to
    /// (default `true`; turning it off lets anyone with a certificate from
    /// the same authority pose as the broker).
    #[serde(default = "yes")]
    pub verify_hostname: bool,
}

fn yes() -> bool {
    true
}

/// `[source.sasl]` / `[sink.sasl]`: who the client is to the brokers.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KafkaSasl {
    /// `SCRAM-SHA-512`, `SCRAM-SHA-256` or `PLAIN`.
    pub mechanism: SaslMechanism,
    /// The user name.
    pub username: String,
    /// The password: `{ env = "VARIABLE" }` or `{ file = "/path" }`.
    pub password: SecretSource,
}

/// The SASL mechanisms Weir configures (librdkafka's names).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum SaslMechanism {
    /// The password itself goes to the broker: only over TLS.
    #[serde(rename = "PLAIN")]
    Plain,
    /// Salted challenge-response (RFC 5802, 7677): no password on the wire.
    #[serde(rename = "SCRAM-SHA-256")]
    ScramSha256,
    /// As SCRAM-SHA-256, with SHA-512.
    #[serde(rename = "SCRAM-SHA-512")]
    ScramSha512,
}

impl SaslMechanism {
    fn librdkafka(self) -> &'static str {
        match self {
            SaslMechanism::Plain => "PLAIN",
            SaslMechanism::ScramSha256 => "SCRAM-SHA-256",
            SaslMechanism::ScramSha512 => "SCRAM-SHA-512",
        }
    }
}

/// The librdkafka options that carry a secret, refused in `options`, with
/// the typed key to use instead.
const SECRET_OPTIONS: &[(&str, &str)] = &[
    ("sasl.password", "sasl.password = { env = \"…\" }"),
    ("ssl.key.password", "tls.key_password = { env = \"…\" }"),
    ("ssl.key.pem", "tls.key_file"),
    ("ssl.keystore.password", "tls.key_file and tls.key_password"),
    (
        "sasl.oauthbearer.client.secret",
        "sasl (OAUTHBEARER is not offered)",
    ),
    (
        "sasl.oauthbearer.config",
        "sasl (OAUTHBEARER is not offered)",
    ),
];

/// Whether a librdkafka option is about TLS or SASL: refused in `options`
/// beside `tls`/`sasl` (the options are applied last, so one of them could
/// otherwise turn certificate checks off under a `[…tls]` section).
fn is_security_option(key: &str) -> bool {
    key == "security.protocol"
        || key.starts_with("ssl.")
        || key.starts_with("ssl_")
        || key.starts_with("sasl.")
        || key.starts_with("enable.ssl.")
        || key.starts_with("enable.sasl.")
}

/// The security of one `[source]` or `[sink]`: its `tls` and `sasl` keys.
#[derive(Debug, Clone, Copy)]
pub struct KafkaSecurity<'a> {
    /// `source` or `sink`, for messages.
    pub section: &'a str,
    /// `[…tls]`.
    pub tls: Option<&'a KafkaTls>,
    /// `[…sasl]`.
    pub sasl: Option<&'a KafkaSasl>,
    /// `…options`, the raw librdkafka settings.
    pub options: &'a BTreeMap<String, String>,
}

impl KafkaSecurity<'_> {
    /// Refuses what cannot work or would leak, before any connection.
    pub fn validate(&self) -> Result<()> {
        let section = self.section;
        for (key, instead) in SECRET_OPTIONS {
            if self.options.contains_key(*key) {
                bail!(
                    "`{section}.options.\"{key}\"` would put a secret in the pipeline file; \
                     use `{section}.{instead}`"
                );
            }
        }
        if self.tls.is_some() || self.sasl.is_some() {
            if let Some(key) = self.options.keys().find(|k| is_security_option(k)) {
                bail!(
                    "`{section}.options.\"{key}\"` and `{section}.tls`/`{section}.sasl` both \
                     set the brokers' security; keep the typed keys"
                );
            }
        }
        if let Some(tls) = self.tls {
            if tls.cert_file.is_some() != tls.key_file.is_some() {
                bail!("`{section}.tls.cert_file` and `{section}.tls.key_file` go together");
            }
            if tls.key_password.is_some() && tls.key_file.is_none() {
                bail!("`{section}.tls.key_password` without `{section}.tls.key_file`");
            }
        }
        if let Some(sasl) = self.sasl {
            if sasl.username.trim().is_empty() {
                bail!("`{section}.sasl.username` must not be empty");
            }
            if sasl.mechanism == SaslMechanism::Plain && self.tls.is_none() {
                bail!(
                    "`{section}.sasl.mechanism = \"PLAIN\"` sends the password as it is; \
                     add `[{section}.tls]`, or use SCRAM-SHA-512"
                );
            }
        }
        Ok(())
    }

    /// Reads the secrets and makes the librdkafka settings.
    pub fn resolve(&self) -> Result<ClientSecurity> {
        let section = self.section;
        let mut plain = Vec::new();
        let mut secret = Vec::new();
        let protocol = match (self.tls.is_some(), self.sasl.is_some()) {
            (false, false) => return Ok(ClientSecurity::default()),
            (true, false) => "ssl",
            (true, true) => "sasl_ssl",
            (false, true) => "sasl_plaintext",
        };
        plain.push(("security.protocol", protocol.to_string()));
        if let Some(tls) = self.tls {
            for (key, file) in [
                ("ca_file", &tls.ca_file),
                ("cert_file", &tls.cert_file),
                ("key_file", &tls.key_file),
            ] {
                if let Some(path) = file {
                    std::fs::File::open(path)
                        .with_context(|| format!("`{section}.tls.{key}` = {}", path.display()))?;
                }
            }
            let path = |p: &PathBuf| p.display().to_string();
            if let Some(ca) = &tls.ca_file {
                plain.push(("ssl.ca.location", path(ca)));
            }
            if let (Some(cert), Some(key)) = (&tls.cert_file, &tls.key_file) {
                plain.push(("ssl.certificate.location", path(cert)));
                plain.push(("ssl.key.location", path(key)));
            }
            if let Some(pw) = &tls.key_password {
                let value = pw
                    .read()
                    .with_context(|| format!("`{section}.tls.key_password`"))?;
                secret.push(("ssl.key.password", value));
            }
            let identification = if tls.verify_hostname { "https" } else { "none" };
            plain.push((
                "ssl.endpoint.identification.algorithm",
                identification.into(),
            ));
            plain.push(("enable.ssl.certificate.verification", "true".into()));
        }
        if let Some(sasl) = self.sasl {
            plain.push(("sasl.mechanism", sasl.mechanism.librdkafka().into()));
            plain.push(("sasl.username", sasl.username.clone()));
            let value = sasl
                .password
                .read()
                .with_context(|| format!("`{section}.sasl.password`"))?;
            secret.push(("sasl.password", value));
        }
        Ok(ClientSecurity { plain, secret })
    }
}

/// Resolved security settings, ready for every client Weir opens to the
/// brokers. Its `Debug` names the secret settings without their values.
#[derive(Clone, Default)]
pub struct ClientSecurity {
    plain: Vec<(&'static str, String)>,
    secret: Vec<(&'static str, Secret)>,
}

impl ClientSecurity {
    /// Sets everything on `c`.
    pub fn apply(&self, c: &mut ClientConfig) {
        for (k, v) in &self.plain {
            c.set(*k, v);
        }
        for (k, v) in &self.secret {
            c.set(*k, v.expose());
        }
    }
}

impl fmt::Debug for ClientSecurity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut map = f.debug_map();
        for (k, v) in &self.plain {
            map.entry(k, v);
        }
        for (k, _) in &self.secret {
            map.entry(k, &"***");
        }
        map.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn security<'a>(
        tls: Option<&'a KafkaTls>,
        sasl: Option<&'a KafkaSasl>,
        options: &'a BTreeMap<String, String>,
    ) -> KafkaSecurity<'a> {
        KafkaSecurity {
            section: "source",
            tls,
            sasl,
            options,
        }
    }

    #[test]
    fn a_secret_in_the_raw_options_is_refused() {
        let options = BTreeMap::from([("sasl.password".to_string(), "hunter2".to_string())]);
        let err = security(None, None, &options).validate().unwrap_err();
        let text = format!("{err:#}");
        assert!(text.contains("source.sasl.password"), "{text}");
        assert!(!text.contains("hunter2"), "{text}");
    }

    #[test]
    fn plain_without_tls_is_refused_and_scram_gives_sasl_plaintext() {
        let options = BTreeMap::new();
        std::env::set_var("WEIR_TEST_KAFKA_PW", "pw-value");
        let mut sasl = KafkaSasl {
            mechanism: SaslMechanism::Plain,
            username: "weir".into(),
            password: SecretSource::Env("WEIR_TEST_KAFKA_PW".into()),
        };
        let err = security(None, Some(&sasl), &options)
            .validate()
            .unwrap_err();
        assert!(err.to_string().contains("PLAIN"), "{err}");
        sasl.mechanism = SaslMechanism::ScramSha512;
        let resolved = security(None, Some(&sasl), &options).resolve().unwrap();
        let mut c = ClientConfig::new();
        resolved.apply(&mut c);
        assert_eq!(c.get("security.protocol"), Some("sasl_plaintext"));
        let debug = format!("{resolved:?}");
        assert!(debug.contains("sasl.password") && !debug.contains("pw-value"));
    }

    #[test]
    fn tls_keys_become_librdkafka_settings() {
        let options = BTreeMap::new();
        let dir = tempfile::tempdir().unwrap();
        let ca = dir.path().join("ca.pem");
        let mut tls = KafkaTls {
            ca_file: Some(ca.clone()),
            verify_hostname: true,
            ..KafkaTls::default()
        };
        let err = security(Some(&tls), None, &options).resolve().unwrap_err();
        assert!(
            format!("{err:#}").contains("`source.tls.ca_file`"),
            "{err:#}"
        );
        std::fs::write(&ca, "").unwrap();
        let resolved = security(Some(&tls), None, &options).resolve().unwrap();
        let mut c = ClientConfig::new();
        resolved.apply(&mut c);
        assert_eq!(c.get("security.protocol"), Some("ssl"));
        assert_eq!(c.get("ssl.ca.location"), ca.to_str());
        tls.verify_hostname = false;
        let resolved = security(Some(&tls), None, &options).resolve().unwrap();
        let mut c = ClientConfig::new();
        resolved.apply(&mut c);
        assert_eq!(c.get("ssl.endpoint.identification.algorithm"), Some("none"));
    }

    #[test]
    fn a_typed_key_and_its_raw_option_together_are_refused() {
        let options = BTreeMap::from([("security.protocol".to_string(), "ssl".to_string())]);
        let tls = KafkaTls::default();
        let err = security(Some(&tls), None, &options).validate().unwrap_err();
        assert!(err.to_string().contains("keep the typed keys"), "{err}");
        // Options are applied last: none may turn a check off under `tls`.
        let options = BTreeMap::from([(
            "enable.ssl.certificate.verification".to_string(),
            "false".to_string(),
        )]);
        let err = security(Some(&tls), None, &options).validate().unwrap_err();
        assert!(err.to_string().contains("keep the typed keys"), "{err}");
    }
}
