//! What the API allows one client: the limits ([`HttpLimits`], each a flag of `switchyard
//! run`), and the two that act on requests rather than connections: a whole-body read
//! deadline (a client that trickles an upload cannot hold a slot for ever) and the number
//! of uploads received at once (each may buffer up to the upload limit). The connection
//! limits are applied by the serving loop (`serve`). Nothing here reads a body itself or
//! decides what a request means.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::BoxError;
use axum::body::{Body, Bytes, HttpBody};
use axum::extract::{Request, State};
use axum::http::header::{CONNECTION, RETRY_AFTER};
use axum::http::{HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse as _, Response};
use http_body::Frame;
use tokio::sync::Semaphore;

use super::error::ApiError;
use crate::live::Controller;

/// The limits the HTTP API holds its clients to. The defaults leave an operator on a slow
/// link room to upload a Python policy, and bound what a flood can make the controller
/// hold: at most `max_connections` sockets with a small buffer each, and
/// `max_concurrent_uploads` bodies of at most the upload limit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpLimits {
    /// Connections held open at once (`--max-connections`). A new connection past it
    /// closes the oldest one that is not serving a request; when every one is, the new
    /// one is answered 503 and closed.
    pub max_connections: usize,
    /// Time a client has to send a request's head (the request line and headers), from
    /// its connection or its first byte after the previous answer
    /// (`--header-read-timeout`).
    pub header_read_timeout: Duration,
    /// Time a kept-alive connection may wait for its next request
    /// (`--idle-timeout`).
    pub idle_timeout: Duration,
    /// Time a client has to send a request's whole body (`--body-read-timeout`).
    pub body_read_timeout: Duration,
    /// Uploads (`POST /v1/policies`) received at once (`--max-concurrent-uploads`); the
    /// excess is answered 503 with `Retry-After`.
    pub max_concurrent_uploads: usize,
}

impl Default for HttpLimits {
    fn default() -> Self {
        Self {
            max_connections: 256,
            header_read_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            // 32 MiB in two minutes is about 280 KB/s: an operator's slow uplink.
            body_read_timeout: Duration::from_secs(120),
            // Uploads compile one at a time: two lets one be received while one compiles.
            max_concurrent_uploads: 2,
        }
    }
}

/// Seconds a client refused for a busy limit is told to wait.
pub(super) const RETRY_AFTER_SECONDS: u64 = 5;

/// An answer that refuses a request for a limit: `status`, `Retry-After` when
/// `retry`, and `Connection: close`, since the refused request's body is not read.
pub(super) fn refusal(status: StatusCode, message: String, retry: bool) -> Response {
    let mut response = ApiError::new(status, message).into_response();
    let headers = response.headers_mut();
    headers.insert(CONNECTION, HeaderValue::from_static("close"));
    if retry {
        headers.insert(RETRY_AFTER, HeaderValue::from(RETRY_AFTER_SECONDS));
    }
    response
}

/// The uploads being received, bounded by `--max-concurrent-uploads`.
#[derive(Clone)]
pub(super) struct UploadSlots {
    slots: Arc<Semaphore>,
    limit: usize,
    controller: Controller,
}

impl UploadSlots {
    pub(super) fn new(limit: usize, controller: Controller) -> Self {
        Self {
            slots: Arc::new(Semaphore::new(limit)),
            limit,
            controller,
        }
    }
}

/// Lets an upload through while fewer than the limit are being received; the slot is
/// held until the answer, so a body is never buffered beyond the limit.
pub(super) async fn limit_uploads(
    State(uploads): State<UploadSlots>,
    request: Request,
    next: Next,
) -> Response {
    let Ok(_slot) = uploads.slots.clone().try_acquire_owned() else {
        uploads
            .controller
            .metrics()
            .observe_http_request_refused("uploads-busy");
        return refusal(
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "{} uploads are being received, the most this controller takes at once \
                 (--max-concurrent-uploads {}); send this one again in {RETRY_AFTER_SECONDS} s",
                uploads.limit, uploads.limit
            ),
            true,
        );
    };
    next.run(request).await
}

/// The body-read deadline and the controller whose metrics count what it refuses.
#[derive(Clone)]
pub(super) struct BodyDeadline {
    pub(super) timeout: Duration,
    pub(super) controller: Controller,
}

/// Gives a request's body `--body-read-timeout` to arrive whole. Past it, the body ends
/// in an error (so the handler stops reading) and the answer is a 408 naming the flag.
pub(super) async fn bound_body_read(
    State(deadline): State<BodyDeadline>,
    request: Request,
    next: Next,
) -> Response {
    if request.body().is_end_stream() {
        return next.run(request).await;
    }
    let expired = Arc::new(AtomicBool::new(false));
    let request = request.map(|body| {
        Body::new(Deadlined {
            body,
            sleep: Box::pin(tokio::time::sleep(deadline.timeout)),
            expired: expired.clone(),
        })
    });
    let response = next.run(request).await;
    if !expired.load(Ordering::Acquire) {
        return response;
    }
    deadline
        .controller
        .metrics()
        .observe_http_request_refused("body-timeout");
    refusal(
        StatusCode::REQUEST_TIMEOUT,
        format!(
            "the request body did not arrive within {} s (--body-read-timeout); send it \
             again over a faster link, or ask for a longer limit",
            deadline.timeout.as_secs_f64()
        ),
        false,
    )
}

/// A body that fails once its deadline passes.
struct Deadlined {
    body: Body,
    sleep: Pin<Box<tokio::time::Sleep>>,
    expired: Arc<AtomicBool>,
}

/// The error a [`Deadlined`] body ends in.
#[derive(Debug, thiserror::Error)]
#[error("the request body did not arrive within --body-read-timeout")]
struct BodyTimedOut;

impl HttpBody for Deadlined {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        if self.sleep.as_mut().poll(cx).is_ready() {
            self.expired.store(true, Ordering::Release);
            return Poll::Ready(Some(Err(Box::new(BodyTimedOut))));
        }
        Pin::new(&mut self.body)
            .poll_frame(cx)
            .map(|frame| frame.map(|f| f.map_err(BoxError::from)))
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}
