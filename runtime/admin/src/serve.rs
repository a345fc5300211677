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

use crate::ConnectionLimits;
use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};
use tokio::net::TcpListener;
use tokio::sync::{oneshot, Notify, OwnedSemaphorePermit, Semaphore};

/// How long a new connection waits for the one it displaces to close.
const DISPLACE_WAIT: Duration = Duration::from_secs(1);

/// Serves `app` on `listener` until `shutdown` fires.
pub(super) async fn serve(
    listener: TcpListener,
    app: Router,
    limits: ConnectionLimits,
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
        let stream = match accepted {
            Ok((stream, _)) => stream,
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
        };
        let open = open.clone();
        tokio::spawn(async move {
            let connection = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(limits.header_timeout)
                .serve_connection(TokioIo::new(stream), service);
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
            open.remove(id);
            drop(permit);
        });
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
}

/// Counts a request in [`InRequest::busy`] while it lives.
struct Busy(Arc<AtomicUsize>);

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl<S, R> hyper::service::Service<R> for InRequest<S>
where
    S: hyper::service::Service<R>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, S::Error>> + Send>>;

    fn call(&self, request: R) -> Self::Future {
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
