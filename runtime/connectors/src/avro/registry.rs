//! A client of a Confluent-compatible schema registry: writer schemas by
//! the id a record's framing names (`0x00`, then the id as 4 big-endian
//! bytes), for the sources; and the id of the schema a sink writes with,
//! registered under its subject. Both cached, and recorded in the
//! checkpoint so that a replay decodes, and frames, with what its first
//! run used even when the registry is gone.
//!
//! A registry id names one schema forever, so what is recorded is the id's
//! schema text, under `<checkpoint>/schemas/`: the text by its digest
//! (`sha256-….avsc`) and the id's entry (`ids/<id>`) naming that digest —
//! or, for an id the registry did not have, that and why. A sink's
//! registration is recorded as `registered/<digest>.json` (the subject,
//! the schema's digest and its id). Each is written and synced before a
//! record is decided or sent with it, so no output the epoch commits rests
//! on something the checkpoint does not hold.

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use weir_core::digest::Digest;
use weir_core::secret::{Secret, SecretSource};

/// `[source.schema_registry]`: where the writer schemas are.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RegistryConfig {
    /// The registry's base URL, `http://` or `https://`.
    pub url: String,
    /// HTTP basic authentication's user, if the registry needs one.
    #[serde(default)]
    pub username: Option<String>,
    /// Its password: `{ env = "VAR" }` or `{ file = "/path" }`.
    #[serde(default)]
    pub password: Option<SecretSource>,
    /// A PEM bundle of the CAs an `https://` registry's certificate is
    /// checked against (default: the system's).
    #[serde(default)]
    pub ca_file: Option<PathBuf>,
}

impl RegistryConfig {
    /// The files it names (`ca_file`, a password `file`), to resolve
    /// against the pipeline file's directory like every path in it.
    pub fn paths_mut(&mut self) -> Vec<&mut PathBuf> {
        let mut paths: Vec<&mut PathBuf> = self.ca_file.as_mut().into_iter().collect();
        paths.extend(self.password.as_mut().and_then(SecretSource::path_mut));
        paths
    }

    /// Refuses a URL that is neither `http://` nor `https://`, a password
    /// without a user (or the other way round), and a password sent in the
    /// clear (`http://`) anywhere but to this machine.
    pub fn validate(&self) -> Result<()> {
        if !(self.url.starts_with("http://") || self.url.starts_with("https://")) {
            bail!(
                "`schema_registry.url` must start with http:// or https://, not `{}`",
                self.url
            );
        }
        if self.username.is_some() != self.password.is_some() {
            bail!("`schema_registry.username` and `password` go together");
        }
        if self.ca_file.is_some() && !self.url.starts_with("https://") {
            bail!("`schema_registry.ca_file` is for an https:// registry");
        }
        let url = reqwest::Url::parse(&self.url)
            .with_context(|| format!("`schema_registry.url` `{}` is not a URL", self.url))?;
        if self.password.is_some() && url.scheme() == "http" && !is_loopback(&url) {
            bail!(
                "`schema_registry`: a password over http:// would cross the network in the \
                 clear; use the registry's https:// URL (with `ca_file` for a private CA)"
            );
        }
        Ok(())
    }
}

/// Whether `url` names this machine (`localhost`, `127.0.0.0/8`, `::1`).
fn is_loopback(url: &reqwest::Url) -> bool {
    let host = url.host_str().unwrap_or_default();
    host == "localhost"
        || host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// A response's body, refused past [`MAX_RESPONSE`] bytes; `what` names
/// the request in errors ("schema id 7").
fn read_body(response: reqwest::blocking::Response, what: &str) -> Result<Vec<u8>> {
    use std::io::Read as _;
    let mut body = Vec::new();
    response
        .take(MAX_RESPONSE + 1)
        .read_to_end(&mut body)
        .with_context(|| format!("reading the schema registry's answer for {what}"))?;
    if body.len() as u64 > MAX_RESPONSE {
        bail!(
            "the schema registry's answer for {what} is over {} MiB: not a schema",
            MAX_RESPONSE >> 20
        );
    }
    Ok(body)
}

/// A recorded file's bytes; `None` if nothing was recorded there.
fn read_if_present(path: &Path) -> Result<Option<Vec<u8>>> {
    match std::fs::read(path) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
    }
}

/// What the registry says of an id.
#[derive(Debug, Clone)]
pub enum Lookup {
    /// The writer schema's JSON.
    Found(Arc<str>),
    /// The registry has no schema of this id (or one that is not Avro):
    /// the record is a dead letter, with this reason.
    Unknown(String),
}

/// A client of one registry, with the schemas it has seen.
pub struct Registry {
    url: String,
    client: reqwest::blocking::Client,
    auth: Option<(String, Secret)>,
    recorded: PathBuf,
    cache: HashMap<u32, Lookup>,
}

/// How a recorded id the registry did not have begins (then the reason).
const UNKNOWN: &str = "unknown: ";

/// The Confluent REST API's error code for an id it has no schema of.
const SCHEMA_NOT_FOUND: u32 = 40403;

/// The most a registry response may hold: far above any schema's JSON, so
/// a registry (or whatever answers at its URL) cannot make the pipeline
/// buffer without bound.
const MAX_RESPONSE: u64 = 8 << 20;

/// How long one request to the registry may take.
const TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Deserialize)]
struct SchemaById {
    schema: String,
    #[serde(default, rename = "schemaType")]
    schema_type: Option<String>,
}

impl Registry {
    /// A client of `config`'s registry recording into `checkpoint`.
    pub fn new(config: &RegistryConfig, checkpoint: &Path) -> Result<Self> {
        config.validate()?;
        let mut client = reqwest::blocking::Client::builder()
            .timeout(TIMEOUT)
            .connect_timeout(TIMEOUT);
        if let Some(ca) = &config.ca_file {
            let pem = std::fs::read(ca)
                .with_context(|| format!("reading `schema_registry.ca_file` {}", ca.display()))?;
            for cert in reqwest::Certificate::from_pem_bundle(&pem)
                .with_context(|| format!("{} is not a PEM bundle", ca.display()))?
            {
                client = client.add_root_certificate(cert);
            }
            client = client.tls_built_in_root_certs(false);
        }
        let auth = match (&config.username, &config.password) {
            (Some(user), Some(password)) => Some((
                user.clone(),
                password.read().context("`schema_registry.password`")?,
            )),
            _ => None,
        };
        Ok(Registry {
            url: config.url.trim_end_matches('/').to_string(),
            client: client
                .build()
                .context("making the schema registry's client")?,
            auth,
            recorded: checkpoint.join("schemas"),
            cache: HashMap::new(),
        })
    }

    /// The writer schema of `id`: from the cache, else as the checkpoint
    /// recorded it, else from the registry (then recorded). An error is the
    /// registry's or the disk's fault (unreachable, a server error, a write
    /// that failed), never the record's: the epoch fails and is retried.
    pub fn schema(&mut self, id: u32) -> Result<Lookup> {
        if let Some(found) = self.cache.get(&id) {
            return Ok(found.clone());
        }
        let lookup = match self.recorded(id)? {
            Some(lookup) => lookup,
            None => {
                let lookup = self.fetch(id)?;
                self.record(id, &lookup)?;
                lookup
            }
        };
        self.cache.insert(id, lookup.clone());
        Ok(lookup)
    }

    fn fetch(&self, id: u32) -> Result<Lookup> {
        let what = format!("schema id {id}");
        let url = format!("{}/schemas/ids/{id}", self.url);
        let response = self
            .authorized(self.client.get(&url))
            .send()
            .with_context(|| format!("schema registry {}: asking for schema id {id}", self.url))?;
        let status = response.status();
        if status == reqwest::StatusCode::NOT_FOUND {
            // Only the registry's own "schema not found" is the record's
            // answer; a 404 from elsewhere (a wrong `url`) is the setup's.
            let body: serde_json::Value =
                serde_json::from_slice(&read_body(response, &what)?).unwrap_or_default();
            if body["error_code"] == SCHEMA_NOT_FOUND {
                return Ok(Lookup::Unknown(format!(
                    "schema id {id} is not in the schema registry"
                )));
            }
            bail!(
                "schema registry {}: asking for schema id {id} got 404 without the registry's \
                 \"schema not found\" (error code {SCHEMA_NOT_FOUND}): is `url` the registry's base URL?",
                self.url
            );
        }
        if !status.is_success() {
            bail!(
                "schema registry {}: asking for schema id {id} got {status}",
                self.url
            );
        }
        let body: SchemaById = serde_json::from_slice(&read_body(response, &what)?)
            .with_context(|| format!("schema registry {}: schema id {id}", self.url))?;
        match body.schema_type.as_deref() {
            None | Some("AVRO") => Ok(Lookup::Found(body.schema.into())),
            Some(other) => Ok(Lookup::Unknown(format!(
                "schema id {id} is a {other} schema, not Avro"
            ))),
        }
    }

    /// `request` with the configured credentials, if any.
    fn authorized(
        &self,
        request: reqwest::blocking::RequestBuilder,
    ) -> reqwest::blocking::RequestBuilder {
        match &self.auth {
            Some((user, password)) => request.basic_auth(user, Some(password.expose())),
            None => request,
        }
    }

    fn id_entry(&self, id: u32) -> PathBuf {
        self.recorded.join("ids").join(id.to_string())
    }

    /// What an earlier run recorded for `id`: its schema (checked against
    /// its digest), or that the registry did not have it.
    fn recorded(&self, id: u32) -> Result<Option<Lookup>> {
        let entry = self.id_entry(id);
        let Some(recorded) = read_if_present(&entry)? else {
            return Ok(None);
        };
        let recorded = String::from_utf8(recorded)
            .with_context(|| format!("{} is not text", entry.display()))?;
        if let Some(reason) = recorded.strip_prefix(UNKNOWN) {
            return Ok(Some(Lookup::Unknown(reason.to_string())));
        }
        let digest = recorded.trim();
        let path = self
            .recorded
            .join(format!("{}.avsc", digest.replace(':', "-")));
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("reading the recorded schema {}", path.display()))?;
        if Digest::of(text.as_bytes()).to_string() != digest {
            bail!(
                "the recorded schema {} does not match its digest {digest}",
                path.display()
            );
        }
        Ok(Some(Lookup::Found(text.into())))
    }

    /// Records what the registry said of `id`, durably: a replay must
    /// decide each record as the first run did, a refused id included.
    fn record(&self, id: u32, lookup: &Lookup) -> Result<()> {
        weir_core::fsutil::create_dir_durable(&self.recorded.join("ids"))?;
        let entry = self.id_entry(id);
        let content = match lookup {
            Lookup::Unknown(reason) => format!("{UNKNOWN}{reason}"),
            Lookup::Found(text) => {
                let digest = self.record_text(text, &format!("schema id {id}"))?;
                tracing::info!(id, %digest, registry = %self.url, "recorded a writer schema from the registry");
                digest
            }
        };
        weir_core::fsutil::write_atomic(&entry, content.as_bytes())
            .with_context(|| format!("recording schema id {id} in {}", entry.display()))
    }

    /// Writes a schema's text under its digest (`sha256-….avsc`); the
    /// digest.
    fn record_text(&self, text: &str, what: &str) -> Result<String> {
        weir_core::fsutil::create_dir_durable(&self.recorded)?;
        let digest = Digest::of(text.as_bytes()).to_string();
        let path = self
            .recorded
            .join(format!("{}.avsc", digest.replace(':', "-")));
        weir_core::fsutil::write_atomic(&path, text.as_bytes())
            .with_context(|| format!("recording {what} in {}", path.display()))?;
        Ok(digest)
    }
}

/// A sink's registration of one schema under one subject, as recorded.
#[derive(Debug, PartialEq, Eq, Serialize, Deserialize)]
struct Registration {
    subject: String,
    /// The digest of the schema's text (`sha256:…`).
    schema: String,
    id: u32,
}

/// The registry's answer to a registration.
#[derive(Deserialize)]
struct Registered {
    id: u32,
}

impl Registry {
    /// The id under which `subject` holds `schema` (Avro JSON), for a sink
    /// to frame its values with: as this checkpoint recorded it, else
    /// registered (`POST /subjects/{subject}/versions`, which answers a
    /// schema the subject already has with its id) and recorded, so that
    /// a replay frames its values as the first run did, registry or not.
    /// A registry that refuses the schema (incompatible with the subject's
    /// earlier versions, or invalid) is an error naming the subject and the
    /// registry's reason.
    pub fn register(&mut self, subject: &str, schema: &str) -> Result<u32> {
        let digest = Digest::of(schema.as_bytes()).to_string();
        let entry = self.registration_entry(subject, &digest);
        if let Some(id) = self.registered(&entry, subject, &digest)? {
            return Ok(id);
        }
        let id = self.post_schema(subject, schema)?;
        self.record_text(schema, &format!("the schema of subject `{subject}`"))?;
        let registration = Registration {
            subject: subject.to_string(),
            schema: digest.clone(),
            id,
        };
        let json = serde_json::to_vec_pretty(&registration)?;
        weir_core::fsutil::create_dir_durable(&self.recorded.join("registered"))?;
        weir_core::fsutil::write_atomic(&entry, &json)
            .with_context(|| format!("recording a registration in {}", entry.display()))?;
        tracing::info!(subject, id, %digest, registry = %self.url, "registered the output's Avro schema");
        Ok(id)
    }

    /// Where the registration of the schema of `digest` under `subject`
    /// is recorded: named by a digest of both, as a subject may hold any
    /// character.
    fn registration_entry(&self, subject: &str, digest: &str) -> PathBuf {
        let key = Digest::of(format!("{subject}\n{digest}").as_bytes()).to_string();
        self.recorded
            .join("registered")
            .join(format!("{}.json", key.replace(':', "-")))
    }

    /// The recorded id of a registration, if this checkpoint has one.
    fn registered(&self, entry: &Path, subject: &str, digest: &str) -> Result<Option<u32>> {
        let Some(text) = read_if_present(entry)? else {
            return Ok(None);
        };
        let recorded: Registration = serde_json::from_slice(&text)
            .with_context(|| format!("the recorded registration {}", entry.display()))?;
        if recorded.subject != subject || recorded.schema != digest {
            bail!(
                "the recorded registration {} is of subject `{}` and schema {}, not `{subject}` and {digest}",
                entry.display(),
                recorded.subject,
                recorded.schema
            );
        }
        Ok(Some(recorded.id))
    }

    /// `POST /subjects/{subject}/versions`: the schema's id.
    fn post_schema(&self, subject: &str, schema: &str) -> Result<u32> {
        let what = format!("registering subject `{subject}`");
        let mut url = reqwest::Url::parse(&self.url)
            .with_context(|| format!("`schema_registry.url` `{}`", self.url))?;
        url.path_segments_mut()
            .map_err(|()| {
                anyhow::anyhow!("`schema_registry.url` `{}` cannot take a path", self.url)
            })?
            .pop_if_empty()
            .extend(["subjects", subject, "versions"]);
        let response = self
            .authorized(self.client.post(url))
            .header(
                reqwest::header::CONTENT_TYPE,
                "application/vnd.schemaregistry.v1+json",
            )
            .body(serde_json::json!({ "schema": schema }).to_string())
            .send()
            .with_context(|| format!("schema registry {}: {what}", self.url))?;
        let status = response.status();
        let body = read_body(response, &what)?;
        if !status.is_success() {
            let answer: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
            let message = answer["message"].as_str().map_or_else(
                || String::from_utf8_lossy(&body).into_owned(),
                str::to_string,
            );
            let why = match status.as_u16() {
                409 => {
                    "refused the output's Avro schema as incompatible with the subject's \
                        earlier versions (change the output back, or the subject's compatibility)"
                }
                422 => "refused the output's Avro schema as invalid",
                401 | 403 => "refused the credentials (`schema_registry.username`, `password`)",
                _ => "failed",
            };
            bail!(
                "schema registry {}: {what} {why}: {status}: {message}",
                self.url
            );
        }
        let registered: Registered = serde_json::from_slice(&body).with_context(|| {
            format!("schema registry {}: {what}: the answer has no id", self.url)
        })?;
        Ok(registered.id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(url: &str) -> RegistryConfig {
        RegistryConfig {
            url: url.into(),
            username: Some("weir".into()),
            password: Some(SecretSource::Env("REGISTRY_PASSWORD".into())),
            ca_file: None,
        }
    }

    #[test]
    fn a_password_crosses_the_network_only_over_https() {
        let err = config("http://registry.example:8081")
            .validate()
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("in the clear") && err.contains("https://"),
            "{err}"
        );
        for ok in [
            "https://registry.example:8081",
            "http://127.0.0.1:8081",
            "http://localhost:8081/",
            "http://[::1]:8081",
        ] {
            config(ok).validate().unwrap();
        }
        let anonymous = RegistryConfig {
            username: None,
            password: None,
            ..config("http://registry.example:8081")
        };
        anonymous.validate().unwrap();
    }
}
