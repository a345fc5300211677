//! `weir run --watch`: redeploys the pipeline file's operator whenever its
//! `.wasm` changes on disk — the edit-build-see loop of operator
//! development. A change goes through the same validation and epoch-boundary
//! swap as `weir deploy`; a build that fails validation is logged and the
//! running version stays.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime};
use weir_engine::versions::registry::{Actor, Origin};
use weir_engine::versions::{Control, DeployError, Then, Upload};

/// How often the file is looked at.
const POLL: Duration = Duration::from_millis(250);

/// A watcher thread; stops when dropped.
pub struct Watcher {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

/// What identifies a version of the file without reading it.
fn stamp(path: &PathBuf) -> Option<(SystemTime, u64)> {
    let m = std::fs::metadata(path).ok()?;
    Some((m.modified().ok()?, m.len()))
}

impl Watcher {
    /// Watches `path`; each settled change is uploaded with `config_json`
    /// and activated.
    pub fn start(
        path: PathBuf,
        config_json: String,
        control: Arc<Control>,
    ) -> std::io::Result<Self> {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("weir-watch".into())
            .spawn(move || {
                let mut seen = stamp(&path);
                tracing::info!(path = %path.display(), "watching the operator for changes");
                while !flag.load(Ordering::Relaxed) {
                    std::thread::sleep(POLL);
                    let now = stamp(&path);
                    if now.is_none() || now == seen {
                        continue;
                    }
                    // Let the writer (cargo, an editor) finish: wait until
                    // the file stops changing for one poll.
                    std::thread::sleep(POLL);
                    if stamp(&path) != now {
                        continue;
                    }
                    seen = now;
                    redeploy(&path, &config_json, &control);
                }
            })?;
        Ok(Watcher {
            stop,
            thread: Some(thread),
        })
    }
}

fn redeploy(path: &PathBuf, config_json: &str, control: &Control) {
    let wasm = match std::fs::read(path) {
        Ok(w) => w,
        Err(e) => {
            tracing::warn!(path = %path.display(), "watch: cannot read the operator: {e}");
            return;
        }
    };
    let upload = Upload {
        wasm,
        config_json: Some(config_json.to_string()),
        artifacts: Default::default(),
        golden: None,
        label: Some("watch".into()),
        origin: Origin::Watch { path: path.clone() },
    };
    match control.upload(upload, Then::Activate, &Actor::named("watch")) {
        Ok(v) => tracing::info!(
            version = v.version.number,
            digest = %v.version.digest,
            "watch: {} changed; version {} runs from the next epoch",
            path.display(),
            v.version.number
        ),
        Err(DeployError::Refused(why)) => tracing::error!(
            "watch: {} changed but was refused, the running version stays: {why}",
            path.display()
        ),
        Err(e) => tracing::error!("watch: redeploying {} failed: {e}", path.display()),
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
