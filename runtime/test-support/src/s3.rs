//! A real S3-compatible server for tests: s3s-fs (installed by
//! scripts/install-s3s.sh), on 127.0.0.1 on a free port, storing objects as
//! files in a temp dir, with one bucket and one key pair; killed when
//! dropped.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The bucket every test server has.
pub const BUCKET: &str = "weir-test";
const ACCESS_KEY: &str = "weir-test-key";
const SECRET_KEY: &str = "weir-test-secret";

/// One s3s-fs process and the directory it keeps objects in; killed when
/// this is dropped.
pub struct S3Server {
    /// Its port on 127.0.0.1.
    pub port: u16,
    dir: tempfile::TempDir,
    child: Option<Child>,
}

fn s3s_fs() -> PathBuf {
    crate::needs("s3s-fs");
    crate::broker::cargo_installed("s3s-fs", "scripts/install-s3s.sh")
}

impl S3Server {
    /// Starts the server with an empty bucket [`BUCKET`].
    pub fn start() -> S3Server {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let dir = tempfile::tempdir().unwrap();
        // s3s-fs keeps a bucket as a directory under its root.
        std::fs::create_dir_all(dir.path().join("data").join(BUCKET)).unwrap();
        let child = Command::new(s3s_fs())
            .args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .args(["--access-key", ACCESS_KEY, "--secret-key", SECRET_KEY])
            .arg(dir.path().join("data"))
            .stdout(Stdio::null())
            .stderr(Stdio::from(
                std::fs::File::create(dir.path().join("s3s.log")).unwrap(),
            ))
            .spawn()
            .expect("starting s3s-fs");
        let mut server = S3Server {
            port,
            dir,
            child: Some(child),
        };
        let start = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            if let Some(status) = server.child.as_mut().unwrap().try_wait().unwrap() {
                panic!("s3s-fs exited with {status}: {}", server.log());
            }
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "s3s-fs did not listen"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        server
    }

    /// The server's log, for failure messages.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("s3s.log")).unwrap_or_default()
    }

    /// The `[object_store]` table of a pipeline file that uses this server.
    pub fn settings_toml(&self) -> String {
        format!(
            "[object_store]\nendpoint = \"http://127.0.0.1:{}\"\nallow_http = true\n",
            self.port
        )
    }

    /// Gives `cmd` (a `weir` process) this server's credentials.
    pub fn credentials<'a>(&self, cmd: &'a mut Command) -> &'a mut Command {
        cmd.env("AWS_ACCESS_KEY_ID", ACCESS_KEY)
            .env("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
            .env_remove("AWS_SESSION_TOKEN")
            .env_remove("AWS_ENDPOINT_URL")
            .env_remove("AWS_PROFILE")
    }

    /// The object store settings of a client in this test process.
    pub fn settings(&self) -> weir_connectors::s3::ObjectStoreSettings {
        client_credentials();
        weir_connectors::s3::ObjectStoreSettings {
            endpoint: Some(format!("http://127.0.0.1:{}", self.port)),
            region: None,
            allow_http: true,
            ca_file: None,
        }
    }

    /// Writes `bytes` as `s3://BUCKET/key` through a real client, as the
    /// fraud team's batch jobs would.
    pub fn put(&self, key: &str, bytes: &[u8]) {
        use weir_core::mirror::Remote;
        let remote =
            weir_connectors::s3::S3Remote::open(&format!("s3://{BUCKET}"), &self.settings())
                .expect("a client of the test server");
        remote.put(key, bytes).expect("putting an object");
    }

    /// Where the server keeps `s3://BUCKET/key` on disk (to look, not to write).
    pub fn object_path(&self, key: &str) -> PathBuf {
        self.dir.path().join("data").join(BUCKET).join(key)
    }

    /// The keys under `prefix/` in the bucket, sorted.
    pub fn keys(&self, prefix: &str) -> Vec<String> {
        fn walk(root: &Path, dir: &Path, out: &mut Vec<String>) {
            for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
                let path = entry.path();
                if path.is_dir() {
                    walk(root, &path, out);
                } else if let Ok(rel) = path.strip_prefix(root) {
                    out.push(rel.to_string_lossy().into_owned());
                }
            }
        }
        let root = self.dir.path().join("data").join(BUCKET);
        let mut keys = Vec::new();
        walk(&root, &root.join(prefix), &mut keys);
        keys.retain(|k| !k.split('/').any(|p| p.starts_with('.')));
        keys.sort();
        keys
    }
}

/// A client in this process reads its credentials from the environment,
/// as `weir` does; every test server has the same key pair, so they are set
/// once, before the first such client.
fn client_credentials() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        std::env::set_var("AWS_ACCESS_KEY_ID", ACCESS_KEY);
        std::env::set_var("AWS_SECRET_ACCESS_KEY", SECRET_KEY);
    });
}

impl Drop for S3Server {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}
