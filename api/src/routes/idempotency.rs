//! `Idempotency-Key`: a repeat of the same key by the same role within 24 h gets the
//! first answer again (`Idempotent-Replayed: true`), without a new fact. The same key
//! with a different request is `422 idempotency_key_reused`; while the first request is
//! still running, `409 idempotency_key_in_use`.

use axum::body::{to_bytes, Body};
use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use pm_application::idempotency::{Claim, IdempotencyStore, StoredResponse};
use sha2::{Digest, Sha256};

use crate::auth::Caller;
use crate::error::ApiError;
use crate::routes::commands::EVENT_POSITION;
use crate::state::AppState;

const HEADER: &str = "idempotency-key";

/// The middleware.
pub async fn idempotency(State(state): State<AppState>, req: Request, next: Next) -> Response {
    match run(state, req, next).await {
        Ok(response) | Err(response) => response,
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

    let store = &state.idempotency;
    match store
        .claim(role, &key, &hash)
        .await
        .map_err(|e| ApiError::from(e).into_response())?
    {
        Claim::Done(stored) => return Ok(replay(stored)),
        Claim::Mismatch => {
            return Err(ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "idempotency_key_reused",
                "this Idempotency-Key was used for a different request",
            )
            .into_response())
        }
        Claim::InFlight => {
            return Err(ApiError::new(
                StatusCode::CONFLICT,
                "idempotency_key_in_use",
                "a request with this Idempotency-Key is still running; retry later",
            )
            .into_response())
        }
        Claim::Claimed => {}
    }

    let response = next
        .run(Request::from_parts(parts, Body::from(bytes)))
        .await;
    let status = response.status();
    if status.is_server_error() {
        release(store, role, &key).await;
        return Ok(response);
    }
    let (parts, body) = response.into_parts();
    let body = match to_bytes(body, usize::MAX).await {
        Ok(body) => body,
        Err(e) => {
            // Nothing worth replaying: give the key up so a retry runs again.
            release(store, role, &key).await;
            return Err(
                ApiError::internal(format!("could not buffer the answer: {e}")).into_response(),
            );
        }
    };
    let header_text = |name: &str| {
        parts
            .headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    let stored = StoredResponse {
        status: status.as_u16(),
        body: String::from_utf8_lossy(&body).into_owned(),
        location: header_text(header::LOCATION.as_str()),
        position: header_text(EVENT_POSITION),
    };
    if let Err(e) = store.complete(role, &key, &stored).await {
        tracing::warn!(error = %e, "could not store an idempotency answer");
    }
    Ok(Response::from_parts(parts, Body::from(body)))
}

/// Gives a claimed key up (its request produced nothing worth replaying).
async fn release(store: &impl IdempotencyStore, role: &str, key: &str) {
    if let Err(e) = store.release(role, key).await {
        tracing::warn!(error = %e, "could not release an idempotency key");
    }
}

fn replay(stored: StoredResponse) -> Response {
    let status = StatusCode::from_u16(stored.status).unwrap_or(StatusCode::OK);
    let mut response = (status, stored.body).into_response();
    let headers = response.headers_mut();
    let content_type = if status.is_success() {
        "application/json"
    } else {
        "application/problem+json"
    };
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert("idempotent-replayed", HeaderValue::from_static("true"));
    if let Some(v) = stored.location.and_then(|l| HeaderValue::from_str(&l).ok()) {
        headers.insert(header::LOCATION, v);
    }
    if let Some(v) = stored.position.and_then(|p| HeaderValue::from_str(&p).ok()) {
        headers.insert(EVENT_POSITION, v);
    }
    response
}
