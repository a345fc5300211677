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
use weir_engine::deploy::{Listed, Status};
use weir_engine::observe::ProgressReport;

/// Where the admin API is and how to authenticate.
#[derive(Debug, Clone)]
pub struct Target {
    /// `http://host:port`
    pub url: String,
    pub pipeline: String,
    pub token: Option<String>,
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
    fn client() -> Result<Client> {
        // Validation compiles the component; give it time.
        Client::builder()
            .timeout(Duration::from_secs(300))
            .build()
            .context("creating the HTTP client")
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
            anyhow::anyhow!(
                "cannot reach the admin API at {}: {e}. Is `weir run` running with an \
                 [admin] section (or --admin)? Point --admin / WEIR_ADMIN_URL at it.",
                self.url
            )
        })?;
        let value = answer(response)?;
        serde_json::from_value(value)
            .context("the admin API answered in a shape this weir does not know (another version?)")
    }

    /// `GET /v1/pipelines/NAME`
    pub fn status(&self) -> Result<Status> {
        self.send(Self::client()?.get(self.url("")))
    }

    /// `GET …/versions`
    pub fn versions(&self) -> Result<Vec<Listed>> {
        self.send(Self::client()?.get(self.url("/versions")))
    }

    /// `POST …/versions/N/activate`
    pub fn activate(&self, n: u32) -> Result<Listed> {
        self.send(Self::client()?.post(self.url(&format!("/versions/{n}/activate"))))
    }

    /// `POST …/rollback`
    pub fn rollback(&self, to: Option<u32>) -> Result<Listed> {
        let url = match to {
            Some(n) => self.url(&format!("/rollback?to={n}")),
            None => self.url("/rollback"),
        };
        self.send(Self::client()?.post(url))
    }

    /// `POST …/shadow/promote`
    pub fn promote(&self) -> Result<Listed> {
        self.send(Self::client()?.post(self.url("/shadow/promote")))
    }

    /// `DELETE …/shadow`
    pub fn unshadow(&self) -> Result<()> {
        self.send::<Value>(Self::client()?.delete(self.url("/shadow")))
            .map(drop)
    }

    /// `GET …/progress?limit=N`: the newest progress records, the backlog
    /// verdict and the source's lag.
    pub fn progress(&self, limit: usize) -> Result<ProgressReport> {
        self.send(Self::client()?.get(self.url(&format!("/progress?limit={limit}"))))
    }

    /// `GET …/shadow`
    pub fn shadow_reports(&self) -> Result<Vec<ShadowReport>> {
        self.send(Self::client()?.get(self.url("/shadow")))
    }

    /// `POST …/versions`: uploads the component with its config and golden files.
    pub fn deploy(&self, d: &DeployRequest) -> Result<Listed> {
        // The server answers a refused upload at its headers and closes the
        // connection without reading the body, which a client still sending
        // it may see as a reset: so the token is checked first, cheaply.
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
        self.send(Self::client()?.post(url).multipart(form))
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
