//! Operations endpoints: liveness, readiness, Prometheus metrics, the OpenAPI document.

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;

use pm_infrastructure::read_model::READ_MODEL;

use crate::state::AppState;

/// `GET /healthz`: the process is alive.
#[utoipa::path(get, path = "/healthz", tag = "operations", responses((status = 200, description = "Alive")))]
pub async fn healthz() -> impl IntoResponse {
    Json(json!({"status": "ok"}))
}

/// `GET /readyz`: the store answers and the read-model processor runs (here or on
/// another replica holding its lease); `503` otherwise. Shows each processor's lag.
#[utoipa::path(get, path = "/readyz", tag = "operations",
    responses((status = 200, description = "Ready"), (status = 503, description = "Not ready")))]
pub async fn readyz(State(state): State<AppState>) -> Response {
    if let Err(e) = state.db.ping().await {
        tracing::warn!(error = %e, "readiness check failed");
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({"status": "unavailable", "store": state.db.kind(), "reason": "store unreachable"})),
        )
            .into_response();
    }
    let report = match crate::routes::admin::processor_report(&state).await {
        Ok(report) => report,
        Err(e) => return e.into_response(),
    };
    let local_leader = state.processor_status.borrow().leader;
    let leased = report["processors"].as_array().is_some_and(|ps| {
        ps.iter()
            .any(|p| p["name"] == READ_MODEL && !p["lease_owner"].is_null())
    });
    let ready = local_leader || leased;
    let status = if ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    let processors: Vec<_> = report["processors"]
        .as_array()
        .map(|ps| {
            ps.iter()
                .map(|p| json!({"name": p["name"], "position": p["position"], "lag_events": p["lag_events"], "lease_owner": p["lease_owner"]}))
                .collect()
        })
        .unwrap_or_default();
    (
        status,
        Json(json!({
            "status": if ready { "ready" } else { "starting" },
            "store": state.db.kind(),
            "head": report["head"],
            "processors": processors,
        })),
    )
        .into_response()
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
