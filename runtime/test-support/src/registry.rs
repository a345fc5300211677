//! A schema registry the tests run themselves, speaking the part of the
//! Confluent REST API Weir uses: `GET /schemas/ids/{id}` (the sources) and
//! `POST /subjects/{subject}/versions` (the Kafka sink registering its
//! schema; a subject can be frozen to refuse new schemas as incompatible),
//! and `GET /subjects/{subject}/versions`. No Confluent-compatible registry
//! server can be installed from the registries this machine reaches (the
//! Confluent registry and Apicurio are Java from Maven; Karapace is not on
//! PyPI), so Weir's client is tested against this one; the docs say so.
//! On 127.0.0.1, with optional HTTP basic authentication; stopped when
//! dropped, or by [`TestRegistry::stop`] to test a registry that is gone.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

#[derive(Default)]
struct Schemas {
    by_id: HashMap<u32, String>,
    subjects: HashMap<String, Vec<u32>>,
    /// Subjects that refuse a new schema as incompatible (HTTP 409), as a
    /// registry does under its compatibility rules.
    frozen: std::collections::HashSet<String>,
}

/// A running test registry.
pub struct TestRegistry {
    url: String,
    schemas: Arc<Mutex<Schemas>>,
    stop: Arc<AtomicBool>,
    requests: Arc<AtomicUsize>,
    /// Requests still to answer with a server error.
    failing: Arc<AtomicUsize>,
    thread: Option<JoinHandle<()>>,
}

impl TestRegistry {
    /// A registry on a free port of 127.0.0.1; with `auth`, every request
    /// must carry that user and password.
    pub fn start(auth: Option<(&str, &str)>) -> TestRegistry {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let schemas = Arc::new(Mutex::new(Schemas::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let requests = Arc::new(AtomicUsize::new(0));
        let failing = Arc::new(AtomicUsize::new(0));
        let expected = auth.map(|(u, p)| {
            use base64::Engine;
            format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(format!("{u}:{p}"))
            )
        });
        let thread = {
            let (schemas, stop, requests) = (schemas.clone(), stop.clone(), requests.clone());
            let failing = failing.clone();
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    match listener.accept() {
                        Ok((mut stream, _)) => {
                            requests.fetch_add(1, Ordering::Relaxed);
                            let fail = failing
                                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                                    n.checked_sub(1)
                                })
                                .is_ok();
                            let _ = if fail {
                                respond(
                                    &mut stream,
                                    "500 Internal Server Error",
                                    r#"{"error_code":50001,"message":"Error in the backend data store"}"#,
                                )
                            } else {
                                serve(stream, &schemas, expected.as_deref())
                            };
                        }
                        Err(_) => std::thread::sleep(std::time::Duration::from_millis(5)),
                    }
                }
            })
        };
        TestRegistry {
            url,
            schemas,
            stop,
            requests,
            failing,
            thread: Some(thread),
        }
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Registers `schema` (Avro JSON) under `subject` with `id`.
    pub fn register(&self, subject: &str, id: u32, schema: &str) {
        let mut s = self.schemas.lock().unwrap();
        s.by_id.insert(id, schema.to_string());
        s.subjects.entry(subject.to_string()).or_default().push(id);
    }

    /// From now on `subject` refuses any schema it does not hold yet as
    /// incompatible, as a registry's compatibility check would.
    pub fn freeze(&self, subject: &str) {
        self.schemas
            .lock()
            .unwrap()
            .frozen
            .insert(subject.to_string());
    }

    /// The ids registered under `subject`, oldest first, with their
    /// schemas.
    pub fn subject(&self, subject: &str) -> Vec<(u32, String)> {
        let s = self.schemas.lock().unwrap();
        s.subjects
            .get(subject)
            .map(|ids| ids.iter().map(|id| (*id, s.by_id[id].clone())).collect())
            .unwrap_or_default()
    }

    /// Answers the next `n` requests with a server error (500).
    pub fn fail_next(&self, n: usize) {
        self.failing.store(n, Ordering::Relaxed);
    }

    /// How many requests it has answered.
    pub fn requests(&self) -> usize {
        self.requests.load(Ordering::Relaxed)
    }

    /// Stops serving: connections are refused from now on.
    pub fn stop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for TestRegistry {
    fn drop(&mut self) {
        self.stop();
    }
}

fn respond(stream: &mut TcpStream, status: &str, body: &str) -> std::io::Result<()> {
    write!(
        stream,
        "HTTP/1.1 {status}\r\nContent-Type: application/vnd.schemaregistry.v1+json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
}

fn serve(
    mut stream: TcpStream,
    schemas: &Mutex<Schemas>,
    auth: Option<&str>,
) -> std::io::Result<()> {
    stream.set_nonblocking(false)?;
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let mut parts = line.split_whitespace();
    let (method, path) = (
        parts.next().unwrap_or("").to_string(),
        parts.next().unwrap_or("").to_string(),
    );
    let (mut length, mut authorization) = (0usize, None);
    loop {
        let mut header = String::new();
        reader.read_line(&mut header)?;
        let header = header.trim_end();
        if header.is_empty() {
            break;
        }
        if let Some((name, value)) = header.split_once(':') {
            match name.to_ascii_lowercase().as_str() {
                "content-length" => length = value.trim().parse().unwrap_or(0),
                "authorization" => authorization = Some(value.trim().to_string()),
                _ => {}
            }
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body)?;
    if auth.is_some() && authorization.as_deref() != auth {
        return respond(
            &mut stream,
            "401 Unauthorized",
            r#"{"error_code":401,"message":"Unauthorized"}"#,
        );
    }
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    let mut s = schemas.lock().unwrap();
    match (method.as_str(), segments.as_slice()) {
        ("GET", ["schemas", "ids", id]) => match id.parse().ok().and_then(|id| s.by_id.get(&id)) {
            Some(schema) => respond(
                &mut stream,
                "200 OK",
                &serde_json::json!({ "schema": schema }).to_string(),
            ),
            None => respond(
                &mut stream,
                "404 Not Found",
                r#"{"error_code":40403,"message":"Schema not found"}"#,
            ),
        },
        ("GET", ["subjects", subject, "versions"]) => match s.subjects.get(*subject) {
            Some(ids) => {
                let versions: Vec<usize> = (1..=ids.len()).collect();
                respond(
                    &mut stream,
                    "200 OK",
                    &serde_json::json!(versions).to_string(),
                )
            }
            None => respond(
                &mut stream,
                "404 Not Found",
                r#"{"error_code":40401,"message":"Subject not found"}"#,
            ),
        },
        ("POST", ["subjects", subject, "versions"]) => {
            let request: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
            let schema = request["schema"].as_str().unwrap_or_default().to_string();
            let id = match s.by_id.iter().find(|(_, v)| **v == schema) {
                Some((id, _)) => *id,
                None => s.by_id.keys().max().map_or(1, |m| m + 1),
            };
            let held = s
                .subjects
                .get(*subject)
                .is_some_and(|ids| ids.contains(&id));
            if !held && s.frozen.contains(*subject) {
                return respond(
                    &mut stream,
                    "409 Conflict",
                    &serde_json::json!({
                        "error_code": 409,
                        "message": format!(
                            "Schema being registered is incompatible with an earlier schema for subject \"{subject}\""
                        ),
                    })
                    .to_string(),
                );
            }
            s.by_id.insert(id, schema);
            if !held {
                s.subjects.entry(subject.to_string()).or_default().push(id);
            }
            respond(
                &mut stream,
                "200 OK",
                &serde_json::json!({ "id": id }).to_string(),
            )
        }
        _ => respond(
            &mut stream,
            "404 Not Found",
            r#"{"error_code":404,"message":"HTTP 404 Not Found"}"#,
        ),
    }
}
