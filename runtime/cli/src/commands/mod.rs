//! The `weir` commands, one module each with its arguments and its
//! `run`; `crate::cli` only parses and dispatches. The modules they call
//! (`crate::demo`, `crate::explain`, `crate::devtools`, …) hold the
//! work itself, so tests and benches can call it without a command line.

pub mod activate;
pub mod audit;
pub mod checkpoint;
pub mod demo;
pub mod deploy;
pub mod explain;
pub mod feed;
pub mod generate;
pub mod operator;
pub mod promote;
pub mod rollback;
pub mod run;
pub mod status;
pub mod token;
pub mod unshadow;
pub mod versions;

use anyhow::{bail, Context, Result};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use weir_admin::client;

/// Which running pipeline an admin command talks to.
#[derive(Debug, clap::Args)]
pub struct TargetArgs {
    /// The pipeline's name (its `name` in the pipeline file).
    #[arg(long, short)]
    pipeline: String,
    /// The pipeline's admin API.
    #[arg(long, env = "WEIR_ADMIN_URL", default_value = "http://127.0.0.1:7878")]
    admin: String,
    /// Bearer token of the admin API.
    #[arg(long, env = "WEIR_ADMIN_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// For an https:// admin API: a CA certificate (PEM) to trust besides
    /// the system's.
    #[arg(long, env = "WEIR_ADMIN_CA_FILE")]
    ca_file: Option<PathBuf>,
    /// For an admin API that requires client certificates: this client's (PEM).
    #[arg(long, env = "WEIR_ADMIN_CLIENT_CERT", requires = "client_key")]
    client_cert: Option<PathBuf>,
    /// The client certificate's private key (PEM).
    #[arg(long, env = "WEIR_ADMIN_CLIENT_KEY", requires = "client_cert")]
    client_key: Option<PathBuf>,
}

impl TargetArgs {
    /// The admin API client these arguments describe.
    pub fn target(self) -> client::Target {
        let url = if self.admin.contains("://") {
            self.admin
        } else {
            format!("http://{}", self.admin)
        };
        client::Target::new(
            url,
            self.pipeline,
            self.token,
            client::ClientTls {
                ca_file: self.ca_file,
                cert_file: self.client_cert,
                key_file: self.client_key,
            },
        )
    }
}

/// A flag Ctrl-C sets (a second Ctrl-C exits at once).
fn stop_flag() -> Result<Arc<AtomicBool>> {
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    ctrlc::set_handler(move || {
        if flag.swap(true, Ordering::SeqCst) {
            eprintln!(
                "second interrupt: exiting now; the uncommitted epoch will be re-run on restart"
            );
            std::process::exit(130);
        }
        eprintln!("stopping after the current epoch (interrupt again to exit now)");
    })
    .context("installing the Ctrl-C handler")?;
    Ok(stop)
}

/// `NAME=FILE` of `--artifact`.
fn parse_artifact(s: &str) -> Result<(String, PathBuf)> {
    let (name, file) = s
        .split_once('=')
        .context("expected NAME=FILE, e.g. model=model.onnx")?;
    weir_core::artifacts::check_name(name)?;
    if file.is_empty() {
        bail!("no file after `{name}=`");
    }
    Ok((name.to_string(), PathBuf::from(file)))
}

/// Unix milliseconds as an RFC 3339 UTC time to the second, for tables
/// (empty before 1970).
pub fn utc_seconds(ms: i64) -> String {
    u64::try_from(ms)
        .map(|ms| {
            humantime::format_rfc3339_seconds(
                std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms),
            )
            .to_string()
        })
        .unwrap_or_default()
}

/// `value` as JSON text (`null` when absent), as `weir status` prints it.
fn or_null<T: std::fmt::Display>(value: Option<T>) -> String {
    value.map_or_else(|| "null".into(), |v| v.to_string())
}
