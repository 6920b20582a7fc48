//! HTTPS for the webhook: tokio-rustls over the accepted sockets, hyper's HTTP/1.1 over
//! the TLS streams (the API server calls webhooks over HTTP/1.1 and keeps connections
//! alive). A handshake must finish within [`HANDSHAKE_TIMEOUT`], a request's head arrive
//! within [`HEAD_TIMEOUT`] of the connection going quiet (which also closes idle ones), a
//! request be answered within [`REQUEST_TIMEOUT`]; at most [`MAX_CONNECTIONS`] are open,
//! and a connection past them is closed at once. It must not look at what a request asks
//! for: that is the router's.

use std::future::Future;
use std::io;
use std::pin::pin;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, watch};
use tokio_rustls::TlsAcceptor;
use tower::ServiceExt as _;

/// The most connections open at once. The API server keeps a few per webhook; the bound
/// keeps a flood of sockets from exhausting the process's file descriptors.
pub(super) const MAX_CONNECTIONS: usize = 256;
/// Time a client has to finish the TLS handshake.
pub(super) const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Time a client has to send a request's head once the connection is waiting for one;
/// a kept-alive connection that sends nothing for that long is closed. Go's HTTP client,
/// the API server's, closes its own idle connections after 90 s, so a shorter wait here
/// is rarely met by a request already on its way.
pub(super) const HEAD_TIMEOUT: Duration = Duration::from_secs(30);
/// Time a request's body has to arrive and be answered: the API server's own wait is
/// the configuration's `timeoutSeconds`, at most 30 s.
pub(super) const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// Serves `router` over TLS on `listener` until `shutdown` completes, then finishes the
/// requests in flight.
pub(super) async fn serve(
    listener: TcpListener,
    tls: Arc<rustls::ServerConfig>,
    router: Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> io::Result<()> {
    let acceptor = TlsAcceptor::from(tls);
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let (stop, stopping) = watch::channel(false);
    let mut shutdown = pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = &mut shutdown => break,
        };
        let stream = match accepted {
            Ok((stream, _)) => stream,
            Err(error) => {
                // A connection reset before it was accepted, or no file descriptor
                // left: the listener itself is fine; give the system a moment.
                tracing::warn!(%error, "the webhook cannot accept a connection");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            tracing::warn!(
                max = MAX_CONNECTIONS,
                "the webhook holds its most connections; closing a new one"
            );
            continue;
        };
        let _ = stream.set_nodelay(true);
        let (acceptor, router, stopping) = (acceptor.clone(), router.clone(), stopping.clone());
        tokio::spawn(async move {
            connection(stream, acceptor, router, stopping).await;
            drop(slot);
        });
    }
    drop(listener);
    let _ = stop.send(true);
    // Every connection holds a slot until it ends: all of them back means all ended.
    let _ = slots.acquire_many(MAX_CONNECTIONS as u32).await;
    Ok(())
}

/// One connection: the handshake, then requests until the client closes, a timeout, or
/// the server stops (the request in flight is finished first).
async fn connection(
    stream: TcpStream,
    acceptor: TlsAcceptor,
    router: Router,
    mut stopping: watch::Receiver<bool>,
) {
    let tls = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
        Ok(Ok(tls)) => tls,
        Ok(Err(error)) => {
            tracing::debug!(%error, "webhook TLS handshake failed");
            return;
        }
        Err(_) => return,
    };
    let service = hyper::service::service_fn(move |request: hyper::Request<Incoming>| {
        let router = router.clone();
        async move {
            match tokio::time::timeout(REQUEST_TIMEOUT, router.oneshot(request.map(Body::new)))
                .await
            {
                Ok(response) => response,
                Err(_) => Ok(axum::response::IntoResponse::into_response(
                    crate::api::ApiError::new(
                        axum::http::StatusCode::REQUEST_TIMEOUT,
                        format!(
                            "the review did not arrive within {} s",
                            REQUEST_TIMEOUT.as_secs()
                        ),
                    ),
                )),
            }
        }
    });
    let mut http = http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(HEAD_TIMEOUT)
        .keep_alive(true);
    let mut serving = pin!(http.serve_connection(TokioIo::new(tls), service));
    tokio::select! {
        _ = serving.as_mut() => return,
        _ = stopping.wait_for(|stopped| *stopped) => {}
    }
    serving.as_mut().graceful_shutdown();
    let _ = serving.await;
}
