//! The admin API's accept loop: HTTP/1 with limits that keep a hostile or
//! broken client from taking the pipeline down with it.
//!
//! - **Connections**: at most [`ConnectionLimits::max_connections`] at once;
//!   one more is closed as soon as it is accepted. Without a limit, idle
//!   connections exhausted the process's file descriptors and the epoch
//!   loop failed to open its input ("Too many open files").
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
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::{oneshot, Semaphore};

/// Serves `app` on `listener` until `shutdown` fires.
pub(super) async fn serve(
    listener: TcpListener,
    app: Router,
    limits: ConnectionLimits,
    mut shutdown: oneshot::Receiver<()>,
) {
    let permits = Arc::new(Semaphore::new(limits.max_connections));
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
        let Ok(permit) = permits.clone().try_acquire_owned() else {
            refused += 1;
            if refused.is_power_of_two() {
                tracing::warn!(
                    "admin API: {} connections open, the limit; closed {refused} more so far",
                    limits.max_connections
                );
            }
            drop(stream);
            continue;
        };
        let service = TowerToHyperService::new(app.clone());
        tokio::spawn(async move {
            let connection = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(limits.header_timeout)
                .serve_connection(TokioIo::new(stream), service);
            let _ = connection.await;
            drop(permit);
        });
    }
}
