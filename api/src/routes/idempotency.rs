//! `Idempotency-Key`: a repeat of the same key by the same role within 24 h gets the
//! first answer again (`Idempotent-Replayed: true`), without a new fact — also when the
//! first request was cut off by a crash, an outage or a failover after its fact was
//! written (the append completes the key in its own statement, and the answer is rebuilt
//! from that fact), and when it was cut off before (its claim is taken over and the
//! command runs, once). The same key with a different request is
//! `422 idempotency_key_reused`; while the first request is still running on a live
//! replica, `409 idempotency_key_in_use`.
//!
//! A keyed command runs in a task of its own, so a client that goes away mid-request does
//! not cancel it between its append and the key's bookkeeping.

use axum::body::{to_bytes, Body};
use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use pm_application::fact::Fact;
use pm_application::idempotency::{Claim, IdempotencyStore, StoredResponse};
use pm_application::log::{EventFilter, LogPosition, LogReader};
use sha2::{Digest, Sha256};

use crate::auth::Caller;
use crate::error::ApiError;
use crate::routes::commands::{fact_answer, EVENT_POSITION};
use crate::state::AppState;

const HEADER: &str = "idempotency-key";

/// The middleware.
pub async fn idempotency(State(state): State<AppState>, req: Request, next: Next) -> Response {
    match run(state, req, next).await {
        Ok(response) | Err(response) => response,
    }
}

/// Ends the key's "in flight here" mark when the request's task ends, however it ends.
struct InFlight {
    state: AppState,
    role: &'static str,
    key: String,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.state.idempotency.finish(self.role, &self.key);
    }
}

async fn run(state: AppState, req: Request, next: Next) -> Result<Response, Response> {
    let Some(key) = req.headers().get(HEADER) else {
        return Ok(next.run(req).await);
    };
    let key = key
        .to_str()
        .ok()
        .filter(|k| !k.is_empty() && k.len() <= 255)
        .map(str::to_string)
        .ok_or_else(|| {
            ApiError::parameter(
                "Idempotency-Key",
                "must be 1 to 255 visible ASCII characters",
            )
            .into_response()
        })?;
    let role = req
        .extensions()
        .get::<Caller>()
        .copied()
        .unwrap_or(Caller(None))
        .role_name();
    let (parts, body) = req.into_parts();
    let bytes = to_bytes(body, state.max_body_bytes).await.map_err(|_| {
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "payload_too_large",
            format!("the body is larger than {} bytes", state.max_body_bytes),
        )
        .into_response()
    })?;
    let mut hasher = Sha256::new();
    hasher.update(parts.method.as_str());
    hasher.update(b" ");
    hasher.update(parts.uri.path());
    hasher.update(b"\n");
    hasher.update(&bytes);
    let hash = format!("{:x}", hasher.finalize());

    let claim = state
        .idempotency
        .claim(role, &key, &hash)
        .await
        .map_err(|e| ApiError::from(e).into_response())?;
    match claim {
        Claim::Done(stored) => return replay(&state, stored).await,
        Claim::Mismatch => {
            return Err(ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "idempotency_key_reused",
                "this Idempotency-Key was used for a different request",
            )
            .into_response())
        }
        Claim::InFlight => {
            let mut response = ApiError::new(
                StatusCode::CONFLICT,
                "idempotency_key_in_use",
                "a request with this Idempotency-Key is still running; retry later",
            )
            .into_response();
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
            return Err(response);
        }
        Claim::Claimed => {}
    }
    let guard = InFlight {
        state: state.clone(),
        role,
        key,
    };
    let task = tokio::spawn(async move {
        let response = next
            .run(Request::from_parts(parts, Body::from(bytes)))
            .await;
        let answer = record(&guard, response).await;
        drop(guard);
        answer
    });
    Ok(task.await.unwrap_or_else(|e| {
        ApiError::internal(format!("the command's task failed: {e}")).into_response()
    }))
}

/// Records the answer of a command that ran under a claimed key: a `201` was recorded by
/// its append; a `5xx` gives the key up; anything else is stored to be replayed.
async fn record(guard: &InFlight, response: Response) -> Response {
    let (store, role, key) = (&guard.state.idempotency, guard.role, guard.key.as_str());
    let status = response.status();
    if status == StatusCode::CREATED {
        return response;
    }
    if status.is_server_error() {
        if let Err(e) = store.release(role, key).await {
            tracing::warn!(error = %e, "could not release an idempotency key");
        }
        return response;
    }
    let (parts, body) = response.into_parts();
    let body = match to_bytes(body, usize::MAX).await {
        Ok(body) => body,
        Err(e) => {
            // Nothing worth replaying: give the key up so a retry runs again.
            if let Err(e) = store.release(role, key).await {
                tracing::warn!(error = %e, "could not release an idempotency key");
            }
            return ApiError::internal(format!("could not buffer the answer: {e}")).into_response();
        }
    };
    let location = parts
        .headers
        .get(header::LOCATION)
        .and_then(|v| v.to_str().ok());
    let text = String::from_utf8_lossy(&body);
    if let Err(e) = store
        .complete(role, key, status.as_u16(), &text, location)
        .await
    {
        tracing::warn!(error = %e, "could not store an idempotency answer");
    }
    Response::from_parts(parts, Body::from(body))
}

/// The stored answer, replayed with `Idempotent-Replayed: true`. An appended fact is read
/// back from the log and answered as its command answered it.
async fn replay(state: &AppState, stored: StoredResponse) -> Result<Response, Response> {
    let (status, body, location, position) = match stored {
        StoredResponse::Appended(position) => {
            let fact = read_fact(state, position)
                .await
                .map_err(IntoResponse::into_response)?;
            let (body, location) = fact_answer(&fact);
            (
                StatusCode::CREATED,
                body,
                Some(location),
                Some(position.to_string()),
            )
        }
        StoredResponse::Answer {
            status,
            body,
            location,
        } => {
            let status = StatusCode::from_u16(status).unwrap_or(StatusCode::OK);
            (status, body, location, None)
        }
    };
    let mut response = (status, body).into_response();
    let headers = response.headers_mut();
    let content_type = if status.is_success() {
        "application/json"
    } else {
        "application/problem+json"
    };
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert("idempotent-replayed", HeaderValue::from_static("true"));
    if let Some(v) = location.and_then(|l| HeaderValue::from_str(&l).ok()) {
        headers.insert(header::LOCATION, v);
    }
    if let Some(v) = position.and_then(|p| HeaderValue::from_str(&p).ok()) {
        headers.insert(EVENT_POSITION, v);
    }
    Ok(response)
}

/// The fact at `position` of the log.
async fn read_fact(state: &AppState, position: LogPosition) -> Result<Fact, ApiError> {
    let before = LogPosition(position.value() - 1);
    let events = state
        .log
        .read_after(before, &EventFilter::default(), 1)
        .await?;
    let event = events
        .into_iter()
        .next()
        .filter(|e| e.position == position)
        .ok_or_else(|| {
            ApiError::internal(format!("the fact of a completed key is not at {position}"))
        })?;
    Fact::from_logged(&event).map_err(ApiError::internal)
}
