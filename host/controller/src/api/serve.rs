//! Serving the router over HTTP/1.1 with the connection limits of [`HttpLimits`]: at most
//! `max_connections` open, a head read within `header_read_timeout`, a kept-alive
//! connection closed after `idle_timeout`. `axum::serve` takes no limits, so this is its
//! accept loop with a watchdog per connection.
//!
//! A connection is in one of three phases: waiting for a request, reading a request's
//! head (from its first byte), or serving (the router has the request). The watchdog
//! closes one that waits or reads too long; a serving one is bounded by the body-read
//! deadline and the handlers. At the connection limit a new connection closes the
//! oldest one that is not serving, so a flood of idle or slow sockets cannot keep a
//! kubelet probe out; only when every connection is serving is the new one answered 503
//! and closed, never queued. It must not look at what a request asks for.

use std::collections::BTreeMap;
use std::future::Future;
use std::io;
use std::pin::{Pin, pin};
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, watch};
use tokio::time::Instant;
use tower::ServiceExt as _;

use super::limits::{HttpLimits, RETRY_AFTER_SECONDS};
use crate::live::Controller;

/// The most one connection buffers of a request's head: far above any real client's
/// headers, and it bounds what a slow or flooding connection makes the host keep.
const MAX_BUFFER_BYTES: usize = 64 << 10;

/// Waiting for the next request (or the first).
const WAITING: u8 = 0;
/// Reading a request's head.
const READING: u8 = 1;
/// The router has a request.
const SERVING: u8 = 2;

/// One open connection as the watchdog and the accept loop see it.
struct Connection {
    /// Accept order: the oldest is closed first.
    id: u64,
    phase: AtomicU8,
    /// Milliseconds since the server started when the current wait or head began.
    since_ms: AtomicU64,
    /// Whether it has been answered once: before that, its wait and its head share the
    /// header-read timeout from the connection.
    answered: AtomicBool,
    /// Wakes the watchdog when the phase changes, so it waits for the new deadline.
    changed: Notify,
    evicted: Notify,
}

/// Time measured from the server's start, in milliseconds.
#[derive(Clone, Copy)]
struct Clock(Instant);

impl Clock {
    fn now_ms(self) -> u64 {
        u64::try_from(self.0.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    fn at(self, ms: u64) -> Instant {
        self.0 + Duration::from_millis(ms)
    }
}

impl Connection {
    fn new(id: u64, clock: Clock) -> Self {
        Self {
            id,
            phase: AtomicU8::new(WAITING),
            since_ms: AtomicU64::new(clock.now_ms()),
            answered: AtomicBool::new(false),
            changed: Notify::new(),
            evicted: Notify::new(),
        }
    }

    /// Bytes came in: a wait becomes a head being read. A new connection's head keeps
    /// the connection's start as its own.
    fn bytes_read(&self, clock: Clock) {
        if self
            .phase
            .compare_exchange(WAITING, READING, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
            && self.answered.load(Ordering::Acquire)
        {
            self.since_ms.store(clock.now_ms(), Ordering::Release);
            self.changed.notify_one();
        }
    }

    fn serving(&self) {
        self.phase.store(SERVING, Ordering::Release);
    }

    fn answered(&self, clock: Clock) {
        self.answered.store(true, Ordering::Release);
        self.since_ms.store(clock.now_ms(), Ordering::Release);
        self.phase.store(WAITING, Ordering::Release);
        self.changed.notify_one();
    }

    /// When the current phase runs out, and the reason the connection is then closed;
    /// none while serving.
    fn deadline(&self, limits: &HttpLimits, clock: Clock) -> Option<(Instant, &'static str)> {
        let since = clock.at(self.since_ms.load(Ordering::Acquire));
        match self.phase.load(Ordering::Acquire) {
            WAITING if self.answered.load(Ordering::Acquire) => {
                Some((since + limits.idle_timeout, "idle-timeout"))
            }
            WAITING | READING => Some((since + limits.header_read_timeout, "header-timeout")),
            _ => None,
        }
    }
}

/// The open connections, by accept order.
#[derive(Default)]
struct Open(Mutex<BTreeMap<u64, Arc<Connection>>>);

impl Open {
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<u64, Arc<Connection>>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A socket whose reads move its connection from waiting to reading a head.
struct Watched {
    stream: TcpStream,
    connection: Arc<Connection>,
    clock: Clock,
}

impl AsyncRead for Watched {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.stream).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.connection.bytes_read(self.clock);
        }
        polled
    }
}

impl AsyncWrite for Watched {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }
}

/// What the loop and every connection's task share.
struct Server {
    router: Router,
    limits: HttpLimits,
    controller: Controller,
    open: Open,
    clock: Clock,
    http: http1::Builder,
    /// The answer to a connection past the limit when every connection is serving.
    refusal: Vec<u8>,
}

/// Serves `router` on `listener` within `limits` until `shutdown` completes, then
/// finishes the requests in flight. `controller`'s metrics count the open connections
/// and the ones closed for a limit.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    controller: Controller,
    limits: HttpLimits,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> io::Result<()> {
    let mut http = http1::Builder::new();
    // The watchdog owns the head's deadline (hyper's would also cut a kept-alive wait
    // short); the buffer bound caps what one connection holds.
    http.header_read_timeout(None)
        .max_buf_size(MAX_BUFFER_BYTES)
        .keep_alive(true);
    let server = Arc::new(Server {
        router,
        refusal: refusal(limits.max_connections),
        limits,
        controller,
        open: Open::default(),
        clock: Clock(Instant::now()),
        http,
    });
    let (stop, stopping) = watch::channel(false);
    let (done, all_done) = watch::channel(());
    let mut shutdown = pin!(shutdown);
    let mut next_id = 0_u64;
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = &mut shutdown => break,
        };
        let stream = match accepted {
            Ok((stream, _)) => stream,
            Err(error) if is_connection_error(&error) => continue,
            Err(error) => {
                // Out of file descriptors, say: make room as a new connection would,
                // and give the system a moment.
                tracing::warn!(%error, "cannot accept a connection");
                server.make_room();
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        next_id += 1;
        let Some(connection) = server.admit(next_id) else {
            // Every connection is serving: refuse in the socket's buffer, never queue.
            let _ = stream.try_write(&server.refusal);
            server
                .controller
                .metrics()
                .observe_http_connection_closed("refused");
            continue;
        };
        let _ = stream.set_nodelay(true);
        tokio::spawn(
            server
                .clone()
                .run(stream, connection, stopping.clone(), all_done.clone()),
        );
    }
    drop(listener);
    let _ = stop.send(true);
    drop(all_done);
    done.closed().await;
    Ok(())
}

impl Server {
    /// A new connection, after closing the oldest one not serving when the limit is
    /// reached; none when every connection is serving.
    fn admit(&self, id: u64) -> Option<Arc<Connection>> {
        if self.open.lock().len() >= self.limits.max_connections && !self.make_room() {
            return None;
        }
        let connection = Arc::new(Connection::new(id, self.clock));
        let mut open = self.open.lock();
        open.insert(id, connection.clone());
        self.controller
            .metrics()
            .observe_http_connections(open.len());
        Some(connection)
    }

    /// Closes the oldest connection that waits, else the oldest reading a head; false
    /// when every one is serving.
    fn make_room(&self) -> bool {
        let mut open = self.open.lock();
        let oldest = |phase: u8| {
            open.values()
                .find(|c| c.phase.load(Ordering::Acquire) == phase)
                .map(|c| c.id)
        };
        let Some(id) = oldest(WAITING).or_else(|| oldest(READING)) else {
            return false;
        };
        if let Some(victim) = open.remove(&id) {
            victim.evicted.notify_one();
        }
        self.controller
            .metrics()
            .observe_http_connections(open.len());
        self.controller
            .metrics()
            .observe_http_connection_closed("evicted");
        true
    }

    fn forget(&self, id: u64) {
        let mut open = self.open.lock();
        open.remove(&id);
        self.controller
            .metrics()
            .observe_http_connections(open.len());
    }

    /// Serves one connection until it ends, runs out of time, is evicted, or the server
    /// stops (then it finishes the request in flight).
    async fn run(
        self: Arc<Self>,
        stream: TcpStream,
        connection: Arc<Connection>,
        mut stopping: watch::Receiver<bool>,
        _done: watch::Receiver<()>,
    ) {
        let io = TokioIo::new(Watched {
            stream,
            connection: connection.clone(),
            clock: self.clock,
        });
        let service = {
            let (server, connection) = (self.clone(), connection.clone());
            hyper::service::service_fn(move |request: hyper::Request<Incoming>| {
                connection.serving();
                let (router, connection, clock) =
                    (server.router.clone(), connection.clone(), server.clock);
                async move {
                    let response = router.oneshot(request.map(Body::new)).await;
                    connection.answered(clock);
                    response
                }
            })
        };
        let mut serving = pin!(self.http.serve_connection(io, service));
        let mut stopped = false;
        loop {
            let deadline = connection.deadline(&self.limits, self.clock);
            // While serving there is no deadline: the branch is off until the phase
            // changes, and the instant given to it is never reached.
            let wake = deadline.map_or_else(Instant::now, |(at, _)| at);
            tokio::select! {
                _ = serving.as_mut() => break,
                () = tokio::time::sleep_until(wake), if deadline.is_some() => {
                    if let Some((at, reason)) = connection.deadline(&self.limits, self.clock)
                        && at <= Instant::now()
                    {
                        self.controller.metrics().observe_http_connection_closed(reason);
                        break;
                    }
                }
                () = connection.changed.notified() => {}
                () = connection.evicted.notified() => break,
                changed = stopping.changed(), if !stopped => {
                    stopped = true;
                    if changed.is_ok() {
                        serving.as_mut().graceful_shutdown();
                    }
                }
            }
        }
        self.forget(connection.id);
    }
}

/// The whole HTTP answer to a connection refused at the limit.
fn refusal(max_connections: usize) -> Vec<u8> {
    let body = serde_json::json!({
        "error": format!(
            "this controller holds {max_connections} connections, the most it takes \
             (--max-connections {max_connections}), and every one is serving a request; \
             connect again in {RETRY_AFTER_SECONDS} s"
        )
    })
    .to_string();
    format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n\
         retry-after: {RETRY_AFTER_SECONDS}\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// Errors of one connection that leave the listener fine.
fn is_connection_error(error: &io::Error) -> bool {
    matches!(
        error.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
    )
}
