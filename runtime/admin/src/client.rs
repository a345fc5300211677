//! The client side of the admin API, for `weir deploy`, `weir versions`,
//! `weir rollback`, `weir promote`, `weir unshadow` and `weir status`.
//! Answers are read into the same types the server answers with
//! ([`Status`], [`Listed`], [`ProgressReport`], [`ShadowReport`]), so the
//! API's shape is defined once.

use anyhow::{bail, Context, Result};
use reqwest::blocking::{multipart, Client, RequestBuilder, Response};
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::Duration;
use weir_core::progress::ShadowReport;
use weir_engine::observe::ProgressReport;
use weir_engine::versions::{Listed, Status};

/// Where the admin API is and how to authenticate.
#[derive(Clone)]
pub struct Target {
    /// `http://host:port` or `https://host:port`
    url: String,
    pipeline: String,
    token: Option<String>,
    /// For `https://`: whom to trust, and the client certificate.
    tls: ClientTls,
    /// The HTTP client, made once (it reads the TLS files) and used for
    /// every call, the polls of [`Target::wait_for_epoch_on`] included.
    client: std::sync::OnceLock<Client>,
}

impl std::fmt::Debug for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Target")
            .field("url", &self.url)
            .field("pipeline", &self.pipeline)
            .field("token", &self.token.as_ref().map(|_| "***"))
            .field("tls", &self.tls)
            .finish()
    }
}

/// The TLS side of a client of an `https://` admin API.
#[derive(Debug, Clone, Default)]
pub struct ClientTls {
    /// Authorities to trust besides the system's (PEM), e.g. a private CA.
    pub ca_file: Option<PathBuf>,
    /// A client certificate (PEM) and its key, for an API that requires one.
    pub cert_file: Option<PathBuf>,
    pub key_file: Option<PathBuf>,
}

/// The caller a token belongs to, as `GET /v1/whoami` answers.
#[derive(Debug, Clone, serde::Deserialize)]
pub struct WhoAmI {
    pub name: String,
    pub scope: String,
}

/// What to upload with `weir deploy`.
#[derive(Debug, Clone, Default)]
pub struct DeployRequest {
    pub component: PathBuf,
    /// JSON or TOML file with the operator config; none keeps the active one's.
    pub config: Option<PathBuf>,
    pub label: Option<String>,
    pub golden: Option<(PathBuf, PathBuf)>,
    /// Artifacts (name, file) that replace the active version's of the
    /// same names.
    pub artifacts: Vec<(String, PathBuf)>,
    /// `stage`, `activate` or `shadow`.
    pub then: String,
    pub key: Option<String>,
}

impl Target {
    /// The pipeline `pipeline` at `url` (`http://` or `https://`), with
    /// `token` if the API needs one and `tls` for an `https://` one.
    pub fn new(url: String, pipeline: String, token: Option<String>, tls: ClientTls) -> Self {
        Target {
            url,
            pipeline,
            token,
            tls,
            client: std::sync::OnceLock::new(),
        }
    }

    fn client(&self) -> Result<Client> {
        if let Some(client) = self.client.get() {
            return Ok(client.clone());
        }
        let client = self.make_client()?;
        Ok(self.client.get_or_init(|| client).clone())
    }

    fn make_client(&self) -> Result<Client> {
        // Validation compiles the component; give it time.
        let mut builder = Client::builder().timeout(Duration::from_secs(300));
        if let Some(ca) = &self.tls.ca_file {
            let pem = read(ca)?;
            for cert in reqwest::Certificate::from_pem_bundle(&pem)
                .with_context(|| format!("{} holds no usable certificate", ca.display()))?
            {
                builder = builder.add_root_certificate(cert);
            }
        }
        match (&self.tls.cert_file, &self.tls.key_file) {
            (Some(cert), Some(key)) => {
                let mut pem = read(cert)?;
                pem.push(b'\n');
                pem.extend(read(key)?);
                let identity = reqwest::Identity::from_pem(&pem).with_context(|| {
                    format!(
                        "{} and {} are not a client certificate and its key",
                        cert.display(),
                        key.display()
                    )
                })?;
                builder = builder.identity(identity);
            }
            (None, None) => {}
            _ => bail!("a client certificate needs its key, and a key its certificate"),
        }
        builder
            .use_rustls_tls()
            .build()
            .context("creating the HTTP client")
    }

    /// `GET /v1/whoami`: the token's name and scope.
    pub fn whoami(&self) -> Result<WhoAmI> {
        let url = format!("{}/v1/whoami", self.url.trim_end_matches('/'));
        self.send(self.client()?.get(url))
    }

    fn url(&self, path: &str) -> String {
        format!(
            "{}/v1/pipelines/{}{path}",
            self.url.trim_end_matches('/'),
            self.pipeline
        )
    }

    fn send<T: DeserializeOwned>(&self, request: RequestBuilder) -> Result<T> {
        let request = match &self.token {
            Some(t) => request.bearer_auth(t),
            None => request,
        };
        let response = request.send().map_err(|e| {
            let cause = error_chain(&e);
            let hint = if cause.contains("certificate") || cause.contains("tls") {
                "The TLS handshake failed: give the server's authority with --ca-file \
                 (WEIR_ADMIN_CA_FILE), and a client certificate with --client-cert and \
                 --client-key if the API requires one."
            } else {
                "Is `weir run` running with an [admin] section (or --admin)? Point --admin / \
                 WEIR_ADMIN_URL at it."
            };
            anyhow::anyhow!(
                "cannot reach the admin API at {}: {cause}. {hint}",
                self.url
            )
        })?;
        let value = answer(response)?;
        serde_json::from_value(value)
            .context("the admin API answered in a shape this weir does not know (another version?)")
    }

    /// `GET /v1/pipelines/NAME`
    pub fn status(&self) -> Result<Status> {
        self.send(self.client()?.get(self.url("")))
    }

    /// `GET …/versions`
    pub fn versions(&self) -> Result<Vec<Listed>> {
        self.send(self.client()?.get(self.url("/versions")))
    }

    /// `POST …/versions/N/activate`
    pub fn activate(&self, n: u32) -> Result<Listed> {
        self.send(
            self.client()?
                .post(self.url(&format!("/versions/{n}/activate"))),
        )
    }

    /// `POST …/rollback`
    pub fn rollback(&self, to: Option<u32>) -> Result<Listed> {
        let url = match to {
            Some(n) => self.url(&format!("/rollback?to={n}")),
            None => self.url("/rollback"),
        };
        self.send(self.client()?.post(url))
    }

    /// `POST …/shadow/promote`
    pub fn promote(&self) -> Result<Listed> {
        self.send(self.client()?.post(self.url("/shadow/promote")))
    }

    /// `DELETE …/shadow`
    pub fn unshadow(&self) -> Result<()> {
        self.send::<Value>(self.client()?.delete(self.url("/shadow")))
            .map(drop)
    }

    /// `GET …/progress?limit=N`: the newest progress records, the backlog
    /// verdict and the source's lag.
    pub fn progress(&self, limit: usize) -> Result<ProgressReport> {
        self.send(
            self.client()?
                .get(self.url(&format!("/progress?limit={limit}"))),
        )
    }

    /// `GET …/history`: the audit trail the registry holds (the newest
    /// thousand changes).
    pub fn history(&self) -> Result<Vec<weir_engine::versions::registry::Event>> {
        self.send(self.client()?.get(self.url("/history")))
    }

    /// `GET …/shadow`
    pub fn shadow_reports(&self) -> Result<Vec<ShadowReport>> {
        self.send(self.client()?.get(self.url("/shadow")))
    }

    /// `POST …/versions`: uploads the component with its config and golden files.
    pub fn deploy(&self, d: &DeployRequest) -> Result<Listed> {
        // The server answers a refused upload at its headers and closes the
        // connection without reading the body, which a client still sending
        // it may see as a reset: so the token and its scope are checked
        // first, cheaply.
        let me = self.whoami()?;
        if me.scope == "read" {
            bail!(
                "token `{}` has scope `read`; uploading a version needs scope `deploy`",
                me.name
            );
        }
        self.status()?;
        let file_name = d
            .component
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "operator.wasm".into());
        let wasm = read(&d.component)?;
        let mut form = multipart::Form::new().part(
            "component",
            multipart::Part::bytes(wasm).file_name(file_name),
        );
        if let Some(path) = &d.config {
            form = form.text("config", config_json(path)?);
        }
        if let Some(label) = &d.label {
            form = form.text("label", label.clone());
        }
        for (name, path) in &d.artifacts {
            let part = multipart::Part::bytes(read(path)?).file_name(path.display().to_string());
            form = form.part(format!("artifact:{name}"), part);
        }
        if let Some((input, output)) = &d.golden {
            form = form
                .part("golden_input", multipart::Part::bytes(read(input)?))
                .part("golden_output", multipart::Part::bytes(read(output)?));
        }
        let mut url = format!("{}?then={}", self.url("/versions"), d.then);
        if let Some(k) = &d.key {
            url.push_str(&format!("&key={k}"));
        }
        self.send(self.client()?.post(url).multipart(form))
    }

    /// Polls the status until the active version is `number` and has run
    /// an epoch; returns that epoch.
    pub fn wait_for_epoch_on(&self, number: u32, timeout: Duration) -> Result<u64> {
        let deadline = std::time::Instant::now() + timeout;
        loop {
            let s = self.status()?;
            let active = s.active.map(|v| v.number);
            if active != Some(number) {
                bail!("version {number} is no longer active (now {active:?})");
            }
            if let Some(e) = s.active_since_epoch {
                return Ok(e);
            }
            if std::time::Instant::now() > deadline {
                bail!(
                    "version {number} is active but no epoch has run with it after {timeout:?} \
                     (no new input?)"
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// An error with its causes (a TLS failure's reason is a few levels down).
fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

fn read(path: &Path) -> Result<Vec<u8>> {
    std::fs::read(path).with_context(|| format!("reading {}", path.display()))
}

/// The operator config file as JSON: `.toml` files are converted, anything
/// else must be JSON (the pipeline file's `operator.config_file` reads the
/// same way).
pub fn config_json(path: &Path) -> Result<String> {
    weir_engine::config::config_file_json(path)
}

fn answer(response: Response) -> Result<Value> {
    let status = response.status();
    let body = response.text().unwrap_or_default();
    let value: Value = if body.is_empty() {
        Value::Null
    } else {
        serde_json::from_str(&body).unwrap_or(Value::String(body.clone()))
    };
    if status.is_success() {
        return Ok(value);
    }
    let message = value["error"].as_str().map(str::to_string).unwrap_or(body);
    bail!("refused ({status}): {message}")
}
