//! Errors as RFC 9457 problem details with a stable `code` — one table maps every
//! failure to its status and code (API.md). 5xx answers carry a generic detail; the cause
//! goes to the log.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use pm_application::scope::StartRefused;
use pm_application::AppError;
use pm_domain::DomainError;
use serde::Serialize;

/// The code of [`ApiError::key_in_use`].
pub const KEY_IN_USE: &str = "idempotency_key_in_use";

/// Marks every [`ApiError::key_in_use`] answer. On a command handler's answer it can only
/// come from the typed [`AppError::IdempotencyKeyTaken`] (the append found the key
/// already has a record and wrote nothing): the `Idempotency-Key` middleware reads it as
/// `RunOutcome::KeyTaken`.
#[derive(Debug, Clone, Copy)]
pub struct KeyTaken;

/// An error answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    /// The HTTP status.
    pub status: StatusCode,
    /// The stable machine code.
    pub code: &'static str,
    /// What went wrong, for a person.
    pub detail: String,
    /// A `401` for a credential that was presented but is not valid (RFC 6750 §3.1:
    /// `WWW-Authenticate: Bearer error="invalid_token"`), so a client knows to get a new one.
    pub invalid_token: bool,
    /// Seconds a client should wait before trying again (`Retry-After`), when it is not
    /// the `1` every `503` carries.
    pub retry_after_secs: Option<u64>,
}

/// The problem+json body.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct Problem {
    /// A URI naming the problem type.
    #[serde(rename = "type")]
    pub kind: String,
    /// A short summary of the problem type.
    pub title: String,
    /// The HTTP status.
    pub status: u16,
    /// What went wrong in this request.
    pub detail: String,
    /// The stable machine code (snake_case).
    pub code: String,
}

impl ApiError {
    /// An error with the given status, code and detail.
    pub fn new(status: StatusCode, code: &'static str, detail: impl Into<String>) -> Self {
        Self {
            status,
            code,
            detail: detail.into(),
            invalid_token: false,
            retry_after_secs: None,
        }
    }

    /// `429 too_many_requests`, to be tried again in `retry_after` (at least a second).
    pub fn too_many_requests(detail: impl Into<String>, retry_after: std::time::Duration) -> Self {
        Self {
            retry_after_secs: Some(retry_after.as_secs_f64().ceil().max(1.0) as u64),
            ..Self::new(StatusCode::TOO_MANY_REQUESTS, "too_many_requests", detail)
        }
    }

    /// `401 unauthorized` for a token that is expired, badly signed or otherwise invalid.
    pub fn invalid_token(detail: impl Into<String>) -> Self {
        Self {
            invalid_token: true,
            ..Self::new(StatusCode::UNAUTHORIZED, "unauthorized", detail)
        }
    }

    /// `409 idempotency_key_in_use` (with `Retry-After: 1`): another request with this
    /// `Idempotency-Key` is still running.
    pub fn key_in_use() -> Self {
        Self::new(
            StatusCode::CONFLICT,
            KEY_IN_USE,
            "a request with this Idempotency-Key is still running; retry later",
        )
    }

    /// `422 validation_failed` naming the field.
    pub fn validation(field: &str, reason: impl std::fmt::Display) -> Self {
        Self::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "validation_failed",
            format!("{field}: {reason}"),
        )
    }

    /// `400 invalid_parameter` naming the query parameter or header.
    pub fn parameter(name: &str, reason: impl std::fmt::Display) -> Self {
        Self::new(
            StatusCode::BAD_REQUEST,
            "invalid_parameter",
            format!("{name}: {reason}"),
        )
    }

    /// `404 not_found`.
    pub fn not_found(what: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, "not_found", what)
    }

    /// `500 internal_error`; logs the cause.
    pub fn internal(cause: impl std::fmt::Display) -> Self {
        tracing::error!(%cause, "internal error");
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal_error",
            "the service failed to handle the request; the cause is in its log",
        )
    }

    /// `503 service_unavailable`; logs the cause.
    pub fn unavailable(cause: impl std::fmt::Display) -> Self {
        tracing::warn!(%cause, "store unavailable");
        Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "service_unavailable",
            "the store is unreachable; retry later",
        )
    }

    /// The problem body.
    pub fn problem(&self) -> Problem {
        Problem {
            kind: format!(
                "https://project-manager.dev/problems/{}",
                self.code.replace('_', "-")
            ),
            title: self
                .status
                .canonical_reason()
                .unwrap_or("Error")
                .to_string(),
            status: self.status.as_u16(),
            detail: self.detail.clone(),
            code: self.code.to_string(),
        }
    }
}

/// `400 invalid_position`: a position token that is not in the log, named by the
/// parameter or header that carried it.
pub fn invalid_position(name: &str, reason: impl std::fmt::Display) -> ApiError {
    ApiError::new(
        StatusCode::BAD_REQUEST,
        "invalid_position",
        format!("{name}: {reason}"),
    )
}

/// `raw` for an error detail: at most 64 characters of it, so a huge input is never
/// echoed back whole.
pub fn clip(raw: &str) -> String {
    const MAX: usize = 64;
    match raw.char_indices().nth(MAX) {
        Some((end, _)) => format!("{}…", &raw[..end]),
        None => raw.to_string(),
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = serde_json::to_vec(&self.problem()).unwrap_or_default();
        let mut response = (self.status, body).into_response();
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/problem+json"),
        );
        if self.status == StatusCode::SERVICE_UNAVAILABLE || self.code == KEY_IN_USE {
            // Outages, a lagging projection and a running request are short: try again in
            // a second.
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        }
        if self.code == KEY_IN_USE {
            response.extensions_mut().insert(KeyTaken);
        }
        if let Some(secs) = self.retry_after_secs {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        if self.status == StatusCode::PAYLOAD_TOO_LARGE {
            // The rest of the body is never read, so the connection ends with this answer:
            // say so, or a client sends its next request on a connection being closed.
            response
                .headers_mut()
                .insert(header::CONNECTION, HeaderValue::from_static("close"));
        }
        if self.status == StatusCode::UNAUTHORIZED {
            let challenge = if self.invalid_token {
                "Bearer error=\"invalid_token\""
            } else {
                "Bearer"
            };
            response.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static(challenge),
            );
        }
        response
    }
}

impl From<DomainError> for ApiError {
    fn from(e: DomainError) -> Self {
        use StatusCode as S;
        let detail = e.to_string();
        match e {
            DomainError::ConversationNotFound(_) => {
                Self::new(S::NOT_FOUND, "conversation_not_found", detail)
            }
            DomainError::TaskNotFound(_) => Self::new(S::NOT_FOUND, "task_not_found", detail),
            DomainError::MessageTaskNotFound(_) => {
                Self::new(S::UNPROCESSABLE_ENTITY, "task_not_found", detail)
            }
            DomainError::ActorNotFound(_) => {
                Self::new(S::UNPROCESSABLE_ENTITY, "actor_not_found", detail)
            }
            DomainError::CheckpointNotFound(_) => {
                Self::new(S::UNPROCESSABLE_ENTITY, "checkpoint_not_found", detail)
            }
            DomainError::CheckpointConversationMismatch(_) => Self::new(
                S::UNPROCESSABLE_ENTITY,
                "checkpoint_conversation_mismatch",
                detail,
            ),
            DomainError::CheckpointNotBeginWork(_) => {
                Self::new(S::UNPROCESSABLE_ENTITY, "checkpoint_not_begin_work", detail)
            }
            DomainError::ConversationExists(_) => {
                Self::new(S::CONFLICT, "conversation_exists", detail)
            }
            DomainError::AlreadyExists { .. } => Self::new(S::CONFLICT, "already_exists", detail),
            DomainError::ToolPolicyNotFound(_) => {
                Self::new(S::NOT_FOUND, "tool_policy_not_found", detail)
            }
            DomainError::Validation { field, reason } => Self::validation(field, reason),
            DomainError::Lookup(e) => Self::unavailable(e),
        }
    }
}

impl From<AppError> for ApiError {
    fn from(e: AppError) -> Self {
        match e {
            AppError::Domain(e) => e.into(),
            AppError::ConcurrencyConflict { .. } => {
                Self::new(StatusCode::CONFLICT, "concurrency_conflict", e.to_string())
            }
            AppError::InvalidPosition(detail) => {
                Self::new(StatusCode::BAD_REQUEST, "invalid_position", detail)
            }
            AppError::ProjectionLagging { .. } => Self::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "projection_lagging",
                e.to_string(),
            ),
            AppError::IdempotencyKeyTaken => Self::key_in_use(),
            AppError::TurnFenced(detail) => Self::new(StatusCode::CONFLICT, "turn_fenced", detail),
            AppError::TurnNotFound => Self::new(
                StatusCode::NOT_FOUND,
                "turn_not_found",
                "the turn does not exist",
            ),
            AppError::StartRefused(refused) => {
                let detail = refused.to_string();
                match refused {
                    StartRefused::OrganizationRequired => Self::new(
                        StatusCode::UNPROCESSABLE_ENTITY,
                        "organization_required",
                        detail,
                    ),
                    StartRefused::OrganizationForbidden(_) => {
                        Self::new(StatusCode::FORBIDDEN, "organization_forbidden", detail)
                    }
                }
            }
            AppError::ActorForbidden(refused) => Self::new(
                StatusCode::FORBIDDEN,
                "actor_forbidden",
                refused.to_string(),
            ),
            AppError::Unavailable(cause) => Self::unavailable(cause),
            AppError::Internal(cause) => Self::internal(cause),
        }
    }
}
