//! The admin API's accept loop: HTTP/1 with limits that keep a hostile or
//! broken client from taking the pipeline down with it.
//!
//! - **Connections**: at most [`ConnectionLimits::max_connections`] at once.
//!   Without a limit, idle connections exhausted the process's file
//!   descriptors and the epoch loop failed to open its input ("Too many
//!   open files"). At the limit, a new connection takes the place of the
//!   oldest one that is not in a request (still sending its headers, or
//!   idle between requests), which is closed (a request that began
//!   meanwhile is answered first); only when every connection is
//!   in a request is the new one closed. So clients that hold connections
//!   without completing a request — the way to lock others out once a
//!   request without the token is refused at its headers — cannot keep an
//!   authenticated call or a health check from being served. (A client
//!   that opens new connections faster than a legitimate one sends its
//!   headers can still displace it: keep the API on a trusted network.)
//! - **Header timeout**: a request's headers must arrive within
//!   [`ConnectionLimits::header_timeout`] — also between the requests of a
//!   kept-alive connection — or the connection is closed (a half-sent
//!   request used to hold its connection for minutes).
//! - **Request timeout**: a whole request, body included, must be read and
//!   answered within [`ConnectionLimits::request_timeout`].
//!
//! Running out of descriptors while accepting is waited out, not fatal.
//!
//! With TLS, the handshake is part of the header timeout, and a
//! connection still in its handshake can be displaced like an idle one.
//! Every request carries its client's address ([`ClientAddr`]) for the
//! token backoff and the audit trail.

use crate::tls::Tls;
use crate::ConnectionLimits;
use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use std::collections::HashMap;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};
use tokio::net::TcpListener;
use tokio::sync::{oneshot, Notify, OwnedSemaphorePermit, Semaphore};

/// How long a new connection waits for the one it displaces to close.
const DISPLACE_WAIT: Duration = Duration::from_secs(1);

/// The address a request came from.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ClientAddr(pub SocketAddr);

/// Serves `app` on `listener` (over TLS when `tls` is set) until
/// `shutdown` fires.
pub(super) async fn serve(
    listener: TcpListener,
    app: Router,
    limits: ConnectionLimits,
    tls: Option<Arc<Tls>>,
    mut shutdown: oneshot::Receiver<()>,
) {
    let permits = Arc::new(Semaphore::new(limits.max_connections));
    let open = Arc::new(OpenConnections::default());
    let mut refused: u64 = 0;
    loop {
        let accepted = tokio::select! {
            a = listener.accept() => a,
            _ = &mut shutdown => return,
        };
        let (stream, peer) = match accepted {
            // Small writes go out at once: a TLS handshake's flights and
            // session tickets otherwise wait on the client's delayed ACK
            // (~40 ms per connection).
            Ok(accepted) => {
                let _ = accepted.0.set_nodelay(true);
                accepted
            }
            Err(e) => {
                // EMFILE/ENFILE and the like: the connection waits in the
                // backlog; try again shortly instead of spinning.
                tracing::warn!("admin API: accepting a connection: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let Some(permit) = admit(&permits, &open).await else {
            refused += 1;
            if refused.is_power_of_two() {
                tracing::warn!(
                    "admin API: {} connections open and none could be displaced in time; closed \
                     {refused} more so far",
                    limits.max_connections
                );
            }
            drop(stream);
            continue;
        };
        let (id, busy, displaced) = open.add();
        let service = InRequest {
            inner: TowerToHyperService::new(app.clone()),
            busy: busy.clone(),
            client: ClientAddr(peer),
        };
        let open = open.clone();
        let tls = tls.clone();
        tokio::spawn(async move {
            match tls {
                None => drive(stream, service, limits, busy, displaced).await,
                Some(tls) => {
                    let handshake =
                        tokio::time::timeout(limits.header_timeout, tls.acceptor().accept(stream));
                    tokio::select! {
                        done = handshake => match done {
                            Ok(Ok(stream)) => drive(stream, service, limits, busy, displaced).await,
                            Ok(Err(e)) => tracing::debug!("admin API: TLS handshake with {peer}: {e}"),
                            Err(_) => tracing::debug!("admin API: TLS handshake with {peer} timed out"),
                        },
                        _ = displaced.notified() => {}
                    }
                }
            }
            open.remove(id);
            drop(permit);
        });
    }
}

/// Serves one connection's requests until it closes or is displaced.
async fn drive<I, S>(
    io: I,
    service: S,
    limits: ConnectionLimits,
    busy: Arc<AtomicUsize>,
    displaced: Arc<Notify>,
) where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    S: hyper::service::Service<
            hyper::Request<hyper::body::Incoming>,
            Response = axum::response::Response,
        > + Send
        + 'static,
    S::Future: Send + 'static,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let connection = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .serve_connection(TokioIo::new(io), service);
    let mut connection = std::pin::pin!(connection);
    tokio::select! {
        _ = connection.as_mut() => {}
        // Dropped (the socket closes) while no request is being
        // handled; one that began meanwhile is answered first.
        // (This task polls the connection, so no request can
        // begin between this check and the drop.)
        _ = displaced.notified() => {
            if busy.load(Ordering::Acquire) > 0 {
                connection.as_mut().graceful_shutdown();
                let _ = connection.await;
            }
        }
    }
}

/// A permit for a new connection: a free one, or the one of the oldest
/// connection not in a request, which is closed for it.
async fn admit(permits: &Arc<Semaphore>, open: &OpenConnections) -> Option<OwnedSemaphorePermit> {
    if let Ok(permit) = permits.clone().try_acquire_owned() {
        return Some(permit);
    }
    if !open.displace_oldest_idle() {
        return None;
    }
    tokio::time::timeout(DISPLACE_WAIT, permits.clone().acquire_owned())
        .await
        .ok()?
        .ok()
}

/// The connections being served, for choosing one to displace.
#[derive(Default)]
struct OpenConnections {
    next_id: AtomicUsize,
    by_id: Mutex<HashMap<usize, Connection>>,
}

struct Connection {
    accepted: Instant,
    /// Requests of this connection being handled (0 or 1 for HTTP/1).
    busy: Arc<AtomicUsize>,
    displaced: Arc<Notify>,
}

impl OpenConnections {
    fn add(&self) -> (usize, Arc<AtomicUsize>, Arc<Notify>) {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (busy, displaced) = (Arc::new(AtomicUsize::new(0)), Arc::new(Notify::new()));
        let connection = Connection {
            accepted: Instant::now(),
            busy: busy.clone(),
            displaced: displaced.clone(),
        };
        self.lock().insert(id, connection);
        (id, busy, displaced)
    }

    fn remove(&self, id: usize) {
        self.lock().remove(&id);
    }

    /// Closes the oldest connection not in a request; false if every one is.
    fn displace_oldest_idle(&self) -> bool {
        let mut by_id = self.lock();
        let oldest = by_id
            .iter()
            .filter(|(_, c)| c.busy.load(Ordering::Acquire) == 0)
            .min_by_key(|(_, c)| c.accepted)
            .map(|(&id, _)| id);
        match oldest.and_then(|id| by_id.remove(&id)) {
            Some(c) => {
                c.displaced.notify_one();
                true
            }
            None => false,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<usize, Connection>> {
        self.by_id.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The connection's service, counting the requests it is handling: from
/// the moment a request's headers are complete until its response is made.
struct InRequest<S> {
    inner: S,
    busy: Arc<AtomicUsize>,
    client: ClientAddr,
}

/// Counts a request in [`InRequest::busy`] while it lives.
struct Busy(Arc<AtomicUsize>);

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl<S, B> hyper::service::Service<hyper::Request<B>> for InRequest<S>
where
    S: hyper::service::Service<hyper::Request<B>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, S::Error>> + Send>>;

    fn call(&self, mut request: hyper::Request<B>) -> Self::Future {
        request.extensions_mut().insert(self.client);
        self.busy.fetch_add(1, Ordering::AcqRel);
        let busy = Busy(self.busy.clone());
        let response = self.inner.call(request);
        Box::pin(async move {
            let response = response.await;
            drop(busy);
            response
        })
    }
}
