//! Extractors: JSON bodies with precise errors, and the command context.

use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::{header, StatusCode};
use pm_application::bus::CommandContext;
use pm_application::idempotency::IdempotencyKey;
use serde::de::DeserializeOwned;
use serde_json::error::Category;

use crate::auth::Caller;
use crate::error::ApiError;
use crate::state::AppState;

/// A JSON body: `415` unless the content type is JSON, `413` when too large, `400
/// malformed_json` when it does not parse, `422 validation_failed` naming the field when
/// it does not fit the shape.
#[derive(Debug, Clone)]
pub struct JsonBody<T>(pub T);

impl<T: DeserializeOwned> FromRequest<AppState> for JsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &AppState) -> Result<Self, ApiError> {
        if !is_json(req.headers()) {
            return Err(not_json());
        }
        let RawBody(bytes) = RawBody::from_request(req, state).await?;
        parse_json(&bytes).map(JsonBody)
    }
}

/// Whether the request says its body is JSON.
fn is_json(headers: &axum::http::HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .map(|m| {
            let m = m.trim().to_ascii_lowercase();
            m == "application/json" || (m.starts_with("application/") && m.ends_with("+json"))
        })
        .unwrap_or(false)
}

fn not_json() -> ApiError {
    crate::metrics::refused(crate::metrics::refusal::NOT_JSON);
    ApiError::new(
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        "unsupported_media_type",
        "the body must be application/json",
    )
}

/// A body that may be empty, read whole: `415` when it is not empty and does not say it
/// is JSON (no web page may post one as a "simple" `text/plain` request), `413
/// payload_too_large` over the limit, `400 malformed_json` when it cannot be read.
#[derive(Debug, Clone)]
pub struct RawBody(pub Bytes);

impl FromRequest<AppState> for RawBody {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &AppState) -> Result<Self, ApiError> {
        let json = is_json(req.headers());
        let bytes = Bytes::from_request(req, state).await.map_err(|rejection| {
            if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
                ApiError::new(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    "payload_too_large",
                    format!("the body is larger than {} bytes", state.max_body_bytes),
                )
            } else {
                ApiError::new(
                    StatusCode::BAD_REQUEST,
                    "malformed_json",
                    rejection.body_text(),
                )
            }
        })?;
        if !json && !bytes.is_empty() {
            return Err(not_json());
        }
        Ok(RawBody(bytes))
    }
}

/// Parses a JSON body with the error mapping of [`JsonBody`].
///
/// # Errors
/// `400 malformed_json` or `422 validation_failed`.
pub fn parse_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let value: T = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        // A shape error may hide a syntax error later in the body (`{} {}`): malformed
        // JSON wins, so check the whole body's syntax before blaming a field.
        if let Err(syntax) = serde_json::from_slice::<serde::de::IgnoredAny>(bytes) {
            return json_error(".", syntax);
        }
        let path = e.path().to_string();
        json_error(&path, e.into_inner())
    })?;
    de.end().map_err(|e| json_error(".", e))?;
    Ok(value)
}

fn json_error(path: &str, e: serde_json::Error) -> ApiError {
    match e.classify() {
        Category::Data => {
            let field = if path == "." { "body" } else { path };
            ApiError::validation(field, strip_position(&e.to_string()))
        }
        Category::Syntax | Category::Eof | Category::Io => {
            ApiError::new(StatusCode::BAD_REQUEST, "malformed_json", e.to_string())
        }
    }
}

fn strip_position(message: &str) -> String {
    match message.find(" at line ") {
        Some(i) => message[..i].to_string(),
        None => message.to_string(),
    }
}

/// A path id: a UUID, or `404 <code>` naming the (clipped) id — an id that is not a
/// UUID names nothing.
///
/// # Errors
/// `404` with `code`.
pub fn path_uuid(raw: &str, code: &'static str, what: &str) -> Result<uuid::Uuid, ApiError> {
    raw.parse().map_err(|_| {
        ApiError::new(
            StatusCode::NOT_FOUND,
            code,
            format!("{what} {} does not exist", crate::error::clip(raw)),
        )
    })
}

/// `PM-Turn-Id` and `PM-Turn-Epoch` (WORKERS.md "Fencing"): both or neither.
///
/// # Errors
/// `400 invalid_turn_fence` for one header without the other, a turn id that is not a
/// UUID or an epoch that is not a positive integer.
pub fn turn_fence(
    headers: &axum::http::HeaderMap,
) -> Result<Option<pm_application::bus::TurnRef>, ApiError> {
    let get = |name: &str| headers.get(name).map(|v| v.to_str().unwrap_or("\u{fffd}"));
    let invalid =
        |detail: String| ApiError::new(StatusCode::BAD_REQUEST, INVALID_TURN_FENCE, detail);
    match (get(TURN_ID_HEADER), get(TURN_EPOCH_HEADER)) {
        (None, None) => Ok(None),
        (Some(turn_id), Some(epoch)) => {
            let turn_id = turn_id
                .trim()
                .parse()
                .map_err(|_| invalid(format!("{TURN_ID_HEADER} must be a turn's UUID")))?;
            let turn_epoch = epoch
                .trim()
                .parse::<i64>()
                .ok()
                .filter(|e| *e > 0)
                .ok_or_else(|| {
                    invalid(format!("{TURN_EPOCH_HEADER} must be a positive integer"))
                })?;
            Ok(Some(pm_application::bus::TurnRef {
                turn_id,
                turn_epoch,
            }))
        }
        _ => Err(invalid(format!(
            "{TURN_ID_HEADER} and {TURN_EPOCH_HEADER} go together: send both or neither"
        ))),
    }
}

/// The header naming the turn a fenced command acts for.
pub const TURN_ID_HEADER: &str = "pm-turn-id";
/// The header naming the epoch of the claim a fenced command acts for.
pub const TURN_EPOCH_HEADER: &str = "pm-turn-epoch";
/// The code of a malformed fence.
pub const INVALID_TURN_FENCE: &str = "invalid_turn_fence";

/// The correlation id of a request (from `X-Correlation-Id`, else `X-Request-Id`, else
/// a new UUIDv7), put in the request's extensions by the correlation middleware.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CorrelationId(pub String);

/// The context of a command: caller, correlation and causation.
#[derive(Debug, Clone)]
pub struct Ctx(pub CommandContext);

impl FromRequestParts<AppState> for Ctx {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let caller = Caller::from_request_parts(parts, state).await?;
        let correlation_id = parts
            .extensions
            .get::<CorrelationId>()
            .map(|c| c.0.clone())
            .unwrap_or_else(|| uuid::Uuid::now_v7().to_string());
        let causation_id = parts
            .headers
            .get("x-causation-id")
            .and_then(|v| v.to_str().ok())
            .filter(|v| !v.is_empty() && v.len() <= 128)
            .map(str::to_string);
        // Validated, hashed and put there by the `Idempotency-Key` middleware.
        let idempotency_key = parts.extensions.get::<IdempotencyKey>().cloned();
        let turn = turn_fence(&parts.headers)?;
        let trace = parts
            .extensions
            .get::<crate::trace::RequestTrace>()
            .map(|t| t.0.clone());
        Ok(Self(CommandContext {
            correlation_id,
            causation_id,
            role: caller.principal().role_label(),
            principal: caller.principal().name().to_string(),
            scope: caller.principal().organizations().clone(),
            voice: caller.principal().voice(),
            idempotency_key,
            turn,
            ends: None,
            trace,
        }))
    }
}

impl Ctx {
    /// The metadata of runes the request's saga input writes: the request's correlation,
    /// caller, trace and fence; its causation, or `<kind>:<what>` (`control:pause`,
    /// `worker:claim`) when it named none.
    pub fn saga_metadata(
        &self,
        kind: &str,
        what: &str,
        recorded_at: chrono::DateTime<chrono::Utc>,
    ) -> pm_application::bus::EventMetadata {
        let ctx = &self.0;
        pm_application::bus::EventMetadata {
            correlation_id: ctx.correlation_id.clone(),
            causation_id: Some(
                ctx.causation_id
                    .clone()
                    .unwrap_or_else(|| format!("{kind}:{what}")),
            ),
            role: ctx.role.clone(),
            principal: ctx.principal.clone(),
            recorded_at,
            turn: ctx.turn,
            trace: ctx.trace.clone(),
        }
    }
}

/// A query string; a parameter given empty (`?cursor=`) counts as absent, and one that
/// does not parse answers `400 invalid_parameter` as problem+json.
#[derive(Debug, Clone)]
pub struct ApiQuery<T>(pub T);

impl<T: DeserializeOwned + Send> FromRequestParts<AppState> for ApiQuery<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &AppState) -> Result<Self, ApiError> {
        let query = parts.uri.query().unwrap_or("");
        let pairs: Vec<(String, String)> =
            serde_urlencoded::from_str(query).map_err(|e| ApiError::parameter("query", e))?;
        let given: Vec<(String, String)> =
            pairs.into_iter().filter(|(_, v)| !v.is_empty()).collect();
        if let Some((name, _)) = given.iter().find(|(_, v)| v.contains('\0')) {
            return Err(ApiError::parameter(
                &crate::error::clip(name),
                "must not contain the NUL character",
            ));
        }
        let normalized =
            serde_urlencoded::to_string(&given).map_err(|e| ApiError::parameter("query", e))?;
        // Through serde_path_to_error, so the error names the parameter (`limit: …`).
        let de = serde_urlencoded::Deserializer::new(form_urlencoded::parse(normalized.as_bytes()));
        serde_path_to_error::deserialize(de)
            .map(ApiQuery)
            .map_err(|e| {
                let name = e.path().to_string();
                let name = if name == "." {
                    "query".to_string()
                } else {
                    crate::error::clip(&name)
                };
                ApiError::parameter(&name, e.into_inner())
            })
    }
}
