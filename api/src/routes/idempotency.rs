//! `Idempotency-Key`: a repeat of the same key by the same role within 24 h gets the
//! first answer again (`Idempotent-Replayed: true`), without a new fact — also when the
//! first request was cut off by a crash, an outage or a failover after its fact was
//! written, and when it was cut off before (the command runs, once). The same key with a
//! different request is `422 idempotency_key_reused`; while a request with the key is
//! still running on this replica, or holds a claim on it on a live replica,
//! `409 idempotency_key_in_use`.
//!
//! The common case costs nothing extra: the command runs at once and its append writes
//! the key's row in the same statement as the fact (an answer that wrote nothing is
//! recorded after it). Only when the key already has a row — a repeat — does the append
//! write nothing, and the key is then claimed and read: its answer replayed, or, for an
//! abandoned claim, the command run under a claim (see `pm_application::idempotency`).
//! Two requests with one key racing on two replicas both run; the first append wins and
//! the other answers with its replay.
//!
//! A keyed command runs in a task of its own, so a client that goes away mid-request does
//! not cancel it between its append and the key's bookkeeping.

use axum::body::{to_bytes, Body, Bytes};
use axum::extract::{Request, State};
use axum::http::request::Parts;
use axum::http::response::Parts as ResponseParts;
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use pm_application::fact::Fact;
use pm_application::idempotency::{Claim, IdempotencyKey, IdempotencyStore, StoredResponse};
use pm_application::log::{EventFilter, LogPosition, LogReader};
use sha2::{Digest, Sha256};

use crate::auth::Caller;
use crate::error::{ApiError, KeyTaken};
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
    let request = Keyed {
        key: IdempotencyKey {
            role: role.to_string(),
            key,
            request_hash: format!("{:x}", hasher.finalize()),
            claimed: false,
        },
        role,
        parts,
        bytes,
        next,
    };
    if !state.idempotency.enter(role, &request.key.key) {
        return Err(ApiError::key_in_use().into_response());
    }
    let guard = InFlight {
        state: state.clone(),
        role,
        key: request.key.key.clone(),
    };
    let task = tokio::spawn(unclaimed(state, guard, request));
    Ok(task.await.unwrap_or_else(|e| {
        ApiError::internal(format!("the command's task failed: {e}")).into_response()
    }))
}

/// A request with a valid `Idempotency-Key`, kept to be run again if need be.
struct Keyed {
    key: IdempotencyKey,
    role: &'static str,
    parts: Parts,
    bytes: Bytes,
    next: Next,
}

impl Keyed {
    /// Runs the command with the key (as it stands) for its append.
    async fn send(&self) -> Response {
        let mut request = Request::from_parts(self.parts.clone(), Body::from(self.bytes.clone()));
        request.extensions_mut().insert(self.key.clone());
        self.next.clone().run(request).await
    }
}

/// The common case: runs the command at once. A fact's append writes the key's row; an
/// answer that wrote nothing is recorded after it. When the key turns out to have a row
/// already (a repeat, or a request claiming it), the key is claimed and looked at.
async fn unclaimed(state: AppState, guard: InFlight, request: Keyed) -> Response {
    let response = request.send().await;
    let status = response.status();
    if status == StatusCode::CREATED || status.is_server_error() {
        // Written with its fact, or nothing to keep (a retry runs the command again).
        return response;
    }
    if response.extensions().get::<KeyTaken>().is_none() {
        let (parts, body) = match buffered(response).await {
            Ok(buffered) => buffered,
            Err(response) => return response,
        };
        let location = parts
            .headers
            .get(header::LOCATION)
            .and_then(|v| v.to_str().ok());
        let text = String::from_utf8_lossy(&body);
        match state
            .idempotency
            .record(&request.key, status.as_u16(), &text, location)
            .await
        {
            Ok(false) => {}
            Ok(true) => return Response::from_parts(parts, Body::from(body)),
            Err(e) => {
                tracing::warn!(error = %e, "could not store an idempotency answer");
                return Response::from_parts(parts, Body::from(body));
            }
        }
    }
    drop(guard);
    claimed(state, request).await
}

/// The slow path: claims the key, then replays its answer or runs the command under the
/// claim.
async fn claimed(state: AppState, mut request: Keyed) -> Response {
    let key = &request.key;
    let claim = match state
        .idempotency
        .claim(&key.role, &key.key, &key.request_hash)
        .await
    {
        Ok(claim) => claim,
        Err(e) => return ApiError::from(e).into_response(),
    };
    match claim {
        Claim::Done(stored) => replay(&state, stored).await.unwrap_or_else(|r| r),
        Claim::Mismatch => ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "idempotency_key_reused",
            "this Idempotency-Key was used for a different request",
        )
        .into_response(),
        Claim::InFlight => ApiError::key_in_use().into_response(),
        Claim::Claimed => {
            let guard = InFlight {
                state: state.clone(),
                role: request.role,
                key: request.key.key.clone(),
            };
            request.key.claimed = true;
            let response = request.send().await;
            record(&guard, response).await
        }
    }
}

/// The answer's head and body, or a `500` when the body cannot be read.
async fn buffered(response: Response) -> Result<(ResponseParts, Bytes), Response> {
    let (parts, body) = response.into_parts();
    match to_bytes(body, usize::MAX).await {
        Ok(body) => Ok((parts, body)),
        Err(e) => {
            Err(ApiError::internal(format!("could not buffer the answer: {e}")).into_response())
        }
    }
}

/// Records the answer of a command that ran under a claimed key: a `201` was recorded by
/// its append; a `5xx` gives the key up; anything else is stored to be replayed.
async fn record(guard: &InFlight, response: Response) -> Response {
    let (store, role, key) = (&guard.state.idempotency, guard.role, guard.key.as_str());
    let status = response.status();
    if status == StatusCode::CREATED {
        return response;
    }
    let release = || async {
        if let Err(e) = store.release(role, key).await {
            tracing::warn!(error = %e, "could not release an idempotency key");
        }
    };
    if status.is_server_error() {
        release().await;
        return response;
    }
    let (parts, body) = match buffered(response).await {
        Ok(buffered) => buffered,
        Err(response) => {
            // Nothing worth replaying: give the key up so a retry runs again.
            release().await;
            return response;
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
