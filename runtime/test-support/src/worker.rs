//! A `weir run --worker NAME` process of a `[cluster]` pipeline, for the
//! worker tests and the takeover benchmark: its progress lines
//! (`partition <p>: epoch …`) and its log in files beside it.

// Signals to the worker processes: libc.
#![allow(unsafe_code)]

use crate::s3::S3Server;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// One worker process; killed when this is dropped.
pub struct Worker {
    /// Its `--worker` name.
    pub name: String,
    child: Option<Child>,
    out: PathBuf,
    err: PathBuf,
}

impl Worker {
    /// Starts worker `name` of `pipeline`, with `s3`'s credentials; its
    /// log level is `WEIR_TEST_WORKER_LOG` (default `info`).
    pub fn start(dir: &Path, pipeline: &Path, name: &str, s3: &S3Server) -> Worker {
        Self::start_with(dir, pipeline, name, s3, &[])
    }

    /// [`Worker::start`] with more `weir run` arguments (`--admin …`).
    pub fn start_with(
        dir: &Path,
        pipeline: &Path,
        name: &str,
        s3: &S3Server,
        args: &[&str],
    ) -> Worker {
        let (out, err) = (
            dir.join(format!("{name}.out")),
            dir.join(format!("{name}.err")),
        );
        let mut cmd = Command::new(crate::weir_exe());
        cmd.args(["run", "--worker", name])
            .args(args)
            .arg(pipeline)
            .env("WEIR_CACHE_DIR", dir.join("compiled"))
            .env(
                "WEIR_LOG",
                std::env::var("WEIR_TEST_WORKER_LOG").unwrap_or("info".into()),
            )
            .stdout(Stdio::from(std::fs::File::create(&out).unwrap()))
            .stderr(Stdio::from(std::fs::File::create(&err).unwrap()));
        let child = s3.credentials(&mut cmd).spawn().unwrap();
        Worker {
            name: name.to_string(),
            child: Some(child),
            out,
            err,
        }
    }

    /// Whether its process was started and not yet stopped or killed here.
    pub fn is_running(&self) -> bool {
        self.child.is_some()
    }

    fn progress(&self) -> String {
        std::fs::read_to_string(&self.out).unwrap_or_default()
    }

    /// Its progress lines after line `mark`.
    pub fn progress_since(&self, mark: usize) -> String {
        self.progress()
            .lines()
            .skip(mark)
            .map(|l| format!("{l}\n"))
            .collect()
    }

    /// The partitions the group gave it, as its log says (each
    /// `partitions assigned` adds, each `partitions revoked` removes).
    pub fn assigned(&self) -> BTreeSet<i32> {
        let mut owned = BTreeSet::new();
        for line in self.log_since(0).lines() {
            let Some(set) = line
                .split("partitions={")
                .nth(1)
                .and_then(|r| r.split('}').next())
            else {
                continue;
            };
            let parts = set.split(',').filter_map(|p| p.trim().parse::<i32>().ok());
            if line.contains("partitions assigned") {
                owned.extend(parts);
            } else if line.contains("partitions revoked") {
                for p in parts {
                    owned.remove(&p);
                }
            }
        }
        owned
    }

    /// How many progress lines it has printed: a mark for
    /// [`Worker::committed_since`].
    pub fn mark(&self) -> usize {
        self.progress().lines().count()
    }

    /// Partitions it committed an epoch of after progress line `mark`.
    pub fn committed_since(&self, mark: usize) -> BTreeSet<i32> {
        self.progress()
            .lines()
            .skip(mark)
            .filter_map(|l| {
                l.strip_prefix("partition ")?
                    .split(':')
                    .next()?
                    .parse()
                    .ok()
            })
            .collect()
    }

    /// Partitions it committed an epoch of.
    pub fn committed(&self) -> BTreeSet<i32> {
        self.committed_since(0)
    }

    /// Rows read by its committed epochs (the progress lines' `in N`).
    pub fn rows_in(&self) -> u64 {
        self.progress()
            .lines()
            .filter_map(|l| {
                let rest = l.split(" in ").nth(1)?;
                rest.split_whitespace().next()?.parse::<u64>().ok()
            })
            .sum()
    }

    /// Its log (stderr) since byte `from`.
    pub fn log_since(&self, from: usize) -> String {
        let log = std::fs::read_to_string(&self.err).unwrap_or_default();
        log.get(from..).unwrap_or("").to_string()
    }

    /// How long its log is: a mark for [`Worker::log_since`].
    pub fn log_len(&self) -> usize {
        std::fs::metadata(&self.err).map_or(0, |m| m.len() as usize)
    }

    /// Its log, then its progress lines, for failure messages.
    pub fn log(&self) -> String {
        format!(
            "{}--- {} progress ---\n{}",
            self.log_since(0),
            self.name,
            self.progress()
        )
    }

    /// Sends `signal` (e.g. `libc::SIGSTOP`) to its process.
    pub fn signal(&self, signal: i32) {
        let pid = self.child.as_ref().unwrap().id() as libc::pid_t;
        // SAFETY: signalling our own child process.
        unsafe { libc::kill(pid, signal) };
    }

    /// SIGKILL: no LeaveGroup, no last epoch.
    pub fn kill(&mut self) {
        let mut child = self.child.take().unwrap();
        child.kill().unwrap();
        child.wait().unwrap();
    }

    /// Ctrl-C: the current epochs finish, the worker leaves the group.
    pub fn interrupt(&mut self) {
        self.signal(libc::SIGINT);
        let status = self.child.take().unwrap().wait().unwrap();
        assert!(
            status.success(),
            "worker {} failed:\n{}",
            self.name,
            self.log()
        );
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}
