//! A real PostgreSQL server for tests: a fresh cluster made by `initdb` in a
//! temp dir, listening on 127.0.0.1 on a free port (password auth over TCP),
//! stopped when dropped. As root, the server runs as the `postgres` user,
//! since PostgreSQL refuses to run as root. `WEIR_PG_BIN` overrides where
//! the server binaries are looked for (else Debian's /usr/lib/postgresql/N/bin,
//! newest first, then PATH).
#![allow(unsafe_code)] // geteuid and getpwnam: whether to drop root for the server

use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The role every test cluster is made with (its superuser).
pub const USER: &str = "weir";
/// [`USER`]'s password (the clusters take password auth over TCP).
pub const PASSWORD: &str = "weir-test-secret";

/// One throwaway cluster; stopped and removed when this is dropped.
pub struct PgServer {
    /// Its port on 127.0.0.1.
    pub port: u16,
    dir: tempfile::TempDir,
    bin: PathBuf,
    /// uid/gid to run the server as (when the tests run as root).
    owner: Option<(u32, u32)>,
    running: bool,
    /// Whether TCP clients must use TLS ([`PgServer::start_tls`]).
    tls_only: bool,
}

fn bin_dir() -> PathBuf {
    crate::needs("PostgreSQL");
    if let Some(dir) = std::env::var_os("WEIR_PG_BIN") {
        return PathBuf::from(dir);
    }
    let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let v = e.file_name().to_str()?.parse().ok()?;
            let bin = e.path().join("bin");
            bin.join("initdb").exists().then_some((v, bin))
        })
        .collect();
    found.sort();
    if let Some((_, bin)) = found.pop() {
        return bin;
    }
    let which = Command::new("sh")
        .args(["-c", "command -v initdb"])
        .output()
        .expect("sh");
    let path = String::from_utf8_lossy(&which.stdout).trim().to_string();
    assert!(
        !path.is_empty(),
        "PostgreSQL server binaries (initdb, pg_ctl) not found: run scripts/install.sh \
         (scripts/test.sh does) or set WEIR_PG_BIN"
    );
    Path::new(&path).parent().unwrap().to_path_buf()
}

fn postgres_owner() -> Option<(u32, u32)> {
    if unsafe { libc::geteuid() } != 0 {
        return None;
    }
    let name = std::ffi::CString::new("postgres").unwrap();
    let pw = unsafe { libc::getpwnam(name.as_ptr()) };
    assert!(
        !pw.is_null(),
        "running as root and there is no `postgres` user to run the test server as \
         (install the postgresql package: scripts/install.sh)"
    );
    Some(unsafe { ((*pw).pw_uid, (*pw).pw_gid) })
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl PgServer {
    /// A new cluster, started.
    pub fn start() -> PgServer {
        let mut server = Self::init();
        server.start_again();
        server
    }

    /// A new cluster that takes TCP connections only over TLS, with `pki`'s
    /// server certificate (`ssl = on`; `pg_hba.conf` has only a `hostssl`
    /// line, so a plaintext connection is refused). The helpers below
    /// reach it through its Unix socket.
    pub fn start_tls(pki: &crate::tls::Pki, client_certs: bool) -> PgServer {
        let mut server = Self::init();
        let data = server.data();
        let files = [
            (pki.server_cert(), "server.crt"),
            (pki.server_key(), "server.key"),
            (pki.ca(), "root.crt"),
        ];
        for (from, to) in files {
            let dest = data.join(to);
            std::fs::copy(&from, &dest).unwrap();
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&dest, std::fs::Permissions::from_mode(0o600)).unwrap();
            if let Some((uid, gid)) = server.owner {
                std::os::unix::fs::chown(&dest, Some(uid), Some(gid)).unwrap();
            }
        }
        // With `client_certs`, a client must also present a certificate
        // `pki` signed (`clientcert=verify-ca`, against `root.crt`).
        let clientcert = if client_certs {
            " clientcert=verify-ca"
        } else {
            ""
        };
        std::fs::write(
            data.join("pg_hba.conf"),
            format!(
                "local all all trust\nhostssl all all 127.0.0.1/32 scram-sha-256{clientcert}\n"
            ),
        )
        .unwrap();
        let mut conf = std::fs::OpenOptions::new()
            .append(true)
            .open(data.join("postgresql.conf"))
            .unwrap();
        use std::io::Write;
        writeln!(conf, "ssl = on\nssl_ca_file = 'root.crt'").unwrap();
        server.tls_only = true;
        server.start_again();
        server
    }

    /// A new cluster, made but not started.
    fn init() -> PgServer {
        let dir = tempfile::tempdir().unwrap();
        let owner = postgres_owner();
        if let Some((uid, gid)) = owner {
            std::os::unix::fs::chown(dir.path(), Some(uid), Some(gid)).unwrap();
        }
        let server = PgServer {
            port: free_port(),
            dir,
            bin: bin_dir(),
            owner,
            running: false,
            tls_only: false,
        };
        let pwfile = server.dir.path().join("pwfile");
        std::fs::write(&pwfile, PASSWORD).unwrap();
        if let Some((uid, gid)) = owner {
            std::os::unix::fs::chown(&pwfile, Some(uid), Some(gid)).unwrap();
        }
        server.run(
            "initdb",
            &[
                "-D".as_ref(),
                server.data().as_os_str(),
                "-U".as_ref(),
                USER.as_ref(),
                "--pwfile".as_ref(),
                pwfile.as_os_str(),
                "--auth-host=scram-sha-256".as_ref(),
                "--auth-local=trust".as_ref(),
                "-E".as_ref(),
                "UTF8".as_ref(),
                "--no-sync".as_ref(),
            ],
        );
        server
    }

    fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    fn run(&self, program: &str, args: &[&std::ffi::OsStr]) {
        let mut cmd = Command::new(self.bin.join(program));
        cmd.args(args).stdin(Stdio::null());
        if let Some((uid, gid)) = self.owner {
            cmd.uid(uid).gid(gid);
        }
        let out = cmd
            .output()
            .unwrap_or_else(|e| panic!("running {program}: {e}"));
        assert!(
            out.status.success(),
            "{program} failed: {}{}\nserver log:\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
            std::fs::read_to_string(self.dir.path().join("server.log")).unwrap_or_default()
        );
    }

    /// Starts the server (again, after [`PgServer::stop_immediately`]) and
    /// waits until it accepts connections.
    pub fn start_again(&mut self) {
        let options = format!(
            "-c listen_addresses=127.0.0.1 -p {} -c unix_socket_directories={} -c fsync=on",
            self.port,
            self.dir.path().display()
        );
        let log = self.dir.path().join("server.log");
        let data = self.data();
        self.run(
            "pg_ctl",
            &[
                "-D".as_ref(),
                data.as_os_str(),
                "-l".as_ref(),
                log.as_os_str(),
                "-o".as_ref(),
                options.as_ref(),
                "-w".as_ref(),
                "-t".as_ref(),
                "60".as_ref(),
                "start".as_ref(),
            ],
        );
        self.running = true;
    }

    /// Stops the server the hard way (`pg_ctl -m immediate`): sessions are
    /// cut, open transactions are lost, restart runs crash recovery.
    pub fn stop_immediately(&mut self) {
        if !self.running {
            return;
        }
        let data = self.data();
        self.run(
            "pg_ctl",
            &[
                "-D".as_ref(),
                data.as_os_str(),
                "-m".as_ref(),
                "immediate".as_ref(),
                "-w".as_ref(),
                "stop".as_ref(),
            ],
        );
        self.running = false;
    }

    /// Connection string for database `db` (`postgres` always exists).
    pub fn url(&self, db: &str) -> String {
        format!(
            "postgresql://{USER}:{PASSWORD}@127.0.0.1:{}/{db}",
            self.port
        )
    }

    /// A client on the `postgres` database (through the Unix socket, for
    /// a server that takes TCP only over TLS).
    pub fn client(&self) -> postgres::Client {
        let url = match self.tls_only {
            true => format!(
                "host={} port={} user={USER} dbname=postgres",
                self.dir.path().display(),
                self.port
            ),
            false => self.url("postgres"),
        };
        postgres::Client::connect(&url, postgres::NoTls).expect("connecting to the test server")
    }

    /// Runs SQL statements on the `postgres` database.
    pub fn execute(&self, sql: &str) {
        self.client().batch_execute(sql).expect(sql);
    }

    /// The rows of `query` as PostgreSQL prints a row (`(a,b,c)`), sorted.
    pub fn rows(&self, query: &str) -> Vec<String> {
        let mut rows: Vec<String> = self
            .client()
            .query(&format!("SELECT q::text FROM ({query}) q"), &[])
            .expect(query)
            .iter()
            .map(|r| r.get(0))
            .collect();
        rows.sort();
        rows
    }

    /// One bigint (e.g. a count).
    pub fn count(&self, query: &str) -> i64 {
        self.client().query_one(query, &[]).expect(query).get(0)
    }
}

impl Drop for PgServer {
    fn drop(&mut self) {
        self.stop_immediately();
    }
}
