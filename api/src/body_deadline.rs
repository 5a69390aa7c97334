//! A request body must arrive whole within `PM_BODY_READ_TIMEOUT_MS` (TRUST.md "The
//! boundary"): otherwise `408 request_timeout` and the connection closes. Without it one
//! client that sends a `Content-Length` and then nothing holds a connection (and, before
//! the shutdown grace, a shutdown) forever; a few thousand such clients — no token needed —
//! fill the connection cap.
//!
//! The body is not read here: it is wrapped, so whoever reads it (a JSON extractor, the
//! `Idempotency-Key` middleware, `/mcp`) reads as before and nothing is read for a request
//! the guard refuses. The deadline runs from when the headers have arrived, over the whole
//! body (a client that trickles a byte at a time does not reset it). A reader that hits it
//! gets an error; whatever it answers then, this layer answers `408` instead.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes, HttpBody};
use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http_body::Frame;
use tokio::time::Sleep;

use crate::error::ApiError;

/// The code of the answer to a body that did not arrive in time.
pub const REQUEST_TIMEOUT: &str = "request_timeout";

/// A request body that fails once its deadline passes.
struct DeadlineBody {
    inner: Body,
    deadline: Pin<Box<Sleep>>,
    expired: Arc<AtomicBool>,
}

impl HttpBody for DeadlineBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let this = self.get_mut();
        if let Poll::Ready(frame) = Pin::new(&mut this.inner).poll_frame(cx) {
            return Poll::Ready(frame);
        }
        match this.deadline.as_mut().poll(cx) {
            Poll::Ready(()) => {
                this.expired.store(true, Ordering::Relaxed);
                Poll::Ready(Some(Err(axum::Error::new(
                    "the request body did not arrive in time",
                ))))
            }
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

/// The middleware: wraps the body of every request that has one.
pub async fn layer(State(limit): State<Duration>, req: Request, next: Next) -> Response {
    if req.body().is_end_stream() {
        return next.run(req).await;
    }
    let expired = Arc::new(AtomicBool::new(false));
    let (parts, body) = req.into_parts();
    let body = Body::new(DeadlineBody {
        inner: body,
        deadline: Box::pin(tokio::time::sleep(limit)),
        expired: expired.clone(),
    });
    let response = next.run(Request::from_parts(parts, body)).await;
    if !expired.load(Ordering::Relaxed) {
        return response;
    }
    metrics::counter!("pm_http_body_timeouts_total").increment(1);
    crate::metrics::refused(crate::metrics::refusal::BODY_TIMEOUT);
    let mut answer = ApiError::new(
        StatusCode::REQUEST_TIMEOUT,
        REQUEST_TIMEOUT,
        format!(
            "the request body did not arrive within {} ms",
            limit.as_millis()
        ),
    )
    .into_response();
    // The rest of the body will never be read: the connection ends with this answer.
    answer
        .headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    answer
}
