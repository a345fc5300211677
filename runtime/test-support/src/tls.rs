//! TLS for tests: certificates made by the test itself with `openssl`'s
//! command line (an authority, a server certificate for the names asked
//! for, a client certificate), and a real TLS endpoint, stunnel (Debian's
//! `stunnel4`, installed by scripts/install.sh), in front of a plaintext
//! service on 127.0.0.1, for services that have no TLS of their own (the
//! test broker's TLS listener is not wired in its 0.6.0 release).

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A certificate authority with a server and a client certificate it
/// signed, as PEM files in a temp dir.
pub struct Pki {
    dir: tempfile::TempDir,
}

fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .current_dir(dir)
        .args(args)
        .output()
        .expect("running openssl (on the base image)");
    assert!(
        out.status.success(),
        "openssl {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Makes `NAME.key` and `NAME.pem` for subject `cn`, signed by `ca.pem`
/// with the X.509 extensions `ext`.
fn sign(dir: &Path, key: &[&str], name: &str, cn: &str, ext: &str) {
    let (keyfile, csr, pem) = (
        format!("{name}.key"),
        format!("{name}.csr"),
        format!("{name}.pem"),
    );
    let subject = format!("/CN={cn}");
    let mut req = vec![
        "req", "-new", "-keyout", &keyfile, "-out", &csr, "-subj", &subject,
    ];
    req.extend(key);
    openssl(dir, &req);
    let ext_file = format!("{name}.ext");
    std::fs::write(dir.join(&ext_file), ext).unwrap();
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            &csr,
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "1",
            "-out",
            &pem,
            "-extfile",
            &ext_file,
        ],
    );
}

impl Pki {
    /// An authority named `authority` and a server certificate for
    /// `server_names` (DNS names; `127.0.0.1` style entries become IP
    /// names), each valid for a day.
    pub fn new(authority: &str, server_names: &[&str]) -> Pki {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let key = [
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
        ];
        let ca_subject = format!("/CN={authority}");
        let mut ca = vec![
            "req", "-x509", "-days", "1", "-keyout", "ca.key", "-out", "ca.pem",
        ];
        ca.extend(key);
        ca.extend(["-subj", &ca_subject]);
        ca.extend(["-addext", "basicConstraints=critical,CA:TRUE"]);
        ca.extend(["-addext", "keyUsage=critical,keyCertSign,cRLSign"]);
        openssl(d, &ca);
        let names: Vec<String> = server_names
            .iter()
            .map(|n| match n.parse::<std::net::IpAddr>() {
                Ok(_) => format!("IP:{n}"),
                Err(_) => format!("DNS:{n}"),
            })
            .collect();
        let server_ext = format!(
            "subjectAltName={}\nextendedKeyUsage=serverAuth\nbasicConstraints=CA:FALSE\n",
            names.join(",")
        );
        let first = server_names.first().copied().unwrap_or("server");
        sign(d, &key, "server", first, &server_ext);
        sign(
            d,
            &key,
            "client",
            "weir-client",
            "extendedKeyUsage=clientAuth\nbasicConstraints=CA:FALSE\n",
        );
        Pki { dir }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// The authority's certificate: what a client trusts.
    pub fn ca(&self) -> PathBuf {
        self.path("ca.pem")
    }

    /// The server's certificate chain (its certificate).
    pub fn server_cert(&self) -> PathBuf {
        self.path("server.pem")
    }

    /// The server's private key.
    pub fn server_key(&self) -> PathBuf {
        self.path("server.key")
    }

    /// A client certificate the authority signed (for mutual TLS).
    pub fn client_cert(&self) -> PathBuf {
        self.path("client.pem")
    }

    /// The client certificate's private key.
    pub fn client_key(&self) -> PathBuf {
        self.path("client.key")
    }
}

/// A free port on 127.0.0.1 (free when asked; bound by the caller soon after).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// stunnel accepting TLS on 127.0.0.1:`port` and passing the plaintext to
/// 127.0.0.1:`backend`; killed when dropped.
pub struct TlsFront {
    /// The TLS port.
    pub port: u16,
    child: Child,
    dir: tempfile::TempDir,
}

impl TlsFront {
    /// Starts stunnel on `port` with `pki`'s server certificate; with
    /// `client_certs`, a client must present a certificate `pki` signed.
    pub fn start(pki: &Pki, port: u16, backend: u16, client_certs: bool) -> TlsFront {
        crate::needs("stunnel");
        let dir = tempfile::tempdir().unwrap();
        let mut conf = format!(
            "foreground = yes\npid =\ndebug = 4\noutput = {log}\n\n[front]\n\
             accept = 127.0.0.1:{port}\nconnect = 127.0.0.1:{backend}\n\
             cert = {cert}\nkey = {key}\n",
            log = dir.path().join("stunnel.log").display(),
            cert = pki.server_cert().display(),
            key = pki.server_key().display(),
        );
        if client_certs {
            conf += &format!(
                "CAfile = {}\nverifyChain = yes\nrequireCert = yes\n",
                pki.ca().display()
            );
        }
        let conf_path = dir.path().join("stunnel.conf");
        std::fs::write(&conf_path, conf).unwrap();
        let stunnel = ["/usr/bin/stunnel4", "/usr/bin/stunnel"]
            .into_iter()
            .find(|p| Path::new(p).exists())
            .expect("stunnel is not installed: run scripts/install.sh (scripts/test.sh does)");
        let mut child = Command::new(stunnel)
            .arg(&conf_path)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("starting stunnel");
        let start = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            if let Some(status) = child.try_wait().unwrap() {
                let log = std::fs::read_to_string(dir.path().join("stunnel.log"));
                panic!("stunnel exited with {status}: {log:?}");
            }
            if start.elapsed() > Duration::from_secs(10) {
                let _ = child.kill();
                let _ = child.wait();
                panic!("stunnel did not listen on {port}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        TlsFront { port, child, dir }
    }

    /// stunnel's log so far, for failure messages.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("stunnel.log")).unwrap_or_default()
    }
}

impl Drop for TlsFront {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
