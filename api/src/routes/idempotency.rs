//! `Idempotency-Key` at the HTTP edge: this middleware only maps the header in and the
//! use case's outcome out. The policy — run at once, record, claim, replay, take over —
//! is `pm_application::idempotency` (see there and ARCHITECTURE.md, "Idempotency").
//!
//! In: the header (1 to 255 visible ASCII characters, else `400 invalid_parameter`), the
//! caller's principal and the body become an [`IdempotencyKey`]; the route's handler becomes
//! the [`KeyedCommand`] the use case runs (so every answer of the endpoint, its body's
//! rejections included, is kept and replayed as today). Out: the command's own answer; a
//! replay with `Idempotent-Replayed: true` (a fact rebuilt as `201` with `Location` and
//! `X-Event-Position`); `422 idempotency_key_reused`; `409 idempotency_key_in_use` with
//! `Retry-After`.

use axum::body::{to_bytes, Body, Bytes};
use axum::extract::{Request, State};
use axum::http::request::Parts;
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use pm_application::idempotency::{
    Handled, IdempotencyKey, KeyedCommand, Ran, Replay, RunOutcome, StoredAnswer,
};

use crate::auth::Caller;
use crate::error::{ApiError, KeyTaken};
use crate::routes::commands::{fact_answer, EVENT_POSITION};
use crate::state::AppState;

/// The header (lowercase, as `HeaderMap` keys are).
pub const HEADER: &str = "idempotency-key";

/// The middleware.
pub async fn idempotency(State(state): State<AppState>, req: Request, next: Next) -> Response {
    if !req.headers().contains_key(HEADER) {
        return next.run(req).await;
    }
    match keyed(&state, req, next).await {
        Ok((key, command)) => answer(state.idempotency.run(key, command).await),
        Err(rejected) => rejected.into_response(),
    }
}

/// The refusal of a key that is not 1 to 255 visible ASCII characters (`400`).
pub(crate) fn invalid_key() -> ApiError {
    ApiError::parameter(
        "Idempotency-Key",
        "must be 1 to 255 visible ASCII characters",
    )
}

/// The request's key and its command: `400` for an invalid key, `413` for an oversized
/// body.
async fn keyed(
    state: &AppState,
    req: Request,
    next: Next,
) -> Result<(IdempotencyKey, HandlerCommand), ApiError> {
    let key = req
        .headers()
        .get(HEADER)
        .and_then(|k| k.to_str().ok())
        .filter(|k| !k.is_empty() && k.len() <= 255)
        .map(str::to_string)
        .ok_or_else(invalid_key)?;
    // Keys are the principal's own: two principals never share (or replay) each other's.
    // The guard put the caller there; a route without one is a wiring bug, not open mode.
    let principal = req
        .extensions()
        .get::<Caller>()
        .map(|c| c.principal().name().to_string())
        .ok_or_else(|| ApiError::internal("a command route without the role guard"))?;
    let (parts, body) = req.into_parts();
    let bytes = to_bytes(body, state.max_body_bytes).await.map_err(|_| {
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "payload_too_large",
            format!("the body is larger than {} bytes", state.max_body_bytes),
        )
    })?;
    // A malformed fence is the handler's to refuse (400), as the request it would keep.
    let fence = crate::extract::turn_fence(&parts.headers).ok().flatten();
    let key = IdempotencyKey::for_fenced_request(
        &principal,
        &key,
        parts.method.as_str(),
        parts.uri.path(),
        fence,
        &bytes,
    );
    Ok((key, HandlerCommand { parts, bytes, next }))
}

/// The route's handler as the command the use case runs, kept to be run again.
struct HandlerCommand {
    parts: Parts,
    bytes: Bytes,
    next: Next,
}

impl KeyedCommand for HandlerCommand {
    type Response = Response;

    /// Runs the handler with the key in the request (the command context takes it to the
    /// append) and says what its answer means for the key: `201` appended, `5xx` failed,
    /// the [`KeyTaken`] mark (the typed `IdempotencyKeyTaken`) taken, anything else an
    /// answer to keep.
    async fn run(&self, key: IdempotencyKey) -> Ran<Response> {
        let mut request = Request::from_parts(self.parts.clone(), Body::from(self.bytes.clone()));
        request.extensions_mut().insert(key);
        let response = self.next.clone().run(request).await;
        let status = response.status();
        let outcome = if status == StatusCode::CREATED {
            RunOutcome::Appended
        } else if status.is_server_error() {
            RunOutcome::Failed
        } else if response.extensions().get::<KeyTaken>().is_some() {
            RunOutcome::KeyTaken
        } else {
            return kept(response).await;
        };
        Ran { outcome, response }
    }
}

/// An answer that wrote nothing, buffered to be kept; a body that cannot be read is a
/// `500` with nothing to keep.
async fn kept(response: Response) -> Ran<Response> {
    let (parts, body) = response.into_parts();
    let body = match to_bytes(body, usize::MAX).await {
        Ok(body) => body,
        Err(e) => {
            let response =
                ApiError::internal(format!("could not buffer the answer: {e}")).into_response();
            return Ran {
                outcome: RunOutcome::Failed,
                response,
            };
        }
    };
    let answer = StoredAnswer {
        status: parts.status.as_u16(),
        body: String::from_utf8_lossy(&body).into_owned(),
        location: parts
            .headers
            .get(header::LOCATION)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string),
    };
    Ran {
        outcome: RunOutcome::Answered(answer),
        response: Response::from_parts(parts, Body::from(body)),
    }
}

/// The use case's outcome as an HTTP answer.
fn answer(handled: Handled<Response>) -> Response {
    match handled {
        Handled::Ran(response) => response,
        Handled::Replayed(replay) => replayed(replay),
        Handled::Reused => ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "idempotency_key_reused",
            "this Idempotency-Key was used for a different request",
        )
        .into_response(),
        Handled::InUse => ApiError::key_in_use().into_response(),
        Handled::Failed(e) => ApiError::from(e).into_response(),
    }
}

/// The first answer again, with `Idempotent-Replayed: true`: a fact as its command
/// answered it, or the stored answer.
fn replayed(replay: Replay) -> Response {
    let (status, body, location, position) = match replay {
        Replay::Appended {
            fact,
            position,
            unreadable,
        } => {
            let (body, location) = fact_answer(&fact);
            let body = unreadable.unwrap_or(body);
            (
                StatusCode::CREATED,
                body,
                Some(location),
                Some(position.to_string()),
            )
        }
        Replay::Answer(answer) => {
            let status = StatusCode::from_u16(answer.status).unwrap_or(StatusCode::OK);
            (status, answer.body, answer.location, None)
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
    response
}
