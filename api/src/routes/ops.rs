//! Operations endpoints: liveness, readiness, Prometheus metrics, the OpenAPI document.

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;

use crate::state::AppState;

/// `GET /healthz`: the process is alive.
#[utoipa::path(get, path = "/healthz", tag = "operations", responses((status = 200, description = "Alive")))]
pub async fn healthz() -> impl IntoResponse {
    Json(json!({"status": "ok"}))
}

/// `GET /readyz`: the store answers (`503` otherwise).
#[utoipa::path(get, path = "/readyz", tag = "operations",
    responses((status = 200, description = "Ready"), (status = 503, description = "Not ready")))]
pub async fn readyz(State(state): State<AppState>) -> Response {
    match state.db.ping().await {
        Ok(()) => Json(json!({"status": "ready", "store": state.db.kind()})).into_response(),
        Err(e) => {
            tracing::warn!(error = %e, "readiness check failed");
            (
                StatusCode::SERVICE_UNAVAILABLE,
                Json(json!({"status": "unavailable", "store": state.db.kind(), "reason": "store unreachable"})),
            )
                .into_response()
        }
    }
}

/// `GET /metrics`: Prometheus text.
#[utoipa::path(get, path = "/metrics", tag = "operations", responses((status = 200, description = "Prometheus text")))]
pub async fn metrics(State(state): State<AppState>) -> Response {
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        state.metrics.render(),
    )
        .into_response()
}

/// `GET /openapi.json`: the OpenAPI 3.1 document.
#[utoipa::path(get, path = "/openapi.json", tag = "operations", responses((status = 200, description = "This document")))]
pub async fn openapi() -> Response {
    Json(crate::openapi::document()).into_response()
}
