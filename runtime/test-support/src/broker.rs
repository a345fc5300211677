//! A real Kafka-protocol broker (tansu) for tests, started on 127.0.0.1 on a
//! free port with SQLite storage in a temp dir (so it can be restarted
//! without losing data), and killed when dropped. Benchmarks that measure
//! latency use its in-memory storage instead ([`Broker::start_in_memory`]):
//! SQLite's commit per produce request caps tansu at a few thousand
//! records a second on this machine.

use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer, ThreadedProducer};
use rdkafka::ClientConfig;
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// One tansu process and its data directory; the process is killed when
/// this is dropped.
pub struct Broker {
    /// Its port on 127.0.0.1.
    pub port: u16,
    dir: tempfile::TempDir,
    child: Option<Child>,
    /// tansu's `--storage-engine`.
    storage: &'static str,
    /// The TLS endpoint in front of it, if any: the address clients are
    /// given (tansu advertises it).
    front: Option<crate::tls::TlsFront>,
    /// librdkafka settings the helper clients below need to reach it.
    client: Vec<(&'static str, String)>,
    /// Whether tansu requires a SASL login (`--authentication`).
    authentication: bool,
}

/// A service binary the repo's scripts install with `cargo install`
/// (`$CARGO_HOME/bin/<name>`); fails naming the script if it is missing.
pub fn cargo_installed(name: &str, script: &str) -> PathBuf {
    let home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").unwrap()).join(".cargo"));
    let candidate = home.join("bin").join(name);
    assert!(
        candidate.exists(),
        "{name} is not installed at {}: run {script} (scripts/test.sh does)",
        candidate.display()
    );
    candidate
}

/// The broker binary: tansu, or another build with its command line
/// (`WEIR_TEST_KAFKA_BROKER`, e.g. its successor nisshi) to try it.
fn tansu() -> PathBuf {
    crate::needs("tansu");
    match std::env::var_os("WEIR_TEST_KAFKA_BROKER") {
        Some(path) => PathBuf::from(path),
        None => cargo_installed("tansu", "scripts/install-tansu.sh"),
    }
}

impl Broker {
    /// A broker with SQLite storage: what it holds survives [`Broker::restart`].
    pub fn start() -> Broker {
        Self::start_with("sqlite://tansu.db")
    }

    /// A broker that keeps records in memory: lost on restart, but fast.
    pub fn start_in_memory() -> Broker {
        Self::start_with("memory://tansu/")
    }

    fn start_with(storage: &'static str) -> Broker {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut b = Broker {
            port,
            dir: tempfile::tempdir().unwrap(),
            child: None,
            storage,
            front: None,
            client: Vec::new(),
            authentication: false,
        };
        b.spawn();
        b
    }

    /// A broker (SQLite storage) reached only over TLS, through stunnel on
    /// another port, as `localhost` (which `pki`'s server certificate must
    /// name); with `client_certs`, clients must present a certificate
    /// `pki` signed. tansu advertises the TLS port, so every connection a
    /// client makes after the first goes through TLS too.
    pub fn start_tls(pki: &crate::tls::Pki, client_certs: bool) -> Broker {
        let tls_port = crate::tls::free_port();
        let mut b = Broker {
            port: crate::tls::free_port(),
            dir: tempfile::tempdir().unwrap(),
            child: None,
            storage: "sqlite://tansu.db",
            front: None,
            authentication: false,
            client: vec![
                ("security.protocol", "ssl".into()),
                ("ssl.ca.location", pki.ca().display().to_string()),
            ],
        };
        if client_certs {
            b.client.push((
                "ssl.certificate.location",
                pki.client_cert().display().to_string(),
            ));
            b.client
                .push(("ssl.key.location", pki.client_key().display().to_string()));
        }
        b.front = Some(crate::tls::TlsFront::start(
            pki,
            tls_port,
            b.port,
            client_certs,
        ));
        b.spawn();
        b
    }

    /// [`Broker::start_tls`] (without client certificates) that also
    /// requires a SASL login: `user` with `password`, made a SCRAM-SHA-512
    /// user of the broker before it starts requiring logins (tansu keeps
    /// users in its storage), with `topics` (name, partitions) made
    /// first: tansu's command line cannot log in. Clients connect with
    /// `sasl_ssl`.
    pub fn start_sasl_ssl(
        pki: &crate::tls::Pki,
        user: &str,
        password: &str,
        topics: &[(&str, u32)],
    ) -> Broker {
        Self::start_sasl_ssl_users(pki, &[("scram512", user, password)], topics)
    }

    /// [`Broker::start_sasl_ssl`] with several users, each `(mechanism,
    /// name, password)`, the mechanism `scram512` or `scram256`; the test
    /// helpers log in as the first, with SCRAM-SHA-512.
    pub fn start_sasl_ssl_users(
        pki: &crate::tls::Pki,
        users: &[(&str, &str, &str)],
        topics: &[(&str, u32)],
    ) -> Broker {
        let mut b = Self::start_tls(pki, false);
        for (topic, partitions) in topics {
            b.create_topic(topic, *partitions);
        }
        for (mechanism, user, password) in users {
            let out = Command::new(tansu())
                .args(["user", "create", "--mechanism", mechanism, "--broker"])
                .arg(format!("tcp://127.0.0.1:{}", b.port))
                .args([user, password])
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "user create: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let (_, user, password) = users[0];
        b.authentication = true;
        b.restart();
        b.client[0].1 = "sasl_ssl".into();
        b.client.extend([
            ("sasl.mechanism", "SCRAM-SHA-512".to_string()),
            ("sasl.username", user.to_string()),
            ("sasl.password", password.to_string()),
        ]);
        b
    }

    /// The broker's log so far, for failure messages.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("broker.log")).unwrap_or_default()
    }

    /// Its address, as Kafka clients and pipeline files take it (the TLS
    /// endpoint's, for a broker behind one).
    pub fn bootstrap(&self) -> String {
        match &self.front {
            Some(front) => format!("localhost:{}", front.port),
            None => format!("127.0.0.1:{}", self.port),
        }
    }

    /// A librdkafka client config for the helpers: the bootstrap address
    /// and, behind TLS, the settings that reach it.
    fn client_config(&self) -> ClientConfig {
        let mut c = ClientConfig::new();
        c.set("bootstrap.servers", self.bootstrap());
        for (k, v) in &self.client {
            c.set(*k, v);
        }
        c
    }

    fn spawn(&mut self) {
        let url = format!("tcp://127.0.0.1:{}", self.port);
        let advertised = match &self.front {
            Some(front) => format!("tcp://localhost:{}", front.port),
            None => url.clone(),
        };
        let log = std::fs::File::options()
            .create(true)
            .append(true)
            .open(self.dir.path().join("broker.log"))
            .unwrap();
        // tansu takes the SQLite path relative to its working directory.
        let child = Command::new(tansu())
            .current_dir(self.dir.path())
            .env(
                "RUST_LOG",
                std::env::var("WEIR_TEST_BROKER_LOG").unwrap_or_else(|_| "warn".into()),
            )
            .args([
                "broker",
                "--listener-url",
                &url,
                "--advertised-listener-url",
                &advertised,
            ])
            .arg("--storage-engine")
            .arg(self.storage)
            .args(self.authentication.then_some("--authentication"))
            .stdout(Stdio::from(log.try_clone().unwrap()))
            .stderr(Stdio::from(log))
            .spawn()
            .expect("starting tansu");
        self.child = Some(child);
        let start = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            if let Some(status) = self.child.as_mut().unwrap().try_wait().unwrap() {
                let log =
                    std::fs::read_to_string(self.dir.path().join("broker.log")).unwrap_or_default();
                panic!("tansu exited with {status}: {log}");
            }
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "tansu did not listen"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Kills the process (the data directory stays, for a restart).
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Kills the process and starts it again on the same port and data.
    pub fn restart(&mut self) {
        self.stop();
        self.spawn();
    }

    /// Creates topic `name` with `partitions` partitions, with tansu's CLI.
    pub fn create_topic(&self, name: &str, partitions: u32) {
        let out = Command::new(tansu())
            .args([
                "topic",
                "create",
                name,
                "--partitions",
                &partitions.to_string(),
            ])
            .arg("--broker")
            .arg(format!("tcp://127.0.0.1:{}", self.port))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "topic create: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Produces `values` with keys `k-<i>` to `partition(i)` of `topic`.
    pub fn produce(&self, topic: &str, values: &[Vec<u8>], partition: impl Fn(usize) -> i32) {
        let producer: ThreadedProducer<DefaultProducerContext> =
            self.client_config().set("linger.ms", "5").create().unwrap();
        for (i, v) in values.iter().enumerate() {
            let key = format!("k-{i}");
            let record = BaseRecord::to(topic)
                .key(key.as_str())
                .payload(v.as_slice())
                .partition(partition(i));
            weir_connectors::kafka::send_blocking(&producer, record).expect("produce");
        }
        producer.flush(Duration::from_secs(30)).expect("flush");
    }
}

/// A record read back: (partition, offset, headers, value).
pub type Consumed = (i32, i64, Vec<(String, String)>, String);

/// A record read back with its value as bytes.
type ConsumedRaw = (i32, i64, Vec<(String, String)>, Vec<u8>);

impl Broker {
    /// Every committed record of `topic`, its value as text.
    pub fn consume_all(&self, topic: &str) -> Vec<Consumed> {
        self.consume_raw(topic)
            .into_iter()
            .map(|(p, o, h, v)| (p, o, h, String::from_utf8_lossy(&v).into_owned()))
            .collect()
    }

    /// The values of every committed record of `topic`, as bytes, in
    /// partition and offset order.
    pub fn consume_values(&self, topic: &str) -> Vec<Vec<u8>> {
        let mut records = self.consume_raw(topic);
        records.sort_by_key(|(p, o, _, _)| (*p, *o));
        records.into_iter().map(|(_, _, _, v)| v).collect()
    }

    /// Every committed record of `topic`, its value as bytes.
    fn consume_raw(&self, topic: &str) -> Vec<ConsumedRaw> {
        use rdkafka::consumer::{BaseConsumer, Consumer};
        use rdkafka::message::{Headers, Message};
        let c: BaseConsumer = self
            .client_config()
            .set("group.id", "weir-test-reader")
            .set("enable.auto.commit", "false")
            .set("isolation.level", "read_committed")
            .create()
            .unwrap();
        let md = c
            .fetch_metadata(Some(topic), Duration::from_secs(10))
            .unwrap();
        let mut tpl = rdkafka::TopicPartitionList::new();
        let mut ends = std::collections::HashMap::new();
        for p in md.topics()[0].partitions() {
            let (low, high) = c
                .fetch_watermarks(topic, p.id(), Duration::from_secs(10))
                .unwrap();
            if high > low {
                tpl.add_partition_offset(topic, p.id(), rdkafka::Offset::Offset(low))
                    .unwrap();
                ends.insert(p.id(), high);
            }
        }
        let mut out = Vec::new();
        if ends.is_empty() {
            return out;
        }
        c.assign(&tpl).unwrap();
        let start = Instant::now();
        while !ends.is_empty() && start.elapsed() < Duration::from_secs(30) {
            match c.poll(Duration::from_millis(100)) {
                Some(Ok(m)) => {
                    let headers = m
                        .headers()
                        .map(|h| {
                            (0..h.count())
                                .map(|i| {
                                    let x = h.get(i);
                                    (
                                        x.key.to_string(),
                                        String::from_utf8_lossy(x.value.unwrap_or(b""))
                                            .into_owned(),
                                    )
                                })
                                .collect()
                        })
                        .unwrap_or_default();
                    out.push((
                        m.partition(),
                        m.offset(),
                        headers,
                        m.payload().unwrap_or(b"").to_vec(),
                    ));
                    if m.offset() >= ends[&m.partition()] - 1 {
                        ends.remove(&m.partition());
                    }
                }
                Some(Err(e)) => panic!("consume: {e}"),
                None => {
                    if let Ok(pos) = c.position() {
                        for el in pos.elements() {
                            if let (Some(&end), rdkafka::Offset::Offset(p)) =
                                (ends.get(&el.partition()), el.offset())
                            {
                                if p >= end {
                                    ends.remove(&el.partition());
                                }
                            }
                        }
                    }
                }
            }
        }
        out
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        self.stop();
    }
}
